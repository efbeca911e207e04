"""Make a fork: a new run folder that continues a parent's state at a saved step under an arm.

A fork is an ordinary run folder. Its spec is the parent's with the arm's training change (lr,
batch size, weight decay) and `train.steps` = fork step + horizon, so its step numbers continue
the parent's and every analysis, the timeline and the report work on it unchanged. Its
run.json also records (hashed) the fork block: the parent (path, step, the checkpoint's
SHA-256, spec hash), the arm and its parameters, the fork seed and the realised-update-power
sampling. The folder starts with the state at the fork step (the checkpoint, a metrics row
and the resume state, after the arm's change at the fork: zeroed moments, a kick, a new batch
stream), so training it is resuming it (`interp.train.train` with the fork's stepper,
`interp.forks.arm_steps.fork_stepper`), and a killed fork resumes too. What the arm does at the
fork is its class's `prepare_params` and `prepare_optimizer` (`interp.forks.arms`).
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from interp.errors import InterpError
from interp.spec import ADAM_FAMILY, describe_optimizer
from interp.forks.arms import Arm, ForkStart, fork_seed, make_arm

# settings a fork may change besides its arm: how it is recorded, never how it trains
STORAGE = ("eval_every", "checkpoint_every", "checkpoint_dtype", "save_optimizer", "stop_after_snap",
           "dense_until", "densify", "early_checkpoints", "eval_size", "stop_when_decided")
DEFAULT_GAMMA_WINDOW = 200


def resolve_at(run, at, relapse=None) -> int:
    """A saved step from an int, "tau/2" (any tau/N or F*tau), "pre"/"mid"/"post", "first"/"last":
    relative ones are snapped to the nearest saved step, as the analyses do (refused when it lies more than
    STEP_SLACK tau from its target: `interp.analysis.common.near_saved`); "relapse": the state
    nearest at or after the run's relapse under `relapse` (a criterion; None: the default),
    `interp.forks.relapse.relapse_at`; "relapse+H": the same H steps into the relapse (still relapsed)."""
    from interp.analysis.common import far_note, near_saved, select_steps
    from interp.transition import tau

    text = str(at).strip().replace(" ", "")
    held = re.fullmatch(r"relapse(?:\+(\d+))?", text)
    if held:  # "relapse+H": held relapsed H steps (the relapse's depth)
        from interp.forks.relapse import relapse_at

        return relapse_at(run, relapse, int(held.group(1) or 0))
    match = re.fullmatch(r"tau/(\d+(?:\.\d+)?)|(\d*\.?\d+)\*?tau|tau", text)
    if match:
        t = tau(run)
        if t is None:
            raise InterpError(f"--at {at}: {run.path} never reaches 0.5 log K, so tau is undefined; give a saved step")
        if match.group(1):
            divisor = float(match.group(1))
            factor = 1 / divisor if divisor > 0 else math.nan  # tau/0
        else:
            factor = float(match.group(2) or 1)
        if not math.isfinite(factor) or factor <= 0:
            raise InterpError(f"--at {at}: the multiple of tau must be positive (tau/N with N > 0, or F*tau with F > 0)")
        target = factor * t
        if target > run.steps[-1]:
            raise InterpError(f"--at {at} = step {target:g} lies beyond {run.path} (last saved step {run.steps[-1]})")
        step, near = near_saved(run, target, t)
        if not near:
            raise InterpError(f"--at {far_note(str(at), target, step, t).replace('; left out', '')}")
        return step
    if isinstance(at, str) and not re.fullmatch(r"-?\d+|pre|mid|post|first|last", text):
        raise InterpError(f"--at {at!r}: give a saved step, tau/N, F*tau, pre, mid, post, first, last, relapse or "
                          f"relapse+H")
    if re.fullmatch(r"-?\d+", text) and int(text) < 0:
        raise InterpError(f"--at {at}: a step cannot be negative")
    ((step, _),) = select_steps(run, [text if not text.lstrip("-").isdigit() else int(text)])
    return step


def check_out(parent, out: Path) -> None:
    """Refuse an output folder inside the parent run (it would be copied into its own history)."""
    out_abs, parent_abs = Path(os.path.abspath(out)), Path(os.path.abspath(parent.path))
    if out_abs == parent_abs or parent_abs in out_abs.parents:
        raise InterpError(f"--out {out} lies inside the parent run {parent.path}; write forks elsewhere")


def check_state(parent, step: int) -> None:
    """Refuse a step of a fork whose state it did not keep (nor hold as its resume state), before anything is
    written: a fork's states cannot be replayed (`interp.replay.check_replayable` names the remedy)."""
    from interp.replay import check_replayable
    from interp.run_states import kept_steps

    if parent.fork is not None and step not in kept_steps(parent):
        resume = parent.load_resume()
        if resume is None or resume.step != step:
            check_replayable(parent, 0, step)


def fork_spec(parent, step: int, arm: Arm, horizon: int, settings: dict | None = None):
    """The fork's RunSpec: the parent's, with the arm's training change, `settings` (STORAGE only)
    and steps = fork step + horizon (stop_when_decided off unless `settings` turn it on). Refuses a bad horizon or
    setting."""
    from interp.spec import check_int

    check_int("--steps (the horizon after the fork)", horizon, minimum=1)
    settings = dict(settings or {})
    # a fork runs its horizon: a parent's early stop by outcome (interp.outcome) is not inherited unless asked for
    settings.setdefault("stop_when_decided", False)
    bad = sorted(set(settings) - set(STORAGE))
    if bad:
        raise InterpError(f"a fork cannot change {', '.join(bad)} (its arm says what changes); allowed: "
                          f"{', '.join(STORAGE)}")
    spec = parent.spec.override(**arm.train_changes(), **arm.task_changes(parent.spec.task), **settings,
                                steps=step + horizon)
    if spec.task != parent.spec.task:  # new data: the model keeps its positions (a shorter sequence leaves some unread)
        have, need = parent.spec.model.context(parent.spec.task.sequence_length), spec.task.sequence_length
        if need > have:
            raise InterpError(f"arm {arm.label}: the new task's sequences are {need} tokens and {parent.path}'s model "
                              f"has {have} positions; train the parent with --n-ctx {need} (or pick a task of at most "
                              f"{have} tokens)")
        if spec.model.context(need) != have:
            spec = spec.override(n_ctx=have)
    spec.validate()
    if parent.spec.task.source == "tables" and parent.task.heldout is not None:
        raise InterpError(f"{parent.path} was trained with {int(parent.task.heldout.sum())} pairs held out of "
                          f"training; interp trains on every pair of a task, so a fork of it would train on those "
                          f"too: forks of a run with a held-out split are not supported")
    size = spec.task.dataset_size
    if "batch_size" in arm.train_changes() and spec.train.batch_size > size:
        raise InterpError(f"arm {arm.label}: the batch is larger than the training set (D = {size} examples); "
                          f"give a batch size of at most {size}")
    if arm.explicit and spec.train.optimizer not in ADAM_FAMILY:
        raise InterpError(f"arm {arm.name} feeds Adam's two moments their own gradients; {parent.path} trains with "
                          f"{spec.train.optimizer}, which keeps no such moments (the arm applies to the Adam family: "
                          f"{', '.join(ADAM_FAMILY)})")
    return spec


def check_gamma(spec, gamma_every: int) -> None:
    """Gamma compares each update with the clean shadow's Adam step: refused for a fork trained with SGD or RMSProp."""
    if gamma_every > 0 and spec.train.optimizer not in ADAM_FAMILY:
        raise InterpError(f"--gamma-every {gamma_every}: Gamma measures against the clean shadow's Adam update, and "
                          f"this fork trains with {spec.train.optimizer}; give --gamma-every 0")


def fork_block(parent, step: int, arm: Arm, seed: int, horizon: int, gamma_every: int, gamma_window: int,
               source: str) -> dict:
    from interp.spec import check_int

    check_int("--seed (the fork seed)", seed, minimum=0)
    check_int("--gamma-every", gamma_every, minimum=0)
    check_int("--gamma-window", gamma_window, minimum=1)
    entry = parent.manifest()[step]
    # the length of the schedule the parent follows: a fork of a fork follows the first parent's (a cosine's span)
    schedule_steps = parent.fork["parent_steps"] if parent.fork else parent.spec.train.steps
    return {"parent": os.path.abspath(parent.path), "parent_step": step, "parent_checkpoint_sha256": entry["sha256"],
            "parent_spec_sha256": parent.spec_sha256, "parent_steps": schedule_steps,
            "parent_lr": parent.spec.train.lr, "arm": arm.name, "params": arm.kwargs, "seed": seed,
            "horizon": horizon, "gamma_every": gamma_every, "gamma_window": gamma_window, "state": source,
            **switched_optimizer(parent, arm)}


def switched_optimizer(parent, arm: Arm) -> dict:
    """An arm that switches the optimizer records both (the parent's and the fork's, as their specs say them)."""
    import dataclasses

    changes = arm.train_changes()
    if "optimizer" not in changes:
        return {}
    after = dataclasses.replace(parent.spec.train, **changes)
    return {"parent_optimizer": describe_optimizer(parent.spec.train), "optimizer": describe_optimizer(after)}


def create_fork(parent, step: int, arm: Arm, horizon: int, out, *, seed: int = 0, gamma_every: int = 0,
                gamma_window: int = DEFAULT_GAMMA_WINDOW, settings: dict | None = None, state=None,
                source: str = "", progress: bool = False):
    """Make the fork folder at `out` (nothing is trained): checks everything first, then writes the
    run with its state at the fork step. `state` is the parent's state there (else kept or replayed)."""
    import torch

    from interp.checkpoints import load_params
    from interp.replay import state_at
    from interp.metrics import evaluate_examples, summarize
    from interp.model import build_model, native_optimizer_state
    from interp.runs import Run, check_new_folder
    from interp.spec import VOCAB_SIZE
    from interp.steps import build_optimizer
    from interp.task import Task
    from interp.train import eval_subset

    out = Path(out)
    step = parent.resolve_step(step)
    check_out(parent, out)
    spec = fork_spec(parent, step, arm, horizon, settings)
    check_gamma(spec, gamma_every)
    block = fork_block(parent, step, arm, seed, horizon, gamma_every, gamma_window, source or "given")
    check_new_folder(out)
    if state is None:
        state, source = state_at(parent, step, progress)
        block["state"] = source
    start = ForkStart(parent, step, seed, state, {n: t.clone() for n, t in state.params.items()})
    arm.prepare_params(start)  # a kick
    params = start.params
    task = parent.task if spec.task == parent.spec.task else Task.generate(spec.task, spec.seed)  # a data arm's
    model = build_model(spec.model, task.layout.length, VOCAB_SIZE)
    load_params(model, params)
    optimizer = build_optimizer(model, spec.train)
    if not arm.fresh_state:  # the parent's state goes on (an optimizer switch starts over, as the author's branch)
        opt_state = state.optimizer
        optimizer.load_state_dict(native_optimizer_state(model, opt_state))  # saved in checkpoint layout (TL 3 or 4)
        for group in optimizer.param_groups:  # loading restored the parent's; the fork's own apply
            group["weight_decay"] = spec.train.weight_decay
    arm.prepare_optimizer(optimizer)  # a reset
    batches, noise = torch.Generator(), torch.Generator()
    if arm.stream == "parent":
        batches.set_state(state.generators["batches"])
    else:
        batches.manual_seed(fork_seed(parent.spec.seed, step, seed, "batches"))
    noise.manual_seed(fork_seed(parent.spec.seed, step, seed, "noise"))
    eval_idx, eval_alt = eval_subset(task, spec.train, spec.seed)
    with torch.no_grad():
        row = summarize(evaluate_examples(model.eval(), task, eval_idx, eval_alt))
    run = Run.create(out, spec, fork=block, task=task if spec.task.source == "tables" else None)
    try:
        run.save_checkpoint(step, model)
        run.append_metrics({"step": step, "lr": spec.train.lr, "train_loss": math.nan, **row, "seconds": 0.0})
        run.save_resume(step, model, optimizer, {"batches": batches, "noise": noise}, {"wall_seconds": 0.0})
        if spec.train.save_optimizer:
            run.save_state(step, model, optimizer, {"batches": batches, "noise": noise}, {"wall_seconds": 0.0})
    except BaseException:
        import shutil

        run.release()
        shutil.rmtree(out, ignore_errors=True)
        raise
    run.release()
    return run


def check_settings(out: Path, have, want) -> None:
    """Refuse to return or resume the fork at `out` when the settings asked (`want`, a RunSpec) are not
    the ones it was made with (`have`): it would keep its own without a word. As a sweep refuses a
    changed base spec, the differing fields are named, with both values."""
    from interp.collections.states import spec_differences

    names = [n for n in spec_differences(have, want) if n != "train.steps"]  # the horizon is in the fork block
    if names:
        ours = ", ".join(f"{n}={have.get(n)}" for n in names)
        asked = ", ".join(f"{n}={want.get(n)}" for n in names)
        raise InterpError(f"{out} holds this fork made with {ours}; this command asks {asked}: a fork keeps the "
                          f"settings it was made with (run it again without the change, or give another --out)")


def fork(run, at, arm: str | Arm = "continue", steps: int = 1000, out=None, *, seed: int = 0,
         gamma_every: int = 0, gamma_window: int = DEFAULT_GAMMA_WINDOW, settings: dict | None = None,
         device: str = "cpu", progress: bool = True, sink=None):
    """Fork `run` (a Run or a path) at `at` (a saved step, "tau/2", "pre", ...) under `arm` (a name,
    "NAME:key=value,..." or an Arm) for `steps` steps into the run folder `out`, and train it.
    Running it again on a finished fork trains nothing; on an interrupted one, resumes it; with other
    settings (`settings`) than it was made with, it is refused (`check_settings`); while another process
    writes `out` (trains or makes it), `interp.files.LockHeld` is raised, naming it, and nothing is written.
    `sink`: the sink factory training is handed (`interp.sinks`: e.g. TensorBoard or W&B)."""
    from interp.devices import check_fits
    from interp.files import LockHeld
    from interp.forks.arm_steps import fork_stepper
    from interp.forks.arms import parse_arms
    from interp.runs import Run, RunLock
    from interp.train import train

    parent = run if isinstance(run, Run) else Run.open(run)
    if isinstance(arm, str):
        arms = parse_arms(arm)
        if len(arms) != 1:
            raise InterpError(f"interp.fork makes one fork, got {len(arms)} arms; a family of forks is "
                              f"interp.ForkFamily (or interp fork with lists)")
        arm = arms[0]
    if out is None:
        raise InterpError("a fork needs an output folder (out=...)")
    step = resolve_at(parent, at)
    spec = fork_spec(parent, step, arm, steps, settings)
    check_fits(spec, device)  # memory, bfloat16 units: before writing
    out = Path(out)
    if Run.is_run(out):
        existing = Run.open(out)
        want = fork_block(parent, step, arm, seed, steps, gamma_every, gamma_window, "")
        have = {k: v for k, v in (existing.fork or {}).items() if k != "state"}
        if have != {k: v for k, v in want.items() if k != "state"}:
            raise InterpError(f"{out} holds another run or fork; choose another folder")
        check_settings(out, existing.spec, spec)
        if (existing.status or {}).get("state") == "done":
            return existing
        train(existing, device=device, progress=progress, stepper=fork_stepper, sink=sink)  # LockHeld when another trains it
        return Run.open(out)
    lock = RunLock(out)
    if lock.is_locked():  # being made by another process: its run.json is not there yet
        raise lock.refusal()
    try:
        created = create_fork(parent, step, arm, steps, out, seed=seed, gamma_every=gamma_every,
                              gamma_window=gamma_window, settings=settings, progress=progress)
    except InterpError as exc:  # "not empty": another process began making it since the look above
        if not isinstance(exc, LockHeld) and lock.is_locked():
            raise lock.refusal() from None
        raise
    train(created, device=device, progress=progress, stepper=fork_stepper, sink=sink)
    return Run.open(out)


__all__ = ["fork", "create_fork", "resolve_at", "make_arm"]
