"""Is one head sufficient? Every head ablated but one, for each head (the author's keep-only ablation).

The computation is the ablation module's (`interp.analysis.ablation.keep_only_at_step`: the TransformerLens hook
path, since heads of every layer are ablated at once); this module is its entry in the analysis table, not run by
default (a forward of the probe per head and method). Rows: step, method, kept (a head, or "no head": every head
ablated), the metrics with the unablated `clean_*` and `delta_*`, and `recovered`, the share of the candidate
loss's gain (no head -> clean) that the kept head alone recovers. The author's finding (EXPERIMENT_RESULTS.md,
Experiment 3): never sufficient; the best single head after the transition leaves a loss of 8.95 against ~0.
"""

from __future__ import annotations

from interp.analysis.ablation import NO_HEAD, keep_only_at_step
from interp.analysis.common import across_of
from interp.analysis.findings import Rows
from interp.analysis.registry import ABLATION_METHOD, ABLATION_METHODS, N_EXAMPLES, Analysis
from interp.runs import Run

DEFAULTS = {"methods": ABLATION_METHODS, "n_examples": 256}


def at_step(run: Run, step: int, *, model=None, methods=DEFAULTS["methods"], n_examples: int = DEFAULTS["n_examples"],
            device: str = "cpu"):
    """`keep_only_at_step` (interp.analysis.ablation) at one step."""
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
