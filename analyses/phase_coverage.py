"""The coverage study behind `interp phase`'s eta_c interval (docs/phase.md, "Coverage"): at a design (the lrs of a
grid and the seeds per cell), how often the profile-likelihood interval covers a known eta_c, under chi-square's
cutoff (3.84) and under the cutoff calibrated by simulation, in every scenario (the true eta_c at 30-70% of the
grid's span in log lr, a sharp, a moderate and a shallow boundary).

    python analyses/phase_coverage.py [--lrs 1e-3,3e-3,1e-2,3e-2] [--seeds 3] [--sims 2000] [--csv FILE]

The default design is phase-tiny's. The calibration uses seed 0, the check a fresh seed (11), so the coverage
printed is out of sample.
"""

import sys

import numpy as np
import pandas as pd
from _common import one_line_errors, parser_of

from interp.errors import InterpError
from interp.sweeps import phase_fit as F


def main(argv=None) -> int:
    one_line_errors("phase_coverage.py")
    p = parser_of(__doc__.split("\n\n")[0])
    p.add_argument("--lrs", default="1e-3,3e-3,1e-2,3e-2", help="the grid's learning rates (comma-separated)")
    p.add_argument("--seeds", type=int, default=3, help="seeds per cell (default 3)")
    p.add_argument("--sims", type=int, default=2000, help="simulated grids per scenario (default 2000)")
    p.add_argument("--csv", help="write the table here")
    args = p.parse_args(argv)
    try:
        lrs = np.array(sorted(float(v) for v in args.lrs.split(",") if v.strip()))
    except ValueError:
        raise InterpError(f"--lrs must be numbers separated by commas, got {args.lrs!r}") from None
    if len(lrs) < 2 or (lrs <= 0).any() or args.seeds < 1 or args.sims < 100:
        raise InterpError("give at least 2 positive learning rates, --seeds >= 1 and --sims >= 100")
    x, n = np.log(lrs), np.full(len(lrs), args.seeds)
    cutoff = F.calibrate_cutoff(x, n, sims=args.sims, seed=0)
    chi2 = F.coverage(x, n, F.CHI2_95, sims=args.sims, seed=11)
    calibrated = F.coverage(x, n, cutoff, sims=args.sims, seed=11)
    table = pd.DataFrame([{"slope": a["slope"], "eta_c": a["eta_c"], "chi2_3.84": a["coverage"],
                           f"calibrated_{cutoff:.2f}": b["coverage"], "sims": a["sims"]}
                          for a, b in zip(chi2, calibrated)])
    print(f"design: lr {', '.join(f'{v:g}' for v in lrs)} x {args.seeds} seeds; calibrated cutoff {cutoff:.2f} "
          f"(chi-square 3.84); coverage of a known eta_c at a fresh seed, {args.sims} grids per scenario")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    print(f"lowest coverage: chi-square {table['chi2_3.84'].min():.3f}, calibrated "
          f"{table[f'calibrated_{cutoff:.2f}'].min():.3f}")
    if args.csv:
        table.to_csv(args.csv, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
