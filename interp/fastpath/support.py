"""Which models the fast path computes faithfully: the one check, used by every caller."""

from __future__ import annotations

from torch import nn

from interp.errors import InterpError

# configuration flags that change a block's computation away from the one in `block.py`
_UNSUPPORTED_FLAGS = ("parallel_attn_mlp", "use_qk_norm", "use_local_attn", "use_normalization_before_and_after",
                      "post_embedding_ln", "use_attention_sinks", "use_logn_attn", "scale_attn_by_inverse_layer_idx")


def problems(model: nn.Module) -> list[str]:
    """What keeps `model` off the fast path (empty: supported). The fast path computes the
    interp model family only: learned absolute positions, pre-LayerNorm (LN or LNPre),
    causal multi-head attention, attention and MLP in sequence, no soft caps."""
    cfg = getattr(model, "cfg", None)
    if cfg is None or not hasattr(model, "blocks"):
        return ["not a HookedTransformer"]
    out = []
    if cfg.positional_embedding_type != "standard":
        out.append(f"positional_embedding_type={cfg.positional_embedding_type}")
    if cfg.attn_only:
        out.append("attn_only")
    if cfg.attention_dir != "causal":
        out.append(f"attention_dir={cfg.attention_dir}")
    if getattr(cfg, "n_key_value_heads", None) not in (None, cfg.n_heads):
        out.append("grouped-query attention")
    if cfg.normalization_type not in ("LN", "LNPre"):
        out.append(f"normalization_type={cfg.normalization_type}")
    out += [flag for flag in _UNSUPPORTED_FLAGS if getattr(cfg, flag, False)]
    for cap in ("attn_scores_soft_cap", "output_logits_soft_cap"):
        if (getattr(cfg, cap, -1.0) or -1.0) > 0:
            out.append(cap)
    if getattr(cfg, "clip_qkv", None) is not None:
        out.append("clip_qkv")
    if getattr(cfg, "num_experts", None):
        out.append("mixture of experts")
    try:
        from transformer_lens.utilities.architectures import POST_NORM_ARCHITECTURES
    except ImportError:  # an older TransformerLens has no post-norm architectures
        POST_NORM_ARCHITECTURES = ()
    if getattr(cfg, "original_architecture", None) in POST_NORM_ARCHITECTURES:
        out.append(f"post-norm architecture {cfg.original_architecture}")
    return out


def supported(model: nn.Module) -> bool:
    return not problems(model)


def check_supported(model: nn.Module) -> None:
    found = problems(model)
    if found:
        raise InterpError(
            "fast interventions support the interp model family only (got "
            + ", ".join(found) + "); use transformer_lens.patching instead"
        )


def has_active_hooks(model: nn.Module) -> bool:
    """Whether any of the model's hook points has a hook attached (then only the hooked
    TransformerLens forward is faithful, never a shortcut)."""
    return any(hp.has_hooks() for hp in getattr(model, "hook_dict", {}).values())


def usable(model: nn.Module) -> bool:
    """Whether callers may take the fast path for `model`: supported, and no hook attached
    (metrics' shared-prefix forward and ablation's recorded resume both ask this)."""
    return supported(model) and not has_active_hooks(model)
