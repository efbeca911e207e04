"""The `interp phase` command and `interp scaling --q` (parsing and printing only): the learning-rate phase diagram
of a sweep and its dissipation laws (interp.sweeps.phase, interp.sweeps.dissipation; docs/phase.md)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def _fmt(v, spec: str = ".3g", none: str = "-") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return none
    return format(v, spec)


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
    for line in phase_lines(result):
        print(line)
    return 0


def phase_lines(result) -> list[str]:
    """The phase diagram as text: the cells, eta_c per K (three estimates), critical slowing."""
    out = [f"{result.label}: {len(result.runs)} runs; outcome rules"
           + (f" changed: {', '.join(f'{k}={v}' for k, v in result.rules.items())}" if result.rules else
              " as each run was trained")]
    out.append("  K     lr        n  trans  stuck  diverged  other  share  95% (Clopper-Pearson)")
    for r in result.cells.to_dict("records"):
        out.append(f"  {r['k']:<4}  {r['lr']:<8.3g}  {r['n']:<2} {r['transitioned']:>5}  {r['stuck']:>5}  "
                   f"{r['diverged']:>8}  {r['other']:>5}  {r['share']:.2f}   [{r['share_low']:.2f}, {r['share_high']:.2f}]")
    cover = min((c["coverage"] for c in result.coverage), default=math.nan)
    out.append(f"eta_c(K): the lr at which half the seeds transition; ours = logistic GLM on log lr with a profile "
               f"interval (cutoff {result.cutoff:.2f}, calibrated: its coverage of a known eta_c >= {cover:.3f} in "
               f"every simulated scenario at this design)")
    out.extend(f"  {f.summary()}" for f in result.fits)
    for name, s in result.slowing.items():
        what = "snap width t2 - t1" if name == "width_steps" else "t2 (steps to 0.3 log K)"
        out.append(f"critical slowing, {what} on 1 - lr/eta_c: " + (
            f"log-log slope {s['slope']:+.2f} [{s['low']:+.2f}, {s['high']:+.2f}] over {s['n']} runs (negative: "
            f"slower near eta_c)" if s["slope"] is not None else f"n/a ({s['why']})"))
    return out


def cmd_scaling_q(args: argparse.Namespace, sweeps) -> int:
    """`interp scaling --q`: Q = c log(K / K*) per lr over the transitioned runs of the sweep(s)."""
    import pandas as pd

    from interp.sweeps.dissipation import c_trend, check_q, q_laws
    from interp.sweeps.phase import phase_table

    runs = pd.concat([phase_table(s) for s in sweeps], ignore_index=True)
    label = ", ".join(str(s.path) for s in sweeps)
    check_q(runs, args.q_window, label)
    laws = q_laws(runs, args.q_window)
    trend = c_trend(laws)
    if args.json:
        print(json.dumps({"window": args.q_window, "laws": [law.to_dict() for law in laws], "c_trend": trend,
                          "q_source": sorted(set(runs["q_source"].dropna()))}, indent=2))
        return 0
    source = "; ".join(sorted(set(runs["q_source"].dropna())))
    print(f"{label}: {int((runs['outcome'] == 'transitioned').sum())} transitioned runs; Q = {args.q_window} "
          f"(sum of lr |g|^2 over the window; from {source})")
    for law in laws:
        print(f"  {law.summary(args.q_window)}")
    print("  c(lr): " + (f"log c on log lr slope {trend['slope']:+.2f} [{trend['low']:+.2f}, {trend['high']:+.2f}]"
                         if trend["slope"] is not None else f"n/a ({trend['why']})"))
    decomposition = runs[runs["outcome"] == "transitioned"].groupby(["lr", "k"])[
        ["Q_prior", "Q_plateau", "Q_transition", "Q_dz"]].mean()
    if len(decomposition):
        print("  plateau decomposition (means over seeds): lr, K, Q_prior, Q_plateau, Q_transition, Q_dz")
        for (lr, k), r in decomposition.iterrows():
            print(f"    {lr:<8.3g} {int(k):<4} {_fmt(r['Q_prior'], '10.4g')} {_fmt(r['Q_plateau'], '10.4g')} "
                  f"{_fmt(r['Q_transition'], '10.4g')} {_fmt(r['Q_dz'], '10.4g')}")
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
