"""A real, tiny fork family for the report tests (about 15 s on 2 CPU threads).

The parent is the 60-step tiny model of tests/fork_arithmetic.py (`_spec`), which stays on the
plateau; its forks at steps 20 and 40 under minibatch, full_batch and v_only_noise (seeds 0
and 1) run 20 steps, never escape and are therefore censored, and sample Gamma every 5 steps.
"""

from __future__ import annotations

from pathlib import Path

import torch

from interp.forks.arms import parse_arms
from interp.forks.family import ForkFamily
from interp.presets import preset
from interp.runs import Run
from interp.train import train

ARMS = "minibatch,full_batch,v_only_noise:s=0.5"
LABELS = ("minibatch", "full_batch", "v_only_noise:s=0.5")


def parent_spec():
    return preset("tiny").override(n_bases=20, k=4, n_layers=1, d_model=32, d_head=8, n_heads=2, d_mlp=64,
                                   steps=60, eval_every=10, checkpoint_every=10, eval_size=32, batch_size=16,
                                   stop_after_snap=None, dense_until=0)


def make_family(root: Path) -> ForkFamily:
    """Train the parent in root/parent and the family in root/family; returns the family."""
    torch.set_num_threads(2)  # as every test runs: the replay of the parent's state must match it
    parent = Run.create(root / "parent", parent_spec())
    train(parent, progress=False)
    family = ForkFamily.create(Run.open(root / "parent"), ["20", "40"], parse_arms(ARMS), [0, 1], 20,
                               root / "family", gamma_every=5)
    family.train(workers=1, progress=False)
    return family
