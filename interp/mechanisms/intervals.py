"""The intervals verdicts rest on, each by a method whose coverage was measured where the presets work (SPEC 10).

A verdict compares an interval with a margin fixed before the data (`interp.mechanisms.equivalence`). By
Westlake's rule the 1 - 2 alpha interval lying inside the margin is the two one-sided tests at level alpha
(Schuirmann 1987), so every interval here is the LEVEL = 90% one (alpha = 0.05 on each side). The methods,
chosen by the seeded coverage study in `interp.mechanisms.coverage` at n = 3, 5 and 10 (docs/reconciliation.md,
"Intervals and their coverage"):

- `mean_t`: a mean over replicate runs, Student t (scipy.stats.ttest_1samp); with `log=True` on the log
  scale, for positive ratios (the geometric mean and its interval).
- `slope_t`: an ordinary least-squares slope over a few x values, the OLS t interval with n - 2 degrees of
  freedom (the paper's bootstrap over x values covers about 89% with 5-6 points).
- `log_ratio_t`: the ratio of two arms' geometric means (fork escapes), Welch's t on the logs
  (scipy.stats.ttest_ind); escapes are known only to their evaluation step and censored forks only as a lower
  bound, so each is an interval (low, high] and the ratio's ends are taken at the bounds that widen it.
- `share_exact`: a share of groups, the exact Clopper-Pearson interval (scipy.stats.binomtest); the Wilson
  interval under-covers at small n and near 0.

Each returns an `Estimate`: the value, the interval, the n it rests on, and what a projection of further
replicates needs (the standard error and degrees of freedom on the interval's own scale). The batched cores
(`t_interval`, `ols_t`, `welch_t`, `exact_share`) take arrays with replicates on the last axis, so the coverage
study runs the very code the tables use. numpy and scipy only (scipy.stats is imported where an interval is made).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from jaxtyping import Float

ALPHA = 0.05  # each one-sided test
LEVEL = 1 - 2 * ALPHA  # the interval every verdict reads (Westlake)

T_MEAN = "Student t over runs"
T_LOG_MEAN = "Student t on the log scale over runs (geometric mean)"
OLS_T = "ordinary least squares, t interval with n - 2 df"
WELCH_LOG = "Welch t on the log escapes (ratio of geometric means)"
EXACT_SHARE = "exact (Clopper-Pearson) binomial interval"


BOTH_CENSORED = "<>"  # a ratio whose both sides hold censored replicates: neither ">=" nor "<="


def bound_prefix(bound: str) -> str:
    """How a value's bound is written before it: ">= ", "<= ", "censored both ways: " or nothing."""
    return "censored both ways: " if bound == BOTH_CENSORED else f"{bound} " if bound else ""


@dataclass(frozen=True)
class Estimate:
    """A value with its LEVEL interval and what it rests on.

    `scale` is where the interval is symmetric ("log": a ratio or a geometric mean), `se` and `df` the
    standard error and t degrees of freedom there (NaN where no t applies); `params` the parameters fitted
    (df = n - params), `n_x` the distinct x values of a slope, `successes` the count of a share.
    `bound` is "" for a value, ">=" or "<=" when censored replicates make the value itself a bound, and BOTH_CENSORED
    when both sides of a ratio hold censored replicates (the value is then no bound either way)."""

    value: float
    low: float
    high: float
    n: int
    method: str
    scale: str = "linear"
    se: float = math.nan
    df: float = math.nan
    level: float = LEVEL
    params: int = 1
    n_x: int = 0
    successes: int = -1
    bound: str = ""

    @property
    def finite(self) -> bool:
        return math.isfinite(self.value)

    def text(self) -> str:
        hi = "inf" if math.isinf(self.high) else f"{self.high:.3g}"
        return f"{bound_prefix(self.bound)}{self.value:.3g} [{self.low:.3g}, {hi}]"


def _t(level: float, df):
    from scipy import stats

    return stats.t.ppf(0.5 + level / 2, df)


# ---------------------------------------------------------------------------- batched cores
Batch = Float[np.ndarray, "*batch"]  # one value per data set


def t_interval(values: Float[np.ndarray, "*batch n"], level: float = LEVEL) -> tuple[Batch, Batch, Batch]:
    """Mean and Student t interval over the last axis (scipy.stats.ttest_1samp's confidence interval)."""
    from scipy import stats

    v = np.asarray(values, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # identical values: a zero-width interval, said by se = 0
        ci = stats.ttest_1samp(v, 0.0, axis=-1).confidence_interval(confidence_level=level)
    return np.asarray(v.mean(-1), dtype=float), np.asarray(ci.low, dtype=float), np.asarray(ci.high, dtype=float)


def ols_t(x: Float[np.ndarray, "*#batch n"], y: Float[np.ndarray, "*#batch n"],
          level: float = LEVEL) -> tuple[Batch, Batch, Batch, Batch]:
    """OLS slope of y on x over the last axis, its t interval (n - 2 df) and its standard error."""
    x, y = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
    n = x.shape[-1]
    xc = x - x.mean(-1, keepdims=True)
    yc = y - y.mean(-1, keepdims=True)
    sxx = (xc * xc).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        b = (xc * yc).sum(-1) / sxx
        resid = yc - b[..., None] * xc
        se = np.sqrt((resid * resid).sum(-1) / (n - 2) / sxx)
    half = _t(level, n - 2) * se
    return tuple(np.asarray(v, dtype=float) for v in (b, b - half, b + half, se))


def welch_t(a: Float[np.ndarray, "*#batch n"], b: Float[np.ndarray, "*#batch m"],
            level: float = LEVEL) -> tuple[Batch, Batch, Batch]:
    """mean(a) - mean(b) over the last axis with Welch's t interval (scipy.stats.ttest_ind, unequal variances)."""
    from scipy import stats

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ci = stats.ttest_ind(a, b, axis=-1, equal_var=False).confidence_interval(confidence_level=level)
    return (np.asarray(a.mean(-1) - b.mean(-1), dtype=float), np.asarray(ci.low, dtype=float),
            np.asarray(ci.high, dtype=float))


def exact_share(successes, n, level: float = LEVEL) -> tuple[Batch, Batch]:
    """Clopper-Pearson interval of successes / n (arrays broadcast); scipy.stats.binomtest's "exact" method: the
    beta quantiles, through scipy.special's regularised incomplete beta inverse (scipy.stats.beta.ppf is the same
    function; scipy.stats costs a cached report half a second to import)."""
    from scipy.special import betaincinv

    k, n = np.asarray(successes, dtype=float), np.asarray(n, dtype=float)
    a = 1 - level
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(k > 0, betaincinv(np.maximum(k, 1e-300), n - k + 1, a / 2), 0.0)
        high = np.where(k < n, betaincinv(k + 1, np.maximum(n - k, 1e-300), 1 - a / 2), 1.0)
    return np.asarray(low, dtype=float), np.asarray(high, dtype=float)


def wilson_share(successes, n, level: float = LEVEL) -> tuple[Batch, Batch]:
    """The Wilson score interval (kept for the coverage study: it under-covers at small n near 0 and 1)."""
    from scipy import stats

    k, n = np.asarray(successes, dtype=float), np.asarray(n, dtype=float)
    z = float(stats.norm.ppf(0.5 + level / 2))
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)


# ---------------------------------------------------------------------------- one estimate each
def _finite(values) -> np.ndarray:
    v = np.asarray([x for x in values if x is not None and isinstance(x, (int, float, np.floating, np.integer))],
                   dtype=float)
    return v[np.isfinite(v)]


def mean_t(values, level: float = LEVEL, log: bool = False) -> Estimate | None:
    """The mean of replicate values (their geometric mean with `log`, which needs every value > 0) and its t
    interval; one value gives no interval (NaN ends); none gives None."""
    v = _finite(values)
    if log:
        if (v <= 0).any():
            return None
        v = np.log(v)
    if not len(v):
        return None
    back = np.exp if log else (lambda x: x)
    method = T_LOG_MEAN if log else T_MEAN
    if len(v) < 2:
        return Estimate(float(back(v[0])), math.nan, math.nan, 1, method, "log" if log else "linear")
    m, lo, hi = t_interval(v, level)
    se = float(v.std(ddof=1) / math.sqrt(len(v)))
    return Estimate(float(back(m)), float(back(lo)), float(back(hi)), len(v), method, "log" if log else "linear",
                    se=se, df=float(len(v) - 1), level=level)


def slope_t(x, y, level: float = LEVEL) -> Estimate | None:
    """The OLS slope of y on x with its t interval; None with fewer than 3 points or 2 distinct x."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    n_x = len(np.unique(x))
    if len(x) < 3 or n_x < 2:
        return None
    b, lo, hi, se = ols_t(x, y, level)
    return Estimate(float(b), float(lo), float(hi), len(x), OLS_T, se=float(se), df=float(len(x) - 2), level=level,
                    params=2, n_x=n_x)


def ratio_ends(n_lo: Float[np.ndarray, "*#batch n"], n_hi: Float[np.ndarray, "*#batch n"],
               d_lo: Float[np.ndarray, "*#batch m"], d_hi: Float[np.ndarray, "*#batch m"], level: float = LEVEL,
               den_fixed: bool = False) -> tuple[Batch, Batch]:
    """The interval of a ratio of geometric means from the log escapes' bounds (arrays, forks on the last axis):
    its low end from num's lows against den's highs, its high end from num's highs against den's lows (Welch's t;
    with `den_fixed` a one-sample t against den's mean). An end that meets an unbounded escape (a censored fork,
    or one seen at the first evaluation: its low is 0) is 0 or inf."""
    def end(a, b, which):
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        ok = np.isfinite(a).all(-1) & np.isfinite(b).all(-1)
        a, b = np.where(np.isfinite(a), a, 0.0), np.where(np.isfinite(b), b, 0.0)
        if den_fixed:
            _, lo, hi = t_interval(a - b.mean(-1, keepdims=True), level)
        else:
            _, lo, hi = welch_t(a, b, level)
        return np.asarray(np.where(ok, np.exp(hi if which else lo), np.inf if which else 0.0), dtype=float)

    return end(n_lo, d_hi, 0), end(n_hi, d_lo, 1)


def _logs(pairs, end: int) -> np.ndarray:
    v = np.array([p[end] for p in pairs], dtype=float)
    with np.errstate(divide="ignore"):
        return np.log(np.where(v > 0, v, 0.0))


def ratio_bound(num: list[tuple[float, float]], den: list[tuple[float, float]]) -> str:
    """The bound a ratio of escapes (low, high] at the seen steps is: ">=" with censored forks (high inf) on top only
    (a later escape there can only raise it), "<=" with censored forks below only, BOTH_CENSORED with both, else ""."""
    num_cens, den_cens = any(math.isinf(h) for _, h in num), any(math.isinf(h) for _, h in den)
    return BOTH_CENSORED if num_cens and den_cens else ">=" if num_cens else "<=" if den_cens else ""


def log_ratio_t(num: list[tuple[float, float]], den: list[tuple[float, float]], level: float = LEVEL,
                den_fixed: bool = False, num_fixed: bool = False) -> Estimate | None:
    """The ratio of the geometric means of two arms' escapes, num over den, with Welch's t interval on the logs.

    Each escape is an interval (low, high]: an escape seen at evaluation step t is (t - resolution, t], a
    censored one (bound, inf). The value is the ratio at the seen steps (at the bounds for censored forks:
    then a bound, ">=" when num is censored, "<=" when den is, BOTH_CENSORED and no bound when both are); the interval is `ratio_ends`', so it holds every
    true escape the data allow. With `den_fixed` the den arm has no randomness of its own (full_batch: one fork
    stands for every seed) and enters as a constant: a one-sample t on num. None when an arm has no escape or a
    random arm has one fork only. `num_fixed`: the num arm is the constant one (the reciprocal of den over num)."""
    if num_fixed:  # the constant arm on top: the reciprocal of den over num
        inv = log_ratio_t(den, num, level, den_fixed=True)
        if inv is None:
            return None
        flip = {">=": "<=", "<=": ">=", "": "", BOTH_CENSORED: BOTH_CENSORED}[inv.bound]
        return Estimate(1 / inv.value, 1 / inv.high if inv.high > 0 else math.inf,
                        1 / inv.low if inv.low > 0 else math.inf, inv.n, inv.method, "log", se=inv.se, df=inv.df,
                        level=level, params=inv.params, bound=flip)
    if not num or not den or len(num) < 2 or (len(den) < 2 and not den_fixed):
        return None
    n_lo, n_hi, d_lo, d_hi = _logs(num, 0), _logs(num, 1), _logs(den, 0), _logs(den, 1)
    n_seen = np.where(np.isfinite(n_hi), n_hi, n_lo)
    d_seen = np.where(np.isfinite(d_hi), d_hi, d_lo)
    bound = ratio_bound(num, den)
    value = float(np.exp(n_seen.mean() - d_seen.mean()))
    low, high = (float(v) for v in ratio_ends(n_lo, n_hi, d_lo, d_hi, level, den_fixed))
    a, b = n_seen, d_seen
    if den_fixed:
        se, df = float(a.std(ddof=1) / math.sqrt(len(a))), float(len(a) - 1)
    else:
        va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
        se = math.sqrt(va + vb)
        df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1)) if va + vb > 0 else len(a) + len(b) - 2
    n = len(num) if den_fixed else min(len(num), len(den))
    return Estimate(value, low, high, n, WELCH_LOG, "log", se=se, df=float(df), level=level,
                    params=1 if den_fixed else 2, bound=bound)


def share_exact(successes: int, n: int, level: float = LEVEL) -> Estimate | None:
    """A share successes / n with its exact interval; None without any trial."""
    if n <= 0:
        return None
    lo, hi = exact_share(successes, n, level)
    p = successes / n
    return Estimate(p, float(lo), float(hi), int(n), EXACT_SHARE, level=level, successes=int(successes),
                    se=math.sqrt(max(p * (1 - p), 0.25 / n) / n))
