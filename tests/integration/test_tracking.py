"""--track and `interp export`, read back with TensorBoard's own reader and from the offline W&B run's own
files (tests/tracking_readers.py): a tiny run (across a resume), a two-run sweep and a small fork family
give the values of their metrics.jsonl, and an export gives those of the cached tables."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from interp.cli import main
from tests.helpers import TINY_FLAGS, copy_run, run_main, small_spec
from tests.tracking_readers import by_tag, metrics_by_step, tensorboard_scalars, tensorboard_texts, wandb_runs, wandb_sessions


TINY = small_spec(eval_every=5, checkpoint_every=10, n_layers=1, d_model=16, d_head=8, d_mlp=32, eval_size=16,
                  batch_size=8)  # the run of TINY_FLAGS


@pytest.fixture
def home(monkeypatch, tmp_path):
    """No W&B account: a fresh HOME (no ~/.netrc, no wandb settings) and no WANDB_* variables, so W&B runs offline."""
    for var in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_BASE_URL", "WANDB_PROJECT", "WANDB_DIR", "WANDB_CONFIG_DIR"):
        monkeypatch.delenv(var, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def test_a_run_tracked_to_tensorboard_reads_back_as_its_log_across_a_resume(tmp_path):
    from interp.runs import Run
    from interp.tracking.sinks import Tracker
    from interp.train import train

    run = Run.create(tmp_path / "run", TINY.override(steps=30))
    train(run, progress=False, stop_at=15, sink=Tracker("tensorboard"))  # logs 15, then stops: resumes from 10
    train(Run.open(tmp_path / "run"), progress=False, sink=Tracker("tensorboard"))
    logged = by_tag(metrics_by_step(tmp_path / "run"))
    assert sorted(logged["loss"]) == [0, 1, 2, 4, 5, 8, 10, 15, 20, 25, 30]
    events = tensorboard_scalars(tmp_path / "run" / "tensorboard", unique=True)  # the first session's 10, 15 purged
    assert events == logged


def test_a_tracker_that_fails_is_one_warning_and_training_goes_on(tmp_path, capsys):
    from interp.runs import Run
    from interp.tracking.sinks import Tracker
    from interp.train import train

    run = Run.create(tmp_path / "run", TINY.override(steps=20))
    (run.path / "tensorboard").write_text("a file where the event folder would go")  # TensorBoard cannot write
    capsys.readouterr()
    result = train(run, progress=False, sink=Tracker("tensorboard"))
    err = capsys.readouterr().err
    assert err.count("interp: warning: tracking stopped:") == 1, err
    assert result.last_step == 20 and Run.open(run.path).status["state"] == "done"
    assert sorted(metrics_by_step(run.path)) == [0, 1, 2, 4, 5, 8, 10, 15, 20]


def test_a_run_tracked_to_wandb_is_an_offline_run_holding_its_log(tmp_path, home, capsys):
    out = tmp_path / "run"
    code, stdout, stderr = run_main(["train", "--out", str(out), "--steps", "30", "--track", "wandb", *TINY_FLAGS], capsys)
    assert code == 0 and "wandb:" not in stdout + stderr  # W&B says nothing: the command's output stays its own
    runs = wandb_runs(out / "wandb")
    assert list(runs) == ["run"] and not any(home.glob("**/*.wandb"))
    found = runs["run"]
    assert found["history"] == metrics_by_step(out)
    from interp.runs import Run

    assert found["config"]["spec"] == Run.open(out).spec.to_dict() and found["job_type"] == "train"
    assert main(["train", "--resume", "--out", str(out), "--steps", "40", "--track", "wandb"]) == 0
    sessions = wandb_sessions(out / "wandb")
    assert len(sessions) == 2  # one W&B run per training session, the second from the step it continued at
    later = max(sessions, key=lambda r: min(r["history"]))
    assert later["history"] == {s: row for s, row in metrics_by_step(out).items() if s >= 30}


def _expected_from_cache(run_path: Path, names: str) -> dict[str, dict[int, float]]:
    """What the export must hold, reduced here from the cached tables as `interp analyze` reads them back."""
    from interp.analysis.findings import routing_head
    from interp.analysis.suite import run_suite
    from interp.runs import Run

    tables = run_suite(Run.open(run_path), only=names, steps="0,10,30", compute=False, progress=False).tables
    out: dict[str, dict[int, float]] = {}

    def put(tag, step, value):
        if not (isinstance(value, float) and math.isnan(value)):
            out.setdefault(tag, {})[int(step)] = float(value)

    sens = tables["sensitivity"]
    for r in sens.itertuples():
        put(f"sensitivity/z_share/{r.head_name}", r.step, r.z_share)
        put(f"sensitivity/attn_to_z/{r.head_name}", r.step, r.attn_to_z)
    head = routing_head(sens)
    for r in tables["ablation"].itertuples():
        put(f"ablation/delta_loss_cand/{r.method}/{r.component}", r.step, r.delta_loss_cand)
        if r.component == head:
            put(f"routing/ablation/delta_loss_cand/{r.method}", r.step, r.delta_loss_cand)
    for r in tables["patching_heads"][tables["patching_heads"]["segment"] == "all"].itertuples():
        put(f"patching_heads/patched_ld/{r.head_name}", r.step, r.patched_ld)
    for step, part in tables["groups"].groupby("step"):
        put("groups_summary/share_above_80", step, float((part["acc_cand"] >= 0.8).mean()))
    return out


def test_export_of_a_run_reads_back_as_its_log_and_its_cached_tables(tiny_run, tmp_path, home, capsys):
    run = copy_run(tiny_run(0), tmp_path / "run")
    names = "sensitivity,ablation,patching,groups"
    assert main(["analyze", str(run), "--steps", "0,10,30", "--only", names, "--quiet"]) == 0
    page = tmp_path / "page.html"
    page.write_text("<html><body>a report</body></html>")
    code, out, _ = run_main(["export", str(run), "--to", "tensorboard", "--report", str(page)], capsys)
    assert code == 0, out
    assert f"edges: not cached; computed by: interp analyze {run} --only edges" in out
    assert f"no timeline attached: write one with interp timeline {run}" in out
    expected = {**by_tag(metrics_by_step(run)), **_expected_from_cache(run, names)}
    board = tensorboard_scalars(run / "exports" / "tensorboard" / "run", unique=True)
    assert {tag: board.get(tag) for tag in expected} == expected
    assert board["summary/k"] == {30: 4.0} and board["summary/n_bases"] == {30: 24.0}
    assert tensorboard_texts(run / "exports" / "tensorboard" / "run")["attachments/report"].endswith(str(page.resolve()))

    code, out, _ = run_main(["export", str(run), "--to", "wandb", "--report", str(page)], capsys)
    assert code == 0, out
    found = wandb_runs(run / "exports" / "wandb")["run"]
    assert {tag: by_tag(found["history"]).get(tag) for tag in expected} == expected
    assert by_tag(found["history"]).keys() == {t for t in board if not t.startswith("summary/")}
    assert found["summary"]["k"] == 4 and found["summary"]["status"] == "done" and found["job_type"] == "export"
    assert found["artifacts"] == {"run-report": {"type": "report", "files": {"page.html": page.stat().st_size}}}


@pytest.mark.slow
def test_a_two_run_sweep_tracks_each_run_and_exports_its_table(tmp_path, home, capsys):
    sweep = tmp_path / "sw"  # two workers: the sink factory travels to each in its job's payload
    code, _, err = run_main(["sweep", "--out", str(sweep), "--seed", "0,1", "--steps", "20", "--workers", "2",
                             "--track", "tensorboard", *TINY_FLAGS], capsys)
    assert code == 0, err
    names = ["k4-nb24-s0", "k4-nb24-s1"]
    for name in names:
        assert tensorboard_scalars(sweep / name / "tensorboard", unique=True) == by_tag(metrics_by_step(sweep / name))
    code, out, _ = run_main(["export", str(sweep), "--to", "wandb"], capsys)
    assert code == 0, out
    runs = wandb_runs(sweep / "exports" / "wandb")
    assert sorted(runs) == names and {r["group"] for r in runs.values()} == {"sw"}
    from interp.sweeps.sweep import Sweep

    table = Sweep.open(sweep).table(circuits=True)
    for row in table.to_dict("records"):
        found = runs[row["run"]]
        assert {k: v for k, v in by_tag(found["history"]).items() if k in by_tag(metrics_by_step(sweep / row["run"]))} \
            == by_tag(metrics_by_step(sweep / row["run"]))
        numbers = {k: float(v) for k, v in row.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
                   and not math.isnan(v)}
        assert {k: found["summary"].get(k) for k in numbers} == numbers
        assert found["config"]["axes"] == {"seed": row["seed"]}


@pytest.mark.slow
def test_a_small_fork_family_tracks_each_fork_and_exports_its_table(tmp_path, home, capsys):
    parent, family = tmp_path / "parent", tmp_path / "fam"
    assert main(["train", "--out", str(parent), "--steps", "40", "--save-optimizer", *TINY_FLAGS]) == 0
    code, _, err = run_main(["fork", str(parent), "--at", "20", "--arm", "minibatch,full_batch", "--steps", "10",
                             "--out", str(family), "--track", "wandb", "--quiet"], capsys)
    assert code == 0, err
    runs = wandb_runs(family)
    assert sorted(runs) == ["at20-full_batch-s0", "at20-minibatch-s0"]
    for name, found in runs.items():
        assert found["history"] == metrics_by_step(family / name)  # from the fork's first row, at step 20
        assert found["group"] == "fam" and found["job_type"] == "fork"
    code, out, _ = run_main(["export", str(family), "--to", "tensorboard"], capsys)
    assert code == 0, out
    from interp.forks.family import ForkFamily

    for row in ForkFamily.open(family).table(circuits=True).to_dict("records"):
        board = tensorboard_scalars(family / "exports" / "tensorboard" / row["run"], unique=True)
        assert {k: v for k, v in board.items() if not k.startswith("summary/")} == by_tag(metrics_by_step(family / row["run"]))
        assert board["summary/fork_step"] == {30: 20.0} and board["summary/horizon"] == {30: 10.0}


def test_export_again_replaces_refuses_a_folder_inside_a_run_and_a_run_being_trained(tmp_path, capsys):
    """Issue 54: exporting twice to one TensorBoard folder gives each point once; an --out inside a run, a sweep or a
    family (its root, its checkpoints) is refused; a run another process trains is refused (exit 1), nothing
    written; a cache entry replaced by a folder is named."""
    from tests.helpers import DEMO

    run = copy_run(DEMO, tmp_path / "demo", cache=False)
    out = tmp_path / "tb"
    for _ in range(2):
        code, _, err = run_main(["export", str(run), "--to", "tensorboard", "--out", str(out)], capsys)
        assert code == 0, err
    points = tensorboard_scalars(out / "demo", unique=True)  # no tag has two events at one step
    assert points and len(list((out / "demo").glob("events.*"))) == 1
    for inside in (run, run / "checkpoints"):
        code, _, err = run_main(["export", str(DEMO), "--to", "tensorboard", "--out", str(inside)], capsys)
        assert code == 2 and "lies inside" in err and len(err.strip().splitlines()) == 1, err
    assert not list((run / "checkpoints").glob("events.*")) and not list(run.glob("events.*"))
    (run / "cache" / "sensitivity" / "x").mkdir(parents=True)
    (run / "cache" / "sensitivity" / "x" / "step_0000050.json").mkdir()
    code, text, err = run_main(["export", str(run), "--to", "tensorboard", "--out", str(out)], capsys)
    assert code == 0 and "step_0000050.json is not a file" in text + err
    from interp.runs import Run

    held = Run.open(run)
    held.acquire()  # this process trains it, as far as the lock says
    try:
        import subprocess
        import sys

        proc = subprocess.run([sys.executable, "-m", "interp.cli", "export", str(run), "--to", "tensorboard", "--out",
                               str(tmp_path / "tb2")], capture_output=True, text=True)
        assert proc.returncode == 1 and "is being trained by another process" in proc.stderr, proc.stderr
        assert not (tmp_path / "tb2").exists()
    finally:
        held.release()
