"""The training loop: AdamW, schedules, evaluation cadence and the checkpoint policy.

Step t means "the weights after t optimizer steps"; step 0 is the initialisation.
Checkpoints are saved at step 0, at steps 1, 2, 4, 8, ... below `checkpoint_every`
(log-spaced early steps), every `checkpoint_every` steps, at the last step, at every
evaluation up to `dense_until`, and at every evaluation while the candidate loss is in
transition (below 0.95 log K and not yet below 0.05 log K, plus the first evaluation below
0.05 log K). The decision uses only the metrics log, so a resumed run saves exactly what an
uninterrupted one would.

Besides the evaluation metrics, every row after step 0 logs the minibatch gradient (docs/diagnostics.md,
docs/diagnostics.md): `grad_norm` (||g_B|| of the step just taken, before clipping),
`grad_sq_mean` (mean ||g_B||^2 over the steps since the previous row) and `dissipation`
(Q(t) = sum_{s <= t} lr_s ||g_B,s||^2, 0 at step 0), accumulated on the device at every step
(`interp.steps.GradientLog`); and AdamW's state per module, `eff_step.<module>` and
`v_mean.<module>` (`interp.optimizer_stats`). Q is kept in the resume state, so a
resumed run continues it exactly (`resumed_dissipation`).
Rows at multiples of `eval_every` (the author's logging cadence) also log what the author's
shuffle-gap lead needs (SPEC 9.1, docs/diagnostics.md): `train_loss_first` (the running mean over
the steps since the previous such row of the batches' first-token loss, from the step's own logits)
and `batch_shuffled_loss_first` (the row's batch after its update, z permuted across its rows by the
"inbatch_shuffle" stream); neither touches the weights or the batch order.

Each training invocation records its segment's environment in run.json (versions, threads, device, CPU
capability: `interp.run_segments`); a resume or a fork's first training in another environment than the one that
made its starting state says so in one line (not bit-exact, its checkpoints still valid). A resume of a run that is
already finished writes nothing.

The loop drives the stepper it is given (`interp.steps.Stepping`, from a factory: by default
`minibatch_stepper`, the plain run's step); it knows no other. A fork is trained with its own
(`interp.forks.arm_steps.fork_stepper`), and a run with a fork block is refused without one. It is handed
its sink the same way (`interp.sinks`: every row it logs, e.g. to TensorBoard or W&B); a sink that fails is
one warning, and training goes on.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from interp import run_segments
from interp.checkpoints import load_params
from interp.devices import is_allocation_failure
from interp.errors import InterpError
from interp.metrics import evaluate_examples, inbatch_shuffled_first_loss, summarize
from interp.names import HELDOUT_PREFIX
from interp.optimizer_stats import optimizer_columns
from interp.outcome import Rules, Tracker
from interp.model import build_model, native_optimizer_state, to_device
from interp.runs import Run
from interp.seeding import step_generator
from interp.sinks import Guarded
from interp.spec import TrainSpec
from interp.precision import check_precision, training_forward
from interp.steps import build_optimizer, compiled, minibatch_stepper
from interp.task import VOCAB_SIZE, Task
from interp.transition import LEAVE_FRACTION, SNAP_FRACTION

_build_optimizer = build_optimizer  # the name older callers use
_UNSET = object()


class Diverged(InterpError):
    """Training met a non-finite loss at `step`: with stop_when_decided the run ends there, decided "diverged";
    otherwise it fails, and its status records `diverged_at` (interp.outcome reads it)."""

    def __init__(self, message: str, step: int):
        super().__init__(message)
        self.step = step


EXACT_THRESHOLD = 0.99  # stop_after_exact counts from the first evaluation with exact match >= this
EVAL_LOSSES = ("loss", "loss_first", "loss_cand", "loss_cand_first")  # all NaN / inf: training is stopped


@dataclass
class TrainResult:
    run: Run
    last_step: int
    stopped_early: bool  # stopped `stop_after_snap` steps after the snap (or `stop_after_exact`)
    seconds: float
    trained: bool = True  # False: the run was already finished, and nothing was written


def eval_subset(task: Task, spec: TrainSpec, seed: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The fixed evaluation examples and their shuffle-gap selectors z' (never the correct one): of the pairs
    trained on, where the task holds some out (`heldout_subset` has those)."""
    if task.heldout is not None:
        return task.sample(spec.eval_size, seed, stream="eval", pool=task.train_idx)
    return task.sample(spec.eval_size, seed, stream="eval")


def heldout_subset(task: Task, spec: TrainSpec, seed: int) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """The fixed evaluation examples among the held-out pairs (None without a split): their metrics are logged
    beside the others as `heldout_<metric>`."""
    if task.heldout is None:
        return None
    return task.sample(spec.eval_size, seed, stream="eval_heldout", pool=task.heldout_idx)


def scheduled_checkpoint(step: int, spec: TrainSpec) -> bool:
    if step == 0 or step == spec.steps or step % spec.checkpoint_every == 0:
        return True
    return spec.early_checkpoints and step < spec.checkpoint_every and (step & (step - 1)) == 0


def in_transition(loss_cand: float, previous: list[float], log_k: float) -> bool:
    """Densify: below 0.95 log K, and no earlier evaluation was already below 0.05 log K."""
    if math.isnan(loss_cand) or loss_cand >= LEAVE_FRACTION * log_k:
        return False
    return not any(v < SNAP_FRACTION * log_k for v in previous)


def resumed_dissipation(run: Run, resume, origin: int | None = None) -> float:
    """Q at the step `resume` continues from. The resume state's `extra` holds it (exactly: a
    float64 written as JSON); one written before interp logged Q has none, and then: a state at
    the stepper's `origin` gives 0 (a fork's first state: a fork's Q counts from its fork step),
    otherwise Q restarts from the metrics row at that step (the same float64, when that row logged
    it) or is NaN for the rest of the run (a run trained before: its earlier steps were never summed)."""
    if "dissipation" in resume.extra:
        value = resume.extra["dissipation"]
        return math.nan if value is None else float(value)
    if origin is not None and resume.step == origin:
        return 0.0
    rows = [r for r in run.metric_rows() if r["step"] == resume.step]
    value = rows[-1].get("dissipation") if rows else None
    return math.nan if value is None else float(value)


def train(
    run: Run,
    *,
    device: str = "cpu",
    progress: bool = True,
    stop_at: int | None = None,
    resume=_UNSET,
    stepper=None,
    sink=None,
) -> TrainResult:
    """Train `run` to its planned steps, resuming from its latest checkpoint if it has one.

    The calling process becomes the run's one writer (its OS file lock, held until training
    ends; a second writer is refused with the holder's pid). `stop_at` ends the loop after
    that step without marking the run finished (as an interruption would); the run can then
    be resumed. `resume` passes a resume state the caller has already loaded and verified.
    `stepper` is the factory of the step the loop drives (`interp.steps.Stepping`; None: the
    plain minibatch step); a fork's is `interp.forks.arm_steps.fork_stepper`. `sink`: the factory of
    what else is told each logged row (`interp.sinks`; None: nothing), called once training starts.
    A training loss that turns NaN or infinite, or an evaluation whose every loss is, stops
    training with an InterpError naming the step; the checkpoints saved before it are kept and
    `run.status` says what happened.
    """
    if stepper is None and run.fork is not None:
        raise InterpError(f"{run.path} is a fork: it trains with its arm's step, which the caller gives "
                          f"(train(run, stepper=stepper_for(run)), stepper_for from interp.forks.arm_steps)")
    run.acquire()
    try:
        return _train(run, device, progress, stop_at, resume, stepper or minibatch_stepper, sink)
    finally:
        run.release()


def _train(run: Run, device: str, progress: bool, stop_at: int | None, resume, make_stepper, make_sink=None) -> TrainResult:
    spec = run.spec
    tspec = spec.train
    task = run.task
    log_k = task.log_k
    layout = task.layout
    check_precision(tspec.precision, device)
    if resume is _UNSET:
        resume = run.load_resume()
    try:
        model = build_model(spec.model, layout.length, VOCAB_SIZE, seed=spec.seed)
        if resume is not None:
            load_params(model, resume.params)
        to_device(model, device)
        tokens_all = task.train_tokens.to(device)  # what training draws from (interp.task)
    except Exception as exc:  # noqa: BLE001 - only allocation failures are turned into one line
        if is_allocation_failure(exc):
            raise InterpError(f"not enough memory to build this model on {device}: {exc}") from None
        raise
    eval_idx, eval_alt = eval_subset(task, tspec, spec.seed)
    held = heldout_subset(task, tspec, spec.seed)
    forward = training_forward(compiled(model) if tspec.compile else model, tspec.precision, device)
    optimizer = _build_optimizer(model, tspec)
    start = 0 if resume is None else resume.step
    base_seconds = 0.0
    stepping = make_stepper(run, forward, model, optimizer, tokens_all, device, resume)
    stepper, generators, schedule, lr_scale = stepping.step, stepping.generators, stepping.schedule, stepping.lr_scale
    gradient_log = getattr(stepper, "log", None)  # interp.steps.GradientLog: the dissipation Q
    if resume is not None:
        optimizer.load_state_dict(native_optimizer_state(model, resume.optimizer))  # saved in checkpoint layout
        for name, gen in generators.items():
            if name not in resume.generators:
                raise InterpError(f"{run.path}: its resume state lacks the random stream {name!r}")
            gen.set_state(resume.generators[name])
        base_seconds = float(resume.extra.get("wall_seconds", 0.0))
    logged = run.metric_series("loss_cand", "acc_exact")  # the rows training keeps: those up to the resume point
    upto = [i for i, s in enumerate(logged["step"]) if resume is not None and s <= start]
    logged = {name: [values[i] for i in upto] for name, values in logged.items()}
    history = [float(v) for v in logged["loss_cand"]]
    snap = next((s for s, v in zip(logged["step"], history) if v < SNAP_FRACTION * log_k), None)
    exact = next((s for s, v in zip(logged["step"], logged["acc_exact"]) if v >= EXACT_THRESHOLD), None)
    rules = Rules.of(tspec)
    tracker = Tracker(rules, log_k) if log_k > 0 else None  # the run's outcome (interp.outcome), judged live
    if tracker is not None and resume is not None:  # judged again on the rows kept up to the resume point
        tracker.feed([r for r in run.metric_rows() if r["step"] <= start])

    def decided_stop() -> int | None:
        """The step a run with stop_when_decided ends at, once its outcome is decided."""
        if not tspec.stop_when_decided or tracker is None or tracker.decision is None:
            return None
        return tracker.decision.stop_step(rules)

    def stop_due(step: int) -> bool:
        """Stop `stop_after_snap` steps after the snap, `stop_after_exact` after exact match >= 0.99, or once the
        outcome is decided (stop_when_decided)."""
        decided = decided_stop()
        return ((tspec.stop_after_snap is not None and snap is not None and step >= snap + tspec.stop_after_snap)
                or (tspec.stop_after_exact is not None and exact is not None
                    and step >= exact + tspec.stop_after_exact)
                or (decided is not None and step >= decided))

    def decided_fields() -> dict:
        """What status.json records of a decided outcome (nothing when undecided)."""
        if tracker is None or tracker.decision is None:
            return {}
        d = tracker.decision
        return {"outcome": d.outcome, "decided_at": d.step, "outcome_reason": d.reason,
                "decided": bool(tspec.stop_when_decided)}
    status = run.status or {}
    if resume is not None and (start >= tspec.steps or stop_due(start) or status.get("decided")) \
            and status.get("state") == "done":
        # a finished run resumed: nothing to train, nothing written (not even its status or run.json)
        return TrainResult(run, start, stop_due(start), float(status.get("wall_seconds") or base_seconds), trained=False)
    segment = run_segments.current(start, device, torch.get_num_threads())
    note = run_segments.continuation_note(run, start, segment) if resume is not None else None
    if note is not None:  # continued elsewhere than the state was made: said once, before any step
        print(note, file=sys.stderr)
    run_segments.record(run, segment)
    run.record_training({"from_step": start, "device": torch.device(device).type,
                         "threads": torch.get_num_threads(), "compile": tspec.compile,
                         **({} if tspec.precision == "float32" else {"precision": tspec.precision})})
    # a torn last line (a crash mid-write) and rows after the resume point are dropped
    run.rewrite_metrics(start if resume is not None else -1)
    run.clear_status()
    if gradient_log is not None and resume is not None:
        gradient_log.restart(resumed_dissipation(run, resume, stepping.origin))
    began = time.perf_counter()
    seconds = lambda: round(base_seconds + time.perf_counter() - began, 3)  # noqa: E731
    last_checkpoint = start if resume is not None else None

    def kept() -> str:
        return "no checkpoint was saved" if last_checkpoint is None else f"checkpoints up to step {last_checkpoint} are kept"

    def evaluate(step: int, lr: float, train_loss: float) -> dict:
        model.eval()
        with torch.no_grad():
            row = summarize(evaluate_examples(model, task, eval_idx, eval_alt))
            if held is not None:  # the pairs never trained on, named as such
                row.update({f"{HELDOUT_PREFIX}{k}": v for k, v in summarize(evaluate_examples(model, task, *held)).items()})
        model.train()
        losses = [row[name] for name in EVAL_LOSSES if name in row]
        if losses and not any(math.isfinite(v) for v in losses):
            raise Diverged(
                f"the evaluation loss became {losses[0]} at step {step} (lr {lr:g}; every loss metric is): training "
                f"diverged and was stopped; {kept()}. Try a lower --lr, --grad-clip or --init-std", step
            )
        return {"step": step, "lr": lr, "train_loss": train_loss, **row}

    def author_columns(step: int) -> dict:
        """The author's first_target_loss (SPEC 9.1: the running mean over the window since the previous
        row on the grid) and loss_z_shuffled (the window's last batch after its update: eval mode, z
        permuted across the rows by the step's own generator, never the batch stream)."""
        out = getattr(stepper, "first_window", dict)()
        batch = getattr(stepper, "last_batch", None)
        if batch is None or not task.has_selector:
            return out
        perm = torch.randperm(len(batch), generator=step_generator(spec.seed, "inbatch_shuffle", step))
        model.eval()
        value = inbatch_shuffled_first_loss(model, tokens_all[batch.to(device)], layout.z_pos, layout.decision_pos, perm)
        model.train()
        return {**out, "batch_shuffled_loss_first": value}

    def checkpoint(step: int) -> None:
        nonlocal last_checkpoint
        run.save_checkpoint(step, model)
        extra = {"wall_seconds": seconds()}
        if gradient_log is not None:
            q = gradient_log.dissipation()
            extra["dissipation"] = None if math.isnan(q) else q
        run.save_resume(step, model, optimizer, generators, extra)
        if tspec.save_optimizer:
            run.save_state(step, model, optimizer, generators, extra)
        last_checkpoint = step

    # On the CPU, embedding gradients accumulate in a thread-dependent order unless
    # deterministic algorithms are on: the same command twice must give identical weights.
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    if torch.device(device).type == "cpu":
        torch.use_deterministic_algorithms(True)
    end = tspec.steps if stop_at is None else min(stop_at, tspec.steps)
    stopped_early = stop_due(start)
    if stopped_early:
        end = start  # this run already stopped after its snap: nothing left to do
    bar = tqdm(total=tspec.steps, initial=start, disable=not progress, unit="step", dynamic_ncols=True,
               desc=run.name)
    step = start
    sink = Guarded(make_sink, run, start)
    if make_sink is not None and 0 < start < end:  # the row it continues from (a fork's first, written as it was made)
        sink.log(next((r for r in run.metric_rows() if r["step"] == start), {}))

    def record(row: dict) -> None:
        run.append_metrics(row)
        sink.log(row)
    try:
        if start == 0:
            row = evaluate(0, schedule.lr_at(1), math.nan)
            if gradient_log is not None:
                row["dissipation"] = 0.0
            record({**row, "seconds": 0.0})
            history.append(row["loss_cand"])
            checkpoint(0)
        model.train()
        running, n_running = torch.zeros((), device=device), 0
        for step in range(start + 1, end + 1):
            lr = schedule.lr_at(step) * lr_scale
            for group in optimizer.param_groups:
                group["lr"] = lr
            loss = stepper(step)
            if not bool(torch.isfinite(loss)):
                raise Diverged(
                    f"the training loss became {float(loss)} at step {step} (lr {lr:g}): training diverged "
                    f"and was stopped; {kept()}. Try a lower --lr or --grad-clip", step
                )
            running += loss
            n_running += 1
            bar.update(1)

            scheduled = scheduled_checkpoint(step, tspec)
            early_stop = stop_due(step)
            if step % tspec.eval_every and not scheduled and not early_stop:
                continue
            row = evaluate(step, lr, float(running) / max(n_running, 1))
            row.update(getattr(stepper, "logged", dict)())  # the gradient log (and a fork's realised update power)
            if step % tspec.eval_every == 0:  # the author's columns on the regular grid only (his log's cadence)
                row.update(author_columns(step))
            row.update(optimizer_columns(model, optimizer))
            running.zero_()
            n_running = 0
            record({**row, "seconds": seconds()})
            dense = (tspec.densify and in_transition(row["loss_cand"], history, log_k)) or step <= tspec.dense_until
            history.append(row["loss_cand"])
            if snap is None and row["loss_cand"] < SNAP_FRACTION * log_k:
                snap = step
            if exact is None and row["acc_exact"] >= EXACT_THRESHOLD:
                exact = step
            if tracker is not None:
                tracker.update(step, row["loss_cand"], row.get("shuffle_gap"), row["train_loss"])
                early_stop = early_stop or stop_due(step)
            if scheduled or dense or early_stop:
                checkpoint(step)
            bar.set_postfix_str((f"Lc/logK={row['loss_cand'] / log_k:.3f}" if log_k > 0 else f"L={row['loss']:.3f}")
                                    + f" dz={row['shuffle_gap']:.3f}")
            if early_stop:
                stopped_early = True
                break
    except Diverged as exc:
        if not tspec.stop_when_decided:
            run.write_status("failed", last_step=last_checkpoint, error=str(exc), wall_seconds=seconds(),
                             diverged_at=exc.step)
            raise
        # decided: diverged. The run ends at its last checkpoint, a finished run (a sweep goes on with the next)
        run.write_status("done", last_step=last_checkpoint, stopped_early=True, wall_seconds=seconds(),
                         outcome="diverged", decided_at=exc.step, outcome_reason=str(exc).split(":")[0],
                         decided=True, diverged_at=exc.step)
        return TrainResult(run, last_checkpoint or 0, True, seconds())
    except Exception as exc:
        message = str(exc) if isinstance(exc, InterpError) else f"{type(exc).__name__}: {exc}"
        if is_allocation_failure(exc):
            message = f"not enough memory to train on {device} (batch_size {tspec.batch_size}): {exc}"
        run.write_status("failed", last_step=last_checkpoint, error=message, wall_seconds=seconds())
        if is_allocation_failure(exc):
            raise InterpError(message) from None
        raise
    except KeyboardInterrupt:
        run.write_status("interrupted", last_step=last_checkpoint, wall_seconds=seconds())
        raise
    finally:
        bar.close()
        sink.close()
        torch.use_deterministic_algorithms(was_deterministic)
    finished = stopped_early or step >= tspec.steps
    if finished:
        run.write_status("done", last_step=step, stopped_early=stopped_early, wall_seconds=seconds(), **decided_fields())
    return TrainResult(run, step, stopped_early, seconds())


# ---------------------------------------------------------------------------- resume and retrain
def prepare_resume(path, overrides: dict, device: str):
    """Open the run at `path` for `train(run, resume=state)`: check every override (only
    `steps` may change, and only upwards), take the run's lock, read and check its resume state
    (it belongs to this run; the metrics log, manifest and the checkpoint it continues from are
    there and intact) and the task, all before anything is written; then record the new step
    count. Returns (run, state)."""
    from interp.devices import check_fits

    run = Run.open(path)
    if run.imported is not None:
        raise InterpError(f"{path} was imported ({run.imported.get('format')}), not trained by interp: it is not "
                          f"continued with --resume; fork it instead (interp fork {path} --at STEP --arm continue ...)")
    overrides = dict(overrides)
    steps = overrides.pop("steps", None)
    changed = [k for k, v in overrides.items() if run.spec.override(**{k: v}) != run.spec]
    if changed:
        raise InterpError(f"--resume continues the stored spec; only --steps may change (got {', '.join(changed)})")
    if steps is not None:
        new_spec = run.spec.override(steps=steps)
        new_spec.validate()
        check_fits(new_spec, device)
    else:
        check_precision(run.spec.train.precision, device)
    run.acquire()
    try:
        run.task  # noqa: B018 - regenerated and checked against its stored hash now, not after a write
        state = run.load_resume()
        reached = max([state.step if state else 0, *run.steps])
        if steps is not None and steps < reached:
            raise InterpError(f"--steps {steps} is below step {reached}, which {path} has already reached; "
                              f"a resumed run can only go further")
        if steps is not None and steps != run.spec.train.steps:
            run.set_steps(steps)
    except BaseException:
        run.release()
        raise
    return run, state


def retrain(path, device: str = "cpu", progress: bool = True) -> Run:
    """Train the run at `path` again from its stored spec into a sibling folder and swap it in
    only once done, so an interrupted retrain leaves the old run untouched."""
    import shutil
    from pathlib import Path

    path = Path(path)
    old = Run.open(path)
    fresh = path.with_name(path.name + ".retrain")
    if fresh.exists():
        shutil.rmtree(fresh)
    train(Run.create(fresh, old.spec), device=device, progress=progress)
    backup = path.with_name(path.name + ".old")
    if backup.exists():
        shutil.rmtree(backup)
    path.rename(backup)
    fresh.rename(path)
    shutil.rmtree(backup)
    return Run.open(path)


def remove_unstarted(run: Run) -> None:
    """A run that failed before its first checkpoint leaves no folder behind."""
    import shutil

    run.release()
    shutil.rmtree(run.path, ignore_errors=True)
