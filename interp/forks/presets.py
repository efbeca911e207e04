"""Named fork designs: a parent run and the forks made from it (`analyses/forks.py`).

`forks-tiny` is the author's design (docs/forks.md) on a small run, calibrated to
finish on 2 CPU cores with 2 workers within 20 minutes, parent included: fork at tau/2; arms
minibatch, full_batch, measured_noise, isotropic_noise, v_only_noise and reset_optimizer;
3 fork seeds; the realised update power sampled over the first steps. The full-gradient arms
cost about D / batch_size minibatch steps a step, hence the small D.
"""

from __future__ import annotations

from dataclasses import dataclass

from interp.errors import InterpError
from interp.presets import preset
from interp.spec import RunSpec


@dataclass(frozen=True)
class ForkDesign:
    parent: RunSpec
    at: str
    arms: str
    seeds: tuple[int, ...]
    horizon: int
    gamma_every: int
    gamma_window: int
    settings: tuple[tuple[str, object], ...] = ()  # how the forks are recorded (interp.forks.fork.STORAGE)
    workers: int = 2


FORK_PRESETS: dict[str, ForkDesign] = {
    "forks-tiny": ForkDesign(
        parent=preset("tiny").override(n_bases=100, d_model=64, d_head=16, d_mlp=256, steps=3000,
                                       checkpoint_every=25, early_checkpoints=False, densify=False,
                                       stop_after_snap=100),
        at="tau/2",
        arms="minibatch,full_batch,measured_noise,isotropic_noise,v_only_noise,reset_optimizer",
        seeds=(0, 1, 2),
        horizon=500,
        gamma_every=10,
        gamma_window=100,
        settings=(("eval_every", 5),),  # escapes timed to 5 steps
    ),
}


def fork_preset(name: str) -> ForkDesign:
    try:
        return FORK_PRESETS[name]
    except KeyError:
        raise InterpError(f"unknown fork preset {name!r}; available: {', '.join(FORK_PRESETS)}") from None
