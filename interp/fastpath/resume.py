"""Resume a forward from a layer, recomputing only what a patch can reach.

Two facts make interventions cheap:
- with causal attention, changing the residual stream at position p leaves every earlier
  position unchanged, so their keys and values can be taken from a cached base run;
- a change at layer L leaves every layer below L unchanged, and at the last layer only the
  output position (the decision position) is needed.

`BaseCache` holds a base run's residual stream, keys, values and head outputs (z) on inputs
truncated at the output position (recorded by the block itself; by TransformerLens's own
`run_with_cache` when a hook is attached).
`resume_from_resid` and `resume_from_z` take a modified residual stream (or head outputs) for
positions p_from..T-1 at one layer and return the logits at the last position, reusing the
cache for everything else; `resume_from_z_at` changes head outputs at one position only.
Tests check them against TransformerLens's forward (`start_at_layer`) and `transformer_lens.patching`.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.fastpath.block import after_attention, attention, embed, unembed
from interp.fastpath.support import check_supported, has_active_hooks


@dataclass
class BaseCache:
    """Per-layer activations of a base run on tokens [N, T] (T = output position + 1)."""

    resid_pre: list[Tensor]  # [N, T, d_model]
    k: list[Tensor]  # [N, T, H, d_head]
    v: list[Tensor]
    z: list[Tensor]
    logits: Tensor | None  # [N, vocab] at the last position


def _act_name(kind: str, layer: int) -> str:
    from transformer_lens.utilities import get_act_name

    return get_act_name(kind, layer)


def base_cache(model: nn.Module, tokens: Int[Tensor, "n seq"]) -> BaseCache:
    """Run `tokens` once, keeping what a resumed forward reads: by the fast path's block (the
    same computation as TransformerLens's forward) when no hook is attached, else through
    TransformerLens's `run_with_cache`, so that attached hooks act as they would there."""
    check_supported(model)
    if not has_active_hooks(model):
        return _recorded(model, tokens)
    n_layers = model.cfg.n_layers
    wanted = {_act_name(kind, layer) for layer in range(n_layers) for kind in ("resid_pre", "k", "v", "z")}
    logits, cache = model.run_with_cache(tokens, names_filter=lambda name: name in wanted)
    get = lambda kind: [cache[_act_name(kind, layer)] for layer in range(n_layers)]  # noqa: E731
    return BaseCache(get("resid_pre"), get("k"), get("v"), get("z"), logits[:, -1])


def _recorded(model: nn.Module, tokens: Int[Tensor, "n seq"]) -> BaseCache:
    """The base run by the fast path's block: residual stream, keys, values and z per layer."""
    resid = embed(model, tokens).unsqueeze(1)  # [n, 1, T, d_model]: one sequence per past
    cache = BaseCache([], [], [], [], None)
    for block in model.blocks:
        z, k, v = attention(block, resid)
        cache.resid_pre.append(resid[:, 0])
        cache.k.append(k[:, 0])
        cache.v.append(v[:, 0])
        cache.z.append(z[:, 0])
        resid = after_attention(block, resid, z)
    cache.logits = unembed(model, resid[:, 0, -1])
    return cache


def resume_from_resid(
    model: nn.Module,
    cache: BaseCache,
    layer: int,
    resid: Float[Tensor, "b p d_model"],
    p_from: int,
    rows: Int[Tensor, " b"],
) -> Float[Tensor, "b vocab"]:
    """Logits at the last position when the residual stream entering `layer` is `resid`
    at positions p_from..T-1 (row i continues base example rows[i]). Keys and values of
    positions before p_from come from `cache`."""
    n_layers = model.cfg.n_layers
    stream = resid.unsqueeze(1)  # one sequence per past: k = 1
    for l in range(layer, n_layers):
        block = model.blocks[l]
        past = (cache.k[l][rows, :p_from], cache.v[l][rows, :p_from]) if p_from else (None, None)
        last = l == n_layers - 1  # only the last position matters from here on
        z, _, _ = attention(block, stream, *past, last_only=last)
        stream = after_attention(block, stream[:, :, -1:] if last else stream, z)
    return unembed(model, stream[:, 0, -1])


def resume_from_z(
    model: nn.Module,
    cache: BaseCache,
    layer: int,
    z: Float[Tensor, "b p head d_head"],
    p_from: int,
    rows: Int[Tensor, " b"],
) -> Float[Tensor, "b vocab"]:
    """Logits at the last position when layer `layer`'s head outputs (hook_z) are `z` at
    positions p_from..T-1 (earlier positions unchanged)."""
    block = model.blocks[layer]
    resid_in = cache.resid_pre[layer][rows, p_from:]
    if layer == model.cfg.n_layers - 1:
        return unembed(model, after_attention(block, resid_in[:, -1], z[:, -1]))
    resid = after_attention(block, resid_in, z)
    return resume_from_resid(model, cache, layer + 1, resid, p_from, rows)


def resume_from_z_at(
    model: nn.Module,
    cache: BaseCache,
    layer: int,
    z: Float[Tensor, "b head d_head"],
    pos: int,
    rows: Int[Tensor, " b"],
) -> Float[Tensor, "b vocab"]:
    """Logits at the last position when layer `layer`'s head outputs at the single position
    `pos` are `z`. Only that position's residual stream changes in this layer, so the
    block is computed there alone and the next layer starts from the cached stream."""
    block = model.blocks[layer]
    last = cache.resid_pre[layer].shape[1] - 1
    resid_p = after_attention(block, cache.resid_pre[layer][rows, pos], z)
    if layer == model.cfg.n_layers - 1:
        if pos != last:
            raise ValueError("at the last layer only the last position reaches the output")
        return unembed(model, resid_p)
    resid = cache.resid_pre[layer + 1][rows, pos:].clone()
    resid[:, 0] = resid_p
    return resume_from_resid(model, cache, layer + 1, resid, pos, rows)
