"""Shared fixtures. Runtime shape checking of every jaxtyping annotation in `interp` is switched
on by pytest's jaxtyping option in pyproject.toml (`--jaxtyping-packages=interp,beartype.beartype`),
which instruments the whole package before anything imports it."""

import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "2")

import pytest  # noqa: E402
import torch  # noqa: E402

from interp.model import ModelSpec  # noqa: E402
from interp.runs import Run  # noqa: E402
from interp.spec import RunSpec, TrainSpec  # noqa: E402
from interp.task import Task, TaskSpec  # noqa: E402


def small_spec(**overrides) -> RunSpec:
    """A run that trains in seconds: 2 layers of width 32 on K = 4, 24 bases."""
    spec = RunSpec(
        seed=0,
        task=TaskSpec(k=4, n_bases=24),
        model=ModelSpec(n_layers=2, n_heads=2, d_model=32, d_head=16, d_mlp=64),
        train=TrainSpec(steps=40, batch_size=16, eval_every=10, eval_size=64, checkpoint_every=20),
    )
    return spec.override(**overrides)


DEMO = Path(__file__).resolve().parents[1] / "checkpoints" / "demo"  # shipped with the repository


@pytest.fixture
def demo_run():
    """The shipped demo run (read only: the tests that change it work on a copy)."""
    return Run.open(DEMO)


@pytest.fixture
def small_task() -> Task:
    return Task.generate(TaskSpec(k=4, n_bases=12), seed=3)


@pytest.fixture(autouse=True)
def _deterministic_threads():
    torch.set_num_threads(2)
    yield
