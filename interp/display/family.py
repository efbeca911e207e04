"""A Sweep and a fork family in a notebook: the design, how many runs are in each state, and the
head of the table. Reads the folders only (sweep.json or forks.json, each run's files)."""

from __future__ import annotations

from interp.display.html import card, frame_table
from interp.errors import InterpError
from interp.presentable import renders

STATE_ORDER = ("done", "running", "interrupted", "failed", "damaged", "not started")


def counts_text(states: list[str]) -> str:
    """"3 done, 1 failed" (states with no run left out), in a fixed order; "no runs" when empty."""
    parts = [f"{states.count(s)} {s}" for s in STATE_ORDER if states.count(s)]
    parts += [f"{states.count(s)} {s}" for s in sorted(set(states) - set(STATE_ORDER))]
    return ", ".join(parts) or "no runs"


def damaged_rows(table, what: str = "run") -> list[tuple[str, str]]:
    """A "problem" row naming every damaged run and why (the table's head may not show them all)."""
    damaged = table[table["status"] == "damaged"]
    if damaged.empty:
        return []
    named = "; ".join(f"{r} ({e})" for r, e in zip(damaged["run"], damaged["error"]))
    return [("problem", f"{len(damaged)} damaged {what}{'s' if len(damaged) != 1 else ''}, left out of every fit "
                        f"and verdict: {named}")]


def shown_columns(df, first: list[str]) -> list[str]:
    keep = ["run", *first, "status", "steps_run", "tau_half", "tau_window", "plateau_height", "wall_seconds", "error"]
    return [c for c in dict.fromkeys(keep) if c in df.columns]


@renders("interp.sweeps.sweep:Sweep")
def sweep_html(sweep, max_rows: int = 10) -> str:
    spec = sweep.spec
    table = sweep.table()
    axes = [f"{name} = {', '.join(map(str, values))}" for name, values in spec.grid]
    if spec.points:
        axes.append(f"{len(spec.points)} explicit point(s) over {', '.join(sorted({f for p in spec.points for f in p}))}")
    if spec.fixed_d is not None:
        axes.append(f"fixed D = {spec.fixed_d} (task.n_bases = D / K)")
    rows = [("folder", str(sweep.path)), ("preset", spec.name or "-"), ("axes", "; ".join(axes) or "none"),
            ("runs", f"{len(table)}: {counts_text(list(table['status']))}"), *damaged_rows(table)]
    body = frame_table(table[shown_columns(table, spec.fields)], max_rows)
    return card(f"Sweep {sweep.name}", rows, body, notes=["Sweep.table() has every column; interp.scaling fits it."])


@renders("interp.forks.family:ForkFamily")
def family_html(family, max_rows: int = 10) -> str:
    d = family.design
    try:
        table = family.table()
    except InterpError as exc:  # a design no fork can be made from, a parent gone: say so, never raise
        return card(f"Fork family {family.name}", [("folder", str(family.path)), ("problem", str(exc))])
    arms = ", ".join(arm.label for arm in family.arms)
    gone = family.parent_problem()
    rows = [("folder", str(family.path)), ("parent", d["parent"] + (": missing" if gone else "")),
            ("fork steps", ", ".join(map(str, d["steps"]))),
            ("arms", arms), ("seeds", ", ".join(map(str, d["seeds"]))), ("horizon", f"{d['horizon']} steps"),
            ("escape criterion", family.escape.words),
            ("forks", f"{len(table)}: {counts_text(list(table['status']))}"), *damaged_rows(table, "fork")]
    if gone:
        rows.append(("problem", f"the parent {d['parent']} cannot be opened ({gone}): the forks are read from their "
                                f"own folders; forks cannot be made or trained until it is back"))
    held = () if family.escape.is_default else ("escape", "censored_escape")  # the criterion's, when not tau_half
    cols = [c for c in ("run", "fork_step", "arm", "fork_seed", "status", *held, "escape_half", "censored_escape_half",
                        "escape_snap", "gamma", "gamma_median", "error") if c in table.columns]
    body = frame_table(table[cols], max_rows)
    return card(f"Fork family {family.name}", rows, body,
                notes=["escape_half: steps after the fork to tau_half; censored: not reached within the horizon "
                       "(a lower bound, never a value)."])
