"""Trajectory of the weights between saved checkpoints: how far, how steadily, and how large.

Between consecutive saved checkpoints t_prev < t, per component of the model (docs/diagnostics.md):

- displacement ||theta(t) - theta(t_prev)|| and the same divided by t - t_prev (per optimizer step);
- direction consistency: the cosine between the displacement t_prev2 -> t_prev and the displacement
  t_prev -> t (t_prev2 < t_prev < t consecutive saved steps). A random walk gives about 0, a steady
  drift about 1 (the author measured 0.04-0.22 on the plateau, 0.4-0.9 through the transition);
- the weight norm ||theta(t)|| of the component.

Components partition the parameters (every entry belongs to exactly one component, so the
squared displacements of the components sum to that of "all"): W_E, W_pos, each head's
L{l}H{h}.Q (its slices of W_Q and b_Q), .K (W_K, b_K), .V (W_V, b_V) and .O (its slice of W_O),
each layer's L{l}.b_O, L{l}.mlp, L{l}.ln1 and L{l}.ln2, then ln_final and W_U (W_U and b_U); "all"
is the whole parameter vector. A parameter that fits none of them is an error, never dropped.

Only checkpoint weights are read (no forward pass). The previous two saved steps' checkpoints are
read through the run (their SHA-256 checked against the manifest); its entry (ENTRY, below) needs
"previous_checkpoints", so the suite and `across` pass a reader that keeps the last few for one
call, and walking the steps in order reads each checkpoint about once. Sums are in float64.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.analysis.common import across_of
from interp.analysis.registry import Analysis, Need
from interp.errors import InterpError
from interp.names import head_name
from interp.runs import Run

DEFAULTS: dict = {}
COLUMNS = ("step", "prev_step", "component", "kind", "layer", "head", "displacement", "displacement_per_step",
           "cosine", "weight_norm")
KINDS = ("embed", "head", "attn", "mlp", "ln", "unembed", "all")
HEAD_SLICE_OF = {"W_Q": "Q", "b_Q": "Q", "W_K": "K", "b_K": "K", "W_V": "V", "b_V": "V", "W_O": "O"}
PART_ORDER = ("Q", "K", "V", "O")


# ---------------------------------------------------------------------------- components
@dataclass(frozen=True)
class Component:
    name: str
    kind: str
    layer: int  # -1: not in a layer
    head: int  # -1: not a head


@dataclass(frozen=True, eq=False)
class Layout:
    """How the flattened parameter vector (parameters in sorted-name order) splits into components."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    components: tuple[Component, ...]
    ids: Tensor  # [P] component index of every entry of the flat vector


def _order_key(c: Component) -> tuple:
    """W_E, W_pos; per layer ln1, its heads (Q, K, V, O each), b_O, ln2, mlp; ln_final, W_U."""
    fixed = {"W_E": (0,), "W_pos": (1,), "ln_final": (3,), "W_U": (4,)}
    if c.name in fixed:
        return fixed[c.name]
    if c.kind == "head":
        return (2, c.layer, 1, c.head, PART_ORDER.index(c.name.rsplit(".", 1)[1]))
    rank = {"ln1": 0, "b_O": 2, "ln2": 3, "mlp": 4}[c.name.split(".", 1)[1]]
    return (2, c.layer, rank, 0, 0)


def _classify(name: str, shape: tuple[int, ...]) -> list[Component] | Component:
    """The component of parameter `name` (a list, one per head, for head-sliced parameters)."""
    simple = {"embed.W_E": Component("W_E", "embed", -1, -1), "pos_embed.W_pos": Component("W_pos", "embed", -1, -1),
              "unembed.W_U": Component("W_U", "unembed", -1, -1), "unembed.b_U": Component("W_U", "unembed", -1, -1)}
    if name in simple:
        return simple[name]
    if re.fullmatch(r"ln_final\.\w+", name):
        return Component("ln_final", "ln", -1, -1)
    m = re.fullmatch(r"blocks\.(\d+)\.(ln1|ln2)\.\w+", name)
    if m:
        return Component(f"L{m[1]}.{m[2]}", "ln", int(m[1]), -1)
    m = re.fullmatch(r"blocks\.(\d+)\.mlp\.\w+", name)
    if m:
        return Component(f"L{m[1]}.mlp", "mlp", int(m[1]), -1)
    m = re.fullmatch(r"blocks\.(\d+)\.attn\.(\w+)", name)
    if m and m[2] == "b_O":
        return Component(f"L{m[1]}.b_O", "attn", int(m[1]), -1)
    if m and m[2] in HEAD_SLICE_OF:
        layer, part = int(m[1]), HEAD_SLICE_OF[m[2]]
        return [Component(f"{head_name(layer, h)}.{part}", "head", layer, h) for h in range(shape[0])]
    raise InterpError(f"parameter {name!r} (shape {tuple(shape)}) belongs to no trajectory component; known: "
                      f"embed.W_E, pos_embed.W_pos, blocks.L.attn.W_Q/W_K/W_V/W_O/b_Q/b_K/b_V/b_O, blocks.L.mlp.*, "
                      f"blocks.L.ln1/ln2.*, ln_final.*, unembed.W_U/b_U")


_LAYOUTS: dict[tuple, Layout] = {}


def layout(shapes: dict[str, Sequence[int]]) -> Layout:
    """The component layout of parameters `shapes` (name -> shape); InterpError for an unknown parameter."""
    names = tuple(sorted(shapes))
    dims = tuple(tuple(int(d) for d in shapes[n]) for n in names)
    key = (names, dims)
    if key in _LAYOUTS:
        return _LAYOUTS[key]
    found: dict[str, Component] = {}
    per_param: list[list[Component] | Component] = []
    for name, shape in zip(names, dims):
        comp = _classify(name, shape)
        per_param.append(comp)
        for c in comp if isinstance(comp, list) else [comp]:
            found.setdefault(c.name, c)
    components = tuple(sorted(found.values(), key=_order_key))
    index = {c.name: i for i, c in enumerate(components)}
    parts = []
    for shape, comp in zip(dims, per_param):
        numel = math.prod(shape)
        if isinstance(comp, list):  # the head axis comes first: equal consecutive slices
            per = numel // len(comp)
            parts.append(torch.tensor([index[c.name] for c in comp]).repeat_interleave(per))
        else:
            parts.append(torch.full((numel,), index[comp.name], dtype=torch.long))
    out = Layout(names, dims, components, torch.cat(parts) if parts else torch.zeros(0, dtype=torch.long))
    _LAYOUTS[key] = out
    return out


def flatten(params: dict[str, Tensor], lay: Layout, dtype: torch.dtype = torch.float32) -> Float[Tensor, " p"]:
    """The parameters as one vector in the layout's order (checked against its names and shapes), on the
    CPU: float32 holds float16/bfloat16/float32 checkpoints exactly."""
    got = {n: tuple(p.shape) for n, p in params.items()}
    want = dict(zip(lay.names, lay.shapes))
    if got != want:
        diff = sorted(set(got.items()) ^ set(want.items()))[:3]
        raise InterpError(f"trajectory: the parameters differ in names or shapes between checkpoints ({diff})")
    return torch.cat([params[n].detach().reshape(-1).to("cpu", dtype) for n in lay.names])


# ---------------------------------------------------------------------------- statistics
def component_sums(
    ids: Int[Tensor, " p"], n_components: int, *vectors: Float[Tensor, " p"]
) -> Float[Tensor, "n_products comp"]:
    """Per component, the sums of the entrywise products vectors[0]*vectors[1], vectors[2]*vectors[3], ...
    (float64): squared norms and dot products of every component in one index_add."""
    products = torch.stack([vectors[i].double() * vectors[i + 1].double() for i in range(0, len(vectors), 2)])
    return torch.zeros(len(products), n_components, dtype=torch.float64).index_add_(1, ids, products)


def _cosine(dot: np.ndarray, n1: np.ndarray, n2: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        cos = dot / (n1 * n2)
    return np.where((n1 > 0) & (n2 > 0), np.clip(cos, -1.0, 1.0), np.nan)


def trajectory_rows(
    lay: Layout,
    step: int,
    theta: Float[Tensor, " p"],
    prev: tuple[int, Float[Tensor, " p"]] | None,
    prev2: Float[Tensor, " p"] | None,
) -> pd.DataFrame:
    """The table of one step from flat weights: theta at `step`, (t_prev, theta) before it and theta at t_prev2."""
    n = len(lay.components)
    theta = theta.double()
    comp_sq = component_sums(lay.ids, n, theta, theta)[0].numpy()
    all_sq = float(torch.dot(theta, theta))
    weight_norm = np.sqrt(np.append(comp_sq, all_sq))
    nan = np.full(n + 1, np.nan)
    disp, per_step, cosine, prev_step = nan, nan, nan, -1
    if prev is not None:
        prev_step, theta_prev = prev
        theta_prev = theta_prev.double()
        d2 = theta - theta_prev
        if prev2 is None:
            (d2_sq,) = component_sums(lay.ids, n, d2, d2).numpy()
            disp = np.sqrt(np.append(d2_sq, float(torch.dot(d2, d2))))
        else:
            d1 = theta_prev - prev2.double()
            d2_sq, dot, d1_sq = component_sums(lay.ids, n, d2, d2, d1, d2, d1, d1).numpy()
            disp = np.sqrt(np.append(d2_sq, float(torch.dot(d2, d2))))
            dot = np.append(dot, float(torch.dot(d1, d2)))
            cosine = _cosine(dot, np.sqrt(np.append(d1_sq, float(torch.dot(d1, d1)))), disp)
        per_step = disp / (step - prev_step)
    comps = list(lay.components) + [Component("all", "all", -1, -1)]
    return pd.DataFrame({
        "step": np.full(n + 1, step, dtype=np.int64),
        "prev_step": np.full(n + 1, prev_step, dtype=np.int64),
        "component": [c.name for c in comps],
        "kind": [c.kind for c in comps],
        "layer": np.array([c.layer for c in comps], dtype=np.int64),
        "head": np.array([c.head for c in comps], dtype=np.int64),
        "displacement": disp.astype(np.float64),
        "displacement_per_step": per_step.astype(np.float64),
        "cosine": cosine.astype(np.float64),
        "weight_norm": weight_norm.astype(np.float64),
    })[list(COLUMNS)]


# ---------------------------------------------------------------------------- reading checkpoints
def checkpoint_vector(read: Callable[[int], dict[str, Tensor]], step: int) -> tuple[Layout, Float[Tensor, " p"]]:
    """The checkpoint at `step` as (layout, flat float32 weights), its parameters from `read`."""
    params = read(step)
    lay = layout({n: p.shape for n, p in params.items()})
    return lay, flatten(params, lay)


# ---------------------------------------------------------------------------- run level
def _check_params(params: dict) -> None:
    if params:
        raise InterpError(f"the trajectory analysis takes no parameters, got {sorted(params)}")


def at_step(run: Run, step: int, *, model: nn.Module | None = None, device: str = "cpu",
            previous: Callable[[int], dict[str, Tensor]] | None = None, **params) -> pd.DataFrame:
    """Displacement from the previous saved checkpoint, direction consistency and weight norms, per component.

    The weights at `step` are `model`'s when given (the suite's loaded checkpoint), else the
    checkpoint's; the previous two saved steps are read from their checkpoints, through `previous`
    (step -> parameters; the suite's or `across`'s reader, shared by the steps of one call) or else
    `run.state_dict`. Computed on the CPU in float64 whatever `device` is (no forward pass: milliseconds).

    Returns one row per component (see the module docstring) and one for "all":
    step; prev_step (the previous saved step, -1 at the first); component; kind (embed, head,
    attn, mlp, ln, unembed, all); layer and head (-1 where none); displacement
    (||theta(step) - theta(prev_step)||, parameter units; NaN at the first saved step);
    displacement_per_step (displacement / (step - prev_step), parameter units per optimizer step);
    cosine (between the displacements prev_step2 -> prev_step and prev_step -> step, -1..1; NaN at
    the first two saved steps or where a displacement is zero); weight_norm (||theta(step)||).
    """
    _check_params(params)
    step = run.resolve_step(step)
    steps = run.steps
    i = steps.index(step)
    read = previous if previous is not None else run.state_dict
    if model is None:
        lay, theta = checkpoint_vector(read, step)
    else:
        from interp.model import tl_params  # checkpoint names and shapes on either TransformerLens

        named = tl_params(model)
        lay = layout({n: p.shape for n, p in named.items()})
        theta = flatten(named, lay, torch.float64)
    prev = prev2 = None
    if i >= 1:
        lay_prev, theta_prev = checkpoint_vector(read, steps[i - 1])
        if lay_prev is not lay:  # layouts are shared per (names, shapes)
            raise InterpError(f"trajectory: the checkpoint at step {steps[i - 1]} has other parameters than "
                              f"step {step}'s")
        prev = (steps[i - 1], theta_prev)
    if i >= 2:
        lay_prev2, prev2 = checkpoint_vector(read, steps[i - 2])
        if lay_prev2 is not lay:
            raise InterpError(f"trajectory: the checkpoint at step {steps[i - 2]} has other parameters than "
                              f"step {step}'s")
    return trajectory_rows(lay, step, theta, prev, prev2)


across = across_of("trajectory")
ENTRY = Analysis(
    "trajectory", __name__,
    "weight displacement per step, direction consistency and weight norms per component, between checkpoints",
    needs=(Need("previous_checkpoints", "previous"),), order=90, groups=(("diagnostics", 1),),
)
