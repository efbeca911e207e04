"""ModelSpec -> the model: a HookedTransformer on TransformerLens 3.x, a TransformerBridge on 4.x.

The one place that knows the TransformerLens version (issue 35): TL 4 removed HookedTransformer, so
there the same spec boots a TL-native `TransformerBridge` in compatibility mode (legacy hook names,
no weight processing), which computes the same numbers. Checkpoints keep HookedTransformer's
parameter names and shapes on both; a bridge converts them on load (`load_tl_params`) and back
(`tl_params`). TransformerLens is imported lazily, inside the functions that build models; this is
also the one place that silences HookedTransformer's 3.x deprecation warning.
"""

from __future__ import annotations

import functools
import warnings

import torch
from torch import nn

from interp.errors import InterpError
from interp.seeding import torch_generator
from interp.spec import ACT_FNS, ModelSpec  # noqa: F401  (re-exported)

SUPPORTED_TL = "TransformerLens 3.9 or later 3.x (HookedTransformer) and 4.x (TransformerBridge)"


@functools.cache
def tl_major() -> int:
    """The installed TransformerLens's major version (3 or 4), read from its metadata (no import);
    any other version is refused in one line naming the supported ones."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("transformer-lens")
    except PackageNotFoundError:
        raise InterpError(f"TransformerLens is not installed; supported: {SUPPORTED_TL}") from None
    parts = (found.split(".") + ["0"])[:2]
    try:
        major, minor = int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)
    except ValueError:
        major, minor = -1, -1
    if (major, minor) < (3, 9) or major > 4:
        raise InterpError(f"TransformerLens {found} is not supported; supported: {SUPPORTED_TL}")
    return major


def is_bridge(model: nn.Module) -> bool:
    """Whether `model` is a TL 4 TransformerBridge (its parameters are not named as in a checkpoint)."""
    return type(model).__name__ == "TransformerBridge"


def require_hooked(model: nn.Module, what: str) -> None:
    """Refuse on a bridge, in one line, the work that needs HookedTransformer's parameter layout (Hessian-vector
    products gave wrong numbers through the bridge's parameters; AdamW's saved moments are in HookedTransformer's
    order): not yet ported to TL 4 (issue 35)."""
    if is_bridge(model):
        raise InterpError(f"{what} needs TransformerLens 3.9 for now (it differentiates HookedTransformer's parameters; "
                          "not yet ported to TL 4's TransformerBridge): pip install -e . -c constraints/tl3.txt")


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
    """A HookedTransformer for `spec` (a bridge on TL 4); initialised from `seed` when given (else left
    for loading)."""
    spec.validate()
    if tl_major() >= 4:
        return _build_bridge(spec, n_ctx, d_vocab, seed, device)
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


# ---- TransformerLens 4: the same model as a TransformerBridge -------------------------------------

_HEADS_IN = "n_heads d_model d_head -> (n_heads d_head) d_model"


def tl_param_shapes(spec: ModelSpec, n_ctx: int, d_vocab: int) -> dict[str, tuple[int, ...]]:
    """HookedTransformer's parameter names and shapes for `spec` (the checkpoint format), without TL."""
    return _shapes(spec.n_layers, spec.d_model, spec.n_heads, spec.d_head, spec.d_mlp, n_ctx, d_vocab)


def _shapes(n_layers: int, m: int, h: int, d: int, f: int, n_ctx: int, d_vocab: int) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {"embed.W_E": (d_vocab, m), "pos_embed.W_pos": (n_ctx, m)}
    for l in range(n_layers):
        a = f"blocks.{l}.attn."
        out.update({f"blocks.{l}.{ln}.{p}": (m,) for ln in ("ln1", "ln2") for p in ("w", "b")})
        out.update({a + f"W_{x}": (h, m, d) for x in "QKV"} | {a + f"b_{x}": (h, d) for x in "QKV"})
        out.update({a + "W_O": (h, d, m), a + "b_O": (m,)})
        out.update({f"blocks.{l}.mlp.W_in": (m, f), f"blocks.{l}.mlp.b_in": (f,),
                    f"blocks.{l}.mlp.W_out": (f, m), f"blocks.{l}.mlp.b_out": (m,)})
    out.update({"ln_final.w": (m,), "ln_final.b": (m,), "unembed.W_U": (m, d_vocab), "unembed.b_U": (d_vocab,)})
    return out


def initial_params(spec: ModelSpec, n_ctx: int, d_vocab: int, seed: int) -> dict[str, torch.Tensor]:
    """`init_params`'s weights as a checkpoint-format dict: the same draws in the same (name-sorted)
    order, so a bridge starts from the HookedTransformer's exact initial weights."""
    gen = torch_generator(seed, "init")
    out = {}
    for name, shape in sorted(tl_param_shapes(spec, n_ctx, d_vocab).items()):
        leaf = name.rsplit(".", 1)[-1]
        if leaf.startswith("W_"):
            out[name] = torch.randn(shape, generator=gen, dtype=torch.float32) * spec.std
        else:
            out[name] = torch.ones(shape) if leaf == "w" else torch.zeros(shape)
    return out


def _build_bridge(spec: ModelSpec, n_ctx: int, d_vocab: int, seed: int | None, device: str) -> nn.Module:
    """A TL-native TransformerBridge in compatibility mode (legacy hook names, weights unprocessed)."""
    from transformer_lens import TransformerBridge, TransformerBridgeConfig

    cfg = TransformerBridgeConfig(
        n_layers=spec.n_layers, n_heads=spec.n_heads, d_model=spec.d_model, d_head=spec.d_head, d_mlp=spec.d_mlp,
        d_vocab=d_vocab, d_vocab_out=d_vocab, n_ctx=n_ctx, act_fn=spec.act_fn, normalization_type="LN",
        positional_embedding_type="standard", attn_only=False, init_weights=False, seed=None, device="cpu",
        default_prepend_bos=False, architecture="TransformerLensNative",
    )
    with torch.random.fork_rng(devices=[]):  # nn.Linear's own init must not move the global stream
        model = TransformerBridge.boot_native(cfg)
    model.enable_compatibility_mode(no_processing=True, disable_warnings=True)
    # TL 4.3's native unembedding has no bias (b_U is a fixed zero buffer); ours is trained, so it is made a parameter
    head = model.unembed.original_component
    if "bias" in head._buffers:
        head.bias = nn.Parameter(head._buffers.pop("bias"))
    if seed is not None:
        load_tl_params(model, initial_params(spec, n_ctx, d_vocab, seed))
    return to_device(model, device)


def attn_scale(attn: nn.Module) -> float:
    """The divisor of an attention layer's scores: HookedTransformer's `attn_scale`, a bridge's native
    attention's `scale` (both sqrt(d_head) for the interp family, the same float)."""
    inner = getattr(attn, "original_component", None)
    return attn.attn_scale if inner is None else inner.scale


def _inverse(tl_name: str, t: torch.Tensor, n_heads: int) -> torch.Tensor:
    """A bridge tensor back in HookedTransformer's layout (the inverse of convert_tl_checkpoint)."""
    import einops

    leaf = tl_name.rsplit(".", 1)[-1]
    if leaf in ("W_Q", "W_K", "W_V"):
        return einops.rearrange(t, "(h d) m -> h m d", h=n_heads)
    if leaf == "W_O":
        return einops.rearrange(t, "m (h d) -> h d m", h=n_heads)
    if leaf in ("b_Q", "b_K", "b_V"):
        return einops.rearrange(t, "(h d) -> h d", h=n_heads)
    return t.T if leaf in ("W_in", "W_out", "W_U") else t


def _bridge_names(model: nn.Module) -> dict[str, str]:
    """checkpoint name -> the bridge's state-dict key, learned from convert_tl_checkpoint itself."""
    names = getattr(model, "_interp_tl_names", None)
    if names is None:
        from transformer_lens.utilities.tl_checkpoint_conversion import convert_tl_checkpoint

        cfg = model.cfg
        shapes = _shapes(cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.d_head, cfg.d_mlp, cfg.n_ctx, cfg.d_vocab)
        converted = convert_tl_checkpoint({n: torch.zeros(s) for n, s in shapes.items()}, cfg)
        names = dict(zip(shapes, converted))
        object.__setattr__(model, "_interp_tl_names", names)
    return names


def tl_params(model: nn.Module) -> dict[str, torch.Tensor]:
    """The model's parameters under their checkpoint (HookedTransformer) names and shapes; a bridge's
    are converted back (detached), a HookedTransformer's are its own parameters."""
    if not is_bridge(model):
        return dict(model.named_parameters())
    state = model.state_dict()
    return {tl: _inverse(tl, state[key].detach(), model.cfg.n_heads) for tl, key in _bridge_names(model).items()}


def load_tl_params(model: nn.Module, params: dict[str, torch.Tensor]) -> None:
    """Copy checkpoint-format parameters into a bridge (names and shapes checked first, in one line)."""
    from transformer_lens.utilities.tl_checkpoint_conversion import convert_tl_checkpoint

    own = {name: tuple(t.shape) for name, t in tl_params(model).items()}
    missing, extra = sorted(set(own) - set(params)), sorted(set(params) - set(own))
    if missing or extra:
        raise InterpError(f"checkpoint does not fit the model: missing {missing[:3]}, unexpected {extra[:3]}")
    for name, shape in own.items():
        if tuple(params[name].shape) != shape:
            raise InterpError(f"checkpoint parameter {name} has shape {tuple(params[name].shape)}, the model expects {shape}")
    with torch.no_grad():
        model.load_state_dict(convert_tl_checkpoint(params, model.cfg), strict=True)
