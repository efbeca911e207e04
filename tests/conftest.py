"""Test setup: runtime shape checking of every jaxtyping annotation in `interp`, shared fixtures."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "2")

from jaxtyping import install_import_hook  # noqa: E402

# Every annotated function of the package is checked at call time (jaxtyping + beartype).
with install_import_hook("interp", "beartype.beartype"):
    import interp  # noqa: F401
    import interp.analysis.ablation  # noqa: F401
    import interp.analysis.attention  # noqa: F401
    import interp.analysis.cache  # noqa: F401
    import interp.analysis.common  # noqa: F401
    import interp.analysis.groups  # noqa: F401
    import interp.analysis.patching  # noqa: F401
    import interp.analysis.sensitivity  # noqa: F401
    import interp.analysis.suite  # noqa: F401
    import interp.cli  # noqa: F401
    import interp.incremental  # noqa: F401
    import interp.io  # noqa: F401
    import interp.metrics  # noqa: F401
    import interp.model  # noqa: F401
    import interp.plots  # noqa: F401
    import interp.presets  # noqa: F401
    import interp.report  # noqa: F401
    import interp.runs  # noqa: F401
    import interp.seeding  # noqa: F401
    import interp.spec  # noqa: F401
    import interp.summary  # noqa: F401
    import interp.task  # noqa: F401
    import interp.timelines  # noqa: F401
    import interp.train  # noqa: F401
    import interp.transition  # noqa: F401

import pytest  # noqa: E402
import torch  # noqa: E402

from interp.model import ModelSpec  # noqa: E402
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


@pytest.fixture
def small_task() -> Task:
    return Task.generate(TaskSpec(k=4, n_bases=12), seed=3)


@pytest.fixture(autouse=True)
def _deterministic_threads():
    torch.set_num_threads(2)
    yield
