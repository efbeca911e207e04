"""Fork families (`interp.forks.family`, `interp fork` with lists): the local pool and Ray give the
same weights; kill -9 of `interp fork` mid-family and a re-run finish with the weights of an
uninterrupted family; a finished family trains nothing; `interp fork status --json` gives the
table and the comparison; a fork whose run.json fork block was edited is damaged, named and
skipped; a half-made fork folder (a kill during its creation) is made again.

Fixtures: `parent` is a 60-step run of a tiny model that stays on the plateau (trained with 2
torch threads, as every test runs: the states at the fork steps are replayed and must match);
`pool_family` is the family 20,40 x minibatch,full_batch,measured_noise x seeds 0,1 (10 forks,
horizon 20) trained on the local pool, 2 workers with 1 torch thread per fork.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from interp.cli import main
from interp.forks.arms import parse_arms
from interp.forks.family import ForkFamily
from interp.presets import preset
from interp.runs import FORMAT, MANIFEST_FILE, RESUME_FILE, RUN_FILE, Run, fork_sha256
from interp.train import train
from tests.helpers import snapshot

ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}
ARMS = "minibatch,full_batch,measured_noise"
HORIZON = 20
KILL_HORIZON = 100  # long enough for kill -9 to land mid-family


@pytest.fixture(scope="module")
def parent(tmp_path_factory) -> Run:
    torch.set_num_threads(2)  # as every test runs (tests/conftest.py): the replays must match it
    spec = preset("tiny").override(n_bases=20, k=4, n_layers=1, d_model=32, d_head=8, n_heads=2, d_mlp=64, steps=60,
                                   eval_every=10, checkpoint_every=10, eval_size=32, batch_size=16,
                                   stop_after_snap=None, dense_until=0)
    run = Run.create(tmp_path_factory.mktemp("fork_family") / "parent", spec)
    train(run, progress=False)
    run = Run.open(run.path)
    assert {20, 40} <= set(run.steps)
    return run


def _family(parent: Run, out: Path, arms: str = ARMS, seeds=(0, 1), at=("20", "40"),
            horizon: int = HORIZON) -> ForkFamily:
    return ForkFamily.create(parent, list(at), parse_arms(arms), list(seeds), horizon, out)


@pytest.fixture(scope="module")
def pool_family(parent, tmp_path_factory) -> Path:
    torch.set_num_threads(2)
    out = tmp_path_factory.mktemp("pool") / "fam"
    outcome = _family(parent, out).train(workers=2, threads=1, progress=False)
    assert len(outcome.results) == 10 and {r["state"] for r in outcome.results} == {"done"}, outcome.results
    return out


# ---------------------------------------------------------------------------- helpers
def _names(folder: Path) -> list[str]:
    return [name for name, _, _ in ForkFamily.open(folder).points()]


def _metric_rows(run: Run) -> list[str]:
    """Every metrics row but its wall-clock seconds, as canonical JSON (NaN compares equal)."""
    return [json.dumps({k: v for k, v in row.items() if k != "seconds"}, sort_keys=True) for row in run.metric_rows()]


def _same_forks(a: Path, b: Path) -> None:
    """Every fork of two families: the same checkpoints (every tensor of every step, torch.equal),
    the same loss_cand column and the same metrics rows."""
    names = _names(a)
    assert names == _names(b) and names
    for name in names:
        ra, rb = Run.open(a / name), Run.open(b / name)
        assert (ra.status or {}).get("state") == "done" and (rb.status or {}).get("state") == "done", name
        assert ra.steps == rb.steps and ra.steps[-1] == ra.spec.train.steps, (name, ra.steps, rb.steps)
        for step in ra.steps:
            ta, tb = ra.state_dict(step), rb.state_dict(step)
            assert ta.keys() == tb.keys() and ta, (name, step)
            for key in ta:
                assert torch.equal(ta[key], tb[key]), (name, step, key)
        ca, cb = ra.metric_series("loss_cand"), rb.metric_series("loss_cand")
        assert ca["step"] == cb["step"] and len(ca["step"]) >= 2, name
        assert torch.equal(torch.tensor(ca["loss_cand"], dtype=torch.float64),
                           torch.tensor(cb["loss_cand"], dtype=torch.float64)), name
        assert _metric_rows(ra) == _metric_rows(rb), name


def _threads(folder: Path) -> dict[str, set]:
    """The torch thread counts each fork's training sessions recorded in its run.json."""
    return {name: {s["threads"] for s in Run.open(folder / name).info.get("training", [])} for name in _names(folder)}


def _stamps(folder: Path) -> dict[Path, int]:
    """mtime of every checkpoint, metrics, manifest, status and resume file of every fork."""
    return {p: p.stat().st_mtime_ns for p in sorted(folder.rglob("*"))
            if p.is_file() and (p.suffix in (".safetensors", ".jsonl") or p.name in ("manifest.json", "status.json",
                                                                                      RUN_FILE))}


def _status(capsys, folder: Path, *flags: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["fork", "status", str(folder), *flags])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _group_alive(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            alive.append(int(entry.name))
    return alive


# ---------------------------------------------------------------------------- 1: pool and Ray
@pytest.mark.slow
def test_the_local_pool_and_ray_give_the_same_weights(parent, pool_family, tmp_path):
    pytest.importorskip("ray", reason="the ray extra: pip install -e '.[ray]'")
    out = tmp_path / "ray"
    outcome = _family(parent, out).train(backend="ray", cpus_per_run=1, progress=False)
    assert len(outcome.results) == 10 and {r["state"] for r in outcome.results} == {"done"}, outcome.results
    # both gave every fork one torch thread (Ray: int(cpus_per_run); the pool: threads=1), so the
    # weights can be compared bit for bit
    assert set(map(frozenset, _threads(pool_family).values())) == {frozenset({1})}
    assert set(map(frozenset, _threads(out).values())) == {frozenset({1})}
    _same_forks(pool_family, out)
    a = ForkFamily.open(pool_family).table().drop(columns=["wall_seconds"])
    b = ForkFamily.open(out).table().drop(columns=["wall_seconds"])
    import pandas as pd

    pd.testing.assert_frame_equal(a, b)


# ---------------------------------------------------------------------------- 2: kill -9 mid-family
@pytest.mark.slow
def test_kill_9_mid_family_then_again_finishes_with_the_uninterrupted_weights(parent, tmp_path):
    out = tmp_path / "killed"
    args = [sys.executable, "-m", "interp.cli", "fork", str(parent.path), "--at", "20,40", "--arm",
            "minibatch,measured_noise", "--seed", "0,1", "--steps", str(KILL_HORIZON), "--out", str(out),
            "--workers", "2", "--threads-per-run", "1", "--threads", "2", "--quiet"]
    proc = subprocess.Popen(args, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        mid, deadline = None, time.time() + 300
        while time.time() < deadline and proc.poll() is None:  # kill once a fork is past its fork step, unfinished
            if ForkFamily.is_family(out):
                for name in (p.name for p in out.iterdir() if p.is_dir()):
                    steps = sorted(int(p.stem.split("_")[1]) for p in (out / name / "checkpoints").glob("step_*"))
                    if len(steps) >= 2 and not (out / name / "status.json").exists():
                        mid = name
                if mid:
                    break
            time.sleep(0.05)
        assert mid, f"no fork was ever seen mid-way (exit {proc.poll()})"
        proc.send_signal(signal.SIGKILL)  # the parent only: its pool workers die with it (PR_SET_PDEATHSIG)
        proc.wait(timeout=60)
        gone = time.time() + 30
        while _group_alive(proc.pid) and time.time() < gone:
            time.sleep(0.1)
        assert not _group_alive(proc.pid), "pool workers outlived the killed interp fork"
    finally:
        if _group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        proc.stderr.close()
    family = ForkFamily.open(out)
    states = {n: s.state for n, s in family.states().items()}
    assert len(states) == 8 and set(states.values()) - {"done"}, states  # it was killed with forks left to train
    assert "damaged" not in states.values() and "running" not in states.values(), states
    assert any(Run.open(out / n).steps[-1] > Run.open(out / n).fork["parent_step"]
               for n, s in states.items() if s == "interrupted"), states  # one was killed mid-way: it resumes
    done_before = {n: _stamps(out / n) for n, s in states.items() if s == "done"}

    again = subprocess.run(args, env=ENV, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Traceback" not in again.stderr and "failed" not in again.stderr, again.stderr[-3000:]
    for name, stamps in done_before.items():  # no finished fork was trained again
        assert _stamps(out / name) == stamps, name
    assert {s.state for s in family.states().values()} == {"done"}

    reference = tmp_path / "uninterrupted"
    outcome = _family(parent, reference, "minibatch,measured_noise", horizon=KILL_HORIZON).train(
        workers=2, threads=1, progress=False)
    assert {r["state"] for r in outcome.results} == {"done"}, outcome.results
    _same_forks(reference, out)


# ---------------------------------------------------------------------------- 3: a finished family
def test_a_finished_family_trains_nothing(parent, pool_family, capsys, monkeypatch):
    stamps = _stamps(pool_family)
    assert len([p for p in stamps if p.parent.name == "checkpoints"]) == 30  # 10 forks x steps 0, 10, 20 after the fork
    outcome = ForkFamily.open(pool_family).train(workers=2, threads=1, progress=False)
    assert outcome.results == []
    assert _stamps(pool_family) == stamps
    code, shown, _ = _status(capsys, pool_family)
    assert code == 0
    # nothing is trained and no state replayed: the calls that would do either refuse to run (a timing would
    # say the same on one machine only)
    def never(what):
        def refuse(*args, **kwargs):
            raise AssertionError(f"a finished family {what}")
        return refuse

    import concurrent.futures

    import interp.replay
    import interp.train

    monkeypatch.setattr(interp.replay, "state_at", never("replayed a state"))
    monkeypatch.setattr(interp.train, "train", never("trained"))
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", never("started a process pool"))
    again = main(["fork", str(parent.path), "--at", "20,40", "--arm", ARMS, "--seed", "0,1", "--steps", str(HORIZON),
                  "--out", str(pool_family), "--workers", "2", "--threads-per-run", "1", "--quiet"])
    captured = capsys.readouterr()
    assert again == 0, captured.err[-2000:]
    assert captured.out == shown  # the same table and comparison
    assert _stamps(pool_family) == stamps
    for name in _names(pool_family):
        assert any(line.startswith(name) and " done " in line for line in shown.splitlines()), (name, shown)


# ---------------------------------------------------------------------------- 4: status --json
def test_status_json_gives_the_table_and_the_comparison(pool_family, parent, capsys):
    code, shown, _ = _status(capsys, pool_family, "--json")
    assert code == 0
    blob = json.loads(shown)
    table, comparison = blob["table"], blob["comparison"]
    assert {"fork_step", "arm", "arm_params", "fork_seed", "escape_half", "escape_snap", "censored_escape_half",
            "censored_escape_snap", "gamma", "horizon", "steps_run", "status", "run"} <= set(table[0])
    design = [(n, p["step"], p["arm"].name, p["seed"]) for n, _, p in ForkFamily.open(pool_family).points()]
    assert [(r["run"], r["fork_step"], r["arm"], r["fork_seed"]) for r in table] == design
    assert len(table) == 10  # full_batch has no randomness of its own: one fork per step
    log_k = parent.log_k
    for r in table:
        assert r["status"] == "done" and r["horizon"] == HORIZON and r["steps_run"] == HORIZON, r
        assert r["arm_params"] == ("c=1" if r["arm"] == "measured_noise" else ""), r
        # escapes recomputed from the fork's own metrics log: steps after the fork to Lc < 0.5 log K
        rows = [json.loads(line) for line in (pool_family / r["run"] / "metrics.jsonl").read_text().splitlines()]
        below = [row["step"] for row in rows if row["step"] >= r["fork_step"] and row["loss_cand"] < 0.5 * log_k]
        if below:
            assert r["escape_half"] == below[0] - r["fork_step"] and not r["censored_escape_half"], r
        else:
            assert r["escape_half"] is None and r["censored_escape_half"] is True, r  # NaN in JSON: a lower bound
        assert r["gamma"] is None  # no --gamma-every
    assert comparison is not None and comparison["fit"] == "forks" and comparison["reference"] == "minibatch"
    groups = [(row["fork_step"], row["arm"]) for row in comparison["rows"]]
    assert sorted(groups) == sorted((s, a) for s in (20, 40) for a in ("minibatch", "full_batch", "measured_noise"))
    counts = {(row["fork_step"], row["arm"]): row["n"] for row in comparison["rows"]}
    assert all(counts[(s, a)] == (1 if a == "full_batch" else 2) for s, a in counts), counts


# ---------------------------------------------------------------------------- 5: a damaged fork
@pytest.mark.parametrize("how", ["hash-fails", "rehashed"])
def test_an_edited_fork_block_is_damaged_named_and_skipped(parent, pool_family, tmp_path, capsys, how):
    out = tmp_path / "fam"
    family = _family(parent, out, "minibatch", at=("20",))
    assert family.prepare() == 2
    s0, s1 = _names(out)
    info = json.loads((out / s1 / RUN_FILE).read_text())
    assert info["fork"]["seed"] == 1
    info["fork"]["seed"] = 0  # the other point's seed: the fork block no longer is this point's
    if how == "rehashed":
        info["fork_sha256"] = fork_sha256(info["fork"])
    (out / s1 / RUN_FILE).write_text(json.dumps(info, indent=2))
    before = snapshot(out / s1)

    table = family.table().set_index("run")
    assert table.loc[s1, "status"] == "damaged" and table.loc[s0, "status"] == "interrupted"  # made, not trained
    says = "does not match the hash" if how == "hash-fails" else "fork block differs from the family's point in seed"
    assert says in table.loc[s1, "error"] and str(out / s1 / RUN_FILE) in table.loc[s1, "error"]

    outcome = family.train(workers=1, threads=1, progress=False)
    results = {r["name"]: r for r in outcome.results}
    assert results[s1]["state"] == "damaged" and says in results[s1]["error"]
    assert results[s0]["state"] == "done" and results[s0]["trained"]
    assert snapshot(out / s1) == before  # never trained, made again or rewritten
    # the other fork trained as in any family: the weights of the same point of the pool family
    ra, rb = Run.open(out / s0), Run.open(pool_family / s0)
    assert ra.steps == rb.steps and all(torch.equal(ra.state_dict(s)[k], rb.state_dict(s)[k])
                                        for s in ra.steps for k in ra.state_dict(s))

    code, shown, err = _status(capsys, out, "--json")
    assert code == 1 and f"damaged run: {s1}" in err and says in err, err
    assert {r["run"]: r["status"] for r in json.loads(shown)["table"]} == {s0: "done", s1: "damaged"}
    code, shown, err = _status(capsys, out)
    assert code == 1 and "1 of 2 run(s) damaged" in err
    assert any(line.startswith(s1) and "damaged" in line for line in shown.splitlines()), shown
    assert snapshot(out / s1) == before


# ---------------------------------------------------------------------------- 6: a half-made fork
@pytest.mark.parametrize("left", ["run.json and an empty manifest", "no resume state", "failed for want of its state"])
def test_a_half_made_fork_is_made_again_and_trains(parent, pool_family, tmp_path, left):
    out = tmp_path / "fam"
    family = _family(parent, out, "minibatch", at=("20",))
    assert family.prepare() == 2
    s0, s1 = _names(out)
    kept = {p: p.stat().st_mtime_ns for p in (out / s0).rglob("*") if p.is_file()}
    # what a kill during create_fork leaves: run.json written, the state at the fork step not (yet):
    # right after Run.create (run.json and an empty manifest), or before save_resume
    (out / s1 / RESUME_FILE).unlink()
    if left == "run.json and an empty manifest":
        for p in (out / s1).iterdir():
            if p.name not in (RUN_FILE, MANIFEST_FILE, ".lock"):
                shutil.rmtree(p) if p.is_dir() else p.unlink()
        (out / s1 / MANIFEST_FILE).write_text(json.dumps({"format": FORMAT, "checkpoints": {}}))
    if left == "failed for want of its state":  # a trainer took it up before it was made again, and failed
        (out / s1 / "status.json").write_text(json.dumps({"state": "failed", "error": "a fork without its starting state"}))
    assert Run.is_run(out / s1) and not (out / s1 / RESUME_FILE).exists()
    assert family.states()[s1].state == "not started"

    assert family.prepare() == 1  # only the half-made one
    assert (out / s1 / RESUME_FILE).exists() and {s.state for s in family.states().values()} == {"interrupted"}
    assert {p: p.stat().st_mtime_ns for p in kept} == kept  # the whole one was left alone

    outcome = family.train(workers=1, threads=1, progress=False)
    assert sorted((r["name"], r["state"]) for r in outcome.results) == [(s0, "done"), (s1, "done")]
    for name in (s0, s1):  # the weights of the same points of the pool family
        ra, rb = Run.open(out / name), Run.open(pool_family / name)
        assert ra.steps == rb.steps == [20, 30, 40]
        for step in ra.steps:
            a, b = ra.state_dict(step), rb.state_dict(step)
            assert all(torch.equal(a[k], b[k]) for k in a), (name, step)
        assert _metric_rows(ra) == _metric_rows(rb), name
