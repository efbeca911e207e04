"""Step 7: the circuits across a family: a small sweep trained, every run analysed, the circuit columns.

    python examples/07_family.py [SWEEP_DIR]

Four runs of a small, fast-snapping model (K = 3, 4 x seeds 0, 1, at most 400 steps each) on 2
local workers, then the analysis suite over every finished run (each cached in its own run
folder), then one row per run: its routing head, when z is carried and used (as leads over
tau), the shuffle gap's lead, the routing head's ablation effect at tau and the groups above
80% at tau/2, and the family fits. Running it again computes nothing. The same from the
command line: `interp sweep ... --out DIR --workers 2`, then `interp analyze DIR --workers 2`.
"""

import sys

import interp
from interp.sweeps.analyze import analyze_sweep
from interp.sweeps.circuit_fits import circuit_fits
from interp.sweeps.sweep import Sweep, SweepSpec, train_sweep

COLUMNS = ["run", "k", "seed", "tau_half", "gap_lead", "routing_head", "carried_share_lead", "used_ablation_lead",
           "ablation_at_tau", "groups_above_80_at_half_tau"]


def main() -> None:
    folder = sys.argv[1] if len(sys.argv) > 1 else "sweeps/family"
    base = interp.preset("tiny").override(n_bases=24, n_layers=2, n_heads=2, d_model=32, d_head=16, d_mlp=64,
                                          batch_size=16, lr=0.003, eval_every=10, eval_size=64, checkpoint_every=50,
                                          steps=400, stop_after_snap=30)
    spec = SweepSpec(base=base, grid=(("task.k", (3, 4)), ("seed", (0, 1))), name="family")
    sweep = Sweep.open(folder) if Sweep.is_sweep(folder) else Sweep.create(folder, spec)
    train_sweep(sweep, workers=2, progress=False)
    done = analyze_sweep(sweep, workers=2, progress=False)
    print(f"analysed {len(done.results)} runs: {done.computed} results computed, {done.cached} from the cache")
    table = sweep.table(circuits=True)
    print(table[COLUMNS].to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    fits = circuit_fits(table)
    for name, result in fits.results.items():
        print(f"{name}: {result.summary()}")


if __name__ == "__main__":  # the local pool starts its workers by importing this file again
    main()
