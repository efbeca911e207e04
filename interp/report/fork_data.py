"""What the fork family report reads: the table, the parent (or why it is missing) and the curves.

The family's own table (`ForkFamily.table`) needs the parent, since each fork's spec is the
parent's with the arm's change. A report is most wanted after the fact, when the parent may
have moved; then the forks are read from their own run.json instead, so the page still shows
them and says the parent is missing. A fork whose fork block is not the family's point (fork
step, arm, parameters, seed, horizon, Gamma sampling, parent path) is damaged, as always;
only the parent's checkpoint hash cannot be checked then.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from interp.errors import InterpError
from interp.forks.family import ForkFamily
from interp.runs import Run
from interp.sweeps.forks import arm_label

DRAWN = ("done", "running", "interrupted", "failed")  # states whose metrics log is worth drawing


@dataclass
class FamilyData:
    """A family as its report sees it. `curves`: run, fork_step, label, seed, step, loss_cand."""

    family: ForkFamily
    table: pd.DataFrame
    parent: Run | None
    parent_problem: str
    curves: pd.DataFrame
    parent_curve: pd.DataFrame | None
    log_k: float
    labels: list[str]
    notes: list[str] = field(default_factory=list)


class _WithoutParent(ForkFamily):
    """The family read from its fork folders alone, as when the parent cannot be opened."""

    def _parent_or_none(self) -> None:
        return None


def _series(run: Run) -> pd.DataFrame:
    s = run.metric_series("loss_cand")
    return pd.DataFrame({"step": s["step"], "loss_cand": s["loss_cand"]}, dtype=float)


def read_family(family: ForkFamily, escape=None, gamma_window=None) -> FamilyData:
    """The table, parent and curves of `family`; a missing parent is a problem stated, never an error.
    The escape is judged under the family's criterion, or `escape` given; the Gamma median over its
    range, or `gamma_window` ("A:B") given (`ForkFamily.judging`: refused before anything is read)."""
    family.judging(escape, gamma_window)  # bad ones refused before anything is read
    parent, problem, notes, table = None, "", [], None
    try:
        parent = family.parent
    except InterpError as exc:
        problem = str(exc)
    if parent is not None:
        try:
            table = family.table(escape=escape, gamma_window=gamma_window)
        except InterpError as exc:
            notes.append(f"the forks were read without their parent, which could not make the table: {exc}")
    if table is None:
        table = _WithoutParent(family.path, family.design).table(escape=escape, gamma_window=gamma_window)
    table["label"] = [arm_label(a, p) for a, p in zip(table["arm"], table["arm_params"])]
    labels = [a.label for a in family.arms]
    rows, log_k = [], math.nan
    for r in table.itertuples(index=False):
        if r.status not in DRAWN:
            continue
        try:
            run = Run.open(family.path / r.run)
            part = _series(run)
        except InterpError as exc:
            notes.append(f"{r.run}: its curve could not be read ({exc})")
            continue
        log_k = run.log_k
        part = part[part["step"] >= r.fork_step]
        rows.append(part.assign(run=r.run, fork_step=r.fork_step, label=r.label, seed=r.fork_seed))
    columns = ["run", "fork_step", "label", "seed", "step", "loss_cand"]
    curves = pd.concat(rows, ignore_index=True)[columns] if rows else pd.DataFrame(columns=columns)
    parent_curve = None
    if parent is not None:
        log_k = parent.log_k
        try:
            parent_curve = _series(parent)
        except InterpError as exc:
            notes.append(f"the parent's curve could not be read ({exc})")
    return FamilyData(family=family, table=table, parent=parent, parent_problem=problem, curves=curves,
                      parent_curve=parent_curve, log_k=log_k, labels=labels, notes=notes)
