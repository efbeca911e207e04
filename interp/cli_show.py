"""`interp show RUN` (a run's spec, saved steps, plateau and tau, the environment of each training segment;
`--relapse`, `--lead-definition`) and `interp ls
FOLDER` (one line per run, sweep or fork family). Both read without torch; a damaged run is named on stderr as
`interp ls` names it, and the command exits 1."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def cmd_show(args: argparse.Namespace) -> int:
    from interp.runs import Run
    from interp.summary import as_text, run_rows, run_summary

    from interp.summary import lead_row, lead_under

    from interp.forks.relapse import parse_relapse, relapse_shown  # torch-free; docs/forks.md, "Relapse"

    relapse = None if args.relapse is None else parse_relapse(args.relapse)  # checked before the run is read
    run = Run.open(args.run)
    if damaged(run.path, args.json):  # what its files say cannot be trusted: named, nothing derived from them shown
        return 1
    summary = run_summary(run)
    leads = [lead_under(run, d) for d in args.lead_definition or ()]  # docs/definitions.md, "The shuffle gap's lead"
    shown = relapse_shown(run, relapse) if relapse else None  # ((label, text), its JSON fields)
    from interp.run_segments import describe, segments

    trained = segments(run.info)  # the environment of each training segment (interp.run_segments)
    if args.json:
        print(json.dumps({**summary, **({"leads": leads} if leads else {}), **(shown[1] if shown else {}),
                          "segments": trained}, indent=2))
    else:
        print(as_text(run_rows(summary) + [lead_row(lead) for lead in leads] + ([shown[0]] if shown else [])
                      + [("segment", describe(s)) for s in trained]))
    return 0


def damaged(path, as_json: bool = False) -> bool:
    """Whether the run folder at `path` is damaged (`interp.collections.states`: a metrics log that lost its tail,
    a checkpoint gone, an unreadable status...), named in one line on stderr as `interp ls` names it (and, with
    `as_json`, as {"path", "status": "damaged", "error"} on stdout)."""
    from interp.collections.collection import own_state

    state = own_state(path)
    if state.state != "damaged":
        return False
    if as_json:
        print(json.dumps({"path": str(path), "status": "damaged", "error": state.error}))
    print(f"interp: damaged run: {path}: {state.error}", file=sys.stderr)
    return True


def cmd_ls(args: argparse.Namespace) -> int:
    from interp.collections.folders import discover
    from interp.formatting import fmt

    found = discover(args.folder)
    root, summaries, sweep_rows, broken = found.root, found.runs, found.collections, found.broken
    if args.json:
        print(json.dumps(summaries + sweep_rows + [{"path": str(p), "error": e} for p, e in broken], indent=2))
        return _ls_damaged(found)
    if not summaries and not broken and not sweep_rows:
        print(f"no runs or sweeps in {root}")
        return 0
    for row in sweep_rows:
        if row["kind"] == "fork family":
            print(f"{Path(row['path']).name:<24} fork family: {row['done']}/{row['forks']} forks done"
                  + (f", {row['damaged']} damaged" if row.get("damaged") else "") + f", parent {row['parent']}")
            continue
        print(f"{Path(row['path']).name:<24} sweep: {row['runs']} runs ({row['done']} done, {row['running']} running, "
              f"{row['failed']} failed" + (f", {row['damaged']} damaged" if row.get("damaged") else "")
              + f"), axes {', '.join(row['axes'])}")
    if not summaries and not broken:
        return _ls_damaged(found)
    header = f"{'run':<24} {'direction':<9} {'K':>3} {'D':>7} {'seed':>4} {'ckpts':>5} {'last':>7} " \
             f"{'tau_half':>8} {'final Lc/logK':>13}"
    print(header)
    for s in summaries:
        final = s.get("final_loss_cand")
        final = None if final is None else final / s["log_k"]
        print(f"{Path(s['path']).name:<24} {s['direction']:<9} {s['k']:>3} {s['dataset_size']:>7} "
              f"{s['seed']:>4} {s['n_checkpoints']:>5} {fmt(s['last_step']):>7} "
              f"{fmt(s['tau_half']):>8} {fmt(final, '.4f'):>13}")
    named = dict(found.damaged)  # a family's fork or a sweep's run that is also unreadable: its reason said once
    for path, error in broken:
        print(f"{path.name:<24} " + ("damaged (named on stderr)" if path in named else f"unreadable: {error}"))
    return _ls_damaged(found)


def _ls_damaged(found) -> int:
    """Name each damaged run `interp ls` listed (a lone run, a sweep's run, a family's fork) on stderr,
    as the status commands do; the exit status: 1 when something is damaged or unreadable."""
    for path, error in found.damaged:
        name = path.relative_to(found.root) if path.is_relative_to(found.root) and path != found.root else path
        print(f"interp: damaged run: {name}: {error}", file=sys.stderr)
    if found.damaged:
        print(f"interp: {len(found.damaged)} damaged run(s) listed", file=sys.stderr)
    return 1 if found.broken or found.damaged else 0


def add_show_parser(sub) -> None:
    from interp.cli_sweep import path_arg  # every path: an empty or blank one is refused, never the current folder

    p = sub.add_parser("show", help="spec, saved steps, plateau height and tau of a run")
    p.add_argument("run", type=path_arg("the run folder"), help="run folder")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--lead-definition", action="append", metavar="DEF", help="also show the shuffle gap's lead under "
                   "DEF (repeatable): ours (tau_half, unbiased dz), author (l1_0.9, in-batch dz) or T_LOSS/DZ")
    p.add_argument("--relapse", nargs="?", const="loss_cand>0.9logK,hold=200", metavar="CRITERION", help="also when a "
                   "solved run relapsed: METRIC>THRESHOLD[,hold=STEPS] (default loss_cand>0.9logK,hold=200)")
    p.set_defaults(func=cmd_show)


def add_ls_parser(sub) -> None:
    from interp.cli_sweep import path_arg

    p = sub.add_parser("ls", help="one line per run or sweep in a folder")
    p.add_argument("folder", nargs="?", default="checkpoints", type=path_arg("the folder to list (default: checkpoints)"))
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_ls)
