"""Fits of the paper's dataset-size claims on a sweep table (one row per run, `Sweep.table()`),
and the machinery every family-level fit shares.

    power_law   tau = C * D^delta (claim 1), bootstrap CI, R^2, sensitivity to the D range
    fixed_d     at one D, the slope of log tau against log K (claim 2: flat)

The other two claims (gradient noise, direction asymmetry) are in `interp.sweeps.conditions`,
the intervals in `interp.sweeps.bootstrap`, the paper's numbers in `interp.sweeps.paper`;
`interp.sweeps.scaling` gathers them all. Only runs with status "done" enter a fit; runs that
ended before reaching the measure's threshold are censored (the true value is above
steps_run): they are counted, reported and kept out of the fit with a warning, never silently
dropped. Results draw nothing: the figures of `interp.plots.sweep` take them.
numpy, pandas and scipy only.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from interp.errors import InterpError
from interp.presentable import Presentable
from interp.seeding import numpy_generator
from interp.sweeps.bootstrap import (
    N_BOOT,
    bootstrap,
    check_level,
    check_points,
    method_label,
    ols,
    resolve_scheme,
)
from interp.sweeps.paper import (
    PAPER_DELTA,
    PAPER_DELTA_CI,
    PAPER_DELTA_RANGE,
    PAPER_FIXED_D,
    PAPER_FIXED_D_TAU,
    PAPER_LEAD_EXPONENT,
)
from interp.sweeps.circuits import CIRCUIT_COLUMNS
from interp.sweeps.sweep import MEASURES

DIRECTIONS = ("bz_to_a", "a_to_b", "az_to_b", "b_to_a")
D_TOL = 0.02    # fixed D: n_bases = round(D / K) makes D differ by up to ~1% between K values
BAND_POINTS = 60


class CensoredRunsWarning(UserWarning):
    """Censored runs were left out of a fit (their true value is only known to exceed steps_run)."""


class NotDoneRunsWarning(UserWarning):
    """Runs that are not done (running, failed, interrupted, not started) were left out of a comparison."""


class DamagedRunsWarning(UserWarning):
    """Damaged runs were left out (their files cannot be trusted); the commands name each on stderr already, so they
    drop this warning rather than say it twice."""


# ---------------------------------------------------------------------------- small helpers
def jsonable(v):
    """Plain Python values for json.dumps: numpy scalars unwrapped, NaN -> None, tuples -> lists."""
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, np.ndarray)):
        return [jsonable(x) for x in v]
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


def fmt(v: float | None, digits: int = 3) -> str:
    return "n/a" if v is None or not math.isfinite(v) else f"{v:.{digits}g}"


def ci_str(ci: tuple[float, float], digits: int = 3) -> str:
    return f"[{fmt(ci[0], digits)}, {fmt(ci[1], digits)}]"


def sign_of(ci: tuple[float, float]) -> str:
    lo, hi = ci
    if math.isfinite(lo) and lo > 0:
        return "+"
    if math.isfinite(hi) and hi < 0:
        return "-"
    return "flat"


def run_names(runs: list[str], at_most: int = 6) -> str:
    shown = ", ".join(runs[:at_most])
    return shown + (f" and {len(runs) - at_most} more" if len(runs) > at_most else "")


# ---------------------------------------------------------------------------- selecting runs
@dataclass
class Selection:
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


def select(table: pd.DataFrame, y: str, xs: list[str], what: str, direction: str | None = None,
            where: dict | None = None, positive: bool = True) -> Selection:
    """Split the runs into used / censored / undefined / not done, refusing what cannot be fitted.
    A value must be finite, and positive unless `positive` is False (a y that is not logged,
    such as a lead share, may be zero or negative)."""
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
        hint = ("; it is a circuit column: Sweep.table(circuits=True), after interp analyze SWEEP"
                if y in CIRCUIT_COLUMNS else "")
        raise InterpError(f"{what}: unknown measure {y!r}; the table has the measures: {', '.join(known) or 'none'}"
                          + hint)
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
    defined = done & ~flag & np.isfinite(value) & ((value > 0) if positive else True)
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
                              f"{run_names([str(r) for r in kept['run'][bad]])} have {x} = {xv[bad].tolist()}")
    kept = kept.sort_values(xs + ["run"], kind="stable").reset_index(drop=True)
    return Selection(
        points=kept, rows=df, n_excluded=int((~done).sum()), n_undefined=int((df["role"] == "undefined").sum()),
        excluded_runs=[str(r) for r in df.loc[~done, "run"]],
        undefined_runs=[str(r) for r in df.loc[df["role"] == "undefined", "run"]],
    )


def warn_censored(sel: Selection, what: str, y: str) -> None:
    names = sel.censored_runs
    if names:
        warnings.warn(f"{what}: {len(names)} censored run(s) left out of the fit ({y} not reached within "
                      f"steps_run, so only a lower bound is known): {run_names(names)}", CensoredRunsWarning,
                      stacklevel=3)


def warn_pooled(used: pd.DataFrame, what: str, columns: list[str]) -> None:
    varied = [c for c in columns if c in used.columns and used[c].nunique(dropna=True) > 1]
    if varied:
        warnings.warn(f"{what}: the runs also differ in {', '.join(varied)}; the fit pools them", UserWarning,
                      stacklevel=3)


# ---------------------------------------------------------------------------- slope fits (shared)
@dataclass(repr=False)
class SlopeFit(Presentable):
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
        return sign_of(self.ci)

    def to_dict(self) -> dict:
        return jsonable(dict(x=self.x, y=self.y, slope=self.slope, ci=list(self.ci), sign=self.sign,
                              intercept=self.intercept, r2=self.r2, n_used=self.n_used, n_x=self.n_x,
                              method=self.method, fixed=self.fixed))

    def summary(self) -> str:
        fixed = ", ".join(f"{k} = {v:g}" for k, v in self.fixed.items())
        return (f"slope of log {self.y} vs log {self.x} = {self.slope:+.3g} {ci_str(self.ci)} ({self.sign})"
                + (f" at {fixed}" if fixed else "") + f", {self.n_used} runs at {self.n_x} {self.x} values")


def slope_fit(used: pd.DataFrame, x: str, y: str, what: str, scheme: str, n_boot: int, ci: float, rng,
               min_distinct: int = 3, fixed: dict | None = None, y_values: np.ndarray | None = None) -> SlopeFit:
    lx = np.log(used[x].to_numpy(float))
    ly = np.log(used[y].to_numpy(float) if y_values is None else y_values)
    check_points(lx, what, x, min_distinct)
    sch = resolve_scheme(scheme, lx)
    boot = bootstrap(lx, ly, sch, n_boot, ci, rng)
    return SlopeFit(x=x, y=y, slope=boot.slope, ci=(boot.lo, boot.hi), intercept=boot.intercept, r2=boot.r2,
                    n_used=len(lx), n_x=len(np.unique(lx)), method=method_label(sch, x), fixed=dict(fixed or {}))


def points_records(points: pd.DataFrame, cols: list[str]) -> list[dict]:
    keep = [c for c in ["run"] + cols + ["seed", "steps_run", "role", "used"] if c in points.columns]
    keep = list(dict.fromkeys(keep))
    return jsonable(points[keep].to_dict(orient="records"))


# ---------------------------------------------------------------------------- 1. power law
@dataclass(repr=False)
class PowerLawFit(Presentable):
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
        if self.x == "k" and self.y in ("gap_lead_steps", "gap_lead_steps_author"):  # the shuffle gap's lead in steps against K
            return dict(delta=PAPER_LEAD_EXPONENT)
        return None

    def predict(self, x) -> np.ndarray:
        return self.c * np.asarray(x, dtype=float) ** self.delta

    def to_dict(self) -> dict:
        return jsonable(dict(
            fit="power_law", x=self.x, y=self.y, delta=self.delta, ci=list(self.ci), ci_level=self.ci_level,
            c=self.c, r2=self.r2, n_used=self.n_used, n_censored=self.n_censored, n_excluded=self.n_excluded,
            n_undefined=self.n_undefined, censored_runs=self.censored_runs, excluded_runs=self.excluded_runs,
            range_sensitivity=self.range_sensitivity, method=self.method, scheme=self.scheme,
            n_boot=self.n_boot, seed=self.seed, paper=self.paper,
            points=points_records(self.points, [self.x, self.y]),
        ))

    def _fit_line(self) -> str:
        """The summary's account of the fit: C, R^2 and the runs used, censored, not done and undefined."""
        line = f"C = {self.c:.3g}, R^2 = {self.r2:.3f}, {self.n_used} runs used, {self.n_censored} censored"
        if self.n_excluded:
            line += f", {self.n_excluded} not done"
        if self.n_undefined:
            line += f", {self.n_undefined} undefined"
        return line

    def summary(self) -> str:
        rs = self.range_sensitivity
        line = f"delta = {self.delta:.3g} {ci_str(self.ci)} ({self.ci_level:.0%} CI, {self.method}), " + self._fit_line()
        sens = [f"{k.replace('_', ' ')} {self.x} ({v['x']:g}): {fmt(v['delta'])}" for k, v in rs.items()]
        if sens:
            line += "; " + "; ".join(sens)
        if self.scheme == "over":
            line += " (this scheme under-covers with few points: ~89% measured at 5-6; scheme='residual' ~95%)"
        if self.paper and "ci" in self.paper:
            line += f"; paper: {PAPER_DELTA} {ci_str(PAPER_DELTA_CI)}"
        elif self.paper:
            line += f"; paper: {self.paper['delta']}"
        return line



def power_law(table: pd.DataFrame, x: str = "D", y: str = "tau_half", n_boot: int = N_BOOT, ci: float = 0.95,
              seed: int = 0, scheme: str = "auto", direction: str | None = None) -> PowerLawFit:
    """tau = C * x^delta by least squares in log-log, with a bootstrap CI on delta.

    The CI resamples seeds within each x value (studentized) when x values have replicate
    seeds, and the x values themselves when there is one seed per x (the paper's scheme);
    `scheme` forces "within", "over" or "residual". Censored runs (`censored_{y}`) are
    counted, flagged in `.points` (role "censored") and left out with a warning.
    """
    what = f"power law of {y} against {x}"
    check_level(ci, n_boot)
    sel = select(table, y, [x], what, direction)
    used = sel.used
    warn_censored(sel, what, y)
    lx = np.log(used[x].to_numpy(float))
    ly = np.log(used[y].to_numpy(float))
    if len(np.unique(lx)) < 3:
        raise InterpError(f"{what}: too few points: {len(np.unique(lx))} distinct {x} value(s) among {len(lx)} "
                          f"usable run(s) ({len(sel.censored_runs)} censored, {sel.n_excluded} not done); "
                          f"a power law needs at least 3")
    warn_pooled(used, what, ["lr", "batch_size"])
    sch = resolve_scheme(scheme, lx)
    grid = np.linspace(lx.min(), lx.max(), BAND_POINTS)
    boot = bootstrap(lx, ly, sch, n_boot, ci, numpy_generator(seed, "bootstrap"), grid)
    sens = {}
    for key, pick in (("without_smallest", lx > lx.min()), ("without_largest", lx < lx.max())):
        xv = used[x].to_numpy(float)
        slope = float(ols(lx[pick], ly[pick])[0]) if len(np.unique(lx[pick])) >= 2 else math.nan
        sens[key] = {"x": float(xv.min() if key == "without_smallest" else xv.max()), "delta": slope}
    band = pd.DataFrame({x: np.exp(grid), "fit": np.exp(boot.band[0]), "lo": np.exp(boot.band[1]),
                         "hi": np.exp(boot.band[2])})
    return PowerLawFit(
        x=x, y=y, delta=boot.slope, ci=(boot.lo, boot.hi), c=float(np.exp(boot.intercept)), r2=boot.r2,
        n_used=len(used), n_censored=len(sel.censored_runs), n_excluded=sel.n_excluded, n_undefined=sel.n_undefined,
        range_sensitivity=sens, points=sel.points, band=band, method=method_label(sch, x), scheme=sch, ci_level=ci,
        n_boot=n_boot, seed=int(seed), censored_runs=sel.censored_runs, excluded_runs=sel.excluded_runs,
    )


# ---------------------------------------------------------------------------- 2. fixed D
@dataclass(repr=False)
class FixedDResult(Presentable):
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
        return jsonable(dict(
            fit="fixed_d", d=self.d, y=self.y, slope=self.slope, ci=list(self.ci), flat=self.flat,
            ratio_max_min=self.ratio_max_min, method=self.method, r2=self.fit.r2, n_used=self.n_used,
            n_censored=self.n_censored, n_excluded=self.n_excluded, n_undefined=self.n_undefined,
            censored_runs=self.censored_runs, per_k=self.per_k.to_dict(orient="records"), paper=self.paper,
            points=points_records(self.points, ["k", self.y]),
        ))

    def summary(self) -> str:
        line = (f"at D = {self.d}: slope of log {self.y} vs log K = {self.slope:+.3g} {ci_str(self.ci)} "
                f"({self.method}), {'flat' if self.flat else 'not flat'}; max/min of per-K mean = "
                f"{self.ratio_max_min:.3g}, {self.n_used} runs used, {self.n_censored} censored")
        if self.paper:
            line += f"; paper at D = {PAPER_FIXED_D}: max/min = {self.paper['ratio_max_min']:.3g} (flat)"
        return line



def per_value(points: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
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
    check_level(ci, n_boot)
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
    sel = select(table, y, ["k"], what, direction, where={"D": (d, D_TOL)})
    warn_censored(sel, what, y)
    used = sel.used
    warn_pooled(used, what, ["lr", "batch_size"])
    fit = slope_fit(used, "k", y, what, scheme, n_boot, ci, numpy_generator(seed, "bootstrap"), fixed={"D": float(d)})
    per_k = per_value(sel.points, "k", y)
    means = per_k["mean"].dropna()
    return FixedDResult(
        d=int(d), y=y, fit=fit, per_k=per_k, ratio_max_min=float(means.max() / means.min()), n_used=len(used),
        n_censored=len(sel.censored_runs), n_excluded=sel.n_excluded, n_undefined=sel.n_undefined,
        points=sel.points, censored_runs=sel.censored_runs,
    )


