"""tau, onsets and plateau statistics on synthetic series with known answers."""

import math

import numpy as np
import pytest

from interp.transition import (
    onset,
    plateau_height,
    plateau_span,
    rise_onset,
    rise_threshold,
    snap_step,
    tau_half,
    tau_window,
    window_bounds,
)

LOG_K = math.log(10)
STEPS = np.arange(0, 2000, 50)


def _loss_curve(snap_at: int) -> np.ndarray:
    """Plateau at 1.02 log K, then a linear fall to 0.01 log K over 300 steps from `snap_at`."""
    frac = np.clip((STEPS - snap_at) / 300, 0, 1)
    return LOG_K * (1.02 - 1.01 * frac)


def test_tau_definitions_on_a_known_curve():
    lc = _loss_curve(1000)
    # 0.5 log K is crossed at 1000 + 300 * 0.52 / 1.01 = 1154.5 -> first evaluated step 1200
    assert tau_half(STEPS, lc, LOG_K) == 1200
    # > 0.95 log K last at 1000 + 300 * 0.07 / 1.01 = 1020.8 -> 1000; < 0.05 log K first at 1300
    assert window_bounds(STEPS, lc, LOG_K) == (1000, 1300)
    assert tau_window(STEPS, lc, LOG_K) == 300
    assert snap_step(STEPS, lc, LOG_K) == 1300
    assert plateau_height(STEPS, lc, LOG_K) == pytest.approx(1.02)
    assert plateau_span(STEPS, lc, np.zeros_like(lc), LOG_K) == (0, 1000)


def test_no_snap_gives_none_not_a_crash():
    flat = np.full(len(STEPS), LOG_K)
    assert tau_half(STEPS, flat, LOG_K) is None
    assert tau_window(STEPS, flat, LOG_K) is None
    assert snap_step(STEPS, flat, LOG_K) is None


def test_onset_of_a_clean_step():
    values = np.where(STEPS >= 600, 0.9, 0.1)
    assert onset(STEPS, values, threshold=0.5, m=3) == 600
    assert rise_onset(STEPS, values, fraction=0.2, m=2) == 600


def test_a_single_spike_is_not_an_onset():
    values = np.full(len(STEPS), 0.1)
    values[5] = 0.95  # one noisy evaluation
    values[20:] = 0.9  # the real rise at step 1000
    assert onset(STEPS, values, threshold=0.5, m=3) == 1000
    assert onset(STEPS, values, threshold=0.5, m=1) == 250  # with m = 1 the spike counts


def test_a_series_that_never_crosses_has_no_onset():
    values = np.linspace(0.0, 0.4, len(STEPS))
    assert onset(STEPS, values, threshold=0.5, m=2) is None
    assert onset(STEPS[:1], values[:1], threshold=0.5, m=2) is None  # shorter than m


def test_falling_series_and_relative_threshold():
    values = np.linspace(1.0, 0.0, len(STEPS))
    assert onset(STEPS, values, threshold=0.5, m=2, above=False) == STEPS[np.argmax(values < 0.5)]
    rising = np.concatenate([np.full(10, 0.2), np.full(len(STEPS) - 10, 1.0)])
    assert rise_threshold(rising, 0.25) == pytest.approx(0.4)


def test_bad_series_are_refused():
    with pytest.raises(ValueError, match="strictly increasing"):
        onset([0, 10, 10], [0, 1, 1], threshold=0.5)
    with pytest.raises(ValueError, match="one length"):
        onset([0, 10], [0, 1, 1], threshold=0.5)


def test_transition_steps_beyond_the_run_are_named(demo_run):
    # the demo's tau is 925 and its last step 1625: 2 tau lies beyond it
    from interp.analysis.common import select_steps

    notes: list[str] = []
    steps = [s for s, _ in select_steps(demo_run, "transition", notes=notes)]
    assert steps[0] == 250 and max(steps) <= 1625  # tau/4 = 231 snapped to the saved 250
    assert notes == ["transition steps at 2 τ (τ = 925) lie beyond the run (last step 1625)"]
