"""When the routing head's z is *used*: at every checkpoint, what resample-ablating the head
costs in candidate loss, and what patching its clean output restores of the logit difference.

Together with when z is *carried* (the onsets of the head's attention to z and z-share,
`interp.analysis.sensitivity`), this orders the events of the transition: a head can carry z
long before the rest of the model reads it. The onsets are derived in
`interp.analysis.findings` (thresholds `USED_ABLATION_NATS`, `USED_PATCH_FRACTION`).
Both measurements reuse the fast paths of `ablation` and `patching`, for one head only.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import pandas as pd

from interp.analysis import ablation, patching
from interp.analysis.common import across_of, no_grad
from interp.analysis.findings import Rows, lead, used_onsets
from interp.analysis.registry import Analysis, N_EXAMPLES, N_PAIRS, Need
from interp.errors import InterpError
from interp.formatting import fmt
from interp.names import parse_head
from interp.runs import Run

# torch is imported where the code computes, so that reading cached results (a report's findings) never loads it;
# where torch is already loaded (the tests), its names are bound here for jaxtyping's runtime checks of the annotations
if TYPE_CHECKING or "torch" in sys.modules:
    from torch import nn

DEFAULTS = {"head": "routing", "n_examples": 128, "n_pairs": 64}


@no_grad
def at_step(
    run: Run,
    step: int,
    *,
    head: str,
    model: nn.Module | None = None,
    n_examples: int = DEFAULTS["n_examples"],
    n_pairs: int = DEFAULTS["n_pairs"],
    device: str = "cpu",
) -> pd.DataFrame:
    """How much `head` (e.g. "L0H3") is used at `step`.

    Returns one row: step, head_name, layer, head, resample_delta_loss_cand and
    resample_delta_loss_first (nats the candidate / first-token loss rise when the head's
    hook_z is resampled from another selector of the group, on `n_examples` seeded examples),
    patched_ld, clean_ld, corrupt_ld (logit differences a1(A1) - a1(A2) at the decision
    position, nats, on `n_pairs` pairs) and patch_normalized ((patched - corrupt) /
    (clean - corrupt); NaN where clean ~ corrupt, as on the plateau).
    """
    where = parse_head(head) if isinstance(head, str) else None
    if where is None:
        raise InterpError(f"usage needs one head such as 'L0H3' (the suite resolves 'routing'), got {head!r}")
    layer, index = where
    if model is None:
        model = run.model(step, device=device)
    if layer >= model.cfg.n_layers or index >= model.cfg.n_heads:
        raise InterpError(f"{head} is not a head of this {model.cfg.n_layers}-layer, {model.cfg.n_heads}-head model")
    name = f"L{layer}H{index}"
    task = run.task
    idx, _ = task.sample(n_examples, run.spec.seed, "probe")
    table = ablation.resample_table(task, run.spec.seed).to(next(model.parameters()).device)
    per = ablation.effects_by_method(model, task, idx, None, [(name, layer, (index,))], ("resample",),
                                       table=table)["resample"]
    clean = {m: float(v.mean()) for m, v in per["clean"].items()}
    ablated = {m: float(v.mean()) for m, v in per[name].items()}
    heads = patching.at_step(run, step, model=model, n_pairs=n_pairs, kinds=("heads",))["patching_heads"]
    row = heads[(heads["head_name"] == name) & heads["position"].isna()].iloc[0]
    return pd.DataFrame([{
        "step": step, "head_name": name, "layer": layer, "head": index,
        "resample_delta_loss_cand": ablated["loss_cand"] - clean["loss_cand"],
        "resample_delta_loss_first": ablated["loss_first"] - clean["loss_first"],
        "patched_ld": float(row["patched_ld"]), "clean_ld": float(row["clean_ld"]),
        "corrupt_ld": float(row["corrupt_ld"]), "patch_normalized": float(row["normalized"]),
        "n_examples": len(idx), "n_pairs": int(row["n_pairs"]),
    }])


across = across_of("usage")
ENTRY = Analysis(
    "usage", __name__,
    "when the routing head's z is used: its resample-ablation cost and patching recovery, every checkpoint",
    needs=(Need("routing_head", "head"),), options=(N_EXAMPLES, N_PAIRS), order=60, groups=(("circuits", 2),),
)


# ---------------------------------------------------------------------------- findings and summary rows
def findings(run: Run, tables: dict, t: int | None, found: dict) -> dict:
    usage = tables["usage"]
    head = found.get("routing_head") or str(usage["head_name"].iloc[0])
    used = used_onsets(usage, head)
    return {"usage_head": head, "used_ablation_onset": used["ablation"], "used_ablation_lead": lead(t, used["ablation"]),
            "used_patching_onset": used["patching"], "used_patching_lead": lead(t, used["patching"])}


def rows(f: dict, tables: dict) -> Rows:
    if "usage_head" not in f:
        return []
    return [("z used", f"resample-ablating {f['usage_head']} costs > {f['used_ablation_nats']} nats from step "
                       f"{fmt(f.get('used_ablation_onset'), none='never')} (lead {fmt(f.get('used_ablation_lead'), '.2f')}); "
                       f"patching restores > {f['used_patch_fraction']:.0%} from step "
                       f"{fmt(f.get('used_patching_onset'), none='never')} (lead {fmt(f.get('used_patching_lead'), '.2f')})")]
