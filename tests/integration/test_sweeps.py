"""Sweeps: a family of runs trained sequentially, in a local pool or on Ray with identical
weights; idempotent, resumable after kill -9, extensible; bad specs refused in one line."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from interp.cli import main
from interp.errors import InterpError
from interp.presets import preset
from interp.runs import Run
from interp.sweeps.sweep import Sweep, SweepSpec, parse_axis
from tests.helpers import copy_run, interp_cli, run_main, small_spec

SMALL = ["--preset", "tiny", "--k", "4", "--n-bases", "24", "--n-layers", "1", "--d-model", "16", "--d-head", "8",
         "--d-mlp", "32", "--eval-every", "10", "--eval-size", "16", "--checkpoint-every", "10", "--batch-size", "8",
         "--stop-after-snap", "none", "--threads-per-run", "1", "--quiet"]


def _weights(sweep_dir: Path) -> dict[str, dict[str, torch.Tensor]]:
    sweep = Sweep.open(sweep_dir)
    return {run.name: run.state_dict("last") for run in sweep.runs}


def _same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys() and a
    for name in a:
        assert a[name].keys() == b[name].keys()
        for key in a[name]:
            assert torch.equal(a[name][key], b[name][key]), (name, key)


def _table(sweep_dir: Path):
    df = Sweep.open(sweep_dir).table().drop(columns=["wall_seconds"])
    return df.sort_values("run").reset_index(drop=True)


@pytest.fixture(scope="module")
def sequential(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sweeps") / "seq"
    assert main(["sweep", *SMALL, "--steps", "40", "--grid", "seed=0,1", "--grid", "task.k=3,4", "--out", str(out)]) == 0
    return out


def test_the_sweep_folder_holds_ordinary_runs_with_stable_names(sequential):
    sweep = Sweep.open(sequential)
    names = sorted(p.name for p in sequential.iterdir() if p.is_dir())
    assert names == ["k3-nb24-s0", "k3-nb24-s1", "k4-nb24-s0", "k4-nb24-s1"]
    blob = json.loads((sequential / "sweep.json").read_text())
    assert blob["grid"] == [{"field": "seed", "values": [0, 1]}, {"field": "task.k", "values": [3, 4]}]
    run = Run.open(sequential / "k3-nb24-s1")
    assert run.spec.seed == 1 and run.spec.task.k == 3 and run.steps[-1] == 40  # an ordinary run
    table = sweep.table()
    assert len(table) == 4 and set(table["status"]) == {"done"}
    assert {"task.k", "seed", "k", "D", "direction", "status", "steps_run", "tau_half", "tau_window", "t_start",
            "t_end", "plateau_height", "snap_step", "steps_to_acc_cand_99", "steps_to_exact_99", "wall_seconds",
            "censored", "censored_tau_half"} <= set(table.columns)
    assert (table["D"] == table["k"] * 24).all() and (table["steps_run"] == 40).all()
    # 40 steps is too short to snap: censored, never a silent NaN
    never = table["tau_half"].isna()
    assert (table.loc[never, "censored_tau_half"]).all() and not table.loc[~never, "censored_tau_half"].any()
    # tau at the author's thresholds: 0.5 is tau_half; a lower threshold is reached no earlier than a higher one
    assert table["tau_0.5"].equals(table["tau_half"]) and table["censored_tau_0.5"].equals(table["censored_tau_half"])
    for lo, hi in (("tau_0.3", "tau_0.4"), ("tau_0.4", "tau_0.5"), ("tau_0.6", "tau_0.7")):
        both = table[lo].notna() & table[hi].notna()
        assert (table.loc[both, lo] >= table.loc[both, hi]).all()
        assert (table[lo].isna() == table[f"censored_{lo}"]).all()


@pytest.mark.slow  # 6 s; the pool's workers train in the slow tier's kill -9 test and the README tour too
def test_two_local_workers_give_the_sequential_table_and_weights(sequential, tmp_path):
    out = tmp_path / "pool"
    assert main(["sweep", *SMALL, "--steps", "40", "--grid", "seed=0,1", "--grid", "task.k=3,4", "--out", str(out),
                 "--workers", "2"]) == 0
    _same_weights(_weights(sequential), _weights(out))
    import pandas as pd

    pd.testing.assert_frame_equal(_table(sequential), _table(out))


@pytest.mark.slow
def test_the_ray_backend_gives_the_same_table_and_weights(sequential, tmp_path):
    pytest.importorskip("ray", reason="the ray extra: pip install -e '.[ray]'")
    out = tmp_path / "ray"
    assert main(["sweep", *SMALL, "--steps", "40", "--grid", "seed=0,1", "--grid", "task.k=3,4", "--out", str(out),
                 "--backend", "ray", "--cpus-per-run", "1"]) == 0
    _same_weights(_weights(sequential), _weights(out))
    import pandas as pd

    pd.testing.assert_frame_equal(_table(sequential), _table(out))


def test_running_again_trains_nothing_and_extending_trains_only_new_points(sequential, tmp_path):
    out = copy_run(sequential, tmp_path / "again")
    files = {p: p.stat().st_mtime_ns for p in out.rglob("*.safetensors")}
    assert main(["sweep", str(out), "--quiet", "--threads-per-run", "1"]) == 0
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*.safetensors")} == files  # nothing retrained
    assert main(["sweep", *SMALL, "--steps", "40", "--grid", "seed=0,1", "--grid", "task.k=3,4,5",
                 "--out", str(out)]) == 0
    assert {p: p.stat().st_mtime_ns for p in files} == files  # the old points untouched
    assert sorted(r.name for r in Sweep.open(out).runs) == ["k3-nb24-s0", "k3-nb24-s1", "k4-nb24-s0", "k4-nb24-s1",
                                                           "k5-nb24-s0", "k5-nb24-s1"]
    # a changed base spec is refused, and nothing is written
    before = (out / "sweep.json").read_bytes()
    assert main(["sweep", *SMALL, "--steps", "50", "--grid", "seed=0,1", "--grid", "task.k=3,4", "--out", str(out)]) == 2
    assert (out / "sweep.json").read_bytes() == before


@pytest.mark.slow
def test_kill_9_of_the_sweep_then_again_finishes_without_retraining(sequential, tmp_path):
    out = tmp_path / "killed"
    args = ["sweep", *SMALL, "--steps", "400", "--grid", "seed=0,1", "--grid", "task.k=3,4", "--out", out,
            "--workers", "2"]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.Popen([sys.executable, "-m", "interp.cli", *map(str, args)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    done_before: dict = {}
    while time.time() < deadline:  # kill once at least one run is done and another one is mid-way
        sweep = Sweep.open(out) if (out / "sweep.json").exists() else None
        states = {n: sweep.state_of(n)[0] for n, _, _ in sweep.points()} if sweep else {}
        if "done" in states.values() and "running" in states.values():
            done_before = {n: Run.open(out / n).checkpoint_hashes() for n, s in states.items() if s == "done"}
            break
        time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert done_before, "the sweep never had a finished and a running run at once"
    stamps = {n: {p: p.stat().st_mtime_ns for p in (out / n).rglob("*.safetensors") if p.parent.name == "checkpoints"}
              for n in done_before}
    time.sleep(1.0)  # the killed workers die with their parent (and release their run locks)
    # run again from the folder alone, as a user would: each run resumes with the threads (and the sweep with the
    # workers) it was trained with, as recorded, so the result is the uncut sweep's bit for bit (issue 54: 5)
    again = interp_cli("sweep", out, "--quiet", timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "not bit-exact" not in again.stderr and "2 workers" in again.stderr, again.stderr[-2000:]
    for name in done_before:  # no finished run was trained again
        assert {p: p.stat().st_mtime_ns for p in stamps[name]} == stamps[name]
    reference = tmp_path / "uninterrupted"
    assert main(["sweep", *SMALL, "--steps", "400", "--grid", "seed=0,1", "--grid", "task.k=3,4",
                 "--out", str(reference), "--workers", "2"]) == 0
    _same_weights(_weights(reference), _weights(out))


def test_a_failed_run_is_recorded_and_the_others_go_on(tmp_path, capsys):
    out = tmp_path / "failing"
    assert main(["sweep", *SMALL, "--steps", "30", "--grid", "train.lr=1e-3,1e12", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "failed" in err and "loss became" in err  # the training loss, or the evaluation after the blow-up
    table = Sweep.open(out).table().set_index("train.lr")
    assert table.loc[1e-3, "status"] == "done"
    assert table.loc[1e12, "status"] == "failed" and "at step" in table.loc[1e12, "error"]
    assert main(["sweep", "status", str(out)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and any("failed" in l and "error:" in l for l in lines)


@pytest.mark.parametrize("args,fragment", [
    (["--grid", "task.nope=1,2"], "unknown field 'task.nope'"),
    (["--fixed-d", "1000", "--k", "3,7"], "D = 1000 is not divisible by K = 3, 7"),
    (["--grid", "task.k="], "axis task.k has no values"),
    (["--grid", "task.k=10,40"], "k = 40 needs 40 distinct first characters"),
    (["--grid", "task.k=ten"], "task.k: 'ten' is not a valid int"),
    (["--backend", "slurm"], "invalid choice: 'slurm'"),
])
def test_bad_sweep_specs_are_one_line(tmp_path, args, fragment, capsys):
    out = tmp_path / "bad"
    code, _, err = run_main(["sweep", "--preset", "tiny", "--out", str(out), "--quiet", *args], capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and fragment in lines[0], err
    assert not (out / "sweep.json").exists()


def test_fixed_d_sets_n_bases_from_k():
    spec = SweepSpec(base=preset("tiny"), grid=(("task.k", (3, 5, 10)),), fixed_d=3000)
    runs = spec.runs()
    assert [(s.task.k, s.task.n_bases) for _, s, _ in runs] == [(3, 1000), (5, 600), (10, 300)]
    assert all(s.task.dataset_size == 3000 for _, s, _ in runs)
    assert [n for n, _, _ in runs] == ["k3-nb1000-s0", "k5-nb600-s0", "k10-nb300-s0"]
    with pytest.raises(InterpError, match="needs task.k as an axis"):
        SweepSpec(base=preset("tiny"), grid=(("seed", (0, 1)),), fixed_d=3000).validate()


def test_axes_by_any_dotted_field_and_explicit_points():
    assert parse_axis("train.lr=1e-3,3e-4") == ("train.lr", [1e-3, 3e-4])
    assert parse_axis("task.direction=bz_to_a,a_to_b") == ("task.direction", ["bz_to_a", "a_to_b"])
    spec = SweepSpec(base=small_spec(), grid=(("seed", (0, 1)),),
                     points=({"task.direction": "a_to_b"}, {"task.direction": "bz_to_a", "model.n_layers": 1}))
    runs = spec.runs()
    assert len(runs) == 4
    assert {(s.task.direction, s.model.n_layers, s.seed) for _, s, _ in runs} == {
        ("a_to_b", 2, 0), ("a_to_b", 2, 1), ("bz_to_a", 1, 0), ("bz_to_a", 1, 1)}
    assert len({n for n, _, _ in runs}) == 4


def test_ls_lists_sweeps_beside_runs(sequential, capsys):
    assert main(["ls", str(sequential.parent)]) == 0
    out = capsys.readouterr().out
    assert "seq" in out and "sweep: 4 runs (4 done" in out
    assert main(["ls", str(sequential)]) == 0  # inside a sweep: its runs
    assert len(capsys.readouterr().out.strip().splitlines()) == 1 + 4


def test_without_ray_the_error_says_how_to_install_it(tmp_path, monkeypatch):
    from interp.collections import executors
    from tests.helpers import hide_module

    hide_module(monkeypatch, "ray")
    with pytest.raises(InterpError, match=r"pip install -e '.\[ray\]'"):
        executors.run_ray([])


def test_folder_names_survive_reopening_a_sweep_of_points(tmp_path):
    # sweep.json stores each point's fields in sorted order: the names must not depend on it
    spec = SweepSpec(base=small_spec(), grid=(("seed", (0, 1)),),
                     points=({"train.lr": 1e-3, "train.batch_size": 16}, {"train.batch_size": 8, "train.lr": 2e-3}))
    created = [name for name, _, _ in Sweep.create(tmp_path / "s", spec).points()]
    assert created == [name for name, _, _ in Sweep.open(tmp_path / "s").points()]
    assert created[0] == "k4-nb24-s0-lr0.001-bs16"
