"""--precision bf16: autocast in the training step only, float32 everywhere else, resumed bit
for bit, refused on hardware without bfloat16 units unless emulation is asked for."""

import json
import subprocess
import sys

import pytest
import torch

from interp.errors import InterpError
from interp.precision import EMULATION_ENV, Autocast, bf16_hardware, check_precision
from interp.runs import Run
from interp.spec import RunSpec
from interp.train import train
from tests.helpers import TINY_FLAGS, cloned_params, small_spec

HARDWARE, FOUND = bf16_hardware("cpu")


@pytest.fixture
def emulated(monkeypatch):
    monkeypatch.setenv(EMULATION_ENV, "1")


@pytest.fixture
def bf16_run(tmp_path_factory, emulated):
    run = Run.create(tmp_path_factory.mktemp("bf16") / "run", small_spec(precision="bf16"))
    train(run, progress=False)
    return run


def test_the_spec_records_bf16_and_leaves_float32_specs_unchanged():
    spec = small_spec(precision="bf16")
    assert spec.to_dict()["train"]["precision"] == "bf16"
    assert "precision" not in small_spec().to_dict()["train"]  # the hashes of older runs stay the same
    assert RunSpec.from_dict(spec.to_dict()) == spec and RunSpec.from_dict(small_spec().to_dict()) == small_spec()
    with pytest.raises(InterpError, match="unknown precision 'fp8'; allowed: float32, bf16"):
        small_spec(precision="fp8").validate()


def test_autocast_computes_matrix_products_in_bf16_and_returns_float32():
    gen = torch.Generator().manual_seed(0)  # its own draws: never the global stream other tests leave behind
    linear = torch.nn.Linear(8, 3)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(3, 8, generator=gen))
        linear.bias.copy_(torch.randn(3, generator=gen))
    x = torch.randn(4, 8, generator=gen)
    out = Autocast(linear, "cpu")(x)
    assert out.dtype == torch.float32
    want = (x.bfloat16() @ linear.weight.bfloat16().T + linear.bias.bfloat16()).float()
    # the reference rounds the sum to bf16 once more than autocast's float32 accumulation may: one bf16 ulp apart
    assert torch.allclose(out, want, atol=1e-2, rtol=2 ** -7) and not torch.equal(out, linear(x))


@pytest.mark.slow  # bf16 training, emulated on a CPU without bf16 units: about 8x slower there (AVX2)
def test_bf16_training_changes_the_arithmetic_not_the_format(bf16_run, tmp_path):
    f32 = Run.create(tmp_path / "f32", small_spec())
    train(f32, progress=False)
    a, b = cloned_params(bf16_run.model(40)), cloned_params(f32.model(40))
    assert all(t.dtype == torch.float32 for t in a.values())  # float32 master weights and checkpoints
    assert any(not torch.equal(a[k], b[k]) for k in a)  # the step really ran in bf16
    info = json.loads((bf16_run.path / "run.json").read_text())
    assert info["spec"]["train"]["precision"] == "bf16"
    assert bf16_run.steps == f32.steps
    sessions = bf16_run.info.get("training") or info.get("training")
    assert sessions and all(s["precision"] == "bf16" for s in sessions)


@pytest.mark.slow  # bf16 training, emulated on a CPU without bf16 units: about 8x slower there (AVX2)
def test_bf16_run_resumes_bit_exactly(bf16_run, tmp_path, emulated):
    run = Run.create(tmp_path / "interrupted", small_spec(precision="bf16"))
    train(run, progress=False, stop_at=35)
    assert run.steps[-1] == 20
    resumed = Run.open(run.path)
    assert resumed.spec.train.precision == "bf16"  # the resume keeps it
    train(resumed, progress=False)
    a, b = cloned_params(bf16_run.model(40)), cloned_params(resumed.model(40))
    assert all(torch.equal(a[k], b[k]) for k in a)
    cols = [c for c in bf16_run.metrics if c != "seconds"]
    assert bf16_run.metrics[cols].equals(resumed.metrics[cols])


@pytest.mark.slow  # bf16 training, emulated on a CPU without bf16 units: about 8x slower there (AVX2)
def test_same_bf16_command_twice_gives_identical_weights(bf16_run, tmp_path, emulated):
    again = Run.create(tmp_path / "again", small_spec(precision="bf16"))
    train(again, progress=False)
    a, b = cloned_params(bf16_run.model(40)), cloned_params(again.model(40))
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.skipif(HARDWARE, reason=f"this CPU has bfloat16 units ({FOUND})")
def test_bf16_is_refused_without_bfloat16_units(tmp_path, monkeypatch):
    monkeypatch.delenv(EMULATION_ENV, raising=False)
    with pytest.raises(InterpError, match="needs bfloat16 matrix units on cpu; found .*INTERP_BF16_EMULATION=1"):
        check_precision("bf16", "cpu")
    check_precision("float32", "cpu")
    # the CLI: exit 2, one line, no folder
    out = tmp_path / "refused"
    env = {k: v for k, v in __import__("os").environ.items() if k != EMULATION_ENV}
    proc = subprocess.run([sys.executable, "-m", "interp.cli", "train", "--preset", "tiny", "--precision", "bf16",
                           "--steps", "5", "--out", str(out), "--quiet"], capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "needs bfloat16 matrix units" in proc.stderr and not out.exists()
    # a bf16 run made where emulation was allowed is refused on resume here, and nothing changes
    monkeypatch.setenv(EMULATION_ENV, "1")
    run = Run.create(tmp_path / "r", small_spec(precision="bf16", steps=10))
    train(run, progress=False, stop_at=5)
    before = {p.name: p.read_bytes() for p in run.path.rglob("*") if p.is_file()}
    proc = subprocess.run([sys.executable, "-m", "interp.cli", "train", "--resume", "--out", str(run.path), "--quiet"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "needs bfloat16 matrix units" in proc.stderr
    assert {p.name: p.read_bytes() for p in run.path.rglob("*") if p.is_file()} == before


@pytest.mark.skipif(not HARDWARE, reason=f"this CPU has no bfloat16 units ({FOUND})")
@pytest.mark.slow  # 5 s: a bf16 training subprocess; both branches are faked in tests/unit/test_precision_hardware.py
def test_bf16_is_accepted_with_bfloat16_units(tmp_path):
    """The counterpart of the refusal above, on a CPU that has the units (avx512_bf16 / amx_bf16): no emulation
    asked for, the CLI trains in bf16 and records it."""
    out = tmp_path / "accepted"
    env = {k: v for k, v in __import__("os").environ.items() if k != EMULATION_ENV}
    proc = subprocess.run([sys.executable, "-m", "interp.cli", "train", "--precision", "bf16", "--steps", "2",
                           "--out", str(out), *TINY_FLAGS], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    run = Run.open(out)
    assert run.spec.train.precision == "bf16" and run.steps[-1] == 2
    assert all(s.get("precision") == "bf16" for s in run.info["training"])
