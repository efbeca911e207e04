"""The numbers behind each row of the mechanism table, from a run, a sweep or a fork family.

A run gives the rows that one trajectory can answer, from its analyses (docs/mechanisms.md):
the share of groups at tau/2 (`groups`), direction consistency on the plateau and through the
transition (`trajectory`), the selector SNR and the noise along curvature (`gradients`) and the
plateau's lambda_min (`hessian`). With `compute=True` the cheap ones (groups, trajectory, and
gradients at up to 5 of the plateau's checkpoints) are computed and cached; the Hessian and the curvature
noise (minutes) are only read from the cache. Within one run a value is the median over the plateau's
checkpoints; its percentile bootstrap over those (correlated) checkpoints is a spread, not a confidence
interval, and one run decides no row (`interp.mechanisms.rules`: each row names the runs it needs). A share
of groups gets the exact binomial interval over its groups.

A sweep adds the rows that need several runs (the selector-sharing fit, the lr / batch fit, anisotropy
against K: OLS t intervals of the slopes) and gives the per-run rows as the mean over runs with a Student t
interval (on the log scale for ratios), the share of groups pooled over the runs' groups
(`interp.mechanisms.intervals`, calibrated in `interp.mechanisms.coverage`). A fork family adds the forks'
row (`interp.mechanisms.fork_measures`) and takes the other rows from its parent run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from interp.analysis import registry
from interp.errors import InterpError
from interp.mechanisms.intervals import bound_prefix
from interp.mechanisms.rules import Measure
from interp.seeding import numpy_generator

PLATEAU = (0.25, 0.9)  # the plateau's checkpoints: tau/4 .. 0.9 tau
N_BOOT = 2000
LEVEL = 0.95
HALF_TAU_SLACK = 0.15  # the checkpoint read as tau/2 must lie within this many tau of it
GRADIENT_STEPS = 5  # plateau checkpoints the gradients analysis is computed at, when it is not cached
PER_RUN = ("cancellation_snr", "coverage", "spinodal", "random_walk", "entropic_curvature")
# measures read beside the rows for the reconciliation table (interp.mechanisms.reconcile): key, gradients column
RECONCILED = (("noise_signal", "noise_to_signal"), ("coherence", "n_coherence"))


@dataclass
class RunEvidence:
    """One run's measures (with within-run intervals) and its point values (for pooling over runs)."""

    run: str
    tau: int | None
    measures: dict[str, Measure] = field(default_factory=dict)
    values: dict[str, float] = field(default_factory=dict)  # also "random_walk_transition"
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # for stderr: damaged cache entries that were recomputed
    missing: dict[str, str] = field(default_factory=dict)  # key -> why a cached analysis gave no value (its command
    # has run: running it again cannot change it)


# ---------------------------------------------------------------------------- intervals
def median_interval(values, seed: int = 0) -> tuple[float, float, float]:
    """Median and a percentile-bootstrap interval of the median (NaN interval for < 2 values)."""
    v = np.asarray([x for x in values if np.isfinite(x)], dtype=float)
    if len(v) == 0:
        return math.nan, math.nan, math.nan
    med = float(np.median(v))
    if len(v) < 2:
        return med, math.nan, math.nan
    rng = numpy_generator(seed, "bootstrap")
    boots = np.median(v[rng.integers(0, len(v), (N_BOOT, len(v)))], axis=1)
    return med, float(np.quantile(boots, (1 - LEVEL) / 2)), float(np.quantile(boots, (1 + LEVEL) / 2))


def _median_measure(values, what: str, seed: int) -> Measure | None:
    med, lo, hi = median_interval(values, seed)
    if not math.isfinite(med):
        return None
    n = int(np.isfinite(np.asarray(values, dtype=float)).sum())
    return Measure(med, lo, hi, 1, f"median over {n} plateau checkpoint{'s' if n != 1 else ''} ({what}); "
                                  f"interval: bootstrap over checkpoints (a spread within one run, not a CI)")


# ---------------------------------------------------------------------------- one run
def plateau_steps(steps, t: int | None) -> list[int]:
    if not t:
        return []
    lo, hi = PLATEAU[0] * t, PLATEAU[1] * t
    return [int(s) for s in steps if lo <= s <= hi]


def spread(steps: list[int], at_most: int) -> list[int]:
    """At most `at_most` of `steps`, evenly spread, the first and the last included."""
    if len(steps) <= at_most:
        return list(steps)
    picks = np.unique(np.round(np.linspace(0, len(steps) - 1, at_most)).astype(int))
    return [steps[i] for i in picks]


def transition_window(run) -> tuple[int, int] | None:
    from interp.transition import facts

    return facts(run).window


def _cached(run, analysis: str, accept=None, damaged: dict | None = None) -> dict[str, pd.DataFrame]:
    """The cached tables of `analysis`; its entries that were left out as damaged go into `damaged`
    ((analysis, step) -> the cache's note), for the caller to name."""
    from interp.analysis.cache import ResultCache

    entry = registry.get(analysis)
    store = ResultCache(run)
    try:
        return store.cached_any(entry.cache_key(entry.params()), accept=accept)
    except InterpError:
        return {}
    finally:
        if damaged is not None:
            damaged.update({(name, step): note for name, by_step in store.damaged.items() for step, note in by_step.items()})


def _suite(run, only: list[str], steps, progress: bool, notes: list[str], warnings: list[str]) -> dict[str, pd.DataFrame]:
    from interp.analysis.suite import run_suite

    try:
        result = run_suite(run, only=only, steps=steps, progress=progress)
    except InterpError as exc:
        notes.append(f"{', '.join(only)}: {exc}")
        return {}
    notes.extend(f"{', '.join(only)}: {p}" for p in result.problems)
    warnings.extend(result.cache_notes)  # a damaged entry recomputed, a cache that could not be used
    return result.tables


COMPUTED_HERE = ("groups", "trajectory", "gradients")  # what `run_evidence(compute=True)` computes


def _name_damaged(run, ev: RunEvidence, damaged: dict) -> None:
    """A note for every cache entry left out as damaged, saying what recomputes it."""
    for (name, _), note in sorted(damaged.items()):
        redo = (f"interp mechanisms {run.path} without --cached" if name in COMPUTED_HERE
                else f"interp analyze {run.path} --only {name}")
        ev.notes.append(f"{note} ({redo} recomputes it)")


def run_evidence(run, compute: bool = True, progress: bool = False) -> RunEvidence:
    """The per-run rows of one run (see the module docstring)."""
    from interp.transition import tau_or_none

    from interp.metrics_log import check_complete

    check_complete(run)  # a log that lost its tail: its tau, and every row placed by it, would be wrong
    t = tau_or_none(run)
    ev = RunEvidence(str(run.path), t)
    seed = run.spec.seed
    if t is None:
        ev.notes.append("the candidate loss never falls below 0.5 log K: no plateau to place, no τ/2")
        return ev
    saved = run.steps
    plateau = plateau_steps(saved, t)
    tables: dict[str, pd.DataFrame] = {}
    if compute:
        tables.update(_suite(run, ["groups", "trajectory"], None, progress, ev.notes, ev.warnings))
        if plateau:  # computed (and cached) at a few plateau steps, then read with whatever else is cached
            _suite(run, ["gradients"], spread(plateau, GRADIENT_STEPS), progress, ev.notes, ev.warnings)
    tables.pop("gradients", None)
    damaged: dict[tuple[str, int], str] = {}
    for name in COMPUTED_HERE:
        if name not in tables or tables[name].empty:
            cached = _cached(run, name, damaged=damaged)
            tables.update({k: v for k, v in cached.items() if k not in tables or tables[k].empty})
    curvature = _cached(run, "gradients", accept=lambda p: bool(p.get("curvature")), damaged=damaged).get("gradients")
    hessian = _cached(run, "hessian", damaged=damaged).get("hessian")
    _name_damaged(run, ev, damaged)

    # incremental coverage: share of groups >= 80% at tau/2
    groups = tables.get("groups")
    if groups is not None and not groups.empty:
        from interp.analysis.groups import share_above

        share = share_above(groups, t, fractions=(0.5,))
        picked = abs(int(share["step"].iloc[0]) - t / 2) if not share.empty else math.inf
        nearer = sorted((abs(s - t / 2), s) for name, s in damaged if name == "groups" and abs(s - t / 2) < picked)
        if nearer:  # the checkpoint that would have been read is saved, its cached result is damaged (named above)
            ev.notes.append(f"coverage: the checkpoint nearest τ/2 = {t / 2:.0f} is step {nearer[0][1]}, whose cached "
                            f"groups result is damaged: not measured (interp mechanisms {run.path} recomputes it)")
        elif not share.empty and abs(int(share["step"].iloc[0]) - t / 2) > HALF_TAU_SLACK * t:
            ev.notes.append(f"coverage: the checkpoint nearest τ/2 = {t / 2:.0f} is step {int(share['step'].iloc[0])}, "
                            f"more than {HALF_TAU_SLACK:g} τ away: not measured (save checkpoints more densely)")
        elif not share.empty:
            from interp.mechanisms.intervals import share_exact

            s, n = float(share["share"].iloc[0]), int(share["n_groups"].iloc[0])
            k = round(s * n)
            ev.measures["coverage"] = Measure.of(share_exact(k, n), f"{k} of {n} groups at step "
                                                 f"{int(share['step'].iloc[0])} (τ/2 = {t / 2:.0f})")
            ev.values["coverage"], ev.values["coverage_k"], ev.values["coverage_n"] = s, k, n

    # hidden progress as a random walk: direction consistency of the whole parameter vector
    traj = tables.get("trajectory")
    if traj is not None and not traj.empty and "cosine" in traj:
        whole = traj[traj["component"] == "all"].dropna(subset=["cosine"])
        on = whole[whole["step"].isin(plateau)]["cosine"].to_numpy(float)
        window = transition_window(run)
        across = (whole[(whole["step"] >= window[0]) & (whole["step"] <= window[1])]["cosine"].to_numpy(float)
                  if window else np.array([]))
        m = _median_measure(on, "cosine of consecutive displacements", seed)
        if m is not None:
            tr = float(np.median(across)) if len(across) else math.nan
            ev.measures["random_walk"] = Measure(m.value, m.low, m.high, 1,
                                                 m.detail + f"; transition median over {len(across)} checkpoints",
                                                 extra={"transition": tr})
            ev.values["random_walk"], ev.values["random_walk_transition"] = m.value, tr

    # gradient cancellation, per run: selector SNR x sqrt(n groups) on the plateau
    grads = tables.get("gradients")
    if grads is not None and not grads.empty and "selector_snr_sqrt_n" in grads:
        on = grads[grads["step"].isin(plateau)]["selector_snr_sqrt_n"].to_numpy(float)
        m = _median_measure(on, "selector SNR x sqrt(n groups)", seed)
        if m is not None:
            ev.measures["cancellation_snr"], ev.values["cancellation_snr"] = m, m.value
        for key, column in RECONCILED:  # read here once, for the reconciliation table (no row of this one)
            if column in grads:
                m = _median_measure(grads[grads["step"].isin(plateau)][column].to_numpy(float), column, seed)
                if m is not None:
                    ev.measures[key], ev.values[key] = m, m.value

    # entropic stabilisation: noise variance along v_max over v_min on the plateau
    if curvature is not None and not curvature.empty and {"noise_var_vmax", "noise_var_vmin"} <= set(curvature):
        on = curvature[curvature["step"].isin(plateau)]
        ratio = (on["noise_var_vmax"] / on["noise_var_vmin"]).to_numpy(float)
        m = _median_measure(ratio, "noise variance along v_max / along v_min", seed)
        if m is not None:
            ev.measures["entropic_curvature"], ev.values["entropic_curvature"] = m, m.value

    # spinodal: lambda_min / lambda_max on the plateau, converged bottom eigenpairs only
    if hessian is not None and not hessian.empty:
        rows = hessian[(hessian["which"] == "bottom") & (hessian["rank"] == 0) & hessian["converged"].astype(bool)]
        cached_steps = sorted(set(int(x) for x in hessian["step"]))
        rows = rows[rows["step"].isin(plateau)]
        if rows.empty:
            why = (f"the cached Hessian (steps {', '.join(map(str, cached_steps[:6]))}) has no converged bottom "
                   f"eigenpair on the plateau (steps {', '.join(map(str, plateau[:6]))}...)")
            ev.missing.update(spinodal=why, anisotropy=why)
        ratio = (rows["lambda_min"] / rows["lambda_max"]).to_numpy(float)
        m = _median_measure(ratio, "λ_min / λ_max, converged Lanczos", seed)
        if m is not None:
            ev.measures["spinodal"], ev.values["spinodal"] = m, m.value
        m = _median_measure(rows["anisotropy"].to_numpy(float), "λ_max / |λ_min|, converged Lanczos", seed)
        if m is not None:  # for the reconciliation table
            ev.measures["anisotropy"], ev.values["anisotropy"] = m, m.value
    return ev


# ---------------------------------------------------------------------------- across runs
# per-run values pooled as positive ratios (a geometric mean with its t interval on the log scale)
LOG_POOLED = ("anisotropy", "noise_signal", "coherence", "cancellation_snr", "entropic_curvature")


def pooled(evidence: list[RunEvidence], key: str, seed: int = 0) -> Measure | None:
    """A per-run value pooled over runs (one run: its own measure, which decides nothing alone): the mean with its
    Student t interval, on the log scale for ratios (LOG_POOLED); the share of groups (`coverage`) as one exact
    interval over the groups of every run (`interp.mechanisms.intervals`)."""
    from interp.mechanisms.intervals import mean_t, share_exact

    have = [(e, e.values[key]) for e in evidence if math.isfinite(e.values.get(key, math.nan))]
    if not have:
        return None
    if len(have) == 1:
        return have[0][0].measures.get(key)
    if key == "coverage":
        k = sum(int(e.values.get("coverage_k", 0)) for e, _ in have)
        n = sum(int(e.values.get("coverage_n", 0)) for e, _ in have)
        return Measure.of(share_exact(k, n), f"{k} of {n} groups at τ/2 over {len(have)} runs, pooled")
    e = mean_t([x for _, x in have], log=key in LOG_POOLED)
    if e is None:  # a ratio that is not positive in some run: on its own scale
        e = mean_t([x for _, x in have])
    extra = {}
    if key == "random_walk":
        tr = np.asarray([ev.values.get("random_walk_transition", math.nan) for ev, _ in have], dtype=float)
        extra["transition"] = float(np.nanmean(tr)) if np.isfinite(tr).any() else math.nan
    return Measure.of(e, f"{'geometric ' if e.scale == 'log' else ''}mean over {e.n} runs of each run's value", extra)


def cancellation_measure(table: pd.DataFrame) -> tuple[Measure | None, str]:
    """beta of tau against n_bases / G from a selector-sharing sweep (None and why when it cannot be had)."""
    if "bases_per_selector_set" not in table or table["bases_per_selector_set"].nunique() < 2:
        return None, "the sweep does not vary task.selector_groups"
    from interp.sweeps.cancellation import cancellation

    try:
        fit = cancellation(table)
    except InterpError as exc:
        return None, str(exc)
    return _slope_measure(fit.points, fit.x, fit.y, "beta: log tau on log bases per selector set"), ""


def barrier_measure(table: pd.DataFrame) -> tuple[Measure | None, str]:
    """Slope of log tau against log noise: against log lr at one batch size, else minus that
    against log batch size at one lr (a smaller batch is more noise)."""
    from interp.sweeps.conditions import noise

    if not {"lr", "batch_size"} <= set(table) or (table["lr"].nunique() < 2 and table["batch_size"].nunique() < 2):
        return None, "the sweep varies neither lr nor batch size"
    try:
        res = noise(table)
    except InterpError as exc:
        return None, str(exc)
    if res.lr is not None:
        return _slope_measure(res.points, "lr", res.y, "slope of log τ against log lr", res.lr.fixed), ""
    m = _slope_measure(res.points, "batch_size", res.y, "minus the slope of log τ against log batch size",
                       res.batch.fixed, sign=-1.0)
    return m, ""


def _slope_measure(points, x: str, y: str, detail: str, fixed: dict | None = None, sign: float = 1.0) -> Measure | None:
    """The OLS t slope of log y on log x over the used points (held at `fixed`), times `sign`."""
    from dataclasses import replace

    from interp.mechanisms.intervals import slope_t

    used = points[points["used"].astype(bool)]
    for col, value in (fixed or {}).items():
        used = used[np.isclose(used[col].to_numpy(float), float(value), rtol=1e-9, atol=0)]
    with np.errstate(divide="ignore", invalid="ignore"):
        e = slope_t(np.log(used[x].to_numpy(float)), np.log(used[y].to_numpy(float)))
    if e is None:
        return None
    if sign < 0:
        e = replace(e, value=-e.value, low=-e.high, high=-e.low)
    return Measure.of(e, detail, {"n_x": e.n_x})


def drowning_measure(table: pd.DataFrame, evidence: dict[str, dict], seed: int = 0) -> tuple[Measure | None, str]:
    """Slope of log plateau anisotropy against log K (bootstrap over runs), with tau's slope beside it."""
    from interp.sweeps.bootstrap import ols

    if "k" not in table or table["k"].nunique() < 2:
        return None, "the sweep does not vary K"
    rows = [(float(r.k), evidence[r.run].get("anisotropy", math.nan), float(r.tau_half))
            for r in table.itertuples() if r.run in evidence]
    pts = np.asarray([r for r in rows if all(np.isfinite(r)) and r[1] > 0 and r[2] > 0], dtype=float)
    if len(pts) < 3 or len(np.unique(pts[:, 0])) < 2:
        return None, (f"{len(pts)} runs with a snap and a cached Hessian on the plateau; the fit needs 3 over 2 "
                      f"values of K")
    from interp.mechanisms.intervals import slope_t

    lk, la, lt = np.log(pts[:, 0]), np.log(pts[:, 1]), np.log(pts[:, 2])
    e = slope_t(lk, la)
    tau_slope, _ = ols(lk, lt)
    return Measure.of(e, "log anisotropy (median over the plateau's checkpoints) against log K",
                      {"tau_slope": float(tau_slope), "n_x": e.n_x}), ""


def anisotropy_of(run, t: int | None) -> float:
    """The median plateau anisotropy of a run's cached Hessian (NaN when none)."""
    hessian = _cached(run, "hessian").get("hessian")
    if hessian is None or hessian.empty or not t:
        return math.nan
    rows = hessian[(hessian["which"] == "bottom") & (hessian["rank"] == 0) & hessian["converged"].astype(bool)]
    rows = rows[rows["step"].isin(plateau_steps(sorted(set(hessian["step"])), t))]
    v = rows["anisotropy"].to_numpy(float)
    return float(np.median(v)) if len(v) else math.nan


def forks_measure(table: pd.DataFrame, arm: str = "full_batch", reference: str = "minibatch",
                  deepest: bool = False) -> tuple[Measure | None, str]:
    """The escape ratio, full batch over minibatch, at the earliest fork step that has both (`deepest`: the latest,
    for a family forking one relapse at several depths), under the family's escape criterion
    (`interp.mechanisms.fork_measures.escape_ratio`: Welch's t on the log escapes)."""
    from interp.mechanisms.fork_measures import escape_ratio

    from dataclasses import replace

    from interp.forks.escape import parse_escape
    from interp.sweeps.forks import arm_label

    m, why = escape_ratio(table, arm, reference, deepest=deepest)
    if m is None:
        return None, why
    named = table["escape_criterion"].dropna() if "escape_criterion" in table else pd.Series(dtype=str)
    detail = m.detail + (f"; escape: {parse_escape(str(named.iloc[0])).words}" if len(named) else "")
    v_only = table[table["arm"].astype(str) == "v_only_noise"]
    labels = sorted({arm_label(a, p) for a, p in zip(v_only["arm"], v_only.get("arm_params", [""] * len(v_only)))})
    if labels:  # which noise reached the second moment: the label says xi=measured or xi=isotropic
        ratios = [(label, escape_ratio(table, label, reference, deepest=deepest)[0]) for label in labels]
        detail += "; noise in the second moment only (v_only_noise), ratio to " + reference + ": " + ", ".join(
            f"{label} {bound_prefix(r.as_estimate().bound) if r is not None else ''}"
            f"{r.value:.3g}" if r is not None else f"{label} undefined" for label, r in ratios)
    return replace(m, detail=detail), ""
