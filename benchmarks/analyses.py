"""Analysis speed: head patching against transformer_lens.patching, fast ablation against the
hook path, and the whole suite (cold and warm).

    python benchmarks/analyses.py                       # on checkpoints/demo, CPU
    python benchmarks/analyses.py --run RUN --device cuda --pairs 256

1. Head patching (all positions and per position) at the demo's mid step with `--pairs`
   clean/corrupted pairs, against `get_act_patch_attn_head_out_by_pos` (and `_all_pos`) on
   identical inputs; the results are checked to agree to 1e-4 before timing counts.
2. The full ablation (every head and layer, zero / mean / resample, at pre, mid and post)
   through `ablation.effects` (the recorded-prefix fast path) and through the TransformerLens
   hook path (`Ablated` + `evaluate_examples`, what ablation ran before), on the same probe;
   the largest difference of the summarised metrics between the two is reported.
3. `interp analyze` over the run: cold (empty cache, in a temporary copy of the run), warm
   (second call, in-process) and per analysis (cold, each alone).
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import torch

from interp.analysis import ablation, patching, registry
from interp.analysis.common import select_steps
from interp.analysis.suite import run_suite
from interp.runs import CACHE_DIR, Run


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def _ablation(run, device: str, n_examples: int) -> dict:
    """The full ablation (every head and layer, three methods) at pre, mid and the last step
    (post = 2 tau when it lies within the run), fast path against the hook path."""
    from interp.metrics import evaluate_examples, summarize

    task = run.task
    idx, alt = task.sample(n_examples, run.spec.seed, "probe")
    steps = [s for s, _ in select_steps(run, "pre,mid,post")]
    if len(steps) < 3:  # 2 tau lies beyond the run: its last step stands in for post
        steps.append(run.steps[-1])
    t_fast = t_hook = worst = 0.0
    for step in steps:
        model = run.model(step, device=device)
        comps = ablation.components(model.cfg.n_layers, model.cfg.n_heads)
        start = time.perf_counter()
        extra = {"mean_z": ablation.reference_mean_z(model, task, run.spec.seed),
                 "table": ablation.resample_table(task, run.spec.seed)}
        fast = ablation.effects_by_method(model, task, idx, alt, comps, ablation.METHODS, **extra)
        t_fast += time.perf_counter() - start
        start = time.perf_counter()
        for method in ablation.METHODS:
            hook = {name: evaluate_examples(ablation.Ablated(model, {layer: heads}, method, task=task, **extra),
                                            task, idx, alt) for name, layer, heads in comps}
            for name in hook:
                a, b = summarize(fast[method][name]), summarize(hook[name])
                worst = max(worst, max(abs(a[m] - b[m]) for m in a if a[m] == a[m]))
        t_hook += time.perf_counter() - start
    return {"ablation_steps": steps, "ablation_examples": len(idx), "ablation_fast_s": round(t_fast, 2),
            "ablation_hook_s": round(t_hook, 2), "ablation_speedup": round(t_hook / t_fast, 1),
            "ablation_max_abs_diff": worst}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default="checkpoints/demo")
    parser.add_argument("--pairs", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--skip-suite", action="store_true")
    parser.add_argument("--skip-ablation", action="store_true")
    parser.add_argument("--ablation-examples", type=int, default=ablation.DEFAULT_EXAMPLES)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    from transformer_lens import patching as tl_patching

    run = Run.open(args.run)
    ((step, _),) = select_steps(run, ["mid"])
    task = run.task
    model = run.model(step, device=args.device)
    pairs = {k: v.to(args.device) for k, v in patching.make_pairs(task, args.pairs, run.spec.seed).items()}
    pos = task.layout.decision_pos
    metric = lambda logits: patching.logit_diff(logits[:, pos], pairs["good"], pairs["bad"]).mean()  # noqa: E731

    with torch.no_grad():
        patching.patch_heads(model, pairs["clean"], pairs["corrupt"], pairs["good"], pairs["bad"], pos)  # warm-up
        ours, t_ours = _timed(lambda: patching.patch_heads(
            model, pairs["clean"], pairs["corrupt"], pairs["good"], pairs["bad"], pos))
        _, clean_cache = model.run_with_cache(pairs["clean"])
        with contextlib.redirect_stderr(io.StringIO()):  # TransformerLens's own progress bars
            tl_by, t_tl_by = _timed(lambda: tl_patching.get_act_patch_attn_head_out_by_pos(
                model, pairs["corrupt"], clean_cache, metric))
            tl_all, t_tl_all = _timed(lambda: tl_patching.get_act_patch_attn_head_out_all_pos(
                model, pairs["corrupt"], clean_cache, metric))
    err = max(float((ours["by_pos"] - tl_by).abs().max()), float((ours["all_pos"] - tl_all).abs().max()))
    if err > 1e-4:
        raise SystemExit(f"our head patching disagrees with transformer_lens by {err}")
    out = {
        "benchmark": "analyses",
        "run": args.run,
        "device": args.device,
        "threads": torch.get_num_threads(),
        "step": step,
        "pairs": len(pairs["idx"]),
        "max_abs_diff_vs_tl": err,
        "ours_heads_all_and_by_pos_s": round(t_ours, 4),
        "tl_by_pos_s": round(t_tl_by, 3),
        "tl_all_pos_s": round(t_tl_all, 3),
        "speedup_vs_tl_by_pos": round(t_tl_by / t_ours, 1),
        "speedup_vs_tl_both": round((t_tl_by + t_tl_all) / t_ours, 1),
    }
    if not args.skip_ablation:
        out.update(_ablation(run, args.device, args.ablation_examples))
    if not args.skip_suite:
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / run.path.name
            shutil.copytree(run.path, copy, ignore=shutil.ignore_patterns(CACHE_DIR))
            cold_run = Run.open(copy)
            cold, t_cold = _timed(lambda: run_suite(cold_run, device=args.device, progress=False))
            warm, t_warm = _timed(lambda: run_suite(Run.open(copy), device=args.device, progress=False))
            per = {}
            for name in registry.default_names():
                shutil.rmtree(copy / CACHE_DIR, ignore_errors=True)
                _, per[name] = _timed(lambda: run_suite(Run.open(copy), only=name, device=args.device,
                                                        progress=False))
        out.update({
            "checkpoints": len(run.steps),
            "analyze_cold_s": round(t_cold, 2),
            "analyze_warm_s": round(t_warm, 2),
            "analyze_cold_computed": cold.cache_misses,
            "analyze_warm_from_cache": warm.cache_hits,
            "analyze_cold_alone_s": {k: round(v, 2) for k, v in per.items()},
        })
    print(json.dumps(out))


if __name__ == "__main__":
    main()
