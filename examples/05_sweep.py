"""Step 5: a small sweep (a family of runs), trained on 2 local workers, and its table.

    python examples/05_sweep.py [SWEEP_DIR]

Four short runs of the tiny preset: K = 5, 10 (D = 1500, 3000) x seeds 0, 1, each stopped at
200 steps (before the tiny preset's snap, so tau is censored: the table says so). Running it
again trains nothing: finished runs are skipped. The same from the command line:
`interp sweep --preset tiny --grid task.k=5,10 --grid seed=0,1 --steps 200 --out DIR --workers 2`.
"""

import sys
from dataclasses import replace

import interp
from interp.sweeps.sweep import Sweep, SweepSpec, train_sweep


def main() -> None:
    folder = sys.argv[1] if len(sys.argv) > 1 else "sweeps/example"
    base = interp.preset("tiny")
    base = replace(base, train=replace(base.train, steps=200, checkpoint_every=100, early_checkpoints=False,
                                       densify=False))
    spec = SweepSpec(base=base, grid=(("task.k", (5, 10)), ("seed", (0, 1))), name="example")
    sweep = Sweep.open(folder) if Sweep.is_sweep(folder) else Sweep.create(folder, spec)
    outcome = train_sweep(sweep, workers=2, progress=False)
    for failed in outcome.failed:
        print(f"failed: {failed['name']}: {failed['error']}", file=sys.stderr)
    table = sweep.table()
    print(table[["run", "D", "seed", "status", "steps_run", "tau_half", "censored", "wall_seconds"]]
          .to_string(index=False))


if __name__ == "__main__":  # the local pool starts its workers by importing this file again
    main()
