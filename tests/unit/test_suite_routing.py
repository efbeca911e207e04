"""The suite reads the routing head from the sensitivity at the last step and then analyses that step: with
--no-cache the sensitivity there is computed once, not twice, and the tables are those of the cached path."""

import pandas as pd

from interp.analysis import sensitivity
from interp.analysis.suite import run_suite
from interp.runs import Run
from tests.helpers import copy_run

ONLY, STEPS = "sensitivity,usage", [20, 30]  # usage needs the routing head, read at the last step (30)


def test_the_routing_steps_sensitivity_is_computed_once_without_the_cache(tiny_run, tmp_path, monkeypatch):
    calls: list[int] = []
    real = sensitivity.at_step

    def counted(run, step, **params):
        calls.append(step)
        return real(run, step, **params)

    monkeypatch.setattr(sensitivity, "at_step", counted)
    fresh = run_suite(Run.open(copy_run(tiny_run(), tmp_path / "fresh", cache=False)), only=ONLY, steps=STEPS,
                      progress=False, cache=False)
    assert fresh.routing_step == 30 and sorted(calls) == [20, 30], calls  # not [20, 30, 30]
    assert fresh.cache_misses == 4 and fresh.cache_hits == 0  # sensitivity and usage at 2 steps, each computed once
    calls.clear()
    cached = run_suite(Run.open(copy_run(tiny_run(), tmp_path / "cached", cache=False)), only=ONLY, steps=STEPS,
                       progress=False)
    assert sorted(calls) == [20, 30] and cached.cache_hits == 0, (calls, cached.cache_hits)  # not read back either
    assert set(fresh.tables) == set(cached.tables)
    for name, df in cached.tables.items():
        pd.testing.assert_frame_equal(fresh.tables[name], df, obj=name)
    assert fresh.findings == cached.findings and fresh.params == cached.params
