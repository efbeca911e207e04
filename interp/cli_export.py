"""`interp export PATH --to tensorboard|wandb`: a run's, sweep's or fork family's metrics and cached analyses
where researchers already look (docs/tracking.md; the writing is `interp.tracking.export`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from interp.errors import InterpError
from interp.tracking import TRACKERS



def cmd_export(args: argparse.Namespace) -> int:
    to = args.to
    allowed = (*TRACKERS, "synass")
    if to[0] not in allowed:
        raise InterpError(f"--to {to[0]!r}: allowed: {', '.join(allowed)}")
    if len(to) > 2 or (len(to) == 2 and to[0] != "synass"):
        raise InterpError(f"--to {' '.join(to)}: only --to synass takes a folder (OUT); a tracker's is --out")
    args.to, args.dest = to[0], (to[1] if len(to) == 2 else None)
    if args.dest is not None and not args.dest.strip():
        raise InterpError("the output folder must be a non-empty path")
    if args.to == "synass":
        return _to_synass(args)
    from interp.tracking.export import export

    for flag in ("report", "timeline"):
        given = getattr(args, flag)
        if given is not None and not Path(given).is_file():
            raise InterpError(f"--{flag} {given}: no such file")
    result = export(Path(args.path), args.to, out=args.out, report=args.report, timeline=args.timeline)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    for name, info in result.runs.items():
        print(f"{name}: {info['rows']} metrics rows, {info['scalars']} analysis scalars"
              + (f" ({', '.join(info['analyses'])})" if info["analyses"] else " (no analysis cached)")
              + (f", attached {', '.join(info['attached'])}" if info["attached"] else ""))
    for line in result.skipped:
        print(f"interp: left out: {line}", file=sys.stderr)
    for line in result.notes:
        print(f"  {line}")
    where = f"tensorboard --logdir {result.out}" if args.to == "tensorboard" else \
        f"wandb sync {result.out / 'wandb'}/offline-run-* (offline runs; online ones are already uploaded)"
    print(f"wrote {len(result.runs)} run(s) to {result.out}; view: {where}")
    return 0


def _to_synass(args: argparse.Namespace) -> int:
    from interp.imports.to_synass import export_synass
    from interp.runs import Run

    out = args.out or args.dest
    if args.out and args.dest and args.out != args.dest:
        raise InterpError(f"two output folders given ({args.dest} and --out {args.out}); give one")
    if out is None:
        raise InterpError("--to synass needs the output folder: interp export RUN --to synass OUT")
    for flag in ("report", "timeline"):
        if getattr(args, flag) is not None:
            raise InterpError(f"--{flag} is attached by --to tensorboard|wandb; the author's format has no place for it")
    result = export_synass(Run.open(args.path), Path(out), progress=not args.json)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"wrote {args.path} to {out} in the author's main-pipeline format: {len(result['steps'])} checkpoints, "
          f"optimizer states at {', '.join(map(str, result['optimizer_states'])) or 'no step'}; "
          f"interp import {out} --out RUN reads it back")
    return 0


def add_parsers(sub) -> None:
    from interp.cli_sweep import path_arg

    p = sub.add_parser("export", help="write a run's, sweep's or fork family's metrics and cached analyses to "
                                      "TensorBoard or W&B (nothing is computed)",
                       description="Every metrics row, every cached analysis table reduced to scalars on the "
                                   "checkpoint axis, the collection's per-run columns, and the report and timeline "
                                   "(attached). What is not cached is named with the command that computes it.")
    p.add_argument("path", type=path_arg("the run, sweep or fork family folder"), help="run, sweep or fork family folder")
    p.add_argument("--to", required=True, nargs="+", metavar=("{" + ",".join((*TRACKERS, "synass")) + "}", "OUT"),
                   help="where to write: a tracker, or synass OUT (the author's run format, into the new folder OUT: "
                        "docs/import.md)")
    p.add_argument("--out", type=path_arg("--out"), help="folder to write (default: PATH/exports/tensorboard or "
                                                          "PATH/exports/wandb)")
    p.add_argument("--report", type=path_arg("--report"), help="the HTML report to attach (default: PATH/report.html "
                                                                "when it is there)")
    p.add_argument("--timeline", type=path_arg("--timeline"), help="the timeline page to attach (default: "
                                                                    "PATH/timeline.html when it is there)")
    p.add_argument("--json", action="store_true", help="what was written, as JSON")
    p.set_defaults(func=cmd_export)
