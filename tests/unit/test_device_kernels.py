"""Deterministic kernels are asked for on the CPU only (`interp.devices.deterministic_kernels`): on CUDA, torch's
deterministic mode raises at the first cuBLAS product unless CUBLAS_WORKSPACE_CONFIG was set before the GPU was
first used, so the Hessian, the update and the LLC analyses would fail on any GPU. No CUDA device is needed: the
'meta' device stands for a device that is not the CPU, and the real code paths run on it up to their first copy
back to the host."""

from __future__ import annotations

import pytest
import torch

from interp.analysis import hvp, llc
from interp.devices import deterministic_kernels
from interp.model import build_model
from interp.spec import VOCAB_SIZE
from interp.task import Task
from tests.helpers import tiny_spec


@pytest.fixture
def switched(monkeypatch):
    """Every value torch.use_deterministic_algorithms is called with, in order (the call still happens)."""
    seen: list[bool] = []
    real = torch.use_deterministic_algorithms

    def spy(mode, *args, **kwargs):
        seen.append(bool(mode))
        return real(mode, *args, **kwargs)

    monkeypatch.setattr(torch, "use_deterministic_algorithms", spy)
    return seen


@pytest.mark.parametrize("before", [False, True])
def test_on_the_cpu_deterministic_kernels_are_on_inside_and_given_back(before):
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(before)
    try:
        for device in ("cpu", torch.device("cpu")):
            with deterministic_kernels(device):
                assert torch.are_deterministic_algorithms_enabled()
            assert torch.are_deterministic_algorithms_enabled() is before
    finally:
        torch.use_deterministic_algorithms(was)


@pytest.mark.parametrize("device", ["cuda", "cuda:1", torch.device("cuda", 0), "meta", "mps"])
def test_elsewhere_they_are_left_as_they_are(device, switched):
    with deterministic_kernels(device):
        assert not torch.are_deterministic_algorithms_enabled()
    assert switched == []


def test_a_hessian_product_off_the_cpu_leaves_deterministic_mode_off(switched):
    spec = tiny_spec(n_bases=4, n_layers=1, d_model=8)
    task = Task.generate(spec.task, spec.seed)
    model = build_model(spec.model, task.layout.length, VOCAB_SIZE, seed=0).to("meta")
    op = hvp.HessianOperator(model, task.tokens, task.layout.loss_pos)
    assert op.device.type == "meta"
    # the product ran on the device up to its copy to the host (TL 3), or until TL 4's bridge met a CPU tensor there
    with pytest.raises((NotImplementedError, RuntimeError), match="meta"):
        op.hvp(torch.ones(op.dim, dtype=torch.float64))
    assert True not in switched
    cpu = hvp.HessianOperator(build_model(spec.model, task.layout.length, VOCAB_SIZE, seed=0), task.tokens,
                              task.layout.loss_pos)
    cpu.hvp(torch.ones(cpu.dim, dtype=torch.float64))
    assert switched[0] is True  # on the CPU the product is deterministic, as before


def test_the_llc_sampler_off_the_cpu_leaves_deterministic_mode_off(switched):
    with llc._quiet_and_isolated("meta"):
        assert not torch.are_deterministic_algorithms_enabled()
    assert switched == []
    with llc._quiet_and_isolated("cpu"):
        assert torch.are_deterministic_algorithms_enabled()
    assert switched == [True, False]
