"""The numbers behind the mechanism table, on hand-built tables with a known truth: the intervals,
the lr / batch slope, the forks' ratio, anisotropy against K, pooling over runs."""

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from interp.mechanisms import evidence as E
from interp.mechanisms.rules import CONSISTENT, CONTRADICTED, Measure, judge
from interp.mechanisms.table import build
from tests.synthetic_sweeps import noise_sweep


def test_a_runs_share_of_groups_gets_the_exact_interval_over_its_groups():
    ev = [E.RunEvidence(f"r{i}", 1000) for i in range(3)]
    for e, (k, n) in zip(ev, ((0, 24), (1, 24), (0, 24))):
        e.values.update(coverage=k / n, coverage_k=k, coverage_n=n)
    m = E.pooled(ev, "coverage")
    ref = stats.binomtest(1, 72).proportion_ci(confidence_level=0.9, method="exact")
    assert m.value == pytest.approx(1 / 72) and (m.low, m.high) == pytest.approx((ref.low, ref.high))
    assert m.n_runs == 72 and "over 3 runs" in m.detail


def test_median_interval_brackets_the_median_and_is_reproducible():
    v = np.random.default_rng(0).normal(0.1, 0.05, 15)
    med, lo, hi = E.median_interval(v)
    assert med == pytest.approx(float(np.median(v)))
    assert lo <= med <= hi and hi - lo < 0.1
    assert E.median_interval(v) == (med, lo, hi)
    one = E.median_interval([0.3])
    assert one[0] == 0.3 and math.isnan(one[1]) and math.isnan(one[2])
    assert math.isnan(E.median_interval([math.nan])[0])


def test_plateau_steps_are_tau_quarter_to_point_nine_tau():
    assert E.plateau_steps([0, 100, 250, 500, 900, 901, 1000], 1000) == [250, 500, 900]
    assert E.plateau_steps([0, 100], None) == []


@pytest.mark.parametrize("lr_exponent, verdict", [(0.6, CONTRADICTED), (-0.8, CONSISTENT)])
def test_barrier_slope_recovers_the_planted_lr_exponent(lr_exponent, verdict):
    table = noise_sweep(lr_exponent=lr_exponent, sigma=0.05, seeds=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m, why = E.barrier_measure(table)
    at_batch = table[table["batch_size"] == table["batch_size"].mode()[0]]  # the lr axis: the runs at one batch size
    assert why == "" and m.lo <= lr_exponent <= m.hi and m.n_runs == len(at_batch) == 12
    assert judge("barrier", m)[0] == verdict


def test_barrier_needs_an_lr_or_batch_axis():
    table = noise_sweep(lrs=(1e-3,), batch_sizes=(64,))
    m, why = E.barrier_measure(table)
    assert m is None and "neither lr nor batch" in why


def _forks(full: list, mini: list, step: int = 500) -> pd.DataFrame:
    rows = []
    for arm, escapes in (("full_batch", full), ("minibatch", mini)):
        for seed, e in enumerate(escapes):
            rows.append(dict(run=f"{arm}-s{seed}", status="done", error="", fork_step=step, arm=arm, arm_params="",
                             fork_seed=seed, horizon=4000, steps_run=4000,
                             escape_half=math.nan if e is None else float(e), censored_escape_half=e is None,
                             escape_snap=math.nan, censored_escape_snap=False, gamma=1.0, gamma_samples=4))
    return pd.DataFrame(rows)


def test_forks_ratio_is_full_over_minibatch_geometric_means():
    full, mini = [100.0, 150.0, 120.0, 130.0, 140.0], [800.0, 1000.0, 1300.0, 900.0, 1200.0]
    m, why = E.forks_measure(_forks(full, mini))
    geo = float(np.exp(np.mean(np.log(full)) - np.mean(np.log(mini))))
    ref = stats.ttest_ind(np.log(full), np.log(mini), equal_var=False).confidence_interval(0.9)
    assert why == "" and m.value == pytest.approx(geo) and (m.low, m.high) == pytest.approx(np.exp([ref.low, ref.high]))
    assert m.n_runs == 5
    assert judge("entropic_forks", m)[0] == CONSISTENT
    # the minibatch forks never escape: the ratio is an upper bound, its low end 0, still below 0.5
    m, _ = E.forks_measure(_forks(full, [None] * 5))
    assert judge("entropic_forks", m)[0] == CONSISTENT and m.lo == 0.0
    m, why = E.forks_measure(_forks([], mini))  # no full_batch arm: not measured, and why
    assert m is None and "full_batch" in why


def test_drowning_slope_recovers_a_planted_exponent():
    rng = np.random.default_rng(1)
    rows, aniso = [], {}
    for k in (3, 5, 10, 20):
        for s in range(3):
            name = f"k{k}-s{s}"
            rows.append({"run": name, "k": k, "tau_half": 100.0 * k ** 1.5 * math.exp(0.05 * rng.standard_normal())})
            aniso[name] = {"anisotropy": 4.0 * k ** 0.2 * math.exp(0.05 * rng.standard_normal())}
    m, why = E.drowning_measure(pd.DataFrame(rows), aniso)
    assert why == "" and m.lo <= 0.2 <= m.hi and m.extra["tau_slope"] == pytest.approx(1.5, abs=0.1)
    assert judge("drowning", m)[0] == CONTRADICTED
    m, why = E.drowning_measure(pd.DataFrame(rows[:3]), aniso)
    assert m is None and "does not vary K" in why


def test_pooling_over_runs_is_the_mean_with_a_student_t_interval():
    evs = []
    for i, v in enumerate((0.1, 0.2, 0.15, 0.05)):
        ev = E.RunEvidence(f"r{i}", 1000)
        ev.values.update(random_walk=v, random_walk_transition=0.6 + 0.1 * i, anisotropy=[2.0, 4.0, 3.0, 5.0][i])
        ev.measures["random_walk"] = Measure(v)
        evs.append(ev)
    m = E.pooled(evs, "random_walk")
    ref = stats.t.interval(0.9, 3, loc=0.125, scale=stats.sem([0.1, 0.2, 0.15, 0.05]))
    assert m.value == pytest.approx(0.125) and (m.low, m.high) == pytest.approx(ref) and m.n_runs == 4
    assert m.extra["transition"] == pytest.approx(0.75)
    assert judge("random_walk", m)[0] == CONSISTENT
    ratio = E.pooled(evs, "anisotropy")  # a ratio: the geometric mean, t on the log scale
    assert ratio.value == pytest.approx(float(np.exp(np.mean(np.log([2.0, 4.0, 3.0, 5.0])))))
    assert E.pooled(evs, "coverage") is None
    assert E.pooled(evs[:1], "random_walk") is evs[0].measures["random_walk"]


def test_table_rows_carry_value_interval_runs_and_verdict():
    table = build("runs/x", "run", {"coverage": Measure(0.0, 0.0, 0.02, 200, "0 of 200 groups")}, {}, [])
    frame = table.to_frame()
    assert list(frame["key"]) == [r.key for r in __import__("interp.mechanisms.rules", fromlist=["ROWS"]).ROWS]
    cov = frame[frame["key"] == "coverage"].iloc[0]
    assert cov["verdict"] == CONTRADICTED and cov["n_runs"] == 200 and cov["value"] == 0.0
    other = frame[frame["key"] == "spinodal"].iloc[0]
    assert other["verdict"] == "not measured" and "interp analyze runs/x --only hessian" in other["why"]
    html = table.html()
    assert "<script" not in html and "contradicted" in html
    assert table.to_dict()["rows"][0]["key"] == "cancellation"
