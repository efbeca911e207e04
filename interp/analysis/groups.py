"""Per-group accuracy across checkpoints: is the snap collective or group by group?

- `at_step` / `across`: per-group candidate accuracy (candidate accuracy averaged over the
  group's K examples; docs/definitions.md) at one or every requested step;
- `snap_steps`: the first step each group reaches `threshold` (0.8) accuracy;
- `share_above`: the share of groups at or above the threshold at fractions of tau (each
  fraction snapped to the nearest analysed step). The paper: 0 of 200 at tau/2;
- `spread`: how tightly the group snap steps cluster, relative to tau.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from interp.analysis.common import TAU_FRACTIONS, across_of, group_examples, no_grad, probe_groups
from interp.analysis.findings import Rows
from interp.analysis.registry import Analysis, N_GROUPS
from interp.runs import Run
from interp.task import Task

# torch is imported where the code computes, so that reading cached results (a report's findings) never loads it;
# where torch is already loaded (the tests), its names are bound here for jaxtyping's runtime checks of the annotations
if TYPE_CHECKING or "torch" in sys.modules:
    import torch
    from torch import nn

DEFAULT_GROUPS = 200
THRESHOLD = 0.8
FRACTIONS = TAU_FRACTIONS


@no_grad
def group_accuracy(model: nn.Module, task: Task, groups: torch.Tensor) -> pd.DataFrame:
    """Candidate accuracy and loss of each group, over all its K examples."""
    from interp.metrics import evaluate_examples

    idx = group_examples(task, groups)
    per = evaluate_examples(model, task, idx)
    k = task.k
    return pd.DataFrame({
        "group_id": groups.numpy(),
        "acc_cand": per["acc_cand"].view(-1, k).mean(-1).numpy(),
        "loss_cand": per["loss_cand"].view(-1, k).mean(-1).double().numpy(),
    })


DEFAULTS = {"n_groups": DEFAULT_GROUPS}


def at_step(run: Run, step: int, *, model: nn.Module | None = None, n_groups: int | None = DEFAULT_GROUPS,
            device: str = "cpu") -> pd.DataFrame:
    """Per-group candidate accuracy at `step` for a seeded probe of `n_groups` groups.

    Returns one row per group: step, group_id, acc_cand (the share of the group's K examples
    whose correct candidate scores highest, 0..1), loss_cand (the group's mean candidate loss,
    nats).
    """
    task = run.task
    groups = probe_groups(task, n_groups, run.spec.seed)
    if model is None:
        model = run.model(step, device=device)
    df = group_accuracy(model, task, groups)
    df.insert(0, "step", step)
    return df


across = across_of("groups")
ENTRY = Analysis(
    "groups", __name__, "per-group candidate accuracy at fractions of tau and through the transition window",
    steps="transition", options=(N_GROUPS,), order=30, groups=(("circuits", 4),),
)


def snap_steps(acc: pd.DataFrame, threshold: float = THRESHOLD) -> pd.DataFrame:
    """First analysed step at which each group's accuracy is >= threshold (NaN: never)."""
    reached = acc[acc["acc_cand"] >= threshold]
    first = reached.groupby("group_id")["step"].min()
    groups = pd.Index(sorted(acc["group_id"].unique()), name="group_id")
    return first.reindex(groups).rename("snap_step").reset_index()


def share_above(
    acc: pd.DataFrame,
    tau: int | float,
    fractions: Sequence[float] = FRACTIONS,
    threshold: float = THRESHOLD,
) -> pd.DataFrame:
    """Share of groups with accuracy >= threshold at each fraction of tau (nearest analysed step).

    A fraction whose step lies beyond the last analysed step has `beyond` True and no step
    (it is never snapped back onto the last checkpoint, which would show one checkpoint as two);
    one whose nearest analysed step lies more than STEP_SLACK tau from it has `far` True (its
    step is given: the share there is not the share at that fraction).
    """
    from interp.transition import STEP_SLACK

    steps = np.array(sorted(acc["step"].unique()))
    rows = []
    for f in fractions:
        target = f * tau
        if target > steps[-1]:
            rows.append({"fraction": f, "target_step": target, "step": pd.NA, "n_above": pd.NA,
                         "n_groups": pd.NA, "share": float("nan"), "beyond": True, "far": False})
            continue
        step = int(steps[np.argmin(np.abs(steps - target) + 1e-9 * steps)])
        at = acc[acc["step"] == step]
        rows.append({"fraction": f, "target_step": target, "step": step,
                     "n_above": int((at["acc_cand"] >= threshold).sum()), "n_groups": len(at),
                     "share": float((at["acc_cand"] >= threshold).mean()), "beyond": False,
                     "far": bool(abs(step - target) > STEP_SLACK * tau)})
    df = pd.DataFrame(rows)
    for column in ("step", "n_above", "n_groups"):
        df[column] = df[column].astype("Int64")
    return df


def spread(snaps: pd.DataFrame, tau: int | float) -> dict:
    """Summary of group snap steps: quantiles and spreads in units of tau."""
    s = snaps["snap_step"].dropna().to_numpy(dtype=float)
    out = {"n_groups": len(snaps), "n_snapped": len(s), "tau": tau}
    if len(s):
        q10, q25, q50, q75, q90 = np.quantile(s, [0.1, 0.25, 0.5, 0.75, 0.9])
        out.update({"median": q50, "median_over_tau": q50 / tau, "iqr_over_tau": (q75 - q25) / tau,
                    "p10_p90_over_tau": (q90 - q10) / tau, "std_over_tau": float(s.std() / tau)})
    return out


# ---------------------------------------------------------------------------- findings and summary rows
def findings(run: Run, tables: dict, t: int | None, found: dict) -> dict:
    acc = tables["groups"]
    if not t:
        return {}
    out: dict = {}
    share = share_above(acc, t, fractions=(0.5,))
    # tau/2 past the analysed steps, or no analysed step near it (transition_steps named it): no share
    if not share.empty and not bool(share["beyond"].iloc[0]) and not bool(share["far"].iloc[0]):
        out["groups_share_above_80_at_half_tau"] = float(share["share"].iloc[0])
        out["groups_half_tau_step"] = int(share["step"].iloc[0])
        out["groups_n"] = int(share["n_groups"].iloc[0])
    out["groups_spread"] = spread(snap_steps(acc), t)
    return out


def rows(f: dict, tables: dict) -> Rows:
    if "groups_share_above_80_at_half_tau" not in f:
        return []
    n = f["groups_n"]
    share = f["groups_share_above_80_at_half_tau"]
    snaps = f.get("groups_spread") or {}
    extra = (f"; group snap steps: median {snaps['median']:.0f}, IQR {snaps['iqr_over_tau']:.2f} τ"
             if "iqr_over_tau" in snaps else "")
    return [("collective snap", f"{round(share * n)} of {n} groups ({100 * share:.1f}%) ≥ 80% accurate at τ/2 "
                                f"(step {f['groups_half_tau_step']}){extra}")]
