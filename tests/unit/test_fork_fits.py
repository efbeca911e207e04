"""The comparison of fork arms on hand-built fork family tables: medians, censoring, ratios, intervals."""

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from interp.errors import InterpError
from interp.sweeps import scaling
from interp.sweeps.forks import ForkComparison, forks
from interp.sweeps.scaling import CensoredRunsWarning

HORIZON = 4000


def fork_table(groups: dict, horizon: int = HORIZON, y: str = "escape_half") -> pd.DataFrame:
    """{(fork_step, arm, arm_params): [escape or None (censored at the horizon), ...]} -> one done row per run."""
    rows = []
    for (step, arm, params), escapes in groups.items():
        for seed, e in enumerate(escapes):
            cen = e is None
            rows.append(dict(
                run=f"f{step}-{arm}{'-' + params if params else ''}-s{seed}", status="done", error="",
                fork_step=step, arm=arm, arm_params=params, fork_seed=seed, horizon=horizon,
                steps_run=horizon, escape_half=math.nan, escape_snap=math.nan,
                censored_escape_half=False, censored_escape_snap=False, gamma=1.5 + 0.1 * seed, gamma_samples=10))
            rows[-1][y] = math.nan if cen else float(e)
            rows[-1][f"censored_{y}"] = cen
    return pd.DataFrame(rows)


def quiet(*args, **kwargs) -> ForkComparison:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return forks(*args, n_boot=400, **kwargs)


def row(res: ForkComparison, step: int, label: str) -> pd.Series:
    pick = res.rows[(res.rows["fork_step"] == step) & (res.rows["label"] == label)]
    assert len(pick) == 1, res.rows
    return pick.iloc[0]


MINI = [800.0, 1000.0, 1300.0, 900.0, 1200.0]
FULL = [300.0, 450.0, 380.0, 500.0, 420.0]


def basic() -> pd.DataFrame:
    return fork_table({(2000, "minibatch", ""): MINI, (2000, "full_batch", ""): FULL,
                       (2000, "lr", "c=0.5"): [1500.0, None, None]})


# ---------------------------------------------------------------------------- medians and censoring
def test_median_is_the_numpy_median_of_an_uncensored_group():
    res = quiet(basic())
    assert row(res, 2000, "minibatch")["median"] == np.median(MINI)
    r = row(res, 2000, "full_batch")
    assert r["median"] == np.median(FULL) and not r["median_censored"] and r["n"] == 5 and r["n_censored"] == 0


def test_a_mostly_censored_group_reports_a_lower_bound():
    res = quiet(basic())
    r = row(res, 2000, "lr:c=0.5")
    assert r["median_censored"] and r["n"] == 3 and r["n_censored"] == 2
    assert r["median"] == HORIZON                       # the lower bound: the smallest censored bound
    assert r["median"] != pytest.approx(np.mean([1500, HORIZON, HORIZON]))   # never a mean with steps_run as values
    line = next(ln for ln in res.summary().splitlines() if "lr:c=0.5" in ln)
    assert f">= {HORIZON:,}" in line
    # the bound never appears as a plain number in the median column
    assert line.split()[4] == ">="
    assert math.isinf(r["ci_high"]) and "> " in line


def test_censored_runs_are_never_averaged_in():
    """One censored run among five: the median is exact (an order statistic), and it is not what
    counting the censored run at its steps_run would give to a mean or to a median of four."""
    escapes = [100.0, 200.0, 300.0, 5000.0, None]
    res = quiet(fork_table({(0, "minibatch", ""): escapes}, horizon=600))
    r = row(res, 0, "minibatch")
    assert not r["median_censored"] and r["median"] == 300.0
    as_values = [100.0, 200.0, 300.0, 5000.0, 600.0]
    assert r["median"] != np.mean(as_values) and r["median"] != np.median([100.0, 200.0, 300.0, 5000.0])
    # the censored run's bound does not move the median, as long as it stays above it
    res2 = quiet(fork_table({(0, "minibatch", ""): escapes}, horizon=9000))
    assert row(res2, 0, "minibatch")["median"] == 300.0


def test_half_censored_even_group_is_a_lower_bound_between_the_middle_pair():
    res = quiet(fork_table({(0, "minibatch", ""): [100.0, 200.0, None, None]}, horizon=1000))
    r = row(res, 0, "minibatch")
    assert r["median_censored"] and r["median"] == (200.0 + 1000.0) / 2


def test_gamma_is_the_mean_of_the_finite_gammas():
    t = basic()
    t.loc[t["run"] == "f2000-minibatch-s0", "gamma"] = math.nan
    r = row(quiet(t), 2000, "minibatch")
    assert r["gamma_n"] == 4 and r["gamma"] == pytest.approx(np.mean([1.6, 1.7, 1.8, 1.9]))


# ---------------------------------------------------------------------------- ratios and intervals
def test_ratio_is_the_ratio_of_medians():
    res = quiet(basic())
    r = row(res, 2000, "full_batch")
    assert r["ratio"] == pytest.approx(np.median(FULL) / np.median(MINI)) and r["ratio_bound"] == ""
    assert r["ratio_low"] <= r["ratio"] <= r["ratio_high"] and r["ratio_high"] < 1   # full batch escapes faster
    c = row(res, 2000, "lr:c=0.5")
    assert c["ratio_bound"] == ">=" and c["ratio"] == pytest.approx(HORIZON / np.median(MINI))
    ref = row(res, 2000, "minibatch")
    assert ref["ratio"] == 1.0 and ref["ratio_bound"] == ""


def test_a_censored_reference_gives_upper_bounds():
    t = fork_table({(0, "minibatch", ""): [900.0, None, None], (0, "full_batch", ""): [300.0, 400.0, 500.0],
                    (0, "kick", "eps=0.01"): [None, None, None]}, horizon=3000)
    res = quiet(t)
    fb = row(res, 0, "full_batch")
    assert fb["ratio_bound"] == "<=" and fb["ratio"] == pytest.approx(400.0 / 3000.0)
    kick = row(res, 0, "kick:eps=0.01")
    assert kick["ratio_bound"] == "undefined" and math.isnan(kick["ratio"])
    assert "undefined" in res.summary()


def test_bootstrap_interval_contains_the_median_and_is_reproducible():
    t = basic()
    a, b, c = quiet(t, seed=0), quiet(t, seed=0), quiet(t, seed=1)
    for label in ("minibatch", "full_batch"):
        r = row(a, 2000, label)
        assert r["ci_low"] <= r["median"] <= r["ci_high"] and r["ci_low"] < r["ci_high"]
    pd.testing.assert_frame_equal(a.rows, b.rows)
    cols = ["ci_low", "ci_high", "ratio_low", "ratio_high"]
    assert not a.rows[cols].equals(c.rows[cols])


def test_not_done_rows_are_left_out_and_named():
    t = basic()
    extra = t.iloc[:2].copy()
    extra["run"] = ["broken-0", "killed-1"]
    extra["status"] = ["failed", "interrupted"]
    extra["escape_half"] = [1.0, 1.0]         # would drag the minibatch median down if counted
    t = pd.concat([t, extra], ignore_index=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CensoredRunsWarning)
        with pytest.warns(UserWarning, match="broken-0"):
            res = forks(t, n_boot=400)
    assert row(res, 2000, "minibatch")["median"] == np.median(MINI) and row(res, 2000, "minibatch")["n"] == 5
    assert res.n_excluded == 2
    note = next(n for n in res.notes if "not done" in n)
    assert "broken-0 (failed)" in note and "killed-1 (interrupted)" in note


def test_censored_runs_warn():
    with pytest.warns(CensoredRunsWarning, match="lower bounds"):
        forks(basic(), n_boot=400)


def test_reference_absent_at_one_fork_step_gives_nan_ratios_and_a_note():
    t = fork_table({(0, "minibatch", ""): MINI, (0, "full_batch", ""): FULL, (5000, "full_batch", ""): FULL})
    res = quiet(t)
    r = row(res, 5000, "full_batch")
    assert math.isnan(r["ratio"]) and math.isnan(r["ratio_low"]) and r["median"] == np.median(FULL)
    assert any("fork_step 5000" in n for n in res.notes)
    assert math.isfinite(row(res, 0, "full_batch")["ratio"])


# ---------------------------------------------------------------------------- bad input
def test_errors_name_what_is_wrong():
    t = basic()
    with pytest.raises(InterpError, match="fork_step.*censored_escape_half|censored_escape_half.*fork_step"):
        forks(t.drop(columns=["fork_step", "censored_escape_half"]))
    with pytest.raises(InterpError, match="unknown y 'tau_half'.*escape_half, escape_snap"):
        forks(t, y="tau_half")
    with pytest.raises(InterpError, match="'continue'.*minibatch, full_batch, lr:c=0.5"):
        quiet(t, reference="continue")
    with pytest.raises(InterpError, match="no run is done"):
        forks(t.assign(status="running"))
    with pytest.raises(InterpError, match="ci"):
        forks(t, ci=0.3)
    with pytest.raises(InterpError, match="n_boot"):
        forks(t, n_boot=10)


# ---------------------------------------------------------------------------- outputs
def test_to_dict_is_json_and_exported_from_scaling():
    res = quiet(basic())
    d = json.loads(json.dumps(res.to_dict()))
    assert d["reference"] == "minibatch" and len(d["rows"]) == 3
    lr = next(r for r in d["rows"] if r["label"] == "lr:c=0.5")
    assert lr["median_censored"] is True and lr["ci_high"] is None      # +inf -> None (unbounded)
    assert scaling.forks is forks and scaling.ForkComparison is ForkComparison


def test_figure_has_one_trace_per_arm():
    pytest.importorskip("plotly")
    from interp.plots.forks import fork_escapes

    t = basic()
    t = pd.concat([t, fork_table({(6000, "minibatch", ""): MINI, (6000, "full_batch", ""): FULL})], ignore_index=True)
    fig = fork_escapes(quiet(t))
    names = [tr.name for tr in fig.data]
    assert names == ["minibatch (reference)", "full_batch", "lr:c=0.5"]
    assert fig.layout.yaxis.type == "log"
    lr = fig.data[2]
    assert lr.marker.symbol[0] == "triangle-up-open" and "censored: > 4,000" in lr.text[0]
    assert list(fig.data[0].x) == ["2000", "6000"]
