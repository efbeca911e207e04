"""`interp mechanisms PATH`: the mechanism table of a run, a sweep or a fork family; `interp reconcile PATH...`:
each published claim beside ours, with a verdict (docs/reconciliation.md)."""

from __future__ import annotations

import argparse
import json
import sys


def add_parsers(sub) -> None:
    from interp.cli_sweep import path_arg

    p = sub.add_parser(
        "mechanisms", help="which mechanism holds the plateau: one row per candidate mechanism, with a verdict",
        description="One row per candidate mechanism of the plateau (docs/mechanisms.md): the quantity, what the "
                    "mechanism predicts, the measured value with its 90% interval and the runs it rests on, and the "
                    "verdict of a rule fixed before the data (consistent, contradicted, inconclusive, or not "
                    "measured with what would measure it, also when it rests on fewer replicates than the row "
                    "needs). The cheap analyses it needs are computed and cached; "
                    "the Hessian and the curvature noise are read from the cache only. Exit status 1 when the run, a "
                    "run of the sweep or a fork of the family is damaged (each is named on stderr and left out of "
                    "every row).")
    p.add_argument("path", type=path_arg("the run, sweep or fork family folder"),
                   help="a run, a sweep or a fork family folder")
    p.add_argument("--cached", action="store_true", help="compute nothing: read the analyses' caches only")
    p.add_argument("--json", action="store_true", help="the table as JSON on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_mechanisms)

    p = sub.add_parser(
        "reconcile", help="each published claim beside ours, under both definitions, with a verdict",
        description="One row per published claim (docs/reconciliation.md): the author's number and its source, ours "
                    "under the author's definition where it can be computed, ours under ours with its 90% interval "
                    "and the replicates it rests on, the differences in setting, and the verdict of rules fixed before "
                    "the data (an equivalence margin per claim, a minimum of replicates): reproduced (the interval "
                    "inside the margin), differs (a named definition or setting), not reproduced (wholly outside), "
                    "inconclusive (with the replicates that would decide it), or not measured with the command that "
                    "would measure it. Several paths pool: each run, sweep or fork family gives the rows it measures; "
                    "a path named twice counts once. "
                    "The mechanism table's cheap analyses are computed and cached (not with --cached). Exit status 1 "
                    "when a run or fork is damaged (named on stderr, left out of every row).")
    p.add_argument("paths", nargs="+", type=path_arg("the run, sweep or fork family folder"),
                   help="runs, sweeps or fork family folders")
    p.add_argument("--cached", action="store_true", help="compute nothing: read the analyses' caches only")
    p.add_argument("--json", action="store_true", help="the table as JSON on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_reconcile)


def _damaged_run(path) -> str | None:
    """Why the folder at `path`, when it is a lone run, is damaged (`interp.collections.states`); None otherwise (a
    sweep or a family names its damaged runs itself)."""
    from interp.collections.collection import own_state
    from interp.collections.folders import RUN, kind_of

    if kind_of(path) != RUN:
        return None
    state = own_state(path)
    return state.error if state.state == "damaged" else None


def cmd_reconcile(args: argparse.Namespace) -> int:
    from interp.mechanisms.reconcile import reconcile

    damaged = {p: why for p in args.paths if (why := _damaged_run(p)) is not None}  # left out, named, exit 1
    paths = [p for p in args.paths if p not in damaged]
    if not paths:  # nothing left to judge: each named in its line
        return _tell_damaged(damaged, "run", counted=False)
    table = reconcile(paths, compute=not args.cached, progress=not args.quiet and not args.json)
    table.damaged.update(damaged)
    _print(table, args.json)
    return _tell(table, "run or fork")


def _print(table, as_json: bool) -> None:
    """The table on stdout; in text, without the notes that only name a damaged run or fork (stderr names each)."""
    if as_json:
        print(json.dumps(table.to_dict()))
        return
    table.notes = [n for n in table.notes if not ("damaged" in n and any(str(name) in n for name in table.damaged))]
    print(table.summary())


def _tell(table, what: str) -> int:
    """Warnings and damaged runs or forks (`what`) on stderr; 1 when any is damaged."""
    sys.stdout.flush()
    for line in dict.fromkeys(table.warnings):  # e.g. a damaged cache entry that was recomputed
        print(f"interp: warning: {line}", file=sys.stderr)
    return _tell_damaged(table.damaged, what)


def _tell_damaged(damaged: dict, what: str, counted: bool = True) -> int:
    """Each damaged run or fork in one line on stderr (and, `counted`, how many the table left out); 1 when any is."""
    for name, why in damaged.items():
        print(f"interp: damaged {what}: {name}: {why}", file=sys.stderr)
    if damaged and counted:
        print(f"interp: {len(damaged)} damaged {what}(s) left out of every row", file=sys.stderr)
    return 1 if damaged else 0


def cmd_mechanisms(args: argparse.Namespace) -> int:
    import warnings
    from pathlib import Path

    from interp.errors import InterpError

    if not Path(args.path).is_dir():
        raise InterpError(f"{args.path} is not a folder: give a run, a sweep or a fork family folder")
    why = _damaged_run(args.path)
    if why is not None:  # a lone run whose files cannot be trusted: no row can rest on it (as a sweep's damaged run)
        return _tell_damaged({args.path: why}, "run", counted=False)
    from interp.mechanisms import mechanisms
    from interp.sweeps.fits import DamagedRunsWarning

    with warnings.catch_warnings(record=True) as caught:  # e.g. censored forks: a note of the table, never a raw line
        warnings.simplefilter("always")
        table = mechanisms(args.path, compute=not args.cached, progress=not args.quiet and not args.json)
    told = []
    for w in caught:
        if w.category.__module__.split(".")[0] != "interp":  # another library's: said as it would have been
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        elif not issubclass(w.category, DamagedRunsWarning):  # stderr names each damaged run already
            told.append(str(w.message))
    table.notes += [n for n in dict.fromkeys(told) if n not in table.notes]
    _print(table, args.json)
    return _tell(table, "fork" if table.kind == "fork family" else "run")
