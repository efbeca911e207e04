"""Training throughput of a preset: eager, compiled (torch.compile) and the FLOP bound, side by side.

    python benchmarks/train_throughput.py                        # paper preset, batch 128, CPU
    python benchmarks/train_throughput.py --preset tiny --steps 100 --device cuda
    python benchmarks/train_throughput.py --no-compile           # eager only (and the bf16 column)
    python benchmarks/train_throughput.py --no-bf16              # without the bf16 column
    python benchmarks/train_throughput.py --preset tiny --logging-only   # only the logging's cost

Times the same inner loop `interp.train` runs (batch sampling, forward, backward, AdamW,
deterministic algorithms on the CPU), without evaluation or checkpoints, after warm-up steps.
The compiled loop's first step (the compile) is timed on its own. The FLOP bound is the
step's matrix-product FLOPs (6 x matmul parameters x tokens, plus attention) over the rate a
large float32 matrix product reaches here with the same threads. It also checks that eager
and compiled training agree: the largest weight difference after the timed steps.

The bf16 column trains eager under `--precision bf16` (`interp.precision`: bfloat16 autocast,
float32 master weights and AdamW) against its own bound: the same FLOPs over a bfloat16 matrix
product's rate. The goal (issue 19): at least 1.8x faster than float32 eager on the paper preset,
and within 1.5x of that bound. On a device without bfloat16 units it is skipped unless
INTERP_BF16_EMULATION=1 (then flagged "emulated").

The cost of the metrics log's gradient columns (`interp.steps.GradientLog`: ||g_B||^2 summed on
the device at every step) is measured on `interp.steps.MinibatchStep` itself, eager, with and
without `log_gradients`, in alternating blocks (so drift in the machine's speed hits both); and,
because that difference is within the run-to-run spread, the logging alone as well (`add` on
the step's gradients, repeated). Also the AdamW columns computed at each evaluation row
(`interp.optimizer_stats.optimizer_columns`), per row. Prints one JSON line.
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
from interp.steps import GradientLog, MinibatchStep, build_optimizer
from interp.precision import bf16_hardware, emulation_allowed, training_forward
from interp.train import compiled


def step_flops(spec, batch: int) -> float:
    """Matrix-product FLOPs of one training step (forward + backward = 3x forward)."""
    m, n_ctx = spec.model, spec.task.sequence_length - 1  # inputs are cut after the last scored position
    per_token = m.n_layers * (4 * m.d_model * m.n_heads * m.d_head + 2 * m.d_model * m.d_mlp
                              + 2 * n_ctx * m.n_heads * m.d_head) + m.d_model * VOCAB_SIZE
    return 3 * 2 * per_token * batch * n_ctx


def matmul_rate(device: str, size: int = 2048, repeats: int = 10, dtype: torch.dtype = torch.float32) -> float:
    """GFLOP/s of a large matrix product of `dtype` on `device`."""
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    for _ in range(3):
        a @ b
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return 2 * size**3 * repeats / (time.perf_counter() - start) / 1e9


def timed_loop(spec, batch: int, device: str, compile_it: bool, warmup: int, steps: int,
               precision: str = "float32") -> dict:
    task = Task.generate(spec.task, spec.seed)
    model = build_model(spec.model, task.layout.length, VOCAB_SIZE, seed=spec.seed, device=device)
    forward = training_forward(compiled(model) if compile_it else model, precision, device)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.train.lr, weight_decay=spec.train.weight_decay)
    gen = torch_generator(spec.seed, "batches")
    tokens = task.tokens.to(device)

    def step() -> None:
        idx = torch.randint(task.size, (batch,), generator=gen).to(device)
        loss = batch_loss(forward, tokens[idx], task.layout.loss_pos)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    start = time.perf_counter()
    step()
    sync()
    first = time.perf_counter() - start
    for _ in range(warmup):
        step()
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    seconds = time.perf_counter() - start
    return {"first_step_s": round(first, 2), "ms_per_step": round(1000 * seconds / steps, 1),
            "steps_per_second": round(steps / seconds, 2), "params": {n: p.detach().clone()
                                                                      for n, p in model.named_parameters()},
            "n_params": count_params(model)}


def bf16_column(spec, batch: int, args, flops: float, eager: dict) -> dict:
    """Eager training under --precision bf16 against float32 eager and the bf16 FLOP bound (the
    step's FLOPs over a bfloat16 matrix product's rate). Where the device has no bfloat16 units
    bf16 is emulated: measured only with INTERP_BF16_EMULATION=1, and flagged."""
    hardware, found = bf16_hardware(args.device)
    if not hardware and not emulation_allowed():
        return {"skipped": f"no bfloat16 matrix units ({found}); set INTERP_BF16_EMULATION=1 to time the emulation"}
    # emulated bf16 products run at 1-2 GFLOP/s on a 2-core AVX2 CPU: a smaller product tells the rate
    rate = matmul_rate(args.device, dtype=torch.bfloat16, **({} if hardware else {"size": 512, "repeats": 3}))
    bound = 1000 * flops / (rate * 1e9)
    run = timed_loop(spec, batch, args.device, False, args.warmup, args.steps, precision="bf16")
    diff = max(float((run["params"][n] - eager["params"][n]).abs().max()) for n in eager["params"])
    return {"hardware": found, "emulated": not hardware, "matmul_gflops": round(rate, 1),
            "flop_bound_ms_per_step": round(bound, 1), "ms_per_step": run["ms_per_step"],
            "first_step_s": run["first_step_s"], "speedup_vs_float32_eager": round(eager["ms_per_step"] / run["ms_per_step"], 2),
            "times_bound": round(run["ms_per_step"] / bound, 2), "max_weight_diff_vs_float32": diff}


def logging_cost(spec, batch: int, device: str, warmup: int, steps: int, blocks: int = 4) -> dict:
    """ms per step of MinibatchStep with and without the gradient log, and of the log alone."""
    import dataclasses

    from interp.optimizer_stats import optimizer_columns

    task = Task.generate(spec.task, spec.seed)
    tspec = dataclasses.replace(spec.train, batch_size=batch)
    tokens = task.tokens.to(device)

    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    def stepper(log: bool):
        model = build_model(spec.model, task.layout.length, VOCAB_SIZE, seed=spec.seed, device=device).train()
        opt = build_optimizer(model, tspec)
        step = MinibatchStep(model, model, opt, tokens, task.layout.loss_pos, task.size,
                             torch_generator(spec.seed, "batches"), tspec, device, log_gradients=log)
        for t in range(warmup):
            step(t + 1)
        return step, model, opt

    runs = {True: stepper(True), False: stepper(False)}
    seconds = {True: 0.0, False: 0.0}
    per_block = max(1, steps // blocks)
    for i in range(blocks):
        for log in ((False, True) if i % 2 == 0 else (True, False)):  # neither always goes first
            step = runs[log][0]
            sync()
            start = time.perf_counter()
            for t in range(per_block):
                step(t)
            sync()
            seconds[log] += time.perf_counter() - start
    n = per_block * blocks
    without, with_log = 1000 * seconds[False] / n, 1000 * seconds[True] / n
    step, model, opt = runs[True]
    grads = [p.grad for p in step.params]
    log, repeats = GradientLog(device), 200
    sync()
    start = time.perf_counter()
    for _ in range(repeats):
        log.add(grads, 1e-3)
    sync()
    alone = 1000 * (time.perf_counter() - start) / repeats
    start = time.perf_counter()
    for _ in range(20):
        optimizer_columns(model, opt)
    row = 1000 * (time.perf_counter() - start) / 20
    return {"steps": n, "ms_per_step_without": round(without, 2), "ms_per_step_with": round(with_log, 2),
            "difference_pct": round(100 * (with_log - without) / without, 2),
            "log_alone_ms": round(alone, 3), "log_alone_pct": round(100 * alone / without, 2),
            "optimizer_columns_ms_per_row": round(row, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="paper")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--no-compile", action="store_true", help="time eager training only")
    parser.add_argument("--no-bf16", action="store_true", help="skip the bf16 column (--precision bf16, eager)")
    parser.add_argument("--logging-only", action="store_true",
                        help="time only the gradient logging's cost (with / without, and alone)")
    parser.add_argument("--nondeterministic", action="store_true",
                        help="leave deterministic algorithms off (interp.train turns them on on the CPU)")
    args = parser.parse_args()
    deterministic = args.device == "cpu" and not args.nondeterministic
    torch.use_deterministic_algorithms(deterministic)
    spec = preset(args.preset)
    batch = args.batch_size or spec.train.batch_size
    if args.logging_only:
        print(json.dumps({"benchmark": "train_throughput", "preset": args.preset, "batch_size": batch,
                          "device": args.device, "threads": torch.get_num_threads(), "deterministic": deterministic,
                          "logging": logging_cost(spec, batch, args.device, args.warmup, args.steps),
                          "machine": platform.machine(), "torch": torch.__version__}))
        return
    flops = step_flops(spec, batch)
    rate = matmul_rate(args.device)
    eager = timed_loop(spec, batch, args.device, False, args.warmup, args.steps)
    out = {
        "benchmark": "train_throughput", "preset": args.preset, "params": eager.pop("n_params"),
        "batch_size": batch, "device": args.device, "threads": torch.get_num_threads(),
        "deterministic": deterministic, "steps": args.steps,
        "gflop_per_step": round(flops / 1e9, 2), "matmul_gflops": round(rate, 1),
        "flop_bound_ms_per_step": round(1000 * flops / (rate * 1e9), 1),
        "eager": {k: v for k, v in eager.items() if k != "params"},
    }
    if not args.no_compile:
        comp = timed_loop(spec, batch, args.device, True, args.warmup, args.steps)
        diff = max(float((comp["params"][n] - eager["params"][n]).abs().max()) for n in eager["params"])
        out["compiled"] = {k: v for k, v in comp.items() if k not in ("params", "n_params")}
        out["compiled"]["max_weight_diff_vs_eager"] = diff
        out["compiled"]["speedup"] = round(eager["ms_per_step"] / comp["ms_per_step"], 2)
    if not args.no_bf16:
        out["bf16"] = bf16_column(spec, batch, args, flops, eager)
    out["logging"] = logging_cost(spec, batch, args.device, args.warmup, args.steps)
    out.update({"machine": platform.machine(), "torch": torch.__version__})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
