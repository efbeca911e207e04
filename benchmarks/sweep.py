"""Wall time of one small sweep: sequentially, on a local pool of 2 workers, and on Ray.

    python benchmarks/sweep.py                    # 4 tiny runs (K = 5, 10 x seeds 0, 1), 400 steps
    python benchmarks/sweep.py --steps 1300       # to the tiny preset's snap

Each backend trains the same sweep into its own temporary folder. Sequential is one worker
with both cores' threads; the pool and Ray give each run 1 thread (cores / workers). Ray's
start (`ray.init` of a local 2-CPU instance) is timed on its own and is not part of its sweep
time. Prints one JSON line; the weights of the pool's and Ray's runs are checked to be
bit-identical (same threads per run).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from interp.presets import preset
from interp.sweeps.sweep import Sweep, SweepSpec, train_sweep


def _spec(steps: int) -> SweepSpec:
    base = preset("tiny")
    base = replace(base, train=replace(base.train, steps=steps, stop_after_snap=None, checkpoint_every=100,
                                       early_checkpoints=False, densify=False))
    return SweepSpec(base=base, grid=(("task.k", (5, 10)), ("seed", (0, 1))), name="bench")


def _weights(sweep: Sweep) -> dict:
    out = {}
    for run in sweep.runs:
        params = run.load_resume().params
        out[run.path.name] = {k: v.clone() for k, v in params.items()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--skip-ray", action="store_true")
    args = parser.parse_args()
    import torch

    out = {"benchmark": "sweep", "runs": 4, "steps": args.steps, "cores": torch.get_num_threads()}
    with tempfile.TemporaryDirectory() as tmp:
        weights = {}
        modes = [("sequential", dict(workers=1)), ("local_2_workers", dict(workers=2))]
        if not args.skip_ray:
            import ray

            start = time.perf_counter()
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            out["ray_start_s"] = round(time.perf_counter() - start, 2)
            modes.append(("ray_2_cpus", dict(backend="ray")))
        for name, kwargs in modes:
            sweep = Sweep.create(Path(tmp) / name, _spec(args.steps))
            start = time.perf_counter()
            outcome = train_sweep(sweep, progress=False, **kwargs)
            out[f"{name}_s"] = round(time.perf_counter() - start, 2)
            if outcome.failed:
                raise SystemExit(f"{name}: {outcome.failed}")
            weights[name] = _weights(sweep)
        if "ray_2_cpus" in weights:
            a, b = weights["local_2_workers"], weights["ray_2_cpus"]
            out["ray_equals_pool"] = all(torch.equal(a[r][k], b[r][k]) for r in a for k in a[r])
            import ray

            ray.shutdown()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
