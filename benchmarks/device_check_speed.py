"""benchmarks/device_check.py, the speed part: the paper preset's training step eager, compiled and under bf16
autocast (issue 19's goal: bf16 at least 1.8x float32 eager), a bare matrix product's rate, and a cold
`interp analyze` of the demo, on the DEVICE and on the CPU of the same machine in the same run (ratios; where the
DEVICE is the CPU there is nothing to take a ratio to).

The step is the one `interp.train` drives (`interp.steps.MinibatchStep`: batch drawn, forward, backward, the gradient
log, AdamW), with the CPU's deterministic kernels as training has them, timed after warm-up steps with the device
synchronised; the compiled variants' first step (the compile) is reported on its own."""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from device_check_lib import Part, one_line, sync, verdict

BF16_GOAL = 1.8  # issue 19: the bf16 autocast step at least this much faster than float32 eager


BLOCKS = 4  # timed blocks per variant, taken in turn across the variants (a neighbour's burst hits each alike)


def _per_block(part: Part, device: str) -> tuple[int, int]:
    """(warm-up steps, steps per timed block) on `device`."""
    if part.quick:
        return 1, 1
    return (10, 12) if device != "cpu" else (2, 2)


def _stepper(device: str, compile_it: bool, precision: str):
    """The paper preset's training step as interp.train drives it, on `device`."""
    from interp.model import build_model
    from interp.precision import training_forward
    from interp.presets import preset
    from interp.seeding import torch_generator
    from interp.steps import MinibatchStep, build_optimizer, compiled
    from interp.task import VOCAB_SIZE

    spec = preset("paper")
    task = _task(spec)
    model = build_model(spec.model, task.layout.length, VOCAB_SIZE, seed=spec.seed, device=device).train()
    forward = training_forward(compiled(model) if compile_it else model, precision, device)
    optimizer = build_optimizer(model, spec.train)
    return MinibatchStep(forward, model, optimizer, task.tokens.to(device), task.layout.loss_pos, task.size,
                         torch_generator(spec.seed, "batches"), spec.train, device)


def step_times(part: Part, device: str, variants: list[tuple[str, bool, str]]) -> dict[str, dict]:
    """ms per paper-preset training step of each variant (name, compiled, precision) on `device`: each built and
    warmed up (its first step timed alone: the compile), then BLOCKS timed blocks of each, the variants in turn, the
    device synchronised around each block; the median block. A variant that fails is {"error": ...}."""
    import torch

    from interp.devices import deterministic_kernels

    warmup, per = _per_block(part, device)
    steps, out = {}, {}
    with deterministic_kernels(device):
        for name, compile_it, precision in variants:
            if part.left() < (60 if compile_it else 15):
                out[name] = {"skipped": f"the time box is spent ({part.left():.0f} s left)"}
                continue
            try:
                step = _stepper(device, compile_it, precision)
                start = time.perf_counter()
                step(1)
                sync(device)
                out[name] = {"first_s": time.perf_counter() - start, "blocks": [], "next": 2 + warmup}
                for t in range(warmup):
                    step(2 + t)
                sync(device)
                steps[name] = step
            except Exception as exc:  # noqa: BLE001 - one variant failing is its row, the others go on
                out[name] = {"error": one_line(exc)}
        for block in range(BLOCKS):
            names = list(steps)
            for name in names[block % len(names):] + names[: block % len(names)] if names else []:
                got = out[name]
                start = time.perf_counter()
                for _ in range(per):
                    steps[name](got["next"])
                    got["next"] += 1
                sync(device)
                got["blocks"].append((time.perf_counter() - start) / per)
    if any(c for _, c, _ in variants):
        torch._dynamo.reset()
    for got in out.values():
        if "blocks" in got:
            got.update(ms=1000 * statistics.median(got["blocks"]), steps=per * len(got["blocks"]), per=per,
                       spread=1000 * (max(got["blocks"]) - min(got["blocks"])))
    return out


_TASKS: dict = {}


def _task(spec):
    from interp.task import Task

    if "paper" not in _TASKS:
        _TASKS["paper"] = Task.generate(spec.task, spec.seed)
    return _TASKS["paper"]


def matmul_rate(device: str, dtype_name: str, size: int) -> float:
    """GFLOP/s of a square matrix product of `size` in `dtype_name` on `device` (random data, after warm-up)."""
    import torch

    dtype = getattr(torch, dtype_name)
    a, b = (torch.randn(size, size, device=device).to(dtype) for _ in range(2))
    for _ in range(2):
        a @ b
    sync(device)
    repeats = 10 if device != "cpu" else 3
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    sync(device)
    return 2 * size**3 * repeats / (time.perf_counter() - start) / 1e9


def _sides(part: Part) -> list[tuple[str, str]]:
    """(role, device): the DEVICE, and the CPU where the DEVICE is not the CPU itself."""
    return [("device", part.device)] + ([] if part.same else [("cpu", "cpu")])


def _row(part: Part, check: str, got: dict, note: str = "", limit: str = "", ok: bool | None = None,
         smaller_is_faster: bool = True) -> None:
    a, b = got.get("device"), got.get("cpu")
    ratio = None
    if a and b:
        ratio = b / a if smaller_is_faster else a / b
    part.row(check, device=a, cpu=b, compare=ratio, limit=limit or ("CPU / DEVICE" if ratio is not None else ""),
             verdict="info" if ok is None else verdict(ok), note=note)


def rates(part: Part) -> None:
    size = 1024 if part.quick else 4096
    for dtype in ("float32", "bfloat16"):
        got = {role: matmul_rate(device, dtype, size if device != "cpu" else min(size, 2048))
               for role, device in _sides(part)}
        _row(part, f"bare {dtype} matrix product (GFLOP/s)", got, smaller_is_faster=False,
             note=f"{size} x {size} (CPU at most 2048); DEVICE / CPU in compare")


def steps(part: Part) -> dict:
    from interp.precision import bf16_hardware

    variants = [("eager float32", False, "float32"), ("compiled float32", True, "float32"),
                ("bf16 autocast", False, "bf16"), ("bf16 autocast, compiled", True, "bf16")]
    measured, notes = {}, {name: [] for name, _, _ in variants}
    for role, device in _sides(part):
        chosen = []
        for name, compile_it, precision in variants:
            if compile_it and (part.quick or role == "cpu"):
                if role == "cpu" and not part.quick:
                    notes[name].append("cpu: the CPU reference times eager steps only (a compile there costs minutes)")
                continue
            if precision == "bf16" and not bf16_hardware(device)[0]:
                notes[name].append(f"{role}: no bf16 units ({bf16_hardware(device)[1]})")
                continue
            chosen.append((name, compile_it, precision))
        measured[role] = step_times(part, device, chosen)
    results: dict[str, dict] = {}
    for name, compile_it, _ in variants:
        if compile_it and part.quick:
            part.row(f"paper step, {name} (ms)", verdict="skipped", note="--quick leaves compiling out (30-90 s a "
                                                                        "variant on a 2-core CPU); the full run times it")
            continue
        got, failed = {}, False
        for role, _ in _sides(part):
            r = measured[role].get(name)
            if r is None:
                continue
            if "error" in r or "skipped" in r:
                failed = failed or "error" in r
                notes[name].append(f"{role}: {r.get('error') or r['skipped']}")
                continue
            got[role] = r["ms"]
            notes[name].append(f"{role}: median of {BLOCKS} blocks of {r['per']} steps taken in turn with the other "
                               f"variants (spread {r['spread']:.1f} ms), first step {r['first_s']:.1f} s"
                               + (" (the compile)" if compile_it else ""))
        results[name] = got
        spent = not got and any("time box" in n for n in notes[name])
        part.row(f"paper step, {name} (ms)", device=got.get("device"), cpu=got.get("cpu"),
                 compare=(got["cpu"] / got["device"]) if got.get("device") and got.get("cpu") else None,
                 limit="CPU / DEVICE" if not part.same else "",
                 verdict="error" if failed else "slow" if spent else "info", note="; ".join(notes[name]))
    f32, bf16 = results.get("eager float32", {}), results.get("bf16 autocast", {})
    for role, device in _sides(part):
        where = "DEVICE" if role == "device" else "CPU"
        units, found = bf16_hardware(device)
        if not units:
            part.row(f"bf16 over float32 eager on the {where} (issue 19)", verdict="skipped",
                     note=f"this machine has no bf16 units ({found})")
        elif role in f32 and role in bf16:
            speedup = f32[role] / bf16[role]
            part.row(f"bf16 over float32 eager on the {where} (issue 19)", **{role: speedup}, limit=f">= {BF16_GOAL}x",
                     verdict=verdict(speedup >= BF16_GOAL), note=f"{found}; {f32[role]:.1f} ms / {bf16[role]:.1f} ms")
        both = results.get("compiled float32", {}).get(role), results.get("bf16 autocast, compiled", {}).get(role)
        if units and all(both):
            part.row(f"bf16 over float32, both compiled, on the {where}", **{role: both[0] / both[1]}, verdict="info",
                     note=f"{both[0]:.1f} ms / {both[1]:.1f} ms; bf16 compiled over float32 eager "
                          f"{f32.get(role, math.nan) / both[1]:.2f}x")
    return results


def cold_analyze(part: Part, demo: Path) -> None:
    """`interp analyze` of the demo in a new process with nothing cached (--no-cache: nothing is written either)."""
    got, notes = {}, []
    for role, device in _sides(part):
        cmd = [sys.executable, "-m", "interp.cli", "analyze", str(demo), "--device", device, "--no-cache", "--quiet"]
        if part.quick:
            cmd += ["--steps", "last"]
        limit = part.left() - 5
        if limit < 10:
            notes.append(f"{role}: skipped, the time box is spent")
            continue
        start = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, env=os.environ.copy())
        except subprocess.TimeoutExpired:
            notes.append(f"{role}: not done in {limit:.0f} s")
            continue
        seconds = time.perf_counter() - start
        if proc.returncode not in (0, 1):
            tail = (proc.stderr.strip().splitlines() or [""])[-1]
            notes.append(f"{role}: exit {proc.returncode}: {tail[:200]}")
            continue
        got[role] = seconds
        notes.append(f"{role}: exit {proc.returncode}")
    scope = "--steps last (quick)" if part.quick else "every checkpoint"
    failed = any("exit" in n and not n.endswith("exit 0") for n in notes)
    _row(part, f"cold interp analyze of the demo, {scope} (s)", got, note="; ".join(notes))
    if failed:
        part.row("cold interp analyze of the demo: exit status", verdict="fail", note="; ".join(notes))


def speed(part: Part) -> None:
    part.check("bare matrix products", lambda: rates(part), need=5)
    part.check("paper step", lambda: steps(part), need=20)
    part.check("cold interp analyze of the demo", lambda: cold_analyze(part, part.work / "demo"), need=15)
