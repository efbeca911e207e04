"""Activation patching between clean (B, z1 -> A1) and corrupted (B, z2 -> A2) pairs of one group.

Metric: the logit difference LD = logit(a1 of A1) - logit(a1 of A2) at the decision
position, averaged over pairs; normalised as (patched - corrupt) / (clean - corrupt). Where
|clean - corrupt| < `guard` nats (on the plateau both are ~0) the normalised value is NaN
and the raw patched LD is the number to read.

Semantics are those of `transformer_lens.patching`: the corrupted input is run with one clean
activation patched in (resid_pre per layer and position; hook_z per head, at all positions
or at one position). The computation is not: inputs are truncated at the decision position,
layers below the patch and positions before it are reused from cached runs, the last layer is
computed at the decision position only, and all heads of a layer go through in one batch.
Patches after the decision position cannot change it, nor can a head's patch at a position
where its clean and corrupted outputs are equal in every pair (before the selector): both are
filled with the corrupted value.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import pandas as pd
from jaxtyping import Float, Int

from interp.analysis.common import across_of, head_name, no_grad, segment_names, select_steps, shared
from interp.analysis.findings import Rows
from interp.analysis.registry import Analysis, N_PAIRS
from interp.formatting import fmt
from interp.runs import Run
from interp.task import Task

# torch is imported where the code computes, so that reading cached results (a report's findings) never loads it;
# where torch is already loaded (the tests), its names are bound here for jaxtyping's runtime checks of the annotations
if TYPE_CHECKING or "torch" in sys.modules:
    from torch import Tensor, nn

DEFAULT_PAIRS = 64
DEFAULT_GUARD = 0.1
CHUNK_PAIRS = 256  # pairs per batch: bounds memory whatever n_pairs is


def make_pairs(task: Task, n_pairs: int, seed: int) -> dict[str, Tensor]:
    """Seeded clean examples and, for each, a corrupting selector of its group (never its own)."""
    idx, corrupt_sel = task.sample(n_pairs, seed, "probe")
    g = task.group_id[idx]
    return {
        "idx": idx,
        "clean": task.tokens[idx],
        "corrupt": task.with_selector(idx, corrupt_sel),
        "good": task.targets[g, task.selector_id[idx], 0],  # a1 of A1
        "bad": task.targets[g, corrupt_sel, 0],  # a1 of A2
    }


def logit_diff(
    logits: Float[Tensor, "b vocab"], good: Int[Tensor, " b"], bad: Int[Tensor, " b"]
) -> Float[Tensor, " b"]:
    return logits.gather(-1, good.view(-1, 1))[:, 0] - logits.gather(-1, bad.view(-1, 1))[:, 0]


def _patching(tables: Callable[..., dict[str, Tensor]]) -> Callable[..., dict[str, Tensor]]:
    """A patching function of `(model, clean, corrupt, good, bad, pos, bases=None)` made of `tables(model, clean,
    clean_cache, corrupt_cache, corrupt_ld, good, bad, pos)`: the clean and corrupted runs are cached once
    (truncated at `pos`; `bases`: those two runs, already made by `base_runs`), and their mean logit differences
    ("clean", "corrupt") returned after the tables."""

    @no_grad
    def patch(model: nn.Module, clean: Int[Tensor, "n seq"], corrupt: Int[Tensor, "n seq"], good: Int[Tensor, " n"],
              bad: Int[Tensor, " n"], pos: int, bases: tuple | None = None) -> dict[str, Tensor]:
        clean_cache, corrupt_cache = base_runs(model, clean, corrupt, pos) if bases is None else bases
        clean_ld = logit_diff(clean_cache.logits, good, bad).mean()
        corrupt_ld = logit_diff(corrupt_cache.logits, good, bad).mean()
        out = tables(model, clean, clean_cache, corrupt_cache, corrupt_ld, good, bad, pos)
        return {**out, "clean": clean_ld, "corrupt": corrupt_ld}

    patch.__name__, patch.__qualname__, patch.__doc__ = tables.__name__, tables.__qualname__, tables.__doc__
    return patch


@_patching
def patch_residual(model, clean, clean_cache, corrupt_cache, corrupt_ld, good, bad, pos) -> dict[str, Tensor]:
    """Mean LD with the clean resid_pre patched in at each (layer, position): table [L, seq]."""
    import torch

    from interp.fastpath import resume_from_resid

    n, n_layers = len(clean), model.cfg.n_layers
    table = corrupt_ld.repeat(n_layers, clean.shape[1]).clone()
    rows = torch.arange(n, device=clean.device)
    for layer in range(n_layers):
        for p in range(pos + 1):
            resid = corrupt_cache.resid_pre[layer][:, p:].clone()
            resid[:, 0] = clean_cache.resid_pre[layer][:, p]
            logits = resume_from_resid(model, corrupt_cache, layer, resid, p, rows)
            table[layer, p] = logit_diff(logits, good, bad).mean()
    return {"table": table}


@_patching
def patch_heads(model, clean, clean_cache, corrupt_cache, corrupt_ld, good, bad, pos) -> dict[str, Tensor]:
    """Mean LD with each head's clean hook_z patched in: at all positions [L, H], and at each
    position [L, seq, H] (the layouts of transformer_lens.patching)."""
    import torch

    from interp.fastpath import resume_from_z, resume_from_z_at

    n, n_layers, n_heads = len(clean), model.cfg.n_layers, model.cfg.n_heads
    all_pos = torch.empty(n_layers, n_heads, device=clean.device, dtype=corrupt_ld.dtype)
    by_pos = corrupt_ld.repeat(n_layers, clean.shape[1], n_heads).clone()
    # rows: head-major blocks of the n pairs; block h patches head h
    rows = torch.arange(n, device=clean.device).repeat(n_heads)
    head_of_row = torch.arange(n_heads, device=clean.device).repeat_interleave(n)
    one_hot = torch.nn.functional.one_hot(head_of_row, n_heads).bool()  # [H*n, H]
    for layer in range(n_layers):
        z_clean, z_corrupt = clean_cache.z[layer][rows], corrupt_cache.z[layer][rows]
        patch_all = one_hot.view(-1, 1, n_heads, 1)  # every position of head h
        z = torch.where(patch_all, z_clean, z_corrupt)
        logits = resume_from_z(model, corrupt_cache, layer, z, 0, rows)
        all_pos[layer] = logit_diff(logits, good[rows], bad[rows]).view(n_heads, n).mean(-1)
        # at the last layer a head's output at an earlier position never reaches the decision;
        # where every pair's clean and corrupted outputs are equal (before the selector, with
        # causal attention) the patch changes nothing: the corrupted value, already in by_pos
        first = pos if layer == n_layers - 1 else 0
        differs = (clean_cache.z[layer] != corrupt_cache.z[layer]).flatten(2).any(-1).any(0)  # [T]
        for p in torch.nonzero(differs[first : pos + 1]).view(-1).add(first).tolist():
            z = torch.where(one_hot.unsqueeze(-1), z_clean[:, p], z_corrupt[:, p])
            logits = resume_from_z_at(model, corrupt_cache, layer, z, p, rows)
            by_pos[layer, p] = logit_diff(logits, good[rows], bad[rows]).view(n_heads, n).mean(-1)
    return {"all_pos": all_pos, "by_pos": by_pos}


def base_runs(model: nn.Module, clean: Int[Tensor, "n seq"], corrupt: Int[Tensor, "n seq"], pos: int) -> tuple:
    """The clean and the corrupted base runs (`interp.fastpath.base_cache`), truncated at `pos`."""
    from interp.fastpath import base_cache

    return base_cache(model, clean[:, : pos + 1]), base_cache(model, corrupt[:, : pos + 1])


def _chunked(fn, pairs: dict[str, Tensor], pos: int, device: str, bases: Callable | None = None) -> dict[str, Tensor]:
    """Run a patch_* function over chunks of pairs and average the chunk means by size; `bases(start, part)`
    gives a chunk's base runs (else the function makes them)."""
    n = len(pairs["idx"])
    total: dict[str, Tensor] = {}
    for start in range(0, n, CHUNK_PAIRS):
        part = [pairs[k][start : start + CHUNK_PAIRS].to(device) for k in ("clean", "corrupt", "good", "bad")]
        weight = len(part[0]) / n
        given = {} if bases is None else {"bases": bases(start, part)}
        for key, value in fn(*part, pos, **given).items():
            total[key] = total.get(key, 0) + value.double().cpu() * weight
    return total


def _normalised(patched: Tensor, clean: float, corrupt: float, guard: float) -> Tensor:
    import torch

    span = clean - corrupt
    if abs(span) < guard:
        return torch.full_like(patched, float("nan"))
    return (patched - corrupt) / span


DEFAULTS = {"n_pairs": DEFAULT_PAIRS}


def _heads_frame(step: int, res: dict[str, Tensor], guard: float, names: list[str], n_pairs: int) -> pd.DataFrame:
    clean, corrupt = float(res["clean"]), float(res["corrupt"])
    all_pos, by_pos = res["all_pos"], res["by_pos"]
    norm_all = _normalised(all_pos, clean, corrupt, guard)
    norm_by = _normalised(by_pos, clean, corrupt, guard)
    rows = []
    for layer in range(all_pos.shape[0]):
        for head in range(all_pos.shape[1]):
            base = {"step": step, "layer": layer, "head": head, "head_name": head_name(layer, head)}
            rows.append({**base, "position": pd.NA, "segment": "all",
                         "patched_ld": float(all_pos[layer, head]), "normalized": float(norm_all[layer, head])})
            for p in range(by_pos.shape[1]):
                rows.append({**base, "position": p, "segment": names[p],
                             "patched_ld": float(by_pos[layer, p, head]),
                             "normalized": float(norm_by[layer, p, head])})
    df = pd.DataFrame(rows)
    df["position"] = df["position"].astype("Int64")
    df["clean_ld"], df["corrupt_ld"], df["n_pairs"] = clean, corrupt, n_pairs
    return df


def _residual_frame(step: int, res: dict[str, Tensor], guard: float, names: list[str], n_pairs: int) -> pd.DataFrame:
    clean, corrupt = float(res["clean"]), float(res["corrupt"])
    table = res["table"]
    norm = _normalised(table, clean, corrupt, guard)
    rows = [
        {"step": step, "layer": layer, "position": p, "segment": names[p],
         "patched_ld": float(table[layer, p]), "normalized": float(norm[layer, p])}
        for layer in range(table.shape[0]) for p in range(table.shape[1])
    ]
    df = pd.DataFrame(rows)
    df["clean_ld"], df["corrupt_ld"], df["n_pairs"] = clean, corrupt, n_pairs
    return df


@no_grad
def at_step(
    run: Run,
    step: int,
    *,
    model: nn.Module | None = None,
    n_pairs: int = DEFAULT_PAIRS,
    guard: float = DEFAULT_GUARD,
    kinds: tuple[str, ...] = ("heads", "residual"),
    device: str = "cpu",
) -> dict[str, pd.DataFrame]:
    """Activation patching at `step` on `n_pairs` seeded clean/corrupted pairs of one group.

    Returns {"patching_heads": ..., "patching_residual": ...} (the `kinds` asked for):
    - patching_heads: one row per (layer, head) with position NA (the head's clean hook_z
      patched at every position) and one per (layer, head, position); columns step, layer,
      head, head_name, position, segment, patched_ld (mean logit difference a1(A1) - a1(A2)
      at the decision position with the patch, nats), normalized ((patched - corrupt) /
      (clean - corrupt), NaN where |clean - corrupt| < `guard` nats), clean_ld, corrupt_ld, n_pairs;
    - patching_residual: one row per (layer, position) of resid_pre, the same value columns.
    """
    task = run.task
    pairs = make_pairs(task, n_pairs, run.spec.seed)
    if model is None:
        model = run.model(step, device=device)
    device = str(next(model.parameters()).device)
    pos = task.layout.decision_pos
    names = segment_names(task)
    n = len(pairs["idx"])
    # what the usage analysis also asks of this model (the heads' patching), and the base runs both kinds start
    # from, are computed once per model and pairs (`shared`): the suite passes one model to both analyses
    key = (task, n_pairs, run.spec.seed, pos, device, CHUNK_PAIRS)

    def bases(start: int, part: list[Tensor]) -> tuple:
        return shared(model, ("patching_bases", *key, start), lambda: base_runs(model, part[0], part[1], pos))

    def kind(name: str, fn: Callable) -> dict[str, Tensor]:
        return shared(model, (f"patching_{name}", *key),
                      lambda: _chunked(lambda *a, **kw: fn(model, *a, **kw), pairs, pos, device, bases))

    out = {}
    if "heads" in kinds:
        out["patching_heads"] = _heads_frame(step, kind("heads", patch_heads), guard, names, n)
    if "residual" in kinds:
        out["patching_residual"] = _residual_frame(step, kind("residual", patch_residual), guard, names, n)
    return out


across = across_of("patching")  # {table: DataFrame}
ENTRY = Analysis(
    "patching", __name__, "activation patching of the residual stream and of every head at tau",
    steps="mid", tables=("patching_heads", "patching_residual"), options=(N_PAIRS,), order=50,
)


def heads(run: Run, step: int | str = "last", n_pairs: int = DEFAULT_PAIRS, guard: float = DEFAULT_GUARD,
          device: str = "cpu") -> pd.DataFrame:
    """Head patching at one step (the "patching_heads" table of `at_step`)."""
    ((step, _),) = select_steps(run, [step])
    return at_step(run, step, n_pairs=n_pairs, guard=guard, kinds=("heads",), device=device)["patching_heads"]


def residual(run: Run, step: int | str = "last", n_pairs: int = DEFAULT_PAIRS, guard: float = DEFAULT_GUARD,
             device: str = "cpu") -> pd.DataFrame:
    """Residual-stream patching at one step (the "patching_residual" table of `at_step`)."""
    ((step, _),) = select_steps(run, [step])
    return at_step(run, step, n_pairs=n_pairs, guard=guard, kinds=("residual",), device=device)["patching_residual"]


# ---------------------------------------------------------------------------- findings and summary rows
def findings(run: Run, tables: dict, t: int | None, found: dict) -> dict:
    heads = tables["patching_heads"]
    allpos = heads[heads["position"].isna()]
    step = int(allpos["step"].max())
    allpos = allpos[allpos["step"] == step]
    top = allpos.loc[allpos["patched_ld"].idxmax()]
    value = float(top["normalized"])
    return {"patching_step": step, "patching_top_head": str(top["head_name"]),
            "patching_top_normalized": None if math.isnan(value) else value}


def rows(f: dict, tables: dict) -> Rows:
    if "patching_top_head" not in f:
        return []
    return [("patching", f"top head {f['patching_top_head']} at step {f['patching_step']}, restores "
                         f"{fmt(f['patching_top_normalized'], '.2f')} of the logit difference")]
