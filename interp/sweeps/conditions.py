"""Fits of the paper's claims about training conditions on a sweep table (`Sweep.table()`).

    noise       tau against lr and batch size (claim 3: more gradient noise, longer plateau)
    asymmetry   steps to exact match, a_to_b over bz_to_a, paired by seed (claim 4)

Runs are selected, censored runs reported and slopes fitted as in `interp.sweeps.fits`; the
intervals are `interp.sweeps.bootstrap`'s. Results draw nothing: the figures of
`interp.plots.sweep` take them. numpy, pandas and scipy only.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from interp.errors import InterpError
from interp.presentable import Presentable
from interp.seeding import numpy_generator
from interp.sweeps.bootstrap import N_BOOT, check_level, mean_ci
from interp.sweeps.fits import (
    CensoredRunsWarning,
    SlopeFit,
    ci_str,
    jsonable,
    per_value,
    points_records,
    run_names,
    select,
    slope_fit,
    warn_censored,
    warn_pooled,
)
from interp.sweeps.paper import (
    PAPER_ASYMMETRY,
    PAPER_LR_K,
    PAPER_LR_MEASURE,
    PAPER_LR_NEVER,
    PAPER_LR_NEVER_STEPS,
    PAPER_LR_RATIO,
    PAPER_LR_TAU,
)


# ---------------------------------------------------------------------------- 3. gradient noise
@dataclass(repr=False)
class NoiseResult(Presentable):
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
        return jsonable(dict(
            fit="noise", y=self.y, lr=self.lr.to_dict() if self.lr else None,
            batch=self.batch.to_dict() if self.batch else None,
            examples=self.examples.to_dict() if self.examples else None, ratio=self.ratio,
            per_lr=self.per_lr.to_dict(orient="records"), per_batch=self.per_batch.to_dict(orient="records"),
            censored=self.censored.to_dict(orient="records"), n_used=self.n_used, n_censored=self.n_censored,
            n_excluded=self.n_excluded, n_undefined=self.n_undefined, paper=self.paper,
            points=points_records(self.points, ["lr", "batch_size", self.y]),
        ))

    def summary(self) -> str:
        parts = []
        if self.lr:
            parts.append(f"{self.y} vs lr: slope {self.lr.slope:+.3g} {ci_str(self.lr.ci)} ({self.lr.sign}) "
                         f"at batch {self.lr.fixed['batch_size']:g}")
        if self.batch:
            parts.append(f"vs batch: slope {self.batch.slope:+.3g} {ci_str(self.batch.ci)} ({self.batch.sign}) "
                         f"at lr {self.batch.fixed['lr']:g}")
        if self.examples:
            parts.append(f"examples seen vs batch: slope {self.examples.slope:+.3g} {ci_str(self.examples.ci)}")
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
    check_level(ci, n_boot)
    sel = select(table, y, ["lr", "batch_size"], what, direction)
    warn_censored(sel, what, y)
    pts = sel.points
    used = sel.used
    warn_pooled(used, what, ["D", "k"])
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
        per_lr = per_value(at, "lr", y)
        try:
            fit_lr = slope_fit(at[at["used"]], "lr", y, f"{what} (lr axis)", scheme, n_boot, ci, rng,
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
        per_batch = per_value(at, "batch_size", y)
        u = at[at["used"]]
        try:
            fit_b = slope_fit(u, "batch_size", y, f"{what} (batch axis)", scheme, n_boot, ci, rng,
                               fixed={"lr": float(lr_fixed)})
            seen = u[y].to_numpy(float) * u["batch_size"].to_numpy(float)
            fit_ex = slope_fit(u, "batch_size", "examples_seen", f"{what} (examples seen)", scheme, n_boot, ci,
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


@dataclass(repr=False)
class AsymmetryResult(Presentable):
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
        return jsonable(dict(
            fit="asymmetry", measure=self.measure, ratios=self.ratios, mean_ratio=self.mean_ratio,
            mean_ratio_ci=list(self.mean_ratio_ci), geo_mean_ratio=self.geo_mean_ratio, ci=list(self.ci),
            n_pairs=self.n_pairs, n_censored_pairs=self.n_censored_pairs, n_unpaired=self.n_unpaired,
            n_excluded=self.n_excluded, lower_bounds=self.lower_bounds, method=self.method,
            steps=self.steps.to_dict(orient="records"), pairs=self.pairs.to_dict(orient="records"),
            paper=self.paper,
        ))

    def summary(self) -> str:
        line = (f"a_to_b / bz_to_a {self.measure}: geometric mean ratio {self.geo_mean_ratio:.3g} {ci_str(self.ci)}"
                f", mean {self.mean_ratio:.3g} {ci_str(self.mean_ratio_ci)} ({self.method}), {self.n_pairs} pairs")
        if self.n_censored_pairs:
            line += f", {self.n_censored_pairs} censored"
            if self.lower_bounds:
                line += f" (ratio > {', '.join(f'{b:.3g}' for b in self.lower_bounds)})"
        if self.n_unpaired:
            line += f", {self.n_unpaired} unpaired"
        return line + f"; paper: {PAPER_ASYMMETRY[0]}-{PAPER_ASYMMETRY[1]}x"



def asymmetry(table: pd.DataFrame, measure: str = "steps_to_exact_99", n_boot: int = N_BOOT, ci: float = 0.95,
              seed: int = 0) -> AsymmetryResult:
    """Per seed, a_to_b steps over bz_to_a steps on the same mapping; mean, geometric mean, CIs over seeds.

    Runs are paired on seed and every other spec column present (k, n_bases, lr, batch_size).
    A censored a_to_b run gives only a lower bound on its ratio (a censored bz_to_a an upper
    one): such pairs are counted and reported, and left out of the means with a warning.
    """
    what = f"asymmetry of {measure}"
    check_level(ci, n_boot)
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
        sel = select(table, measure, [], what, d)
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
                              f"({run_names(list(side.loc[dup, 'run_' + name].astype(str)))}); pairing needs one per seed")
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
                      f"{run_names(list(censored['run_a_to_b'].astype(str)))}", CensoredRunsWarning, stacklevel=2)
    if len(good) < 2:
        raise InterpError(f"{what}: too few complete pairs: {len(good)} (a mean ratio with a CI needs at least 2 seeds "
                          f"with both a bz_to_a and an a_to_b run that reached {measure}); "
                          f"{len(censored)} censored, {int(unpaired.sum())} unpaired")
    rng = numpy_generator(seed, "bootstrap")
    ratios = good["ratio"].to_numpy(float)
    lm, llo, lhi = mean_ci(np.log(ratios), n_boot, ci, rng)
    m, mlo, mhi = mean_ci(ratios, n_boot, ci, rng)
    steps = []
    for d, col in (("bz_to_a", "steps_bz_to_a"), ("a_to_b", "steps_a_to_b")):
        sm, slo, shi = mean_ci(np.log(good[col].to_numpy(float)), n_boot, ci, rng)
        steps.append(dict(direction=d, geo_mean=math.exp(sm), lo=math.exp(slo), hi=math.exp(shi), n=len(good)))
    keep = keys + ["run_bz_to_a", "run_a_to_b", "steps_bz_to_a", "steps_a_to_b", "ratio", "ratio_bound", "status"]
    return AsymmetryResult(
        measure=measure, pairs=pairs[keep], ratios=[float(r) for r in ratios], mean_ratio=m, mean_ratio_ci=(mlo, mhi),
        geo_mean_ratio=math.exp(lm), ci=(math.exp(llo), math.exp(lhi)), steps=pd.DataFrame(steps),
        n_pairs=len(good), n_censored_pairs=len(censored), n_unpaired=int(unpaired.sum()), n_excluded=n_excluded,
        method="seeds resampled (bootstrap SE x Student t, n-1 df)",
        lower_bounds=[float(v) for v in pairs.loc[pairs["status"] == "a_to_b censored (lower bound)", "ratio_bound"]],
    )
