"""The training loop: AdamW, schedules, evaluation cadence and the checkpoint policy.

Step t means "the weights after t optimizer steps"; step 0 is the initialisation.
Checkpoints are saved at step 0, at steps 1, 2, 4, 8, ... below `checkpoint_every`
(log-spaced early steps), every `checkpoint_every` steps, at the last step, and at every
evaluation while the candidate loss is in transition (below 0.95 log K and not yet below
0.05 log K, plus the first evaluation below 0.05 log K). The decision uses only the
metrics log, so a resumed run saves exactly what an uninterrupted one would.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from interp.metrics import batch_loss, evaluate_examples, summarize
from interp.model import build_model, to_device
from interp.runs import Run, load_params
from interp.seeding import torch_generator
from interp.spec import TrainSpec
from interp.task import VOCAB_SIZE, Task
from interp.transition import LEAVE_FRACTION, SNAP_FRACTION


@dataclass
class TrainResult:
    run: Run
    last_step: int
    stopped_early: bool  # stopped `stop_after_snap` steps after the snap
    seconds: float


def eval_subset(task: Task, spec: TrainSpec, seed: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The fixed evaluation examples and their shuffle-gap selectors z' (never the correct one)."""
    gen = torch_generator(seed, "eval")
    if task.size <= spec.eval_size:
        idx = torch.arange(task.size)
    else:
        idx = torch.randperm(task.size, generator=gen)[: spec.eval_size].sort().values
    alt = task.other_selectors(idx, gen) if task.has_selector else None
    return idx, alt


def scheduled_checkpoint(step: int, spec: TrainSpec) -> bool:
    if step == 0 or step == spec.steps or step % spec.checkpoint_every == 0:
        return True
    return spec.early_checkpoints and step < spec.checkpoint_every and (step & (step - 1)) == 0


def in_transition(loss_cand: float, previous: list[float], log_k: float) -> bool:
    """Densify: below 0.95 log K, and no earlier evaluation was already below 0.05 log K."""
    if math.isnan(loss_cand) or loss_cand >= LEAVE_FRACTION * log_k:
        return False
    return not any(v < SNAP_FRACTION * log_k for v in previous)


def _build_optimizer(model: torch.nn.Module, spec: TrainSpec) -> torch.optim.AdamW:
    # weight decay applies to every parameter, as torch.optim.AdamW does when given them all
    return torch.optim.AdamW(
        model.parameters(), lr=spec.lr, betas=(spec.beta1, spec.beta2), weight_decay=spec.weight_decay
    )


def train(
    run: Run,
    *,
    device: str = "cpu",
    progress: bool = True,
    stop_at: int | None = None,
) -> TrainResult:
    """Train `run` to its planned steps, resuming from its latest checkpoint if it has one.

    `stop_at` ends the loop after that step without marking the run finished (as an
    interruption would); the run can then be resumed.
    """
    spec = run.spec
    tspec = spec.train
    task = run.task
    log_k = task.log_k
    layout = task.layout
    model = build_model(spec.model, layout.length, VOCAB_SIZE, seed=spec.seed)
    batch_gen = torch_generator(spec.seed, "batches")
    eval_idx, eval_alt = eval_subset(task, tspec, spec.seed)
    tokens_all = task.tokens.to(device)

    resume = run.load_resume()
    start = 0 if resume is None else resume.step
    if resume is not None:
        load_params(model, resume.params)
    to_device(model, device)
    optimizer = _build_optimizer(model, tspec)
    if resume is not None:
        optimizer.load_state_dict(resume.optimizer)
        batch_gen.set_state(resume.generators["batches"])
        run.truncate_metrics(start)
    logged = run.metrics
    history = [float(v) for v in logged.get("loss_cand", [])]
    snap = next((int(s) for s, v in zip(logged.get("step", []), history) if v < SNAP_FRACTION * log_k), None)

    def evaluate(step: int, lr: float, train_loss: float) -> dict:
        model.eval()
        with torch.no_grad():
            row = summarize(evaluate_examples(model, task, eval_idx, eval_alt))
        model.train()
        return {"step": step, "lr": lr, "train_loss": train_loss, **row}

    def checkpoint(step: int) -> None:
        run.save_checkpoint(step, model)
        run.save_resume(step, model, optimizer, {"batches": batch_gen}, {})

    # On the CPU, embedding gradients accumulate in a thread-dependent order unless
    # deterministic algorithms are on: the same command twice must give identical weights.
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    if torch.device(device).type == "cpu":
        torch.use_deterministic_algorithms(True)
    began = time.perf_counter()
    if start == 0:
        row = evaluate(0, tspec.lr_at(1), math.nan)
        run.append_metrics({**row, "seconds": 0.0})
        history.append(row["loss_cand"])
        checkpoint(0)

    end = tspec.steps if stop_at is None else min(stop_at, tspec.steps)
    stopped_early = (
        tspec.stop_after_snap is not None and snap is not None and start >= snap + tspec.stop_after_snap
    )
    if stopped_early:
        end = start  # this run already stopped after its snap: nothing left to do
    bar = tqdm(total=tspec.steps, initial=start, disable=not progress, unit="step", dynamic_ncols=True,
               desc=run.name)
    model.train()
    running, n_running = torch.zeros((), device=device), 0
    step = start
    try:
        for step in range(start + 1, end + 1):
            lr = tspec.lr_at(step)
            for group in optimizer.param_groups:
                group["lr"] = lr
            idx = torch.randint(task.size, (tspec.batch_size,), generator=batch_gen)
            loss = batch_loss(model, tokens_all[idx.to(device)], layout.loss_pos)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if tspec.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), tspec.grad_clip)
            optimizer.step()
            running += loss.detach()
            n_running += 1
            bar.update(1)

            scheduled = scheduled_checkpoint(step, tspec)
            early_stop = (
                tspec.stop_after_snap is not None and snap is not None and step >= snap + tspec.stop_after_snap
            )
            if step % tspec.eval_every and not scheduled and not early_stop:
                continue
            row = evaluate(step, lr, float(running) / max(n_running, 1))
            running.zero_()
            n_running = 0
            run.append_metrics({**row, "seconds": round(time.perf_counter() - began, 3)})
            dense = tspec.densify and in_transition(row["loss_cand"], history, log_k)
            history.append(row["loss_cand"])
            if snap is None and row["loss_cand"] < SNAP_FRACTION * log_k:
                snap = step
            if scheduled or dense or early_stop:
                checkpoint(step)
            bar.set_postfix_str(f"Lc/logK={row['loss_cand'] / log_k:.3f} dz={row['shuffle_gap']:.3f}")
            if early_stop:
                stopped_early = True
                break
    finally:
        bar.close()
        torch.use_deterministic_algorithms(was_deterministic)
    return TrainResult(run, step, stopped_early, time.perf_counter() - began)

