"""Concept erasure: how much of the model's use of z flows through linearly decodable information.

At each site of the probes (the residual stream at the decision position after the embeddings and after every
block), LEACE (Belrose et al. 2023, the `concept-erasure` package) is fitted on the examples of the probe's training
bases to remove every linearly available trace of the selector (its one-hot labels) from that site; the erased
stream of the held-out bases' examples is then patched in at that site, the rest of the forward recomputed, and the
first-token candidate loss read at the decision position (the softmax over the K candidates' first characters,
`interp.metrics`'s loss_cand_first), against the clean forward's (docs/analyses.md, "Erasure"; SPEC 12):

- loss_clean, loss_erased (nats) and their difference delta;
- used_share = delta / (log K - loss_clean): the share of the model's use of z, at that site, that went through
  linearly decodable information (1: erasing it puts the loss back at log K; 0: the model reads z some other way).
  Undefined (NaN) where the clean loss is within USED_MARGIN of log K: on the plateau z is not used at all.

The probe's split of bases and its examples are the probes analysis's (`interp.analysis.probes`), so the two read
the same activations.
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING

import pandas as pd
from jaxtyping import Float, Int

from interp.analysis.common import across_of, group_examples, no_grad, probe_groups
from interp.analysis.findings import Rows
from interp.analysis.probes import base_split
from interp.analysis.registry import Analysis, N_GROUPS
from interp.errors import InterpError
from interp.runs import Run

# torch is imported where the code computes, so that reading cached results (a report's findings) never loads it;
# where torch is already loaded (the tests), its names are bound here for jaxtyping's runtime checks of the annotations
if TYPE_CHECKING or "torch" in sys.modules:
    from torch import Tensor, nn

DEFAULTS = {"n_groups": 64}
USED_MARGIN = 0.05  # nats below log K the clean loss must be for a share of its use of z to be defined
COLUMNS = ("step", "layer", "site", "loss_clean", "loss_erased", "delta", "used_share", "n_test")


def eraser(x: Float[Tensor, "n d"], labels: Int[Tensor, " n"], k: int):
    """A LEACE eraser of the selector (one-hot of `labels`) fitted on `x` (float64)."""
    import torch
    from concept_erasure import LeaceEraser

    z = torch.nn.functional.one_hot(labels, k).double()
    return LeaceEraser.fit(x.double(), z)


def candidate_first_loss(logits: Float[Tensor, "n vocab"], cand_first: Int[Tensor, "n k"],
                         correct: Int[Tensor, " n"]) -> Float[Tensor, " n"]:
    """The first-token candidate loss of each example from its decision-position logits."""
    from interp.metrics import candidate_nll

    return candidate_nll(logits.double().gather(1, cand_first), correct)


@no_grad
def patched_losses(model: nn.Module, task, idx: Int[Tensor, " n"], site: int, values: Float[Tensor, "n d"]
                   ) -> Float[Tensor, " n"]:
    """The first-token candidate loss of the examples `idx` with the residual stream at the decision position of
    site `site` (0: the embeddings, l + 1: after block l) replaced by `values`."""
    from interp.analysis.representations import resid_hooks

    dec = task.layout.decision_pos
    device = next(model.parameters()).device
    hook = resid_hooks(model.cfg.n_layers)[site]

    def replace(act, hook=None):
        act = act.clone()
        act[:, dec] = values.to(act.device, act.dtype)
        return act

    tokens = task.tokens[idx, : dec + 1].to(device)
    logits = model.run_with_hooks(tokens, fwd_hooks=[(hook, replace)])[:, dec].cpu()
    return candidate_first_loss(logits, task.candidates(idx)[:, :, 0], task.selector_id[idx])


@no_grad
def at_step(run: Run, step: int, *, model: nn.Module | None = None, n_groups: int | None = DEFAULTS["n_groups"],
            device: str = "cpu") -> pd.DataFrame:
    """LEACE at every site at `step` (module docstring): one row per site (COLUMNS)."""
    from interp.analysis.representations import decision_residuals, site_names

    task = run.task
    if not (task.has_candidates and task.has_selector):
        raise InterpError(f"erasing z and reading the candidate loss needs a direction whose output is A and a "
                          f"selector; {task.spec.direction!r} has not")
    groups = probe_groups(task, n_groups, run.spec.seed)
    if model is None:
        model = run.model(step, device=device)
    idx = group_examples(task, groups)
    resid = decision_residuals(model, task, groups).cpu()
    test = base_split(len(groups), run.spec.seed).repeat_interleave(task.k)
    labels = task.selector_id[idx]
    dec = task.layout.decision_pos
    tokens = task.tokens[idx[test], : dec + 1].to(next(model.parameters()).device)
    clean = candidate_first_loss(model(tokens)[:, dec].cpu(), task.candidates(idx[test])[:, :, 0], labels[test])
    rows = []
    for site, name in enumerate(site_names(model.cfg.n_layers)):
        x = resid[site].double()
        if float(x[~test].std(0).max()) < 1e-9:  # a constant site (the embeddings at the decision position)
            erased = clean
        else:
            erase = eraser(x[~test], labels[~test], task.k)
            erased = patched_losses(model, task, idx[test], site, erase(x[test]).to(resid.dtype))
        lc, le = float(clean.mean()), float(erased.mean())
        room = task.log_k - lc
        rows.append({"step": step, "layer": site - 1, "site": name, "loss_clean": lc, "loss_erased": le,
                     "delta": le - lc, "used_share": (le - lc) / room if room > USED_MARGIN else math.nan,
                     "n_test": int(test.sum())})
    return pd.DataFrame(rows, columns=list(COLUMNS))


across = across_of("erasure")
ENTRY = Analysis(
    "erasure", __name__,
    "LEACE erasure of z at each residual site: the share of the model's use of z that is linearly decodable",
    options=(N_GROUPS,), order=27, groups=(("decoding", 2),),
)


def findings(run: Run, tables: dict, t: int | None, found: dict) -> dict:
    table = tables.get("erasure")
    if table is None or table.empty:
        return {}
    last = table[table["step"] == table["step"].max()]
    return {"erasure_step": int(last["step"].iloc[0]),
            "erasure_used_share": {str(r.site): (None if pd.isna(r.used_share) else float(r.used_share))
                                   for r in last.itertuples()}}


def rows(found: dict, tables: dict) -> Rows:
    if "erasure_used_share" not in found:
        return []
    shares = ", ".join(f"{site} {'-' if v is None else f'{v:.2f}'}" for site, v in found["erasure_used_share"].items())
    return [("erasure", f"at step {found['erasure_step']}, the share of the model's use of z that LEACE removes at "
                        f"each site: {shares}")]
