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


# TL 4's bridge wires these capture hooks into its blocks on the first run_with_cache and leaves them there: they record
# activations for the bridge's own hook points and never change what a module computes
_BRIDGE_WIRING = "BlockBridge._maybe_wire_capture_hooks."


def has_user_hooks(model: nn.Module) -> bool:
    """Whether a forward hook or pre-hook on any of the model's modules could change what it computes: any hook but
    the TL 4 bridge's own capture wiring."""
    return any(not getattr(hook, "__qualname__", "").startswith(_BRIDGE_WIRING)
               for module in model.modules() for hooks in (module._forward_hooks, module._forward_pre_hooks)
               for hook in hooks.values())


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
    for loading). `n_ctx` is the task's sequence length; a spec's own n_ctx (a run made elsewhere) wins."""
    spec.validate()
    n_ctx = spec.context(n_ctx)
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
    """HookedTransformer's parameter names and shapes for `spec` (the checkpoint format), in its order, without TL;
    `n_ctx` the task's sequence length (a spec's own n_ctx wins, as in `build_model`)."""
    return _shapes(spec.n_layers, spec.d_model, spec.n_heads, spec.d_head, spec.d_mlp, spec.context(n_ctx), d_vocab)


def _shapes(n_layers: int, m: int, h: int, d: int, f: int, n_ctx: int, d_vocab: int) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {"embed.W_E": (d_vocab, m), "pos_embed.W_pos": (n_ctx, m)}
    for l in range(n_layers):
        a = f"blocks.{l}.attn."
        out.update({f"blocks.{l}.{ln}.{p}": (m,) for ln in ("ln1", "ln2") for p in ("w", "b")})
        # HookedTransformer's own order (its named_parameters), so that flat vectors agree on both versions
        out.update({a + "W_Q": (h, m, d), a + "W_O": (h, d, m), a + "b_Q": (h, d), a + "b_O": (m,)})
        out.update({a + "W_K": (h, m, d), a + "W_V": (h, m, d), a + "b_K": (h, d), a + "b_V": (h, d)})
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


def process_weights(model: nn.Module, **options) -> nn.Module:
    """TransformerLens's weight processing in place (fold_ln, center_writing_weights, center_unembed...):
    HookedTransformer.process_weights_ on TL 3, the bridge's process_weights on TL 4. A folded HookedTransformer's
    LayerNorms become LNPre; a folded bridge's keep normalization_type "LN" with unit weights and zero biases,
    the same function."""
    if is_bridge(model):
        model.process_weights(**options)
    else:
        model.process_weights_(**options)
    return model


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


# ---- one parameter layout on both versions: differentiating a bridge through checkpoint-format tensors -----------

def _to_bridge(tl_name: str, t: torch.Tensor, n_heads: int) -> torch.Tensor:
    """A checkpoint-layout tensor in the bridge's layout (what convert_tl_checkpoint does; differentiable)."""
    import einops

    leaf = tl_name.rsplit(".", 1)[-1]
    if leaf in ("W_Q", "W_K", "W_V"):
        return einops.rearrange(t, "h m d -> (h d) m")
    if leaf == "W_O":
        return einops.rearrange(t, "h d m -> m (h d)")
    if leaf in ("b_Q", "b_K", "b_V"):
        return einops.rearrange(t, "h d -> (h d)")
    return t.T if leaf in ("W_in", "W_out", "W_U") else t


def _native_names(model: nn.Module) -> dict[str, str]:
    """checkpoint name -> the bridge's own parameter path (its named_parameters name, what functional_call replaces)."""
    names = getattr(model, "_interp_native_names", None)
    if names is None:
        by_id = {id(p): n for n, p in model.named_parameters()}
        state = model.state_dict(keep_vars=True)
        names = {tl: by_id[id(state[key])] for tl, key in _bridge_names(model).items()}
        object.__setattr__(model, "_interp_native_names", names)
    return names


def copy_model(model: nn.Module) -> nn.Module:
    """copy.deepcopy of the model. A bridge may still hold tensors captured by its last forward with gradients
    (TL 4.3's attention keeps the pre-LayerNorm residual, a non-leaf tensor that deepcopy refuses): the copy gets
    None in their place (each forward captures them anew)."""
    import copy

    memo = {}
    if is_bridge(model):
        memo = {id(value): None for mod in model.modules() for value in vars(mod).values()
                if isinstance(value, torch.Tensor) and not value.is_leaf}
    return copy.deepcopy(model, memo)


def tl_named_parameters(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """(checkpoint name, the model's own parameter) in checkpoint order; a bridge's keep their own layout."""
    if not is_bridge(model):
        return list(model.named_parameters())
    own = dict(model.named_parameters())
    return [(tl, own[path]) for tl, path in _native_names(model).items()]


def native_params(model: nn.Module, params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Checkpoint-format tensors (any, with their graphs) as `functional_call` replacements of the model's own
    parameters: the same dict on a HookedTransformer, converted (differentiably) on a bridge."""
    if not is_bridge(model):
        return params
    paths, n_heads = _native_names(model), model.cfg.n_heads
    return {paths[name]: _to_bridge(name, t, n_heads) for name, t in params.items()}


def _aliases(model: nn.Module) -> list[tuple[nn.Module, str, nn.Module, str]]:
    """A bridge's plain attributes that hold one of its parameters (TL 4.3: LayerNorms' w and b, MLPs' b_in and
    b_out), as (holder, attribute, owner, parameter name). functional_call replaces the owner's parameter only, so
    a read through such an alias (the fast path's LayerNorm) would see the old tensor: `call_with` repoints them."""
    found = getattr(model, "_interp_aliases", None)
    if found is None:
        owners = {id(p): (mod, name) for mod in model.modules() for name, p in mod._parameters.items() if p is not None}
        found = [(mod, key, *owners[id(value)]) for mod in model.modules() for key, value in list(vars(mod).items())
                 if isinstance(value, torch.Tensor) and id(value) in owners]
        object.__setattr__(model, "_interp_aliases", found)
    return found


class _Apply(nn.Module):
    """fn(model, *args) as a module whose parameters are the model's ("model.<name>"), for functional_call; a
    bridge's aliases of its parameters point at functional_call's replacements during the call."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, fn, *args):
        aliases = _aliases(self.model) if is_bridge(self.model) else []
        kept = [vars(holder)[key] for holder, key, _, _ in aliases]
        try:
            for holder, key, owner, name in aliases:
                vars(holder)[key] = getattr(owner, name)
            return fn(self.model, *args)
        finally:
            for (holder, key, _, _), value in zip(aliases, kept):
                vars(holder)[key] = value


def call_with(model: nn.Module, params: dict[str, torch.Tensor], fn, *args):
    """fn(model, *args) computed with `params` (checkpoint names and shapes; a subset is enough) in place of the
    model's own: how the curvature analyses differentiate one parameter layout on both TransformerLens versions."""
    from torch.func import functional_call

    native = native_params(model, params)
    if is_bridge(model):
        _aliases(model)  # found on the model's own parameters, before functional_call replaces them
    return functional_call(_Apply(model), {"model." + k: v for k, v in native.items()}, (fn, *args))


class CheckpointView(nn.Module):
    """A bridge's parameters as a module of checkpoint names, shapes and order (HookedTransformer's), whose forward
    is the bridge's with them: what an optimizer or a sampler that owns the parameters (AdamW's saved moments,
    devinterp's SGLD) steps on TL 4. The bridge itself is held, not registered (its own parameters stay out)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        object.__setattr__(self, "inner", model)
        self.cfg = model.cfg
        for name, t in tl_params(model).items():
            *path, leaf = name.split(".")
            parent = self
            for part in path:
                if part not in parent._modules:
                    parent.add_module(part, nn.Module())
                parent = parent._modules[part]
            parent.register_parameter(leaf, nn.Parameter(t.detach().clone(), requires_grad=True))

    def forward(self, *args):
        return self.within(lambda m, *a: m(*a), *args)

    def within(self, fn, *args):
        """fn(the bridge, *args) with this module's parameters in place of the bridge's."""
        return call_with(self.inner, dict(self.named_parameters()), fn, *args)

    def _apply(self, fn, recurse=True):
        self.inner._apply(fn)  # its buffers follow (device, dtype)
        return super()._apply(fn, recurse)

    def to(self, *args, print_details: bool = False, **kwargs):
        """nn.Module.to, also taking HookedTransformer's print_details (devinterp passes it)."""
        return super().to(*args, **kwargs)

    def train(self, mode: bool = True):
        self.inner.train(mode)
        return super().train(mode)


def tl_module(model: nn.Module) -> nn.Module:
    """The model as a module whose parameters are the checkpoint's (names, shapes, order): a HookedTransformer
    itself, a bridge's `CheckpointView` (a copy of its parameters; the bridge is not modified)."""
    return CheckpointView(model) if is_bridge(model) else model


def tl_apply(module: nn.Module, fn, *args):
    """fn(model, *args) for a `tl_module`: the model itself, or a view's bridge with the view's parameters."""
    return module.within(fn, *args) if isinstance(module, CheckpointView) else fn(module, *args)


def _reorder_state(state: dict, old: list[str], new: list[str], convert) -> dict:
    """An optimizer state_dict whose integer keys follow `old` names, re-keyed to `new`'s order, each per-parameter
    tensor converted by convert(name, tensor) (scalars such as AdamW's step kept)."""
    index = {name: i for i, name in enumerate(new)}
    out = {index[old[i]]: {k: (convert(old[i], v).contiguous() if torch.is_tensor(v) and v.ndim else v)
                           for k, v in slot.items()}
           for i, slot in state["state"].items()}
    groups = [{**g, "params": sorted(index[old[i]] for i in g["params"])} for g in state["param_groups"]]
    return {"state": dict(sorted(out.items())), "param_groups": groups}


def tl_optimizer_state(model: nn.Module, state: dict) -> dict:
    """An optimizer state_dict of the model's parameters in the checkpoint's order and shapes (what a
    HookedTransformer's AdamW holds): unchanged on TL 3, converted from a bridge's, so saved states fit both."""
    if not is_bridge(model):
        return state
    paths, n_heads = _native_names(model), model.cfg.n_heads
    to_tl = {path: tl for tl, path in paths.items()}
    old = [to_tl[n] for n, _ in model.named_parameters()]
    return _reorder_state(state, old, list(paths), lambda name, t: _inverse(name, t, n_heads))


def native_optimizer_state(model: nn.Module, state: dict) -> dict:
    """`tl_optimizer_state`'s inverse: a checkpoint-layout optimizer state_dict for the model's own optimizer."""
    if not is_bridge(model):
        return state
    paths, n_heads = _native_names(model), model.cfg.n_heads
    to_tl = {path: tl for tl, path in paths.items()}
    new = [to_tl[n] for n, _ in model.named_parameters()]
    return _reorder_state(state, list(paths), new, lambda name, t: _to_bridge(name, t, n_heads))
