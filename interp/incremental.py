"""Resume a HookedTransformer forward from a layer, recomputing only what a change can reach.

Two facts make interventions cheap:
- with causal attention, changing the residual stream at position p leaves every earlier
  position unchanged, so their keys and values can be taken from a cached base run;
- a change at layer L leaves every layer below L unchanged, and at the last layer only the
  output position (the decision position) is needed.

`BaseCache` holds a base run's residual stream, keys, values and head outputs (z) on
inputs truncated at the output position. `resume_from_resid` and `resume_from_z` take a
modified residual stream (or head outputs) for positions `p_from..T-1` at one layer and
return the logits at the last position, reusing the cache for everything else. The
attention is computed here (for the standard config only: learned absolute positions,
LayerNorm, causal, no grouped or rotary attention); tests check it against
TransformerLens's own forward and `transformer_lens.patching`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn
from transformer_lens.utilities import get_act_name

from interp.errors import InterpError


def _problems(model: nn.Module) -> list[str]:
    cfg = getattr(model, "cfg", None)
    if cfg is None or not hasattr(model, "blocks"):
        return ["not a HookedTransformer"]
    problems = []
    if cfg.positional_embedding_type != "standard":
        problems.append(f"positional_embedding_type={cfg.positional_embedding_type}")
    if cfg.attn_only:
        problems.append("attn_only")
    if cfg.attention_dir != "causal":
        problems.append(f"attention_dir={cfg.attention_dir}")
    if getattr(cfg, "n_key_value_heads", None) not in (None, cfg.n_heads):
        problems.append("grouped-query attention")
    if cfg.normalization_type not in ("LN", "LNPre"):
        problems.append(f"normalization_type={cfg.normalization_type}")
    return problems


def supported(model: nn.Module) -> bool:
    return not _problems(model)


def mlp(block: nn.Module, x: Tensor) -> Tensor:
    """The block's MLP on x [..., d_model]: TransformerLens's computation as three fused ops
    on a flat batch (its own forward, with hook points and reshapes, takes about 1.7x as
    long); gated and layer-normed MLPs go through the module itself."""
    module = block.mlp
    if type(module).__name__ != "MLP" or module.cfg.is_layer_norm_activation():
        return module(x)
    flat = x.reshape(-1, x.shape[-1])
    hidden = module.act_fn(torch.addmm(module.b_in, flat, module.W_in))
    return torch.addmm(module.b_out, hidden, module.W_out).view(*x.shape[:-1], -1)


def check_supported(model: nn.Module) -> None:
    problems = _problems(model)
    if problems:
        raise InterpError(
            "fast interventions support the interp model family only (got "
            + ", ".join(problems) + "); use transformer_lens.patching instead"
        )


@dataclass
class BaseCache:
    """Per-layer activations of a base run on tokens [N, T] (T = output position + 1)."""

    resid_pre: list[Tensor]  # [N, T, d_model]
    k: list[Tensor]  # [N, T, H, d_head]
    v: list[Tensor]
    z: list[Tensor]
    logits: Tensor  # [N, vocab] at the last position


def base_cache(model: nn.Module, tokens: Int[Tensor, "n seq"]) -> BaseCache:
    """Run `tokens` once, keeping only the hooks a resumed forward reads."""
    check_supported(model)
    n_layers = model.cfg.n_layers
    wanted = {get_act_name(kind, layer) for layer in range(n_layers)
              for kind in ("resid_pre", "k", "v", "z")}
    logits, cache = model.run_with_cache(tokens, names_filter=lambda name: name in wanted)
    get = lambda kind: [cache[get_act_name(kind, layer)] for layer in range(n_layers)]  # noqa: E731
    return BaseCache(get("resid_pre"), get("k"), get("v"), get("z"), logits[:, -1])


def _attention_z(
    block: nn.Module,
    x_q: Float[Tensor, "b q d_model"],
    k: Float[Tensor, "b t h d_head"],
    v: Float[Tensor, "b t h d_head"],
    q_pos: Int[Tensor, " q"],
) -> Float[Tensor, "b q h d_head"]:
    attn = block.attn
    q = torch.einsum("bqd,hde->bqhe", x_q, attn.W_Q) + attn.b_Q
    scores = torch.einsum("bqhe,bthe->bhqt", q, k) / attn.attn_scale
    key_pos = torch.arange(k.shape[1], device=k.device)
    future = key_pos.view(1, -1) > q_pos.view(-1, 1)
    scores = scores.masked_fill(future, float("-inf"))
    pattern = scores.softmax(-1)
    return torch.einsum("bhqt,bthe->bqhe", pattern, v)


def _block_after_attention(
    block: nn.Module,
    resid_in: Float[Tensor, "b p d_model"],
    z: Float[Tensor, "b p h d_head"],
) -> Float[Tensor, "b p d_model"]:
    attn = block.attn
    resid_mid = resid_in + torch.einsum("bphe,hed->bpd", z, attn.W_O) + attn.b_O
    return resid_mid + mlp(block, block.ln2(resid_mid))


def _continue(
    model: nn.Module,
    cache: BaseCache,
    layer: int,
    resid: Float[Tensor, "b p d_model"],
    p_from: int,
    rows: Int[Tensor, " b"],
    all_positions: bool = False,
) -> Float[Tensor, "b p_out vocab"]:
    """From the residual stream entering `layer` at positions p_from.. to logits.

    Keys and values of positions before p_from come from `cache` (rows[i] is the cached
    example row i continues). Returns the logits at the last position ([b, 1, vocab]), or at
    every position from p_from when `all_positions`.
    """
    n_layers = model.cfg.n_layers
    positions = torch.arange(p_from, p_from + resid.shape[1], device=resid.device)
    for l in range(layer, n_layers):
        block = model.blocks[l]
        x = block.ln1(resid)
        attn = block.attn
        k_new = torch.einsum("bpd,hde->bphe", x, attn.W_K) + attn.b_K
        v_new = torch.einsum("bpd,hde->bphe", x, attn.W_V) + attn.b_V
        k = torch.cat([cache.k[l][rows, :p_from], k_new], dim=1)
        v = torch.cat([cache.v[l][rows, :p_from], v_new], dim=1)
        q_pos = positions
        if l == n_layers - 1 and not all_positions:  # only the last position matters from here on
            x, resid, q_pos = x[:, -1:], resid[:, -1:], positions[-1:]
        z = _attention_z(block, x, k, v, q_pos)
        resid = _block_after_attention(block, resid, z)
    if not all_positions:
        resid = resid[:, -1:]
    return model.unembed(model.ln_final(resid))


def has_active_hooks(model: nn.Module) -> bool:
    """Whether any of the model's hook points has a hook attached (then only the hooked
    TransformerLens forward is faithful, never a shortcut)."""
    return any(hp.has_hooks() for hp in getattr(model, "hook_dict", {}).values())


def resume_from_resid(
    model: nn.Module,
    cache: BaseCache,
    layer: int,
    resid: Float[Tensor, "b p d_model"],
    p_from: int,
    rows: Int[Tensor, " b"],
) -> Float[Tensor, "b vocab"]:
    """Logits at the last position when the residual stream entering `layer` is `resid`
    at positions p_from..T-1 (row i continues base example rows[i])."""
    return _continue(model, cache, layer, resid, p_from, rows)[:, 0]


def resume_from_z(
    model: nn.Module,
    cache: BaseCache,
    layer: int,
    z: Float[Tensor, "b p h d_head"],
    p_from: int,
    rows: Int[Tensor, " b"],
) -> Float[Tensor, "b vocab"]:
    """Logits at the last position when layer `layer`'s head outputs (hook_z) are `z` at
    positions p_from..T-1 (earlier positions unchanged)."""
    block = model.blocks[layer]
    resid_in = cache.resid_pre[layer][rows, p_from:]
    if layer == model.cfg.n_layers - 1:
        z, resid_in = z[:, -1:], resid_in[:, -1:]
        resid = _block_after_attention(block, resid_in, z)
        return model.unembed(model.ln_final(resid))[:, 0]
    resid = _block_after_attention(block, resid_in, z)
    return _continue(model, cache, layer + 1, resid, p_from, rows)[:, 0]


def resume_from_z_at(
    model: nn.Module,
    cache: BaseCache,
    layer: int,
    z: Float[Tensor, "b h d_head"],
    pos: int,
    rows: Int[Tensor, " b"],
) -> Float[Tensor, "b vocab"]:
    """Logits at the last position when layer `layer`'s head outputs at the single position
    `pos` are `z`. Only that position's residual stream changes in this layer, so the
    block is computed there alone and the next layer starts from the cached stream."""
    block = model.blocks[layer]
    last = cache.resid_pre[layer].shape[1] - 1
    resid_p = _block_after_attention(block, cache.resid_pre[layer][rows, pos : pos + 1], z.unsqueeze(1))
    if layer == model.cfg.n_layers - 1:
        if pos != last:
            raise ValueError("at the last layer only the last position reaches the output")
        return model.unembed(model.ln_final(resid_p))[:, 0]
    resid = cache.resid_pre[layer + 1][rows, pos:].clone()
    resid[:, 0] = resid_p[:, 0]
    return _continue(model, cache, layer + 1, resid, pos, rows)[:, 0]
