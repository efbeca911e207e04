"""Cost of the mechanism diagnostics: `interp analyze RUN --only diagnostics` cold, and each
analysis alone, over every saved checkpoint of a run (default: the demo).

    python benchmarks/diagnostics.py [--run RUN] [--device cpu]

Each measurement runs on a temporary copy of the run without its cache (cold), one after the
other in this process: the suite loads each checkpoint once and shares it with the analyses
that take the loaded model. Goal (issue: the mechanism diagnostics): the default diagnostics
over the demo's checkpoints within 60 s on 2 cores. Prints one JSON line.
"""

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import torch

from interp.analysis import registry
from interp.analysis.suite import run_suite
from interp.runs import Run

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--run", default="checkpoints/demo")
parser.add_argument("--device", default="cpu")
args = parser.parse_args()


def cold(only: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "run"
        shutil.copytree(args.run, copy, ignore=shutil.ignore_patterns("cache"))
        run = Run.open(copy)
        start = time.perf_counter()
        result = run_suite(run, only=only, device=args.device, progress=False)
        seconds = time.perf_counter() - start
        assert not result.problems, result.problems
        return round(seconds, 2)


out = {"run": args.run, "checkpoints": len(Run.open(args.run).steps), "threads": torch.get_num_threads(),
       "device": args.device, "diagnostics_cold_s": cold("diagnostics")}
for name in registry.GROUPS["diagnostics"]:
    out[f"{name}_cold_s"] = cold(name)
print(json.dumps(out))
