"""The unembedding's geometry over each base's candidates (weights only: no forward pass).

The K candidates of a base are told apart at the decision position by their first characters' unembedding
columns u_i = W_U[:, c_i]. Where those columns are alike (isotropic over the candidates), a readout cannot separate
them however the residual stream moves; as the model learns to use z they must spread. Per checkpoint, over every
base of the task (docs/analyses.md, "Unembedding geometry"; SPEC 12, the author's Exp7):

- cos_to_centroid: the mean over a base's candidates of cos(u_i, their centroid), averaged over bases (1: all alike);
- within_cos: the mean pairwise cosine of a base's candidate columns, averaged over bases;
- centroid_to_mean_cos: cos(the base's centroid, the mean of every character's column), averaged over bases;
- effective_rank: of W_U (d_model x vocabulary): exp of the entropy of its normalised singular values;
- selector_alignment: cos(u_i, e_i) - mean over j != i of cos(u_i, e_j), e_i the mean embedding W_E of
  selector i's tokens (the base's own selector set), averaged over bases and candidates: how much each candidate's
  readout direction points at its own selector's embedding rather than the others'.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import pandas as pd
from jaxtyping import Float, Int

from interp.analysis.common import across_of
from interp.analysis.findings import Rows
from interp.analysis.registry import Analysis
from interp.errors import InterpError
from interp.runs import Run
from interp.spec import FIRST_CHAR_ID

# torch is imported where the code computes, so that reading cached results (a report's findings) never loads it;
# where torch is already loaded (the tests), its names are bound here for jaxtyping's runtime checks of the annotations
if TYPE_CHECKING or "torch" in sys.modules:
    from torch import Tensor, nn

DEFAULTS: dict = {}
COLUMNS = ("step", "cos_to_centroid", "within_cos", "centroid_to_mean_cos", "effective_rank", "selector_alignment",
           "n_bases")


def _unit(x: Tensor) -> Tensor:
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-30)


def geometry(w_u: Float[Tensor, "d vocab"], w_e: Float[Tensor, "vocab d"], firsts: Int[Tensor, "bases k"],
             selectors: Int[Tensor, "bases k len_z"]) -> dict[str, float]:
    """The measures of the module docstring from the weights, the candidates' first tokens per base and each
    base's selector tokens (token ids), in float64."""
    import torch

    from interp.analysis.spectra import effective_rank

    w_u, w_e = w_u.double(), w_e.double()
    k = firsts.shape[1]
    if k < 2:
        raise InterpError("the unembedding's geometry over candidates needs K >= 2")
    u = w_u[:, firsts].permute(1, 2, 0)  # [bases, k, d]
    centroid = u.mean(1)  # [bases, d]
    unit_u = _unit(u)
    cos_centroid = (unit_u * _unit(centroid).unsqueeze(1)).sum(-1).mean(1)
    gram = unit_u @ unit_u.transpose(1, 2)  # [bases, k, k]
    off = ~torch.eye(k, dtype=torch.bool)
    within = gram[:, off].mean(1)
    chars = w_u[:, FIRST_CHAR_ID:].mean(1)
    to_mean = (_unit(centroid) * _unit(chars)).sum(-1)
    e = w_e[selectors].mean(2)  # [bases, k, d]
    align = unit_u @ _unit(e).transpose(1, 2)  # [bases, k (candidate), k (selector)]
    own = align.diagonal(dim1=1, dim2=2)
    others = (align.sum(2) - own) / (k - 1)
    rank = effective_rank(torch.linalg.svdvals(w_u))
    return {"cos_to_centroid": float(cos_centroid.mean()), "within_cos": float(within.mean()),
            "centroid_to_mean_cos": float(to_mean.mean()), "effective_rank": float(rank),
            "selector_alignment": float((own - others).mean()), "n_bases": int(firsts.shape[0])}


def at_step(run: Run, step: int, *, model: nn.Module | None = None, device: str = "cpu") -> pd.DataFrame:
    """The unembedding's geometry at `step` from the checkpoint's weights: one row (COLUMNS)."""
    task = run.task
    if not (task.has_candidates and task.has_selector):
        raise InterpError(f"the unembedding's geometry over candidates needs a direction whose output is A and a "
                          f"selector; {task.spec.direction!r} has not")
    if model is not None:
        w_u, w_e = model.W_U.detach().cpu(), model.W_E.detach().cpu()
    else:
        params = run.state_dict(step)
        w_u, w_e = params["unembed.W_U"], params["embed.W_E"]
    firsts = task.targets[:, :, 0]  # [bases, k]
    selectors = task.selector_sets[task.supergroup]  # [bases, k, len_z]
    return pd.DataFrame([{"step": step, **geometry(w_u, w_e, firsts, selectors)}], columns=list(COLUMNS))


across = across_of("unembed_geometry")
ENTRY = Analysis(
    "unembed_geometry", __name__,
    "the unembedding's geometry over each base's candidates (cosines, effective rank, alignment with the selectors)",
    order=29, groups=(("decoding", 4),),
)


def findings(run: Run, tables: dict, t: int | None, found: dict) -> dict:
    table = tables.get("unembed_geometry")
    if table is None or table.empty:
        return {}
    table = table.sort_values("step")
    first, last = table.iloc[0], table.iloc[-1]
    return {"unembed_within_cos": [float(first["within_cos"]), float(last["within_cos"])],
            "unembed_steps": [int(first["step"]), int(last["step"])],
            "unembed_alignment_last": float(last["selector_alignment"])}


def rows(found: dict, tables: dict) -> Rows:
    if "unembed_within_cos" not in found:
        return []
    (a, b), (s0, s1) = found["unembed_within_cos"], found["unembed_steps"]
    return [("unembedding", f"mean cosine between a base's candidates' first-character columns {a:.3f} at step {s0}, "
                            f"{b:.3f} at step {s1}; selector alignment {found['unembed_alignment_last']:+.3f}")]
