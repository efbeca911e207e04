"""Run folders: bit-exact round trips, resume equals uninterrupted, corruption is contained."""

import json

import pytest
import torch

from interp.errors import InterpError
from interp.runs import METRICS_FILE, RESUME_FILE, Run
from interp.train import scheduled_checkpoint, train
from interp.transition import tau
from tests.helpers import cloned_params, small_spec


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Run:
    run = Run.create(tmp_path_factory.mktemp("runs") / "full", small_spec())
    train(run, progress=False)
    return run


def test_round_trip_is_bit_exact(tmp_path):
    from interp.model import build_model, tl_major
    from interp.task import VOCAB_SIZE

    spec = small_spec()
    run = Run.create(tmp_path / "r", spec)
    model = build_model(spec.model, run.task.layout.length, VOCAB_SIZE, seed=11)
    run.save_checkpoint(7, model)
    loaded = run.model(7)
    a, b = cloned_params(model), cloned_params(loaded)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not loaded.training
    assert type(loaded).__name__ == ("TransformerBridge" if tl_major() >= 4 else "HookedTransformer")


def test_run_api(trained):
    assert trained.steps == sorted(trained.steps) and trained.steps[0] == 0 and trained.steps[-1] == 40
    # log-spaced early steps below checkpoint_every, then every checkpoint_every
    assert {1, 2, 4, 8, 16, 20, 40} <= set(trained.steps)
    df = trained.metrics
    assert list(df["step"]) == sorted(df["step"]) and df["step"].is_unique
    assert {"loss", "loss_first", "loss_cand", "shuffle_gap", "acc_first", "acc_cand", "lr"} <= set(df)
    assert set(trained.steps) <= set(df["step"])  # every checkpoint has its metrics row
    assert trained.model("last").cfg.n_layers == 2
    assert trained.task.sha256() == trained.info["task_sha256"]
    tau(trained)  # None or a step: it must not fail on a run that has not snapped


def test_resumed_run_equals_uninterrupted(tmp_path, trained):
    run = Run.create(tmp_path / "interrupted", small_spec())
    # "killed" at step 35: after the checkpoint at 20 and the evaluation (not checkpoint) at 30
    train(run, progress=False, stop_at=35)
    assert run.steps[-1] == 20 and run.metrics["step"].max() == 30
    resumed = Run.open(run.path)
    train(resumed, progress=False)
    a, b = cloned_params(trained.model(40)), cloned_params(resumed.model(40))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert trained.steps == resumed.steps
    cols = [c for c in trained.metrics if c != "seconds"]
    left, right = trained.metrics[cols], resumed.metrics[cols]
    assert left.equals(right)


def test_truncated_checkpoint_gives_a_clear_error_and_spares_the_rest(tmp_path):
    run = Run.create(tmp_path / "r", small_spec(steps=20))
    train(run, progress=False)
    victim = run.path / "checkpoints" / "step_0000008.safetensors"
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])
    with pytest.raises(InterpError, match="step_0000008.safetensors is corrupt or truncated"):
        run.model(8)
    assert 8 in run.steps
    run.model(4)
    run.model(20)
    assert len(run.metrics) > 0


def test_missing_step_names_the_nearest_saved(trained):
    with pytest.raises(InterpError, match=r"step 17 is not saved .* nearest saved: 16, 20"):
        trained.model(17)


def test_run_without_checkpoints_and_missing_folders(tmp_path):
    run = Run.create(tmp_path / "empty", small_spec())
    with pytest.raises(InterpError, match="no saved checkpoints"):
        run.model("last")
    with pytest.raises(InterpError, match="no run folder"):
        Run.open(tmp_path / "nope")
    (tmp_path / "plain").mkdir()
    with pytest.raises(InterpError, match="not a run folder"):
        Run.open(tmp_path / "plain")
    with pytest.raises(InterpError, match="already holds a run"):
        Run.create(tmp_path / "empty", small_spec())


def test_partial_last_metrics_line_is_skipped(tmp_path):
    run = Run.create(tmp_path / "r", small_spec(steps=10))
    train(run, progress=False)
    n = len(run.metrics)
    with open(run.path / METRICS_FILE, "a") as f:
        f.write('{"step": 99, "loss": 1.')  # a write cut short by a crash
    assert len(run.metrics) == n


def test_task_hash_mismatch_is_detected(tmp_path):
    run = Run.create(tmp_path / "r", small_spec())
    info = json.loads((run.path / "run.json").read_text())
    info["task_sha256"] = "0" * 64
    (run.path / "run.json").write_text(json.dumps(info))
    with pytest.raises(InterpError, match="does not match its stored hash"):
        Run.open(run.path).task


def test_checkpoints_are_safetensors_not_pickle(trained):
    for path in list((trained.path / "checkpoints").iterdir()) + [trained.path / RESUME_FILE]:
        data = path.read_bytes()
        header_len = int.from_bytes(data[:8], "little")
        json.loads(data[8 : 8 + header_len])  # a safetensors header: JSON, no code
        assert not data.startswith(b"\x80") and b"PK\x03\x04" not in data[:4]


def test_checkpoint_schedule():
    spec = small_spec(steps=100, checkpoint_every=20).train
    saved = [s for s in range(101) if scheduled_checkpoint(s, spec)]
    assert saved == [0, 1, 2, 4, 8, 16, 20, 40, 60, 80, 100]


def test_float16_checkpoints_load_as_float32_and_resume_stays_exact(tmp_path, trained):
    run = Run.create(tmp_path / "half", small_spec(checkpoint_dtype="float16"))
    train(run, progress=False, stop_at=35)
    train(Run.open(run.path), progress=False)
    half, full = run.model(40), trained.model(40)
    for (name, a), (_, b) in zip(half.named_parameters(), full.named_parameters()):
        assert a.dtype == torch.float32
        torch.testing.assert_close(a, b, atol=1e-2, rtol=1e-3, msg=name)
    assert (run.path / "checkpoints" / "step_0000040.safetensors").stat().st_size < 0.6 * (
        trained.path / "checkpoints" / "step_0000040.safetensors").stat().st_size
    # the resume state is float32, so an interrupted float16 run trains the same weights
    from interp.model import tl_params  # the checkpoint's names on either TransformerLens

    resumed = run.load_resume().params
    for name, p in tl_params(full).items():
        assert torch.equal(resumed[name], p.detach())


def test_written_files_are_readable_by_others(tmp_path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        run = Run.create(tmp_path / "r", small_spec(steps=2, eval_every=1, checkpoint_every=1))
        train(run, progress=False)
    finally:
        os.umask(old)
    for path in [run.path / "run.json", run.path / "manifest.json", *(run.path / "checkpoints").iterdir()]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
