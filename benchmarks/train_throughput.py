"""Training throughput of a preset (default: paper), in optimizer steps per second.

    python benchmarks/train_throughput.py                 # paper preset, batch 128, CPU
    python benchmarks/train_throughput.py --preset tiny --steps 100 --device cuda

Times the same inner loop `interp.train` runs (batch sampling, forward, backward, AdamW,
deterministic algorithms on the CPU), without evaluation or checkpoints, after a few
warm-up steps. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import torch

from interp.metrics import batch_loss
from interp.model import build_model, count_params
from interp.presets import preset
from interp.seeding import torch_generator
from interp.task import VOCAB_SIZE, Task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="paper")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--nondeterministic", action="store_true",
                        help="leave deterministic algorithms off (interp.train turns them on on the CPU)")
    args = parser.parse_args()
    deterministic = args.device == "cpu" and not args.nondeterministic
    torch.use_deterministic_algorithms(deterministic)

    spec = preset(args.preset)
    batch = args.batch_size or spec.train.batch_size
    task = Task.generate(spec.task, spec.seed)
    model = build_model(spec.model, task.layout.length, VOCAB_SIZE, seed=spec.seed, device=args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.train.lr, weight_decay=spec.train.weight_decay)
    gen = torch_generator(spec.seed, "batches")
    tokens = task.tokens.to(args.device)

    def step() -> None:
        idx = torch.randint(task.size, (batch,), generator=gen).to(args.device)
        loss = batch_loss(model, tokens[idx], task.layout.loss_pos)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    print(json.dumps({
        "benchmark": "train_throughput",
        "preset": args.preset,
        "params": count_params(model),
        "batch_size": batch,
        "device": args.device,
        "threads": torch.get_num_threads(),
        "deterministic": deterministic,
        "steps": args.steps,
        "seconds": round(seconds, 3),
        "steps_per_second": round(args.steps / seconds, 2),
        "ms_per_step": round(1000 * seconds / args.steps, 1),
        "machine": platform.machine(),
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
