"""`interp mechanisms PATH`: the mechanism table of a run, a sweep or a fork family."""

from __future__ import annotations

import argparse
import json
import sys


def add_parsers(sub) -> None:
    from interp.cli_sweep import path_arg

    p = sub.add_parser(
        "mechanisms", help="which mechanism holds the plateau: one row per candidate mechanism, with a verdict",
        description="One row per candidate mechanism of the plateau (docs/mechanisms.md): the quantity, what the "
                    "mechanism predicts, the measured value with its interval and the runs it rests on, and the "
                    "verdict of a rule fixed before the data (consistent, contradicted, inconclusive, or not "
                    "measured with what would measure it). The cheap analyses it needs are computed and cached; "
                    "the Hessian and the curvature noise are read from the cache only. Exit status 1 when a run of "
                    "the sweep or a fork of the family is damaged (each is named on stderr and left out of every row).")
    p.add_argument("path", type=path_arg("the run, sweep or fork family folder"),
                   help="a run, a sweep or a fork family folder")
    p.add_argument("--cached", action="store_true", help="compute nothing: read the analyses' caches only")
    p.add_argument("--json", action="store_true", help="the table as JSON on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_mechanisms)


def cmd_mechanisms(args: argparse.Namespace) -> int:
    from pathlib import Path

    from interp.errors import InterpError

    if not Path(args.path).is_dir():
        raise InterpError(f"{args.path} is not a folder: give a run, a sweep or a fork family folder")
    from interp.mechanisms import mechanisms

    table = mechanisms(args.path, compute=not args.cached, progress=not args.quiet and not args.json)
    if args.json:
        print(json.dumps(table.to_dict()))
    else:
        print(table.summary())
    sys.stdout.flush()
    for line in table.warnings:  # e.g. a damaged cache entry that was recomputed
        print(f"interp: warning: {line}", file=sys.stderr)
    what = "fork" if table.kind == "fork family" else "run"
    for name, why in table.damaged.items():
        print(f"interp: damaged {what}: {name}: {why}", file=sys.stderr)
    if table.damaged:
        print(f"interp: {len(table.damaged)} damaged {what}(s) left out of every row", file=sys.stderr)
    return 1 if table.damaged else 0
