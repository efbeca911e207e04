"""What `--track tensorboard|wandb` costs a tiny run: the tracker's own time, and the wall time against no tracker.

    python benchmarks/tracking.py                        # replay the demo's log through each tracker, 5 times
    python benchmarks/tracking.py --train --steps 600    # train the tiny preset tracked and untracked, 3 times

The default replays the shipped demo's metrics log (a run of the tiny preset: 66 rows, every row its training
logged) through each tracker as training hands them over (the tracker made with the first row, each row
logged, closed at the end), in a fresh HOME (no W&B account: offline), and times those calls: exactly what
the training loop waits for. `share` is that time over the demo's own training wall time (its status.json:
302.6 s on 2 threads), and over 164 s, the fastest tiny run quoted (docs/runs.md); the machine's load slows
the tracker, never the recorded wall time, so a loaded machine overstates the share. The first session of each
tracker pays its library's import (once per process, as a command pays it): `parts` splits each session into
making the tracker (import, `wandb.init`, the event writer), logging the rows and closing it.

With `--train`, each repeat trains the same run three times, untracked, to TensorBoard and to W&B (offline: a fresh HOME with
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
        self.parts = {"make": 0.0, "log": 0.0, "close": 0.0}

    def __call__(self, run, start):
        began = time.perf_counter()
        sink = self.factory(run, start)
        self.parts["make"] += time.perf_counter() - began
        self.seconds += time.perf_counter() - began
        return _TimedSink(sink, self)


class _TimedSink:
    def __init__(self, sink, timer: Timed):
        self.sink, self.timer = sink, timer

    def log(self, row):
        began = time.perf_counter()
        self.sink.log(row)
        self.timer.parts["log"] += time.perf_counter() - began
        self.timer.seconds += time.perf_counter() - began
        self.timer.rows += 1

    def close(self):
        began = time.perf_counter()
        self.sink.close()
        self.timer.parts["close"] += time.perf_counter() - began
        self.timer.seconds += time.perf_counter() - began


def _spec(steps: int):
    base = preset("tiny")
    return replace(base, train=replace(base.train, steps=steps, stop_after_snap=None))


FASTEST_TINY_S = 164.0  # the fastest tiny-preset run quoted in docs/runs.md (2 threads, evaluation included)


def replay(repeats: int) -> dict:
    """The demo's rows through each tracker, `repeats` times in a rotated order; the seconds of each session."""
    import shutil

    demo = Path(__file__).resolve().parents[1] / "checkpoints" / "demo"
    wall = json.loads((demo / "status.json").read_text())["wall_seconds"]
    kinds = ["tensorboard", "wandb"]
    seconds: dict[str, list[float]] = {k: [] for k in kinds}
    parts: dict[str, list[dict]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as tmp:
        _offline_home(Path(tmp))
        for repeat in range(repeats):
            for kind in kinds[repeat % 2:] + kinds[:repeat % 2]:
                folder = Path(tmp) / f"{kind}-{repeat}" / "demo"
                shutil.copytree(demo, folder, ignore=shutil.ignore_patterns(".lock", "cache", "exports", "states"))
                run = Run.open(folder)
                rows = run.metric_rows()
                timer = Timed(Tracker(kind))
                sink = None
                for row in rows:
                    if sink is None:
                        sink = timer(run, 0)
                    sink.log(row)
                sink.close()
                seconds[kind].append(timer.seconds)
                parts[kind].append({k: round(v, 3) for k, v in timer.parts.items()})
    out = {"benchmark": "tracking", "mode": "replay", "rows": len(rows), "repeats": repeats,
           "demo_wall_s": wall}
    for kind in kinds:
        worst = max(seconds[kind])
        out[kind] = {"seconds": [round(s, 3) for s in seconds[kind]], "parts": parts[kind],
                     "median_s": round(statistics.median(seconds[kind]), 3),
                     "share_of_demo": round(worst / wall, 5), "share_of_fastest_tiny": round(worst / FASTEST_TINY_S, 5)}
    return out


def _offline_home(tmp: Path) -> None:
    os.environ["HOME"] = str(tmp / "home")  # no W&B account: offline, as for a user who has none
    for var in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_CONFIG_DIR"):
        os.environ.pop(var, None)
    (tmp / "home").mkdir(exist_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", action="store_true", help="train tracked and untracked runs (slow)")
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=None, help="default: 5 replays, 3 trainings")
    args = parser.parse_args()
    if not args.train:
        print(json.dumps(replay(args.repeats or 5)))
        return
    args.repeats = args.repeats or 3
    import torch

    kinds = ["none", "tensorboard", "wandb"]
    walls: dict[str, list[float]] = {k: [] for k in kinds}
    sinks: dict[str, list[float]] = {k: [] for k in kinds if k != "none"}
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        _offline_home(Path(tmp))
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
    out = {"benchmark": "tracking", "mode": "train", "preset": "tiny", "steps": args.steps, "repeats": args.repeats,
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
