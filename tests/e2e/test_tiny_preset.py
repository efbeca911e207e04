"""End to end: the tiny preset trains through a plateau at log K and then snaps (issue part 7).

One of the end-to-end tests (tests/e2e: about 1.5 minutes on 2 CPU cores); `pytest -m "not e2e"`
leaves them out, plain `pytest` (the CI command) runs everything.
"""

import time

from interp.presets import preset
from interp.runs import Run
from interp.train import train
from tests.helpers import assert_plateau_then_snap


def test_tiny_preset_plateau_then_snap(tmp_path):
    run = Run.create(tmp_path / "tiny", preset("tiny"))
    start = time.perf_counter()
    result = train(run, progress=False)
    seconds = time.perf_counter() - start
    span, snap = assert_plateau_then_snap(run)
    print(f"tiny preset: {seconds:.0f} s, {result.last_step} steps, plateau {span}, snap at {snap}")
