"""`interp import SRC --out RUN` (a run made elsewhere: the author's main pipeline or eta-sweep runs, or a
TransformerLens state_dict series with a spec file) and `interp evaluate RUN` (the metrics log rebuilt from the
checkpoints). docs/import.md; the work is `interp.imports`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from interp.errors import InterpError


def _print_result(result, as_json: bool) -> None:
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
        return
    from interp.imports.source import FORMAT_NAMES

    if result.runs:
        print(f"{result.path}: {FORMAT_NAMES[result.format]}, {len(result.runs)} runs"
              + (" (already imported from these files: nothing changed)" if result.unchanged else ""))
        for run in result.runs:
            _print_one(run, indent="  ")
        print(f"a sweep: interp scaling {result.path}, interp analyze {result.path}")
        return
    _print_one(result)


def _print_one(result, indent: str = "") -> None:
    from interp.imports.source import FORMAT_NAMES

    if result.unchanged:
        print(f"{indent}{result.path}: already imported from these very files; nothing changed")
        return
    check = result.data_check or {}
    print(f"{indent}{result.path}: {FORMAT_NAMES[result.format]}; {len(result.steps)} checkpoints "
          f"(steps {result.steps[0]}..{result.steps[-1]}), optimizer states at "
          f"{', '.join(map(str, result.states)) or 'no step (forks need one)'}")
    if check:
        logged = [f"logged loss {check['logged_loss']:.4f}" if check.get("logged_loss") is not None else "",
                  f"accuracy {check['logged_accuracy']:.4f}" if check.get("logged_accuracy") is not None else ""]
        logged = ", ".join(x for x in logged if x) or "nothing logged to compare"
        print(f"{indent}  data check at step {check['step']}: {check['verdict']} (the model's loss {check['loss']:.4f}, "
              f"accuracy {check['accuracy']:.4f} on {check['examples']} regenerated training pairs; {logged}; "
              f"other data {check['other_loss']:.4f})")
    for note in result.notes:
        print(f"{indent}  note: {note}")


def cmd_import(args: argparse.Namespace) -> int:
    from interp.collections.imports import import_run

    ignore = tuple(x.strip() for x in (args.ignore or "").split(",") if x.strip())
    result = import_run(Path(args.src), Path(args.out), args.format, replace=args.replace, spec_file=args.spec,
                        version=args.generator_version, ignore=ignore, progress=not args.quiet)
    _print_result(result, args.json)
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from interp.imports.evaluate import evaluate_run, resolution
    from interp.runs import Run

    run = Run.open(args.run)
    found = evaluate_run(run, progress=not args.quiet)
    if args.json:
        print(json.dumps({"path": str(run.path), "written": found.written, "steps": [r["step"] for r in found.rows],
                          "differences": found.differences, "steps_compared": found.steps_compared}, indent=2))
        return 0
    if found.written:
        print(f"{run.path}: metrics.jsonl rebuilt from {len(found.rows)} checkpoints (its resolution: "
              f"{resolution(run.steps) or '-'} steps between checkpoints at most)")
        return 0
    print(f"{run.path}: trained by interp, so its log is kept (it also holds the steps between checkpoints and the "
          f"training-only columns); recomputed at {found.steps_compared} saved steps, the largest difference from it:")
    for name, diff in sorted(found.differences.items()):
        print(f"  {name:<20} {diff:.3g}")
    dtype = run.spec.train.checkpoint_dtype
    if dtype != "float32":
        print(f"  (its checkpoints are {dtype}: the log was measured on the float32 weights before rounding)")
    return 0


def add_parsers(sub) -> None:
    from interp.cli_sweep import path_arg
    from interp.imports.source import FORMAT_NAMES, FORMATS

    p = sub.add_parser("import", help="open a run made elsewhere (the author's runs, a TransformerLens series) as an "
                                      "interp run folder",
                       description="Formats: " + "; ".join(f"{k}: {v}" for k, v in FORMAT_NAMES.items())
                       + ". The source folder is only read. docs/import.md says what is kept, rebuilt and lost.")
    p.add_argument("src", type=path_arg("the source folder"), help="the run (or eta-sweep folder) to import")
    p.add_argument("--out", required=True, type=path_arg("--out"), help="the new run (or sweep) folder")
    p.add_argument("--format", choices=FORMATS, help="the source's format (default: detected)")
    p.add_argument("--spec", type=path_arg("--spec"), help="a TransformerLens series' spec file (default: "
                                                            "SRC/spec.yaml or SRC/spec.json)")
    p.add_argument("--generator-version", type=int, help="the version (1-5) of the author's generator that made "
                                                         "the data (default: read from the config's keys)")
    p.add_argument("--ignore", help="comma-separated config fields that do not change the data, the model or the "
                                    "training (named when refused)")
    p.add_argument("--replace", action="store_true", help="import again over an earlier import of a changed source")
    p.add_argument("--json", action="store_true", help="what was imported, as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("evaluate", help="rebuild a run's metrics log from its checkpoints (an imported run), or "
                                        "compare it with them (a trained run)")
    p.add_argument("run", type=path_arg("the run folder"), help="run folder")
    p.add_argument("--json", action="store_true", help="the result as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_evaluate)


__all__ = ["add_parsers", "InterpError"]
