"""The training objective (`interp.metrics.batch_loss`) by the fast path's block, computing
only what the loss reads: the last layer's queries, heads' output and MLP at the scored
positions alone, and the unembedding there.

Curvature analyses differentiate this function twice per Hessian-vector product, and the LLC's
sampler once per step, so its cost is theirs. Against TransformerLens's own forward it saves
the elementwise chain of its LayerNorm (one fused `F.layer_norm`, whose double backward is one
op), the hook points, and the last layer's work at the unscored positions (two thirds of them
in the interp task).
`Objective` wraps it as a module of the model's own parameter names, for `functional_call`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.fastpath import block as B
from interp.fastpath.support import usable


def _attend_window(
    attn: nn.Module,
    q: Float[Tensor, "b q head d_head"],
    k: Float[Tensor, "b s head d_head"],
    v: Float[Tensor, "b s head d_head"],
    first: int,
) -> Float[Tensor, "b q head d_head"]:
    """Causal attention of the queries at positions first..first+q-1 over keys 0..s-1."""
    from interp.model import attn_scale  # lazy: a cached report imports the fast path, never the model

    s, nq = k.shape[1], q.shape[1]
    scores = torch.einsum("bqhe,bshe->bhqs", q, k) / attn_scale(attn)
    future = torch.arange(s, device=q.device)[None, :] > torch.arange(first, first + nq, device=q.device)[:, None]
    pattern = scores.masked_fill(future, float("-inf")).softmax(-1)
    return torch.einsum("bhqs,bshe->bqhe", pattern, v)


def scored_logits(
    model: nn.Module, tokens: Int[Tensor, "n seq"], loss_pos: tuple[int, ...]
) -> Float[Tensor, "n scored vocab"]:
    """The logits at the scored positions loss_pos[0]..loss_pos[-1], as the model computes them
    (for a model `interp.fastpath.usable` accepts), and nothing the loss does not read."""
    first, last = loss_pos[0], loss_pos[-1]
    inputs = tokens[:, : last + 1]
    resid = B.embed(model, inputs)
    n_layers = len(model.blocks)
    for layer, blk in enumerate(model.blocks):
        start = first if layer == n_layers - 1 else 0  # the last layer: scored positions only
        x = B.layer_norm(blk.ln1, resid)
        k, v = B.project(blk, x, "K"), B.project(blk, x, "V")
        q = B.project(blk, x[:, start:], "Q")
        z = _attend_window(blk.attn, q, k, v, start)
        resid = B.after_attention(blk, resid[:, start:], z)
    if n_layers == 0:
        resid = resid[:, first:]
    return B.unembed(model, resid)


def training_loss(model: nn.Module, tokens: Int[Tensor, "n seq"], loss_pos: tuple[int, ...]) -> Float[Tensor, ""]:
    """Mean cross-entropy over the output tokens, equal to `batch_loss(model, tokens, loss_pos)`
    (to float rounding) for a model `interp.fastpath.usable` accepts."""
    logits = scored_logits(model, tokens, loss_pos)
    targets = tokens[:, loss_pos[0] + 1 : loss_pos[-1] + 2]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def example_losses(model: nn.Module, tokens: Int[Tensor, "n seq"], loss_pos: tuple[int, ...]) -> Float[Tensor, " n"]:
    """Each example's mean cross-entropy over its output tokens (their mean is `training_loss`)."""
    logits = scored_logits(model, tokens, loss_pos)
    targets = tokens[:, loss_pos[0] + 1 : loss_pos[-1] + 2]
    per_token = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
    return per_token.view(len(tokens), -1).mean(-1)


class Objective(nn.Module):
    """`training_loss` as a module whose parameters are the model's, under the names
    "model.<name>" (so `functional_call(objective, {"model." + n: p}, (tokens,))` works)."""

    def __init__(self, model: nn.Module, loss_pos: tuple[int, ...]):
        super().__init__()
        self.model = model
        self.loss_pos = loss_pos

    def forward(self, tokens: Int[Tensor, "n seq"]) -> Float[Tensor, ""]:
        return training_loss(self.model, tokens, self.loss_pos)


def fast_objective(model: nn.Module) -> bool:
    """Whether `training_loss` computes `model`'s objective (the fast path's one check)."""
    return usable(model)
