"""Fits of the paper's family-level claims on a sweep table (one row per run, `Sweep.table()`).

    power_law   tau = C * D^delta (claim 1), bootstrap CI, R^2, sensitivity to the D range
    fixed_d     at one D, the slope of log tau against log K (claim 2: flat)
    noise       tau against lr and batch size (claim 3: more gradient noise, longer plateau)
    asymmetry   steps to exact match, a_to_b over bz_to_a, paired by seed (claim 4)

Seeds are replicates. The bootstrap scheme was chosen by measured coverage (`coverage`,
docs/scaling.md). With 3 or more seeds per x value (the usual case), seeds are resampled
within each x value and the slope is studentized (percentile-t) with the pooled within-x
scatter: about 95% coverage even when the noise differs between x values. With 2 seeds
per x that interval is needlessly wide, so the leverage-corrected residuals are resampled
instead (percentile-t). With one seed per x, the x values are resampled: the paper's
scheme, kept so its number can be reproduced, which covers only about 89% with 5-6 points
(`scheme="residual"` is the calibrated alternative).
Only runs with status "done" enter a fit; runs that ended before reaching the measure's
threshold are censored (the true value is above steps_run): they are counted, reported
and kept out of the fit with a warning, never silently dropped. All randomness comes from the
stream of `interp.seeding.numpy_generator(seed, "bootstrap")`, so the same call gives the same CI.
numpy, pandas and scipy only: plotly is imported by `.figure()` alone.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from interp.errors import InterpError
from interp.seeding import numpy_generator

# ---------------------------------------------------------------------------- the paper's numbers
PAPER_DELTA = 1.19                       # tau ~ D^delta, D from 3k to 36k (K varied at n_bases = 1000)
PAPER_DELTA_CI = (1.14, 1.31)            # 95% CI, one seed per point, bootstrap over points
PAPER_DELTA_RANGE = (3_000, 36_000)
PAPER_DELTA_OTHER = ((1.31, 0.14), (1.70, 0.09))  # (delta, +-) from its tables for other K ranges
PAPER_FIXED_D = 10_000
PAPER_FIXED_D_TAU = {5: 1600, 10: 1650, 20: 1600, 36: 1600}  # K -> tau at D = 10,000
PAPER_LR_K = 20
PAPER_LR_MEASURE = "tau_window"
PAPER_LR_TAU = {3e-4: 2100, 5e-4: 2200, 1e-3: 3400, 2e-3: 7550}  # lr -> tau_window at K = 20
PAPER_LR_NEVER = 5e-3                    # never snaps ...
PAPER_LR_NEVER_STEPS = 50_000            # ... within this many steps
PAPER_LR_RATIO = (7.0, 3.6)              # "7x lr gives 3.6x tau"
PAPER_ASYMMETRY = (1.7, 4.4)             # a_to_b needs 1.7-4.4x the steps of bz_to_a

MEASURES = ("tau_half", "tau_window", "t_start", "t_end", "plateau_height", "snap_step",
            "steps_to_acc_cand_99", "steps_to_exact_99")
SCHEMES = ("auto", "within", "over", "residual")
DIRECTIONS = ("bz_to_a", "a_to_b", "az_to_b", "b_to_a")
N_BOOT = 2000
D_TOL = 0.02    # fixed D: n_bases = round(D / K) makes D differ by up to ~1% between K values
BAND_POINTS = 60


class CensoredRunsWarning(UserWarning):
    """Censored runs were left out of a fit (their true value is only known to exceed steps_run)."""


# ---------------------------------------------------------------------------- small helpers
def _jsonable(v):
    """Plain Python values for json.dumps: numpy scalars unwrapped, NaN -> None, tuples -> lists."""
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, np.ndarray)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if not math.isfinite(float(v)) else float(v)
    if v is None or isinstance(v, str):
        return v
    if v is pd.NA or v is pd.NaT:
        return None
    return str(v)


def _fmt(v: float | None, digits: int = 3) -> str:
    return "n/a" if v is None or not math.isfinite(v) else f"{v:.{digits}g}"


def _ci_str(ci: tuple[float, float], digits: int = 3) -> str:
    return f"[{_fmt(ci[0], digits)}, {_fmt(ci[1], digits)}]"


def _sign(ci: tuple[float, float]) -> str:
    lo, hi = ci
    if math.isfinite(lo) and lo > 0:
        return "+"
    if math.isfinite(hi) and hi < 0:
        return "-"
    return "flat"


def _names(runs: list[str], at_most: int = 6) -> str:
    shown = ", ".join(runs[:at_most])
    return shown + (f" and {len(runs) - at_most} more" if len(runs) > at_most else "")


def _check_level(ci: float, n_boot: int) -> None:
    if not 0.5 <= ci < 1.0:
        raise InterpError(f"ci must be a confidence level in [0.5, 1), got {ci}")
    if n_boot < 200:
        raise InterpError(f"n_boot must be at least 200 for a {ci:.0%} interval, got {n_boot}")


# ---------------------------------------------------------------------------- selecting runs
@dataclass
class _Selection:
    points: pd.DataFrame      # used and censored rows, sorted by (x, run), with `used` and `role`
    rows: pd.DataFrame        # every selected row with its role (used, censored, undefined, not done)
    n_excluded: int           # not done
    n_undefined: int          # done, not censored, measure NaN or not positive
    excluded_runs: list[str]
    undefined_runs: list[str]

    @property
    def used(self) -> pd.DataFrame:
        return self.points[self.points["used"]]

    @property
    def censored_runs(self) -> list[str]:
        return [str(r) for r in self.points.loc[self.points["role"] == "censored", "run"]]


def _select(table: pd.DataFrame, y: str, xs: list[str], what: str, direction: str | None = None,
            where: dict | None = None) -> _Selection:
    """Split the runs into used / censored / undefined / not done, refusing what cannot be fitted."""
    if not isinstance(table, pd.DataFrame):
        raise InterpError(f"{what}: expected a sweep table (a pandas DataFrame, Sweep.table()), "
                          f"got {type(table).__name__}")
    if table.empty:
        raise InterpError(f"{what}: the sweep table is empty (no runs)")
    for col in ["run", "status"]:
        if col not in table.columns:
            raise InterpError(f"{what}: the sweep table lacks the column {col!r} (is it Sweep.table()?)")
    if y not in table.columns:
        known = [m for m in MEASURES if m in table.columns]
        raise InterpError(f"{what}: unknown measure {y!r}; the table has the measures: {', '.join(known) or 'none'}")
    missing = [c for c in xs if c not in table.columns]
    if missing:
        raise InterpError(f"{what}: the sweep table lacks the column(s) {', '.join(missing)}")
    df = table
    if direction is not None:
        if direction not in DIRECTIONS:
            raise InterpError(f"{what}: unknown direction {direction!r}; known: {', '.join(DIRECTIONS)}")
        if "direction" not in df.columns:
            raise InterpError(f"{what}: direction={direction!r} given but the table has no 'direction' column")
        df = df[df["direction"] == direction]
        if df.empty:
            have = sorted(set(table["direction"].astype(str)))
            raise InterpError(f"{what}: no runs of direction {direction!r}; the table has: {', '.join(have)}")
    for col, value in (where or {}).items():
        if value is None:
            continue
        value, rtol = value if isinstance(value, tuple) else (value, 1e-9)
        if col not in df.columns:
            raise InterpError(f"{what}: the sweep table lacks the column {col!r}")
        keep = np.isclose(pd.to_numeric(df[col], errors="coerce").to_numpy(float), float(value), rtol=rtol, atol=0)
        if not keep.any():
            have = sorted(set(pd.to_numeric(df[col], errors="coerce").dropna().tolist()))
            raise InterpError(f"{what}: no runs with {col} = {value:g}; the table has {col} = "
                              f"{', '.join(f'{h:g}' for h in have)}")
        df = df[keep]
    df = df.copy()
    done = (df["status"].astype(str) == "done").to_numpy()
    flag_col = f"censored_{y}"
    if flag_col in df.columns:
        flag = df[flag_col].astype("boolean").fillna(False).to_numpy(bool) & done
    else:
        flag = np.zeros(len(df), bool)
    value = pd.to_numeric(df[y], errors="coerce").to_numpy(float)
    defined = done & ~flag & np.isfinite(value) & (value > 0)
    df["role"] = np.select([~done, flag, defined], ["not done", "censored", "used"], "undefined")
    df["used"] = df["role"] == "used"
    kept = df[df["role"].isin(["used", "censored"])]
    if "direction" in kept.columns and direction is None:
        dirs = sorted(set(kept.loc[kept["used"], "direction"].astype(str)))
        if len(dirs) > 1:
            raise InterpError(f"{what}: the table mixes directions with a defined {y} ({', '.join(dirs)}); "
                              f"pass direction= one of them")
    for x in xs:
        xv = pd.to_numeric(kept[x], errors="coerce").to_numpy(float)
        bad = ~(np.isfinite(xv) & (xv > 0))
        if bad.any():
            raise InterpError(f"{what}: {x} must be a positive number for a log axis; runs "
                              f"{_names([str(r) for r in kept['run'][bad]])} have {x} = {xv[bad].tolist()}")
    kept = kept.sort_values(xs + ["run"], kind="stable").reset_index(drop=True)
    return _Selection(
        points=kept, rows=df, n_excluded=int((~done).sum()), n_undefined=int((df["role"] == "undefined").sum()),
        excluded_runs=[str(r) for r in df.loc[~done, "run"]],
        undefined_runs=[str(r) for r in df.loc[df["role"] == "undefined", "run"]],
    )


def _warn_censored(sel: _Selection, what: str, y: str) -> None:
    names = sel.censored_runs
    if names:
        warnings.warn(f"{what}: {len(names)} censored run(s) left out of the fit ({y} not reached within "
                      f"steps_run, so only a lower bound is known): {_names(names)}", CensoredRunsWarning,
                      stacklevel=3)


def _warn_pooled(used: pd.DataFrame, what: str, columns: list[str]) -> None:
    varied = [c for c in columns if c in used.columns and used[c].nunique(dropna=True) > 1]
    if varied:
        warnings.warn(f"{what}: the runs also differ in {', '.join(varied)}; the fit pools them", UserWarning,
                      stacklevel=3)


# ---------------------------------------------------------------------------- the bootstrap core
def _ols(x: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> tuple[np.ndarray | float, np.ndarray | float]:
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
class _Boot:
    slope: float
    intercept: float
    lo: float
    hi: float
    r2: float
    scheme: str
    band: np.ndarray          # (3, G): fit, lo, hi of log y on the grid (empty without a grid)
    n_valid: int              # bootstrap replicates that entered the quantiles


def _quantiles(v: np.ndarray, q: list[float]) -> tuple[float, float, int]:
    ok = np.isfinite(v)
    if ok.sum() < 0.5 * len(v):
        return math.nan, math.nan, int(ok.sum())
    lo, hi = np.quantile(v[ok], q)
    return float(lo), float(hi), int(ok.sum())


def _bootstrap(lx: np.ndarray, ly: np.ndarray, scheme: str, n_boot: int, level: float,
               rng: np.random.Generator, grid: np.ndarray | None = None) -> _Boot:
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
    b, a = (float(v) for v in _ols(lx, ly))
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
        lo_t, hi_t, n_ok = _quantiles(t, q)
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
        bs, _ = _ols(lx, Y)
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
        bs, as_ = _ols(lx, Y)
        s_star = np.sqrt(((Y - as_[:, None] - bs[:, None] * lx) ** 2).sum(1) / (n - 2))
        lo, hi, n_ok = student(bs, Y.mean(1), s_star, s)
    elif scheme == "over":
        cmax = int(counts.max())
        G = np.sort(rng.integers(0, m, (n_boot, m)), axis=1)                         # x values drawn
        slot = np.arange(cmax)
        valid = slot[None, None, :] < counts[G][:, :, None]                       # (B, m, cmax)
        idx = np.minimum(starts[G][:, :, None] + slot, n - 1)
        X, Y = lx[idx].reshape(n_boot, -1), ly[idx].reshape(n_boot, -1)
        bs, as_ = _ols(X, Y, valid.reshape(n_boot, -1).astype(float))
        bs[(G[:, 1:] != G[:, :-1]).sum(1) < 1] = np.nan                             # one x value: no slope
        lo, hi, n_ok = _quantiles(bs, q)
        if grid.size and n_ok:
            fg = (as_[:, None] + bs[:, None] * grid)[np.isfinite(bs)]
            band[1], band[2] = np.quantile(fg, q, axis=0)
    else:
        raise InterpError(f"unknown bootstrap scheme {scheme!r}; known: {', '.join(SCHEMES)}")
    return _Boot(slope=b, intercept=a, lo=float(lo), hi=float(hi), r2=r2, scheme=scheme, band=band, n_valid=n_ok)


def _resolve_scheme(scheme: str, lx: np.ndarray) -> str:
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


def _method(scheme: str, x: str) -> str:
    x = X_LABELS.get(x, x)
    return {
        "within": f"seeds resampled within {x}, studentized (percentile-t)",
        "over": f"{x} values resampled (the paper's scheme), percentile",
        "residual": "leverage-corrected residuals resampled, studentized (percentile-t)",
    }[scheme]


def _check_points(lx: np.ndarray, what: str, x: str, min_distinct: int) -> None:
    distinct = len(np.unique(lx))
    replicated = distinct < len(lx)
    need = min_distinct if not replicated else min(min_distinct, 2)
    if distinct < need:
        raise InterpError(f"{what}: too few points: {distinct} distinct {x} value(s) among {len(lx)} usable run(s); "
                          f"a fit with a CI needs at least {need}"
                          + ("" if replicated else " (or 2 with replicate seeds)"))


# ---------------------------------------------------------------------------- slope fits (shared)
@dataclass
class SlopeFit:
    """log y = intercept + slope * log x, with a bootstrap CI: one axis of `fixed_d` or `noise`."""

    x: str
    y: str
    slope: float
    ci: tuple[float, float]
    intercept: float
    r2: float
    n_used: int
    n_x: int
    method: str
    fixed: dict[str, float] = field(default_factory=dict)   # what was held fixed, e.g. {"batch_size": 64}

    @property
    def sign(self) -> str:
        """"+" or "-" when the CI excludes 0, else "flat"."""
        return _sign(self.ci)

    def to_dict(self) -> dict:
        return _jsonable(dict(x=self.x, y=self.y, slope=self.slope, ci=list(self.ci), sign=self.sign,
                              intercept=self.intercept, r2=self.r2, n_used=self.n_used, n_x=self.n_x,
                              method=self.method, fixed=self.fixed))

    def summary(self) -> str:
        fixed = ", ".join(f"{k} = {v:g}" for k, v in self.fixed.items())
        return (f"slope of log {self.y} vs log {self.x} = {self.slope:+.3g} {_ci_str(self.ci)} ({self.sign})"
                + (f" at {fixed}" if fixed else "") + f", {self.n_used} runs at {self.n_x} {self.x} values")


def _slope_fit(used: pd.DataFrame, x: str, y: str, what: str, scheme: str, n_boot: int, ci: float, rng,
               min_distinct: int = 3, fixed: dict | None = None, y_values: np.ndarray | None = None) -> SlopeFit:
    lx = np.log(used[x].to_numpy(float))
    ly = np.log(used[y].to_numpy(float) if y_values is None else y_values)
    _check_points(lx, what, x, min_distinct)
    sch = _resolve_scheme(scheme, lx)
    boot = _bootstrap(lx, ly, sch, n_boot, ci, rng)
    return SlopeFit(x=x, y=y, slope=boot.slope, ci=(boot.lo, boot.hi), intercept=boot.intercept, r2=boot.r2,
                    n_used=len(lx), n_x=len(np.unique(lx)), method=_method(sch, x), fixed=dict(fixed or {}))


def _points_records(points: pd.DataFrame, cols: list[str]) -> list[dict]:
    keep = [c for c in ["run"] + cols + ["seed", "steps_run", "role", "used"] if c in points.columns]
    keep = list(dict.fromkeys(keep))
    return _jsonable(points[keep].to_dict(orient="records"))


# ---------------------------------------------------------------------------- 1. power law
@dataclass
class PowerLawFit:
    """tau = C * x^delta fitted in log-log over the done, uncensored runs."""

    x: str
    y: str
    delta: float
    ci: tuple[float, float]
    c: float
    r2: float
    n_used: int
    n_censored: int
    n_excluded: int
    n_undefined: int
    range_sensitivity: dict[str, dict[str, float]]
    points: pd.DataFrame
    band: pd.DataFrame          # x, fit, lo, hi: the fitted line and its pointwise CI band (original units)
    method: str
    scheme: str
    ci_level: float
    n_boot: int
    seed: int
    censored_runs: list[str]
    excluded_runs: list[str]

    @property
    def paper(self) -> dict | None:
        """The paper's delta when this fit is the same claim (tau against D)."""
        if self.x == "D" and self.y in ("tau_half", "tau_window"):
            return dict(delta=PAPER_DELTA, ci=list(PAPER_DELTA_CI), d_range=list(PAPER_DELTA_RANGE))
        return None

    def predict(self, x) -> np.ndarray:
        return self.c * np.asarray(x, dtype=float) ** self.delta

    def to_dict(self) -> dict:
        return _jsonable(dict(
            fit="power_law", x=self.x, y=self.y, delta=self.delta, ci=list(self.ci), ci_level=self.ci_level,
            c=self.c, r2=self.r2, n_used=self.n_used, n_censored=self.n_censored, n_excluded=self.n_excluded,
            n_undefined=self.n_undefined, censored_runs=self.censored_runs, excluded_runs=self.excluded_runs,
            range_sensitivity=self.range_sensitivity, method=self.method, scheme=self.scheme,
            n_boot=self.n_boot, seed=self.seed, paper=self.paper,
            points=_points_records(self.points, [self.x, self.y]),
        ))

    def summary(self) -> str:
        rs = self.range_sensitivity
        line = (f"delta = {self.delta:.3g} {_ci_str(self.ci)} ({self.ci_level:.0%} CI, {self.method}), "
                f"C = {self.c:.3g}, R^2 = {self.r2:.3f}, {self.n_used} runs used, {self.n_censored} censored")
        if self.n_excluded:
            line += f", {self.n_excluded} not done"
        if self.n_undefined:
            line += f", {self.n_undefined} undefined"
        sens = [f"{k.replace('_', ' ')} {self.x} ({v['x']:g}): {_fmt(v['delta'])}" for k, v in rs.items()]
        if sens:
            line += "; " + "; ".join(sens)
        if self.scheme == "over":
            line += " (this scheme under-covers with few points: ~89% measured at 5-6; scheme='residual' ~95%)"
        if self.paper:
            line += f"; paper: {PAPER_DELTA} {_ci_str(PAPER_DELTA_CI)}"
        return line

    def figure(self, **kwargs):
        from interp.plots.sweep import tau_vs_d

        return tau_vs_d(self, **kwargs)


def power_law(table: pd.DataFrame, x: str = "D", y: str = "tau_half", n_boot: int = N_BOOT, ci: float = 0.95,
              seed: int = 0, scheme: str = "auto", direction: str | None = None) -> PowerLawFit:
    """tau = C * x^delta by least squares in log-log, with a bootstrap CI on delta.

    The CI resamples seeds within each x value (studentized) when x values have replicate
    seeds, and the x values themselves when there is one seed per x (the paper's scheme);
    `scheme` forces "within", "over" or "residual". Censored runs (`censored_{y}`) are
    counted, flagged in `.points` (role "censored") and left out with a warning.
    """
    what = f"power law of {y} against {x}"
    _check_level(ci, n_boot)
    sel = _select(table, y, [x], what, direction)
    used = sel.used
    _warn_censored(sel, what, y)
    lx = np.log(used[x].to_numpy(float))
    ly = np.log(used[y].to_numpy(float))
    if len(np.unique(lx)) < 3:
        raise InterpError(f"{what}: too few points: {len(np.unique(lx))} distinct {x} value(s) among {len(lx)} "
                          f"usable run(s) ({len(sel.censored_runs)} censored, {sel.n_excluded} not done); "
                          f"a power law needs at least 3")
    _warn_pooled(used, what, ["lr", "batch_size"])
    sch = _resolve_scheme(scheme, lx)
    grid = np.linspace(lx.min(), lx.max(), BAND_POINTS)
    boot = _bootstrap(lx, ly, sch, n_boot, ci, numpy_generator(seed, "bootstrap"), grid)
    sens = {}
    for key, pick in (("without_smallest", lx > lx.min()), ("without_largest", lx < lx.max())):
        xv = used[x].to_numpy(float)
        slope = float(_ols(lx[pick], ly[pick])[0]) if len(np.unique(lx[pick])) >= 2 else math.nan
        sens[key] = {"x": float(xv.min() if key == "without_smallest" else xv.max()), "delta": slope}
    band = pd.DataFrame({x: np.exp(grid), "fit": np.exp(boot.band[0]), "lo": np.exp(boot.band[1]),
                         "hi": np.exp(boot.band[2])})
    return PowerLawFit(
        x=x, y=y, delta=boot.slope, ci=(boot.lo, boot.hi), c=float(np.exp(boot.intercept)), r2=boot.r2,
        n_used=len(used), n_censored=len(sel.censored_runs), n_excluded=sel.n_excluded, n_undefined=sel.n_undefined,
        range_sensitivity=sens, points=sel.points, band=band, method=_method(sch, x), scheme=sch, ci_level=ci,
        n_boot=n_boot, seed=int(seed), censored_runs=sel.censored_runs, excluded_runs=sel.excluded_runs,
    )


# ---------------------------------------------------------------------------- 2. fixed D
@dataclass
class FixedDResult:
    """At one dataset size D: does tau depend on K? (the paper: no, tau is flat in K)."""

    d: int
    y: str
    fit: SlopeFit
    per_k: pd.DataFrame         # k, n, n_censored, mean, geo_mean, min, max
    ratio_max_min: float        # max / min of the per-K mean tau
    n_used: int
    n_censored: int
    n_excluded: int
    n_undefined: int
    points: pd.DataFrame
    censored_runs: list[str]

    @property
    def slope(self) -> float:
        return self.fit.slope

    @property
    def ci(self) -> tuple[float, float]:
        return self.fit.ci

    @property
    def flat(self) -> bool:
        """The CI of the slope of log tau against log K contains 0."""
        lo, hi = self.fit.ci
        return bool(lo <= 0.0 <= hi)

    @property
    def method(self) -> str:
        return self.fit.method

    @property
    def paper(self) -> dict | None:
        if self.d == PAPER_FIXED_D and self.y in ("tau_half", "tau_window"):
            return dict(d=PAPER_FIXED_D, tau=dict(PAPER_FIXED_D_TAU),
                        ratio_max_min=max(PAPER_FIXED_D_TAU.values()) / min(PAPER_FIXED_D_TAU.values()))
        return None

    def to_dict(self) -> dict:
        return _jsonable(dict(
            fit="fixed_d", d=self.d, y=self.y, slope=self.slope, ci=list(self.ci), flat=self.flat,
            ratio_max_min=self.ratio_max_min, method=self.method, r2=self.fit.r2, n_used=self.n_used,
            n_censored=self.n_censored, n_excluded=self.n_excluded, n_undefined=self.n_undefined,
            censored_runs=self.censored_runs, per_k=self.per_k.to_dict(orient="records"), paper=self.paper,
            points=_points_records(self.points, ["k", self.y]),
        ))

    def summary(self) -> str:
        line = (f"at D = {self.d}: slope of log {self.y} vs log K = {self.slope:+.3g} {_ci_str(self.ci)} "
                f"({self.method}), {'flat' if self.flat else 'not flat'}; max/min of per-K mean = "
                f"{self.ratio_max_min:.3g}, {self.n_used} runs used, {self.n_censored} censored")
        if self.paper:
            line += f"; paper at D = {PAPER_FIXED_D}: max/min = {self.paper['ratio_max_min']:.3g} (flat)"
        return line

    def figure(self, **kwargs):
        from interp.plots.sweep import tau_vs_k_fixed_d

        return tau_vs_k_fixed_d(self, **kwargs)


def _per_value(points: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """Per x value: runs, censored runs and the mean / geometric mean / range of the used values."""
    rows = []
    for xv, part in points.groupby(x, sort=True):
        v = part.loc[part["used"], y].to_numpy(float)
        rows.append({x: xv, "n": int(len(v)), "n_censored": int((part["role"] == "censored").sum()),
                     "mean": float(v.mean()) if len(v) else math.nan,
                     "geo_mean": float(np.exp(np.log(v).mean())) if len(v) else math.nan,
                     "min": float(v.min()) if len(v) else math.nan, "max": float(v.max()) if len(v) else math.nan})
    return pd.DataFrame(rows)


def one_dataset_size(d_values) -> bool:
    """Whether the D values are one dataset size up to rounding (all within D_TOL of the smallest)."""
    ds = [float(v) for v in d_values]
    return bool(ds) and max(ds) <= min(ds) * (1 + D_TOL)


def fixed_d(table: pd.DataFrame, y: str = "tau_half", d: int | float | None = None, n_boot: int = N_BOOT,
            ci: float = 0.95, seed: int = 0, scheme: str = "auto", direction: str | None = None) -> FixedDResult:
    """Slope of log tau against log K at one D, with a bootstrap CI; flat = the CI contains 0."""
    what = f"{y} against K at fixed D"
    _check_level(ci, n_boot)
    if "D" not in table.columns:
        raise InterpError(f"{what}: the sweep table lacks the column 'D'")
    all_d = pd.to_numeric(table["D"], errors="coerce").dropna().astype(int)
    if d is None:
        ds = sorted(set(all_d))
        if not ds:
            raise InterpError(f"{what}: the sweep table has no dataset size D")
        if not one_dataset_size(ds):
            raise InterpError(f"{what}: the table has {len(ds)} dataset sizes (D = {', '.join(map(str, ds))}); "
                              f"pass d= one of them (runs within {D_TOL:.0%} of it count as that D)")
        d = int(all_d.mode().min())
    sel = _select(table, y, ["k"], what, direction, where={"D": (d, D_TOL)})
    _warn_censored(sel, what, y)
    used = sel.used
    _warn_pooled(used, what, ["lr", "batch_size"])
    fit = _slope_fit(used, "k", y, what, scheme, n_boot, ci, numpy_generator(seed, "bootstrap"), fixed={"D": float(d)})
    per_k = _per_value(sel.points, "k", y)
    means = per_k["mean"].dropna()
    return FixedDResult(
        d=int(d), y=y, fit=fit, per_k=per_k, ratio_max_min=float(means.max() / means.min()), n_used=len(used),
        n_censored=len(sel.censored_runs), n_excluded=sel.n_excluded, n_undefined=sel.n_undefined,
        points=sel.points, censored_runs=sel.censored_runs,
    )


# ---------------------------------------------------------------------------- 3. gradient noise
@dataclass
class NoiseResult:
    """tau against learning rate (at one batch size) and against batch size (at one lr)."""

    y: str
    lr: SlopeFit | None           # log tau vs log lr at fixed batch size
    batch: SlopeFit | None        # log tau vs log batch at fixed lr
    examples: SlopeFit | None     # log (tau * batch) vs log batch: examples seen
    ratio: dict | None            # lr_lo, lr_hi, lr_ratio, tau_lo, tau_hi, tau_ratio, exponent
    per_lr: pd.DataFrame
    per_batch: pd.DataFrame
    censored: pd.DataFrame        # run, lr, batch_size, steps_run: tau > steps_run (never snapped)
    n_used: int
    n_censored: int
    n_excluded: int
    n_undefined: int
    points: pd.DataFrame

    @property
    def paper(self) -> dict | None:
        return dict(k=PAPER_LR_K, measure=PAPER_LR_MEASURE, tau=dict(PAPER_LR_TAU), never_lr=PAPER_LR_NEVER,
                    never_steps=PAPER_LR_NEVER_STEPS, lr_ratio=PAPER_LR_RATIO[0], tau_ratio=PAPER_LR_RATIO[1])

    def to_dict(self) -> dict:
        return _jsonable(dict(
            fit="noise", y=self.y, lr=self.lr.to_dict() if self.lr else None,
            batch=self.batch.to_dict() if self.batch else None,
            examples=self.examples.to_dict() if self.examples else None, ratio=self.ratio,
            per_lr=self.per_lr.to_dict(orient="records"), per_batch=self.per_batch.to_dict(orient="records"),
            censored=self.censored.to_dict(orient="records"), n_used=self.n_used, n_censored=self.n_censored,
            n_excluded=self.n_excluded, n_undefined=self.n_undefined, paper=self.paper,
            points=_points_records(self.points, ["lr", "batch_size", self.y]),
        ))

    def summary(self) -> str:
        parts = []
        if self.lr:
            parts.append(f"{self.y} vs lr: slope {self.lr.slope:+.3g} {_ci_str(self.lr.ci)} ({self.lr.sign}) "
                         f"at batch {self.lr.fixed['batch_size']:g}")
        if self.batch:
            parts.append(f"vs batch: slope {self.batch.slope:+.3g} {_ci_str(self.batch.ci)} ({self.batch.sign}) "
                         f"at lr {self.batch.fixed['lr']:g}")
        if self.examples:
            parts.append(f"examples seen vs batch: slope {self.examples.slope:+.3g} {_ci_str(self.examples.ci)}")
        if self.ratio:
            parts.append(f"{self.ratio['lr_ratio']:.3g}x lr gives {self.ratio['tau_ratio']:.3g}x {self.y} "
                         f"(paper: {PAPER_LR_RATIO[0]:g}x gives {PAPER_LR_RATIO[1]:g}x)")
        line = "; ".join(parts) + f"; {self.n_used} runs used, {self.n_censored} censored"
        if len(self.censored):
            by = self.censored.groupby(["lr", "batch_size"])["steps_run"].min()
            line += " (" + ", ".join(f"lr {lr:g} batch {bs:g}: {self.y} > {int(s)}" for (lr, bs), s in by.items()) + ")"
        if self.n_excluded:
            line += f", {self.n_excluded} not done"
        return line

    def figure(self, **kwargs):
        from interp.plots.sweep import tau_vs_noise

        return tau_vs_noise(self, **kwargs)


def _best_fixed(points: pd.DataFrame, fixed: str, varied: str) -> float | None:
    """The value of `fixed` at which `varied` takes the most distinct values (ties: most runs, then smallest)."""
    best = None
    for value, part in points.groupby(fixed, sort=True):
        key = (part[varied].nunique(), len(part))
        if part[varied].nunique() >= 2 and (best is None or key > best[0]):
            best = (key, float(value))
    return None if best is None else best[1]


def noise(table: pd.DataFrame, y: str = "tau_half", batch_size: int | float | None = None,
          lr: float | None = None,
          n_boot: int = N_BOOT, ci: float = 0.95, seed: int = 0, scheme: str = "auto",
          direction: str | None = None) -> NoiseResult:
    """Slopes of log tau against log lr (at one batch size) and log batch size (at one lr).

    `batch_size` / `lr` pick the fixed values (default: the one with the most distinct values
    of the other). Runs that never reached the threshold are censored: listed in `.censored`
    (their tau is only known to exceed steps_run) and left out of the slopes with a warning,
    which biases the slopes towards flat when the longest plateaus are the censored ones.
    """
    what = f"{y} against gradient noise"
    _check_level(ci, n_boot)
    sel = _select(table, y, ["lr", "batch_size"], what, direction)
    _warn_censored(sel, what, y)
    pts = sel.points
    used = sel.used
    _warn_pooled(used, what, ["D", "k"])
    rng = numpy_generator(seed, "bootstrap")
    for col, value in (("batch_size", batch_size), ("lr", lr)):
        if value is not None and not np.isclose(pts[col].to_numpy(float), float(value), rtol=1e-9, atol=0).any():
            have = ", ".join(f"{v:g}" for v in sorted(set(pts[col].astype(float))))
            raise InterpError(f"{what}: no runs with {col} = {value:g}; the usable runs have {col} = {have}")
    bs_fixed = batch_size if batch_size is not None else _best_fixed(pts, "batch_size", "lr")
    lr_fixed = lr if lr is not None else _best_fixed(pts, "lr", "batch_size")
    fit_lr = fit_b = fit_ex = None
    ratio = None
    errors = []
    per_lr = per_batch = pd.DataFrame()
    if bs_fixed is not None:
        at = pts[np.isclose(pts["batch_size"].to_numpy(float), bs_fixed)]
        per_lr = _per_value(at, "lr", y)
        try:
            fit_lr = _slope_fit(at[at["used"]], "lr", y, f"{what} (lr axis)", scheme, n_boot, ci, rng,
                                fixed={"batch_size": float(bs_fixed)})
        except InterpError as err:
            errors.append(str(err))
        have = per_lr.dropna(subset=["geo_mean"])
        if len(have) >= 2:
            lo, hi = have.iloc[0], have.iloc[-1]
            ratio = dict(lr_lo=float(lo["lr"]), lr_hi=float(hi["lr"]), lr_ratio=float(hi["lr"] / lo["lr"]),
                         tau_lo=float(lo["geo_mean"]), tau_hi=float(hi["geo_mean"]),
                         tau_ratio=float(hi["geo_mean"] / lo["geo_mean"]),
                         exponent=float(math.log(hi["geo_mean"] / lo["geo_mean"]) / math.log(hi["lr"] / lo["lr"])),
                         batch_size=float(bs_fixed),
                         censored_above=[float(v) for v in per_lr.loc[(per_lr["lr"] > hi["lr"])
                                                                      & (per_lr["n_censored"] > 0), "lr"]])
    if lr_fixed is not None:
        at = pts[np.isclose(pts["lr"].to_numpy(float), lr_fixed, rtol=1e-9, atol=0)]
        per_batch = _per_value(at, "batch_size", y)
        u = at[at["used"]]
        try:
            fit_b = _slope_fit(u, "batch_size", y, f"{what} (batch axis)", scheme, n_boot, ci, rng,
                               fixed={"lr": float(lr_fixed)})
            seen = u[y].to_numpy(float) * u["batch_size"].to_numpy(float)
            fit_ex = _slope_fit(u, "batch_size", "examples_seen", f"{what} (examples seen)", scheme, n_boot, ci,
                                rng, fixed={"lr": float(lr_fixed)}, y_values=seen)
        except InterpError as err:
            errors.append(str(err))
    if fit_lr is None and fit_b is None:
        detail = "; ".join(errors) if errors else "no lr or batch size takes two values at a fixed value of the other"
        raise InterpError(f"{what}: nothing to fit: {detail}")
    cen = pts[pts["role"] == "censored"]
    censored = pd.DataFrame({"run": cen["run"].astype(str).to_numpy(), "lr": cen["lr"].to_numpy(float),
                             "batch_size": cen["batch_size"].to_numpy(float),
                             "steps_run": cen["steps_run"].to_numpy(float) if "steps_run" in cen else np.nan})
    return NoiseResult(
        y=y, lr=fit_lr, batch=fit_b, examples=fit_ex, ratio=ratio, per_lr=per_lr, per_batch=per_batch,
        censored=censored, n_used=len(used), n_censored=len(sel.censored_runs), n_excluded=sel.n_excluded,
        n_undefined=sel.n_undefined, points=pts,
    )


# ---------------------------------------------------------------------------- 4. direction asymmetry
PAIR_KEYS = ("seed", "k", "n_bases", "lr", "batch_size")


def _mean_ci(v: np.ndarray, n_boot: int, level: float, rng: np.random.Generator) -> tuple[float, float, float]:
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


@dataclass
class AsymmetryResult:
    """Steps to a measure in the reverse (a_to_b) and the disambiguation (bz_to_a) direction, per seed."""

    measure: str
    pairs: pd.DataFrame           # per pair: keys, run_bz_to_a, run_a_to_b, steps_bz_to_a, steps_a_to_b, ratio, status
    ratios: list[float]
    mean_ratio: float
    mean_ratio_ci: tuple[float, float]
    geo_mean_ratio: float
    ci: tuple[float, float]       # CI of the geometric mean ratio
    steps: pd.DataFrame           # per direction: geo_mean, lo, hi, n
    n_pairs: int
    n_censored_pairs: int
    n_unpaired: int
    n_excluded: int
    method: str
    lower_bounds: list[float]     # ratio > this for pairs whose a_to_b run was censored

    @property
    def paper(self) -> dict:
        return dict(ratio_range=list(PAPER_ASYMMETRY))

    def to_dict(self) -> dict:
        return _jsonable(dict(
            fit="asymmetry", measure=self.measure, ratios=self.ratios, mean_ratio=self.mean_ratio,
            mean_ratio_ci=list(self.mean_ratio_ci), geo_mean_ratio=self.geo_mean_ratio, ci=list(self.ci),
            n_pairs=self.n_pairs, n_censored_pairs=self.n_censored_pairs, n_unpaired=self.n_unpaired,
            n_excluded=self.n_excluded, lower_bounds=self.lower_bounds, method=self.method,
            steps=self.steps.to_dict(orient="records"), pairs=self.pairs.to_dict(orient="records"),
            paper=self.paper,
        ))

    def summary(self) -> str:
        line = (f"a_to_b / bz_to_a {self.measure}: geometric mean ratio {self.geo_mean_ratio:.3g} {_ci_str(self.ci)}"
                f", mean {self.mean_ratio:.3g} {_ci_str(self.mean_ratio_ci)} ({self.method}), {self.n_pairs} pairs")
        if self.n_censored_pairs:
            line += f", {self.n_censored_pairs} censored"
            if self.lower_bounds:
                line += f" (ratio > {', '.join(f'{b:.3g}' for b in self.lower_bounds)})"
        if self.n_unpaired:
            line += f", {self.n_unpaired} unpaired"
        return line + f"; paper: {PAPER_ASYMMETRY[0]}-{PAPER_ASYMMETRY[1]}x"

    def figure(self, **kwargs):
        from interp.plots.sweep import asymmetry_bars

        return asymmetry_bars(self, **kwargs)


def asymmetry(table: pd.DataFrame, measure: str = "steps_to_exact_99", n_boot: int = N_BOOT, ci: float = 0.95,
              seed: int = 0) -> AsymmetryResult:
    """Per seed, a_to_b steps over bz_to_a steps on the same mapping; mean, geometric mean, CIs over seeds.

    Runs are paired on seed and every other spec column present (k, n_bases, lr, batch_size).
    A censored a_to_b run gives only a lower bound on its ratio (a censored bz_to_a an upper
    one): such pairs are counted and reported, and left out of the means with a warning.
    """
    what = f"asymmetry of {measure}"
    _check_level(ci, n_boot)
    for col in ("direction", "seed"):
        if col not in table.columns:
            raise InterpError(f"{what}: the sweep table lacks the column {col!r}")
    sides = {}
    n_excluded = 0
    for d in ("bz_to_a", "a_to_b"):
        if not (table["direction"] == d).any():
            have = sorted(set(table["direction"].astype(str)))
            raise InterpError(f"{what}: the table has no {d} runs (directions: {', '.join(have)}); "
                              f"the ratio needs both bz_to_a and a_to_b")
        sel = _select(table, measure, [], what, d)
        n_excluded += sel.n_excluded
        sides[d] = sel.rows
    keys = [k for k in PAIR_KEYS if k in table.columns]
    cols = keys + ["run", measure, "role"] + (["steps_run"] if "steps_run" in table.columns else [])
    a = sides["bz_to_a"][cols].rename(columns={"run": "run_bz_to_a", measure: "steps_bz_to_a", "role": "role_bz_to_a",
                                               "steps_run": "steps_run_bz_to_a"})
    b = sides["a_to_b"][cols].rename(columns={"run": "run_a_to_b", measure: "steps_a_to_b", "role": "role_a_to_b",
                                              "steps_run": "steps_run_a_to_b"})
    for side, name in ((a, "bz_to_a"), (b, "a_to_b")):
        dup = side.duplicated(keys, keep=False)
        if dup.any():
            raise InterpError(f"{what}: several {name} runs share {', '.join(keys)} "
                              f"({_names(list(side.loc[dup, 'run_' + name].astype(str)))}); pairing needs one per seed")
    pairs = a.merge(b, on=keys, how="outer", sort=True)
    unpaired = pairs["run_bz_to_a"].isna() | pairs["run_a_to_b"].isna()
    pairs = pairs[~unpaired].reset_index(drop=True)
    ra, rb = pairs["role_bz_to_a"], pairs["role_a_to_b"]
    status = np.select([(ra == "used") & (rb == "used"), (ra == "used") & (rb == "censored"),
                        (ra == "censored") & (rb == "used"), (ra == "censored") & (rb == "censored"),
                        (ra == "not done") | (rb == "not done")],
                       ["used", "a_to_b censored (lower bound)", "bz_to_a censored (upper bound)", "both censored",
                        "not done"], "undefined")
    pairs["status"] = status
    with np.errstate(invalid="ignore", divide="ignore"):
        pairs["ratio"] = pairs["steps_a_to_b"].astype(float) / pairs["steps_bz_to_a"].astype(float)
    bound = np.full(len(pairs), np.nan)
    if "steps_run_a_to_b" in pairs:
        lower = status == "a_to_b censored (lower bound)"
        bound[lower] = (pairs.loc[lower, "steps_run_a_to_b"].astype(float)
                        / pairs.loc[lower, "steps_bz_to_a"].astype(float))
        upper = status == "bz_to_a censored (upper bound)"
        bound[upper] = (pairs.loc[upper, "steps_a_to_b"].astype(float)
                        / pairs.loc[upper, "steps_run_bz_to_a"].astype(float))
    pairs["ratio_bound"] = bound
    pairs.loc[status != "used", "ratio"] = np.nan
    good = pairs[pairs["status"] == "used"]
    censored = pairs[pairs["status"].str.contains("censored")]
    if len(censored):
        warnings.warn(f"{what}: {len(censored)} censored pair(s) left out of the mean ratio (only a bound is known): "
                      f"{_names(list(censored['run_a_to_b'].astype(str)))}", CensoredRunsWarning, stacklevel=2)
    if len(good) < 2:
        raise InterpError(f"{what}: too few complete pairs: {len(good)} (a mean ratio with a CI needs at least 2 seeds "
                          f"with both a bz_to_a and an a_to_b run that reached {measure}); "
                          f"{len(censored)} censored, {int(unpaired.sum())} unpaired")
    rng = numpy_generator(seed, "bootstrap")
    ratios = good["ratio"].to_numpy(float)
    lm, llo, lhi = _mean_ci(np.log(ratios), n_boot, ci, rng)
    m, mlo, mhi = _mean_ci(ratios, n_boot, ci, rng)
    steps = []
    for d, col in (("bz_to_a", "steps_bz_to_a"), ("a_to_b", "steps_a_to_b")):
        sm, slo, shi = _mean_ci(np.log(good[col].to_numpy(float)), n_boot, ci, rng)
        steps.append(dict(direction=d, geo_mean=math.exp(sm), lo=math.exp(slo), hi=math.exp(shi), n=len(good)))
    keep = keys + ["run_bz_to_a", "run_a_to_b", "steps_bz_to_a", "steps_a_to_b", "ratio", "ratio_bound", "status"]
    return AsymmetryResult(
        measure=measure, pairs=pairs[keep], ratios=[float(r) for r in ratios], mean_ratio=m, mean_ratio_ci=(mlo, mhi),
        geo_mean_ratio=math.exp(lm), ci=(math.exp(llo), math.exp(lhi)), steps=pd.DataFrame(steps),
        n_pairs=len(good), n_censored_pairs=len(censored), n_unpaired=int(unpaired.sum()), n_excluded=n_excluded,
        method="seeds resampled (bootstrap SE x Student t, n-1 df)",
        lower_bounds=[float(v) for v in pairs.loc[pairs["status"] == "a_to_b censored (lower bound)", "ratio_bound"]],
    )


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
    _check_level(ci, n_boot)
    gen = np.random.default_rng([int(seed), 1])
    lx = np.log(np.repeat(np.asarray(sorted(d_values), float), seeds))
    u = (lx - lx.min()) / (lx.max() - lx.min())
    sch = _resolve_scheme(scheme, lx)
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
        boot = _bootstrap(lx, math.log(c) + delta * lx + eps, sch, n_boot, ci, numpy_generator(seed * 100_003 + i, "bootstrap"))
        hits += boot.lo <= delta <= boot.hi
        widths.append(boot.hi - boot.lo)
    return dict(scheme=sch, method=_method(sch, "D"), noise=noise, sigma=sigma, seeds=seeds, n_d=len(d_values),
                n_sweeps=n_sweeps, coverage=hits / n_sweeps, median_width=float(np.nanmedian(widths)))
