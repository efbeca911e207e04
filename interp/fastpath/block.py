"""The one transformer block of the fast path, as TransformerLens computes it for the interp
model family (`support.problems` says which models that is), in as few fused ops as it takes.

A stream is a residual stream [b, k, c, d_model]: c consecutive new positions of k sequences
that share one past (the keys and values of the positions before them, [b, p, head, d_head],
never copied k times). A plain batch is k = 1; the K continuations of one prefix are k = K
with the prefix as their past; a forward resumed at position p has positions ..p-1 as past.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor, nn


def layer_norm(ln: nn.Module, x: Float[Tensor, "*batch d_model"]) -> Float[Tensor, "*batch d_model"]:
    """TransformerLens's LayerNorm (or LNPre) as one fused op: the same function, one pass."""
    return F.layer_norm(x, x.shape[-1:], getattr(ln, "w", None), getattr(ln, "b", None), ln.eps)


def mlp(block: nn.Module, x: Float[Tensor, "*batch d_model"]) -> Float[Tensor, "*batch d_model"]:
    """The block's MLP on x: TransformerLens's computation as three fused ops on a flat batch
    (its own forward, with hook points and reshapes, takes about 1.7x as long); gated and
    layer-normed MLPs go through the module itself."""
    module = block.mlp
    if type(module).__name__ != "MLP" or module.cfg.is_layer_norm_activation():
        return module(x)
    flat = x.reshape(-1, x.shape[-1])
    hidden = module.act_fn(torch.addmm(module.b_in, flat, module.W_in))
    return torch.addmm(module.b_out, hidden, module.W_out).view(*x.shape[:-1], -1)


def project(
    block: nn.Module, x: Float[Tensor, "*batch d_model"], kind: str
) -> Float[Tensor, "*batch head d_head"]:
    """x @ W_{Q,K,V} + b for every head at once."""
    attn = block.attn
    weight, bias = getattr(attn, f"W_{kind}"), getattr(attn, f"b_{kind}")
    h, d, e = weight.shape
    flat = torch.addmm(bias.reshape(-1), x.reshape(-1, d), weight.permute(1, 0, 2).reshape(d, h * e))
    return flat.view(*x.shape[:-1], h, e)


def attend(
    attn: nn.Module,
    q: Float[Tensor, "b k q head d_head"],
    k: Float[Tensor, "b k c head d_head"],
    v: Float[Tensor, "b k c head d_head"],
    past_k: Float[Tensor, "b p head d_head"] | None = None,
    past_v: Float[Tensor, "b p head d_head"] | None = None,
) -> Float[Tensor, "b k q head d_head"]:
    """Causal attention of new positions to their shared past and to the new positions up to
    themselves. The queries are every new position (q = c) or the last one alone (q = 1)."""
    from interp.model import attn_scale  # lazy: a cached report imports the fast path, never the model

    scale = attn_scale(attn)
    to_new = torch.einsum("bkqhe,bkshe->bkhqs", q, k) / scale
    c = k.shape[2]
    if q.shape[2] == c and c > 1:
        future = torch.ones(c, c, dtype=torch.bool, device=q.device).triu(1)
        to_new = to_new.masked_fill(future, float("-inf"))
    elif q.shape[2] != 1:
        raise ValueError(f"attend: {q.shape[2]} queries for {c} new positions (every one or the last)")
    if past_k is None:
        return torch.einsum("bkhqs,bkshe->bkqhe", to_new.softmax(-1), v)
    to_past = torch.einsum("bkqhe,bphe->bkhqp", q, past_k) / scale
    pattern = torch.cat([to_past, to_new], dim=-1).softmax(-1)
    p = past_k.shape[1]
    return (torch.einsum("bkhqp,bphe->bkqhe", pattern[..., :p], past_v)
            + torch.einsum("bkhqs,bkshe->bkqhe", pattern[..., p:], v))


def attention(
    block: nn.Module,
    resid: Float[Tensor, "b k c d_model"],
    past_k: Float[Tensor, "b p head d_head"] | None = None,
    past_v: Float[Tensor, "b p head d_head"] | None = None,
    last_only: bool = False,
) -> tuple[Float[Tensor, "b k q head d_head"], Float[Tensor, "b k c head d_head"], Float[Tensor, "b k c head d_head"]]:
    """The block's first half on a stream: head outputs z (hook_z; at the last position only
    when `last_only`), and the new positions' keys and values."""
    x = layer_norm(block.ln1, resid)
    k, v = project(block, x, "K"), project(block, x, "V")
    q = project(block, x[:, :, -1:] if last_only else x, "Q")
    return attend(block.attn, q, k, v, past_k, past_v), k, v


def after_attention(
    block: nn.Module, resid: Float[Tensor, "*batch d_model"], z: Float[Tensor, "*batch head d_head"]
) -> Float[Tensor, "*batch d_model"]:
    """The block's second half: add the heads' output (z @ W_O + b_O), then the MLP."""
    attn = block.attn
    h, e, d = attn.W_O.shape
    out = torch.addmm(attn.b_O, z.reshape(-1, h * e), attn.W_O.reshape(h * e, d))
    mid = resid + out.view(resid.shape)
    return mid + mlp(block, layer_norm(block.ln2, mid))


def embed(
    model: nn.Module, tokens: Int[Tensor, "*batch c"], offset: int = 0
) -> Float[Tensor, "*batch c d_model"]:
    """Token plus learned position embedding of tokens at positions offset..offset+c-1."""
    return model.W_E[tokens] + model.W_pos[offset : offset + tokens.shape[-1]]


def unembed(model: nn.Module, resid: Float[Tensor, "*batch d_model"]) -> Float[Tensor, "*batch vocab"]:
    """Final LayerNorm and TransformerLens's own unembedding."""
    return model.unembed(layer_norm(model.ln_final, resid))
