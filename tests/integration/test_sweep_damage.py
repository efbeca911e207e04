"""Nothing silently wrong in a sweep (issue 15): an edited sweep.json or one damaged run is a
`damaged` row naming the file (the others go on, exit 1); a killed pool worker is replaced
and its run resumed bit-exactly; a run another live process trains is skipped, not failed;
a refused command line writes nothing."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from interp.cli import main
from interp.errors import InterpError
from interp.runs import Run
from interp.collections import executors, training
from interp.sweeps.family import sweep_fits
from interp.sweeps.sweep import Sweep, SweepSpec
from tests.helpers import copy_run, garbage_line, interp_cli, snapshot

SMALL = ["--k", "4", "--n-bases", "24", "--n-layers", "1", "--d-model", "16", "--d-head", "8", "--d-mlp", "32",
         "--eval-every", "5", "--eval-size", "16", "--checkpoint-every", "10", "--batch-size", "8",
         "--threads-per-run", "1", "--quiet"]
S0, S1, S2 = "k4-nb24-s0", "k4-nb24-s1", "k4-nb24-s2"
ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("damage") / "sweep"
    assert main(["sweep", "--out", str(out), "--steps", "30", "--grid", "seed=0,1", *SMALL]) == 0
    return out


@pytest.fixture
def sweep_copy(trained, tmp_path) -> Path:
    return copy_run(trained, tmp_path / "sweep")


def _rows(capsys, folder: Path) -> tuple[int, dict[str, dict]]:
    code = main(["sweep", "status", str(folder), "--json"])
    return code, {r["run"]: r for r in json.loads(capsys.readouterr().out)}


# ---------------------------------------------------------------------------- 1: an edited sweep.json
def test_an_edited_sweep_json_is_not_believed(sweep_copy, capsys):
    lr, edited = Run.open(sweep_copy / S0).spec.train.lr, 0.005
    assert lr != edited
    blob = json.loads((sweep_copy / "sweep.json").read_text())
    blob["base"]["train"]["lr"] = edited
    (sweep_copy / "sweep.json").write_text(json.dumps(blob))
    before = snapshot(sweep_copy)
    code, rows = _rows(capsys, sweep_copy)
    assert code == 1
    for name in (S0, S1):  # damaged, naming the file and the field; the row says what run.json says
        assert rows[name]["status"] == "damaged" and rows[name]["lr"] == lr
        assert f"{name}/run.json says train.lr={lr}, sweep.json's point says train.lr={edited}" in rows[name]["error"]
    assert main(["sweep", str(sweep_copy), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "train.lr" in err and "2 of 2 runs done" not in err and "0 of 2 runs done" in err
    assert snapshot(sweep_copy) == before  # nothing trained, nothing written
    # train_point itself refuses the point, naming the field
    result = training.train_point(str(sweep_copy / S0), {"spec": Sweep.open(sweep_copy).points()[0][1].to_dict()})
    assert result["state"] == "damaged" and "train.lr" in result["error"]


# ---------------------------------------------------------------------------- 2: one damaged run
DAMAGE = {
    "run.json": lambda run: (run / "run.json").write_bytes(b"{garbage"),
    "status.json": lambda run: (run / "status.json").write_bytes(b"\x00\x01garbage"),
    "manifest.json": lambda run: (run / "manifest.json").write_text('{"format": 1, "checkpoints": {"0": {}}}'),
    "metrics.jsonl": lambda run: garbage_line(run / "metrics.jsonl", 3),
}


@pytest.mark.parametrize("file", DAMAGE)
def test_one_damaged_run_is_a_row_and_the_others_go_on(sweep_copy, file, capsys, tmp_path):
    DAMAGE[file](sweep_copy / S0)
    damaged = snapshot(sweep_copy / S0)
    code, rows = _rows(capsys, sweep_copy)
    assert code == 1
    assert rows[S0]["status"] == "damaged" and f"{S0}/{file}" in rows[S0]["error"]
    assert rows[S1]["status"] == "done" and rows[S1]["steps_run"] == 30
    if file == "run.json":  # nothing it says can be shown: NaN, never sweep.json's values
        assert rows[S0]["seed"] is None and rows[S0]["lr"] is None
    assert main(["sweep", "status", str(sweep_copy)]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and "damaged" in lines[0] and file in lines[0] and " done " in lines[1]
    fits = sweep_fits(Sweep.open(sweep_copy).table())
    assert any(S0 in w and "damaged" in w for w in fits.warnings)
    assert main(["scaling", str(sweep_copy)]) == 1
    out = capsys.readouterr()
    assert "1 done" in out.out and "1 damaged" in out.out and S0 in out.err
    assert main(["report", str(sweep_copy), "-o", str(tmp_path / "s.html"), "--quiet"]) == 1
    page = (tmp_path / "s.html").read_text()
    assert "damaged<br><small>" in page and f"{S0}/{file}" in page
    capsys.readouterr()
    assert main(["ls", str(sweep_copy.parent)]) == 1  # and names it (issue 30, case 22)
    listed = capsys.readouterr()
    assert "(1 done, 0 running, 0 failed, 1 damaged)" in listed.out and f"damaged run: sweep/{S0}" in listed.err
    # training the sweep, extended by a seed: the new run is trained, the damaged one skipped and named
    assert main(["sweep", "--out", str(sweep_copy), "--steps", "30", "--grid", "seed=0,1,2", *SMALL]) == 1
    err = capsys.readouterr().err
    assert f"run damaged, skipped: {S0}" in err and "2 of 3 runs done, 0 failed, 1 damaged" in err
    assert (Run.open(sweep_copy / S2).status or {}).get("state") == "done"
    assert snapshot(sweep_copy / S0) == damaged


def test_a_folder_without_run_json_is_damaged_not_started_again(sweep_copy, capsys):
    (sweep_copy / S0 / "run.json").unlink()
    code, rows = _rows(capsys, sweep_copy)
    assert code == 1 and rows[S0]["status"] == "damaged" and "has no run.json" in rows[S0]["error"]


# ---------------------------------------------------------------------------- 3: a killed pool worker
# a killed pool worker: the pool-worker-killed row of tests/integration/test_adversarial.py
def test_the_summary_adds_up_when_the_executor_fails_runs(sweep_copy, capsys, monkeypatch):
    """A run the executor reports failed without writing its status (a worker that died) is
    counted failed: never "0 of 3 done, 0 failed"."""
    def dead_pool(jobs, on_result=None, **kwargs):
        outcome = executors.Outcome()
        for job in jobs:
            outcome.results.append(executors.result_of(job.name, "failed", "the worker process died"))
            on_result(outcome.results[-1])
        return outcome

    monkeypatch.setattr(executors, "run_local", dead_pool)
    assert main(["sweep", "--out", str(sweep_copy), "--steps", "30", "--grid", "seed=0,1,2,3", *SMALL]) == 1
    assert "2 of 4 runs done, 2 failed (" in capsys.readouterr().err


# ---------------------------------------------------------------------------- 4: another live writer
def test_a_run_another_process_trains_is_skipped_not_failed(sweep_copy, capsys):
    (sweep_copy / S2).mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from interp.runs import RunLock; RunLock(sys.argv[1]).acquire(); "
                               "print('held', flush=True); time.sleep(600)", str(sweep_copy / S2)],
        stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        assert holder.stdout.readline().strip() == "held"
        code = main(["sweep", "--out", str(sweep_copy), "--steps", "30", "--grid", "seed=0,1,2,3", *SMALL])
        err = capsys.readouterr().err
        assert code == 0, err
        assert "failed:" not in err and "run failed" not in err
        assert f"being trained by another process (pid {holder.pid} " in err
        assert "3 of 4 runs done, 0 failed, 1 being trained by another process" in err
        last = err.strip().splitlines()[-1]  # the closing line, as a fork family's (interp.collections.training.held_note)
        assert f"1 run(s) skipped, being trained by another process: {S2} (pid {holder.pid} " in last, last
        assert f"interp sweep status {sweep_copy}" in last and "run this command again" in last, last
        assert (Run.open(sweep_copy / "k4-nb24-s3").status or {}).get("state") == "done"
        assert Sweep.open(sweep_copy).state_of(S2)[0] == "running"
    finally:
        holder.kill()
        holder.wait()
    assert not Run.is_run(sweep_copy / S2)  # never touched


def test_concurrent_creation_and_extension_keep_every_value(tmp_path):
    from interp.presets import preset

    path, errors = tmp_path / "c", []
    start = threading.Barrier(6)

    def create(seed: int) -> None:
        start.wait()
        try:
            Sweep.create(path, SweepSpec(base=preset("tiny"), grid=(("seed", (seed,)),)))
        except InterpError as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=create, args=(seed,)) for seed in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(Sweep.open(path).spec.grid[0][1]) == list(range(6))


# ---------------------------------------------------------------------------- 5: a refused command line
@pytest.mark.parametrize("flags,says", [
    (["--backend", "ray", "--cpus-per-run=-1"], "cpus per run"),
    (["--backend", "ray", "--cpus-per-run", "nan"], "cpus per run"),
    (["--backend", "ray", "--cpus-per-run", "0"], "cpus per run"),
    (["--backend", "ray", "--gpus-per-run", "inf"], "gpus per run"),
    (["--threads-per-run", "0"], "positive"),
])
def test_a_refused_command_line_writes_nothing(tmp_path, flags, says):
    out = tmp_path / "s"
    result = interp_cli("sweep", "--out", out, "--steps", "30", *SMALL, *flags, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and says in result.stderr
    assert not out.exists()


@pytest.mark.parametrize("options", [{"cpus_per_run": math.nan}, {"gpus_per_run": -1}, {"workers": 0},
                                     {"backend": "slurm"}, {"threads": 0}])
def test_train_sweep_refuses_bad_executor_settings_first(tmp_path, options):
    from interp.presets import preset

    sweep = Sweep.create(tmp_path / "s", SweepSpec(base=preset("tiny")))
    with pytest.raises(InterpError):
        training.train_points(sweep, progress=False, **options)
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [".lock", "sweep.json"]
