"""ModelSpec -> HookedTransformerConfig -> HookedTransformer, initialised from a local generator.

TransformerLens is imported lazily: `interp ls` and `interp show` never pay for it.
This is the one place that constructs a HookedTransformer, so it is also the one place
that silences its 3.x deprecation warning.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass

import torch
from torch import nn

from interp.errors import InterpError
from interp.seeding import torch_generator

ACT_FNS = ("gelu", "gelu_new", "relu", "silu")


@dataclass(frozen=True)
class ModelSpec:
    """Architecture of the transformer (SPEC section 3 defaults: ~0.8M parameters)."""

    n_layers: int = 4
    n_heads: int = 4
    d_model: int = 128
    d_head: int = 32
    d_mlp: int = 512
    act_fn: str = "gelu"
    init_std: float | None = None  # None: 0.8 / sqrt(d_model), TransformerLens's GPT-2 default

    def validate(self) -> None:
        for name in ("n_layers", "n_heads", "d_model", "d_head", "d_mlp"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InterpError(f"{name} must be a positive integer, got {value!r}")
        if self.act_fn not in ACT_FNS:
            raise InterpError(f"unknown act_fn {self.act_fn!r}; allowed: {', '.join(ACT_FNS)}")
        if self.init_std is not None and not self.init_std > 0:
            raise InterpError(f"init_std must be positive, got {self.init_std!r}")

    @property
    def std(self) -> float:
        return self.init_std if self.init_std is not None else 0.8 / math.sqrt(self.d_model)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ModelSpec:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise InterpError(f"unknown model fields {sorted(unknown)}; known: {sorted(known)}")
        return cls(**data)


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
