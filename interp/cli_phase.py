"""The `interp phase` command (parsing and printing only): the learning-rate phase diagram of a sweep
(interp.sweeps.phase; docs/phase.md). Its dissipation laws are `interp scaling --q` (interp.cli_sweep)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def cmd_phase(args: argparse.Namespace) -> int:
    from interp.outcome import parse_rules
    from interp.sweeps.phase import check_phase_sweep, phase, phase_table
    from interp.sweeps.sweep import Sweep

    rules = parse_rules(args.rule)  # an unknown rule is refused before the sweep is read
    from interp.files import check_output_file

    for path, what in ((args.csv, "per-run table (--csv)"), (args.figure, "figure (--figure)")):
        if path:
            check_output_file(path, what)
    if args.figure and not str(args.figure).lower().endswith(".svg"):
        from interp.errors import InterpError

        raise InterpError(f"the figure (--figure) must be an .svg file, got {args.figure}")
    sweep = Sweep.open(args.sweep)
    runs = phase_table(sweep, rules)
    check_phase_sweep(runs, str(args.sweep))  # one line on a sweep with no boundary to fit, before any work
    if not args.json:
        print(f"calibrating eta_c's interval for this grid ({args.sims} simulated grids per scenario) ...",
              file=sys.stderr)
    result = phase(sweep, rules, sims=args.sims, runs=runs)
    if args.csv:
        from interp.files import atomic_write_bytes

        atomic_write_bytes(Path(args.csv), result.runs.to_csv(index=False).encode())
    if args.figure:
        from interp.plots.phase import phase_figure

        phase_figure(result, args.figure)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
        return 0
    for line in result.lines():
        print(line)
    return 0


def add_parsers(sub) -> None:
    from interp.cli_sweep import _positive_int, path_arg

    p = sub.add_parser("phase", help="the learning-rate phase diagram of a sweep: outcomes, eta_c(K), critical slowing",
                       description="interp phase SWEEP: each run's outcome (transitioned, stuck, diverged) by the "
                                   "rules it was trained with, the share that transitions per (lr, K) with exact "
                                   "intervals, eta_c(K) three ways (ours: logistic GLM on log lr with a calibrated "
                                   "profile interval; the author's least-squares fit; a bracket) and critical slowing "
                                   "(docs/phase.md).")
    p.add_argument("sweep", type=path_arg("the sweep folder"))
    p.add_argument("--rule", action="append", metavar="NAME=VALUE",
                   help="judge again with a changed outcome rule (plateau_band, plateau_gap, transition_below, "
                        "transition_hold, stuck_hold, stuck_after, diverge_above, diverge_hold, diverge_after); "
                        "repeatable")
    p.add_argument("--sims", type=_positive_int, default=1000,
                   help="simulated grids per scenario for the interval's calibration (default: 1000)")
    p.add_argument("--csv", type=path_arg("--csv"), help="write the per-run table (outcome, t1, t2, widths, Q) here")
    p.add_argument("--figure", type=path_arg("--figure"), help="write the phase-diagram figure here (an .svg file)")
    p.add_argument("--json", action="store_true", help="everything as JSON")
    p.set_defaults(func=cmd_phase)
