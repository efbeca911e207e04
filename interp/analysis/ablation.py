"""Head and layer ablation at chosen checkpoints (by default tau/4, tau and 2 tau).

A head is ablated by replacing its hook_z (at every position) with:
- `zero`: zeros, removing the head's contribution (z @ W_O) from the residual stream;
- `mean`: its per-position mean over a fixed reference set of training examples;
- `resample`: its value on the same input with z replaced by another selector of the same
  group, never the input's own (drawn once per (group, selector) from the run's seed).
Whole layers are ablated the same way with all their heads at once.

Effects are the metrics of `interp.metrics` (first-token loss, candidate loss, shuffle gap,
accuracies) on a fixed probe, reported with the unablated values alongside.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor, nn
from transformer_lens.utilities import get_act_name

from interp.analysis.common import head_name, over_steps
from interp.errors import InterpError
from interp.metrics import evaluate_examples, summarize
from interp.runs import Run
from interp.seeding import torch_generator
from interp.task import Task

METHODS = ("zero", "mean", "resample")
DEFAULT_EXAMPLES = 256
REFERENCE_SIZE = 512
METRICS = ("loss", "loss_first", "loss_cand", "shuffle_gap", "acc_first", "acc_cand", "acc_exact")


def components(n_layers: int, n_heads: int) -> list[tuple[str, int, tuple[int, ...]]]:
    """(name, layer, heads): every head, then every whole layer."""
    out = [(head_name(l, h), l, (h,)) for l in range(n_layers) for h in range(n_heads)]
    out += [(f"L{l}", l, tuple(range(n_heads))) for l in range(n_layers)]
    return out


def resample_table(task: Task, seed: int) -> Int[Tensor, "n_groups k"]:
    """For each (group, selector), the selector whose activations replace it: never itself."""
    gen = torch_generator(seed, "resample")
    offset = torch.randint(1, task.k, (task.n_groups, task.k), generator=gen)
    return (torch.arange(task.k).view(1, -1) + offset) % task.k


def _ids_of(rows: Int[Tensor, "n len"], table: Int[Tensor, "m len"]) -> Int[Tensor, " n"]:
    """Index of each row of `rows` in `table` (exact match), for any string length."""
    table = table.to(rows.device)
    uniq, inverse = torch.unique(torch.cat([table, rows]), dim=0, return_inverse=True)
    lookup = torch.full((len(uniq),), -1, dtype=torch.long, device=rows.device)
    lookup[inverse[: len(table)]] = torch.arange(len(table), device=rows.device)
    found = lookup[inverse[len(table) :]]
    if bool((found < 0).any()):
        raise InterpError("resample ablation: an input is not an example of the task")
    return found


def resample_tokens(task: Task, tokens: Int[Tensor, "n seq"], table: Int[Tensor, "n_groups k"]) -> Int[Tensor, "n seq"]:
    """`tokens` (any length up to the full sequence) with z replaced by the resample selector."""
    lay = task.layout
    b0, b1 = lay.segments["B"]
    z0, z1 = lay.segments["z"]
    group = _ids_of(tokens[:, b0:b1], task.bases)
    own = _ids_of(tokens[:, z0:z1], task.selectors)
    source = tokens.clone()
    source[:, z0:z1] = task.selectors.to(tokens.device)[table.to(tokens.device)[group, own]]
    return source


@torch.no_grad()
def reference_mean_z(model: nn.Module, task: Task, seed: int, size: int = REFERENCE_SIZE) -> list[Tensor]:
    """Per-layer, per-position mean of hook_z over a fixed reference set: [seq, head, d_head]."""
    gen = torch_generator(seed, "reference")
    idx = torch.randperm(task.size, generator=gen)[: min(size, task.size)]
    names = [get_act_name("z", l) for l in range(model.cfg.n_layers)]
    device = next(model.parameters()).device
    with torch.no_grad():
        _, cache = model.run_with_cache(task.tokens[idx].to(device), names_filter=lambda n: n in names)
    return [cache[name].mean(0) for name in names]


class Ablated(nn.Module):
    """`model` with the heads `targets` ({layer: heads}) ablated by `method`; tokens -> logits."""

    def __init__(
        self,
        model: nn.Module,
        targets: dict[int, tuple[int, ...]],
        method: str,
        task: Task | None = None,
        mean_z: list[Tensor] | None = None,
        table: Tensor | None = None,
    ):
        super().__init__()
        if method not in METHODS:
            raise InterpError(f"unknown ablation method {method!r}; allowed: {', '.join(METHODS)}")
        if method == "mean" and mean_z is None:
            raise ValueError("mean ablation needs mean_z (reference_mean_z)")
        if method == "resample" and (task is None or table is None or not task.has_selector):
            raise InterpError("resample ablation needs a task with a selector and a resample table")
        self.model, self.targets, self.method = model, targets, method
        self.task, self.mean_z, self.table = task, mean_z, table

    def forward(self, tokens: Int[Tensor, "n seq"]) -> Float[Tensor, "n seq vocab"]:
        source: dict[str, Tensor] = {}
        names = {get_act_name("z", layer): layer for layer in self.targets}
        if self.method == "resample":
            src_tokens = resample_tokens(self.task, tokens, self.table)
            with torch.no_grad():
                _, cache = self.model.run_with_cache(src_tokens, names_filter=lambda n: n in names)
            source = {name: cache[name] for name in names}

        def hook(z, hook):
            heads = list(self.targets[names[hook.name]])
            z = z.clone()
            if self.method == "zero":
                z[:, :, heads] = 0.0
            elif self.method == "mean":
                z[:, :, heads] = self.mean_z[names[hook.name]][: z.shape[1], heads].to(z.dtype)
            else:
                z[:, :, heads] = source[hook.name][:, :, heads]
            return z

        return self.model.run_with_hooks(tokens, fwd_hooks=[(name, hook) for name in names])


def probe(task: Task, n_examples: int, seed: int) -> tuple[Tensor, Tensor | None]:
    gen = torch_generator(seed, "probe")
    idx = torch.randperm(task.size, generator=gen)[: min(n_examples, task.size)].sort().values
    alt = task.other_selectors(idx, gen) if task.has_selector else None
    return idx, alt


@torch.no_grad()
def at_step(
    run: Run,
    step: int,
    method: str = "zero",
    n_examples: int = DEFAULT_EXAMPLES,
    device: str = "cpu",
    label: str = "",
) -> pd.DataFrame:
    if method not in METHODS:
        raise InterpError(f"unknown ablation method {method!r}; allowed: {', '.join(METHODS)}")
    task = run.task
    model = run.model(step, device=device)
    idx, alt = probe(task, n_examples, run.spec.seed)
    extra = {}
    if method == "mean":
        extra["mean_z"] = reference_mean_z(model, task, run.spec.seed)
    if method == "resample":
        extra["table"] = resample_table(task, run.spec.seed)
    with torch.no_grad():
        clean = summarize(evaluate_examples(model, task, idx, alt))
        rows = []
        for name, layer, heads in components(model.cfg.n_layers, model.cfg.n_heads):
            ablated = Ablated(model, {layer: heads}, method, task=task, **extra)
            values = summarize(evaluate_examples(ablated, task, idx, alt))
            row = {"step": step, "label": label, "method": method, "component": name, "layer": layer,
                   "head": heads[0] if len(heads) == 1 else pd.NA}
            for m in METRICS:
                row[m] = values[m]
                row[f"clean_{m}"] = clean[m]
                row[f"delta_{m}"] = values[m] - clean[m]
            rows.append(row)
    df = pd.DataFrame(rows)
    df["head"] = df["head"].astype("Int64")
    df["n_examples"] = len(idx)
    return df


def at(
    run: Run,
    steps: int | str | Iterable | None = "pre,mid,post",
    method: str = "zero",
    n_examples: int = DEFAULT_EXAMPLES,
    device: str = "cpu",
    progress: bool = False,
) -> pd.DataFrame:
    """Ablate every head and every layer at each requested step (tidy: one row per component)."""
    if method not in METHODS:
        raise InterpError(f"unknown ablation method {method!r}; allowed: {', '.join(METHODS)}")
    return over_steps(run, steps, lambda s, label: at_step(run, s, method, n_examples, device, label),
                      f"ablation ({method})", progress)
