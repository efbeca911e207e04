"""Forward passes over prefixes that share K continuations, and resumed from any layer.

The candidate metrics score the K candidates of a group after one input prefix: every
candidate sequence shares positions 0..P-1 and differs after them. `run_tree` runs each
prefix once and its K continuations against the prefix's keys and values, and can record
every layer's residual stream and head outputs (hook_z). `resume_tree` takes such a record
and recomputes from one layer on with some heads' outputs replaced: ablating a head at
layer L leaves everything below L untouched, and at layer L itself only the heads' outputs
change, so the attention of that layer is never recomputed.

The computation is TransformerLens's own for the interp model family (learned absolute
positions, pre-LayerNorm, causal attention; `interp.incremental.check_supported`); tests
compare it with TransformerLens's forward and with hooks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.incremental import check_supported, mlp


@dataclass
class Tree:
    """Per-layer activations of a forward over prefixes [n, P] and continuations [n, K, C]."""

    prefix_resid: list[Tensor]  # [n, P, d_model] entering each layer
    prefix_z: list[Tensor]  # [n, P, head, d_head]
    cont_resid: list[Tensor]  # [n, K, C, d_model]
    cont_z: list[Tensor]  # [n, K, C, head, d_head]
    first_logits: Tensor | None  # [n, vocab] at the last prefix position (None: stopped early)
    cont_logits: Tensor | None  # [n, K, C, vocab]


def _layer_norm(ln: nn.Module, x: Tensor) -> Tensor:
    """TransformerLens's LayerNorm (or LNPre) as one fused op: the same function, one pass."""
    return F.layer_norm(x, x.shape[-1:], getattr(ln, "w", None), getattr(ln, "b", None), ln.eps)


def _project(block: nn.Module, x: Tensor, kind: str) -> Tensor:
    """x @ W_{Q,K,V} + b for every head at once: [..., d_model] -> [..., head, d_head]."""
    attn = block.attn
    weight, bias = getattr(attn, f"W_{kind}"), getattr(attn, f"b_{kind}")
    h, d, e = weight.shape
    flat = torch.addmm(bias.reshape(-1), x.reshape(-1, d), weight.permute(1, 0, 2).reshape(d, h * e))
    return flat.view(*x.shape[:-1], h, e)


def _attend_prefix(
    block: nn.Module, x: Float[Tensor, "b p d_model"]
) -> tuple[Float[Tensor, "b p head d_head"], Float[Tensor, "b p head d_head"], Float[Tensor, "b p head d_head"]]:
    """Causal self-attention over the prefix: head outputs z, and the keys and values."""
    q, k, v = (_project(block, x, kind) for kind in "QKV")
    scores = torch.einsum("bqhe,bthe->bhqt", q, k) / block.attn.attn_scale
    p = x.shape[1]
    future = torch.ones(p, p, dtype=torch.bool, device=x.device).triu(1)
    pattern = scores.masked_fill(future, float("-inf")).softmax(-1)
    return torch.einsum("bhqt,bthe->bqhe", pattern, v), k, v


def _attend_continuations(
    block: nn.Module,
    x: Float[Tensor, "b k c d_model"],
    prefix_k: Float[Tensor, "b p head d_head"],
    prefix_v: Float[Tensor, "b p head d_head"],
) -> Float[Tensor, "b k c head d_head"]:
    """Each continuation position attends to its prefix and to the continuation up to itself;
    the prefix's keys and values are shared by the K continuations (never copied K times)."""
    q, k, v = (_project(block, x, kind) for kind in "QKV")
    scale = block.attn.attn_scale
    to_prefix = torch.einsum("bkche,bphe->bkhcp", q, prefix_k) / scale
    to_self = torch.einsum("bkche,bkshe->bkhcs", q, k) / scale
    c = x.shape[2]
    future = torch.ones(c, c, dtype=torch.bool, device=x.device).triu(1)
    to_self = to_self.masked_fill(future, float("-inf"))
    pattern = torch.cat([to_prefix, to_self], dim=-1).softmax(-1)
    p = prefix_k.shape[1]
    return (torch.einsum("bkhcp,bphe->bkche", pattern[..., :p], prefix_v)
            + torch.einsum("bkhcs,bkshe->bkche", pattern[..., p:], v))


def _after_attention(block: nn.Module, resid: Tensor, z: Tensor) -> Tensor:
    """Add the heads' output (z @ W_O + b_O) and the MLP: the rest of the block."""
    attn = block.attn
    h, e, d = attn.W_O.shape
    out = torch.addmm(attn.b_O, z.reshape(-1, h * e), attn.W_O.reshape(h * e, d))
    mid = resid + out.view(resid.shape)
    return mid + mlp(block, _layer_norm(block.ln2, mid))


def _unembed(model: nn.Module, resid: Tensor) -> Tensor:
    return model.unembed(_layer_norm(model.ln_final, resid))


def _forward_from(
    model: nn.Module,
    layer: int,
    prefix: Float[Tensor, "b p d_model"],
    cont: Float[Tensor, "b k c d_model"],
    record: dict[str, list[Tensor]] | None = None,
    upto: int | None = None,
) -> tuple[Float[Tensor, "b vocab"], Float[Tensor, "b k c vocab"]] | None:
    """Layers `layer`.. from residual streams entering `layer`; logits at the last prefix
    position and at every continuation position. `record` collects each layer's inputs."""
    for l in range(layer, model.cfg.n_layers):
        block = model.blocks[l]
        z_p, k, v = _attend_prefix(block, _layer_norm(block.ln1, prefix))
        z_c = _attend_continuations(block, _layer_norm(block.ln1, cont), k, v)
        if record is not None:
            for key, value in (("prefix_resid", prefix), ("prefix_z", z_p), ("cont_resid", cont), ("cont_z", z_c)):
                record[key].append(value)
        if upto is not None and l == upto:
            return None
        last = l == model.cfg.n_layers - 1
        # after the last attention only the last prefix position is read
        prefix = _after_attention(block, prefix[:, -1:] if last else prefix, z_p[:, -1:] if last else z_p)
        cont = _after_attention(block, cont, z_c)
    return _unembed(model, prefix[:, -1]), _unembed(model, cont)


@torch.no_grad()
def run_tree(
    model: nn.Module,
    prefix: Int[Tensor, "n p"],
    continuations: Int[Tensor, "n k c"],
    record: bool = False,
    upto: int | None = None,
) -> Tree:
    """Logits of K continuations of each prefix (the continuation tokens are inputs at
    positions P..P+C-1), running each shared prefix once. With `record`, also every
    layer's residual stream and head outputs (what `resume_tree` needs); with `upto`, only
    the layers up to that one are run and recorded (no logits)."""
    check_supported(model)
    p, c = prefix.shape[1], continuations.shape[2]
    resid_p = model.W_E[prefix] + model.W_pos[:p]
    resid_c = model.W_E[continuations] + model.W_pos[p : p + c]
    acts: dict[str, list[Tensor]] = {"prefix_resid": [], "prefix_z": [], "cont_resid": [], "cont_z": []}
    out = _forward_from(model, 0, resid_p, resid_c, acts if record else None, upto)
    first, cont = out if out is not None else (None, None)
    return Tree(**acts, first_logits=first, cont_logits=cont)


@torch.no_grad()
def resume_tree(
    model: nn.Module,
    tree: Tree,
    layer: int,
    prefix_z: Float[Tensor, "b p head d_head"],
    cont_z: Float[Tensor, "b k c head d_head"],
    rows: Int[Tensor, " b"],
) -> tuple[Float[Tensor, "b vocab"], Float[Tensor, "b k c vocab"]]:
    """Logits when layer `layer`'s head outputs are `prefix_z` and `cont_z` (row i of the
    batch continues recorded example rows[i]); the layers below come from the record."""
    block = model.blocks[layer]
    resid_p = tree.prefix_resid[layer][rows]
    resid_c = tree.cont_resid[layer][rows]
    if layer == model.cfg.n_layers - 1:
        resid_p = _after_attention(block, resid_p[:, -1:], prefix_z[:, -1:])
        return _unembed(model, resid_p[:, -1]), _unembed(model, _after_attention(block, resid_c, cont_z))
    resid_p = _after_attention(block, resid_p, prefix_z)
    resid_c = _after_attention(block, resid_c, cont_z)
    return _forward_from(model, layer + 1, resid_p, resid_c)
