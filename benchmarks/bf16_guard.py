"""The bf16 guard: does --precision bf16 change the science? Trains one preset for several seeds
in float32 and in bf16 and compares tau_half, the plateau height and the routing head.

    python benchmarks/bf16_guard.py                        # tiny preset, seeds 0 1 2, in /tmp/interp-bf16-guard
    INTERP_BF16_EMULATION=1 python benchmarks/bf16_guard.py     # on a CPU without bfloat16 units

The rule, fixed before any run (`interp.precision.guard_verdict`; docs/scaling.md):
  tau   every bf16 tau_half lies within the float32 seeds' range [min, max] widened by half its
        width w = max - min on each side, and the mean of the bf16 taus lies within [min, max];
  height every bf16 plateau height (Lc / log K on the plateau) is within 0.02 of the float32 run
        of the same seed;
  head  reported per seed (the routing head varies between seeds in the tiny preset: docs/scaling.md);
        it does not decide the verdict.
bf16 passes when "tau" and "height" hold. Runs already trained in the folder are reused (a
second call only recomputes the comparison). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import torch

from interp.analysis.cache import ResultCache
from interp.analysis.suite import routing_head_of
from interp.precision import guard_verdict
from interp.presets import preset
from interp.runs import Run
from interp.summary import run_summary
from interp.train import train


def _trained(folder: Path, name: str, spec) -> tuple[Run, float | None]:
    path = folder / name
    if Run.is_run(path):
        run = Run.open(path)
        if (run.status or {}).get("state") == "done":
            return run, None
    else:
        run = Run.create(path, spec)
    start = time.perf_counter()
    train(run, progress=False)
    return Run.open(path), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--folder", default="/tmp/interp-bf16-guard")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    rows: dict[str, list[dict]] = {"float32": [], "bf16": []}
    for precision in rows:
        for seed in args.seeds:
            spec = preset(args.preset).override(seed=seed, precision=precision)
            run, seconds = _trained(folder, f"{args.preset}-{precision}-s{seed}", spec)
            summary = run_summary(run)
            head = routing_head_of(run, ResultCache(run))
            rows[precision].append({
                "seed": seed, "tau_half": summary["tau_half"], "plateau_height": summary["plateau_height"],
                "snap_step": summary["snap_step"], "routing_head": head[0] if head else None,
                "train_seconds": None if seconds is None else round(seconds, 1),
                "steps_run": summary["last_step"]})
    print(json.dumps({"benchmark": "bf16_guard", "preset": args.preset, "threads": args.threads, **rows,
                      "verdict": guard_verdict(rows["float32"], rows["bf16"])}))


if __name__ == "__main__":
    main()
