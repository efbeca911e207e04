"""Logit lens at the decision position: which layer resolves z, and when.

The residual stream at the decision position after the embeddings ("embed", layer -1) and
after every block ("L0", "L1", ...) is read out as the model reads out its last one:
logits_l = unembed(ln_final(resid_l)), with the model's own `ln_final` and `unembed` modules
(a LayerNorm computes its scale from its input, so it applies to any layer's residual). At the
last layer the lens is the model's own decision-position logits.

Per site, over a probe of whole groups (docs/diagnostics.md, "Logit lens"):

- loss_first: cross-entropy of a1 over the full vocabulary (the first-token loss L1);
- loss_cand: the first-token candidate loss: a softmax restricted to the first tokens of the
  K candidates of the example's group, -log p of the correct one (`interp.metrics`'s
  `loss_cand_first`); log K when the readout ignores z, 0 when it resolves it;
- acc_cand: the restricted argmax is the correct candidate;
- loss_cand_over_log_k = loss_cand / log K.

Directions whose output is not A (a_to_b, az_to_b) have no candidates: loss_cand, acc_cand and
their ratio are NaN there, as in the training metrics.
"""

from __future__ import annotations

import math
import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.analysis.common import across_of, group_examples, probe_groups
from interp.analysis.representations import decision_residuals, site_names
from interp.analysis.registry import Analysis, N_GROUPS
from interp.errors import InterpError
from interp.metrics import candidate_nll, first_token_nll
from interp.runs import Run

DEFAULT_GROUPS = 64
DEFAULTS = {"n_groups": DEFAULT_GROUPS}
# TransformerLens normalisations whose ln_final is its own function of the residual it gets:
# LN / RMS (with their weights) and LNPre / RMSPre (after fold_ln, whose weights sit in W_U,
# so ln_final then unembed is still the model's readout); None applies no final norm.
NORMALIZATIONS = ("LN", "LNPre", "RMS", "RMSPre", None)


@torch.no_grad()
def readout(model: nn.Module, resid: Float[Tensor, "*batch d_model"]) -> Float[Tensor, "*batch vocab"]:
    """The model's own final readout (ln_final, unembed, logit soft cap) applied to `resid`."""
    from transformer_lens.utilities import apply_softcap

    norm = model.cfg.normalization_type
    if norm not in NORMALIZATIONS:
        raise InterpError(f"the logit lens reads out through the model's ln_final; normalization_type {norm!r} is "
                          f"not supported (allowed: {', '.join(map(str, NORMALIZATIONS))})")
    shape = resid.shape
    x = resid.reshape(-1, 1, shape[-1])  # TransformerLens modules take [batch, pos, d_model]
    if norm is not None:
        x = model.ln_final(x)
    logits = apply_softcap(model.unembed(x), getattr(model.cfg, "output_logits_soft_cap", None))
    return logits.reshape(*shape[:-1], logits.shape[-1])


def lens_metrics(
    logits: Float[Tensor, "site n vocab"],
    target_first: Int[Tensor, " n"],
    cand_first: Int[Tensor, "n k"] | None,
    correct: Int[Tensor, " n"],
) -> dict[str, Float[Tensor, " site"]]:
    """Per-site means of the lens metrics (float64) from the read-out logits."""
    logits = logits.double()
    s, n, _ = logits.shape
    loss_first = first_token_nll(logits.reshape(s * n, -1), target_first.repeat(s)).view(s, n).mean(1)
    if cand_first is None:
        nan = torch.full((s,), math.nan, dtype=torch.float64)
        return {"loss_first": loss_first, "loss_cand": nan, "acc_cand": nan}
    scores = logits.gather(-1, cand_first.unsqueeze(0).expand(s, n, -1))  # [site, n, k]
    loss_cand = candidate_nll(scores.reshape(s * n, -1), correct.repeat(s)).view(s, n).mean(1)
    acc_cand = (scores.argmax(-1) == correct).double().mean(1)
    return {"loss_first": loss_first, "loss_cand": loss_cand, "acc_cand": acc_cand}


def at_step(run: Run, step: int, *, model: nn.Module | None = None, n_groups: int | None = DEFAULT_GROUPS,
            device: str = "cpu") -> pd.DataFrame:
    """The logit lens at the decision position at `step`, after the embeddings and after every
    layer, over a seeded probe of `n_groups` whole groups (all groups when None).

    Returns one row per site: step, layer (-1 for the embeddings, else the block index), site
    ("embed", "L0", "L1", ...), loss_first (full-vocabulary cross-entropy of a1, nats),
    loss_cand (first-token candidate loss, nats), loss_cand_over_log_k (loss_cand / log K,
    1 = the plateau), acc_cand (candidate accuracy of the restricted argmax, 0..1), n_examples
    (G * K). The last layer's row is the model's own first-token and first-token candidate loss.
    """
    task = run.task
    groups = probe_groups(task, n_groups, run.spec.seed)
    if model is None:
        model = run.model(step, device=device)
    idx = group_examples(task, groups)
    resid = decision_residuals(model, task, groups)
    logits = readout(model, resid.to(next(model.parameters()).device)).cpu()
    cand_first = task.candidates(idx)[:, :, 0] if task.has_candidates else None
    metrics = lens_metrics(logits, task.tokens[idx, task.layout.decision_pos + 1], cand_first,
                           task.selector_id[idx])
    sites = site_names(model.cfg.n_layers)
    df = pd.DataFrame({"step": step, "layer": range(-1, len(sites) - 1), "site": sites})
    df["loss_first"] = metrics["loss_first"].numpy()
    df["loss_cand"] = metrics["loss_cand"].numpy()
    df["loss_cand_over_log_k"] = df["loss_cand"] / task.log_k
    df["acc_cand"] = metrics["acc_cand"].numpy()
    df["n_examples"] = len(idx)
    return df


across = across_of("lens")
ENTRY = Analysis(
    "lens", __name__,
    "logit lens at the decision position: first-token and candidate loss read out after each layer",
    options=(N_GROUPS,), order=120, groups=(("diagnostics", 4),),
)
