"""Which parameters an analysis covers: the `restrict` grammar and the names of components.

A TransformerLens model's parameters fall into components: each head's slices of
W_Q/W_K/W_V/W_O and b_Q/b_K/b_V (HEAD_PARTS, the head axis first), each layer's MLP
(MLP_PARTS), the embeddings W_E and W_pos, the unembedding W_U and b_U, and "other"
(LayerNorms, b_O). `restrict` names a subset, as a component token or a list (or a
"+"-joined string) of them:

    None / "all"      every parameter
    "L0H3"            one head's slices (any case)
    "L0"              a layer; "L0.attn" / "L0.mlp" its attention / its MLP
    "attn", "mlp"     every layer's attention / MLP
    "embed", "unembed", "ln"

`selection` resolves it on a model to flat indices per tensor (what the Hessian's subspace
is), `masks` to boolean masks per tensor (what the LLC's SGLD samples). Both analyses read
this one grammar. Component naming (`component_of`, `component_order`) is torch-free, so
figures can order components without loading torch; torch is imported by the functions that
resolve a selection on a model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from interp.errors import InterpError
from interp.names import head_name, parse_head

if TYPE_CHECKING:
    from torch import Size, Tensor, nn

HEAD_PARTS = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V")
MLP_PARTS = ("W_in", "b_in", "W_out", "b_out")
EMBED_PARTS = {"embed.W_E": "W_E", "pos_embed.W_pos": "W_pos"}
UNEMBED_PARTS = {"unembed.W_U": "W_U", "unembed.b_U": "b_U"}
TOKENS = ("None or 'all', a head 'L0H3', a layer 'L0', 'L0.attn', 'L0.mlp', 'attn', 'mlp', 'embed', 'unembed', "
          "'ln', or a list of these")


# ---------------------------------------------------------------------------- naming (torch-free)
def component_of(name: str) -> tuple[str, str, int | None, bool]:
    """(component, part, layer, per_head) of a parameter name; per_head: its first axis is the head."""
    if name in EMBED_PARTS:
        return "embed", EMBED_PARTS[name], None, False
    if name in UNEMBED_PARTS:
        return "unembed", UNEMBED_PARTS[name], None, False
    m = re.fullmatch(r"blocks\.(\d+)\.(attn|mlp)\.(\w+)", name)
    if m:
        layer, kind, leaf = int(m[1]), m[2], m[3]
        if kind == "attn" and leaf in HEAD_PARTS:
            return "head", leaf, layer, True
        if kind == "mlp":
            return f"L{layer}.mlp", leaf, layer, False
    m = re.match(r"blocks\.(\d+)\.", name)
    return "other", name, (int(m[1]) if m else None), False


def component_order(components: Iterable[str]) -> list[str]:
    """embed, then per layer its heads (L0H0 first) and its MLP, then unembed and other."""
    def key(c: str) -> tuple:
        if c == "embed":
            return (0, 0, 0)
        m = re.fullmatch(r"L(\d+)H(\d+)", c)
        if m:
            return (1, int(m[1]), int(m[2]))
        m = re.fullmatch(r"L(\d+)\.mlp", c)
        if m:
            return (1, int(m[1]), 10**9)
        return (2, 0 if c == "unembed" else 1, 0)
    return sorted(dict.fromkeys(components), key=key)


def part_rank(part: str) -> int:
    """Order of a part within its component: "all" first, then HEAD_PARTS, MLP_PARTS, W_E, W_pos, W_U, b_U."""
    known = HEAD_PARTS + MLP_PARTS + tuple(EMBED_PARTS.values()) + tuple(UNEMBED_PARTS.values())
    return 0 if part == "all" else known.index(part) + 1 if part in known else len(known) + 1


def canonical(token: str) -> str:
    """A restrict token as labels spell it: "l0h3" -> "L0H3", "l0.MLP" -> "L0.mlp", "ATTN" -> "attn"."""
    low = token.strip().lower()
    m = re.fullmatch(r"l(\d+)h(\d+)", low)
    if m:
        return head_name(int(m[1]), int(m[2]))
    m = re.fullmatch(r"l(\d+)(\.(attn|mlp))?", low)
    if m:
        return f"L{m[1]}" + (m[2] or "")
    return low


def check_head(token: str, n_layers: int, n_heads: int, what: str = "restrict") -> tuple[int, int]:
    """(layer, head) of a head token that exists in a model of n_layers x n_heads, else InterpError."""
    head = parse_head(token) if isinstance(token, str) else None
    if head is None or head[0] >= n_layers or head[1] >= n_heads:
        raise InterpError(f"{what} {token!r}: no such head; heads are L0H0..L{n_layers - 1}H{n_heads - 1}")
    return head


# ---------------------------------------------------------------------------- selections (torch)
@dataclass(frozen=True)
class Selection:
    """Which parameter entries an analysis covers: name -> flat indices (None: the whole tensor)."""

    label: str
    index: dict[str, Tensor | None]

    def size(self, params: dict[str, Tensor]) -> int:
        return sum(params[n].numel() if i is None else len(i) for n, i in self.index.items())


def head_index(shape: Size, head: int) -> Tensor:
    """Flat indices of slice [head] of a tensor whose first axis is the head axis."""
    import torch

    per = 1
    for d in shape[1:]:
        per *= int(d)
    return torch.arange(head * per, (head + 1) * per)


def _tensors(model: nn.Module) -> dict[str, Tensor]:
    """The model's parameters under their checkpoint (HookedTransformer) names, shapes and order, on either
    TransformerLens (`interp.model.tl_params`): what selections index."""
    from interp.model import tl_params

    return tl_params(model)


def _component_index(model: nn.Module, token: str) -> dict[str, Tensor | None]:
    tensors = _tensors(model)
    names = list(tensors)
    shapes = {n: p.shape for n, p in tensors.items()}
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    low = token.strip().lower()
    if low == "all":
        return {n: None for n in names}
    if low == "embed":
        return {n: None for n in names if n in EMBED_PARTS}
    if low == "unembed":
        return {n: None for n in names if n in UNEMBED_PARTS}
    if low == "mlp":
        return {n: None for n in names if ".mlp." in n}
    if low == "attn":
        return {n: None for n in names if ".attn." in n}
    if low == "ln":
        return {n: None for n in names if re.search(r"(^|\.)ln\w*\.", n)}
    m = re.fullmatch(r"l(\d+)(?:\.(attn|mlp))?", low)
    if m:
        layer = int(m[1])
        if layer >= n_layers:
            raise InterpError(f"restrict {token!r}: layer {layer} does not exist (layers 0..{n_layers - 1})")
        prefix = f"blocks.{layer}." + (f"{m[2]}." if m[2] else "")
        return {n: None for n in names if n.startswith(prefix)}
    if re.fullmatch(r"l(\d+)h(\d+)", low):
        layer, head = check_head(low, n_layers, n_heads)
        prefix = f"blocks.{layer}.attn."
        return {prefix + part: head_index(shapes[prefix + part], head)
                for part in HEAD_PARTS if prefix + part in shapes}
    raise InterpError(f"unknown restrict component {token!r}; allowed: {TOKENS}")


def selection(model: nn.Module, restrict: str | Sequence[str] | None = None) -> Selection:
    """Resolve `restrict` (None = all parameters; a component name or a list of them) on `model`."""
    import torch

    if restrict is None:
        tokens = ["all"]
    elif isinstance(restrict, str):
        tokens = [t for t in restrict.split("+") if t.strip()] or ["all"]
    else:
        tokens = list(restrict)
        if not tokens or not all(isinstance(t, str) for t in tokens):
            raise InterpError(f"restrict must be None, a component name or a list of names, got {restrict!r}")
    tensors = _tensors(model)
    order = list(tensors)
    numel = {n: p.numel() for n, p in tensors.items()}
    merged: dict[str, Tensor | None] = {}
    for token in tokens:
        for name, idx in _component_index(model, token).items():
            if name in merged and (merged[name] is None or idx is None):
                merged[name] = None
            elif name in merged:
                merged[name] = torch.unique(torch.cat([merged[name], idx]))
            else:
                merged[name] = idx
    if not merged:
        raise InterpError(f"restrict {restrict!r} selects no parameters of this model")
    for name, idx in list(merged.items()):
        if idx is not None and len(idx) == numel[name]:
            merged[name] = None
    label = "all" if tokens == ["all"] or (
        len(merged) == len(order) and all(v is None for v in merged.values())) else "+".join(
        canonical(t) for t in tokens)
    return Selection(label, {n: merged[n] for n in order if n in merged})


def flat_index(model: nn.Module, restrict: str | Sequence[str] | None = None) -> Tensor:
    """Positions of the selected entries in the concatenation of all parameters (model order)."""
    import torch

    sel = selection(model, restrict)
    out, offset = [], 0
    for name, p in _tensors(model).items():
        if name in sel.index:
            idx = sel.index[name]
            out.append(offset + (torch.arange(p.numel()) if idx is None else idx))
        offset += p.numel()
    return torch.cat(out)


def masks(model: nn.Module, restrict: str | Sequence[str] | None = None) -> dict[str, Tensor | None]:
    """The selection as boolean masks of each selected tensor's shape (None: the whole tensor), model order."""
    import torch

    params = _tensors(model)
    out: dict[str, Tensor | None] = {}
    for name, idx in selection(model, restrict).index.items():
        if idx is None:
            out[name] = None
        else:
            mask = torch.zeros(params[name].numel(), dtype=torch.bool)
            mask[idx] = True
            out[name] = mask.view(params[name].shape)
    return out
