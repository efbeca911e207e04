"""What every part of benchmarks/device_check.py shares: its rows, its time box, its memory, and the comparisons.

A part runs in a process of its own (the driver starts it and kills it at its time box). It writes one JSON row per
line to its rows file as each check ends, so what was measured before a crash or a timeout is kept. A check that
raises is one "error" row (a failing check never stops the rest); a check that would start after the part's time box
is spent is one "slow" row (reported, not failed: a busy machine is not a failed check).
The reference is always the CPU of the same machine, in the same process; where the
DEVICE is the CPU itself the reference runs on one thread (a kernel splits its sums by thread, so there is still
something to compare), and the speed ratios are left out.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import resource
import time
import traceback
from pathlib import Path

import numpy as np
import pandas as pd

VERDICTS = ("pass", "fail", "info", "skipped", "slow", "error")
# "skipped": the check cannot apply here (no bf16 units, devinterp missing), its note says why; "slow": the check did
# not finish inside its part's time box on this machine (a busy or slow machine is reported, not failed)
RELATIVE_LIMIT = 1e-4  # the analyses on the device against the CPU, after float32 rounding (issue 45)


def one_line(exc: BaseException) -> str:
    """An exception as one line: its type, its message's first line and where it was raised (file:line)."""
    text = str(exc).strip().splitlines()
    where = traceback.extract_tb(exc.__traceback__)
    at = f" ({Path(where[-1].filename).name}:{where[-1].lineno})" if where else ""
    return f"{type(exc).__name__}: {text[0] if text else ''}{at}"[:400]


def sync(device: str) -> None:
    import torch

    kind = torch.device(device).type
    if kind == "cuda":
        torch.cuda.synchronize(device)
    elif kind == "mps":
        torch.mps.synchronize()


class Part:
    """One part of the check in its own process: `device`, the time box's end (`deadline`, time.monotonic), the rows
    file. `check(name, fn)` runs fn(), which writes rows with `row`; `finish()` writes the part's memory row."""

    def __init__(self, name: str, device: str, quick: bool, rows: Path, deadline: float, work: Path):
        import torch

        self.name, self.device, self.quick, self.rows_path, self.deadline = name, device, quick, Path(rows), deadline
        self.work = Path(work)
        self.kind = torch.device(device).type
        self.same = self.kind == "cpu"  # the DEVICE is the CPU: the reference runs on one thread
        self.started = time.monotonic()
        self.threads = torch.get_num_threads()
        if self.kind == "cuda":
            torch.cuda.reset_peak_memory_stats(device)

    # -- rows
    def row(self, check: str, *, device=None, cpu=None, compare=None, limit: str = "", verdict: str = "info",
            seconds: float | None = None, note: str = "") -> dict:
        if verdict not in VERDICTS:
            raise ValueError(f"verdict {verdict!r}; allowed: {', '.join(VERDICTS)}")
        row = {"part": self.name, "check": check, "device": plain(device), "cpu": plain(cpu), "compare": plain(compare),
               "limit": limit, "verdict": verdict, "seconds": None if seconds is None else round(seconds, 2),
               "note": note}
        with open(self.rows_path, "a") as f:
            f.write(json.dumps(row) + "\n")
            f.flush()
        return row

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def check(self, name: str, fn, need: float = 5.0):
        """fn() (it writes its own rows); an exception is one error row, a spent time box one slow row."""
        if self.left() < need:
            self.row(name, verdict="slow", note=f"not run: the part's time box is spent ({self.left():.0f} s left, "
                                                f"{need:.0f} s needed); this machine ran slower than its box assumed")
            return None
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - a failing check is a row, and the rest goes on
            self.row(name, verdict="error", note=one_line(exc))
            return None
        finally:
            if self.kind == "cuda":
                import torch

                torch.cuda.empty_cache()

    @contextlib.contextmanager
    def reference(self):
        """The CPU reference: one thread where the DEVICE is the CPU itself, else the machine's own threads."""
        from interp.devices import torch_threads

        with torch_threads(1 if self.same else None):
            yield

    def timed(self, fn, device: str | None = None):
        """(fn(), seconds), the device synchronised before the clock is read."""
        start = time.perf_counter()
        out = fn()
        sync(device or self.device)
        return out, time.perf_counter() - start

    def finish(self) -> None:
        """The part's memory row: peak device memory (CUDA: the allocator's peak; the CPU: this process's peak RSS)."""
        import torch

        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux -> MiB
        if self.kind == "cuda":
            peak = torch.cuda.max_memory_allocated(self.device) / 2**20
            reserved = torch.cuda.max_memory_reserved(self.device) / 2**20
            note = f"allocator peak; reserved {reserved:,.0f} MiB; host process peak RSS {rss:,.0f} MiB"
        else:
            peak, note = rss, "process peak RSS (the CPU reference included)"
        self.row("peak memory (MiB)", device=round(peak, 1), cpu=round(rss, 1), verdict="info",
                 seconds=time.monotonic() - self.started, note=note)


def plain(value):
    """A value as JSON holds it (numpy scalars to Python, NaN to None)."""
    if isinstance(value, (np.generic,)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else str(value)
    return value


def verdict(ok: bool) -> str:
    return "pass" if ok else "fail"


# ---------------------------------------------------------------------------- comparisons
def column_difference(a: pd.Series, b: pd.Series) -> tuple[float, str]:
    """The largest |a - b| over the column's largest |b|, both rounded to float32 first; inf where one side is NaN
    or infinite and the other is not. For text and booleans: the share of cells that differ."""
    if pd.api.types.is_bool_dtype(a) or not (pd.api.types.is_numeric_dtype(a) and pd.api.types.is_numeric_dtype(b)):
        x, y = a.astype(str).to_numpy(), b.astype(str).to_numpy()
        differ = int((x != y).sum())
        return (math.inf if differ else 0.0), (f"{differ} of {len(x)} cells differ" if differ else "")
    x = a.to_numpy(dtype=np.float64).astype(np.float32).astype(np.float64)
    y = b.to_numpy(dtype=np.float64).astype(np.float32).astype(np.float64)
    fx, fy = np.isfinite(x), np.isfinite(y)
    odd = (fx != fy) | (~fx & ~fy & ~((np.isnan(x) & np.isnan(y)) | (x == y)))
    if odd.any():
        return math.inf, f"{int(odd.sum())} non-finite cells differ"
    both = fx & fy
    if not both.any():
        return 0.0, ""
    scale = float(np.abs(y[both]).max())
    gap = float(np.abs(x[both] - y[both]).max())
    return (gap / scale if scale > 0 else gap), ""


def table_difference(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """{"rel": the largest column difference, "where": its column, "note": why it is infinite}; the tables must have
    the same columns and rows in the same order (the same code made them)."""
    if list(a.columns) != list(b.columns) or len(a) != len(b):
        return {"rel": math.inf, "where": "", "note": f"shapes differ: {a.shape} {list(a.columns)[:6]} against "
                                                      f"{b.shape} {list(b.columns)[:6]}"}
    worst = {"rel": 0.0, "where": "", "note": ""}
    for col in a.columns:
        rel, note = column_difference(a[col].reset_index(drop=True), b[col].reset_index(drop=True))
        if rel > worst["rel"] or (note and not worst["note"]):
            worst = {"rel": rel, "where": col, "note": note}
    return worst


def value_difference(a, b) -> float:
    """|a - b| / |b| for numbers (0 for equal values, inf where only one is NaN); 0 or inf for anything else."""
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return 0.0 if a == b else math.inf
    if math.isnan(a) or math.isnan(b):
        return 0.0 if (math.isnan(a) and math.isnan(b)) else math.inf
    if a == b:
        return 0.0
    return abs(a - b) / abs(b) if b != 0 else math.inf


def findings_difference(a: dict, b: dict) -> tuple[float, str]:
    """The largest difference between two findings dicts (lists and nested dicts entry by entry), and its key."""
    worst, where = 0.0, ""
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            rel, sub = findings_difference(x, y)
            sub = f"{key}.{sub}"
        elif isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)) and len(x) == len(y):
            pairs = [findings_difference({"_": u}, {"_": v})[0] for u, v in zip(x, y)]
            rel, sub = (max(pairs) if pairs else 0.0), key
        else:
            x32 = float(np.float32(x)) if isinstance(x, float) else x
            y32 = float(np.float32(y)) if isinstance(y, float) else y
            rel, sub = value_difference(x32, y32), key
        if rel > worst:
            worst, where = rel, sub
    return worst, where


def fmt(value) -> str:
    """A table cell: numbers to 4 significant figures, None as '-'."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value == 0:
            return "0"
        return f"{value:.3g}" if (abs(value) < 1e-3 or abs(value) >= 1e5) else f"{value:.4g}"
    return str(value)


# the reference workload's median seconds on a quiet 2-core machine (Intel Xeon, AVX-512, 2 torch threads,
# 2026-12-07), which the --quick boxes were sized on; a slower or busier machine gets proportionally longer boxes
REFERENCE_SECONDS = 0.050


def reference_workload_seconds(repeats: int = 5) -> float:
    """The median seconds of a fixed mix of small matrix products and Python (what training a tiny model does), on
    this machine now, with torch's current threads: how fast the machine is at the moment the check starts."""
    import statistics

    import torch

    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(256, 256, generator=gen), torch.randn(256, 256, generator=gen)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        x = a
        for _ in range(200):
            x = torch.nn.functional.gelu(x @ b) * 0.01 + x * 0.99
        sum(i * i for i in range(300_000))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def box_factor(seconds: float, reference: float = REFERENCE_SECONDS) -> float:
    """How much longer this machine's time boxes are: its workload time over the reference machine's, never below 1."""
    return max(1.0, seconds / reference)


def environment(device: str) -> dict:
    """The machine and software the numbers come from."""
    import platform

    import torch

    from interp.precision import bf16_hardware

    cpu_name = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    kind = torch.device(device).type
    out = {"device": device, "cpu": cpu_name, "cpu_count": os.cpu_count(), "threads": torch.get_num_threads(),
           "torch": torch.__version__, "python": platform.python_version(),
           "cpu_bf16": bf16_hardware("cpu")[1] if bf16_hardware("cpu")[0] else None,
           "load_average": [round(x, 2) for x in os.getloadavg()]}
    if kind == "cuda":
        props = torch.cuda.get_device_properties(torch.device(device))
        out.update(gpu=torch.cuda.get_device_name(torch.device(device)), gpu_memory_gib=round(props.total_memory / 2**30, 1),
                   cuda=torch.version.cuda, device_bf16=bf16_hardware(device)[0])
    from importlib import metadata

    for name in ("transformer-lens", "devinterp"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out
