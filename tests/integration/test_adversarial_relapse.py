"""Relapse and forks of a fork (issue 32 item 1, docs/forks.md "Relapse"), on the session's tiny run.

A fork made with --save-optimizer keeps a state at every checkpoint, and a fork of it starts from
the one kept at its step: `continue` from there reproduces the fork bit for bit (which also holds
the lr arm to its lr, scaled once). `--at relapse` finds the fork's relapse in its metrics log
(planted here: a tiny run never solves) and forks the state nearest at or after it. Bad input
(a relapse never met, a fork of a fork without a kept state, --relapse without --at relapse, a
malformed criterion) is refused in one line, exit 2, nothing written and the parent untouched.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from interp.cli import main
from tests.helpers import copy_run, run_main, snapshot

LR = 0.006  # twice the tiny run's


@pytest.fixture(scope="module")
def forks(tmp_path_factory, tiny_run) -> dict[str, Path]:
    """`kept`: an lr fork of the tiny run at step 20 for 20 steps keeping its states (checkpoints 20, 30,
    40); `bare`: the same without --save-optimizer; `relapsed` / `solved` / `resolved`: copies of `kept` whose
    metrics log is planted to show a solved run that relapses from step 30 / that never relapses / that relapses
    at 35 and re-solves at 40, the first state it keeps after 35."""
    root = tmp_path_factory.mktemp("relapse")
    run = tiny_run()
    common = ["fork", str(run), "--at", "20", "--arm", f"lr:value={LR}", "--steps", "20", "--quiet"]
    assert main([*common, "--out", str(root / "kept"), "--save-optimizer"]) == 0
    assert main([*common, "--out", str(root / "bare")]) == 0
    out = {"run": run, "kept": root / "kept", "bare": root / "bare"}
    for name, plant in (("relapsed", {20: 0.01, 25: 0.5, 30: 0.95, 35: 0.96, 40: 0.97}),
                        ("solved", {20: 0.01, 25: 0.02, 30: 0.01, 35: 0.02, 40: 0.01}),
                        ("resolved", {20: 0.01, 25: 0.02, 30: 0.01, 35: 0.95, 40: 0.01})):
        out[name] = copy_run(root / "kept", root / name)
        _plant(out[name], plant)
    return out


def _plant(run: Path, lc_over_logk: dict[int, float]) -> None:
    lines = []
    for line in (run / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        row["loss_cand"] = lc_over_logk[row["step"]] * math.log(4)
        lines.append(json.dumps(row))
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")


def test_the_lr_arm_trains_at_its_lr(forks):
    """The lr arm's value is the lr of every step (it was once scaled twice: value^2 / the parent's)."""
    rows = [json.loads(line) for line in (forks["kept"] / "metrics.jsonl").read_text().splitlines()]
    assert {r["lr"] for r in rows if r["step"] > 20} == {LR}


def test_a_fork_of_a_fork_starts_from_its_kept_state(forks, tmp_path):
    """`continue` from the state the lr fork kept at step 30 (not its last: not the resume state) reproduces
    the lr fork's step 40 bit for bit."""
    from interp.runs import Run

    out = tmp_path / "child"
    assert main(["fork", str(forks["kept"]), "--at", "30", "--arm", "continue", "--steps", "10", "--out", str(out),
                 "--quiet"]) == 0
    child, fork = Run.open(out), Run.open(forks["kept"])
    assert child.fork["state"] == "kept" and child.fork["parent_step"] == 30
    assert child.spec.train.lr == LR
    mine, theirs = child.state_dict(40), fork.state_dict(40)
    assert all(bool((mine[n] == theirs[n]).all()) for n in theirs)


def test_at_relapse_forks_the_kept_state_at_the_relapse(forks, tmp_path, capsys):
    parent = forks["relapsed"]
    out = tmp_path / "family"
    code, text, err = run_main(["fork", str(parent), "--at", "relapse", "--relapse", "loss_cand>0.9logK,hold=5",
                                "--arm", "minibatch,full_batch", "--steps", "5", "--out", str(out), "--quiet"], capsys)
    assert code == 0, err[-2000:]
    design = json.loads((out / "forks.json").read_text())
    assert design["steps"] == [30] and design["parent"] == str(parent.resolve())
    assert design["relapse"] == "loss_cand>0.9logK,hold=5"  # reconcile judges the fork state by it
    from interp.forks.family import ForkFamily
    from interp.mechanisms.reconcile import _relapsed

    assert _relapsed(ForkFamily.open(out))  # under the default (held 200 steps) the planted run never relapses
    del design["relapse"]  # a family made before the criterion was recorded: the same command re-opens it
    (out / "forks.json").write_text(json.dumps(design))
    code, _, err = run_main(["fork", str(parent), "--at", "relapse", "--relapse", "loss_cand>0.9logK,hold=5",
                             "--arm", "minibatch,full_batch", "--steps", "5", "--out", str(out), "--quiet"], capsys)
    assert code == 0 and "relapse" not in json.loads((out / "forks.json").read_text()), err[-2000:]
    assert not _relapsed(ForkFamily.open(out))
    block = json.loads((out / "at30-minibatch-s0" / "run.json").read_text())["fork"]
    assert block["state"] == "kept" and block["parent_step"] == 30
    code, text, _ = run_main(["show", str(parent), "--relapse", "loss_cand>0.9logK,hold=5"], capsys)
    assert code == 0 and "relapse" in text and "at step 30" in text


# ---------------------------------------------------------------------------- bad input
BAD = [
    # (id, parent, argv after the parent, fragment)
    ("relapse-never-solved", "kept", ["--at", "relapse"], "never solved"),  # the real tiny fork never solves
    ("relapse-never-met", "solved", ["--at", "relapse", "--relapse", "loss_cand>0.9logK,hold=5"], "did not relapse"),
    ("relapse-hold-too-long", "relapsed", ["--at", "relapse", "--relapse", "loss_cand>0.9logK,hold=50"],
     "did not relapse"),
    ("relapse-in-family", "solved", ["--at", "relapse", "--arm", "minibatch,full_batch"], "did not relapse"),
    ("relapse-malformed", "relapsed", ["--at", "relapse", "--relapse", "loss_cand>>0.9"], "--relapse"),
    ("relapse-unknown-metric", "relapsed", ["--at", "relapse", "--relapse", "lossy>0.9"], "unknown metric"),
    ("relapse-then-resolved", "resolved", ["--at", "relapse", "--relapse", "loss_cand>0.9logK"],
     "relapsed at step 35 (loss_cand > 0.9 log K, no hold) but was no longer relapsed from step 40"),
    ("relapse-then-resolved-family", "resolved", ["--at", "relapse", "--relapse", "loss_cand>0.9logK", "--arm",
                                                  "minibatch,full_batch"], "the nearest state at or after"),
    ("relapse-without-at-relapse", "relapsed", ["--at", "30", "--relapse", "loss_cand>0.9logK"], "--at relapse"),
    ("stop-after-snap-bad", "kept", ["--at", "30", "--stop-after-snap", "soon"], "or none"),
    ("fork-of-fork-not-kept", "bare", ["--at", "30"], "--save-optimizer"),
    ("fork-of-fork-not-kept-family", "bare", ["--at", "30", "--arm", "minibatch,full_batch"], "--save-optimizer"),
    # issue 43, 5: read the wrong way round, a run that never relapsed "relapsed" at once and its solved state was forked
    ("relapse-wrong-way", "solved", ["--at", "relapse", "--relapse", "loss_cand<0.5logK"],
     "loss_cand falls as a run learns, so a relapse is loss_cand>THRESHOLD"),
    ("relapse-wrong-way-family", "solved", ["--at", "relapse", "--relapse", "loss_cand<0.5logK", "--arm",
                                            "minibatch,full_batch"], "the wrong way round"),
    ("relapse-accuracy-wrong-way", "solved", ["--at", "relapse", "--relapse", "acc_cand>0.5"], "acc_cand rises"),
    ("relapse-accuracy-in-log-k", "solved", ["--at", "relapse", "--relapse", "acc_cand<0.5logK"],
     "log K units are for the losses"),
]


@pytest.mark.parametrize("case", BAD, ids=lambda c: c[0])
def test_refused(case, forks, tmp_path, capsys):
    name, parent, argv, fragment = case
    parent = forks[parent]
    scratch = tmp_path / "t"
    scratch.mkdir()
    saved = snapshot(parent, cache=False)
    code, out, err = run_main(["fork", str(parent), *argv, "--steps", "5", "--out", str(scratch / "f"), "--quiet"],
                              capsys)
    text = out + err
    assert code == 2, text[-2000:]
    assert "Traceback" not in text and fragment.lower() in text.lower(), text[-2000:]
    assert len(text.strip().splitlines()) == 1, text[-2000:]
    assert snapshot(parent, cache=False) == saved, "a refused fork changed its parent"
    assert not list(scratch.iterdir()), "a refused fork left a folder behind"
