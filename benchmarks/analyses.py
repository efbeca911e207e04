"""Analysis speed: head patching against transformer_lens.patching, fast ablation against the
hook path, and the whole suite (cold and warm).

    python benchmarks/analyses.py                       # on checkpoints/demo, CPU
    python benchmarks/analyses.py --run RUN --device cuda --pairs 256

1. Head patching (all positions and per position) at the demo's mid step with `--pairs`
   clean/corrupted pairs, against `get_act_patch_attn_head_out_by_pos` (and `_all_pos`) on
   identical inputs; the results are checked to agree to 1e-4 before timing counts.
2. The full ablation (every head and layer, zero / mean / resample, at pre, mid and post)
   through `ablation.effects_by_method` (the recorded-prefix fast path) and through the TransformerLens
   hook path (`Ablated` + `evaluate_examples`, what ablation ran before), on the same probe;
   the largest difference of the summarised metrics between the two is reported.
3. `interp analyze` over the run: cold (empty cache, in a temporary copy of the run), warm
   (second call, in-process) and per analysis (cold, each alone). With `--flops`, each
   analysis runs once more, cold, under `torch.utils.flop_counter.FlopCounterMode` (matrix
   products and attention only): its GFLOP, its rate in the timed run, and the seconds it would
   take at the rate of a plain float32 matrix product measured in the same process (the bound:
   what the suite would cost if every product ran as fast as a bare `mm`); then the whole suite once
   more under the counter (`analyze_gflop`: work shared between analyses counts once) and the cold
   suite's seconds over that bound (`analyze_cold_over_bound`).
4. The fast path's hand-written parts (`interp.fastpath`) against TransformerLens's own
   `start_at_layer` / `stop_at_layer` doing the same job at the mid step, each pair checked
   to agree before its timing counts (`engine_*`: ours, TransformerLens's, the ratio):
   - tree: the candidate forward of the ablation probe (`run_tree`: each prefix once) against
     `model` on the K full sequences (`stop_at_layer` cannot share a prefix either);
   - tree_record: the same, recording resid_pre and hook_z of every layer, against
     `run_with_cache(..., stop_at_layer=n_layers)`;
   - resume_tree: zero-ablating each head of each layer of that probe (`resume_tree` from the
     record) against `run_with_hooks(resid_pre, start_at_layer=layer)` with a hook_z hook;
   - resume_from_z / resume_from_resid: head patching at all positions and residual patching
     at every (layer, position) on the patching pairs, against `start_at_layer` with the
     cached corrupted resid_pre (and a hook_z hook for heads).
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
from interp.fastpath import base_cache, resume_from_resid, resume_from_z, resume_tree, run_tree
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


def _best(fn, repeat: int = 3):
    """The output and the best of `repeat` timings (the engine parts are short)."""
    times = []
    for _ in range(repeat):
        out, t = _timed(fn)
        times.append(t)
    return out, min(times)


def _pair(out: dict, part: str, ours, tl, tol: float) -> None:
    """Record one engine comparison: (result, seconds) of ours and of TransformerLens's."""
    err = float((ours[0].double() - tl[0].double()).abs().max())
    if err > tol:
        raise SystemExit(f"engine {part}: ours and transformer_lens disagree by {err}")
    out[f"engine_{part}_ours_s"] = round(ours[1], 4)
    out[f"engine_{part}_tl_s"] = round(tl[1], 4)
    out[f"engine_{part}_speedup"] = round(tl[1] / ours[1], 1)


@torch.no_grad()
def _engine(model, task, seed: int, pairs: dict, n_examples: int) -> dict:
    """Each hand-written part of interp.fastpath against start_at_layer / stop_at_layer."""
    from transformer_lens.utilities import get_act_name

    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    lay = task.layout
    dec, end = lay.decision_pos, lay.loss_pos[-1] + 1
    idx, _ = task.sample(n_examples, seed, "probe")
    device = next(model.parameters()).device
    prefix, cands = task.tokens[idx, : dec + 1].to(device), task.candidates(idx).to(device)
    full = task.with_candidates(idx)[:, :, :end].reshape(-1, end).to(device)  # [n K, T]
    n, k = cands.shape[:2]
    out: dict = {}

    def tree_logits():
        tree = run_tree(model, prefix, cands[:, :, :-1])
        return torch.cat([tree.first_logits.unsqueeze(1), tree.cont_logits[:, 0]], 1)  # candidate 0

    _pair(out, "tree", _best(tree_logits), _best(lambda: model(full).view(n, k, end, -1)[:, 0, dec:]), 1e-4)
    wanted = {get_act_name(kind, l) for l in range(n_layers) for kind in ("z", "resid_pre")}
    tl_record = lambda: model.run_with_cache(full, stop_at_layer=n_layers, names_filter=lambda m: m in wanted)[1]  # noqa: E731
    ours = _best(lambda: run_tree(model, prefix, cands[:, :, :-1], record=True))
    tl = _best(tl_record)
    tl_z = tl[0][get_act_name("z", n_layers - 1)]  # [n K, T, head, d_head]: candidate 0's continuation
    _pair(out, "tree_record", (ours[0].cont_z[-1][:, 0], ours[1]),
          (tl_z.view(n, k, *tl_z.shape[1:])[:, 0, dec + 1 :], tl[1]), 1e-4)

    # zero-ablate head h of `layer` in variant h: all heads of a layer in one batch
    tree, record = ours[0], tl[0]
    rows = torch.arange(n, device=device).repeat(n_heads)
    mask = torch.eye(n_heads, dtype=torch.bool, device=device)

    def ours_ablate():
        firsts = []
        for layer in range(n_layers):
            zp, zc = tree.prefix_z[layer], tree.cont_z[layer]
            new_p = torch.where(mask.view(n_heads, 1, 1, n_heads, 1), 0.0, zp.unsqueeze(0)).flatten(0, 1)
            new_c = torch.where(mask.view(n_heads, 1, 1, 1, n_heads, 1), 0.0, zc.unsqueeze(0)).flatten(0, 1)
            firsts.append(resume_tree(model, tree, layer, new_p, new_c, rows)[0])
        return torch.stack(firsts)

    head_of_row = torch.arange(n_heads, device=device).repeat_interleave(n * k)

    def zero_head(z, hook):
        z = z.clone()
        z[torch.arange(len(z), device=device), :, head_of_row] = 0.0
        return z

    def tl_ablate():
        firsts = []
        for layer in range(n_layers):
            resid = record[get_act_name("resid_pre", layer)].repeat(n_heads, 1, 1)
            logits = model.run_with_hooks(resid, start_at_layer=layer, fwd_hooks=[(get_act_name("z", layer), zero_head)])
            firsts.append(logits.view(n_heads, n, k, end, -1)[:, :, 0, dec].flatten(0, 1))
        return torch.stack(firsts)

    _pair(out, "resume_tree", _best(ours_ablate, 2), _best(tl_ablate, 2), 1e-4)

    # patching: the corrupted run cached once, the clean activations patched in
    clean, corrupt = pairs["clean"][:, : dec + 1], pairs["corrupt"][:, : dec + 1]
    clean_cache, cache = base_cache(model, clean), base_cache(model, corrupt)
    m = len(clean)
    rows = torch.arange(m, device=device).repeat(n_heads)
    one_hot = torch.nn.functional.one_hot(torch.arange(n_heads, device=device).repeat_interleave(m), n_heads).bool()
    z_of = [torch.where(one_hot.view(-1, 1, n_heads, 1), clean_cache.z[l][rows], cache.z[l][rows]) for l in range(n_layers)]
    ours = _best(lambda: torch.stack([resume_from_z(model, cache, l, z_of[l], 0, rows) for l in range(n_layers)]))

    def tl_heads():
        outs = []
        for l in range(n_layers):
            hook = (get_act_name("z", l), lambda z, hook, l=l: z_of[l])
            outs.append(model.run_with_hooks(cache.resid_pre[l][rows], start_at_layer=l, fwd_hooks=[hook])[:, -1])
        return torch.stack(outs)

    _pair(out, "resume_from_z", ours, _best(tl_heads), 1e-4)
    rows = torch.arange(m, device=device)

    def patched(layer, p):
        resid = cache.resid_pre[layer].clone()
        resid[:, p] = clean_cache.resid_pre[layer][:, p]
        return resid

    grid = [(layer, p) for layer in range(n_layers) for p in range(dec + 1)]
    inputs = {(layer, p): patched(layer, p) for layer, p in grid}
    ours = _best(lambda: torch.stack([resume_from_resid(model, cache, layer, inputs[layer, p][:, p:], p, rows)
                                      for layer, p in grid]))
    tl = _best(lambda: torch.stack([model(inputs[layer, p], start_at_layer=layer)[:, -1] for layer, p in grid]))
    _pair(out, "resume_from_resid", ours, tl, 1e-4)
    return out


def _mm_rate(device: str, shape=(4096, 128, 512), repeat: int = 20) -> float:
    """GFLOP/s of a bare float32 matrix product of the model's MLP shape (batch rows x d_model x
    d_mlp), best of `repeat`: the reference rate of the bound. Larger products can run faster
    (1024^3 reached 52 GFLOP/s against 29 for this shape in one test), so it is a bound for the
    products the analyses make, not for every product."""
    m, k, n = shape
    a, b = torch.randn(m, k, device=device), torch.randn(k, n, device=device)
    best = float("inf")
    for _ in range(repeat + 1):
        start = time.perf_counter()
        a @ b
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return 2 * m * k * n / best / 1e9


def _flops(copy: Path, seconds: dict[str, float], device: str) -> dict:
    """Each analysis once more, cold, under FlopCounterMode: GFLOP, rate and the bound."""
    from torch.utils.flop_counter import FlopCounterMode

    rate = _mm_rate(device)
    rows = {}
    for name in seconds:
        shutil.rmtree(copy / CACHE_DIR, ignore_errors=True)
        with FlopCounterMode(display=False) as counter:
            run_suite(Run.open(copy), only=name, device=device, progress=False)
        gflop = counter.get_total_flops() / 1e9
        rows[name] = {"gflop": round(gflop, 1), "seconds": round(seconds[name], 2),
                      "gflop_per_s": round(gflop / seconds[name], 1), "bound_s": round(gflop / rate, 2)}
    shutil.rmtree(copy / CACHE_DIR, ignore_errors=True)
    with FlopCounterMode(display=False) as counter:  # the whole suite: forwards shared between analyses count once
        run_suite(Run.open(copy), device=device, progress=False)
    suite_gflop = counter.get_total_flops() / 1e9
    return {"mm_gflop_per_s": round(rate, 1), "analyze_alone_flops": rows,
            "analyze_alone_bound_s": round(sum(r["bound_s"] for r in rows.values()), 2),
            "analyze_gflop": round(suite_gflop, 1), "analyze_bound_s": round(suite_gflop / rate, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default="checkpoints/demo")
    parser.add_argument("--pairs", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--skip-suite", action="store_true")
    parser.add_argument("--skip-ablation", action="store_true")
    parser.add_argument("--skip-engine", action="store_true")
    parser.add_argument("--ablation-examples", type=int, default=ablation.DEFAULT_EXAMPLES)
    parser.add_argument("--flops", action="store_true",
                        help="also count each analysis's FLOPs (one more cold pass) against a matrix-product bound")
    parser.add_argument("--engine-examples", type=int, default=64,
                        help="probe size of the engine comparison (TransformerLens's ablation is slow)")
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
    if not args.skip_engine:
        out.update(_engine(model, task, run.spec.seed, pairs, args.engine_examples))
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
            if args.flops:
                out.update(_flops(copy, per, args.device))
        out.update({
            "checkpoints": len(run.steps),
            "analyze_cold_s": round(t_cold, 2),
            "analyze_warm_s": round(t_warm, 2),
            "analyze_cold_computed": cold.cache_misses,
            "analyze_warm_from_cache": warm.cache_hits,
            "analyze_cold_alone_s": {k: round(v, 2) for k, v in per.items()},
        })
        if "analyze_bound_s" in out:
            out["analyze_cold_over_bound"] = round(t_cold / out["analyze_bound_s"], 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
