"""The `interp fork` command: one fork, or a family of forks (parsing and printing only)."""

from __future__ import annotations

import argparse
import json
import sys

from interp.errors import InterpError


def _ints(what: str):
    def parse(text: str) -> list[int]:
        try:
            values = [int(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be whole numbers separated by commas, got {text!r}") from None
        if not values or any(v < 0 for v in values):
            raise argparse.ArgumentTypeError(f"{what} must be whole numbers >= 0, got {text!r}")
        return values

    parse.__name__ = what
    return parse


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {text!r}")
    return value


DEFAULT_GAMMA_WINDOW = 200  # interp.forks.fork's (not imported here: it imports torch)
SETTING_ARMS = ("lr", "batch_size", "weight_decay")  # `interp train` flags that are arms of `interp fork`


def _settings(args: argparse.Namespace) -> dict:
    out = {name: getattr(args, name) for name in ("eval_every", "checkpoint_every", "checkpoint_dtype")
           if getattr(args, name) is not None}
    if args.save_optimizer is not None:  # a fork of a fork inherits --save-optimizer: --no-save-optimizer drops it
        out["save_optimizer"] = args.save_optimizer
    if args.stop_after_snap is not None:
        out["stop_after_snap"] = None if args.stop_after_snap == "none" else args.stop_after_snap
    return out


def _stop_after_snap(text: str):
    """STEPS (a whole number >= 0) or none: a fork of a solved run (a relapse) must not stop after its snap."""
    if text.strip().lower() == "none":
        return "none"
    try:
        return _non_negative(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0 or none, got {text!r}") from None


def cmd_fork(args: argparse.Namespace) -> int:
    from interp.cli_track import tracker_of
    from interp.forks.arms import parse_arms
    from interp.forks.family import ForkFamily

    for arm in SETTING_ARMS:  # train's flags a fork takes only as an arm
        value = getattr(args, f"setting_{arm}", None)
        if value is not None:
            raise InterpError(f"interp fork has no --{arm.replace('_', '-')}: a fork changes its {arm} only as an arm, "
                              f"e.g. --arm {arm}:value={value}")
    target = list(args.target)
    if target[:1] == ["status"]:
        if len(target) != 2:
            raise InterpError("usage: interp fork status FAMILY_FOLDER [--json] [--escape CRITERION] "
                              "[--gamma-window A:B]")
        return _status(ForkFamily.open(target[1]), args.json, args.escape, args.gamma_window)
    if len(target) != 1:
        raise InterpError("usage: interp fork RUN --at STEP --arm NAME[:key=value,...] --steps N --out DIR")
    for name in ("at", "steps", "out"):
        if getattr(args, name) is None:
            raise InterpError(f"interp fork needs --{name}")
    from interp.forks.escape import check_gamma_window, parse_escape, parse_gamma_window

    criterion = parse_escape(args.escape)  # bad input is refused before anything is opened or written
    relapse = _relapse(args)
    criterion.check_horizon(args.steps)
    window = (0, DEFAULT_GAMMA_WINDOW)
    if args.gamma_window is not None:
        window = parse_gamma_window(args.gamma_window)
        check_gamma_window(window, args.steps)
    import torch

    from interp.devices import check_device
    from interp.runs import Run
    from interp.collections.executors import check_options

    check_options(args.backend, args.workers, args.threads_per_run, args.cpus_per_run, args.gpus_per_run)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = check_device(args.device)
    parent = Run.open(target[0])
    arms = parse_arms(args.arm or "continue")
    at = [a for a in args.at.split(",") if a.strip()]
    if relapse is not None:  # the relapsed state's step, found before anything is written
        from interp.forks.relapse import relapse_at

        at = [str(relapse_at(parent, relapse, _held_steps(a))) if _held_steps(a) is not None else a for a in at]
    seeds = args.seed or [0]
    settings = _settings(args)
    single = len(at) == 1 and len(arms) == 1 and len(seeds) == 1 and not ForkFamily.is_family(args.out)
    if single:
        from interp.files import LockHeld
        from interp.forks.fork import fork

        try:
            run = fork(parent, at[0], arms[0], args.steps, args.out, seed=seeds[0], gamma_every=args.gamma_every,
                       gamma_window=window[1], settings=settings, device=device, progress=not args.quiet,
                       sink=tracker_of(args, parent.name))
        except LockHeld as exc:  # the input is fine (not 2): the fork is another process's to finish, not done here
            return _held(args.out, exc.holder, args.json)
        return _single(run, args.json, criterion, window)
    family = ForkFamily.create(parent, at, arms, seeds, args.steps, args.out, gamma_every=args.gamma_every,
                               gamma_window=window if args.gamma_window is not None else window[1],
                               settings=settings, device=device, escape=criterion, relapse=relapse)
    n = len(family.points())
    from interp.cli_sweep import rerun_executor

    workers, threads, keep = rerun_executor(family, args)
    print(f"fork family {family.path}: {n} forks of {parent.path} ({args.backend}"
          + (f", {workers} workers" if args.backend == "local" else "") + ")", file=sys.stderr)
    outcome = family.train(backend=args.backend, workers=workers, threads=threads, device=device,
                           address=args.address, cpus_per_run=args.cpus_per_run, gpus_per_run=args.gpus_per_run,
                           progress=not args.quiet, sink=tracker_of(args, family.path.name), keep_threads=keep)
    code = _status(family, args.json, held_ok=True)
    from interp.collections.training import held_note

    note = held_note(family, family.final_states(outcome), "fork", "interp fork status")
    if note:  # forks another process trains: its to finish, not this command's failure (exit 0, as interp sweep)
        print(note, file=sys.stderr)
    return code


def _relapse(args: argparse.Namespace):
    """The relapse criterion when --at names `relapse` (None otherwise); --relapse without it is refused."""
    from interp.forks.relapse import parse_relapse

    named = any(_held_steps(a) is not None for a in args.at.split(","))
    if args.relapse is not None and not named:
        raise InterpError(f"--relapse {args.relapse} is used only with --at relapse (the state nearest at or after "
                          f"the run's relapse); add relapse to --at, or leave --relapse out")
    return parse_relapse(args.relapse) if named else None


def _held_steps(text: str) -> int | None:
    """H of "relapse" (0) or "relapse+H" (the relapse's depth), None for any other --at item."""
    import re

    match = re.fullmatch(r"relapse(?:\+(\d+))?", text.strip().replace(" ", ""))
    return None if match is None else int(match.group(1) or 0)


def _held(out, holder: str, as_json: bool) -> int:
    """A fork another live process writes (trains or makes): one line naming it, exit 1 (the fork is not done),
    as a family names its held forks (`interp.collections.training.held_note`)."""
    if as_json:
        print(json.dumps({"run": str(out), "status": "running", "holder": holder}))
    print(f"interp: fork {out} not trained here, being written by another process ({holder}); that process "
          f"finishes it (see interp show {out}); if it stops first, run this command again to resume it", file=sys.stderr)
    return 1


def _single(run, as_json: bool, criterion, window: tuple[int, int]) -> int:
    from interp.collections.states import examine
    from interp.forks.family import escapes

    block = run.fork
    st = examine(run.path, run.spec)  # read as a family reads its forks: a lost log tail is damage, not censoring
    if st.state == "damaged":
        if as_json:
            print(json.dumps({"run": str(run.path), "status": "damaged", "error": st.error, "fork": block}, default=str))
        print(f"interp: damaged fork: {run.path}: {st.error}", file=sys.stderr)
        return 1
    state = (run.status or {}).get("state", "interrupted")
    esc = escapes(run, block["parent_step"], state, criterion, window)
    if as_json:
        print(json.dumps({"run": str(run.path), "status": state, "fork": block, "escape_criterion": criterion.text,
                          "gamma_range": f"{window[0]}:{window[1]}", **esc}, default=str))
    else:
        label = block["arm"] + (":" + ",".join(f"{k}={v}" for k, v in block["params"].items()) if block["params"] else "")
        half = (f"> {esc['steps_run']} (censored)" if esc["censored_escape_half"]
                else "-" if esc["escape_half"] != esc["escape_half"] else f"{esc['escape_half']:.0f}")
        held = (f"> {esc['steps_run']} (censored)" if esc["censored_escape"]
                else "-" if esc["escape"] != esc["escape"] else f"{esc['escape']:.0f}")
        judged = "" if criterion.is_default else f"; escape ({criterion.words}) after {held} steps"
        print(f"fork {run.path}: {label} from step {block['parent_step']} of {block['parent']} ({block['state']}); "
              f"{state}; escape to tau_half after {half} steps{judged}")
    return 0 if state == "done" else 1


def _status(family, as_json: bool, escape: str | None = None, gamma_window: str | None = None,
            held_ok: bool = False) -> int:
    """The family's table and comparison, its escape judged under its criterion and its per-step Gamma median
    over its range, or those `--escape` / `--gamma-window` give (re-judged from the logs; bad ones refused first).
    Exit 1 when a fork is damaged, failed or unfinished; with `held_ok` (after training) not for a fork another
    process is training."""
    import warnings

    from interp.cli_sweep import report_damaged
    from interp.sweeps.forks import forks

    criterion, _ = family.judging(escape, gamma_window)
    table = family.table(escape=escape, gamma_window=gamma_window)
    gone = family.parent_problem()  # a made fork needs nothing of its parent: the forks are still read
    comparison = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            comparison = forks(table)
        except InterpError as exc:
            note = str(exc)
    if as_json:
        print(json.dumps({"table": json.loads(table.to_json(orient="records")),
                          "comparison": None if comparison is None else comparison.to_dict(), "parent_problem": gone}))
    else:
        if gone:
            print(f"parent {family.design['parent']}: missing ({gone}); the forks are read from their own folders")
        for r in table.to_dict("records"):
            label = r["arm"] + (f":{r['arm_params']}" if r["arm_params"] else "")
            half = ("-" if r["escape_half"] != r["escape_half"] else f"{r['escape_half']:.0f}")
            if r["censored_escape_half"]:
                half = f">{r['steps_run']}"
            gamma = "" if r["gamma"] != r["gamma"] else f"  gamma {r['gamma']:.3g}"
            if r["gamma_median"] == r["gamma_median"]:
                gamma += f"  gamma median {r['gamma_median']:.3g}"
            held = ""
            if not criterion.is_default:
                from interp.mechanisms.fork_measures import censored_at

                bound = censored_at(r)  # a held escape censored mid-stretch: where the stretch began
                held = ((f">= {bound:.0f}" if bound < (r["steps_run"] or 0) else f">{r['steps_run']}")
                        if r["censored_escape"] else ("-" if r["escape"] != r["escape"] else f"{r['escape']:.0f}"))
                held = f"  escape {held}"
            print(f"{r['run']:<36} at {r['fork_step']:<6} {label:<30} seed {r['fork_seed']:<3} {r['status']:<12} "
                  f"escape_half {half}{held}{gamma}")
        print(comparison.summary() if comparison is not None else f"(no comparison: {note})")
    unfinished = int((~table["status"].isin(["done", "damaged", *(["running"] if held_ok else [])])).sum())
    failed = int((table["status"] == "failed").sum())
    return max(report_damaged(table, name_them=as_json), 1 if failed or unfinished else 0)


def add_parsers(sub) -> None:
    from interp.cli_track import add_track_flag
    from interp.cli_sweep import _positive_int, add_executor_flags, path_arg
    from interp.forks.arms import ARMS
    from interp.spec import CHECKPOINT_DTYPES

    p = sub.add_parser(
        "fork", help="continue a run's frozen state at a saved step under changed regimes (arms)",
        description="interp fork RUN --at STEP --arm NAME[:key=value,...] --steps N --out DIR makes one fork (a run "
                    "folder); lists (--at 450,600 --arm minibatch,full_batch --seed 0,1,2) make a family of forks "
                    "trained like a sweep; interp fork status DIR shows a family's table and the comparison of its "
                    "arms. One fork exits 0 when it is done, 1 when not (interrupted, damaged, or being written by "
                    "another process, which is named), 2 on bad input. Arms: "
                    + "; ".join(f"{name}: {d.doc}" for name, d in ARMS.items()) + ". docs/forks.md.")
    p.add_argument("target", nargs="*", type=path_arg("the run or fork family folder"),
                   help="RUN, or: status FAMILY_FOLDER")
    p.add_argument("--at", help="fork step(s): saved steps, tau/2 (any tau/N, F*tau), pre, mid, post, relapse, "
                                  "relapse+H (held relapsed H steps), comma-separated")
    p.add_argument("--arm", help="arm(s): NAME[:key=value,...], comma-separated (default: continue)")
    p.add_argument("--seed", type=_ints("fork seeds"), help="fork seed(s): the batch and noise streams (default: 0)")
    p.add_argument("--steps", type=_positive_int, help="the horizon: steps after the fork step")
    p.add_argument("--out", type=path_arg("--out"), help="the fork's run folder, or the family folder")
    p.add_argument("--gamma-every", type=_non_negative, default=0,
                   help="measure the realised update power Gamma, summed every K steps of the window (0: off); the "
                        "clean shadow costs one full-gradient pass at every step of the window (minibatch arms)")
    p.add_argument("--gamma-window", metavar="[A:]B",
                   help="...within the first B steps after the fork (default: 200); A:B also reports the median "
                        "per-step ratio over steps A..B (default: the whole window); with status: re-judged over A:B")
    p.add_argument("--escape", metavar="METRIC<THRESHOLD[,hold=STEPS]",
                   help="when a fork has escaped: an evaluated metric past a threshold (nats, or N logK), held "
                        "STEPS steps (default: loss_cand<0.5logK, no hold: tau_half; the author's: "
                        "loss_first<3.0,hold=500); with status: re-judged from the logs")
    p.add_argument("--relapse", metavar="METRIC>THRESHOLD[,hold=STEPS]",
                   help="with --at relapse: when a solved run has relapsed (default: loss_cand>0.9logK,hold=200); "
                        "the fork starts from the kept state nearest at or after it, still relapsed (docs/forks.md, \"Relapse\")")
    p.add_argument("--eval-every", type=_positive_int, help="evaluate every N steps (default: the parent's)")
    p.add_argument("--checkpoint-every", type=_positive_int, help="checkpoint every N steps (default: the parent's)")
    p.add_argument("--checkpoint-dtype", choices=list(CHECKPOINT_DTYPES), help="default: the parent's")
    p.add_argument("--save-optimizer", action=argparse.BooleanOptionalAction, default=None,
                   help="keep the optimizer state beside every checkpoint (default: as the parent)")
    p.add_argument("--stop-after-snap", type=_stop_after_snap, metavar="STEPS|none",
                   help="stop STEPS steps after the fork (re)solves, or none: train the whole horizon (default: the "
                        "parent's; an lr fork of a solved run, or a held escape, needs none)")
    p.add_argument("--threads", type=_positive_int,
                   help="torch threads of this process (the replay must match the parent's; default: torch's)")
    add_executor_flags(p.add_argument_group("a fork family"), "train", what="fork")
    for arm in SETTING_ARMS:  # refused with a pointer to the arm (argparse would say only "unrecognized")
        p.add_argument(f"--{arm.replace('_', '-')}", dest=f"setting_{arm}", nargs="?", const="VALUE",
                       help=argparse.SUPPRESS)
    p.add_argument("--device", default="cpu", help="torch device of the forks (default: cpu)")
    p.add_argument("--json", action="store_true", help="the result as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_track_flag(p, "each fork (grouped by the family, or by the parent for one fork)")
    p.set_defaults(func=cmd_fork)
