"""A new arm is one class, registered: `sign_flip`, defined only here (no file of interp/ names it),
forks a tiny family beside the built-in arms, trains with its own gradients, and has its own row
in the comparison of arms, at the place its `order` says.

The parent is the 60-step tiny model of tests/fork_families.py (it stays on the plateau); the
family forks it at step 20 under minibatch, sign_flip and full_batch (seed 0) for 10 steps.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from interp.forks.arms import ARMS, Arm, make_arm, parse_arms, register
from interp.forks.family import ForkFamily
from interp.runs import Run
from interp.sweeps.fits import CensoredRunsWarning
from interp.sweeps.forks import forks
from interp.train import train
from tests.fork_families import parent_spec

INTERP = Path(__file__).resolve().parents[2] / "interp"


class SignFlip(Arm):
    """Gradient ascent: the minibatch gradient, negated, in both moments."""

    name = "sign_flip"
    doc = "-g_B in both moments"
    order = 1.5  # between minibatch (1) and full_batch (2)

    def gradients(self, step) -> tuple:
        loss, g = step.minibatch_gradient()
        flipped = [-x for x in g]
        return loss, None, flipped, flipped


@pytest.fixture
def sign_flip():
    register(SignFlip)
    try:
        yield SignFlip
    finally:
        ARMS.pop(SignFlip.name)


def test_a_registered_arm_forks_trains_and_has_its_own_row(sign_flip, tmp_path):
    assert not any("sign_flip" in p.read_text() for p in INTERP.rglob("*.py"))
    arm = make_arm("sign_flip")
    assert isinstance(arm, SignFlip) and arm.explicit and not arm.seedless

    torch.set_num_threads(2)  # as every test runs: the replay of the parent's state must match it
    parent = Run.create(tmp_path / "parent", parent_spec())
    train(parent, progress=False)
    family = ForkFamily.create(Run.open(parent.path), ["20"], parse_arms("minibatch,sign_flip,full_batch"), [0], 10,
                               tmp_path / "family")
    outcome = family.train(workers=1, progress=False)
    assert [r["state"] for r in outcome.results] == ["done"] * 3

    table = family.table()
    assert list(table["arm"]) == ["minibatch", "sign_flip", "full_batch"]
    assert set(table["status"]) == {"done"}
    flipped = Run.open(tmp_path / "family" / "at20-sign_flip-s0")
    assert flipped.fork["arm"] == "sign_flip"
    # its own step: the same batch stream as minibatch's fork, the other way
    same = Run.open(tmp_path / "family" / "at20-minibatch-s0")
    start = same.state_dict(20)["embed.W_E"]
    up, down = flipped.state_dict(30)["embed.W_E"] - start, same.state_dict(30)["embed.W_E"] - start
    assert float((up * down).sum()) < 0

    with pytest.warns(CensoredRunsWarning):  # nothing escapes within 10 steps
        comparison = forks(table)
    assert list(comparison.rows["label"]) == ["minibatch", "sign_flip", "full_batch"]
    assert "sign_flip" in comparison.summary()
