"""Family-level fits on synthetic sweep tables with a known truth: coverage, censoring, bad input."""

import json
import math
import warnings

import numpy as np
import pytest

from interp.errors import InterpError
from interp.sweeps import scaling
from interp.sweeps.scaling import CensoredRunsWarning
from tests.synthetic_sweeps import (
    asymmetry_sweep,
    fixed_d_sweep,
    noise_sweep,
    power_law_sweep,
    set_status,
)


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


# ---------------------------------------------------------------------------- power law
def test_power_law_coverage():
    """The project's requirement: the 95% CI holds the true exponent in >= 90 of 100 synthetic sweeps
    (tau = 3 D^1.2, lognormal sigma 0.15, 3 seeds at 5 D values from 3k to 36k)."""
    covered, widths = 0, []
    for i in range(100):
        fit = scaling.power_law(power_law_sweep(seed=i, sigma=0.15), n_boot=1000)
        assert fit.scheme == "within" and fit.n_used == 15
        covered += fit.ci[0] <= 1.2 <= fit.ci[1]
        widths.append(fit.ci[1] - fit.ci[0])
    assert covered >= 90
    assert np.median(widths) < 0.3  # honest, not vacuous


def test_power_law_recovers_the_law():
    fit = scaling.power_law(power_law_sweep(sigma=0.02))
    assert fit.delta == pytest.approx(1.2, abs=0.03)
    assert fit.c == pytest.approx(3.0, rel=0.3)
    assert fit.r2 > 0.99
    assert fit.ci[0] < fit.delta < fit.ci[1] and fit.ci[1] - fit.ci[0] < 0.1
    assert (fit.n_used, fit.n_censored, fit.n_excluded) == (15, 0, 0)
    assert set(fit.range_sensitivity) == {"without_smallest", "without_largest"}
    assert fit.range_sensitivity["without_smallest"]["x"] == 3000
    assert fit.range_sensitivity["without_largest"]["x"] == 36000
    assert all(abs(v["delta"] - 1.2) < 0.05 for v in fit.range_sensitivity.values())
    assert "seeds resampled within D" in fit.method
    band = fit.band
    assert (band["lo"] <= band["fit"]).all() and (band["fit"] <= band["hi"]).all()
    np.testing.assert_allclose(fit.predict(band["D"]), band["fit"], rtol=1e-9)


def test_power_law_schemes_by_replicates():
    one = scaling.power_law(power_law_sweep(seeds=1, k_values=(3, 5, 10, 20, 30, 36)))
    assert one.scheme == "over" and "paper's scheme" in one.method
    two = scaling.power_law(power_law_sweep(seeds=2))
    assert two.scheme == "residual"
    forced = scaling.power_law(power_law_sweep(seeds=1, k_values=(3, 5, 10, 20, 30, 36)), scheme="residual")
    assert forced.scheme == "residual" and forced.delta == pytest.approx(one.delta)


def test_censored_runs_are_counted_flagged_and_left_out():
    table = power_law_sweep(planned_steps=400_000)  # the largest D (3 x 36k, some of 24k) never reach tau
    censored = table.loc[table["censored_tau_half"], "run"].tolist()
    assert 3 <= len(censored) < 9
    with pytest.warns(CensoredRunsWarning, match=censored[0]):
        fit = scaling.power_law(table)
    assert fit.n_censored == len(censored) and sorted(fit.censored_runs) == sorted(censored)
    pts = fit.points.set_index("run")
    assert not pts.loc[censored, "used"].any() and (pts.loc[censored, "role"] == "censored").all()
    assert fit.n_used == len(table) - len(censored)
    # a censored run's value never enters the fit
    changed = table.copy()
    changed.loc[changed["run"] == censored[0], "tau_half"] = 1.0
    assert _quiet(scaling.power_law, changed).delta == fit.delta
    assert _quiet(scaling.power_law, changed).ci == fit.ci


def test_not_done_runs_are_excluded():
    table = power_law_sweep()
    marked = set_status(set_status(table, ["k3-s0", "k36-s1"], "running"), ["k12-s2"], "failed")
    fit = scaling.power_law(marked)
    assert fit.n_excluded == 3 and fit.n_used == 12 and fit.n_censored == 0
    assert sorted(fit.excluded_runs) == sorted(["k12-s2", "k36-s1", "k3-s0"])
    rest = table[~table["run"].isin(["k3-s0", "k36-s1", "k12-s2"])]
    assert scaling.power_law(rest).delta == pytest.approx(fit.delta)
    assert "3 not done" in fit.summary()


def test_power_law_bad_input():
    table = power_law_sweep()
    with pytest.raises(InterpError, match="unknown measure 'tau_nope'"):
        scaling.power_law(table, y="tau_nope")
    with pytest.raises(InterpError, match="lacks the column"):
        scaling.power_law(table, x="nope")
    with pytest.raises(InterpError, match="too few points"):
        scaling.power_law(table[table["k"].isin([3, 6])])
    with pytest.raises(InterpError, match="empty"):
        scaling.power_law(table.iloc[:0])
    with pytest.raises(InterpError, match="unknown bootstrap scheme"):
        scaling.power_law(table, scheme="jackknife")
    with pytest.raises(InterpError, match="confidence level"):
        scaling.power_law(table, ci=95.0)
    mixed = table.copy()
    mixed.loc[mixed["seed"] == 0, "direction"] = "az_to_b"
    with pytest.raises(InterpError, match="pass direction="):
        scaling.power_law(mixed)
    assert scaling.power_law(mixed, direction="bz_to_a").n_used == 10


def test_reproducible():
    table = power_law_sweep()
    a, b = scaling.power_law(table, seed=3), scaling.power_law(table, seed=3)
    assert a.ci == b.ci and a.band.equals(b.band)
    shuffled = table.sample(frac=1.0, random_state=1)
    assert scaling.power_law(shuffled, seed=3).ci == a.ci  # row order does not matter
    assert scaling.power_law(table, seed=4).ci != a.ci


def test_power_law_to_dict_and_summary():
    fit = scaling.power_law(power_law_sweep())
    d = json.loads(json.dumps(fit.to_dict()))
    for key in ("delta", "ci", "c", "r2", "n_used", "n_censored", "n_excluded", "range_sensitivity", "method",
                "points", "paper"):
        assert key in d
    assert d["paper"]["delta"] == scaling.PAPER_DELTA and len(d["points"]) == 15
    line = fit.summary()
    assert line.startswith("delta = ") and "R^2" in line and "15 runs used, 0 censored" in line
    assert "paper: 1.19 [1.14, 1.31]" in line


# ---------------------------------------------------------------------------- fixed D
def test_fixed_d_flat_and_not_flat():
    flat = scaling.fixed_d(fixed_d_sweep(slope=0.0))
    assert flat.d == 10_000 and flat.flat and flat.ci[0] < 0 < flat.ci[1]
    assert list(flat.per_k["k"]) == [5, 10, 20, 36] and flat.ratio_max_min < 1.3
    assert flat.paper["tau"] == scaling.PAPER_FIXED_D_TAU
    steep = scaling.fixed_d(fixed_d_sweep(slope=0.5))
    assert not steep.flat and steep.ci[0] > 0 and steep.slope == pytest.approx(0.5, abs=0.1)
    assert "not flat" in steep.summary()
    json.dumps(steep.to_dict())


def test_fixed_d_needs_one_d():
    both = fixed_d_sweep(d=10_000)
    other = fixed_d_sweep(d=5_000)
    other["run"] = other["run"] + "-half"
    table = __import__("pandas").concat([both, other], ignore_index=True)
    with pytest.raises(InterpError, match="pass d="):
        scaling.fixed_d(table)
    res = scaling.fixed_d(table, d=5000)
    assert res.d == 5000 and res.n_used == 12 and res.paper is None
    with pytest.raises(InterpError, match="no runs with D = 7000"):
        scaling.fixed_d(table, d=7000)


# ---------------------------------------------------------------------------- noise
def test_noise_trend_signs_and_censoring():
    table = noise_sweep(never=(5e-3,))
    with pytest.warns(CensoredRunsWarning, match="lr0.005"):
        res = scaling.noise(table)
    assert res.lr.sign == "+" and res.lr.slope == pytest.approx(0.6, abs=0.15)
    assert res.batch.sign == "-" and res.batch.slope == pytest.approx(-0.5, abs=0.15)
    assert res.examples.slope == pytest.approx(res.batch.slope + 1.0)
    assert res.lr.fixed == {"batch_size": 64.0} and res.batch.fixed == {"lr": 1e-3}
    assert res.n_censored == 3 and set(res.censored["lr"]) == {5e-3}
    assert (res.censored["steps_run"] == 50_000).all()
    assert res.ratio["lr_lo"] == 3e-4 and res.ratio["lr_hi"] == 2e-3 and res.ratio["censored_above"] == [5e-3]
    assert res.ratio["tau_ratio"] > 2
    assert "tau_half > 50000" in res.summary()
    json.dumps(res.to_dict())


def test_noise_flat():
    res = scaling.noise(noise_sweep(lr_exponent=0.0, batch_exponent=0.0, sigma=0.1))
    assert res.lr.sign == "flat" and res.batch.sign == "flat"


def test_noise_bad_input():
    table = noise_sweep()
    with pytest.raises(InterpError, match="nothing to fit"):
        scaling.noise(table[(table["lr"] == 1e-3) & (table["batch_size"] == 64)])
    with pytest.raises(InterpError, match="no runs with batch_size = 48"):
        scaling.noise(table, batch_size=48)
    with pytest.raises(InterpError, match="no runs with lr = 0.1"):
        scaling.noise(table, lr=0.1)


# ---------------------------------------------------------------------------- asymmetry
def test_asymmetry_recovers_a_known_ratio():
    res = scaling.asymmetry(asymmetry_sweep(ratio=2.5, sigma=0.02))
    assert res.n_pairs == 6 and res.n_censored_pairs == 0
    assert res.ci[0] <= 2.5 <= res.ci[1] and res.ci[1] - res.ci[0] < 0.15
    assert res.mean_ratio_ci[0] <= 2.5 <= res.mean_ratio_ci[1]
    assert res.geo_mean_ratio == pytest.approx(2.5, rel=0.03)
    assert list(res.steps["direction"]) == ["bz_to_a", "a_to_b"]
    noisy = scaling.asymmetry(asymmetry_sweep(ratio=2.5, sigma=0.2))
    assert noisy.ci[1] - noisy.ci[0] > res.ci[1] - res.ci[0]
    assert "paper: 1.7-4.4x" in res.summary()
    json.dumps(res.to_dict())


def test_asymmetry_censored_pair():
    table = asymmetry_sweep()
    pick = (table["direction"] == "a_to_b") & (table["seed"] == 2)
    table.loc[pick, "steps_to_exact_99"] = math.nan
    table.loc[pick, "censored_steps_to_exact_99"] = True
    with pytest.warns(CensoredRunsWarning):
        res = scaling.asymmetry(table)
    assert res.n_pairs == 5 and res.n_censored_pairs == 1 and len(res.lower_bounds) == 1
    bz = table.loc[(table["direction"] == "bz_to_a") & (table["seed"] == 2), "steps_to_exact_99"].item()
    assert res.lower_bounds[0] == pytest.approx(table.loc[pick, "steps_run"].item() / bz)
    assert "1 censored" in res.summary()


def test_asymmetry_bad_input():
    table = asymmetry_sweep()
    with pytest.raises(InterpError, match="no a_to_b runs"):
        scaling.asymmetry(table[table["direction"] == "bz_to_a"])
    with pytest.raises(InterpError, match="too few complete pairs"):
        scaling.asymmetry(table[table["seed"] == 0])


def test_the_fits_do_not_import_torch():
    import subprocess
    import sys

    code = "import sys, interp.sweeps.scaling; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_coverage_helper_is_reproducible():
    a = scaling.coverage("within", n_sweeps=20, n_boot=300)
    assert a == scaling.coverage("within", n_sweeps=20, n_boot=300)
    assert 0.0 <= a["coverage"] <= 1.0 and a["scheme"] == "within"
