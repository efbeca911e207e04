"""Family-level fits of the circuit claims, on a sweep table with its circuit columns
(`Sweep.table(circuits=True)`, one row per run), in the form of the scaling fits.

    lead_share      the shuffle gap's lead as a share of tau_half: its mean over the runs and
                    its trend against log K, each with a bootstrap interval (the author: 0.52 +-
                    0.14 over K = 3..36, rising from 0.20 at K = 3 to 0.68 at K = 36)
    lead_exponent   the lead in steps (tau_half - t(dz > 0.1)) against K as a power law (K^2.13)
                    (both take `definition`: "ours", tau_half and the unbiased dz, or "author", SPEC 9.1:
                    t_loss l1_0.9 and the in-batch dz, the table's `*_author` columns; the share also
                    carries the author's statistic, `author_statistic`)
    author_statistic the author's numbers from one definition's leads: positive leads only, mean +-
                    np.std (ddof 0), and ordinary least squares of log(lead in steps) on log K
    lead_definitions the share and the exponent under both definitions on the same runs, each with our
                    interval and the author's statistic (`lead_line`: as text; the sweep report, `interp
                    analyze SWEEP`); a family whose runs lack the logged columns says so in one line
    routing_heads   which head routes: counts per head and per K, the share in layer 0
    ablation_trend  the routing head's ablation effect at tau against log K (the paper: +1.41
                    nats for zero-ablating L0H3 at K = 10)
    circuit_fits    every one of them the table allows, with why the others do not apply

The shuffle-gap columns come from the metrics log (the plain table has them); the routing head
and the ablation effect need each run analysed first (`interp analyze SWEEP`). Only finished
runs enter; runs that never reached tau_half are censored and counted, never fitted. A lead
share may be zero or negative (the gap opening after tau_half), so it is fitted on its own
scale; the lead in steps must be positive for its log axis, and runs where it is not are
counted as undefined. numpy, pandas and scipy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from interp.errors import InterpError
from interp.presentable import Presentable
from interp.seeding import numpy_generator
from interp.sweeps.bootstrap import N_BOOT, bootstrap, check_level, check_points, mean_ci, method_label, resolve_scheme
from interp.sweeps.family import Fits, attempt
from interp.sweeps.fits import ci_str, fmt, jsonable, points_records, power_law, select, sign_of, warn_censored
from interp.sweeps.paper import (
    PAPER_ABLATION_AT_TAU,
    PAPER_ABLATION_K,
    PAPER_LEAD_EXPONENT,
    PAPER_LEAD_SHARE,
    PAPER_LEAD_SHARE_K,
    PAPER_LEAD_SHARE_SD,
    PAPER_ROUTING,
)

LOGGED = ("whose metrics logs have the author's columns (train_loss_first, batch_shuffled_loss_first; runs "
          "trained before they were logged cannot give the author's in-batch dz or running-mean t_loss)")
# the one line a family gives when none of its runs logged the author's columns (no guess is made)
AUTHOR_NOT_LOGGED = ("none of these runs' metrics logs has the train_loss_first / batch_shuffled_loss_first columns "
                     "that the author's definition (t_loss l1_0.9, in-batch dz) needs (runs trained before they were "
                     "logged)")
NEEDS_ANALYSIS = "the circuit columns: run interp analyze SWEEP, then Sweep.table(circuits=True)"


def _require(table: pd.DataFrame, column: str, what: str) -> None:
    if not isinstance(table, pd.DataFrame):
        raise InterpError(f"{what}: expected a sweep table (a pandas DataFrame), got {type(table).__name__}")
    if column not in table.columns:
        raise InterpError(f"{what}: the table has no {column!r} column; it needs {NEEDS_ANALYSIS}")


# ---------------------------------------------------------------------------- a value against log K
@dataclass(repr=False)
class KTrend(Presentable):
    """A per-run value on its own scale: its mean over the runs with a CI, its mean per K, and
    its least-squares slope against log K with a bootstrap CI."""

    y: str
    label: str
    mean: float
    mean_ci: tuple[float, float]
    sd: float
    slope: float               # change of y per unit of log K
    ci: tuple[float, float]     # of the slope
    intercept: float
    per_k: pd.DataFrame        # k, n, mean, sd, min, max
    n_used: int
    n_censored: int
    n_excluded: int
    n_undefined: int
    method: str
    ci_level: float
    points: pd.DataFrame
    censored_runs: list[str]
    paper_values: dict | None = None
    author_values: dict | None = None  # `author_statistic` of the same runs

    @property
    def sign(self) -> str:
        """"+" or "-" when the slope's CI excludes 0, else "flat"."""
        return sign_of(self.ci)

    @property
    def paper(self) -> dict | None:
        return self.paper_values

    def at(self, k: float) -> float:
        """The fitted value at K = k."""
        return float(self.intercept + self.slope * math.log(k))

    def to_dict(self) -> dict:
        return jsonable(dict(
            fit="k_trend", y=self.y, label=self.label, mean=self.mean, mean_ci=list(self.mean_ci), sd=self.sd,
            slope=self.slope, ci=list(self.ci), sign=self.sign, intercept=self.intercept, ci_level=self.ci_level,
            method=self.method, n_used=self.n_used, n_censored=self.n_censored, n_excluded=self.n_excluded,
            n_undefined=self.n_undefined, censored_runs=self.censored_runs,
            per_k=self.per_k.to_dict(orient="records"), paper=self.paper, points=points_records(self.points, ["k", self.y]),
            author_statistic=self.author_values,
        ))

    def summary(self) -> str:
        per_k = ", ".join(f"{int(r.k)}: {fmt(r.mean)}" for r in self.per_k.itertuples())
        line = (f"{self.label}: mean {self.mean:.3g} {ci_str(self.mean_ci)} (sd {fmt(self.sd)}) over {self.n_used} "
                f"runs; per K {per_k}; "
                + (f"slope against log K {self.slope:+.3g} {ci_str(self.ci)} ({self.sign}; {self.method})"
                   if math.isfinite(self.slope) else self.method))
        if self.n_censored:
            line += f", {self.n_censored} censored"
        if self.n_undefined:
            line += f", {self.n_undefined} undefined"
        a = self.author_values
        if a:
            line += (f"; the author's statistic on the same runs: {fmt(a['mean'])} +- {fmt(a['sd'])} over {a['n_positive']} "
                     f"positive leads of {a['n']}, lead in steps ~ K^{fmt(a['exponent'])}")
        paper = self.paper or {}
        if "mean" in paper:
            line += (f"; paper: {paper['mean']} +- {paper['sd']} over K, "
                     + ", ".join(f"{k}: {v}" for k, v in paper["per_k"].items()))
        elif "value" in paper:
            line += f"; paper: {paper['value']:+} nats at K = {paper['k']} ({paper['head']})"
        return line


def k_trend(table: pd.DataFrame, y: str, label: str, n_boot: int = N_BOOT, ci: float = 0.95, seed: int = 0,
            scheme: str = "auto", paper: dict | None = None) -> KTrend:
    """`y`'s mean over the finished runs and its slope against log K, each with a bootstrap CI
    (the slope: seeds resampled within K when K values have replicates, `interp.sweeps.bootstrap`)."""
    what = f"{label} against K"
    check_level(ci, n_boot)
    sel = select(table, y, ["k"], what, positive=False)
    warn_censored(sel, what, y)
    used = sel.used
    if used.empty:
        raise InterpError(f"{what}: no finished run has a value of {y} ({sel.n_undefined} undefined, "
                          f"{len(sel.censored_runs)} censored, {sel.n_excluded} not done)")
    lx = np.log(used["k"].to_numpy(float))
    v = used[y].to_numpy(float)
    try:  # the trend needs 3 values of K (2 with replicate seeds); the mean does not
        check_points(lx, what, "k", 3)
    except InterpError as exc:
        slope = (math.nan, (math.nan, math.nan), math.nan, f"no trend: {exc}")
    else:
        sch = resolve_scheme(scheme, lx)
        boot = bootstrap(lx, v, sch, n_boot, ci, numpy_generator(seed, "bootstrap"))
        slope = (boot.slope, (boot.lo, boot.hi), boot.intercept, method_label(sch, "k"))
    mean, lo, hi = mean_ci(v, n_boot, ci, numpy_generator(seed + 1, "bootstrap"))
    per_k = (used.groupby("k", sort=True)[y].agg(n="count", mean="mean", sd="std", min="min", max="max")
             .reset_index())
    return KTrend(y=y, label=label, mean=mean, mean_ci=(lo, hi), sd=float(v.std(ddof=1)) if len(v) > 1 else math.nan,
                  slope=slope[0], ci=slope[1], intercept=slope[2], per_k=per_k, n_used=len(used),
                  n_censored=len(sel.censored_runs), n_excluded=sel.n_excluded, n_undefined=sel.n_undefined,
                  method=slope[3], ci_level=ci, points=sel.points, censored_runs=sel.censored_runs,
                  paper_values=paper)


LEAD_COLUMNS = {"ours": ("gap_lead", "gap_lead_steps"), "author": ("gap_lead_author", "gap_lead_steps_author")}
LEAD_LABELS = {"ours": "", "author": " (the author's definition: t_loss l1_0.9, in-batch dz)"}


def _lead_columns(table: pd.DataFrame, definition: str, what: str) -> tuple[str, str]:
    """The (share, steps) columns of a lead definition; the author's need runs that logged its columns."""
    if definition not in LEAD_COLUMNS:
        raise InterpError(f"unknown lead definition {definition!r} for {what}; allowed: {', '.join(LEAD_COLUMNS)}")
    cols = LEAD_COLUMNS[definition]
    if definition == "author":
        _require(table, cols[0], what)
        if not table.get("author_logged", pd.Series(dtype=bool)).fillna(False).astype(bool).any():
            raise InterpError(f"{what}: the author's in-batch dz and running-mean t_loss cannot be computed for these "
                              f"runs: their metrics logs have no train_loss_first / batch_shuffled_loss_first columns "
                              f"(runs trained before they were logged)")
    return cols


def author_statistic(table: pd.DataFrame, definition: str = "ours") -> dict:
    """The author's statistic (SPEC 9.1) on one definition's leads of the finished runs: the share's mean
    +- np.std (ddof 0) over the runs with a positive lead only, and the exponent of an ordinary least-squares
    fit of log(lead in steps) on log K over the same runs (NaN with fewer than 2 values of K)."""
    share, steps = _lead_columns(table, definition, "the author's lead statistic")
    done = table[table["status"] == "done"] if "status" in table else table
    v = done[share].to_numpy(float)
    pos = done[np.isfinite(v) & (v > 0)]
    lead, lsteps = pos[share].to_numpy(float), pos[steps].to_numpy(float)
    ks = pos["k"].to_numpy(float)
    ok = lsteps > 0
    exponent = (float(np.polyfit(np.log(ks[ok]), np.log(lsteps[ok]), 1)[0])
                if len(set(ks[ok])) >= 2 else math.nan)
    return dict(definition=definition, n=int(np.isfinite(v).sum()), n_positive=len(pos),
                mean=float(lead.mean()) if len(lead) else math.nan, sd=float(np.std(lead)) if len(lead) else math.nan,
                exponent=exponent)


def lead_share(table: pd.DataFrame, t_loss: str = "half", definition: str = "ours", **kwargs) -> KTrend:
    """The shuffle gap's lead as a share of t_loss (tau_half, or "snap": the end of tau_window), under
    `definition` ("ours" or "author", which fixes t_loss to l1_0.9): its mean with a CI, per K, and its
    trend against log K, with the author's statistic on the same runs, beside the author's 0.52 +- 0.14."""
    if t_loss not in ("half", "snap"):
        raise InterpError(f"t_loss must be 'half' or 'snap', got {t_loss!r}")
    y = _lead_columns(table, definition, "the shuffle gap's lead share")[0]
    if t_loss == "snap":
        if definition != "ours":
            raise InterpError("t_loss 'snap' is a variant of our definition; the author's t_loss is l1_0.9")
        y = "gap_lead_snap"
    label = "shuffle-gap lead share" + ("" if t_loss == "half" else " (t_loss = the snap)") + LEAD_LABELS[definition]
    paper = dict(mean=PAPER_LEAD_SHARE, sd=PAPER_LEAD_SHARE_SD, per_k=dict(PAPER_LEAD_SHARE_K))
    trend = k_trend(table, y, label, paper=paper, **kwargs)
    if y != "gap_lead_snap":
        trend.author_values = author_statistic(table, definition)
    return trend


def lead_exponent(table: pd.DataFrame, definition: str = "ours", **kwargs):
    """The lead in steps, t_loss - t(dz > 0.1 nats), against K as a power law (a `PowerLawFit` with
    x = "k", y = "gap_lead_steps", or "gap_lead_steps_author" under the author's definition; the author:
    K^2.13)."""
    return power_law(table, x="k", y=_lead_columns(table, definition, "the lead in steps against K")[1], **kwargs)


DEFINITION_TEXT = {"ours": "ours (t_loss tau_half, unbiased dz)", "author": "the author's (t_loss l1_0.9, in-batch dz)"}


def lead_definitions(fits: Fits, table: pd.DataFrame | None = None) -> list[dict]:
    """The lead share and its exponent under each definition ("ours", then "author"), from `circuit_fits`'s
    results on the same runs: our bootstrap intervals (the share's mean, its slope on log K, the power law of
    the lead in steps) beside the author's statistic (`author_statistic`). A definition the runs cannot give
    has `not_measured`, one line (the runs lack the logged columns: `AUTHOR_NOT_LOGGED`); `n_not_logged`
    counts the finished runs without them (left out of the author's fits) when `table` is given."""
    rows = []
    for definition in ("ours", "author"):
        suffix = "" if definition == "ours" else "_author"
        share, exponent = fits.results.get("lead_share" + suffix), fits.results.get("lead_exponent" + suffix)
        row = dict(definition=definition, text=DEFINITION_TEXT[definition], not_measured=None, n_used=0, mean=None,
                   mean_ci=None, per_k={}, slope=None, slope_ci=None, sign=None, exponent=None, exponent_ci=None,
                   trend_note=None, exponent_note=None, author_statistic=None, n_not_logged=0)
        why = fits.problems.get("lead_share" + suffix, "not computed")
        if share is None:
            row["not_measured"] = AUTHOR_NOT_LOGGED if AUTHOR_NOT_LOGGED in why else why
        else:
            row.update(n_used=share.n_used, mean=share.mean, mean_ci=share.mean_ci, author_statistic=share.author_values,
                       per_k={int(r.k): float(r.mean) for r in share.per_k.itertuples()})
            n_k = len(share.per_k)
            if n_k < 3:  # a slope through two values of K has no interval worth the name (one df: +-1e14)
                row["trend_note"] = f"needs at least 3 values of K, has {n_k}"
            elif math.isfinite(share.slope):
                row.update(slope=share.slope, slope_ci=share.ci, sign=share.sign)
            else:
                row["trend_note"] = share.method
        if exponent is not None:
            row.update(exponent=exponent.delta, exponent_ci=exponent.ci)
        elif share is not None:
            row["exponent_note"] = fits.problems.get("lead_exponent" + suffix, "not computed")
        if definition == "author" and table is not None and "author_logged" in table and share is not None:
            done = table[(table["status"] == "done") & table["direction"].isin(["bz_to_a", "b_to_a"])]
            row["n_not_logged"] = int((~done["author_logged"].fillna(False).astype(bool)).sum())
        rows.append(row)
    return rows


def lead_line(row: dict) -> str:
    """One `lead_definitions` row as a line of text."""
    if row["not_measured"]:
        return f"{row['text']}: not measured: {row['not_measured']}"

    def ci(pair, spec):
        return f"[{format(pair[0], spec)}, {format(pair[1], spec)}]"

    line = f"{row['text']}: share {row['mean']:.3f} {ci(row['mean_ci'], '.3f')} over {row['n_used']} runs"
    line += (f", per unit of log K {row['slope']:+.3f} {ci(row['slope_ci'], '+.3f')} ({row['sign']})"
             if row["slope"] is not None else f", {row['trend_note']}")
    line += (f"; lead in steps ~ K^{row['exponent']:.2f} {ci(row['exponent_ci'], '.2f')}" if row["exponent"] is not None
             else f"; no exponent ({row['exponent_note']})")
    a = row["author_statistic"]
    if a:
        line += (f"; the author's statistic: {a['mean']:.3f} +- {a['sd']:.3f} over {a['n_positive']} positive leads "
                 f"of {a['n']}, K^{a['exponent']:.2f} (least squares on the logs)")
    if row["n_not_logged"]:
        line += f"; {row['n_not_logged']} finished run(s) without the logged columns left out"
    return line


def published_lead_line() -> str:
    """The author's published lead (SPEC 9.1), for beside `lead_line`."""
    per_k = ", ".join(f"{v:.2f} at K = {k}" for k, v in PAPER_LEAD_SHARE_K.items())
    return (f"the author (published, SPEC 9.1): {PAPER_LEAD_SHARE} +- {PAPER_LEAD_SHARE_SD} over K = 3..36 ({per_k}); "
            f"lead in steps ~ K^{PAPER_LEAD_EXPONENT}")


def ablation_trend(table: pd.DataFrame, **kwargs) -> KTrend:
    """The routing head's ablation effect at tau (candidate-loss change, nats) against log K."""
    _require(table, "ablation_at_tau", "ablation at tau against K")
    methods = sorted(set(table["ablation_method"].dropna().astype(str))) if "ablation_method" in table else []
    label = f"{'/'.join(methods) or 'zero'}-ablation effect of the routing head at tau"
    paper = dict(value=PAPER_ABLATION_AT_TAU, k=PAPER_ABLATION_K, head=PAPER_ROUTING)
    return k_trend(table, "ablation_at_tau", label, paper=paper, **kwargs)


# ---------------------------------------------------------------------------- which head routes
@dataclass(repr=False)
class RoutingHeads(Presentable):
    """Which head routes in each finished, analysed run: counts per head (overall and per K) and
    the share of runs whose routing head is in layer 0, with a Wilson interval (a bootstrap of a
    share that is 1 in every run has no width, so it would claim certainty from 3 runs)."""

    counts: pd.DataFrame       # head, layer, runs, then one column per K (runs at that K)
    n_used: int
    n_layer0: int
    share_layer0: float
    ci: tuple[float, float]
    ci_level: float
    n_not_analysed: int
    modal_head: str
    runs: pd.DataFrame         # run, k, seed, routing_head, routing_layer

    @property
    def paper(self) -> dict:
        return dict(head=PAPER_ROUTING, layer=0, k=PAPER_ABLATION_K)

    def to_dict(self) -> dict:
        return jsonable(dict(fit="routing_heads", counts=self.counts.to_dict(orient="records"), n_used=self.n_used,
                              n_layer0=self.n_layer0, share_layer0=self.share_layer0, ci=list(self.ci),
                              ci_level=self.ci_level, n_not_analysed=self.n_not_analysed, modal_head=self.modal_head,
                              paper=self.paper, runs=self.runs.to_dict(orient="records")))

    def summary(self) -> str:
        heads = ", ".join(f"{r.head} {r.runs}" for r in self.counts.itertuples())
        line = (f"routing head over {self.n_used} runs: {heads}; in layer 0: {self.n_layer0} of {self.n_used} "
                f"({self.share_layer0:.0%}, {self.ci_level:.0%} CI {ci_str(self.ci, 2)}, Wilson)")
        if self.n_not_analysed:
            line += f"; {self.n_not_analysed} finished run(s) not analysed"
        return line + f"; paper: {PAPER_ROUTING} (layer 0) at K = {PAPER_ABLATION_K}"


def wilson(successes: int, n: int, level: float) -> tuple[float, float]:
    """The Wilson score interval of a proportion."""
    if n == 0:
        return math.nan, math.nan
    z = float(stats.norm.ppf(0.5 + level / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def routing_heads(table: pd.DataFrame, ci: float = 0.95) -> RoutingHeads:
    """Counts of the routing head across the finished runs (seeds and K), and the layer-0 share."""
    what = "routing heads"
    _require(table, "routing_head", what)
    if not 0.5 <= ci < 1.0:
        raise InterpError(f"ci must be a confidence level in [0.5, 1), got {ci}")
    done = table[table["status"].astype(str) == "done"]
    if "censored_tau_half" in done:
        done = done[~done["censored_tau_half"].astype("boolean").fillna(False).to_numpy(bool)]
    have = done[done["routing_head"].notna()]
    if have.empty:
        raise InterpError(f"{what}: no finished run has a routing head; it needs {NEEDS_ANALYSIS}")
    runs = have[["run", "k", "seed", "routing_head", "routing_layer"]].reset_index(drop=True)
    runs["routing_layer"] = runs["routing_layer"].astype(int)
    per_k = pd.crosstab(runs["routing_head"], runs["k"])
    per_k.columns = [f"k={int(k)}" for k in per_k.columns]
    counts = (runs.groupby("routing_head").agg(layer=("routing_layer", "first"), runs=("run", "count"))
              .join(per_k).reset_index().rename(columns={"routing_head": "head"})
              .sort_values(["runs", "head"], ascending=[False, True]).reset_index(drop=True))
    n, n0 = len(runs), int((runs["routing_layer"] == 0).sum())
    return RoutingHeads(counts=counts, n_used=n, n_layer0=n0, share_layer0=n0 / n, ci=wilson(n0, n, ci), ci_level=ci,
                        n_not_analysed=len(done) - n, modal_head=str(counts["head"].iloc[0]), runs=runs)


# ---------------------------------------------------------------------------- all of them
def circuit_fits(table: pd.DataFrame, n_boot: int = N_BOOT, ci: float = 0.95, seed: int = 0) -> Fits:
    """Every circuit fit the table allows (the sweep report's circuit sections, `interp analyze
    SWEEP`): a fit that does not apply is a note in `problems`, never an error."""
    fits = Fits()
    table = table[table["status"] != "damaged"]
    done = table[(table["status"] == "done") & (table["direction"].isin(["bz_to_a", "b_to_a"]))]
    ks = done["k"].nunique()
    analysed = "routing_head" in table.columns and done["routing_head"].notna().any()
    boot = dict(n_boot=n_boot, ci=ci, seed=seed)
    author = "author_logged" in done.columns and bool(done["author_logged"].fillna(False).astype(bool).any())
    attempts = {
        "lead_share": (len(done) >= 2, "needs 2 or more finished runs with a candidate loss",
                       lambda: lead_share(table, **boot)),
        "lead_exponent": (ks >= 3, "needs finished runs at 3 or more values of K", lambda: lead_exponent(table, **boot)),
        "lead_share_author": (len(done) >= 2 and author,
                              f"needs 2 or more finished runs {LOGGED}" if author else AUTHOR_NOT_LOGGED,
                              lambda: lead_share(table, definition="author", **boot)),
        "lead_exponent_author": (ks >= 3 and author,
                                 f"needs finished runs at 3 or more values of K {LOGGED}" if author else AUTHOR_NOT_LOGGED,
                                 lambda: lead_exponent(table, definition="author", **boot)),
        "routing_heads": (analysed, f"needs {NEEDS_ANALYSIS}", lambda: routing_heads(table, ci=ci)),
        "ablation_trend": (analysed and "ablation_at_tau" in table.columns and len(done) >= 2,
                           f"needs 2 or more finished runs and {NEEDS_ANALYSIS}", lambda: ablation_trend(table, **boot)),
    }
    return attempt(fits, attempts, "not in this sweep's design or not analysed")
