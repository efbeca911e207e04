"""Is one head sufficient? Every head ablated but one, for each head (the author's keep-only ablation).

Heads of every layer are ablated at once, so this takes the TransformerLens hook path of the ablation module
(`interp.analysis.ablation.Ablated`, its methods zero, mean and resample); not run by default (a forward of the
probe per head and method). Rows: step, method, kept (a head, or "no head": every head ablated), the metrics with
the unablated `clean_*` and `delta_*`, and `recovered`, the share of the candidate loss's gain (no head -> clean)
that the kept head alone recovers. The author's finding (EXPERIMENT_RESULTS.md, Experiment 3): never sufficient;
the best single head after the transition leaves a loss of 8.95 against ~0.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

import pandas as pd
from jaxtyping import Int

from interp.analysis import ablation
from interp.analysis.ablation import check_methods, reference_mean_z, resample_table
from interp.analysis.common import across_of, head_name, no_grad
from interp.analysis.findings import Rows
from interp.analysis.registry import ABLATION_METHOD, ABLATION_METHODS, N_EXAMPLES, Analysis
from interp.names import METRICS
from interp.runs import Run
from interp.task import Task

if TYPE_CHECKING or "torch" in sys.modules:  # as in interp.analysis.ablation: torch only where the code computes
    from torch import Tensor, nn

DEFAULTS = {"methods": ABLATION_METHODS, "n_examples": 256}
NO_HEAD = "no head"  # the component with every head ablated: the floor a kept head is measured from


def keep_only_targets(n_layers: int, n_heads: int, kept: tuple[int, int] | None) -> dict[int, tuple[int, ...]]:
    """{layer: heads ablated} with every head of every layer ablated but `kept` (None: every head)."""
    out = {l: tuple(h for h in range(n_heads) if (l, h) != kept) for l in range(n_layers)}
    return {l: hs for l, hs in out.items() if hs}


@no_grad
def keep_only_effects(model: nn.Module, task: Task, idx: Int[Tensor, " n"], alt: Int[Tensor, " n"] | None,
                      methods: tuple[str, ...], mean_z: list[Tensor] | None = None,
                      table: Tensor | None = None) -> dict[str, dict[str, dict[str, Tensor]]]:
    """Per-example metrics with every head but one ablated, for each head (is one head sufficient?; the author's
    keep-only ablation), with every head ablated (NO_HEAD), and unablated ("clean"): {method: {name: metrics}}.
    Heads of several layers are ablated at once, so this takes the TransformerLens hook path (`Ablated`)."""
    from interp.metrics import evaluate_examples

    methods = check_methods(methods)
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    clean = evaluate_examples(model, task, idx, alt)
    ablated = ablation.Ablated  # checks each method's inputs
    out = {}
    for method in methods:
        kw = dict(task=task, mean_z=mean_z, table=table)
        out[method] = {"clean": clean,
                       NO_HEAD: evaluate_examples(ablated(model, keep_only_targets(n_layers, n_heads, None), method, **kw),
                                                  task, idx, alt)}
        for layer in range(n_layers):
            for head in range(n_heads):
                kept = ablated(model, keep_only_targets(n_layers, n_heads, (layer, head)), method, **kw)
                out[method][head_name(layer, head)] = evaluate_examples(kept, task, idx, alt)
    return out


@no_grad
def keep_only_at_step(run: Run, step: int, *, model: nn.Module | None = None,
                      methods: str | Iterable[str] = DEFAULTS["methods"], n_examples: int = DEFAULTS["n_examples"],
                      device: str = "cpu") -> pd.DataFrame:
    """One row per (method, kept head), and one for NO_HEAD: the metrics of `interp.names.METRICS` with every
    other head ablated, the unablated `clean_M`, `delta_M` = M - clean_M, and for the candidate loss the share of
    the clean model's gain over NO_HEAD that the kept head alone recovers (`recovered` = (none - M) / (none -
    clean); 1: the head suffices, 0: it does nothing alone), on the ablation's probe."""
    from interp.metrics import summarize

    methods = check_methods(methods)
    task = run.task
    if model is None:
        model = run.model(step, device=device)
    device = str(next(model.parameters()).device)
    idx, alt = task.sample(n_examples, run.spec.seed, "probe")
    extra = {}
    if "mean" in methods:
        extra["mean_z"] = reference_mean_z(model, task, run.spec.seed)
    if "resample" in methods:
        extra["table"] = resample_table(task, run.spec.seed).to(device)
    every = keep_only_effects(model, task, idx, alt, methods, **extra)
    rows = []
    for method in methods:
        clean, none = summarize(every[method]["clean"]), summarize(every[method][NO_HEAD])
        for name, per in every[method].items():
            if name == "clean":
                continue
            values = summarize(per)
            layer_head = None if name == NO_HEAD else (int(name[1:].split("H")[0]), int(name.split("H")[1]))
            row = {"step": step, "method": method, "kept": name,
                   "layer": pd.NA if layer_head is None else layer_head[0],
                   "head": pd.NA if layer_head is None else layer_head[1]}
            for m in METRICS:
                row[m] = values[m]
                row[f"clean_{m}"] = clean[m]
                row[f"delta_{m}"] = values[m] - clean[m]
            gain = none["loss_cand"] - clean["loss_cand"]
            row["recovered"] = (none["loss_cand"] - values["loss_cand"]) / gain if gain > 0 else float("nan")
            rows.append(row)
    df = pd.DataFrame(rows)
    df["layer"] = df["layer"].astype("Int64")
    df["head"] = df["head"].astype("Int64")
    df["n_examples"] = len(idx)
    return df


def at_step(run: Run, step: int, *, model=None, methods=DEFAULTS["methods"], n_examples: int = DEFAULTS["n_examples"],
            device: str = "cpu"):
    """`keep_only_at_step` at one step (the analysis table's entry point)."""
    return keep_only_at_step(run, step, model=model, methods=methods, n_examples=n_examples, device=device)


across = across_of("sufficiency", label=True)
ENTRY = Analysis(
    "sufficiency", __name__, "keep-only ablation: every head ablated but one, for each head (is one head sufficient?)",
    steps="pre,mid,post", options=(ABLATION_METHOD, N_EXAMPLES), default=False, order=41,
)


def findings(run: Run, tables: dict, t: int | None, found: dict) -> dict:
    table = tables["sufficiency"]
    if table.empty:
        return {}
    method = "zero" if "zero" in set(table["method"]) else str(table["method"].iloc[0])
    out: dict = {"sufficiency_method": method}
    heads = table[(table["method"] == method) & (table["kept"] != NO_HEAD)]
    for label in ("pre", "mid", "post", "last"):
        hit = heads[heads["label"].astype(str).str.split("/").apply(lambda parts: label in parts)] \
            if "label" in heads else heads.iloc[0:0]
        if hit.empty:
            continue
        best = hit.loc[hit["loss_cand"].idxmin()]
        out[f"sufficiency_{label}_step"] = int(best["step"])
        out[f"sufficiency_{label}_head"] = str(best["kept"])
        out[f"sufficiency_{label}_loss_cand"] = float(best["loss_cand"])
        out[f"sufficiency_{label}_clean_loss_cand"] = float(best["clean_loss_cand"])
        out[f"sufficiency_{label}_recovered"] = float(best["recovered"])
    return out


def rows(f: dict, tables: dict) -> Rows:
    if "sufficiency_method" not in f:
        return []
    parts = [f"{lab} (step {f[f'sufficiency_{lab}_step']}) {f[f'sufficiency_{lab}_head']} alone: Lc "
             f"{f[f'sufficiency_{lab}_loss_cand']:.3f} against {f[f'sufficiency_{lab}_clean_loss_cand']:.3f} with every "
             f"head, {f[f'sufficiency_{lab}_recovered']:.0%} of the gain"
             for lab in ("pre", "mid", "post", "last") if f"sufficiency_{lab}_step" in f]
    return [(f"one head alone ({f['sufficiency_method']}-ablating the rest)", "; ".join(parts) or "no step")]
