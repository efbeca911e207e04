"""End to end: the tiny preset trains through a plateau at log K and then snaps (issue part 7).

This is the one slow test (a few minutes on 2 CPU cores): `pytest -m slow` runs it alone,
`pytest -m "not slow"` leaves it out, plain `pytest` (the CI command) runs everything.
"""

import time

import pytest

from interp.presets import preset
from interp.runs import Run
from interp.train import train
from interp.transition import plateau_span, snap_step


def assert_plateau_then_snap(run: Run) -> tuple[tuple[int, int], int]:
    df = run.metrics
    span = plateau_span(df["step"], df["loss_cand"], df["shuffle_gap"], run.log_k, tol=0.05, max_gap=0.05)
    assert span is not None, "no evaluation within 5% of log K with shuffle gap < 0.05"
    assert span[1] - span[0] >= 100, f"plateau only spans steps {span}"
    snap = snap_step(df["step"], df["loss_cand"], run.log_k)
    assert snap is not None, f"candidate loss never fell below 0.05 log K (last {df['loss_cand'].iloc[-1]:.3f})"
    assert snap > span[1]
    return span, snap


@pytest.mark.slow
def test_tiny_preset_plateau_then_snap(tmp_path):
    run = Run.create(tmp_path / "tiny", preset("tiny"))
    start = time.perf_counter()
    result = train(run, progress=False)
    seconds = time.perf_counter() - start
    span, snap = assert_plateau_then_snap(run)
    print(f"tiny preset: {seconds:.0f} s, {result.last_step} steps, plateau {span}, snap at {snap}")
