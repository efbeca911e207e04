"""The family-level circuit fits (interp.sweeps.circuit_fits) recover what synthetic sweeps plant.

The sweep folders are real (tests/synthetic_sweeps.py: `Sweep.create`, one run folder per
point with a metrics log), so the shuffle gap's onset and lead are measured by the table's
own code from the logged curves; only the routing-head columns are set by hand."""

import math

import numpy as np
import pytest

from interp.errors import InterpError
from interp.sweeps.circuit_fits import ablation_trend, circuit_fits, lead_exponent, lead_share, routing_heads, wilson
from interp.sweeps.sweep import SweepSpec
from tests import synthetic_sweeps as syn
from tests.helpers import small_spec

KS = (3, 4, 6, 8, 12)


def _sweep(tmp_path, name, tau_of, gap_of, steps=16_000):
    spec = SweepSpec(base=small_spec(steps=steps, n_bases=24), grid=(("task.k", KS), ("seed", (0, 1, 2))))
    return syn.write_sweep_folder(tmp_path / name, spec, tau_of, gap_of=gap_of, every=10)


@pytest.fixture(scope="module")
def power(tmp_path_factory):
    """Lead share 0.5 (sd 0.04 between runs) and tau = 60 K^2.13: the lead in steps grows as K^2.13."""
    noise = lambda rng: 0.04 * rng.standard_normal()  # noqa: E731
    return _sweep(tmp_path_factory.mktemp("lead"), "power", lambda s, rng: 60.0 * s.task.k ** 2.13,
                  lambda s, rng, tau: (1.0 - (0.5 + noise(rng))) * tau).table()


def test_the_gap_columns_are_measured_from_the_logged_curves(power):
    done = power[power["status"] == "done"]
    assert done[["gap_onset", "gap_lead", "gap_lead_snap", "gap_lead_steps"]].notna().all().all()
    assert np.allclose(done["gap_lead_steps"], done["tau_half"] - done["gap_onset"])
    assert np.allclose(done["gap_lead"], done["gap_lead_steps"] / done["tau_half"])
    assert (done["gap_lead_snap"] > done["gap_lead"]).all()  # the snap comes after tau_half


def test_the_lead_share_and_its_exponent_are_recovered_within_their_intervals(power):
    share = lead_share(power, n_boot=1000)
    assert share.n_used == 15 and share.mean_ci[0] <= 0.5 <= share.mean_ci[1]
    assert share.mean_ci[1] - share.mean_ci[0] < 0.1  # an interval that could miss
    assert share.ci[0] <= 0.0 <= share.ci[1] and share.sign == "flat"  # no trend was planted
    assert set(share.per_k["k"]) == set(KS) and (share.per_k["n"] == 3).all()
    assert share.to_dict()["paper"]["mean"] == 0.52 and "paper: 0.52 +- 0.14" in share.summary()
    fit = lead_exponent(power, n_boot=1000)
    assert fit.ci[0] <= 2.13 <= fit.ci[1] and fit.ci[1] - fit.ci[0] < 0.4 and abs(fit.delta - 2.13) < 0.1
    assert fit.to_dict()["paper"] == {"delta": 2.13} and "paper: 2.13" in fit.summary()


def test_a_planted_trend_of_the_lead_share_against_log_k_is_recovered(tmp_path):
    slope = 0.2  # the share rises from 0.2 at K = 3 by 0.2 per unit of log K (0.48 at K = 12)
    table = _sweep(tmp_path, "trend", lambda s, rng: 3000.0,
                   lambda s, rng, tau: (1.0 - (0.2 + slope * math.log(s.task.k / 3) + 0.02 * rng.standard_normal()))
                   * tau, steps=6000).table()
    share = lead_share(table, n_boot=1000)
    assert share.ci[0] <= slope <= share.ci[1] and share.sign == "+"
    assert abs(share.at(3.0) - 0.2) < 0.05 and abs(share.at(12.0) - (0.2 + slope * math.log(4))) < 0.05


def test_the_lead_share_is_fitted_on_its_own_scale_so_negative_leads_count(tmp_path):
    # the gap opens after tau_half in some runs: their leads are negative, and they still count
    table = syn.make_table([syn.run_row(k, 1000.0, seed=s, lead=lead, planned_steps=5000)
                            for k in KS for s, lead in enumerate((-0.1, 0.1, 0.3))])
    share = lead_share(table, n_boot=500)
    assert share.n_used == 15 and share.n_undefined == 0
    assert share.mean == pytest.approx(float(table["gap_lead"].mean()))
    assert abs(share.mean - 0.1) < 0.02
    # the lead in steps needs a log axis: the negative ones are counted as undefined, never fitted
    assert lead_exponent(table, n_boot=500).n_undefined == 5


def test_routing_heads_count_per_head_and_k_with_a_wilson_interval():
    rows = [syn.run_row(k, 1000.0, seed=s, lead=0.4) for k in (3, 6, 12) for s in range(4)]
    table = syn.make_table(rows)
    heads = ["L0H3"] * 10 + ["L1H0", None]  # the last run is finished but not analysed
    table["routing_head"] = heads
    table["routing_layer"] = [int(h[1]) if h else math.nan for h in heads]
    res = routing_heads(table)
    assert res.n_used == 11 and res.n_layer0 == 10 and res.n_not_analysed == 1 and res.modal_head == "L0H3"
    top = res.counts.iloc[0]
    assert (top["head"], top["runs"], top["layer"]) == ("L0H3", 10, 0)
    assert (top["k=3"], top["k=6"], top["k=12"]) == (4, 4, 2)
    lo, hi = wilson(10, 11, 0.95)  # by hand: p = 10/11, z = 1.96
    z, p, n = 1.959964, 10 / 11, 11
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert (lo, hi) == pytest.approx((centre - half, centre + half), abs=1e-6) and res.ci == (lo, hi)
    assert wilson(10, 10, 0.95)[0] == pytest.approx(0.7225, abs=1e-4)  # 10 of 10 is not certainty


def test_without_the_circuit_columns_the_fits_that_need_them_say_why(power):
    with pytest.raises(InterpError, match="interp analyze SWEEP"):
        routing_heads(power)
    with pytest.raises(InterpError, match="interp analyze SWEEP"):
        ablation_trend(power)
    fits = circuit_fits(power, n_boot=500)
    assert {"lead_share", "lead_exponent"} <= set(fits.results)
    assert "interp analyze SWEEP" in fits.problems["routing_heads"]
    assert "interp analyze SWEEP" in fits.problems["ablation_trend"]


def test_the_ablation_trend_reads_the_circuit_column():
    rows = [syn.run_row(k, 1000.0, seed=s, lead=0.4) for k in (3, 6, 12) for s in range(3)]
    table = syn.make_table(rows)
    table["routing_head"] = "L0H3"
    table["routing_layer"] = 0
    table["ablation_method"] = "zero"
    table["ablation_at_tau"] = [0.5 * math.log(k) + 0.01 * s for k in (3, 6, 12) for s in range(3)]
    res = ablation_trend(table, n_boot=500)
    assert res.ci[0] <= 0.5 <= res.ci[1] and res.sign == "+"
    assert "zero-ablation" in res.label and "+1.41 nats at K = 10" in res.summary()
