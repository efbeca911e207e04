"""Cost of one training step of each fork arm, relative to a plain minibatch step.

    python benchmarks/forks.py                       # the demo at step 400, 10 steps per arm
    python benchmarks/forks.py --run RUN --at 500 --steps 20

The state at the fork step is had once (replayed and verified: its time is printed too). Each
arm then trains `--steps` steps from that state in memory, with the training step `interp.train`
drives (`interp.forks.arm_steps.ArmStep`), without evaluation or checkpoints; the time per step
is the median over the steps after the first. Prints one JSON line: seconds per step and the
ratio to `minibatch` per arm, and the cost of one realised-update-power sample (a full-gradient
pass and a shadow update). The full-gradient arms cost about D / batch_size minibatch steps.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch


def main() -> None:
    from interp.checkpoints import load_params
    from interp.forks.arm_steps import ArmStep
    from interp.forks.arms import make_arm
    from interp.replay import state_at
    from interp.model import build_model
    from interp.runs import Run
    from interp.spec import VOCAB_SIZE
    from interp.steps import MinibatchStep, build_optimizer

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", default="checkpoints/demo")
    p.add_argument("--at", type=int, default=400)
    p.add_argument("--steps", type=int, default=10)
    args = p.parse_args()
    run = Run.open(args.run)
    began = time.perf_counter()
    state, source = state_at(run, args.at)
    state_seconds = time.perf_counter() - began
    task, tspec = run.task, run.spec.train
    arms = ["minibatch", "full_batch", "measured_noise", "isotropic_noise", "v_only_noise", "reset_optimizer"]
    out = {"run": args.run, "at": args.at, "state": source, "state_seconds": round(state_seconds, 2),
           "D": task.size, "batch_size": tspec.batch_size, "threads": torch.get_num_threads(), "arms": {}}
    torch.use_deterministic_algorithms(True)
    for name, gamma in [(a, 0) for a in arms] + [("minibatch", 1)]:
        model = build_model(run.spec.model, task.layout.length, VOCAB_SIZE)
        load_params(model, state.params)
        optimizer = build_optimizer(model, tspec)
        optimizer.load_state_dict(state.optimizer)
        gens = {"batches": torch.Generator().manual_seed(1), "noise": torch.Generator().manual_seed(2)}
        plain = MinibatchStep(model, model, optimizer, task.tokens, task.layout.loss_pos, task.size, gens["batches"],
                              tspec, "cpu")
        step = ArmStep(make_arm(name), plain, model, model, optimizer, task.tokens, task.layout.loss_pos, gens,
                       tspec.batch_size, args.at, gamma, 10**9, "cpu")
        model.train()
        times = []
        for t in range(args.at + 1, args.at + 1 + args.steps):
            t0 = time.perf_counter()
            step(t)
            times.append(time.perf_counter() - t0)
        key = name if not gamma else "gamma_sample (minibatch + shadow)"
        out["arms"][key] = {"seconds_per_step": round(statistics.median(times[1:]), 4)}
    base = out["arms"]["minibatch"]["seconds_per_step"]
    for entry in out["arms"].values():
        entry["ratio_to_minibatch"] = round(entry["seconds_per_step"] / base, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
