"""The CLI's quick paths: `interp --help`, `ls`, `show` and a bad-input error, wall time of the
whole process (what a user waits for), best of `--repeat`. Prints one JSON line.

    python benchmarks/cli.py [--run checkpoints/demo] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default="checkpoints/demo")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    exe = shutil.which("interp") or f"{sys.executable} -m interp.cli"
    commands = {"help": ["--help"], "ls": ["ls", "checkpoints"], "show": ["show", args.run],
                "bad_input": ["train", "--k", "0", "--out", "/tmp/interp-bench-never"]}
    out = {"benchmark": "cli", "interp": exe}
    for name, argv in commands.items():
        best = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            subprocess.run([*exe.split(), *argv], capture_output=True)
            best = min(best, time.perf_counter() - start)
        out[f"{name}_s"] = round(best, 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
