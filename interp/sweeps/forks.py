"""The comparison of fork arms: how long each arm takes to escape the plateau after the fork step.

A fork family table has one row per fork run (columns: run, status, fork_step, arm,
arm_params, steps_run, escape (under the family's criterion, named in escape_criterion),
escape_half / escape_snap and their censored_* flags, gamma, gamma_median). Runs are grouped by
(fork_step, arm label); each group gets the median escape over its seeds, a bootstrap interval
and its ratio to the reference arm at the same fork step; the comparison names the criterion its
escape was judged under, and gives per arm the mean over forks of Gamma (ratio of sums) and of
the per-step median (over gamma_range).

Censoring. A done run that never escaped within its horizon only tells us escape > steps_run:
a lower bound, never a value, so it is never averaged in. The true median lies between the
median with censored runs at their bounds (the smallest it can be) and the median with them
at +inf (the largest). When the two agree the median is known exactly: with one horizon per
group that is whenever the median's order statistics fall on uncensored runs (fewer than half
censored). Otherwise the median is censored and reported as the lower bound (">= N"): with
more than half censored at one horizon that is the smallest censored bound. (Taking the
smallest bound when exactly half of an even group is censored would overstate it: the median
then averages an uncensored run with a censored one, and the bound is that average.)

Intervals resample each group's runs with replacement (independently per group); the lower
end comes from the resampled medians with censored runs at their bounds, the upper end from
those with them at +inf (an upper end of +inf is unbounded: "> x"). Percentiles are taken
without interpolation ("lower" / "higher"), which stays defined with infinite values.
numpy and pandas only; the figure is `interp.plots.forks`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from interp.errors import InterpError
from interp.forks.arms import table_order
from interp.presentable import Presentable
from interp.seeding import numpy_generator
from interp.sweeps.bootstrap import N_BOOT, check_level
from interp.sweeps.fits import CensoredRunsWarning, DamagedRunsWarning, NotDoneRunsWarning, jsonable, run_names

ESCAPES = ("escape", "escape_half", "escape_snap")  # escape: under the family's criterion (escape_criterion)
FIXED = {"escape_half": "loss_cand<0.5logK", "escape_snap": "loss_cand<0.05logK"}  # what the fixed two judge
NEEDED = ("run", "status", "fork_step", "arm", "steps_run")
ROW_COLUMNS = ("fork_step", "arm", "label", "n", "n_censored", "median", "median_censored", "ci_low", "ci_high",
               "ratio", "ratio_low", "ratio_high", "ratio_bound", "gamma", "gamma_n", "gamma_median")
METHOD = ("runs resampled with replacement per group (censored runs at their bound for the lower end, "
          "at +inf for the upper end), percentile")


def arm_label(arm, params) -> str:
    """`arm`, or `arm:params` when the arm has parameters."""
    p = "" if params is None or (isinstance(params, float) and math.isnan(params)) else str(params).strip()
    return str(arm) if not p else f"{arm}:{p}"


def _steps(v: float) -> str:
    if not math.isfinite(v):
        return "n/a"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _interval(lo: float, hi: float, show=_steps) -> str:
    if math.isnan(lo) or math.isnan(hi):
        return "n/a"
    return f"> {show(lo)}" if math.isinf(hi) else f"[{show(lo)}, {show(hi)}]"


def _ratio_str(v: float) -> str:
    return "n/a" if not math.isfinite(v) else f"{v:.3g}"


@dataclass(repr=False)
class ForkComparison(Presentable):
    """Median escape per (fork_step, arm), with intervals over seeds and the ratio to the reference arm."""

    rows: pd.DataFrame          # one row per (fork_step, arm label): ROW_COLUMNS
    reference: str
    y: str
    level: float
    n_boot: int
    seed: int
    n_excluded: int
    notes: list[str] = field(default_factory=list)
    criterion: str = ""  # the escape criterion y was judged under (interp.forks.escape), as written
    gamma_range: str = ""  # "A:B": gamma_median is over the per-step ratios at steps A..B after the fork

    def to_dict(self) -> dict:
        return jsonable(dict(fit="forks", y=self.y, criterion=self.criterion, gamma_range=self.gamma_range,
                             reference=self.reference, level=self.level, n_boot=self.n_boot,
                             seed=self.seed, method=METHOD, n_excluded=self.n_excluded, notes=self.notes,
                             rows=self.rows.to_dict(orient="records")))

    @property
    def criterion_words(self) -> str:
        from interp.forks.escape import parse_escape

        return parse_escape(self.criterion).words if self.criterion else ""

    def ratio_cells(self, r, on_reference: str, interval) -> tuple[str, str]:
        """Row `r`'s ratio to the reference arm and its interval (`interval(low, high)`) as the summary and the
        report show them: `on_reference` on the reference's own row, "undefined" where there is no ratio."""
        if r.label == self.reference:
            return on_reference, ""
        if r.ratio_bound == "undefined" or not math.isfinite(r.ratio):
            return "undefined", ""
        return f"{r.ratio_bound} {_ratio_str(r.ratio)}".strip(), interval(r.ratio_low, r.ratio_high)

    def summary(self) -> str:
        """A text table; a censored median is shown as ">= N", never as a plain number."""
        judged = f" [{self.criterion_words}]" if self.criterion else ""
        head = (f"{self.y}{judged} (steps after the fork), median over seeds, {self.level:.0%} CI over runs; "
                f"ratio to {self.reference!r} at the same fork step")
        med_head = f"gamma med {self.gamma_range}" if self.gamma_range else "gamma med"
        lines = [head, f"{'fork_step':>9}  {'arm':<30} {'n':>3} {'cens':>4}  {'median':>10}  {'CI':>20}  "
                       f"{'ratio':>9}  {'ratio CI':>16}  {'gamma':>6}  {med_head}"]
        for r in self.rows.itertuples(index=False):
            med = f">= {_steps(r.median)}" if r.median_censored else _steps(r.median)
            ratio, rci = self.ratio_cells(r, "1 (ref)", lambda lo, hi: _interval(lo, hi, _ratio_str))
            gamma = f"{r.gamma:.3g}" if math.isfinite(r.gamma) else "n/a"
            gmed = f"{r.gamma_median:.3g}" if math.isfinite(r.gamma_median) else "n/a"
            lines.append(f"{r.fork_step:>9}  {r.label:<30} {r.n:>3} {r.n_censored:>4}  {med:>10}  "
                         f"{_interval(r.ci_low, r.ci_high):>20}  {ratio:>9}  {rci:>16}  {gamma:>6}  {gmed}")
        lines += [f"interval: {METHOD}; '> x': unbounded above (censored runs)"] + [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


# ---------------------------------------------------------------------------- the table
def _check(table, y: str) -> None:
    what = "fork comparison"
    if y not in ESCAPES:
        raise InterpError(f"{what}: unknown y {y!r}; allowed: {', '.join(ESCAPES)}")
    if not isinstance(table, pd.DataFrame):
        raise InterpError(f"{what}: expected a fork family table (a pandas DataFrame), got {type(table).__name__}")
    missing = [c for c in (*NEEDED, y, f"censored_{y}") if c not in table.columns]
    if missing:
        raise InterpError(f"{what}: the fork table lacks the column(s) {', '.join(missing)}")
    if table.empty:
        raise InterpError(f"{what}: the fork table is empty (no runs)")


def _roles(table: pd.DataFrame, y: str) -> pd.DataFrame:
    """The done rows with label, role (used / censored / undefined), value and bound."""
    df = table[table["status"].astype(str) == "done"].copy()
    params = df["arm_params"] if "arm_params" in df.columns else pd.Series([""] * len(df), index=df.index)
    df["label"] = [arm_label(a, p) for a, p in zip(df["arm"], params)]
    df["fork_step"] = pd.to_numeric(df["fork_step"], errors="coerce")
    flag = df[f"censored_{y}"].astype("boolean").fillna(False).to_numpy(bool)
    value = pd.to_numeric(df[y], errors="coerce").to_numpy(float)
    bound = pd.to_numeric(df["steps_run"], errors="coerce").to_numpy(float)
    if "horizon" in df.columns:
        bound = np.where(np.isfinite(bound), bound, pd.to_numeric(df["horizon"], errors="coerce").to_numpy(float))
    if f"{y}_bound" in df.columns:  # a held escape censored mid-stretch: it may have begun where the stretch did
        own = pd.to_numeric(df[f"{y}_bound"], errors="coerce").to_numpy(float)
        bound = np.where(np.isfinite(own), own, bound)
    used = ~flag & np.isfinite(value) & (value >= 0)
    df["role"] = np.select([flag, used], ["censored", "used"], "undefined")
    df["value"] = np.where(used, value, np.nan)
    df["bound"] = np.where(flag, np.nan_to_num(bound, nan=0.0), np.nan)
    df["gamma_v"] = pd.to_numeric(df["gamma"], errors="coerce") if "gamma" in df.columns else np.nan
    df["gamma_m"] = pd.to_numeric(df["gamma_median"], errors="coerce") if "gamma_median" in df.columns else np.nan
    return df


def _order(label: str, reference: str) -> tuple:
    arm = label.split(":", 1)[0]
    return (label != reference, table_order(arm), label)


def _pct(v: np.ndarray, q: float, method: str) -> float:
    return math.nan if np.isnan(v).any() else float(np.quantile(v, q, method=method))


# ---------------------------------------------------------------------------- the comparison
def forks(table: pd.DataFrame, y: str | None = None, reference: str = "minibatch", n_boot: int = N_BOOT,
          ci: float = 0.95, seed: int = 0) -> ForkComparison:
    """Median `y` per (fork_step, arm label) over the done runs, censored runs as lower bounds (see the
    module docstring), a bootstrap interval, and the ratio to `reference` (an arm label) at each fork step.
    `y` None: `escape`, the escape under the family's criterion (its `escape_criterion` column), when the
    table has it, else `escape_half`. The comparison names its criterion (`criterion`) and Gamma range.

    The ratio is ">=" when the arm's median is censored, "<=" when the reference's is, "undefined"
    (NaN) when both are or the reference has no runs at that fork step.
    """
    what = "fork comparison"
    if y is None:
        y = "escape" if isinstance(table, pd.DataFrame) and "escape" in table.columns else "escape_half"
    _check(table, y)
    check_level(ci, n_boot)
    criterion = _named(table, "escape_criterion") if y == "escape" else FIXED[y]
    gamma_range = _named(table, "gamma_range")
    notes = []
    status = table["status"].astype(str)
    out = table[status != "done"]
    if len(out) == len(table):
        counts = ", ".join(f"{s} {n}" for s, n in status.value_counts().items())
        raise InterpError(f"{what}: no run is done ({counts}); only done runs enter the comparison")
    bad = out[out["status"].astype(str) == "damaged"]
    other = out[out["status"].astype(str) != "damaged"]
    if len(other):
        named = [f"{r} ({s})" for r, s in zip(other["run"].astype(str), other["status"].astype(str))]
        notes.append(f"{len(other)} run(s) not done, left out: {run_names(named)}")
        warnings.warn(f"{what}: {notes[-1]}", NotDoneRunsWarning, stacklevel=2)
    if len(bad):  # apart: the commands that name each damaged run drop this one (DamagedRunsWarning)
        notes.append(f"{len(bad)} damaged run(s) left out: {run_names(bad['run'].astype(str).tolist())}")
        warnings.warn(f"{what}: {notes[-1]}", DamagedRunsWarning, stacklevel=2)
    df = _roles(table, y)
    if not (df["label"] == reference).any():
        have = sorted(set(df["label"]), key=lambda s: _order(s, reference))
        raise InterpError(f"{what}: the reference arm {reference!r} has no done runs; the arms are: {', '.join(have)}")
    undefined = df.loc[df["role"] == "undefined", "run"].astype(str).tolist()
    if undefined:
        notes.append(f"{len(undefined)} done run(s) without a {y} and not censored, left out: {run_names(undefined)}")
    censored = df.loc[df["role"] == "censored", "run"].astype(str).tolist()
    if censored:
        notes.append(f"{len(censored)} censored run(s) ({y} not reached within steps_run) enter the medians as "
                     f"lower bounds, never as values: {run_names(censored)}")
        warnings.warn(f"{what}: {notes[-1]}", CensoredRunsWarning, stacklevel=2)
    if df["fork_step"].isna().any():
        raise InterpError(f"{what}: runs {run_names(df.loc[df['fork_step'].isna(), 'run'].astype(str).tolist())} "
                          f"have no fork_step")
    rng = numpy_generator(seed, "bootstrap")
    alpha = 1.0 - ci
    groups, boots = [], {}
    for step in sorted(set(df["fork_step"].astype(int))):
        at = df[df["fork_step"].astype(int) == step]
        for label in sorted(set(at["label"]), key=lambda s: _order(s, reference)):
            part = at[at["label"] == label]
            ok = part[part["role"] != "undefined"]
            cen = (ok["role"] == "censored").to_numpy(bool)
            low = np.where(cen, ok["bound"].to_numpy(float), ok["value"].to_numpy(float))
            high = np.where(cen, np.inf, low)
            g = part["gamma_v"].to_numpy(float)
            g = g[np.isfinite(g)]
            gm = part["gamma_m"].to_numpy(float)
            gm = gm[np.isfinite(gm)]
            row = dict(fork_step=step, arm=str(part["arm"].iloc[0]), label=label, n=len(ok), n_censored=int(cen.sum()),
                       median=math.nan, median_censored=False, ci_low=math.nan, ci_high=math.nan,
                       ratio=math.nan, ratio_low=math.nan, ratio_high=math.nan, ratio_bound="undefined",
                       gamma=float(g.mean()) if len(g) else math.nan, gamma_n=len(g),
                       gamma_median=float(gm.mean()) if len(gm) else math.nan)
            if len(ok):
                m_low, m_high = float(np.median(low)), float(np.median(high))
                exact = m_low == m_high
                row.update(median=m_high if exact else m_low, median_censored=not exact)
                if not exact and math.isfinite(m_high):
                    notes.append(f"fork_step {step} {label}: the median lies between {m_low:g} and {m_high:g} "
                                 f"(censored bounds below escapes: horizons differ)")
                idx = rng.integers(0, len(ok), (n_boot, len(ok)))
                b_low, b_high = np.median(low[idx], axis=1), np.median(high[idx], axis=1)
                boots[(step, label)] = (b_low, b_high)
                row.update(ci_low=_pct(b_low, alpha / 2, "lower"), ci_high=_pct(b_high, 1 - alpha / 2, "higher"))
            groups.append(row)
    rows = pd.DataFrame(groups, columns=list(ROW_COLUMNS))
    for step in sorted(set(rows["fork_step"])):
        ref = rows[(rows["fork_step"] == step) & (rows["label"] == reference) & (rows["n"] > 0)]
        if ref.empty:
            notes.append(f"the reference {reference!r} has no usable runs at fork_step {step}: no ratios there")
            continue
        r = ref.iloc[0]
        for i in rows.index[rows["fork_step"] == step]:
            a = rows.loc[i]
            if a["label"] == reference:
                rows.loc[i, ["ratio", "ratio_low", "ratio_high", "ratio_bound"]] = [1.0, 1.0, 1.0, ""]
                continue
            if a["n"] == 0 or (a["median_censored"] and r["median_censored"]) or not r["median"] > 0:
                continue
            bound = ">=" if a["median_censored"] else "<=" if r["median_censored"] else ""
            (al, ah), (rl, rh) = boots[(step, a["label"])], boots[(step, reference)]
            with np.errstate(divide="ignore", invalid="ignore"):
                lo, hi = _pct(al / rh, alpha / 2, "lower"), _pct(ah / rl, 1 - alpha / 2, "higher")
            rows.loc[i, ["ratio", "ratio_low", "ratio_high", "ratio_bound"]] = [
                float(a["median"] / r["median"]), lo, hi, bound]
    return ForkComparison(rows=rows, reference=reference, y=y, level=float(ci), n_boot=int(n_boot), seed=int(seed),
                          n_excluded=len(out), notes=notes, criterion=criterion, gamma_range=gamma_range)


def _named(table: pd.DataFrame, column: str) -> str:
    """The one value of a per-family column (the criterion, the Gamma range); "" when absent or mixed."""
    if column not in table.columns:
        return ""
    values = {str(v) for v in table[column].dropna()}
    return values.pop() if len(values) == 1 else ""
