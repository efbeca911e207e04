"""`interp analyze SWEEP` on a real 4-run sweep: the same findings as `interp analyze RUN` on each
run, the pool and Ray give one table, a second call computes nothing, a kill -9 loses nothing
cached, unfinished runs are named and skipped, bad input is one line with exit status 2."""

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from interp.cli import main
from interp.errors import InterpError
from interp.runs import Run, RunLock
from interp.sweeps.analyze import analyze_sweep
from interp.sweeps.circuits import CIRCUIT_COLUMNS
from interp.sweeps.fits import jsonable
from interp.sweeps.sweep import Sweep, SweepSpec
from tests.helpers import cli_json, copy_run, hide_module, small_spec

# the small, fast-snapping model of the sweep report tests (tests/e2e/test_sweep_report.py)
SMALL = ["--preset", "tiny", "--n-bases", "24", "--n-layers", "2", "--n-heads", "2", "--d-model", "32",
         "--d-head", "16", "--d-mlp", "64", "--batch-size", "16", "--lr", "0.003", "--eval-every", "10",
         "--eval-size", "64", "--checkpoint-every", "50", "--steps", "400", "--stop-after-snap", "30",
         "--threads-per-run", "1", "--quiet"]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("family") / "sweep"
    assert main(["sweep", *SMALL, "--grid", "task.k=3,4", "--grid", "seed=0,1", "--out", str(out), "--workers", "2"]) == 0
    table = Sweep.open(out).table()
    assert (table["status"] == "done").all() and table["tau_half"].notna().all(), table[["run", "tau_half"]]
    return out


def _circuits(path: Path) -> pd.DataFrame:
    table = Sweep.open(path).table(circuits=True)
    return table[["run", *CIRCUIT_COLUMNS]].sort_values("run").reset_index(drop=True)


@pytest.mark.slow  # 38 s (a sweep analysed twice); the default tier analyses sweeps in the censored and notes tests
@pytest.mark.parametrize("only", [["--only", "circuits"], pytest.param([], marks=pytest.mark.slow)],
                         ids=["circuits", "the-whole-suite"])
def test_the_sweep_gives_each_run_the_findings_of_analyze_run_and_a_second_call_computes_nothing(
        only, trained, tmp_path, capsys):
    torch.set_num_threads(1)  # the pool's workers run 1 thread each: the same sums
    swept = copy_run(trained, tmp_path / "swept")
    alone = copy_run(trained, tmp_path / "alone")
    got = cli_json(capsys, ["analyze", str(swept), "--json", "--workers", "1", "--threads-per-run", "1", *only])
    assert got["skipped"] == {} and len(got["runs"]) == 4
    # computed afresh (the routing head's sensitivity at the last step is computed once, kept for that step)
    assert all(r["state"] == "done" and r["computed"] > 0 and r["cached"] == 0 for r in got["runs"])
    for result in got["runs"]:
        own = cli_json(capsys, ["analyze", str(alone / result["name"]), "--json", *only])
        assert jsonable(own["findings"]) == jsonable(result["findings"]), result["name"]
    # the circuit columns are those findings, read back from each run's cache
    table = {r["run"]: r for r in got["table"]}
    for result in got["runs"]:
        f, row = result["findings"], table[result["name"]]
        assert row["routing_head"] == f["routing_head"] and row["routing_layer"] == f["routing_layer"]
        assert row["carried_share_onset"] == f["carried_share_onset"]
        assert row["used_ablation_lead"] == pytest.approx(f["used_ablation_lead"]) if f["used_ablation_lead"] is not \
            None else row["used_ablation_lead"] is None
        assert row["ablation_at_tau"] == pytest.approx(f["ablation_mid_delta_loss_cand"])
        assert row["groups_above_80_at_half_tau"] == pytest.approx(f["groups_share_above_80_at_half_tau"])
        assert row["gap_lead"] is not None and row["circuits_reason"] is None or "onset" in row["circuits_reason"]
    files = {p: p.stat().st_mtime_ns for p in swept.rglob("cache/**/*.json")}
    again = cli_json(capsys, ["analyze", str(swept), "--json", "--workers", "1", *only])
    assert sum(r["computed"] for r in again["runs"]) == 0 and all(r["cached"] > 0 for r in again["runs"])
    assert {p: p.stat().st_mtime_ns for p in swept.rglob("cache/**/*.json")} == files  # nothing written


@pytest.mark.slow
def test_the_pool_and_ray_give_identical_tables(trained, tmp_path):
    pytest.importorskip("ray", reason="the ray extra: pip install -e '.[ray]'")
    pool = copy_run(trained, tmp_path / "pool")
    ray = copy_run(trained, tmp_path / "ray")
    assert main(["analyze", str(pool), "--workers", "2", "--quiet"]) == 0  # 1 thread per run
    assert main(["analyze", str(ray), "--backend", "ray", "--cpus-per-run", "1", "--quiet"]) == 0
    pd.testing.assert_frame_equal(_circuits(pool), _circuits(ray))
    assert _circuits(pool)["routing_head"].notna().all()


@pytest.mark.slow
def test_a_kill_mid_way_then_a_rerun_recomputes_nothing_that_was_cached(trained, tmp_path):
    killed = copy_run(trained, tmp_path / "killed")
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from interp.cli import main; sys.exit(main(sys.argv[1:]))",
                             "analyze", str(killed), "--quiet"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while len(list(killed.rglob("cache/**/*.json"))) < 8 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {p: p.stat().st_mtime_ns for p in killed.rglob("cache/**/*.json")}
    assert before, "nothing was cached before the kill"
    outcome = analyze_sweep(Sweep.open(killed), progress=False)
    assert {p: before[p] for p in before} == {p: p.stat().st_mtime_ns for p in before}  # kept, not recomputed
    assert outcome.cached >= len(before) and not outcome.failed
    clean = copy_run(trained, tmp_path / "clean")
    analyze_sweep(Sweep.open(clean), progress=False)
    # each result computed is one cache file: only those missing after the kill were computed
    assert outcome.computed == sum(1 for _ in clean.rglob("cache/**/*.json")) - len(before)
    pd.testing.assert_frame_equal(_circuits(killed), _circuits(clean))


@pytest.mark.slow  # the trained sweep fixture (11 s); the censored, notes and unreadable-step tests stay
def test_unfinished_runs_are_named_and_skipped(trained, tmp_path, capsys):
    path = copy_run(trained, tmp_path / "mixed")
    failed = Run.open(path / "k3-nb24-s0")
    failed.acquire()
    failed.write_status("failed", error="RuntimeError: out of memory")
    failed.release()
    lock = RunLock(path / "k4-nb24-s1")  # another process trains this one right now
    lock.acquire()
    try:
        capsys.readouterr()
        assert main(["analyze", str(path), "--only", "sensitivity"]) == 0
        err = capsys.readouterr().err
    finally:
        lock.release()
    assert "skipped k3-nb24-s0: failed: RuntimeError: out of memory" in err
    assert "skipped k4-nb24-s1: running" in err
    table = Sweep.open(path).table(circuits=True).set_index("run")
    assert table.loc["k3-nb24-s0", "circuits_reason"] == "the run is failed"
    assert isinstance(table.loc["k3-nb24-s1", "routing_head"], str)  # analysed
    # only sensitivity ran: the rest is NaN, and the reason names what was not analysed
    reason = table.loc["k3-nb24-s1", "circuits_reason"]
    assert "not analysed: usage, probes, ablation, groups" in reason and f"interp analyze {path})" in reason  # the folder
    assert math.isnan(table.loc["k3-nb24-s1", "ablation_at_tau"])


def test_a_censored_run_is_skipped_with_the_reason(tmp_path):
    torch.set_num_threads(1)
    sweep = Sweep.create(tmp_path / "short", SweepSpec(base=small_spec(steps=20, checkpoint_every=10),
                                                       grid=(("seed", (0,)),)))
    from interp.sweeps.sweep import train_sweep

    train_sweep(sweep, progress=False)
    with pytest.raises(InterpError, match="no finished run to analyse .*1 of the done censored"):
        analyze_sweep(sweep, progress=False)
    row = sweep.table(circuits=True).iloc[0]
    assert row["censored_tau_half"] and row["circuits_reason"].startswith("censored")


def _one_line_error(capsys, argv) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("interp: error:") and "Traceback" not in captured.err
    return lines[0]


def test_bad_input_is_one_line_with_exit_status_2(tmp_path, capsys, monkeypatch):
    empty = tmp_path / "empty"
    Sweep.create(empty, SweepSpec(base=small_spec(), grid=(("seed", (0, 1)),)))
    assert "has no finished run to analyse (2 not started)" in _one_line_error(capsys, ["analyze", str(empty)])
    assert "unknown analysis nope" in _one_line_error(capsys, ["analyze", str(empty), "--only", "nope"])
    assert "--workers: for a sweep folder" in _one_line_error(
        capsys, ["analyze", str(ROOT / "checkpoints" / "demo"), "--workers", "2"])
    hide_module(monkeypatch, "ray")
    line = _one_line_error(capsys, ["analyze", str(empty), "--backend", "ray"])
    assert "pip install -e '.[ray]'" in line


@pytest.mark.slow
def test_an_analysis_cached_at_only_some_of_its_steps_is_left_out_whole(trained, tmp_path):
    path = copy_run(trained, tmp_path / "partial")
    analyze_sweep(Sweep.open(path), only="circuits", progress=False)
    full = Sweep.open(path).table(circuits=True).set_index("run")
    assert full["routing_head"].notna().all() and full["used_ablation_lead"].notna().any()
    usage = sorted((path / "k3-nb24-s0" / "cache" / "usage").rglob("step_*.json"))
    assert len(usage) > 2
    usage[len(usage) // 2].unlink()  # one checkpoint of the series is missing
    row = Sweep.open(path).table(circuits=True).set_index("run").loc["k3-nb24-s0"]
    assert math.isnan(row["used_ablation_onset"]) and math.isnan(row["used_patching_lead"])
    assert "not analysed: usage" in row["circuits_reason"]
    assert row["routing_head"] == full.loc["k3-nb24-s0", "routing_head"]  # the others are still read
    assert row["ablation_at_tau"] == full.loc["k3-nb24-s0", "ablation_at_tau"]


def test_each_runs_notes_are_printed_once_under_its_name_and_are_in_the_json(tmp_path, capsys):
    """A step beyond the run (named by both analyses: said once), then a damaged cache entry: under the run's name in
    the text, and in `run_notes` of --json."""
    demo = ROOT / "checkpoints" / "demo"
    sweep = Sweep.create(tmp_path / "sweep", SweepSpec(base=Run.open(demo).spec))
    (name, _, _), = sweep.points()
    copy_run(demo, sweep.path / name)
    argv = ["analyze", str(sweep.path), "--only", "sensitivity,attention", "--steps", "mid,post"]
    capsys.readouterr()
    assert main([*argv, "--quiet"]) == 0
    text = capsys.readouterr().out
    beyond = "post (2τ = 1850) lies beyond the run (last step 1625)"
    assert f"  notes by run:\n    {name}:\n      {beyond}\n" in text and text.count(beyond) == 1, text
    entry, = (sweep.path / name / "cache" / "sensitivity").rglob("step_*.json")
    entry.write_text("{")
    got = cli_json(capsys, [*argv, "--json"])
    assert got["run_notes"] == {name: [beyond, f"cache entry {entry} is not valid JSON (damaged): recomputed"]}


def test_a_runs_unreadable_checkpoint_is_said_once(tmp_path, capsys):
    """A run's problem (a checkpoint that cannot be read) is printed once, under "notes by run", not also as a live
    warning on stderr; the run is still counted as one with steps not analysed (exit 1)."""
    demo = ROOT / "checkpoints" / "demo"
    sweep = Sweep.create(tmp_path / "sweep", SweepSpec(base=Run.open(demo).spec))
    (name, _, _), = sweep.points()
    run = Run.open(copy_run(demo, sweep.path / name))
    bad, last = run.steps[len(run.steps) // 2], run.steps[-1]
    victim = run.path / "checkpoints" / f"step_{bad:07d}.safetensors"
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF  # the same size: its SHA-256 no longer matches (a changed size is a damaged run)
    victim.write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["analyze", str(sweep.path), "--only", "sensitivity", "--steps", f"{bad},{last}", "--quiet"]) == 1
    out, err = capsys.readouterr()
    problem = f"step_{bad:07d}.safetensors is corrupt"
    assert (out + err).count(problem) == 1 and f"  notes by run:\n    {name}:\n      step {bad}: " in out, (out, err)
