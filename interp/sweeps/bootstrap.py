"""Bootstrap intervals of a slope in log-log, and the coverage study that chose the scheme.

Seeds are replicates. The scheme was chosen by measured coverage (`coverage`,
docs/scaling.md). With 3 or more seeds per x value (the usual case), seeds are resampled
within each x value and the slope is studentized (percentile-t) with the pooled within-x
scatter: about 95% coverage even when the noise differs between x values. With 2 seeds
per x that interval is needlessly wide, so the leverage-corrected residuals are resampled
instead (percentile-t). With one seed per x, the x values are resampled: the paper's
scheme, kept so its number can be reproduced, which covers only about 89% with 5-6 points
(`scheme="residual"` is the calibrated alternative). A mean over replicates (`mean_ci`)
gets the bootstrap SE times Student's t.

All randomness comes from the generator passed in (the fits pass
`interp.seeding.numpy_generator(seed, "bootstrap")`), so the same call gives the same CI.
numpy and scipy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from interp.errors import InterpError
from interp.seeding import numpy_generator

SCHEMES = ("auto", "within", "over", "residual")
N_BOOT = 2000


def check_level(ci: float, n_boot: int) -> None:
    """Refuse a confidence level outside [0.5, 1) or too few replicates for its tails."""
    if not 0.5 <= ci < 1.0:
        raise InterpError(f"ci must be a confidence level in [0.5, 1), got {ci}")
    if n_boot < 200:
        raise InterpError(f"n_boot must be at least 200 for a {ci:.0%} interval, got {n_boot}")


def ols(x: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> tuple[np.ndarray | float, np.ndarray | float]:
    """(Weighted) least-squares slope and intercept of every row of y on x (rows broadcast)."""
    if w is None:
        w = np.ones(np.broadcast_shapes(x.shape, y.shape))
    sw = w.sum(-1, keepdims=True)
    xm = (w * x).sum(-1, keepdims=True) / sw
    ym = (w * y).sum(-1, keepdims=True) / sw
    xc = x - xm
    with np.errstate(invalid="ignore", divide="ignore"):
        b = (w * xc * (y - ym)).sum(-1) / (w * xc * xc).sum(-1)
    a = ym[..., 0] - b * xm[..., 0]
    return b, a


@dataclass
class Boot:
    """One bootstrapped slope: the OLS fit, its CI, R^2 and the band on the grid."""

    slope: float
    intercept: float
    lo: float
    hi: float
    r2: float
    scheme: str
    band: np.ndarray          # (3, G): fit, lo, hi of log y on the grid (empty without a grid)
    n_valid: int              # bootstrap replicates that entered the quantiles


def quantiles(v: np.ndarray, q: list[float]) -> tuple[float, float, int]:
    ok = np.isfinite(v)
    if ok.sum() < 0.5 * len(v):
        return math.nan, math.nan, int(ok.sum())
    lo, hi = np.quantile(v[ok], q)
    return float(lo), float(hi), int(ok.sum())


def bootstrap(lx: np.ndarray, ly: np.ndarray, scheme: str, n_boot: int, level: float,
              rng: np.random.Generator, grid: np.ndarray | None = None) -> Boot:
    """Slope of ly on lx with a bootstrap CI (and a pointwise band on `grid`), vectorised over replicates.

    within:   resample each x value's replicates (residuals around the x mean, scaled by
              sqrt(n/(n-1)); an x with one replicate borrows the pooled residuals), then
              percentile-t with the pooled within-x standard deviation
    over:     resample the x values, each with all its replicates (the paper's scheme), percentile
    residual: resample the leverage-corrected OLS residuals of all points, percentile-t
    """
    order = np.argsort(lx, kind="stable")
    lx, ly = lx[order], ly[order]
    alpha = 1.0 - level
    q = [alpha / 2, 1 - alpha / 2]
    n = len(lx)
    ux, g, counts = np.unique(lx, return_inverse=True, return_counts=True)
    m = len(ux)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    b, a = (float(v) for v in ols(lx, ly))
    xm = lx.mean()
    xc = lx - xm
    sxx = float((xc * xc).sum())
    fit = a + b * lx
    e = ly - fit
    ss_tot = float(((ly - ly.mean()) ** 2).sum())
    r2 = 1.0 - float((e * e).sum()) / ss_tot if ss_tot > 0 else math.nan
    grid = np.empty(0) if grid is None else grid
    g_fit = a + b * grid
    c0 = np.sqrt(1.0 / n + (grid - xm) ** 2 / sxx)
    band = np.stack([g_fit, np.full_like(grid, np.nan), np.full_like(grid, np.nan)])
    U = rng.random((n_boot, n))

    def student(bs: np.ndarray, ybar_s: np.ndarray, s_star: np.ndarray, s: float) -> tuple[float, float, int]:
        with np.errstate(invalid="ignore", divide="ignore"):
            t = (bs - b) / (s_star / math.sqrt(sxx))
            tg = ((ybar_s - ly.mean())[:, None] + (bs - b)[:, None] * (grid - xm)) / (s_star[:, None] * c0)
        t[~np.isfinite(t)] = np.nan
        lo_t, hi_t, n_ok = quantiles(t, q)
        se = s / math.sqrt(sxx)
        tg = tg[np.isfinite(tg).all(1)]
        if grid.size and len(tg) >= 0.5 * len(bs):
            qg = np.quantile(tg, q, axis=0)
            band[1], band[2] = g_fit - qg[1] * s * c0, g_fit - qg[0] * s * c0
        return b - hi_t * se, b - lo_t * se, n_ok

    if scheme == "within":
        gmean = np.bincount(g, ly) / counts
        size = counts[g]
        df = int((counts - 1).sum())
        if df == 0:
            raise InterpError("the 'within' bootstrap needs replicate runs at some x value; there is one run per x")
        r = (ly - gmean[g]) * np.sqrt(size / np.maximum(size - 1, 1))
        s = math.sqrt(float(((ly - gmean[g]) ** 2).sum()) / df)
        idx = starts[g] + np.floor(U * size).astype(int)
        Y = gmean[g] + r[idx]
        single = size == 1
        if single.any():
            pool = r[~single]
            Y[:, single] = ly[single] + pool[np.floor(U[:, single] * len(pool)).astype(int)]
        bs, _ = ols(lx, Y)
        gm = np.add.reduceat(Y, starts, axis=1) / counts
        s_star = np.sqrt(((Y - gm[:, g]) ** 2).sum(1) / df)
        lo, hi, n_ok = student(bs, Y.mean(1), s_star, s)
    elif scheme == "residual":
        if n <= 2:
            raise InterpError("the 'residual' bootstrap needs more than 2 runs")
        h = 1.0 / n + xc * xc / sxx
        r = e / np.sqrt(np.clip(1.0 - h, 1e-12, None))
        r = r - r.mean()
        s = math.sqrt(float((e * e).sum()) / (n - 2))
        Y = fit + r[np.floor(U * n).astype(int)]
        bs, as_ = ols(lx, Y)
        s_star = np.sqrt(((Y - as_[:, None] - bs[:, None] * lx) ** 2).sum(1) / (n - 2))
        lo, hi, n_ok = student(bs, Y.mean(1), s_star, s)
    elif scheme == "over":
        cmax = int(counts.max())
        G = np.sort(rng.integers(0, m, (n_boot, m)), axis=1)                         # x values drawn
        slot = np.arange(cmax)
        valid = slot[None, None, :] < counts[G][:, :, None]                       # (B, m, cmax)
        idx = np.minimum(starts[G][:, :, None] + slot, n - 1)
        X, Y = lx[idx].reshape(n_boot, -1), ly[idx].reshape(n_boot, -1)
        bs, as_ = ols(X, Y, valid.reshape(n_boot, -1).astype(float))
        bs[(G[:, 1:] != G[:, :-1]).sum(1) < 1] = np.nan                             # one x value: no slope
        lo, hi, n_ok = quantiles(bs, q)
        if grid.size and n_ok:
            fg = (as_[:, None] + bs[:, None] * grid)[np.isfinite(bs)]
            band[1], band[2] = np.quantile(fg, q, axis=0)
    else:
        raise InterpError(f"unknown bootstrap scheme {scheme!r}; known: {', '.join(SCHEMES)}")
    return Boot(slope=b, intercept=a, lo=float(lo), hi=float(hi), r2=r2, scheme=scheme, band=band, n_valid=n_ok)


def resolve_scheme(scheme: str, lx: np.ndarray) -> str:
    """The scheme "auto" stands for, given the log x values (their replicates per x)."""
    if scheme not in SCHEMES:
        raise InterpError(f"unknown bootstrap scheme {scheme!r}; known: {', '.join(SCHEMES)}")
    if scheme != "auto":
        return scheme
    counts = np.unique(lx, return_counts=True)[1]
    if counts.max() == 1:
        return "over"          # one seed per x: the paper's scheme
    # with 2 seeds per x the within-x studentized interval is needlessly wide (docs/scaling.md)
    return "within" if float(np.median(counts)) >= 3 else "residual"


X_LABELS = {"k": "K", "batch_size": "batch size", "n_bases": "n_bases"}


def method_label(scheme: str, x: str) -> str:
    """How the CI was made, in words, for summaries."""
    x = X_LABELS.get(x, x)
    return {
        "within": f"seeds resampled within {x}, studentized (percentile-t)",
        "over": f"{x} values resampled (the paper's scheme), percentile",
        "residual": "leverage-corrected residuals resampled, studentized (percentile-t)",
    }[scheme]


def check_points(lx: np.ndarray, what: str, x: str, min_distinct: int) -> None:
    """Refuse a slope with too few distinct x values (fewer are enough with replicate seeds)."""
    distinct = len(np.unique(lx))
    replicated = distinct < len(lx)
    need = min_distinct if not replicated else min(min_distinct, 2)
    if distinct < need:
        raise InterpError(f"{what}: too few points: {distinct} distinct {x} value(s) among {len(lx)} usable run(s); "
                          f"a fit with a CI needs at least {need}"
                          + ("" if replicated else " (or 2 with replicate seeds)"))


def mean_ci(v: np.ndarray, n_boot: int, level: float, rng: np.random.Generator) -> tuple[float, float, float]:
    """Mean and CI by a bootstrap over replicates: the bootstrap SE (residuals scaled by sqrt(n/(n-1)))
    times Student's t with n-1 df. A percentile bootstrap of 3-5 values covers 76-87%, not 95%."""
    n = len(v)
    mean = float(v.mean())
    if n < 2:
        return mean, math.nan, math.nan
    r = (v - mean) * math.sqrt(n / (n - 1))
    means = mean + r[np.floor(rng.random((n_boot, n)) * n).astype(int)].mean(1)
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * float(means.std(ddof=1))
    return mean, mean - half, mean + half


# ---------------------------------------------------------------------------- coverage study
NOISES = ("gauss", "t3", "hetero", "hetero10", "noisy_end")


def coverage(scheme: str = "within", d_values: tuple[float, ...] = (3000, 6000, 12000, 24000, 36000),
             seeds: int = 3, sigma: float = 0.15, noise: str = "gauss", n_sweeps: int = 500,
             n_boot: int = 1000, ci: float = 0.95, delta: float = 1.2, c: float = 3.0, seed: int = 0) -> dict:
    """Share of synthetic sweeps (tau = c * D^delta * noise) whose CI contains delta, and the median width.

    noise: "gauss" (lognormal, sd sigma), "t3" (log noise Student t, 3 df, scale sigma),
    "hetero" (lognormal, sd growing from sigma/2 at the smallest D to 2 sigma at the largest),
    "hetero10" (from sigma/3 to 3 sigma) or "noisy_end" (sd sigma, 4 sigma at the largest D).
    This is the measurement behind the choice of scheme (docs/scaling.md).
    """
    if noise not in NOISES:
        raise InterpError(f"unknown noise {noise!r}; known: {', '.join(NOISES)}")
    check_level(ci, n_boot)
    gen = np.random.default_rng([int(seed), 1])
    lx = np.log(np.repeat(np.asarray(sorted(d_values), float), seeds))
    u = (lx - lx.min()) / (lx.max() - lx.min())
    sch = resolve_scheme(scheme, lx)
    hits, widths = 0, []
    for i in range(n_sweeps):
        if noise == "gauss":
            eps = sigma * gen.standard_normal(lx.shape)
        elif noise == "t3":
            eps = sigma * gen.standard_t(3, lx.shape)
        elif noise == "hetero":
            eps = sigma * 0.5 * 4.0 ** u * gen.standard_normal(lx.shape)
        elif noise == "hetero10":
            eps = sigma / 3.0 * 9.0 ** u * gen.standard_normal(lx.shape)
        else:
            eps = sigma * np.where(u == 1.0, 4.0, 1.0) * gen.standard_normal(lx.shape)
        boot = bootstrap(lx, math.log(c) + delta * lx + eps, sch, n_boot, ci, numpy_generator(seed * 100_003 + i, "bootstrap"))
        hits += boot.lo <= delta <= boot.hi
        widths.append(boot.hi - boot.lo)
    return dict(scheme=sch, method=method_label(sch, "D"), noise=noise, sigma=sigma, seeds=seeds, n_d=len(d_values),
                n_sweeps=n_sweeps, coverage=hits / n_sweeps, median_width=float(np.nanmedian(widths)))
