"""Loss-landscape analyses per checkpoint: seconds for the Hessian extremes and the LLC.

    python benchmarks/geometry.py                          # demo run, steps 400, 900 and the last, defaults
    python benchmarks/geometry.py --steps 900 --skip-llc
    python benchmarks/geometry.py --robustness             # also n = 1024 vs 2048 and 2048 vs all
    python benchmarks/geometry.py --before-fast-objective  # the computation before issue 19, for before/after

Each analysis runs at its DEFAULTS (override with the flags) on each step; wall-clock and
process CPU seconds are reported per (analysis, step) together with the headline numbers
(lambda_min, lambda_max, residuals, anisotropy; LLC mean and chain spread). Prints one JSON line.
With the default method="both" one ARPACK run serves both ends: the two counts are that one run.
Timings on a shared machine depend on what else runs: compare CPU seconds with wall seconds.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import torch

from interp.analysis import hessian, llc
from interp.analysis.common import select_steps
from interp.runs import Run


def _timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, round(time.perf_counter() - wall, 2), round(time.process_time() - cpu, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default="checkpoints/demo")
    parser.add_argument("--steps", default="400,900,last", help="saved steps, 'last', or pre/mid/post")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-examples", type=int, default=hessian.DEFAULTS["n_examples"],
                        help="Hessian sample size (default: the whole training set)")
    parser.add_argument("--k", type=int, default=hessian.DEFAULTS["k"])
    parser.add_argument("--chains", type=int, default=llc.DEFAULTS["chains"])
    parser.add_argument("--draws", type=int, default=llc.DEFAULTS["draws"])
    parser.add_argument("--skip-hessian", action="store_true")
    parser.add_argument("--skip-llc", action="store_true")
    parser.add_argument("--robustness", action="store_true", help="n = 1024 vs 2048 and 2048 vs all at each step")
    parser.add_argument("--before-fast-objective", action="store_true",
                        help="the computation before issue 19: TransformerLens's forward for both analyses, "
                             "no kept gradient graphs (for before/after figures in one sitting)")
    args = parser.parse_args()
    extra = {}
    if args.before_fast_objective:
        llc.fast_objective = lambda model: False
        extra = {"forward": "hooked", "graph_memory_mb": 0}
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    run = Run.open(args.run)
    steps = [s for s, _ in select_steps(run, args.steps)]
    out: dict = {"benchmark": "geometry", "run": args.run, "device": args.device,
                 "threads": torch.get_num_threads(), "before_fast_objective": args.before_fast_objective,
                 "hessian": [], "llc": [], "robustness": []}
    for step in steps:
        model = run.model(step, device=args.device)
        if not args.skip_hessian:
            res, wall, cpu = _timed(lambda: hessian.at_step(
                run, step, model=model, n_examples=args.n_examples, k=args.k, device=args.device, **extra))
            h = res["hessian"]
            top = h[(h["which"] == "top") & (h["rank"] == 0)].iloc[0]
            bottom = h[(h["which"] == "bottom") & (h["rank"] == 0)].iloc[0]
            esc = res["hessian_escape"]
            esc = esc[esc["part"] == "all"].sort_values("mass", ascending=False)
            out["hessian"].append({
                "step": step, "wall_s": wall, "cpu_s": cpu, "n_examples": int(top["n_examples"]), "k": args.k,
                "n_matvec_top": int(top["n_matvec"]), "n_matvec_bottom": int(bottom["n_matvec"]),
                "lambda_max": round(float(top["eigenvalue"]), 5), "residual_max": float(top["residual"]),
                "lambda_min": round(float(bottom["eigenvalue"]), 5), "residual_min": float(bottom["residual"]),
                "anisotropy": round(float(top["anisotropy"]), 4), "grad_norm": round(float(top["grad_norm"]), 5),
                "cos_grad_vmin": round(float(top["cos_grad_vmin"]), 4),
                "escape_top3": {c: round(float(m), 4) for c, m in zip(esc["component"][:3], esc["mass"][:3])},
            })
        if args.robustness:
            for pair in ((1024, 2048), (2048, None)):
                rob, wall, cpu = _timed(lambda: hessian.robustness(run, [step], n_examples=pair, k=args.k))
                out["robustness"].append({"step": step, "n": [int(rob["n_small"].iloc[0]), int(rob["n_large"].iloc[0])],
                                          "wall_s": wall, "cpu_s": cpu, **{
                    r["quantity"]: {"small": r["value_small"], "large": r["value_large"],
                                    "rel_change": round(r["rel_change"], 4)} for _, r in rob.iterrows()}})
        if not args.skip_llc:
            table, wall, cpu = _timed(lambda: llc.at_step(
                run, step, model=model, chains=args.chains, draws=args.draws, device=args.device))
            for _, r in llc.summary(table).iterrows():
                out["llc"].append({"step": step, "restrict": r["restrict"], "wall_s_both": wall, "cpu_s_both": cpu,
                                   "llc_mean": round(float(r["llc_mean"]), 4), "llc_std": round(float(r["llc_std"]), 4),
                                   "rel_spread": round(float(r["rel_spread"]), 4)})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
