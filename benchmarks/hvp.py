"""Hessian-vector products: seconds per product by each way of computing one.

    python benchmarks/hvp.py                              # the demo at step 900, its whole training set
    python benchmarks/hvp.py --preset paper --n-examples 2048   # a paper-preset model (fresh weights)

Variants (`interp.analysis.hessian.HessianOperator`): the forward ("hooked": TransformerLens's own;
"fast": `interp.fastpath.objective`), the product ("reverse": double backward;
"forward-over-reverse": `torch.func.jvp` over `torch.func.grad`), whether each chunk's gradient
graph is kept between products (`graph_memory_mb`), and `hvps` (`vmap` over forward-over-reverse,
several vectors at once; reported per vector). Each is timed as the best of `--repeat` products
after one untimed product (which also builds the kept graphs: reported as `first_s`), and checked
against the hooked double backward (relative difference of the products). A product's time
does not depend on the weights, so a preset's model is timed at its initialisation. Prints one
JSON line.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
import warnings

import torch

from interp.analysis import hessian
from interp.model import build_model
from interp.presets import preset
from interp.runs import Run
from interp.task import VOCAB_SIZE, Task

VARIANTS = (  # name, forward, product, graph_memory_mb
    ("hooked reverse (before)", "hooked", "reverse", 0),
    ("hooked forward-over-reverse", "hooked", "forward-over-reverse", 0),
    ("fast reverse", "fast", "reverse", 0),
    ("fast forward-over-reverse", "fast", "forward-over-reverse", 0),
    ("fast reverse, graphs kept (default)", "fast", "reverse", hessian.DEFAULTS["graph_memory_mb"]),
)


def _model_and_tokens(args):
    if args.preset:
        spec = preset(args.preset)
        task = Task.generate(spec.task, seed=spec.seed)
        model = build_model(spec.model, task.layout.length, VOCAB_SIZE, seed=spec.seed).eval()
        label = f"preset {args.preset} (initialisation)"
    else:
        run = Run.open(args.run)
        task, model = run.task, run.model(run.resolve_step(args.step))
        label = f"{args.run} step {run.resolve_step(args.step)}"
    idx = hessian.sample_indices(task, args.n_examples, 0)
    return model, task.tokens[idx], task.layout.loss_pos, label


def _best(fn, repeat: int) -> tuple[torch.Tensor, float, float]:
    start = time.perf_counter()
    out = fn()
    first = time.perf_counter() - start
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return out, first, best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default="checkpoints/demo")
    parser.add_argument("--step", default="900")
    parser.add_argument("--preset", default=None, help="time a fresh model of this preset instead of a run")
    parser.add_argument("--n-examples", type=int, default=None, help="sample size (default: the whole training set)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--vmap", type=int, default=4, help="vectors per batched product (0: skip)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    model, tokens, loss_pos, label = _model_and_tokens(args)
    v = torch.randn(sum(p.numel() for p in model.parameters()), generator=torch.Generator().manual_seed(0),
                    dtype=torch.float64)
    out: dict = {"benchmark": "hvp", "model": label, "n_examples": len(tokens), "threads": torch.get_num_threads(),
                 "variants": []}
    reference = None
    for name, forward, product, graph_mb in VARIANTS:
        op = hessian.HessianOperator(model, tokens, loss_pos, forward=forward, product=product,
                                     graph_memory_mb=graph_mb)
        hv, first, best = _best(lambda: op.hvp(v), args.repeat)
        reference = hv if reference is None else reference
        out["variants"].append({"variant": name, "first_s": round(first, 2), "s_per_product": round(best, 2),
                                "rel_diff": float((hv - reference).norm() / reference.norm()),
                                "graphs_kept_mb": round(op.graph_bytes / 2**20)})
        op.release()
    if args.vmap:
        op = hessian.HessianOperator(model, tokens, loss_pos)
        vs = torch.randn(args.vmap, op.dim, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
        vs[0] = v
        hv, first, best = _best(lambda: op.hvps(vs), max(1, args.repeat - 1))
        out["variants"].append({"variant": f"fast hvps (vmap of forward-over-reverse, {args.vmap} vectors)",
                                "first_s": round(first / args.vmap, 2), "s_per_product": round(best / args.vmap, 2),
                                "rel_diff": float((hv[0] - reference).norm() / reference.norm())})
    out["max_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
