"""How often each interval method holds the truth at the sizes the presets give (n = 3, 5, 10): seeded simulation.

Every interval a verdict reads comes from `interp.mechanisms.intervals`; this study is why (SPEC 10:
"an interval method is used only at the sizes where a seeded simulation shows its coverage near nominal").
Each method draws `n_sims` data sets from known parameters, makes its interval with the very functions the
tables call, and counts how often the interval holds the parameter. Shares are computed exactly (a sum over
the binomial outcomes) at a grid of true shares, the minimum reported. The methods replaced, kept for the
before-and-after table in docs/reconciliation.md ("Intervals and their coverage"), are the bootstrap-t mean
(`interp.sweeps.bootstrap.mean_ci`), the paper's bootstrap over x values for a slope, the forks' percentile
bootstrap of a ratio of medians, and the Wilson interval.

    python -m interp.mechanisms.coverage          # the coverage table, at 95% and 90%, n = 3, 5, 10

numpy and scipy only; tests/unit/test_interval_coverage.py keeps every method in use at or above
MIN_COVERAGE.
"""

from __future__ import annotations

import math

import numpy as np

from interp.mechanisms import intervals as I

SIZES = (3, 5, 10)
LEVELS = (0.95, 0.90)
MIN_COVERAGE = {0.95: 0.93, 0.90: 0.88}  # the floor a method in use must reach at every size
SHARE_GRID = (0.01, 0.05, 0.1, 0.2, 0.3, 0.5)  # true shares at which a share's interval is judged (the minimum)
RESOLUTION = 25  # escapes are seen on an evaluation grid of this many steps (forks-relapse-tiny's)

# the parameters the data are drawn from (each near what the presets measure)
MEAN, SD = 0.5, 0.1  # a lead share or a cosine over runs
GEO, LOG_SD = 2.0, 0.3  # a positive ratio (noise / signal, Gamma, anisotropy)
SLOPE, INTERCEPT, SLOPE_SD = 0.2, 0.1, 0.1  # a share against log K, or log tau against log D
ESCAPE_NUM, ESCAPE_DEN, ESCAPE_SD = 400.0, 100.0, 0.3  # escape steps of a noisy arm and the clean one


def _x_design(n: int) -> np.ndarray:
    """n points over min(n, 5) distinct log K values from 3 to 20 (seeds repeat the values beyond 5)."""
    distinct = np.log(np.geomspace(3, 20, min(n, 5)))
    return np.resize(distinct, n)


def _rng(seed: int, method: str, n: int) -> np.random.Generator:
    return np.random.default_rng([seed, n, sum(map(ord, method))])


def _hits(low, high, truth) -> np.ndarray:
    return (np.asarray(low) <= truth) & (truth <= np.asarray(high))


# ---------------------------------------------------------------------------- the methods in use
def _mean_t(n, level, sims, rng):
    x = rng.normal(MEAN, SD, (sims, n))
    _, lo, hi = I.t_interval(x, level)
    return _hits(lo, hi, MEAN), hi - lo


def _mean_t_log(n, level, sims, rng):
    x = np.exp(rng.normal(math.log(GEO), LOG_SD, (sims, n)))
    _, lo, hi = I.t_interval(np.log(x), level)  # what mean_t(log=True) computes, for every data set at once
    lo, hi = np.exp(lo), np.exp(hi)
    return _hits(lo, hi, GEO), hi - lo


def _slope_t(n, level, sims, rng):
    x = _x_design(n)
    y = INTERCEPT + SLOPE * x + rng.normal(0, SLOPE_SD, (sims, n))
    _, lo, hi, _ = I.ols_t(x, y, level)
    return _hits(lo, hi, SLOPE), hi - lo


def _escapes(rng, centre: float, shape) -> np.ndarray:
    return np.exp(rng.normal(math.log(centre), ESCAPE_SD, shape))


def _seen(e: np.ndarray) -> np.ndarray:
    """The evaluation step an escape is seen at (the first grid step at or after it)."""
    return np.ceil(e / RESOLUTION) * RESOLUTION


def _ratio(n, level, sims, rng, fixed: bool):
    num = _seen(_escapes(rng, ESCAPE_NUM, (sims, n)))
    # the clean arm, when deterministic, escapes at one step for every seed (seen on the grid like the rest)
    den = _seen(np.full((sims, 1), ESCAPE_DEN)) if fixed else _seen(_escapes(rng, ESCAPE_DEN, (sims, n)))
    truth = ESCAPE_NUM / ESCAPE_DEN
    with np.errstate(divide="ignore"):  # what log_ratio_t computes, for every data set at once
        lo, hi = I.ratio_ends(np.log(num - RESOLUTION), np.log(num), np.log(den - RESOLUTION), np.log(den), level,
                              den_fixed=fixed)
    return _hits(lo, hi, truth), hi - lo


def _ratio_welch(n, level, sims, rng):
    return _ratio(n, level, sims, rng, fixed=False)


def _ratio_fixed(n, level, sims, rng):
    return _ratio(n, level, sims, rng, fixed=True)


def share_coverage(interval, n: int, level: float) -> tuple[float, float]:
    """Exact coverage of a share interval (`interval(k, n, level) -> (low, high)`): its minimum and mean over
    SHARE_GRID, by summing the binomial probabilities of the outcomes whose interval holds the share."""
    from scipy import stats

    k = np.arange(n + 1)
    lo, hi = interval(k, np.full(n + 1, n), level)
    cov = [float(stats.binom.pmf(k, n, p)[(lo <= p) & (p <= hi)].sum()) for p in SHARE_GRID]
    return min(cov), float(np.mean(cov))


# ---------------------------------------------------------------------------- the methods replaced
def _bootstrap_t_mean(n, level, sims, rng):
    from interp.sweeps.bootstrap import mean_ci

    x = rng.normal(MEAN, SD, (sims, n))
    out = np.array([mean_ci(x[i], 1000, level, rng)[1:] for i in range(sims)])
    return _hits(out[:, 0], out[:, 1], MEAN), out[:, 1] - out[:, 0]


def _slope_over(n, level, sims, rng):
    from interp.sweeps.bootstrap import bootstrap

    x = _x_design(n)
    y = INTERCEPT + SLOPE * x + rng.normal(0, SLOPE_SD, (sims, n))
    out = np.array([(b.lo, b.hi) for b in (bootstrap(x, y[i], "over", 1000, level, rng) for i in range(sims))])
    return _hits(out[:, 0], out[:, 1], SLOPE), out[:, 1] - out[:, 0]


def _median_ratio_percentile(n, level, sims, rng):
    """The forks' former ratio: medians per arm, runs resampled per arm, percentile ends (interp.sweeps.forks)."""
    num, den = _seen(_escapes(rng, ESCAPE_NUM, (sims, n))), _seen(_escapes(rng, ESCAPE_DEN, (sims, n)))
    boots = 1000
    nb = np.median(np.take_along_axis(num[:, None, :], rng.integers(0, n, (sims, boots, n)), 2), axis=2)
    db = np.median(np.take_along_axis(den[:, None, :], rng.integers(0, n, (sims, boots, n)), 2), axis=2)
    a = 1 - level
    lo = np.quantile(nb / db, a / 2, axis=1, method="lower")
    hi = np.quantile(nb / db, 1 - a / 2, axis=1, method="higher")
    return _hits(lo, hi, ESCAPE_NUM / ESCAPE_DEN), hi - lo


IN_USE = {
    "mean_t": (_mean_t, I.T_MEAN),
    "mean_t_log": (_mean_t_log, I.T_LOG_MEAN),
    "slope_t": (_slope_t, I.OLS_T),
    "log_ratio_t": (_ratio_welch, I.WELCH_LOG + f", escapes on a {RESOLUTION}-step grid"),
    "log_ratio_t_fixed": (_ratio_fixed, I.WELCH_LOG + ", the clean arm deterministic (one-sample t)"),
}
REPLACED = {
    "bootstrap_t_mean": (_bootstrap_t_mean, "bootstrap SE x Student t (interp.sweeps.bootstrap.mean_ci)"),
    "slope_over": (_slope_over, "slope: x values resampled, percentile (the paper's scheme)"),
    "median_ratio_percentile": (_median_ratio_percentile, "ratio of medians, forks resampled per arm, percentile"),
}
SHARES = {"share_exact": (I.exact_share, I.EXACT_SHARE), "share_wilson": (I.wilson_share, "Wilson score (replaced)")}


def coverage(method: str, n: int, level: float = 0.95, n_sims: int = 2000, seed: int = 0) -> dict:
    """The share of `n_sims` simulated data sets of size `n` whose `method` interval at `level` holds the truth,
    and the median width; for a share method the exact minimum and mean coverage over SHARE_GRID."""
    from interp.errors import InterpError

    if method in SHARES:
        low, mean = share_coverage(SHARES[method][0], n, level)
        return dict(method=method, words=SHARES[method][1], n=n, level=level, coverage=low, mean_coverage=mean,
                    median_width=math.nan, n_sims=0)
    table = {**IN_USE, **REPLACED}
    if method not in table:
        raise InterpError(f"unknown interval method {method!r}; known: {', '.join([*table, *SHARES])}")
    fn, words = table[method]
    hits, width = fn(n, level, n_sims, _rng(seed, method, n))
    return dict(method=method, words=words, n=n, level=level, coverage=float(np.mean(hits)),
                median_width=float(np.median(width[np.isfinite(width)])) if np.isfinite(width).any() else math.nan,
                n_sims=n_sims)


def table(methods=None, sizes=SIZES, levels=LEVELS, n_sims: int = 2000, seed: int = 0) -> list[dict]:
    """`coverage` of every method (default: in use, then replaced, then the shares) at every size and level."""
    names = methods or [*IN_USE, *SHARES, *REPLACED]
    return [coverage(m, n, lv, n_sims, seed) for m in names for lv in levels for n in sizes]


def main() -> None:
    rows = table()
    print("| method | level | n = " + " | n = ".join(str(n) for n in SIZES) + " |")
    print("|---|---|" + "---|" * len(SIZES))
    for (m, lv) in dict.fromkeys((r["method"], r["level"]) for r in rows):
        cells = [r for r in rows if r["method"] == m and r["level"] == lv]
        print(f"| {cells[0]['words']} | {lv:.0%} | " + " | ".join(f"{c['coverage']:.3f}" for c in cells) + " |")


if __name__ == "__main__":
    main()
