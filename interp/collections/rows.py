"""A point's columns of a collection's table (`Sweep.table()`, `ForkFamily.table()`): its identity
(K, D, direction, seed, lr, batch size, planned steps) from its spec, and its transition measures
from its metrics log, with a censoring flag for every measure a finished run never reached.
"""

from __future__ import annotations

import math

from interp.runs import Run
from interp.spec import RunSpec

ACC_THRESHOLD = 0.99


def table_of(rows: list[dict]):
    """A collection's table (pandas) from its rows, one per point: steps_run a nullable integer."""
    import pandas as pd

    df = pd.DataFrame(rows)
    df["steps_run"] = df["steps_run"].astype("Int64")
    return df


def identity(spec: RunSpec | None) -> dict:
    if spec is None:
        return dict.fromkeys(("k", "n_bases", "D", "direction", "seed", "lr", "batch_size", "planned_steps"),
                             math.nan)
    return {"k": spec.task.k, "n_bases": spec.task.n_bases, "D": spec.task.dataset_size,
            "direction": spec.task.direction, "seed": spec.seed, "lr": spec.train.lr,
            "batch_size": spec.train.batch_size, "planned_steps": spec.train.steps}


MEASURES = ("tau_half", "tau_window", "t_start", "t_end", "plateau_height", "snap_step",
            "steps_to_acc_cand_99", "steps_to_exact_99", "gap_onset", "gap_lead", "gap_lead_snap", "gap_lead_steps",
            "gap_onset_author", "t_loss_author", "gap_lead_author", "gap_lead_steps_author")
CENSORABLE = ("tau_half", "tau_window", "snap_step", "steps_to_acc_cand_99", "steps_to_exact_99")
# the leads, censored when the dz onset is the first evaluation of a log that starts after 0 (a fork)
LEAD_CENSORABLE = ("gap_lead", "gap_lead_snap", "gap_lead_steps", "gap_lead_author", "gap_lead_steps_author")


# tau at other thresholds (fractions of log K): the author's robustness check of delta (`interp scaling --threshold`)
TAU_FRACTIONS = (0.3, 0.4, 0.5, 0.6, 0.7)


def tau_column(fraction: float) -> str:
    """The table column of tau at `fraction` log K: "tau_0.3"."""
    return f"tau_{fraction:g}"


def _nan(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _first_at_least(steps: list[int], values: list[float], threshold: float) -> int | None:
    for s, v in zip(steps, values):
        if not _nan(v) and v >= threshold:
            return s
    return None


def author_lead(run: Run) -> dict:
    """The shuffle gap's lead under the author's definition (SPEC 9.1: t_loss l1_0.9, in-batch dz), as
    the `*_author` columns; all None, and author_logged False, for a run whose log lacks its columns."""
    from interp.transition import LEAD_DEFINITIONS, facts

    found = facts(run)
    t_loss, dz = LEAD_DEFINITIONS["author"]
    logged = found.not_measured(t_loss, dz) is None and found.has_cand
    lead = found.gap_lead_at(t_loss, dz) if logged else {"gap_onset": None, "t_loss": None, "gap_lead": None}
    steps = None if lead["gap_lead"] is None else lead["t_loss"] - lead["gap_onset"]
    return {"gap_onset_author": lead["gap_onset"], "t_loss_author": lead["t_loss"], "gap_lead_author": lead["gap_lead"],
            "gap_lead_steps_author": steps, "author_logged": logged, "gap_censored_author": bool(lead.get("censored"))}


def measures(run: Run | None, spec: RunSpec | None, state: str) -> dict:
    """Transition times of one run from its metrics log, and the shuffle gap's onset and lead
    (NaN when dz never exceeds 0.1 nats or tau_half is not reached); a finished run that never reached a
    threshold is censored (flag True, value NaN), never a silent NaN. No run (not started,
    or damaged): every value NaN, nothing censored."""
    from interp.summary import run_summary

    out: dict = {m: math.nan for m in MEASURES}
    out.update({f"censored_{m}": False for m in CENSORABLE + LEAD_CENSORABLE})
    out.update({"steps_run": None, "wall_seconds": math.nan, "author_logged": False})
    for f in TAU_FRACTIONS:
        out[tau_column(f)], out[f"censored_{tau_column(f)}"] = math.nan, False
    if run is None:
        out["censored"] = False
        return out
    summary = run_summary(run)
    series = run.metric_series("acc_cand", "acc_exact")
    out["steps_run"] = summary["last_evaluated"]
    out["wall_seconds"] = math.nan if summary.get("wall_seconds") is None else float(summary["wall_seconds"])
    has_cand = spec.task.direction in ("bz_to_a", "b_to_a")
    values = {
        "tau_half": summary["tau_half"], "tau_window": summary["tau_window"],
        "t_start": summary["window_start"], "t_end": summary["window_end"],
        "plateau_height": summary["plateau_height"], "snap_step": summary["snap_step"],
        "steps_to_acc_cand_99": _first_at_least(series["step"], series["acc_cand"], ACC_THRESHOLD) if has_cand else None,
        "steps_to_exact_99": _first_at_least(series["step"], series["acc_exact"], ACC_THRESHOLD),
        # the shuffle gap's lead (interp.transition.gap_lead): its first step above 0.1 nats, its
        # lead as a share of tau_half and of the snap, and in steps before tau_half
        "gap_onset": summary["gap_onset"], "gap_lead": summary["gap_lead"], "gap_lead_snap": summary["gap_lead_snap"],
        "gap_lead_steps": (None if summary["gap_onset"] is None or summary["tau_half"] is None
                           or summary.get("gap_onset_censored") else summary["tau_half"] - summary["gap_onset"]),
    }
    values.update(author_lead(run))
    out["author_logged"] = values.pop("author_logged")
    # a dz onset at the first evaluation of a log that starts after step 0 (a fork) is only a bound: the lead is
    # censored there, flagged so that the fits count it and leave it out (interp.transition.left_censored)
    gap_cens, gap_cens_author = bool(summary.get("gap_onset_censored")), values.pop("gap_censored_author")
    for name, flag in (("gap_lead", gap_cens), ("gap_lead_snap", gap_cens), ("gap_lead_steps", gap_cens),
                       ("gap_lead_author", gap_cens_author), ("gap_lead_steps_author", gap_cens_author)):
        out[f"censored_{name}"] = flag
    for name, value in values.items():
        out[name] = math.nan if value is None else float(value)
    defined = {"tau_half": has_cand, "tau_window": has_cand, "snap_step": has_cand,
               "steps_to_acc_cand_99": has_cand, "steps_to_exact_99": True}
    for name in CENSORABLE:
        out[f"censored_{name}"] = bool(state == "done" and defined[name] and values[name] is None)
    out["censored"] = out["censored_tau_half"]
    if has_cand:
        from interp.transition import facts

        found = facts(run)
        for f in TAU_FRACTIONS:
            at = found.tau_at(f)
            out[tau_column(f)] = math.nan if at is None else float(at)
            out[f"censored_{tau_column(f)}"] = bool(state == "done" and at is None)
    return out
