"""The `interp` command. Thin: it parses, calls the library and prints.

Bad input exits with status 2 and one line on stderr; never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from interp.errors import InterpError

DEFAULT_PRESET = "tiny"


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and still exit status 2)."""

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _optional(kind):
    def parse(text: str):
        return None if text.lower() == "none" else kind(text)

    parse.__name__ = kind.__name__
    return parse


def _add_override_flags(parser: argparse.ArgumentParser) -> None:
    """One --flag per spec field (`--k`, `--n-bases`, `--lr`, `--d-model`, ...)."""
    from interp.spec import ACT_FNS, CHECKPOINT_DTYPES, DIRECTIONS, SCHEDULES, ModelSpec, TaskSpec, TrainSpec

    choices = {"direction": list(DIRECTIONS), "schedule": list(SCHEDULES), "act_fn": list(ACT_FNS),
               "checkpoint_dtype": list(CHECKPOINT_DTYPES)}
    types = {"int": int, "float": float, "str": str, "int | None": _optional(int),
             "float | None": _optional(float)}
    parser.add_argument("--seed", type=int, help="one seed for data, initialisation and batch order")
    for title, cls in (("task", TaskSpec), ("model", ModelSpec), ("training", TrainSpec)):
        group = parser.add_argument_group(f"{title} overrides (default: the preset's value)")
        for f in dataclasses.fields(cls):
            flag = "--" + f.name.replace("_", "-")
            if f.type == "bool":
                group.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=None)
            else:
                group.add_argument(flag, dest=f.name, type=types[f.type], choices=choices.get(f.name),
                                   metavar=f.name.upper() if f.name not in choices else None)


def _overrides(args: argparse.Namespace) -> dict:
    from interp.spec import override_names

    return {name: getattr(args, name) for name in override_names()
            if getattr(args, name, None) is not None}


# ---------------------------------------------------------------------------- train
def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def cmd_train(args: argparse.Namespace) -> int:
    from interp.devices import check_device, check_fits
    from interp.runs import Run, check_new_folder

    if args.out is not None and args.out.strip() == "":
        raise InterpError("--out must be a non-empty path")
    overrides = _overrides(args)
    if args.resume:
        if args.preset is not None:
            raise InterpError("--resume continues the run's stored spec; --preset cannot be combined with it")
        if args.out is None:
            raise InterpError("--resume needs --out RUN_FOLDER (the run to continue)")
        return _resume(Path(args.out), overrides, args)
    from interp.presets import preset

    name = args.preset or DEFAULT_PRESET
    out = Path(args.out) if args.out is not None else Path("checkpoints") / name
    spec = preset(name).override(**overrides)
    spec.validate()
    check_new_folder(out)
    device = check_device(args.device)
    check_fits(spec, device)
    created = not out.exists()
    run = Run.create(out, spec)
    return _train(run, device, args, created=created)


def _resume(out: Path, overrides: dict, args: argparse.Namespace) -> int:
    """Validate everything (spec, lock, resume state, steps, device) before writing anything."""
    from interp.devices import check_device, check_fits
    from interp.runs import Run

    run = Run.open(out)
    steps = overrides.pop("steps", None)
    changed = {k: v for k, v in overrides.items() if run.spec.override(**{k: v}) != run.spec}
    if changed:
        raise InterpError(
            f"--resume continues the stored spec; only --steps may change (got {', '.join(changed)})"
        )
    device = check_device(args.device)
    run.acquire()
    state = run.load_resume()
    reached = max([state.step if state else 0, *run.steps])
    if steps is not None:
        if steps < reached:
            raise InterpError(f"--steps {steps} is below step {reached}, which {out} has already reached; "
                              f"a resumed run can only go further")
        new_spec = run.spec.override(steps=steps)
        new_spec.validate()
        check_fits(new_spec, device)
        if steps != run.spec.train.steps:
            run.set_steps(steps)
    return _train(run, device, args, created=False, resume=state)


def _train(run, device: str, args: argparse.Namespace, created: bool, resume=None) -> int:
    from interp.summary import run_summary
    from interp.train import train

    print(f"training {run!r} on {device}", file=sys.stderr)
    try:
        result = train(run, device=device, progress=not args.quiet, resume=resume)
    except KeyboardInterrupt:
        print(f"\ninterrupted; continue with: interp train --resume --out {run.path}", file=sys.stderr)
        return 130
    except BaseException:
        if created and not run.steps:
            _remove_unstarted(run)
        raise
    note = " (stopped after the snap)" if result.stopped_early else ""
    print(f"trained to step {result.last_step} in {result.seconds:.1f} s{note}", file=sys.stderr)
    _print_summary(run_summary(run))
    return 0


def _remove_unstarted(run) -> None:
    """A run that failed before its first checkpoint leaves no folder behind."""
    import shutil

    run.release()
    shutil.rmtree(run.path, ignore_errors=True)


# ---------------------------------------------------------------------------- show / ls
def _fmt(value, spec: str = "") -> str:
    if value is None:
        return "-"
    return format(value, spec)


def _print_summary(s: dict) -> None:
    lk = s["log_k"]
    ratio = lambda v: None if v is None else v / lk  # noqa: E731
    rows = [
        ("run", s["path"]),
        ("task", f"{s['direction']}  K={s['k']}  n_bases={s['n_bases']}  D={s['dataset_size']}  "
                 f"seed={s['seed']}  log K={lk:.4f}"),
        ("saved", f"{s['n_checkpoints']} checkpoints, steps {_fmt(s['first_step'])}..{_fmt(s['last_step'])} "
                  f"(planned {s['planned_steps']}, last evaluated {_fmt(s['last_evaluated'])})"),
        ("plateau", f"Lc / log K = {_fmt(s['plateau_height'], '.4f')}; within 5% of log K with dz < 0.05 "
                    f"from step {_fmt(s['plateau_start'])} to {_fmt(s['plateau_end'])}"),
        ("tau", f"tau_half = {_fmt(s['tau_half'])}, tau_window = {_fmt(s['tau_window'])} "
                f"(from step {_fmt(s['window_start'])} to {_fmt(s['window_end'])}); "
                f"snap (Lc < 0.05 log K) at step {_fmt(s['snap_step'])}"),
    ]
    if s.get("final_loss") is not None:
        rows.append(("final", f"Lc / log K = {_fmt(ratio(s.get('final_loss_cand')), '.4f')}, "
                              f"dz = {_fmt(s.get('final_shuffle_gap'), '.3f')} nats, "
                              f"candidate acc = {_fmt(s.get('final_acc_cand'), '.3f')}, "
                              f"exact match = {_fmt(s.get('final_acc_exact'), '.3f')}"))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


def cmd_show(args: argparse.Namespace) -> int:
    from interp.runs import Run
    from interp.summary import run_summary

    summary = run_summary(Run.open(args.run))
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print_summary(summary)
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    from interp.runs import Run
    from interp.summary import run_summary

    from interp.sweeps.sweep import Sweep

    root = Path(args.folder)
    if not root.is_dir():
        raise InterpError(f"no folder at {root}")
    if Sweep.is_sweep(root):
        paths = sorted(p for p in root.iterdir() if Run.is_run(p))
        sweeps = []
    else:
        paths = [root] if Run.is_run(root) else sorted(p for p in root.iterdir() if Run.is_run(p))
        sweeps = sorted(p for p in root.iterdir() if Sweep.is_sweep(p))
    summaries, broken = [], []
    for path in paths:
        try:
            summaries.append(run_summary(Run.open(path)))
        except InterpError as exc:
            broken.append((path, str(exc)))
    sweep_rows = []
    for path in sweeps:
        try:
            sweep = Sweep.open(path)
            states = [sweep.state_of(name)[0] for name, _, _ in sweep.points()]
            sweep_rows.append({"path": str(path), "kind": "sweep", "runs": len(states),
                               **{state: states.count(state) for state in ("done", "running", "failed")},
                               "axes": sweep.spec.fields})
        except InterpError as exc:
            broken.append((path, str(exc)))
    if args.json:
        print(json.dumps(summaries + sweep_rows + [{"path": str(p), "error": e} for p, e in broken], indent=2))
        return 1 if broken else 0
    if not summaries and not broken and not sweep_rows:
        print(f"no runs or sweeps in {root}")
        return 0
    for row in sweep_rows:
        print(f"{Path(row['path']).name:<24} sweep: {row['runs']} runs ({row['done']} done, {row['running']} running, "
              f"{row['failed']} failed), axes {', '.join(row['axes'])}")
    if not summaries and not broken:
        return 0
    header = f"{'run':<24} {'direction':<9} {'K':>3} {'D':>7} {'seed':>4} {'ckpts':>5} {'last':>7} " \
             f"{'tau_half':>8} {'final Lc/logK':>13}"
    print(header)
    for s in summaries:
        final = s.get("final_loss_cand")
        final = None if final is None else final / s["log_k"]
        print(f"{Path(s['path']).name:<24} {s['direction']:<9} {s['k']:>3} {s['dataset_size']:>7} "
              f"{s['seed']:>4} {s['n_checkpoints']:>5} {_fmt(s['last_step']):>7} "
              f"{_fmt(s['tau_half']):>8} {_fmt(final, '.4f'):>13}")
    for path, error in broken:
        print(f"{path.name:<24} unreadable: {error}")
    return 1 if broken else 0


# ---------------------------------------------------------------------------- analyze
def cmd_analyze(args: argparse.Namespace) -> int:
    from interp.analysis import registry
    from interp.devices import check_device
    from interp.runs import Run

    names = registry.parse_only(args.only)
    run = Run.open(args.run)
    check_device(args.device)
    heads = None
    if args.heads is not None:
        from interp.names import parse_head

        heads = [h.strip() for h in args.heads.split(",") if h.strip()]
        bad = [h for h in heads if h.lower() != "full" and parse_head(h) is None]
        if bad or not heads:
            raise InterpError(f"--heads takes head names such as L0H3,L0H1 (or 'full'), got {args.heads!r}")
        if "full" not in {h.lower() for h in heads}:
            heads = ["full", *heads]  # the whole model's LLC beside the heads'
        heads = tuple(heads)
    from interp.analysis.findings import describe, describe_geometry
    from interp.analysis.suite import run_suite

    options = {"n_groups": args.n_groups, "method": args.method, "heads": heads}
    result = run_suite(run, only=names, steps=args.steps, options=options, device=args.device,
                       progress=not args.quiet and not args.json, cache=not args.no_cache)
    for line in result.notes + result.problems:
        print(f"interp: warning: {line}", file=sys.stderr)
    if args.json:
        tables = {name: json.loads(df.to_json(orient="records")) for name, df in result.tables.items()}
        print(json.dumps({"findings": result.findings, "tables": tables, "notes": result.notes,
                          "problems": result.problems}, default=str))
        return 1 if result.problems else 0
    print(f"{run.path}: {', '.join(result.tables)} "
          f"({result.cache_misses} computed, {result.cache_hits} from cache)")
    for line in describe(result.findings) + describe_geometry(result.tables):
        print("  " + line)
    if result.problems:
        print(f"interp: {len(result.problems)} step(s) could not be analysed (see the warnings above)",
              file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------------------- report / timeline
def _retrain(path: Path, quiet: bool, device: str) -> None:
    """Train the run at `path` again from its stored spec, replacing it only once done."""
    import shutil

    from interp.runs import Run
    from interp.train import train

    old = Run.open(path)
    fresh = path.with_name(path.name + ".retrain")
    if fresh.exists():
        shutil.rmtree(fresh)
    print(f"retraining {path} from its stored spec into {fresh}", file=sys.stderr)
    train(Run.create(fresh, old.spec), device=device, progress=not quiet)
    backup = path.with_name(path.name + ".old")
    if backup.exists():
        shutil.rmtree(backup)
    path.rename(backup)
    fresh.rename(path)
    shutil.rmtree(backup)


def cmd_report(args: argparse.Namespace) -> int:
    from interp.devices import check_device
    from interp.files import check_output_file
    from interp.report import write_report
    from interp.runs import Run

    check_output_file(args.output, "report file (-o)")
    check_device(args.device)
    from interp.sweeps.sweep import Sweep

    if Sweep.is_sweep(args.run):
        if args.retrain:
            raise InterpError("--retrain retrains one run; a sweep is trained with: interp sweep " + args.run)
        from interp.report.sweep import write_sweep_report

        import time

        start = time.perf_counter()
        path = write_sweep_report(Sweep.open(args.run), Path(args.output), runs=args.runs, progress=not args.quiet)
        print(f"wrote {path} in {time.perf_counter() - start:.1f} s")
        return 0
    Run.open(args.run)
    if args.retrain:
        _retrain(Path(args.run), args.quiet, args.device)
    import time

    start = time.perf_counter()
    path = write_report(Run.open(args.run), Path(args.output), cache=not args.no_cache, device=args.device,
                        progress=not args.quiet)
    print(f"wrote {path} in {time.perf_counter() - start:.1f} s")
    return 0


def cmd_timeline(args: argparse.Namespace) -> int:
    from interp.devices import check_device
    from interp.files import check_output_file
    from interp.report import write_timeline
    from interp.runs import Run

    check_output_file(args.output, "timeline file (-o)")
    check_device(args.device)

    path = write_timeline(Run.open(args.run), Path(args.output), cache=not args.no_cache, device=args.device,
                          progress=not args.quiet)
    print(f"wrote {path}")
    return 0


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
    from interp.presets import PRESETS, preset
    from interp.spec import dotted_names
    from interp.sweeps.presets import SWEEP_PRESETS
    from interp.sweeps.sweep import SweepSpec, parse_axis, parse_value

    name = args.preset or DEFAULT_PRESET
    if name in SWEEP_PRESETS:
        spec = SWEEP_PRESETS[name]
    elif name in PRESETS:
        spec = SweepSpec(base=preset(name))
    else:
        raise InterpError(f"unknown preset {name!r}; runs: {', '.join(PRESETS)}; sweeps: {', '.join(SWEEP_PRESETS)}")
    base, grid = spec.base, dict(spec.grid)
    for dotted in dotted_names():
        text = getattr(args, dotted, None)
        if text is None:
            continue
        values = [parse_value(dotted, v) for v in text.split(",") if v.strip()]
        if not values:
            raise InterpError(f"--{dotted.rpartition('.')[2].replace('_', '-')} has no value")
        if len(values) == 1 and "," not in text:
            base = base.replace(dotted, values[0])
        else:
            grid[dotted] = tuple(values)
    for text in args.grid or []:
        field, values = parse_axis(text)
        grid[field] = tuple(values)
    points = list(spec.points)
    for text in args.point or []:
        point = {}
        for item in text.split(","):
            field, _, value = item.partition("=")
            if not _:
                raise InterpError(f"a point is FIELD=V,FIELD=V (e.g. task.k=10,seed=1), got {text!r}")
            point[field.strip()] = parse_value(field.strip(), value)
        points.append(point)
    fixed_d = args.fixed_d if args.fixed_d is not None else spec.fixed_d
    return SweepSpec(base=base, grid=tuple(grid.items()), points=tuple(points), fixed_d=fixed_d, name=spec.name)


def cmd_sweep(args: argparse.Namespace) -> int:
    from interp.sweeps.sweep import Sweep, train_sweep

    target = list(args.target)
    if target[:1] == ["status"]:
        if len(target) != 2:
            raise InterpError("usage: interp sweep status SWEEP_FOLDER")
        sweep = Sweep.open(target[1])
        if args.json:
            print(sweep.table().to_json(orient="records"))
        else:
            for line in sweep.status_lines():
                print(line)
        return 0
    if len(target) > 1:
        raise InterpError(f"interp sweep takes one sweep folder, got {' '.join(target)}")
    from interp.devices import check_device

    device = check_device(args.device)
    folder = target[0] if target else args.out
    if folder is None:
        raise InterpError("give the sweep folder: interp sweep SWEEP_FOLDER, or --out SWEEP_FOLDER to create one")
    if target and args.out and Path(args.out) != Path(target[0]):
        raise InterpError("give the sweep folder once (either as the argument or as --out)")
    defines = args.preset is not None or args.grid or args.point or args.fixed_d is not None or any(
        getattr(args, d, None) is not None for d in _dotted())
    if defines or not Sweep.is_sweep(folder):
        sweep = Sweep.create(folder, _sweep_spec(args))
    else:
        sweep = Sweep.open(folder)
    n = len(sweep.points())
    print(f"sweep {sweep.path}: {n} runs ({args.backend}"
          + (f", {args.workers} workers" if args.backend == "local" else "") + ")", file=sys.stderr)
    outcome = train_sweep(sweep, backend=args.backend, workers=args.workers, threads=args.threads_per_run,
                          device=device, address=args.address, cpus_per_run=args.cpus_per_run,
                          gpus_per_run=args.gpus_per_run, progress=not args.quiet)
    states = [sweep.state_of(name)[0] for name, _, _ in sweep.points()]
    print(f"{states.count('done')} of {n} runs done, {states.count('failed')} failed "
          f"(interp sweep status {sweep.path})", file=sys.stderr)
    return 1 if outcome.failed or "failed" in states else 0


def _dotted() -> list[str]:
    from interp.spec import dotted_names

    return dotted_names()


# ---------------------------------------------------------------------------- scaling
def cmd_scaling(args: argparse.Namespace) -> int:
    from interp.report.sweep import sweep_fits
    from interp.sweeps.sweep import Sweep

    sweep = Sweep.open(args.sweep)
    table = sweep.table()
    fits = sweep_fits(table, y=args.y)
    if args.json:
        print(json.dumps({"results": {k: v.to_dict() for k, v in fits.results.items()},
                          "not_applicable": fits.problems, "warnings": fits.warnings}, indent=2))
        return 0
    counts = table["status"].value_counts().to_dict()
    print(f"{sweep.path}: {len(table)} runs ({counts.get('done', 0)} done, "
          f"{int(table['censored'].fillna(False).sum())} censored, {counts.get('failed', 0)} failed)")
    for name, result in fits.results.items():
        print(f"  {name:<10} {result.summary()}")
    for name, why in fits.problems.items():
        print(f"  {name:<10} n/a: {why}")
    for line in fits.warnings:
        print(f"interp: warning: {line}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    from interp.presets import PRESETS

    parser = _Parser(prog="interp", description="Training dynamics of the disambiguation task.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("train", help="train a run (or --resume one) with dense checkpoints")
    p.add_argument("--preset", choices=list(PRESETS), help=f"named configuration (default: {DEFAULT_PRESET})")
    p.add_argument("--out", help="run folder to create (default: checkpoints/PRESET)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_override_flags(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("show", help="spec, saved steps, plateau height and tau of a run")
    p.add_argument("run", help="run folder")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_show)

    from interp.analysis import registry

    p = sub.add_parser("analyze", help="run the analysis suite on a run (cached) and print the findings",
                       description="Analyses: " + registry.describe_all() + ". Exit status 1 when some steps "
                                   "could not be analysed (each is named in a warning).")
    p.add_argument("run", help="run folder")
    p.add_argument("--only", help="comma-separated subset of: " + ", ".join(registry.REGISTRY)
                   + f" (default: {', '.join(registry.default_names())})")
    p.add_argument("--steps", help="saved steps, 'all', or pre/mid/post (tau/4, tau, 2 tau), comma-separated")
    p.add_argument("--method", choices=["zero", "mean", "resample"],
                   help="ablation method (default: all three)")
    p.add_argument("--heads", help="heads for the per-head LLC, e.g. L0H3,L0H1 (the whole model's is added)")
    p.add_argument("--n-groups", type=_positive_int, help="probe size in groups (default: per analysis)")
    p.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    p.add_argument("--no-cache", action="store_true", help="recompute everything, write nothing")
    p.add_argument("--json", action="store_true", help="findings and tables as JSON on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_analyze)

    for name, helptext, default in (
        ("report", "write a self-contained HTML report of a run or of a sweep (summary table, every figure)",
         "report.html"),
        ("timeline", "write the circuit-formation timeline of a run as a self-contained HTML page",
         "timeline.html"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("run", help="run folder")
        p.add_argument("-o", "--output", default=default, help=f"HTML file to write (default: {default})")
        p.add_argument("--device", default="cpu", help="torch device for the analyses (default: cpu)")
        p.add_argument("--no-cache", action="store_true", help="recompute the analyses, write no cache")
        p.add_argument("--quiet", action="store_true", help="no progress bar")
        if name == "report":
            p.add_argument("--retrain", action="store_true",
                           help="first train the run again from its stored spec (replaces it when done)")
            p.add_argument("--runs", action="store_true",
                           help="for a sweep: also write each done run's report beside it, linked from the table")
        p.set_defaults(func=cmd_report if name == "report" else cmd_timeline)

    from interp.sweeps.executors import BACKENDS

    p = sub.add_parser("sweep", help="create, extend, train or show a sweep (a family of runs)",
                       description="interp sweep --preset tiny --grid task.k=5,10,20 --seed 0,1 --out sweeps/k; "
                                   "interp sweep sweeps/k (again: skips finished runs, resumes interrupted ones); "
                                   "interp sweep status sweeps/k. Exit status 1 when a run failed.")
    p.add_argument("target", nargs="*", help="SWEEP_FOLDER, or: status SWEEP_FOLDER")
    p.add_argument("--preset", help=f"a run preset (the base) or a sweep preset (default: {DEFAULT_PRESET})")
    p.add_argument("--out", help="sweep folder to create or extend")
    p.add_argument("--grid", action="append", metavar="FIELD=V1,V2", help="a grid axis by dotted field "
                   "(task.k, task.n_bases, train.lr, train.batch_size, seed, task.direction, model.n_layers, ...)")
    p.add_argument("--point", action="append", metavar="FIELD=V,FIELD=V", help="an explicit point (repeatable)")
    p.add_argument("--fixed-d", type=_positive_int, help="fixed dataset size D: n_bases = D / K for each K")
    p.add_argument("--backend", default="local", choices=list(BACKENDS), help="where runs train (default: local)")
    p.add_argument("--workers", type=_positive_int, default=1, help="local processes (default: 1)")
    p.add_argument("--threads-per-run", type=_positive_int,
                   help="torch threads of each run (default: cores / workers; weights depend on it on the CPU)")
    p.add_argument("--address", help="Ray cluster address (default: start a local Ray instance)")
    p.add_argument("--cpus-per-run", type=float, default=1, help="Ray: CPUs per run (default: 1)")
    p.add_argument("--gpus-per-run", type=float, default=0, help="Ray: GPUs per run (default: 0)")
    p.add_argument("--device", default="cpu", help="torch device of every run (default: cpu)")
    p.add_argument("--json", action="store_true", help="status: the table as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_sweep_value_flags(p)
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("scaling", help="the family-level fits of a sweep: scaling law, fixed D, noise, asymmetry")
    p.add_argument("sweep", help="sweep folder")
    p.add_argument("--y", default="tau_half", choices=["tau_half", "tau_window"], help="the plateau measure")
    p.add_argument("--json", action="store_true", help="every fit as JSON")
    p.set_defaults(func=cmd_scaling)

    p = sub.add_parser("ls", help="one line per run or sweep in a folder")
    p.add_argument("folder", nargs="?", default="checkpoints")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_ls)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except InterpError as exc:
        print(f"interp: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the file system refused (permissions, a full disk, a path under a file)
        where = f": {exc.filename}" if exc.filename else ""
        print(f"interp: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
