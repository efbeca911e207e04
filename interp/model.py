"""ModelSpec -> HookedTransformerConfig -> HookedTransformer, initialised from a local generator.

TransformerLens is imported lazily, inside the functions that build models.
This is the one place that constructs a HookedTransformer, so it is also the one place
that silences its 3.x deprecation warning.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from interp.seeding import torch_generator
from interp.spec import ACT_FNS, ModelSpec  # noqa: F401  (re-exported)


def hooked_config(spec: ModelSpec, n_ctx: int, d_vocab: int, device: str = "cpu"):
    """The HookedTransformerConfig for `spec`: pre-LN, learned positions, untied embeddings."""
    from transformer_lens import HookedTransformerConfig

    return HookedTransformerConfig(
        n_layers=spec.n_layers,
        n_heads=spec.n_heads,
        d_model=spec.d_model,
        d_head=spec.d_head,
        d_mlp=spec.d_mlp,
        d_vocab=d_vocab,
        d_vocab_out=d_vocab,
        n_ctx=n_ctx,
        act_fn=spec.act_fn,
        normalization_type="LN",
        positional_embedding_type="standard",
        attn_only=False,
        init_weights=False,  # we initialise from our own generator (see init_params)
        seed=None,  # a config seed would reseed the whole process
        device=device,
        default_prepend_bos=False,
    )


def init_params(model: nn.Module, spec: ModelSpec, seed: int) -> None:
    """GPT-2 style init from a local generator: W_* ~ N(0, std), biases 0, LayerNorm weights 1.

    Parameters are drawn on the CPU in a fixed (name-sorted) order, so the same seed gives the
    same weights on any device and different seeds give different weights.
    """
    gen = torch_generator(seed, "init")
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            leaf = name.rsplit(".", 1)[-1]
            if leaf.startswith("W_"):
                values = torch.randn(param.shape, generator=gen, dtype=torch.float32) * spec.std
                param.copy_(values.to(param.device, param.dtype))
            elif leaf == "w":  # LayerNorm scale
                param.fill_(1.0)
            else:  # b_* biases and LayerNorm shifts
                param.zero_()


def build_model(
    spec: ModelSpec,
    n_ctx: int,
    d_vocab: int,
    seed: int | None = None,
    device: str = "cpu",
) -> nn.Module:
    """A HookedTransformer for `spec`; initialised from `seed` when given (else left for loading)."""
    spec.validate()
    from transformer_lens import HookedTransformer

    cfg = hooked_config(spec, n_ctx, d_vocab, device="cpu")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="HookedTransformer is deprecated", category=DeprecationWarning)
        model = HookedTransformer(cfg, move_to_device=False)
    if seed is not None:
        init_params(model, spec, seed)
    return to_device(model, device)


def to_device(model: nn.Module, device: str) -> nn.Module:
    """Move a HookedTransformer (and its cfg.device) without TransformerLens's print."""
    return model.to(device, print_details=False)


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
