"""The floor of a cold `interp analyze` on this machine: the suite's own aten ops, replayed alone.

    python benchmarks/analysis_floor.py                  # on checkpoints/demo, CPU

Issue 34 asks for a cold `interp analyze` within 1.3x of its FLOP bound (the suite's matrix-product
FLOPs at the rate of a bare float32 `[4096, 128] x [128, 512]` product). This script says how low
eager PyTorch can go on this machine for the very ops the suite dispatches, so that the goal can be
judged against what is reachable:

1. `interp analyze RUN` cold, timed (a fresh copy of the run, empty cache), after one warm-up.
2. The same cold analyze under `FlopCounterMode`: the bound, as `analyses.py --flops` computes it.
3. The same cold analyze under a dispatch mode that records every aten op it runs: the op, and
   the shape, strides and dtype of each tensor argument (never the data).
4. Each distinct op signature replayed alone on fresh random tensors of the same layout (best of
   3 after a warm-up) and multiplied by how often the suite ran it. Three kinds:
   - products (addmm, mm, bmm, baddbmm): what the bound counts, at their own shapes;
   - the model's own elementwise ops (gelu, softmax, layer norm, log-softmax), which the
     architecture needs at every position whatever the code around them;
   - the rest whose tensor arguments are all floating point (copies, adds, reductions, ...).
     Ops that take index tensors (indexing, gather, scatter) are not replayed: their counts are
     printed.
The replayed sums are floors: no Python, no analysis logic, no file writing, and each op's inputs
hot in cache. Prints one JSON line; `--top N` adds the N costliest signatures of each kind.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from interp.analysis.suite import run_suite
from interp.runs import CACHE_DIR, Run

aten = torch.ops.aten
PRODUCTS = {aten.addmm.default, aten.mm.default, aten.bmm.default, aten.baddbmm.default}
INTRINSIC = {aten.gelu.default, aten._softmax.default, aten.native_layer_norm.default, aten._log_softmax.default}


class _Meta(tuple):
    """A tensor argument as (shape, stride, dtype): enough to make one of the same layout."""


def _meta(x):
    return _Meta((tuple(x.shape), tuple(x.stride()), x.dtype)) if isinstance(x, torch.Tensor) else x


class _Recorder(TorchDispatchMode):
    """Counts every aten op call by signature (op, argument layouts, other arguments)."""

    def __init__(self):
        super().__init__()
        self.calls: Counter = Counter()
        self.args: dict = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            meta = tree_map(_meta, (args, kwargs))
            key = (func, repr(meta))
            self.calls[key] += 1
            self.args.setdefault(key, meta)
        except Exception:  # an argument without a stable repr: counted under its op alone
            self.calls[(func, "?")] += 1
        return func(*args, **kwargs)


def _make(meta):
    if not isinstance(meta, _Meta):
        return meta
    shape, stride, dtype = meta
    t = torch.empty_strided(shape, stride, dtype=dtype)
    if dtype.is_floating_point:
        t.copy_(torch.randn(shape, dtype=dtype))
    elif dtype == torch.bool:
        t.copy_(torch.rand(shape) < 0.5)
    else:
        t.zero_()
    return t


def _replayable(args) -> bool:
    leaves = []
    tree_map(lambda x: leaves.append(x) if isinstance(x, _Meta) else None, args)
    return all(m[2].is_floating_point for m in leaves)


def _time(func, meta, repeat: int = 3) -> float | None:
    try:
        args, kwargs = tree_map(_make, meta)
        func(*args, **kwargs)
    except Exception:  # e.g. an in-place write into an expanded (zero-stride) layout
        return None
    best = float("inf")
    for _ in range(repeat):
        args, kwargs = tree_map(_make, meta)
        start = time.perf_counter()
        func(*args, **kwargs)
        best = min(best, time.perf_counter() - start)
    return best


def _cold(copy: Path, device: str, mode=None) -> float:
    shutil.rmtree(copy / CACHE_DIR, ignore_errors=True)
    start = time.perf_counter()
    if mode is None:
        run_suite(Run.open(copy), device=device, progress=False)
    else:
        with mode:
            run_suite(Run.open(copy), device=device, progress=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default="checkpoints/demo")
    parser.add_argument("--device", default="cpu", choices=["cpu"], help="the floor is a CPU question")
    parser.add_argument("--top", type=int, default=0, help="also list the N costliest signatures of each kind")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    from torch.utils.flop_counter import FlopCounterMode

    from analyses import _mm_rate  # the bound's reference rate, as analyses.py --flops measures it

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "run"
        shutil.copytree(args.run, copy, ignore=shutil.ignore_patterns(CACHE_DIR))
        run_suite(Run.open(copy), only="patching", device=args.device, progress=False)  # warm-up: imports, first calls
        cold = _cold(copy, args.device)
        rate = _mm_rate(args.device)
        counter = FlopCounterMode(display=False)
        _cold(copy, args.device, counter)
        gflop = counter.get_total_flops() / 1e9
        recorder = _Recorder()
        _cold(copy, args.device, recorder)
    bound = gflop / rate
    sums = {"products": 0.0, "intrinsic": 0.0, "rest": 0.0}
    counts = {"products": 0, "intrinsic": 0, "rest": 0}
    top: dict[str, list] = {k: [] for k in sums}
    skipped: Counter = Counter()
    with torch.no_grad():
        for (func, text), n in recorder.calls.items():
            kind = "products" if func in PRODUCTS else "intrinsic" if func in INTRINSIC else "rest"
            meta = recorder.args.get((func, text))
            if meta is None or not _replayable(meta):
                skipped[str(func)] += n
                continue
            seconds = _time(func, meta)
            if seconds is None:
                skipped[str(func)] += n
                continue
            sums[kind] += n * seconds
            counts[kind] += n
            top[kind].append((n * seconds, n, str(func), text[:160]))
    floor = sums["products"] + sums["intrinsic"]
    out = {
        "benchmark": "analysis_floor", "run": args.run, "device": args.device, "threads": torch.get_num_threads(),
        "analyze_cold_s": round(cold, 2), "mm_gflop_per_s": round(rate, 1), "analyze_gflop": round(gflop, 1),
        "analyze_bound_s": round(bound, 2), "analyze_cold_over_bound": round(cold / bound, 2),
        "replayed_products_s": round(sums["products"], 2), "products_over_bound": round(sums["products"] / bound, 2),
        "replayed_intrinsic_s": round(sums["intrinsic"], 2),
        "floor_products_and_intrinsic_s": round(floor, 2), "floor_over_bound": round(floor / bound, 2),
        "replayed_rest_s": round(sums["rest"], 2),
        "replayed_all_over_bound": round((floor + sums["rest"]) / bound, 2),
        "calls_replayed": counts, "calls_not_replayed": dict(skipped.most_common(12)),
    }
    if args.top:
        out["top"] = {k: [{"s": round(s, 3), "n": n, "op": f, "args": a} for s, n, f, a in sorted(v, reverse=True)[: args.top]]
                      for k, v in top.items()}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
