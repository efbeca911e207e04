"""Every interval method the verdict tables use covers at least MIN_COVERAGE of the truth at n = 3, 5 and 10
(seeded simulation from known parameters, `interp.mechanisms.coverage`), and the methods it replaced are shown
to fall short where they were replaced (SPEC 10; docs/reconciliation.md, "Intervals and their coverage")."""

import numpy as np
import pytest
from scipy import stats

from interp.mechanisms import coverage as C
from interp.mechanisms import intervals as I


@pytest.mark.parametrize("level", C.LEVELS)
@pytest.mark.parametrize("n", C.SIZES)
@pytest.mark.parametrize("method", [*C.IN_USE, "share_exact"])
def test_every_method_in_use_covers_near_nominal(method, n, level):
    got = C.coverage(method, n, level, n_sims=2000)
    assert got["coverage"] >= C.MIN_COVERAGE[level], got
    if method != "share_exact":  # and is not simply infinite
        assert np.isfinite(got["median_width"])


def test_the_replaced_methods_fall_short_where_they_were_replaced():
    # the paper's bootstrap over x values, with 3 points: far below 95%
    assert C.coverage("slope_over", 3, 0.95, n_sims=400)["coverage"] < 0.85
    # the forks' percentile bootstrap of a ratio of medians, 3 forks per arm: below the 93% floor
    assert C.coverage("median_ratio_percentile", 3, 0.95, n_sims=2000)["coverage"] < C.MIN_COVERAGE[0.95]
    # the Wilson interval of a share over 3 trials: below the floor at some true share, at either level
    assert C.coverage("share_wilson", 3, 0.95)["coverage"] < C.MIN_COVERAGE[0.95]
    assert C.coverage("share_wilson", 3, 0.90)["coverage"] < C.MIN_COVERAGE[0.90]


def test_the_share_coverage_is_computed_exactly():
    # by hand for n = 1: the interval of 0 successes holds p when p <= its high end, of 1 success when p >= its low
    lo, hi = I.exact_share(np.array([0, 1]), np.array([1, 1]), 0.9)
    p = 0.3
    expected = (1 - p) * (lo[0] <= p <= hi[0]) + p * (lo[1] <= p <= hi[1])
    C_grid, C.SHARE_GRID = C.SHARE_GRID, (p,)
    try:
        assert C.share_coverage(I.exact_share, 1, 0.9)[0] == pytest.approx(expected)
    finally:
        C.SHARE_GRID = C_grid


def test_the_cores_equal_scipy_one_data_set_at_a_time():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 6))
    m, lo, hi = I.t_interval(x, 0.9)
    for i in range(4):
        ref = stats.t.interval(0.9, 5, loc=x[i].mean(), scale=stats.sem(x[i]))
        assert (lo[i], hi[i]) == pytest.approx(ref)
    xs, y = np.log([3.0, 5, 7, 10, 13]), rng.normal(size=5)
    b, blo, bhi, se = I.ols_t(xs, y, 0.9)
    ref = stats.linregress(xs, y)
    half = stats.t.ppf(0.95, 3) * ref.stderr
    assert (b, se, blo, bhi) == pytest.approx((ref.slope, ref.stderr, ref.slope - half, ref.slope + half))
    k, n = np.array([0, 3, 17, 20]), np.array([20, 40, 20, 20])
    lo, hi = I.exact_share(k, n, 0.9)
    for i in range(4):
        ref = stats.binomtest(int(k[i]), int(n[i])).proportion_ci(confidence_level=0.9, method="exact")
        assert (lo[i], hi[i]) == pytest.approx((ref.low, ref.high), abs=1e-12)


def test_the_coverage_study_is_reproducible_and_seeded():
    a = C.coverage("mean_t", 5, 0.9, n_sims=300, seed=1)
    assert a == C.coverage("mean_t", 5, 0.9, n_sims=300, seed=1)
    assert a["coverage"] != C.coverage("mean_t", 5, 0.9, n_sims=300, seed=2)["coverage"]
