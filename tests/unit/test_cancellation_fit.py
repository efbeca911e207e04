"""The selector-sharing fit (`interp.scaling.cancellation`) on synthetic sweep tables with a planted
exponent: recovery within the interval, an independent OLS, censoring, bad input."""

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from interp.errors import InterpError
from interp.sweeps import scaling
from interp.sweeps.scaling import CancellationFit, CensoredRunsWarning, cancellation
from tests.synthetic_sweeps import run_row, set_status

GROUPS = (1, 4, 10, 25, 50, 200)


def sharing_sweep(beta: float, groups=GROUPS, n_bases: int = 200, seeds: int = 3, tau1: float = 350.0,
                  sigma: float = 0.08, seed: int = 0, planned_steps: int = 100_000) -> pd.DataFrame:
    """tau = tau1 * G^beta * lognormal(sigma) per run, with the columns Sweep.table() writes for a
    task.selector_groups axis (G = n_bases written as the axis value, like the preset)."""
    rng = np.random.default_rng([seed, 31])
    rows = []
    for g in groups:
        for s in range(seeds):
            tau = tau1 * g ** beta * math.exp(sigma * rng.standard_normal())
            row = run_row(10, tau, seed=s, n_bases=n_bases, planned_steps=planned_steps, eval_every=1,
                          name=f"k10-nb{n_bases}-s{s}-sg{g}")
            rows.append({**row, "task.selector_groups": g, "bases_per_selector_set": g})
    return pd.DataFrame(rows)


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


@pytest.mark.parametrize("beta", [1.0, 0.0, 0.02])
@pytest.mark.parametrize("seed", [0, 1])
def test_recovers_a_planted_exponent(beta, seed):
    table = sharing_sweep(beta, seed=seed)
    fit = cancellation(table)
    assert isinstance(fit, CancellationFit)
    assert fit.ci[0] <= beta <= fit.ci[1]
    assert fit.ci[1] - fit.ci[0] < 0.2
    assert fit.beta == fit.delta == fit.exponent and fit.x == "bases_per_selector_set"
    # the point estimate is the plain OLS slope of log tau on log G (independent: numpy.polyfit)
    slope = np.polyfit(np.log(table["bases_per_selector_set"]), np.log(table["tau_half"]), 1)[0]
    assert fit.beta == pytest.approx(slope, abs=1e-9)
    assert fit.n_used == len(table) and fit.n_censored == 0
    assert fit.predicted_in_ci == (beta == 1.0)
    if beta in (0.0, 1.0):  # 0.02 is small enough for either
        assert fit.zero_in_ci == (beta == 0.0)


def test_per_set_table_and_serialization():
    table = sharing_sweep(1.0)
    fit = cancellation(table, n_boot=500)
    assert fit.per_set["bases_per_selector_set"].tolist() == list(GROUPS)
    geo = table.groupby("bases_per_selector_set")["tau_half"].apply(lambda v: float(np.exp(np.log(v).mean())))
    assert np.allclose(fit.per_set["geo_mean"], geo.to_numpy())
    d = json.loads(json.dumps(fit.to_dict()))
    assert d["fit"] == "cancellation" and d["paper"]["author_beta"] == 0.02 and d["paper"]["predicted_beta"] == 1.0
    assert d["beta"] == pytest.approx(fit.beta) and d["n_bases"] == [200] and len(d["per_set"]) == len(GROUPS)
    text = fit.summary()
    assert "beta = " in text and "author measured beta = 0.02" in text and "inside the CI" in text
    assert cancellation(table, n_boot=500).to_dict() == fit.to_dict()  # reproducible


def test_the_axis_alone_is_enough():
    """A table without the bases_per_selector_set column: G from the axis, unset G -> n_bases."""
    table = sharing_sweep(0.5).drop(columns=["bases_per_selector_set"])
    table["task.selector_groups"] = table["task.selector_groups"].astype(object)
    table.loc[table["task.selector_groups"] == 200, "task.selector_groups"] = None
    fit = cancellation(table, n_boot=500)
    assert sorted(set(fit.points["bases_per_selector_set"])) == list(GROUPS)
    # tau_half read off a sigmoid on a 10-step grid is a little biased; two seeds give a tight CI
    assert fit.beta == pytest.approx(0.5, abs=0.06)


def test_censored_runs_are_counted_and_left_out():
    # G = 200 runs would snap at 350 * 200 = 70,000 steps but only 40,000 are planned
    table = sharing_sweep(1.0, planned_steps=40_000)
    with pytest.warns(CensoredRunsWarning, match=r"3 censored run"):
        fit = cancellation(table)
    assert fit.n_censored == 3 and fit.n_used == len(table) - 3
    assert set(fit.censored_runs) == {f"k10-nb200-s{s}-sg200" for s in range(3)}
    assert "censored at 200 bases per set: 3" in fit.summary()
    not_done = set_status(sharing_sweep(1.0), ["k10-nb200-s0-sg1"], "failed")
    fit = _quiet(cancellation, not_done, n_boot=500)
    assert fit.n_excluded == 1 and fit.n_used == len(not_done) - 1


def test_pooling_other_sizes_is_warned_about():
    a, b = sharing_sweep(1.0), sharing_sweep(1.0, n_bases=400, seed=3)
    b["run"] = b["run"].str.replace("nb400", "nb400x")
    with pytest.warns(UserWarning, match=r"differ in n_bases"):
        cancellation(pd.concat([a, b], ignore_index=True), n_boot=500)


def test_bad_input():
    one = sharing_sweep(1.0, groups=(200,))
    with pytest.raises(InterpError, match=r"1 distinct value\(s\) of bases per selector set \(200\).*3 or more"):
        cancellation(one)
    two = sharing_sweep(1.0, groups=(1, 200))
    with pytest.raises(InterpError, match=r"2 distinct value.*task.selector_groups"):
        cancellation(two)
    with pytest.raises(InterpError, match=r"the sweep table is empty"):
        cancellation(one.iloc[:0])
    with pytest.raises(InterpError, match=r"unknown bootstrap scheme"):
        cancellation(sharing_sweep(1.0), scheme="jackknife")
    bare = sharing_sweep(1.0).drop(columns=["bases_per_selector_set", "task.selector_groups"])
    with pytest.raises(InterpError, match=r"no 'bases_per_selector_set' column"):
        cancellation(bare)
    with pytest.raises(InterpError, match=r"unknown measure 'nope'"):
        cancellation(sharing_sweep(1.0), y="nope")


def test_exported_and_drawn_like_the_power_law():
    assert scaling.cancellation is cancellation and "cancellation" in scaling.__all__
    from interp.plots import sweep as sweep_plots

    fig = sweep_plots.tau_vs_d(cancellation(sharing_sweep(1.0), n_boot=500))
    assert fig.layout.xaxis.type == "log" and "bases_per_selector_set" in fig.layout.title.text


def test_through_a_real_sweep_table(tmp_path):
    """Sweep.table() of real run folders writes the column; the fit recovers the planted law."""
    from interp.sweeps.sweep import SweepSpec
    from tests.helpers import small_spec
    from tests.synthetic_sweeps import write_sweep_folder

    base = small_spec(steps=3000, n_bases=24)
    spec = SweepSpec(base=base, grid=(("task.selector_groups", (1, 3, 8, 24)), ("seed", (0, 1))), name="c")
    rng_noise = lambda rng: math.exp(0.05 * rng.standard_normal())  # noqa: E731
    sweep = write_sweep_folder(tmp_path / "c", spec,
                               lambda s, rng: 400.0 * s.task.bases_per_selector_set ** 0.5 * rng_noise(rng),
                               every=10)
    table = sweep.table()
    assert table["bases_per_selector_set"].tolist() == [1, 1, 3, 3, 8, 8, 24, 24]
    fit = _quiet(cancellation, table, n_boot=500)
    assert fit.n_used == 8
    assert fit.beta == pytest.approx(np.polyfit(np.log(table["bases_per_selector_set"].astype(float)),
                                                np.log(table["tau_half"]), 1)[0], abs=1e-9)
    # tau_half read off a sigmoid on a 10-step grid is a little biased; two seeds give a tight CI
    assert fit.beta == pytest.approx(0.5, abs=0.06)
