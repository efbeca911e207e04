"""What `--track tensorboard|wandb` costs a tiny run: the tracker's own time, and the wall time against no tracker.

    python benchmarks/tracking.py                        # the tiny preset, 600 steps, 3 repeats of each
    python benchmarks/tracking.py --steps 1625 --repeats 5

Each repeat trains the same run three times, untracked, to TensorBoard and to W&B (offline: a fresh HOME with
no account), in a rotated order (so that a machine shared with other work slows each kind alike), into a
temporary folder. Two figures per tracker:
- `sink_share`: the seconds spent inside the tracker (making it: W&B's import and `wandb.init`, TensorBoard's
  writer; each logged row; closing it), timed around its calls, over the run's wall time. This is what the
  training loop waits for, measured exactly whatever else runs on the machine.
- `wall_overhead`: the median wall time of the tracked runs against the untracked ones, which also counts what
  the trackers do beside the loop (TensorBoard's writer thread, W&B's service process); on a shared machine
  its noise (the spread of the untracked runs is printed) can exceed the effect.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from interp.presets import preset
from interp.runs import Run
from interp.tracking.sinks import Tracker
from interp.train import train


class Timed:
    """A sink factory whose sink's time (made, each row, closed) is added up in `seconds`."""

    def __init__(self, factory):
        self.factory, self.seconds, self.rows = factory, 0.0, 0

    def __call__(self, run, start):
        began = time.perf_counter()
        sink = self.factory(run, start)
        self.seconds += time.perf_counter() - began
        return _TimedSink(sink, self)


class _TimedSink:
    def __init__(self, sink, timer: Timed):
        self.sink, self.timer = sink, timer

    def log(self, row):
        began = time.perf_counter()
        self.sink.log(row)
        self.timer.seconds += time.perf_counter() - began
        self.timer.rows += 1

    def close(self):
        began = time.perf_counter()
        self.sink.close()
        self.timer.seconds += time.perf_counter() - began


def _spec(steps: int):
    base = preset("tiny")
    return replace(base, train=replace(base.train, steps=steps, stop_after_snap=None))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import torch

    kinds = ["none", "tensorboard", "wandb"]
    walls: dict[str, list[float]] = {k: [] for k in kinds}
    sinks: dict[str, list[float]] = {k: [] for k in kinds if k != "none"}
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HOME"] = str(Path(tmp) / "home")  # no W&B account: offline, as for a user who has none
        for var in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_CONFIG_DIR"):
            os.environ.pop(var, None)
        Path(os.environ["HOME"]).mkdir()
        for repeat in range(args.repeats):
            order = kinds[repeat % 3:] + kinds[:repeat % 3]
            for kind in order:
                run = Run.create(Path(tmp) / f"{kind}-{repeat}", _spec(args.steps))
                timer = None if kind == "none" else Timed(Tracker(kind))
                began = time.perf_counter()
                train(run, progress=False, sink=timer)
                walls[kind].append(time.perf_counter() - began)
                if timer is not None:
                    sinks[kind].append(timer.seconds)
                    rows[kind] = timer.rows
    base = statistics.median(walls["none"])
    out = {"benchmark": "tracking", "preset": "tiny", "steps": args.steps, "repeats": args.repeats,
           "threads": torch.get_num_threads(), "rows_logged": rows,
           "wall_s": {k: [round(w, 2) for w in v] for k, v in walls.items()},
           "untracked_spread": round((max(walls["none"]) - min(walls["none"])) / base, 4)}
    for kind in sinks:
        share = [s / w for s, w in zip(sinks[kind], walls[kind])]
        out[kind] = {"sink_s": [round(s, 3) for s in sinks[kind]], "sink_share_max": round(max(share), 5),
                     "sink_share_median": round(statistics.median(share), 5),
                     "wall_overhead": round(statistics.median(walls[kind]) / base - 1, 4)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
