"""The `interp sweep` and `interp scaling` commands (parsing and printing only)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from interp.errors import InterpError

from interp.presets import DEFAULT_PRESET


def _positive_int(text: str) -> int:
    from interp.analysis.registry import positive_int

    try:
        return positive_int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).replace("invalid literal for int() with base 10", "invalid int value"))


def path_arg(what: str):
    """The argparse type of every path a command takes: an empty or blank path (which would mean the
    current folder) is refused in one line, "WHAT must be a non-empty path", before anything is read."""
    def parse(text: str) -> str:
        if not text.strip():  # raised as argparse's own one-line error (a type's ValueError would say "invalid")
            raise argparse.ArgumentError(None, f"{what} must be a non-empty path, got {text!r}")
        return text

    parse.__name__ = what
    return parse


def _per_run(what: str, least: str):
    """An argparse type: a finite number > 0 (`least` "> 0") or >= 0, named in the error."""
    import math

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0 or (least == "> 0" and value == 0):
            raise argparse.ArgumentTypeError(f"{what} per run must be a finite number {least}, got {text!r}")
        return value

    parse.__name__ = f"{what} per run"
    return parse


def report_damaged(table, name_them: bool = True) -> int:
    """Say on stderr how many runs of a sweep table are damaged (and, with `name_them`, which
    and why): the exit status, 1 when some are, else 0."""
    damaged = table[table["status"] == "damaged"]
    for name, error in zip(damaged["run"], damaged["error"]) if name_them else ():
        print(f"interp: damaged run: {name}: {error}", file=sys.stderr)
    if len(damaged):
        print(f"interp: {len(damaged)} of {len(table)} run(s) damaged, left out; the others are unaffected",
              file=sys.stderr)
    return 1 if len(damaged) else 0


# ---------------------------------------------------------------------------- sweep
def _add_sweep_value_flags(parser: argparse.ArgumentParser) -> None:
    """One --flag per spec field, taking one value (the base) or a comma list (a grid axis)."""
    from interp.spec import SECTIONS

    parser.add_argument("--seed", dest="seed", metavar="S[,S...]", help="seed(s): a list is a grid axis")
    for section, cls in SECTIONS.items():
        group = parser.add_argument_group(f"{section} fields: one value sets the base, a comma list is an axis")
        for f in dataclasses.fields(cls):
            group.add_argument("--" + f.name.replace("_", "-"), dest=f"{section}.{f.name}", metavar="V[,V...]")


def _sweep_spec(args: argparse.Namespace):
    """The SweepSpec of the command line: a run or sweep preset, flags and --grid / --point axes."""
    from interp.sweeps.presets import sweep_spec

    fields = {d: getattr(args, d) for d in _dotted() if getattr(args, d, None) is not None}
    return sweep_spec(args.preset or DEFAULT_PRESET, fields, args.grid, args.point, args.fixed_d)


def cmd_sweep(args: argparse.Namespace) -> int:
    from interp.cli_track import tracker_of
    from interp.sweeps.sweep import Sweep, train_sweep

    target = list(args.target)
    defines = args.preset is not None or args.grid or args.point or args.fixed_d is not None or any(
        getattr(args, d, None) is not None for d in _dotted())
    if target[:1] == ["status"]:
        if len(target) != 2 or defines or args.out:
            raise InterpError("usage: interp sweep status SWEEP_FOLDER [--json] (a sweep's spec is changed by "
                              "interp sweep --out SWEEP_FOLDER ...)")
        sweep = Sweep.open(target[1])
        table = sweep.table()
        if args.json:
            print(table.to_json(orient="records"))
        else:
            for line in sweep.status_lines(table):
                print(line)
        return report_damaged(table, name_them=args.json)
    if len(target) > 1:
        raise InterpError(f"interp sweep takes one sweep folder, got {' '.join(target)}")
    from interp.collections.executors import check_options, require_ray
    from interp.devices import check_device

    # every check of the command line comes before Sweep.create writes anything
    check_options(args.backend, args.workers, args.threads_per_run, args.cpus_per_run, args.gpus_per_run)
    if args.backend == "ray":
        require_ray()
    device = check_device(args.device)
    folder = target[0] if target else args.out
    if folder is None:
        raise InterpError("give the sweep folder: interp sweep SWEEP_FOLDER, or --out SWEEP_FOLDER to create one")
    if target and args.out and Path(args.out) != Path(target[0]):
        raise InterpError("give the sweep folder once (either as the argument or as --out)")
    from interp.precision import check_precision

    if defines or not Sweep.is_sweep(folder):
        spec = _sweep_spec(args)
        for _, point, _ in spec.runs():
            check_precision(point.train.precision, device)
        sweep = Sweep.create(folder, spec)
    else:
        sweep = Sweep.open(folder)
        for _, point, _ in sweep.points():
            check_precision(point.train.precision, device)
    n = len(sweep.points())
    workers, threads, keep = rerun_executor(sweep, args)
    print(f"sweep {sweep.path}: {n} runs ({args.backend}"
          + (f", {workers} workers" if args.backend == "local" else "")
          + (f"; runs trained before resume with their own threads ({threads} each)" if keep and threads else "")
          + ")", file=sys.stderr)
    outcome = train_sweep(sweep, backend=args.backend, workers=workers, threads=threads,
                          device=device, address=args.address, cpus_per_run=args.cpus_per_run,
                          gpus_per_run=args.gpus_per_run, progress=not args.quiet, sink=tracker_of(args, sweep.path.name),
                          keep_threads=keep)
    final = sweep.final_states(outcome)
    states = [state for state, _ in final.values()]
    done, failed, damaged, running = (states.count(s) for s in ("done", "failed", "damaged", "running"))
    unfinished = n - done - failed - damaged - running
    parts = [f"{done} of {n} runs done", f"{failed} failed"]
    parts += [f"{count} {what}" for count, what in ((damaged, "damaged (skipped)"),
                                                     (running, "being trained by another process"),
                                                     (unfinished, "not finished")) if count]
    print(f"{', '.join(parts)} (interp sweep status {sweep.path})", file=sys.stderr)
    if running:  # its to finish, not this command's failure: exit 0 (as a fork family: interp.cli_fork)
        from interp.collections.training import held_note

        print(held_note(sweep, final, "run", "interp sweep status"), file=sys.stderr)
    return 1 if failed or damaged or unfinished else 0


def _dotted() -> list[str]:
    from interp.spec import dotted_names

    return dotted_names()


# ---------------------------------------------------------------------------- scaling
def cmd_scaling(args: argparse.Namespace) -> int:
    from interp.sweeps.family import sweep_fits
    from interp.sweeps.sweep import Sweep

    sweeps = [Sweep.open(path) for path in args.sweep]
    if args.q:
        if args.threshold is not None:
            raise InterpError("--q and --threshold are two different fits: give one")
        return _scaling_q(args, sweeps)
    table = pooled_table(sweeps)
    label = str(sweeps[0].path) if len(sweeps) == 1 else f"{len(sweeps)} sweeps pooled ({', '.join(str(s.path) for s in sweeps)})"
    if args.threshold is not None:
        return _thresholds(table, label, args)
    fits = sweep_fits(table, y=args.y)
    if args.json:
        damaged = table[table["status"] == "damaged"]
        print(json.dumps({"results": {k: v.to_dict() for k, v in fits.results.items()},
                          "not_applicable": fits.problems, "warnings": fits.warnings,
                          "damaged": dict(zip(damaged["run"], damaged["error"]))}, indent=2))
        return report_damaged(table)
    counts = table["status"].value_counts().to_dict()
    print(f"{label}: {len(table)} runs ({counts.get('done', 0)} done, "
          f"{int(table['censored'].fillna(False).sum())} censored, {counts.get('failed', 0)} failed"
          + (f", {counts['damaged']} damaged" if counts.get("damaged") else "") + ")")
    for name, result in fits.results.items():
        print(f"  {name:<10} {result.summary()}")
    for name, why in fits.problems.items():
        print(f"  {name:<10} n/a: {why}")
    for line in fits.warnings:  # the damaged runs among them
        print(f"interp: warning: {line}", file=sys.stderr)
    return report_damaged(table, name_them=False)


def _scaling_q(args: argparse.Namespace, sweeps) -> int:
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
            print(f"    {lr:<8.3g} {int(k):<4} {_q_fmt(r['Q_prior'], '10.4g')} {_q_fmt(r['Q_plateau'], '10.4g')} "
                  f"{_q_fmt(r['Q_transition'], '10.4g')} {_q_fmt(r['Q_dz'], '10.4g')}")
    return 0


def _q_fmt(v, spec: str) -> str:
    import math

    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def pooled_table(sweeps):
    """The sweeps' tables as one (`interp scaling` over several folders): each run named FOLDER/RUN, so runs of the
    same name in two sweeps stay apart; a run listed twice (the same folder given twice) is refused."""
    import pandas as pd

    if len(sweeps) == 1:
        return sweeps[0].table()
    paths = [s.path.resolve() for s in sweeps]
    if len(set(paths)) != len(paths):
        raise InterpError("the same sweep folder is given twice: each run would count twice in the pooled fits")
    parts = []
    for sweep in sweeps:
        part = sweep.table()
        part["run"] = sweep.path.name + "/" + part["run"].astype(str)
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def _thresholds(table, label: str, args: argparse.Namespace) -> int:
    from interp.sweeps.thresholds import parse_fractions, threshold_robustness

    result = threshold_robustness(table, parse_fractions(args.threshold))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return report_damaged(table)
    print(f"{label}: {len(table)} runs; delta of tau = C D^delta at each threshold (tau: the first evaluation "
          f"below that fraction of log K)")
    for line in result.lines():
        print(f"  {line}")
    return report_damaged(table, name_them=False)


EXECUTOR_FLAGS = ("backend", "workers", "threads_per_run", "address", "cpus_per_run", "gpus_per_run")


def rerun_executor(collection, args: argparse.Namespace) -> tuple[int, int | None, bool]:
    """(workers, threads per run, whether runs trained before keep their own threads) for training `collection`:
    without --workers and --threads-per-run, its unfinished runs resume with the threads they were trained with and
    as many workers as the cores hold at that many (`interp.collections.training.resume_workers`), so a killed
    sweep run again gives the uncut sweep's weights; a flag that sets either applies to every run (and a run
    continued with other threads says that it is not bit-exact)."""
    if args.workers is None and args.threads_per_run is None and args.backend == "local":
        from interp.collections.training import resume_workers

        workers, threads = resume_workers(collection)
        return workers or 1, threads, True
    return args.workers or 1, args.threads_per_run, False


def add_executor_flags(p: argparse._ActionsContainer, verb: str, defaults: bool = True, what: str = "run") -> None:
    """Where a collection's runs (`what`: "run", or "fork") are trained or analysed: --backend, --workers,
    --threads-per-run, --address, --cpus-per-run, --gpus-per-run. Without `defaults` each is None unless
    given (so a command that also takes a single run can refuse them there)."""
    from interp.collections.executors import BACKENDS

    def d(value):
        return value if defaults else None

    p.add_argument("--backend", default=d("local"), choices=list(BACKENDS), help=f"where {what}s {verb} (default: local)")
    p.add_argument("--workers", type=_positive_int,
                   help="local processes (default: 1; a folder run again: as many as its runs were trained with)")
    p.add_argument("--threads-per-run", type=_positive_int,
                   help=f"torch threads of each {what} (default: cores / workers, and a {what} trained before resumes "
                        f"with its own, as recorded: results depend on it on the CPU)")
    p.add_argument("--address", help="Ray cluster address (default: start a local Ray instance)")
    p.add_argument("--cpus-per-run", type=_per_run("cpus", "> 0"), default=d(1.0),
                   help=f"Ray: CPUs per {what} (default: 1)")
    p.add_argument("--gpus-per-run", type=_per_run("gpus", ">= 0"), default=d(0.0),
                   help=f"Ray: GPUs per {what}, a fraction shares one (default: 0)")


# ---------------------------------------------------------------------------- analyze SWEEP
CIRCUIT_VIEW = (("run", "run", "{}"), ("k", "K", "{:.0f}"), ("seed", "seed", "{:.0f}"), ("tau_half", "tau_half", "{:.0f}"),
                ("gap_lead", "gap lead", "{:.2f}"), ("gap_lead_author", "lead (author)", "{:.2f}"),
                ("routing_head", "routing", "{}"),
                ("carried_share_lead", "carried lead", "{:.2f}"), ("used_ablation_lead", "used lead", "{:.2f}"),
                ("ablation_at_tau", "ablation@tau", "{:+.2f}"), ("groups_above_80_at_half_tau", "groups@tau/2", "{:.2f}"))


def circuit_lines(table) -> list[str]:
    """The circuit columns of a sweep table as aligned text, one line per finished run, then
    why values are missing."""
    import math

    def cell(value, spec):
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        return spec.format(value)

    done = table[table["status"] == "done"]
    rows = [[cell(r.get(c), spec) for c, _, spec in CIRCUIT_VIEW] for r in done.to_dict("records")]
    heads = [h for _, h, _ in CIRCUIT_VIEW]
    widths = [max(len(x) for x in col) for col in zip(heads, *rows)]
    lines = ["  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip() for row in [heads, *rows]]
    for r in done.to_dict("records"):
        if isinstance(r.get("circuits_reason"), str) and r["circuits_reason"]:
            lines.append(f"  {r['run']}: {r['circuits_reason']}")
    return lines


def cmd_analyze_sweep(args: argparse.Namespace, names, options: dict) -> int:
    """`interp analyze SWEEP` (or FAMILY): the suite over every finished run, then the circuit columns and fits."""
    from interp.collections.folders import open as open_folder
    from interp.devices import check_device
    from interp.sweeps.analyze import analyze_sweep
    from interp.sweeps.circuit_fits import lead_definitions, lead_line, published_lead_line
    from interp.sweeps.fits import jsonable

    sweep = open_folder(args.run)
    if args.no_cache:
        raise InterpError("--no-cache is for a run: a sweep's circuit columns are read back from each run's cache "
                          f"(to recompute, delete the runs' cache folders, {args.run}/*/cache)")
    check_device(args.device)
    outcome = analyze_sweep(sweep, only=names, steps=args.steps, options=options, backend=args.backend or "local",
                            workers=args.workers or 1, threads=args.threads_per_run, device=args.device,
                            address=args.address, cpus_per_run=args.cpus_per_run or 1,
                            gpus_per_run=args.gpus_per_run or 0, progress=not args.quiet and not args.json,
                            warn=args.json)  # the text prints each run's problems once, under "notes by run"
    table, fits = outcome.table, outcome.fits
    leads = lead_definitions(fits, table)  # the lead under ours and the author's definition, on the same runs
    bad = outcome.failed or outcome.with_problems
    if args.json:
        print(json.dumps({"runs": jsonable(outcome.results), "skipped": outcome.skipped,
                          "table": jsonable(table.to_dict("records")),
                          "fits": {k: v.to_dict() for k, v in fits.results.items()},
                          "not_applicable": fits.problems, "warnings": fits.warnings,
                          "lead_definitions": jsonable(leads), "run_notes": outcome.run_notes,
                          **({"edges": outcome.edges.to_dict()} if outcome.edges is not None else {})}, default=str))
        return 1 if report_damaged(table) or bad else 0  # a damaged run: named, left out, exit 1 (as ls, mechanisms)
    print(f"{sweep.path}: {len(outcome.results)} run(s) analysed ({outcome.computed} computed, {outcome.cached} "
          f"from cache) in {outcome.seconds:.1f} s; {len(outcome.skipped)} skipped")
    print("\n".join("  " + line for line in circuit_lines(table)))
    for name, result in fits.results.items():
        print(f"  {name:<15} {result.summary()}")
    for name, why in fits.problems.items():  # the fits' command, with this folder for SWEEP
        print(f"  {name:<15} n/a: {why.replace('interp analyze SWEEP', f'interp analyze {sweep.path}')}")
    print("  the shuffle gap's lead under both definitions, on the same runs:")
    for line in [*map(lead_line, leads), published_lead_line()]:
        print(f"    {line}")
    if outcome.edges is not None:  # --only edges: the circuits' overlap at tau, the routing-first share
        print("  circuits by edges, across the runs:")
        for line in outcome.edges.lines():
            print(f"    {line}")
    if outcome.run_notes:  # each run's problems and notes (a step beyond the run, a damaged cache entry), said once
        print("  notes by run:")
        for name, lines in outcome.run_notes.items():
            print(f"    {name}:")
            print("\n".join(f"      {line}" for line in lines))
    for line in fits.warnings:
        print(f"interp: warning: {line}", file=sys.stderr)
    damaged = report_damaged(table, name_them=False)  # each named once, above (left out of every fit): exit 1
    if bad:
        print(f"interp: {len(outcome.failed)} run(s) failed, {len(outcome.with_problems)} with steps that could not "
              "be analysed (see the run failures above and the notes by run)", file=sys.stderr)
        return 1
    return damaged


def add_parsers(sub) -> None:
    """The `sweep` and `scaling` subcommands."""
    from interp.cli_track import add_track_flag

    p = sub.add_parser("sweep", help="create, extend, train or show a sweep (a family of runs)",
                       description="interp sweep --preset tiny --grid task.k=5,10,20 --seed 0,1 --out sweeps/k; "
                                   "interp sweep sweeps/k (again: skips finished runs, resumes interrupted ones); "
                                   "interp sweep status sweeps/k. Exit status 1 when a run failed or is damaged (it is "
                                   "skipped, the others go on); runs another process is training are skipped "
                                   "(exit 0).")
    p.add_argument("target", nargs="*", type=path_arg("the sweep folder"), help="SWEEP_FOLDER, or: status SWEEP_FOLDER")
    p.add_argument("--preset", help=f"a run preset (the base) or a sweep preset (default: {DEFAULT_PRESET})")
    p.add_argument("--out", type=path_arg("--out"), help="sweep folder to create or extend")
    p.add_argument("--grid", action="append", metavar="FIELD=V1,V2", help="a grid axis by dotted field "
                   "(task.k, task.n_bases, train.lr, train.batch_size, seed, task.direction, model.n_layers, ...)")
    p.add_argument("--point", action="append", metavar="FIELD=V,FIELD=V", help="an explicit point (repeatable)")
    p.add_argument("--fixed-d", type=_positive_int, help="fixed dataset size D: n_bases = D / K for each K")
    add_executor_flags(p, "train")
    p.add_argument("--device", default="cpu", help="torch device of every run (default: cpu)")
    p.add_argument("--json", action="store_true", help="status: the table as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_track_flag(p, "each run (grouped by the sweep)")
    _add_sweep_value_flags(p)
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("scaling", help="the family-level fits of a sweep: scaling law, fixed D, noise, asymmetry, "
                                       "selector sharing")
    p.add_argument("sweep", type=path_arg("the sweep folder"), nargs="+",
                   help="sweep folder(s): several are pooled into one table (runs named FOLDER/RUN)")
    p.add_argument("--y", default="tau_half", choices=["tau_half", "tau_window"], help="the plateau measure")
    p.add_argument("--threshold", metavar="F[,F...]|all",
                   help="refit delta with tau at each of these fractions of log K (0.3 to 0.7: the author's "
                        "robustness check) and judge its spread; all: 0.3,0.4,0.5,0.6,0.7")
    p.add_argument("--q", action="store_true",
                   help="the dissipation laws instead: Q = c log(K / K*) per lr over the transitioned runs, and c(lr) "
                        "(docs/phase.md)")
    p.add_argument("--q-window", default="Q_dz", choices=["Q_dz", "Q_transition", "Q_plateau", "Q_prior", "Q_total"],
                   help="with --q: the window Q is summed over (default Q_dz, the author's dz window)")
    p.add_argument("--json", action="store_true", help="every fit as JSON")
    p.set_defaults(func=cmd_scaling)

