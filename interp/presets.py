"""Named configurations. Any field can be overridden (`RunSpec.override`, or CLI flags)."""

from __future__ import annotations

from interp.errors import InterpError
from interp.spec import ModelSpec, RunSpec, TaskSpec, TrainSpec

DEFAULT_PRESET = "tiny"  # what `interp train` and `interp sweep` use without --preset

PRESETS: dict[str, RunSpec] = {
    # the paper's run (docs/definitions.md, "Model and training"): K = 10, D = 10,000, 4 layers x 4 heads.
    "paper": RunSpec(
        seed=0,
        task=TaskSpec(k=10, n_bases=1000),
        model=ModelSpec(n_layers=4, n_heads=4, d_model=128, d_head=32, d_mlp=512),
        train=TrainSpec(steps=10000, lr=1e-3, batch_size=128, eval_every=50, checkpoint_every=500),
    ),
    # Calibrated on the 2-core CPU: plateau, then snap, in at most 5 minutes (see docs/runs.md, "Presets").
    "tiny": RunSpec(
        seed=0,
        task=TaskSpec(k=10, n_bases=300),
        model=ModelSpec(n_layers=2, n_heads=4, d_model=128, d_head=32, d_mlp=512),
        train=TrainSpec(steps=3000, lr=3e-3, batch_size=128, eval_every=25, eval_size=256,
                        checkpoint_every=250, stop_after_snap=100),
    ),
}


def preset(name: str) -> RunSpec:
    try:
        return PRESETS[name]
    except KeyError:
        raise InterpError(f"unknown preset {name!r}; available: {', '.join(PRESETS)}") from None
