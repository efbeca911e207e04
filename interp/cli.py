"""The `interp` command. Thin: it parses, calls the library and prints.

Bad input exits with status 2 and one line on stderr; never a traceback. A folder another live process
writes (its writer's lock is held: `interp.files.LockHeld`) exits with status 1 and one line naming the
holder, whichever command met it. Ctrl-C exits with
status 130 and one line; a run folder this command made is removed unless it holds a checkpoint.
"""

from __future__ import annotations

import sys

try:  # Ctrl-C while the command starts up is one line too
    import argparse
    import dataclasses
    import json
    import re
    from pathlib import Path

    from interp.errors import InterpError
    from interp.files import LockHeld
    from interp.presets import DEFAULT_PRESET
except KeyboardInterrupt:
    print("interrupted", file=sys.stderr)
    exec("pass")  # noqa: S102 - see _forget_keyboard_interrupt
    sys.exit(130)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and still exit status 2), and any negative
    number (`--lr -1e-3`, not only `-1` and `-0.5`) or range starting with one (`--gamma-window
    -5:100`) is read as a value, so that its validation says what is allowed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        number = r"(\d+\.?\d*|\.\d+)(e[-+]?\d+)?"
        self._negative_number_matcher = re.compile(rf"^-({number}|inf|infinity|nan)(:[-+]?{number})?$", re.IGNORECASE)

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _optional(kind):
    def parse(text: str):
        return None if text.lower() == "none" else kind(text)

    parse.__name__ = kind.__name__
    return parse


NO_FLAG = ("source",)  # spec fields no command line sets: a task's source is what made the run (interp import)


def _add_override_flags(parser: argparse.ArgumentParser) -> None:
    """One --flag per spec field (`--k`, `--n-bases`, `--lr`, `--d-model`, ...)."""
    from interp.spec import (ACT_FNS, CHECKPOINT_DTYPES, DIRECTIONS, HOLDOUT_BY, OPTIMIZERS, PRECISIONS, SCHEDULES,
                             SELECTORS, ModelSpec, TaskSpec, TrainSpec)

    choices = {"direction": list(DIRECTIONS), "schedule": list(SCHEDULES), "act_fn": list(ACT_FNS),
               "checkpoint_dtype": list(CHECKPOINT_DTYPES), "precision": list(PRECISIONS),
               "optimizer": list(OPTIMIZERS), "holdout_by": list(HOLDOUT_BY), "selector": list(SELECTORS)}
    types = {"int": int, "float": float, "str": str, "int | None": _optional(int),
             "float | None": _optional(float), "str | None": _optional(str)}
    parser.add_argument("--seed", type=int, help="one seed for data, initialisation and batch order")
    for title, cls in (("task", TaskSpec), ("model", ModelSpec), ("training", TrainSpec)):
        group = parser.add_argument_group(f"{title} overrides (default: the preset's value)")
        for f in dataclasses.fields(cls):
            if f.name in NO_FLAG:
                continue
            flag = "--" + f.name.replace("_", "-")
            if f.type == "bool":
                group.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=None)
            else:
                group.add_argument(flag, dest=f.name, type=types[f.type], choices=choices.get(f.name),
                                   metavar=f.name.upper() if f.name not in choices else None)
            if f.name == "beta2":
                group.add_argument("--betas", dest="betas", type=_betas, metavar="B1,B2",
                                   help="--beta1 and --beta2 at once (Adam's moments; RMSProp's alpha is B2)")


def _betas(text: str) -> tuple[float, float]:
    """--betas B1,B2: two numbers (each checked by the spec)."""
    parts = text.split(",")
    try:
        if len(parts) != 2:
            raise ValueError
        return float(parts[0]), float(parts[1])
    except ValueError:
        raise argparse.ArgumentTypeError(f"give two numbers B1,B2 (e.g. 0.9,0.999), got {text!r}") from None


def _overrides(args: argparse.Namespace) -> dict:
    from interp.spec import override_names

    out = {name: getattr(args, name) for name in override_names() if getattr(args, name, None) is not None}
    betas = getattr(args, "betas", None)
    if betas is not None:
        for name, value in zip(("beta1", "beta2"), betas):
            if name in out and out[name] != value:
                raise InterpError(f"--betas {betas[0]},{betas[1]} and --{name} {out[name]} disagree; give one")
            out[name] = value
    return out


# ---------------------------------------------------------------------------- train
def cmd_train(args: argparse.Namespace) -> int:
    from interp.devices import check_device, check_fits
    from interp.runs import Run, check_new_folder

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
    run = None
    from interp.devices import torch_threads

    try:
        run = Run.create(out, spec)  # removes what it made itself if it fails or is interrupted
        with torch_threads(args.threads):
            return _train(run, device, args, fresh=created)
    except BaseException:  # Ctrl-C or an error before the first checkpoint leaves no folder behind
        if created and run is not None and _unstarted(run):
            from interp.train import remove_unstarted

            remove_unstarted(run)
        raise


def _unstarted(run) -> bool:
    try:
        return not run.steps
    except InterpError:
        return False


def _resume(out: Path, overrides: dict, args: argparse.Namespace) -> int:
    from interp.devices import check_device
    from interp.train import prepare_resume

    device = check_device(args.device)
    run, state = prepare_resume(out, overrides, device)
    from interp.run_segments import recorded_threads

    # the threads it was trained with, as recorded (bit-exact); --threads changes them (and the resume says so)
    from interp.devices import torch_threads

    with torch_threads(args.threads or recorded_threads(run.info)):  # given back after (the caller may be a script)
        return _train(run, device, args, resume=state)


def _train(run, device: str, args: argparse.Namespace, fresh: bool = False, resume=None) -> int:
    from interp.cli_track import tracker_of
    from interp.forks.arm_steps import stepper_for
    from interp.summary import as_text, run_rows, run_summary
    from interp.train import train

    print(f"training {run!r} on {device}", file=sys.stderr)
    try:
        result = train(run, device=device, progress=not args.quiet, resume=resume, stepper=stepper_for(run),
                       sink=tracker_of(args))
    except KeyboardInterrupt:
        if fresh and _unstarted(run):
            raise  # cmd_train removes the folder, main() says "interrupted"
        print(f"\ninterrupted; continue with: interp train --resume --out {run.path}", file=sys.stderr)
        return 130
    decided = (run.status or {}).get("outcome") if (run.status or {}).get("decided") else None
    note = f" (stopped: {decided})" if decided else " (stopped after the snap)" if result.stopped_early else ""
    if result.trained:
        print(f"trained to step {result.last_step} in {result.seconds:.1f} s{note}", file=sys.stderr)
    else:
        print(f"already finished at step {result.last_step}{note}: nothing to train, nothing written", file=sys.stderr)
    print(as_text(run_rows(run_summary(run))))
    return 0


# ---------------------------------------------------------------------------- analyze
def cmd_analyze(args: argparse.Namespace) -> int:
    from interp.analysis import registry
    from interp.devices import check_device

    names = registry.parse_only(args.only)
    registry.require_extras(names)  # an analysis whose pip extra is missing: one refusal, before any work
    options = {o.dest: getattr(args, o.dest, None) for o in registry.options()}
    unused = [o for o in registry.options() if options[o.dest] is not None
              and not any(o in registry.get(n).options for n in names)]
    if unused:  # given for an analysis not asked for: said, never silently dropped
        asked = f"--only {args.only}" if args.only else f"the default analyses ({', '.join(names)})"
        users = {o.flag: ", ".join(e.name for e in registry.REGISTRY.values() if o in e.options) for o in unused}
        _warn(f"{', '.join(f'--{flag} (of {who})' for flag, who in users.items())} ignored: not among {asked}")
    from interp.cli_sweep import EXECUTOR_FLAGS, cmd_analyze_sweep
    from interp.collections.folders import RUN, kind_of, open as open_folder

    if kind_of(args.run) != RUN:  # a sweep or a fork family
        return cmd_analyze_sweep(args, names, {k: v for k, v in options.items() if v is not None})
    given = [f"--{f.replace('_', '-')}" for f in EXECUTOR_FLAGS if getattr(args, f) is not None]
    if given:
        raise InterpError(f"{', '.join(given)}: for a sweep folder; {args.run} is a run, analysed in this process")
    run = open_folder(args.run)
    check_device(args.device)
    from interp.collections.states import log_damage

    problem = log_damage(run)  # tau and every finding placed by it rest on the log: a damaged one is named, not read
    if problem is not None:
        print(f"interp: damaged run: {run.path}: {problem}", file=sys.stderr)
        return 1
    from interp.analysis.findings import summary_rows
    from interp.analysis.suite import run_suite
    from interp.summary import as_text

    result = run_suite(run, only=names, steps=args.steps, options=options, device=args.device,
                       progress=not args.quiet and not args.json, cache=not args.no_cache)
    for line in result.notes + result.problems:
        _warn(line)
    if args.json:
        tables = {name: json.loads(df.to_json(orient="records")) for name, df in result.tables.items()}
        print(json.dumps({"findings": result.findings, "tables": tables, "notes": result.notes,
                          "problems": result.problems}, default=str))
        return 1 if result.problems else 0
    print(f"{run.path}: {', '.join(result.tables)} "
          f"({result.cache_misses} computed, {result.cache_hits} from cache)")
    rows = [("tau (tau_half)", "-" if result.findings.get("tau") is None else str(result.findings["tau"]))]
    print("\n".join("  " + line for line in as_text(rows + summary_rows(result.findings, result.tables)).splitlines()))
    if result.problems:
        print(f"interp: {len(result.problems)} step(s) could not be analysed (see the warnings above)",
              file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------------------- report / timeline
def _warn(note: str) -> None:
    """A note the analyses left (a cache entry not used, a step not analysed), said as `interp analyze` says it."""
    print(f"interp: warning: {note}", file=sys.stderr)


def cmd_report(args: argparse.Namespace) -> int:
    from interp.devices import check_device
    from interp.files import check_output_file
    from interp.report import write_report
    from interp.runs import Run

    check_output_file(args.output, "report file (-o)")
    check_device(args.device)
    from interp.collections.folders import FAMILY, SWEEP, kind_of, open as open_folder

    kind = kind_of(args.run)
    if kind == FAMILY:
        return _report_family(args)
    if kind == SWEEP:
        if args.retrain:
            raise InterpError("--retrain retrains one run; a sweep is trained with: interp sweep " + args.run)
        from interp.report.sweep import write_sweep_report

        import time

        start = time.perf_counter()
        from interp.cli_sweep import report_damaged

        sweep = open_folder(args.run)
        table = sweep.table(circuits=True)  # the circuit columns read each run's analysis cache
        path = write_sweep_report(sweep, Path(args.output), runs=args.runs, progress=not args.quiet, table=table)
        print(f"wrote {path.resolve()} in {time.perf_counter() - start:.1f} s")
        return report_damaged(table)  # 1 when some run is damaged (a row of the report, left out of the fits)
    open_folder(args.run)  # a run, or the one-line error of a folder that is none of them
    if args.retrain:
        from interp.train import retrain

        print(f"retraining {args.run} from its stored spec (the old run is replaced once done)", file=sys.stderr)
        retrain(args.run, device=args.device, progress=not args.quiet)
    import time

    from interp.report.run import plan

    run = Run.open(args.run)
    print(plan(run, cache=not args.no_cache), file=sys.stderr)  # what it computes and about how long, up front
    start = time.perf_counter()
    path = write_report(run, Path(args.output), cache=not args.no_cache, device=args.device, progress=not args.quiet,
                        warn=_warn)  # the page's notes, on stderr too
    print(f"wrote {path.resolve()} in {time.perf_counter() - start:.1f} s")
    return 0


def _report_family(args: argparse.Namespace) -> int:
    """The report of a fork family (a folder with forks.json); 1 when some fork is damaged."""
    import time

    from interp.cli_sweep import report_damaged
    from interp.collections.folders import open as open_folder
    from interp.report.fork_data import read_family
    from interp.report.forks import fork_family_report

    if args.retrain or args.runs:
        flag = "--retrain" if args.retrain else "--runs"
        raise InterpError(f"{flag} is for a run or a sweep; a fork is a run: interp report {args.run}/FORK -o FILE")
    start = time.perf_counter()
    family = open_folder(args.run)
    data = read_family(family)
    path = fork_family_report(family, Path(args.output), progress=not args.quiet, data=data)
    print(f"wrote {path.resolve()} in {time.perf_counter() - start:.1f} s")
    return report_damaged(data.table)  # 1 when some fork is damaged (named in the report and here)


def cmd_timeline(args: argparse.Namespace) -> int:
    from interp.devices import check_device
    from interp.files import check_output_file
    from interp.report import write_timeline
    from interp.runs import Run

    check_output_file(args.output, "timeline file (-o)")
    check_device(args.device)

    path = write_timeline(Run.open(args.run), Path(args.output), cache=not args.no_cache, device=args.device,
                          progress=not args.quiet, warn=_warn)  # the page's notes, on stderr too
    print(f"wrote {path}")
    return 0


# ---------------------------------------------------------------------------- main
def _typed(option):
    """An analysis option's parser as an argparse type (its errors become argparse's one line)."""
    def parse(text: str):
        try:
            return option.read(text)
        except InterpError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"--{option.flag}: ")) from None

    parse.__name__ = option.flag
    return parse


def build_parser() -> argparse.ArgumentParser:
    from interp.presets import PRESETS

    from interp.cli_sweep import _positive_int, path_arg  # every path: an empty or blank one is refused
    from interp.cli_track import add_track_flag

    parser = _Parser(prog="interp", description="Training dynamics of the disambiguation task.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("train", help="train a run (or --resume one) with dense checkpoints")
    p.add_argument("--preset", choices=list(PRESETS), help=f"named configuration (default: {DEFAULT_PRESET})")
    p.add_argument("--out", type=path_arg("--out"), help="run folder to create (default: checkpoints/PRESET)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--threads", type=_positive_int, help="torch threads (default: a resume's are the ones its run "
                                                         "was trained with, as recorded; a new run's torch's own)")
    p.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_track_flag(p)
    _add_override_flags(p)
    p.set_defaults(func=cmd_train)

    from interp.cli_show import add_ls_parser, add_show_parser

    add_show_parser(sub)

    from interp.analysis import registry

    p = sub.add_parser("analyze", help="run the analysis suite on a run (cached) and print the findings",
                       description="Analyses: " + registry.describe_all() + ". Exit status 1 when some steps "
                                   "could not be analysed (each is named in a warning).")
    p.add_argument("run", type=path_arg("the run, sweep or fork family folder"),
                   help="run folder, or a sweep or fork family folder: every finished run of it (each cached "
                               "in its own folder), then its circuit columns and family fits")
    p.add_argument("--only", help="comma-separated subset of: " + ", ".join(registry.REGISTRY)
                   + f" (default: {', '.join(registry.default_names())}); "
                   + "; ".join(f"{g} = {', '.join(m)}" for g, m in registry.GROUPS.items()))
    p.add_argument("--steps", help="saved steps, 'all', or pre/mid/post (tau/4, tau, 2 tau), comma-separated")
    for option in registry.options():  # each analysis's own options, from its registry entry
        users = ", ".join(e.name for e in registry.REGISTRY.values() if option in e.options)
        p.add_argument("--" + option.flag, dest=option.dest, type=_typed(option), metavar=option.metavar,
                       help=f"{option.help} [{users}]" + (f"; {'one or more' if option.several else 'one'} of "
                                                          f"{', '.join(option.choices)}" if option.choices else ""))
    p.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    p.add_argument("--no-cache", action="store_true", help="recompute everything, write nothing")
    p.add_argument("--json", action="store_true", help="findings and tables as JSON on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    from interp.cli_sweep import add_executor_flags

    add_executor_flags(p.add_argument_group("a sweep folder"), "are analysed", defaults=False)
    p.set_defaults(func=cmd_analyze)

    for name, helptext, default in (
        ("report", "write a self-contained HTML report of a run, a sweep or a fork family (summary, every figure)",
         "report.html"),
        ("timeline", "write the circuit-formation timeline of a run as a self-contained HTML page",
         "timeline.html"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("run", type=path_arg("the run folder" if name == "timeline" else "the run, sweep or fork family folder"),
                       help="run folder")
        p.add_argument("-o", "--output", default=default, type=path_arg(f"the {name} file (-o)"),
                       help=f"HTML file to write (default: {default})")
        p.add_argument("--device", default="cpu", help="torch device for the analyses (default: cpu)")
        p.add_argument("--no-cache", action="store_true", help="recompute the analyses, write no cache")
        p.add_argument("--quiet", action="store_true", help="no progress bar")
        if name == "report":
            p.add_argument("--retrain", action="store_true",
                           help="first train the run again from its stored spec (replaces it when done)")
            p.add_argument("--runs", action="store_true",
                           help="for a sweep: also write each done run's report beside it, linked from the table")
        p.set_defaults(func=cmd_report if name == "report" else cmd_timeline)

    from interp import cli_doctor, cli_export, cli_fork, cli_import, cli_mechanisms, cli_phase, cli_sweep

    for module in (cli_sweep, cli_fork, cli_mechanisms, cli_export, cli_doctor, cli_import, cli_phase):  # each module's subcommands
        module.add_parsers(sub)

    add_ls_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The command; `argv` None: the process's own arguments."""
    previous = sys.unraisablehook
    sys.unraisablehook = _redeliver_ctrl_c(previous)
    try:
        status = _main(argv)
    finally:
        sys.unraisablehook = previous
    if status == 130:
        _forget_keyboard_interrupt()
    return status


def _redeliver_ctrl_c(previous):
    """An unraisable hook: a Ctrl-C that lands in a finalizer (a `__del__`) is swallowed by Python
    with a traceback; deliver it again instead, to the command, which then stops as it should."""
    def hook(unraisable) -> None:
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            return previous(unraisable)
        import _thread
        import threading

        later = threading.Timer(0.01, _thread.interrupt_main)  # from the hook itself it would land in the hook
        later.daemon = True
        later.start()

    return hook


def _forget_keyboard_interrupt() -> None:
    """CPython remembers a KeyboardInterrupt raised inside exec'd source (dataclasses builds its
    methods so, at import) even when it was caught, and then ends `python -m interp.cli` by
    killing itself with SIGINT (status -2, not 130). Running exec'd source again clears that."""
    exec("pass")  # noqa: S102 - a constant: only its side effect on the interpreter is wanted


def _main(argv: list[str] | None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except KeyboardInterrupt:  # Ctrl-C anywhere (importing torch, building the task, ...): one line
        print("interrupted", file=sys.stderr)
        return 130
    except InterpError as exc:
        if isinstance(exc, LockHeld):  # the input is fine, the folder is busy: 1, as `interp fork` says it
            print(f"interp: {exc}", file=sys.stderr)
            return 1
        print(f"interp: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the file system refused (permissions, a full disk, a path under a file)
        where = f": {exc.filename}" if exc.filename else ""
        print(f"interp: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
