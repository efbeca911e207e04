"""Issue 43's probe (round three) as tables, beside test_adversarial.py and in its style: nothing touched, nothing
silently wrong. Each row is one case the probe found; it failed before the fix.

- Data touched: the thinning helpers under a live writer (1), a resume of a finished run (2), and a held lock that
  every command reports alike, exit 1 (22);
- silent wrong results: a step named relative to tau far from any checkpoint (4, 14), a relapse or escape criterion
  read the wrong way round (5), the edges findings' "nearest tau" and onsets (6), `interp show` of a damaged log (7).

Fixtures: `run` is the session's 30-step tiny run (it never reaches tau); `planted` a copy whose metrics log is
planted to reach tau_half at step 20 and snap at 30 (the issue's `mini`, 600 steps with tau_half 380, shows the
same at ten times the cost); `thinned` a copy of `planted` thinned to its last checkpoint (`drop_checkpoints(run,
[])`, as the issue thinned `mini`). Each case works on its own copy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from interp.runs import Run
from tests.helpers import copy_run, run_main, snapshot

ROOT = Path(__file__).resolve().parents[2]
PLANTED = {0: 1.0, 1: 1.0, 2: 1.0, 4: 1.0, 5: 1.0, 8: 1.0, 10: 1.0, 15: 1.0, 20: 0.45, 25: 0.2, 30: 0.04}  # Lc / log K


def plant(run: Path, lc_over_logk: dict[int, float] = PLANTED) -> Path:
    """The run's metrics log with the candidate loss planted (by step, in units of log K): the tiny run, which
    never leaves its plateau, then reaches tau_half at step 20 and snaps at 30, as `mini` does at 380 and 580."""
    import math

    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    k = Run.open(run).spec.task.k
    text = "".join(json.dumps({**r, "loss_cand": lc_over_logk[r["step"]] * math.log(k)}) + "\n" for r in rows)
    (run / "metrics.jsonl").write_text(text)
    return run


@pytest.fixture(scope="module")
def sources(tmp_path_factory, tiny_run) -> dict[str, Path]:
    from interp.run_states import drop_checkpoints

    root = tmp_path_factory.mktemp("adversarial-round3")
    planted = plant(copy_run(tiny_run(), root / "planted", cache=False))
    thinned = copy_run(planted, root / "thinned")
    drop_checkpoints(Run.open(thinned), [])
    assert Run.open(thinned).steps == [30]
    return {"run": tiny_run(), "planted": planted, "thinned": thinned}


def _holder(folder: Path) -> subprocess.Popen:
    """Another process that takes the run folder's writer lock, says "held" and keeps it until killed."""
    code = ("import sys, time; from interp.runs import RunLock; RunLock(sys.argv[1]).acquire(); print('held', flush=True); "
            "time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONWARNINGS": "ignore"}, cwd=ROOT)
    assert proc.stdout.readline().strip() == "held"
    return proc


def _fill(argv: list[str], folder: Path, scratch: Path) -> list[str]:
    return [a.replace("{F}", str(folder)).replace("{T}", str(scratch)) for a in argv]


# ---------------------------------------------------------------------------- 1, 22: a folder another process writes
def _drop(how: str):
    def call(folder: Path) -> None:
        from interp.run_states import drop_checkpoints, drop_states

        run = Run.open(folder)
        {"checkpoints": lambda: drop_checkpoints(run, []), "checkpoints-some": lambda: drop_checkpoints(run, [0, 20]),
         "states": lambda: drop_states(run, [])}[how]()
    return call


HELD = [
    # (id, fixture, what is tried: a command line or a library call; {F} the held folder, {T} a scratch folder)
    # 22: exited 2 (the bad-input status) while `interp fork` exits 1 for the same held lock
    ("train-resume", "run", ["train", "--resume", "--out", "{F}", "--steps", "40", "--quiet"]),
    ("train-resume-finished", "run", ["train", "--resume", "--out", "{F}", "--quiet"]),
    # 1: deleted checkpoints and states under a live `interp train` (it then failed: "no checkpoint at step 200")
    ("drop-checkpoints", "run", _drop("checkpoints")),
    ("drop-checkpoints-some", "run", _drop("checkpoints-some")),
    ("drop-states", "run", _drop("states")),
]


@pytest.mark.parametrize("case", HELD, ids=lambda c: c[0])
def test_a_held_folder_is_refused_naming_its_holder(case, sources, tmp_path, capsys):
    from interp.files import LockHeld

    name, fixture, what = case
    folder = copy_run(sources[fixture], tmp_path / "f")
    saved = snapshot(folder, cache=False)
    holder = _holder(folder)
    try:
        if callable(what):
            with pytest.raises(LockHeld, match=rf"\(pid {holder.pid} on "):
                what(folder)
        else:
            code, out, err = run_main(_fill(what, folder, tmp_path), capsys)
            lines = (out + err).strip().splitlines()
            assert code == 1 and len(lines) == 1 and "Traceback" not in err, out + err
            assert f"(pid {holder.pid} on " in lines[0] and "another process" in lines[0], lines[0]
    finally:
        holder.kill()
        holder.wait()
    assert snapshot(folder, cache=False) == saved, "a folder another process holds was written"


def test_ls_does_not_list_a_half_made_fork(sources, tmp_path, capsys):
    """22: a `.NAME.making.tmp` left by a kill during a fork remake was listed as a run."""
    root = tmp_path / "root"
    copy_run(sources["run"], root / "kept")
    copy_run(sources["run"], root / ".at20-minibatch-s0.making.tmp")
    for argv in (["ls", str(root)], ["ls", str(root), "--json"]):
        code, out, err = run_main(argv, capsys)
        assert code == 0 and ".making.tmp" not in out + err and "kept" in out, out + err


# ---------------------------------------------------------------------------- 2: commands that must write nothing
UNTOUCHED = [
    # (id, fixture, argv, exit status, fragment); status.json was rewritten (its `updated` and `wall_seconds`)
    ("resume-finished", "run", ["train", "--resume", "--out", "{F}", "--quiet"], 0, "nothing to train"),
    ("resume-finished-same-steps", "run", ["train", "--resume", "--out", "{F}", "--steps", "30", "--quiet"], 0,
     "already finished at step 30"),
]


@pytest.mark.parametrize("case", UNTOUCHED, ids=lambda c: c[0])
def test_nothing_written(case, sources, tmp_path, capsys):
    name, fixture, argv, status, fragment = case
    folder = copy_run(sources[fixture], tmp_path / "f")
    saved = snapshot(folder)
    code, out, err = run_main(_fill(argv, folder, tmp_path), capsys)
    assert code == status and "Traceback" not in err and fragment in out + err, (out + err)[-2000:]
    assert snapshot(folder) == saved, "the command wrote to the folder"


# ---------------------------------------------------------------------------- 4, 14: steps named relative to tau
def _json(out: str) -> dict:
    return json.loads(out)


def _no_half_tau_share(out: str) -> None:
    found = _json(out)
    assert "groups_share_above_80_at_half_tau" not in found["findings"], found["findings"]
    assert any("0.5 τ" in n and "no checkpoint within 0.15 τ" in n for n in found["notes"]), found["notes"]


def _labels(table: str, want: dict[int, str]):
    def check(out: str) -> None:
        rows = _json(out)["tables"][table]
        assert {r["step"]: r["label"] for r in rows} == want, {r["step"]: r["label"] for r in rows}
    return check


RELATIVE = [
    # (id, fixture, argv, exit status, fragments said, a check of stdout or None); planted: tau_half 20, saved 0, 1, 2,
    # 4, 8, 10, 20, 30; thinned: only 30. It read "collective snap 24 of 24 groups at τ/2 (step 600)" on the thinned
    # mini (tau/2 = 190; the unthinned run: 0 of 24 at step 200), and ran ablation's pre and mid both at step 600
    ("groups-half-tau-far", "thinned", ["analyze", "{F}", "--only", "groups", "--json"], 0, [], _no_half_tau_share),
    ("groups-half-tau-far-text", "thinned", ["analyze", "{F}", "--only", "groups"], 0,
     ["0.25 τ, 0.5 τ, 0.75 τ, 0.97 τ, 1 τ (τ = 20) have no checkpoint within 0.15 τ"], None),
    ("ablation-pre-mid-far", "thinned", ["analyze", "{F}", "--only", "ablation", "--steps", "pre,mid,last", "--json"], 0,
     ["pre (τ/4) (= step 5) has no checkpoint within 0.15 τ", "mid (τ) (= step 20) has no checkpoint within 0.15 τ"],
     _labels("ablation", {30: "last"})),
    ("ablation-pre-mid-near", "planted", ["analyze", "{F}", "--only", "ablation", "--steps", "pre,mid", "--json"], 0, [],
     _labels("ablation", {4: "pre", 20: "mid"})),
    ("ablation-all-far", "thinned", ["analyze", "{F}", "--only", "ablation", "--steps", "pre,mid", "--quiet"], 2,
     ["no requested step can be read", "pre (τ/4) (= step 5)", "mid (τ) (= step 20)"], None),
    # its default steps: pre and mid far (named), post (2 tau) beyond the run, which snapped by its last step: read
    # there, labelled last (issue 54: 3; a user's own --steps post is still refused, below)
    ("ablation-defaults-all-far", "thinned", ["analyze", "{F}", "--only", "ablation", "--json"], 0,
     ["pre (τ/4) (= step 5) has no checkpoint within 0.15 τ", "mid (τ) (= step 20) has no checkpoint within 0.15 τ"],
     _labels("ablation", {30: "last"})),
    ("ablation-and-groups", "thinned", ["analyze", "{F}", "--only", "ablation,groups", "--json"], 0,
     ["mid (τ) (= step 20) has no checkpoint within 0.15 τ"], _no_half_tau_share),
    ("fork-at-half-tau-far", "thinned", ["fork", "{F}", "--at", "tau/2", "--steps", "5", "--out", "{T}/f", "--quiet"], 2,
     ["--at tau/2 (= step 10) has no checkpoint within 0.15 τ", "step 30, is 1.00 τ away"], None),
    # 14: "every requested step lies beyond the run: " and nothing after it
    ("fork-at-post-beyond", "planted", ["fork", "{F}", "--at", "post", "--steps", "5", "--out", "{T}/f", "--quiet"], 2,
     ["post (2τ = 40) lies beyond the run (last step 30)"], None),
]


@pytest.mark.parametrize("case", RELATIVE, ids=lambda c: c[0])
def test_a_relative_step_far_from_its_target_is_left_out_and_named(case, sources, tmp_path, capsys):
    name, fixture, argv, status, fragments, check = case
    folder = copy_run(sources[fixture], tmp_path / "f")
    scratch = tmp_path / "t"
    scratch.mkdir()
    saved = snapshot(folder, cache=False)
    code, out, err = run_main([a.replace("{T}", str(scratch)) for a in _fill(argv, folder, tmp_path)], capsys)
    assert code == status and "Traceback" not in err, (out + err)[-3000:]
    for fragment in fragments:
        assert fragment in out + err, (fragment, (out + err)[-3000:])
    assert "collective snap" not in out or fixture != "thinned", out
    if status == 2:
        assert len((out + err).strip().splitlines()) == 1 and not list(scratch.iterdir()), out + err
    assert snapshot(folder, cache=False) == saved
    if check is not None:
        check(out)


# ---------------------------------------------------------------------------- 5: criteria read the wrong way round
CRITERIA = [
    # (id, argv, fragment); `interp show mini --relapse 'loss_cand<0.5logK'` found a "relapse" at step 590 of a run
    # that never relapsed (the rows of `interp fork` are in test_adversarial_relapse.py and test_adversarial_escape.py)
    ("show-relapse-wrong-way", ["show", "{F}", "--relapse", "loss_cand<0.5logK"], "the wrong way round"),
    ("show-relapse-wrong-way-json", ["show", "{F}", "--json", "--relapse", "loss_first<2"], "a relapse is loss_first>"),
    ("show-relapse-accuracy-in-log-k", ["show", "{F}", "--relapse", "acc_first<0.5logK"], "log K units are for"),
]


@pytest.mark.parametrize("case", CRITERIA, ids=lambda c: c[0])
def test_a_criterion_read_the_wrong_way_is_refused(case, sources, capsys):
    name, argv, fragment = case
    code, out, err = run_main(_fill(argv, sources["planted"], sources["planted"]), capsys)
    assert code == 2 and len((out + err).strip().splitlines()) == 1, out + err
    assert fragment in err and "Traceback" not in err, err


# ---------------------------------------------------------------------------- 6: the edges findings
EDGES = ["analyze", "{F}", "--only", "edges", "--edge-method", "eap", "--n-pairs", "8"]
EDGE_FINDINGS = [
    # (id, --steps, fragments said, fragments never said); planted: tau_half 20. It printed "circuit at step 600
    # (nearest tau)" for `--steps last` with tau 380, named step 0 for `--steps 0`, and listed edges without an onset
    # ("never") first by onset
    ("last", "last", ["no circuit at τ = 20: no analysed step within 0.15 τ of it (the nearest, step 30, is 0.50 τ away)",
                      "no edge has an onset (1 analysed step(s)"], ["nearest tau", "never"]),
    ("zero", "0", ["no circuit at τ = 20", "(the nearest, step 0, is 1.00 τ away)"], ["circuit at step 0", "never"]),
    ("near-tau", "10,20,30", ["circuit at step 20 (at τ)"], ["nearest tau", "never", "no circuit at"]),
    ("after-tau", "0,1,2,4,8,10,30", ["no circuit at τ = 20"], ["never"]),  # step 10 is 0.50 τ before it, 30 after
]


@pytest.mark.parametrize("case", EDGE_FINDINGS, ids=lambda c: c[0])
def test_the_edges_findings_state_how_far_from_tau(case, sources, tmp_path, capsys):
    name, steps, says, never = case
    folder = copy_run(sources["planted"], tmp_path / "f")
    code, out, err = run_main(_fill([*EDGES, "--steps", steps], folder, tmp_path), capsys)
    assert code == 0 and "Traceback" not in err, (out + err)[-3000:]
    (line,) = [ln for ln in out.splitlines() if ln.strip().startswith("edges")]
    for fragment in says:
        assert fragment in line, (fragment, line)
    for fragment in never:
        assert fragment not in line, (fragment, line)
    code, out, _ = run_main(_fill([*EDGES, "--steps", steps, "--json"], folder, tmp_path), capsys)
    assert all(onset is not None for _, onset in _json(out)["findings"]["edges_first"])


# ---------------------------------------------------------------------------- 17: forks log the author's columns
def test_forks_log_the_authors_columns_as_runs_do(sources, tmp_path):
    """A fork's rows at multiples of eval_every lacked train_loss_first and batch_shuffled_loss_first (a plain run's
    have them), so the author's lead was never available for a family. Now every arm logs them: the minibatch arms
    from their batches, full_batch from the training set its full gradient reads."""
    from interp.forks.arms import parse_arms
    from interp.forks.family import ForkFamily

    plain = [json.loads(line) for line in (sources["run"] / "metrics.jsonl").read_text().splitlines()]
    assert all("train_loss_first" in r and "batch_shuffled_loss_first" in r for r in plain if r["step"] in (20, 25))
    family = ForkFamily.create(Run.open(sources["run"]), [20], parse_arms("minibatch,full_batch,lr:value=0.01"), [0], 10,
                               tmp_path / "fam")
    family.train(workers=1, progress=False)
    for name in ("at20-minibatch-s0", "at20-full_batch-s0", "at20-lr_value0.01-s0"):
        rows = [json.loads(line) for line in (family.path / name / "metrics.jsonl").read_text().splitlines()]
        logged = [r for r in rows if r["step"] > 20 and r["step"] % 5 == 0]
        assert [r["step"] for r in logged] == [25, 30], (name, [r["step"] for r in rows])
        for r in logged:
            for column in ("train_loss_first", "batch_shuffled_loss_first"):
                assert isinstance(r.get(column), float) and r[column] > 0, (name, r["step"], column, r.get(column))
    table = ForkFamily.open(family.path).table()
    assert table["author_logged"].astype(bool).all(), table[["run", "author_logged"]]
