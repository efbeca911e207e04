"""The training step's arithmetic: float32, or bfloat16 autocast on hardware that has it.

With `precision="bf16"` the step's forward and backward run under `torch.autocast(...,
dtype=torch.bfloat16)`: matrix products take bfloat16 inputs and accumulate in float32, while
the master weights, the AdamW state, the loss (computed from float32 logits), the evaluation
metrics and the checkpoints stay float32. It pays only where the processor has bfloat16 matrix
units (a CUDA GPU with bf16, or a CPU with avx512_bf16 / amx_bf16); elsewhere PyTorch emulates
it, slower than float32, so a run asks for the hardware and is refused without it. Setting
INTERP_BF16_EMULATION=1 runs the same arithmetic emulated anyway (for tests, and to continue
a bf16 run on a machine without the units).
"""

from __future__ import annotations

import os
import statistics

import torch

from interp.errors import InterpError

EMULATION_ENV = "INTERP_BF16_EMULATION"


def bf16_hardware(device: str) -> tuple[bool, str]:
    """(whether `device` has bfloat16 matrix units, what was found)."""
    kind = torch.device(device).type
    if kind == "cuda":
        ok = torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
        return ok, f"CUDA device {torch.cuda.get_device_name(torch.device(device)) if torch.cuda.is_available() else '?'}"
    if kind == "cpu":
        units = [name for name, probe in (("avx512_bf16", "_is_avx512_bf16_supported"),
                                          ("amx_bf16", "_is_amx_tile_supported"))
                 if getattr(torch.cpu, probe, lambda: False)()]
        capability = torch.backends.cpu.get_cpu_capability()
        return bool(units), ", ".join(units) if units else f"a CPU with {capability} and neither avx512_bf16 nor amx_bf16"
    return False, f"device type {kind}"


def emulation_allowed() -> bool:
    return os.environ.get(EMULATION_ENV, "") not in ("", "0")


def check_precision(precision: str, device: str) -> None:
    """Refuse bf16 on a device without bfloat16 matrix units (unless emulation is asked for)."""
    if precision != "bf16" or emulation_allowed():
        return
    ok, found = bf16_hardware(device)
    if not ok:
        raise InterpError(
            f"precision bf16 needs bfloat16 matrix units on {device}; found {found}, where bf16 would run "
            f"emulated and slower than float32. Use --precision float32, a GPU with bf16, or set "
            f"{EMULATION_ENV}=1 to run the bf16 arithmetic emulated anyway")


class Autocast:
    """A model's forward under bfloat16 autocast, returning float32 logits (so the loss is
    computed in float32). Backward runs in the dtypes the forward recorded."""

    def __init__(self, forward, device: str):
        self.forward = forward
        self.device_type = torch.device(device).type

    def __call__(self, tokens):
        with torch.autocast(self.device_type, dtype=torch.bfloat16):
            logits = self.forward(tokens)
        return logits.float()


def training_forward(forward, precision: str, device: str):
    """The forward the training step calls: `forward` itself for float32, autocast for bf16."""
    return Autocast(forward, device) if precision == "bf16" else forward


HEIGHT_TOLERANCE = 0.02  # Lc / log K on the plateau, bf16 against float32 of the same seed


def guard_verdict(float32: list[dict], bf16: list[dict]) -> dict:
    """Does bf16 change the science? The rule, fixed before any run (benchmarks/bf16_guard.py):

    - tau: every bf16 tau_half lies within the float32 seeds' range [min, max] widened by half
      its width w on each side, and the mean of the bf16 taus lies within [min, max];
    - height: each bf16 plateau height is within HEIGHT_TOLERANCE of the float32 run of the
      same seed (rows in the same seed order);
    - the routing heads are counted (same head, same seed), not judged: they vary between seeds.
    Rows: {"tau_half", "plateau_height", "routing_head"}; a run without a tau fails the rule.
    """
    if len(float32) != len(bf16) or len(float32) < 2:
        raise InterpError(f"the guard compares the same seeds (at least 2) in both precisions; got "
                          f"{len(float32)} float32 and {len(bf16)} bf16 runs")
    if any(r["tau_half"] is None for r in float32):
        raise InterpError("a float32 run has no tau_half (it did not snap): the guard has no range to compare with")
    taus = [r["tau_half"] for r in float32]
    low, high = min(taus), max(taus)
    w = high - low
    btaus = [r["tau_half"] for r in bf16]
    snapped = all(t is not None for t in btaus)
    tau_ok = snapped and all(low - w / 2 <= t <= high + w / 2 for t in btaus) and low <= statistics.mean(btaus) <= high
    height_ok = all(a["plateau_height"] is not None and b["plateau_height"] is not None
                    and abs(a["plateau_height"] - b["plateau_height"]) <= HEIGHT_TOLERANCE
                    for a, b in zip(float32, bf16))
    return {"float32_range": [low, high], "allowed_each": [low - w / 2, high + w / 2],
            "bf16_mean": statistics.mean(btaus) if snapped else None, "tau": tau_ok, "height": height_ok,
            "same_head": sum(a.get("routing_head") == b.get("routing_head") for a, b in zip(float32, bf16)),
            "passes": tau_ok and height_ok}
