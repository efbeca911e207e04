"""eta_c(K): the learning rate at which half the seeds transition, from a grid of (lr, transitioned of n) cells.

Three estimates side by side (docs/phase.md):

- ours: a binomial logistic regression of the outcome on x = log lr (statsmodels GLM; the grid is log-spaced),
  p = sigma(b (x - x_c)), eta_c = exp(x_c). Its interval is a profile likelihood interval for x_c: every x_c whose
  profile deviance 2 (l_max - max_b l(x_c, b)) stays under a cutoff. The cutoff is calibrated by simulation
  (`calibrate_cutoff`) so that the interval covers the true eta_c at least 95% of the time at the design's grid and
  seeds per cell, since with 3 seeds per cell the chi-square cutoff (3.84) does not hold. Perfectly separated
  data (every cell all or nothing, common with 3 seeds) have no finite maximum-likelihood slope; the profile then
  still has a flat maximum over the gap between the last all-transitioned and the first none-transitioned lr, and
  the point estimate is the middle of that flat maximum (geometric midpoint of the gap).
- the author's: least squares of sigma(s (eta_c - eta)) on linear eta, weighted by the binomial standard error of
  each cell's share (scipy curve_fit, as eta_sweep/analysis/transition_probability.py); its standard error;
  "fit failed" when it does not converge.
- a bracket: [largest lr with share >= 0.5, smallest lr with share < 0.5], open when the shares do not cross 0.5.

The profile is computed on a grid of (x_c, b), vectorised over many data sets at once so that the coverage study
(`coverage`) runs thousands of simulated grids in seconds.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

CHI2_95 = 3.841458820694124  # the chi-square(1) 95% point: the uncalibrated profile cutoff
# the profile's grids: x_c over the design's span widened by one span each side, |b| log-spaced (per unit of log lr)
N_CENTRES = 481
SLOPES = np.concatenate([-np.geomspace(0.05, 200, 120)[::-1], [0.0], np.geomspace(0.05, 200, 120)])


@dataclass(frozen=True)
class EtaFit:
    k: int
    eta_c: float | None  # ours: exp(x_c) at the profile maximum (None: no crossing)
    low: float | None  # the calibrated profile interval (None at an open end: beyond the grid)
    high: float | None
    slope: float | None  # b per unit of log lr at the maximum (None under separation: unbounded)
    separated: bool  # every cell on one side of the boundary all or nothing: the slope is not finite
    method: str  # "GLM" or "profile (separated)"
    author_eta_c: float | None
    author_se: float | None
    author_reason: str
    bracket_low: float | None  # largest lr with share >= 0.5
    bracket_high: float | None  # smallest lr with share < 0.5
    cutoff: float
    reason: str  # why ours is missing or open-ended ("" when closed)

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        def g(v):
            return "open" if v is None else f"{v:.3g}"
        if self.eta_c is None:
            ours = f"eta_c n/a ({self.reason})"
        else:
            ours = f"eta_c = {self.eta_c:.3g} [{g(self.low)}, {g(self.high)}] ({self.method})"
        se = "" if self.author_se is None else f" +- {self.author_se:.2g}"
        author = (f"author's LS fit {self.author_eta_c:.3g}{se}" if self.author_eta_c is not None
                  else f"author's LS fit: {self.author_reason}")
        return f"K={self.k}: {ours}; {author}; bracket [{g(self.bracket_low)}, {g(self.bracket_high)}]"


def _loglik(x: np.ndarray, y: np.ndarray, n: np.ndarray, centres: np.ndarray, slopes: np.ndarray) -> np.ndarray:
    """log L(x_c, b) for data sets y (S, C) of n (C,) trials at x (C,): shape (S, centres, slopes)."""
    z = slopes[None, :, None] * (x[None, None, :] - centres[:, None, None])  # (X, B, C)
    log_p = -np.logaddexp(0.0, -z)
    log_q = -np.logaddexp(0.0, z)
    # sum over cells of y log p + (n - y) log q, for every data set at once (two matrix products)
    shape = (len(y), len(centres), len(slopes))
    return (y @ log_p.reshape(-1, len(x)).T + (n[None, :] - y) @ log_q.reshape(-1, len(x)).T).reshape(shape)


def centres_for(x: np.ndarray) -> np.ndarray:
    span = float(x.max() - x.min())
    return np.linspace(x.min() - span, x.max() + span, N_CENTRES)


def profile(x: np.ndarray, y: np.ndarray, n: np.ndarray, centres: np.ndarray | None = None):
    """(centres, profile log-likelihood (S, X), the maximising slope (S, X)) of data sets y (S, C)."""
    centres = centres_for(x) if centres is None else centres
    ll = _loglik(x, np.atleast_2d(y).astype(float), n.astype(float), centres, SLOPES)
    best = ll.argmax(axis=2)
    return centres, np.take_along_axis(ll, best[..., None], axis=2)[..., 0], SLOPES[best]


def deviance_at(x: np.ndarray, y: np.ndarray, n: np.ndarray, truth: float) -> np.ndarray:
    """The profile deviance 2 (l_max - l_prof(truth)) of each data set (S,): the interval covers `truth` iff it is
    below the cutoff."""
    centres = centres_for(x)
    grid = np.append(centres, truth)
    _, prof, _ = profile(x, y, n, grid)
    return 2.0 * (prof[:, :-1].max(axis=1) - prof[:, -1])


def simulate(x: np.ndarray, n: np.ndarray, truth: float, slope: float, sims: int, rng: np.random.Generator):
    p = 1.0 / (1.0 + np.exp(-slope * (x - truth)))
    return rng.binomial(n[None, :], p[None, :], size=(sims, len(x)))


# the scenarios the cutoff is calibrated over: the true boundary anywhere between the second and the second-to-last
# lr (as a fraction of the design's span in log lr), with a sharp, a moderate and a shallow slope (p from 0.12 to
# 0.88 across 0.2, 1 and 4 units of log lr; the tiny model's boundaries are the sharp kind)
POSITIONS = (0.3, 0.4, 0.5, 0.6, 0.7)
SCENARIO_SLOPES = (-20.0, -4.0, -1.0)  # negative: p falls as lr grows, as in the author's eta-sweep


def coverage(x: np.ndarray, n: np.ndarray, cutoff: float, sims: int = 2000, seed: int = 0) -> list[dict]:
    """Per scenario (position, slope): the share of `sims` simulated grids whose interval under `cutoff` covers the
    true x_c."""
    rng = np.random.default_rng(seed)
    out = []
    span = float(x.max() - x.min())
    for slope in SCENARIO_SLOPES:
        for pos in POSITIONS:
            truth = float(x.min() + pos * span)
            dev = np.concatenate([deviance_at(x, simulate(x, n, truth, slope, 100, rng), n, truth)
                                  for _ in range(sims // 100)])
            out.append({"slope": slope, "position": pos, "eta_c": math.exp(truth), "sims": len(dev),
                        "coverage": float(np.mean(dev <= cutoff + 1e-9))})
    return out


def calibrate_cutoff(x: np.ndarray, n: np.ndarray, level: float = 0.95, sims: int = 2000, seed: int = 0) -> float:
    """The smallest profile cutoff whose coverage reaches `level` in every scenario (never below chi-square's)."""
    rng = np.random.default_rng(seed)
    span = float(x.max() - x.min())
    cutoffs = [CHI2_95]
    for slope in SCENARIO_SLOPES:
        for pos in POSITIONS:
            truth = float(x.min() + pos * span)
            dev = np.concatenate([deviance_at(x, simulate(x, n, truth, slope, 100, rng), n, truth)
                                  for _ in range(sims // 100)])
            cutoffs.append(float(np.quantile(dev, level, method="higher")))
    return max(cutoffs)


def _interval(centres: np.ndarray, prof: np.ndarray, cutoff: float) -> tuple[float | None, float | None]:
    """The outermost centres inside the cutoff (None where the inside region reaches the grid's end: open)."""
    inside = np.flatnonzero(2.0 * (prof.max() - prof) <= cutoff)
    lo, hi = inside.min(), inside.max()
    return (None if lo == 0 else float(centres[lo])), (None if hi == len(centres) - 1 else float(centres[hi]))


def bracket(lrs: np.ndarray, shares: np.ndarray) -> tuple[float | None, float | None]:
    """[largest lr with share >= 0.5, smallest with share < 0.5] (the author's fallback)."""
    above, below = lrs[shares >= 0.5], lrs[shares < 0.5]
    return (float(above.max()) if len(above) else None), (float(below.min()) if len(below) else None)


def author_fit(lrs: np.ndarray, shares: np.ndarray, n: np.ndarray) -> tuple[float | None, float | None, str]:
    """The author's least squares of sigma(s (eta_c - eta)) on linear eta (his starting point and weights)."""
    import warnings

    from scipy.optimize import curve_fit

    if len(lrs) < 3:
        return None, None, "insufficient points"
    lo, hi = bracket(lrs, shares)
    if lo is None or hi is None:
        return None, None, "no crossing of 0.5"

    def model(eta, eta_c, s):
        return 1.0 / (1.0 + np.exp(-s * (eta_c - eta)))
    sigma = np.sqrt(np.maximum(shares * (1 - shares), 1e-6) / n)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            popt, pcov = curve_fit(model, lrs, shares, p0=[0.5 * (lo + hi), 10_000.0], sigma=sigma,
                                   absolute_sigma=True, maxfev=5000)
    except Exception as exc:  # noqa: BLE001 - the author's fit reports its failure, as his script does
        return None, None, f"fit failed: {type(exc).__name__}"
    se = float(np.sqrt(np.diag(pcov))[0])
    return float(popt[0]), (se if math.isfinite(se) else None), "ok"


def _glm(x: np.ndarray, y: np.ndarray, n: np.ndarray):
    """statsmodels' binomial GLM of (y of n) on x: (x_c, b) or None when it does not give finite estimates."""
    import warnings

    import statsmodels.api as sm

    endog = np.column_stack([y, n - y])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = sm.GLM(endog, sm.add_constant(x), family=sm.families.Binomial()).fit()
    except Exception:  # noqa: BLE001 - separation, singular design: the profile takes over
        return None
    a, b = (float(v) for v in res.params)
    if not (math.isfinite(a) and math.isfinite(b)) or abs(b) < 1e-9 or abs(b) > SLOPES.max():
        return None
    return -a / b, b


def fit_eta_c(k: int, lrs, transitioned, n, cutoff: float) -> EtaFit:
    """eta_c(K) from cells (lr, transitioned of n) by the three estimates (module docstring)."""
    lrs, y, n = (np.asarray(v, dtype=float) for v in (lrs, transitioned, n))
    order = np.argsort(lrs)
    lrs, y, n = lrs[order], y[order], n[order]
    shares = y / n
    x = np.log(lrs)
    b_lo, b_hi = bracket(lrs, shares)
    a_eta, a_se, a_reason = author_fit(lrs, shares, n)
    common = dict(author_eta_c=a_eta, author_se=a_se, author_reason=a_reason, bracket_low=b_lo, bracket_high=b_hi,
                  cutoff=cutoff)
    if y.sum() == 0 or y.sum() == n.sum():
        why = "no run transitioned" if y.sum() == 0 else "every run transitioned"
        return EtaFit(k, None, None, None, None, False, "none", reason=f"{why}: eta_c lies outside the grid",
                      **common)
    centres, prof, slopes = profile(x, y, n)
    prof, slopes = prof[0], slopes[0]
    low, high = _interval(centres, prof, cutoff)
    top = np.flatnonzero(prof >= prof.max() - 1e-9)
    # separated: the maximum is flat (a run of centres) at the largest slope the grid allows
    separated = len(top) > 1 and np.all(np.abs(slopes[top]) >= SLOPES.max() * 0.99)
    glm = None if separated else _glm(x, y, n)
    if glm is not None:
        xc, b, method = glm[0], glm[1], "GLM"
    else:
        xc, b, method = float(0.5 * (centres[top.min()] + centres[top.max()])), None, "profile (separated)"
    reason = "" if low is not None and high is not None else "the interval reaches past the grid"
    return EtaFit(k, math.exp(xc), None if low is None else math.exp(low), None if high is None else math.exp(high),
                  b, bool(separated), method, reason=reason, **common)
