"""The bf16 guard's rule (interp.precision.guard_verdict) on planted per-seed rows."""

import pytest

from interp.errors import InterpError
from interp.precision import guard_verdict


def rows(taus, heights=(0.99, 0.99, 0.99), heads=("L0H3", "L0H1", "L0H2")):
    return [{"tau_half": t, "plateau_height": h, "routing_head": r} for t, h, r in zip(taus, heights, heads)]


def test_taus_inside_the_float32_spread_pass():
    v = guard_verdict(rows([900, 1000, 1100]), rows([850, 1050, 1000], heads=("L0H3", "L1H0", "L0H2")))
    assert v["passes"] and v["float32_range"] == [900, 1100] and v["allowed_each"] == [800, 1200]
    assert v["bf16_mean"] == pytest.approx(966.67, abs=0.01) and v["same_head"] == 2


@pytest.mark.parametrize("bf16_taus,why", [
    ([700, 1000, 1050], "one tau beyond the widened range"),
    ([1150, 1190, 1180], "each inside the widened range, the mean above the range"),
    ([900, None, 1000], "a bf16 run that never snapped"),
])
def test_taus_outside_fail(bf16_taus, why):
    v = guard_verdict(rows([900, 1000, 1100]), rows(bf16_taus))
    assert not v["tau"] and not v["passes"], why


def test_plateau_height_is_compared_seed_by_seed():
    assert guard_verdict(rows([900, 1000, 1100]), rows([900, 1000, 1100], heights=(0.99, 0.975, 1.0)))["height"]
    v = guard_verdict(rows([900, 1000, 1100]), rows([900, 1000, 1100], heights=(0.99, 0.96, 0.99)))
    assert v["tau"] and not v["height"] and not v["passes"]


def test_mismatched_or_unsnapped_float32_runs_are_refused():
    with pytest.raises(InterpError, match="same seeds"):
        guard_verdict(rows([900, 1000, 1100]), rows([900, 1000]))
    with pytest.raises(InterpError, match="did not snap"):
        guard_verdict(rows([900, None, 1100]), rows([900, 1000, 1100]))
