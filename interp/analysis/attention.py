"""Attention-pattern evolution: each head's mean pattern over a fixed probe, across checkpoints.

Every example shares one layout, so positions align and a mean over examples is meaningful.
`evolution` gives the full mean patterns (query x key) per step; `segments` gives the
decision position's attention mass on each segment (BOS, B, SEP, z, SEP2, A, EOS), which is
a sum over the decision row of the same mean pattern.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from jaxtyping import Float, Int

from interp.analysis.common import across_of, get_act_name, group_examples, no_grad, probe_groups, segment_names
from interp.analysis.registry import Analysis, N_GROUPS
from interp.runs import Run
from interp.task import Layout, Task

# torch is imported where the code computes, so that reading cached results (a report's findings) never loads it;
# where torch is already loaded (the tests), its names are bound here for jaxtyping's runtime checks of the annotations
if TYPE_CHECKING or "torch" in sys.modules:
    from torch import Tensor, nn

DEFAULT_GROUPS = 32


@no_grad
def mean_patterns(
    model: nn.Module, tokens: Int[Tensor, "n seq"], chunk_size: int = 1024
) -> Float[Tensor, "layer head query key"]:
    """Mean of hook_pattern over `tokens`, for every layer."""
    import torch

    n_layers = model.cfg.n_layers
    names = [get_act_name("pattern", l) for l in range(n_layers)]
    device = next(model.parameters()).device
    total = None
    for start in range(0, len(tokens), chunk_size):
        _, cache = model.run_with_cache(tokens[start : start + chunk_size].to(device),
                                        names_filter=lambda n: n in names)
        summed = torch.stack([cache[name].sum(0) for name in names]).double().cpu()
        total = summed if total is None else total + summed
    return (total / len(tokens)).float()


def probe_tokens(task: Task, n_groups: int | None, seed: int) -> Tensor:
    return task.tokens[group_examples(task, probe_groups(task, n_groups, seed))]


def _pattern_frame(step: int, patterns: Tensor) -> pd.DataFrame:
    n_layers, n_heads, t, _ = patterns.shape
    layer, head, query, key = np.meshgrid(
        np.arange(n_layers), np.arange(n_heads), np.arange(t), np.arange(t), indexing="ij"
    )
    df = pd.DataFrame({
        "step": step,
        "layer": layer.ravel(),
        "head": head.ravel(),
        "query": query.ravel(),
        "key": key.ravel(),
        "weight": patterns.numpy().ravel(),
    })
    df["head_name"] = "L" + df["layer"].astype(str) + "H" + df["head"].astype(str)
    return df


DEFAULTS = {"n_groups": DEFAULT_GROUPS}


def at_step(run: Run, step: int, *, model: nn.Module | None = None, n_groups: int | None = DEFAULT_GROUPS,
            device: str = "cpu") -> pd.DataFrame:
    """Every head's mean attention pattern at `step` over a seeded probe of `n_groups` groups.

    Returns one row per (layer, head, query, key): step, layer, head, head_name, query and key
    (positions), weight (mean attention probability, 0..1; each query row sums to 1).
    """
    tokens = probe_tokens(run.task, n_groups, run.spec.seed)
    if model is None:
        model = run.model(step, device=device)
    return _pattern_frame(step, mean_patterns(model, tokens))


across = across_of("attention")
ENTRY = Analysis(
    "attention", __name__, "mean attention pattern of every head over a fixed probe, every checkpoint",
    options=(N_GROUPS,), order=20,
)


def evolution(run: Run, steps: int | str | Iterable | None = None, n_groups: int | None = DEFAULT_GROUPS,
              device: str = "cpu", progress: bool = False) -> pd.DataFrame:
    """`across` under its former name."""
    return across(run, steps, progress=progress, n_groups=n_groups, device=device)


def segments(patterns: pd.DataFrame, task: Task | Layout) -> pd.DataFrame:
    """Decision-position attention mass per segment, from an `evolution` table (a task or its layout)."""
    layout = getattr(task, "layout", task)
    names = segment_names(layout)
    row = patterns[patterns["query"] == layout.decision_pos].copy()
    row["segment"] = [names[k] for k in row["key"]]
    out = row.groupby(["step", "layer", "head", "head_name", "segment"], as_index=False, sort=False)["weight"].sum()
    out = out.rename(columns={"weight": "mass"})
    order = {name: i for i, name in enumerate(layout.segments)}
    out["order"] = out["segment"].map(order)
    return out.sort_values(["step", "layer", "head", "order"]).drop(columns="order").reset_index(drop=True)



def derive(run: Run, tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The suite's derived table: decision-position attention mass per segment."""
    return {"attention_segments": segments(tables["attention"], run.layout)}
