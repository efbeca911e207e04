"""The fork numbers both verdict tables read from a family's table: escape ratios and realised Gamma, calibrated.

A fork's escape is known only to its evaluation step (an escape seen at step t after the fork lies in
(t - eval_every, t]) and a fork that never escaped only as a lower bound (its steps run). The ratio of an
arm's escapes to a reference arm's is the ratio of their geometric means with Welch's t interval on the logs
(`interp.mechanisms.intervals.log_ratio_t`), at the earliest fork step where both arms have forks. A
reference arm without randomness of its own (full_batch: its class's `seedless`) enters as a constant.
Gamma is the geometric mean of the forks' ratio-of-sums Gamma with its t interval on the log scale.
Each measure names why it cannot be had (an arm absent, every fork censored, one fork only).

pandas and numpy only.
"""

from __future__ import annotations

import math

import numpy as np

from interp.errors import InterpError
from interp.mechanisms.intervals import Estimate, log_ratio_t, mean_t, ratio_bound
from interp.mechanisms.rules import Measure


def _labels(df):
    from interp.sweeps.forks import arm_label

    params = df["arm_params"] if "arm_params" in df.columns else [""] * len(df)
    return [arm_label(a, p) for a, p in zip(df["arm"], params)]


def done_forks(table):
    """The done forks of a family table with their arm label (`arm:params`) and fork step."""
    import pandas as pd

    df = table[table["status"].astype(str) == "done"].copy()
    df["label"] = _labels(df) if len(df) else pd.Series(dtype=str)
    df["fork_step"] = pd.to_numeric(df["fork_step"], errors="coerce")
    return df


def unfinished(table, arm: str) -> str:
    """", N of them not finished (their statuses)" where the family holds forks of `arm` that are not done."""
    left = table[(table["status"].astype(str) != "done") & (table["arm"].astype(str) == arm.split(":", 1)[0])]
    if left.empty:
        return ""
    states = ", ".join(f"{n} {s}" for s, n in left["status"].astype(str).value_counts().sort_index().items())
    return f": its {len(left)} are not finished ({states})"


def censored_at(row: dict, y: str = "escape") -> float:
    """A censored fork's lower bound in steps after the fork: `{y}_bound` (the start of a trailing stretch past the
    threshold, `interp.forks.escape.censored_bound`) where the row has a finite one, else the steps it ran."""
    for key in (f"{y}_bound", "steps_run"):
        value = row.get(key)
        try:
            value = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(value):
            return value
    return 0.0


def escapes(rows, y: str = "escape") -> tuple[list[tuple[float, float]], int]:
    """Each fork's escape as (low, high] in steps after the fork (censored: (its bound, inf), the bound the table's
    `{y}_bound` where it has one, a held escape's trailing stretch start, else the steps run), and how many forks had
    neither an escape nor a censoring (left out)."""
    out, undefined = [], 0
    for r in rows.to_dict("records"):
        res = float(r.get("eval_every") or 0.0)
        res = res if math.isfinite(res) else 0.0
        value = r.get(y)
        if bool(r.get(f"censored_{y}")):
            out.append((censored_at(r, y), math.inf))
        elif value is not None and math.isfinite(float(value)) and float(value) >= 0:
            out.append((max(float(value) - res, 0.0), float(value)))
        else:
            undefined += 1
    return out, undefined


def _seedless(label: str) -> bool:
    from interp.forks.arms import ARMS

    cls = ARMS.get(label.split(":", 1)[0])
    return bool(cls is not None and cls.seedless)


def escape_ratio(table, arm: str, reference: str, y: str | None = None,
                 deepest: bool = False) -> tuple[Measure | None, str]:
    """The escape ratio of the forks labelled `arm` (an arm label, or an arm name matching every label of that
    arm) over `reference`'s at the earliest fork step holding both (`deepest`: the latest, for a family forking
    one relapse at several depths, whose deepest state is the author's), as a Measure (None and why when it cannot
    be had); `y` the escape column (None: the family's criterion, `escape`, where the table has it, else
    tau_half's). A measure resting on one fork of a random arm has no interval (it decides nothing)."""
    y = y or ("escape" if "escape" in table.columns else "escape_half")
    df = done_forks(table)
    if df.empty:
        return None, "no fork is done"
    mine = df[(df["label"] == arm) | (df["arm"].astype(str) == arm)]
    ref = df[df["label"] == reference]
    if mine.empty or ref.empty:
        name = arm if mine.empty else reference
        return None, f"no done {name} forks" + unfinished(table, name)
    steps = sorted(set(mine["fork_step"].dropna().astype(int)) & set(ref["fork_step"].dropna().astype(int)))
    if not steps:
        return None, f"no fork step holds both {arm} and {reference} forks"
    step = steps[-1] if deepest else steps[0]
    at = mine[mine["fork_step"] == step]
    if arm not in set(at["label"]) and at["label"].nunique() > 1:  # an arm name with several parameterisations
        at = at[at["label"] == sorted(set(at["label"]))[0]]
    label = str(at["label"].iloc[0])
    num, num_undef = escapes(at, y)
    den, den_undef = escapes(ref[ref["fork_step"] == step], y)
    if not num or not den:
        return None, f"the {label if not num else reference} forks at fork step {step} have no escape and are not censored"
    if all(math.isinf(h) for _, h in num) and all(math.isinf(h) for _, h in den):
        return None, (f"every {label} and {reference} fork at fork step {step} is censored at its horizon: neither "
                      f"arm escaped, so their ratio is undefined (a longer --steps horizon would time them)")
    def constant(label_, forks) -> bool:  # no randomness of its own, and one value: a constant, not a sample
        return _seedless(label_) and len({f[1] for f in forks}) == 1

    fixed = constant(reference, den)
    num_fixed = constant(label, num) and not fixed
    e = log_ratio_t(num, den, den_fixed=fixed, num_fixed=num_fixed)
    seen = [h if math.isfinite(h) else lo for lo, h in num]
    ref_seen = [h if math.isfinite(h) else lo for lo, h in den]
    if e is None:  # one fork of a random arm: its value alone, no interval
        value = float(np.exp(np.mean(np.log(np.maximum(seen, 1e-12))) - np.mean(np.log(np.maximum(ref_seen, 1e-12)))))
        random = [len(x) for x, seedless in ((num, num_fixed), (den, fixed)) if not seedless]
        e = Estimate(value, math.nan, math.nan, min(random) if random else 1, "one fork: no interval")
    n_cens = sum(math.isinf(h) for _, h in num) + sum(math.isinf(h) for _, h in den)
    detail = (f"{label} / {reference} escape at fork step {step}: {len(num)} / {len(den)} forks"
              + (f" ({reference if fixed else label} has no randomness: one fork stands for every seed)"
                 if fixed or num_fixed else "")
              + (f", {n_cens} censored (the ratio's bound)" if n_cens else "")
              + (f", {num_undef + den_undef} without an escape left out" if num_undef + den_undef else ""))
    return Measure.of(e, detail, {"fork_step": step, "label": label, "n_x": 0, "bound": ratio_bound(num, den)}), ""


def gamma(table, arm: str, label_filter: str = "", deepest: bool = False) -> tuple[Measure | None, str]:
    """The geometric mean of the realised Gamma (ratio of sums) of `arm`'s forks at its earliest fork step with a
    measured Gamma (`deepest`: the latest, as `escape_ratio`; labels containing `label_filter` when given), with
    its t interval on the log scale."""
    import pandas as pd

    df = done_forks(table)
    if df.empty or "gamma" not in df:
        return None, "no fork is done" if df.empty else "the forks log no Gamma"
    df = df.assign(gamma=pd.to_numeric(df["gamma"], errors="coerce"))
    pick = df[(df["arm"].astype(str) == arm) & np.isfinite(df["gamma"].to_numpy(float))]
    if label_filter:
        pick = pick[pick["label"].str.contains(label_filter, regex=False)]
    if pick.empty:
        return None, f"no {arm} fork with a measured Gamma (gamma_every > 0)"
    step = int(pick["fork_step"].max() if deepest else pick["fork_step"].min())
    g = pick[pick["fork_step"] == step]["gamma"].to_numpy(float)
    e = mean_t(g, log=True)
    if e is None:
        return None, f"a {arm} fork's Gamma is not positive"
    return Measure.of(e, f"Gamma (ratio of sums) of the {arm} forks at fork step {step}"), ""


def deepest_relapse(family) -> bool:
    """Whether the family's fork measures are read at its latest fork step: a family forking one relapsed state at
    several depths (`--at relapse,relapse+H`) is judged where it sat relapsed longest, the nearest to the author's
    state (16,000 steps into its relapse); any other family at its earliest fork step."""
    return family.parent_problem() is None and len(set(family.design.get("steps") or [])) > 1 and family_relapsed(family)


def family_relapsed(family) -> bool:
    """Whether every fork starts from a relapsed state, as the author's forks do: not the first plateau, nor a
    state that re-solved after the relapse. As `interp fork RUN --at relapse` takes it (`relapse_at`), under the
    relapse criterion the family was made with (its design's "relapse"; absent: the default): each fork step lies
    in the parent's first relapsed stretch, from its relapse up to the first evaluation no longer past the
    criterion's threshold (`relapsed_until`)."""
    from interp.forks.relapse import detect, parse_relapse, relapsed_until

    parent = family.parent
    try:
        criterion = parse_relapse(family.design.get("relapse"))
        series = parent.metric_series("loss_cand", criterion.metric)
    except InterpError:
        return False
    steps, values = series["step"], series[criterion.metric]
    found = detect(steps, series["loss_cand"], values, parent.log_k, criterion)[1]
    if found is None:
        return False
    ended = relapsed_until(steps, values, found, criterion, parent.log_k)
    return all(found <= s and (ended is None or s < ended) for s in family.design["steps"])
