"""The training step every plain run takes, and the optimizer it steps.

One place for it, because three callers must take exactly the same arithmetic: training
(`interp.train`), the replay of a run's optimizer state (`interp.replay`, which must
reproduce the checkpoints bit for bit) and the forks that keep the parent's regime
(`interp.forks.arms`).

`Stepping` is what the training loop drives: a step, its random streams and its lr schedule.
`train` builds `minibatch_stepper`'s unless the caller gives it another factory (a fork's).

The step also records ||g_B||^2, the squared norm of its minibatch gradient before clipping, in
a `GradientLog` (docs/diagnostics.md): read-only on the gradients, so the update is the same
bit for bit with or without it, and kept on the device so that it costs no host sync per step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from interp.metrics import batch_loss_and_first
from interp.optimizers import make_optimizer
from interp.seeding import torch_generator
from interp.spec import TrainSpec


def build_optimizer(model: torch.nn.Module, spec: TrainSpec) -> torch.optim.Optimizer:
    """The spec's optimizer over every parameter of `model` (AdamW by default; interp.optimizers); weight decay
    applies to every parameter, as torch.optim does when given them all."""
    return make_optimizer(model.parameters(), spec)


class GradientLog:
    """The gradient columns of the metrics log, accumulated on the device.

    `add` takes a step's gradient and its lr: the squared norm ||g||^2 (per-tensor float32 norms,
    squared and summed in float64) goes into the dissipation Q(t) = sum_{s <= t} lr_s ||g_s||^2
    and into the sum since the last row, as 0-dim float64 tensors on the gradients' device:
    nothing is read back to the host until `row` (at an evaluation) or `dissipation` (at a
    checkpoint), so a GPU step never waits for it.
    """

    def __init__(self, device, dissipation: float = 0.0):
        self.device = device
        self.total = torch.tensor(dissipation, dtype=torch.float64, device=device)  # Q(t)
        self.window = torch.zeros((), dtype=torch.float64, device=device)  # sum of ||g||^2 since the last row
        self.last: torch.Tensor | None = None  # ||g||^2 of the latest step
        self.count = 0  # steps since the last row

    def add(self, grads: list, lr: float) -> None:
        sq = torch.stack(torch._foreach_norm([g for g in grads if g is not None])).double().square().sum()
        self.total.add_(sq, alpha=lr)
        self.window.add_(sq)
        self.last = sq
        self.count += 1

    def restart(self, dissipation: float) -> None:
        """Continue from Q = `dissipation` (a resumed run) with an empty window."""
        self.total = torch.tensor(dissipation, dtype=torch.float64, device=self.device)
        self.window.zero_()
        self.last, self.count = None, 0

    def dissipation(self) -> float:
        return float(self.total)

    def row(self) -> dict:
        """grad_norm (of the latest step), grad_sq_mean (over the steps since the last row) and
        dissipation, for the metrics row; starts a new window. Only dissipation when no step was taken."""
        out = {"dissipation": float(self.total)}
        if self.count:
            out = {"grad_norm": math.sqrt(float(self.last)), "grad_sq_mean": float(self.window) / self.count, **out}
        self.window.zero_()
        self.count = 0
        return out


class MinibatchStep:
    """One optimizer step (AdamW unless the spec names another) on a minibatch drawn from `batches`. Returns the
    batch loss; a loss that is not finite is returned before any update (the caller stops training).

    With `log_gradients` (the default) every step adds its gradient, before clipping, to `log`
    (a GradientLog) and `logged()` returns its columns for the metrics row; the benchmark turns
    it off to time what it costs."""

    def __init__(self, forward, model, optimizer, tokens, loss_pos, n_examples: int, batches, tspec: TrainSpec,
                 device: str, log_gradients: bool = True):
        self.forward, self.model, self.optimizer, self.tokens = forward, model, optimizer, tokens
        self.loss_pos, self.n, self.batches, self.device = loss_pos, n_examples, batches, device
        self.batch_size, self.grad_clip = tspec.batch_size, tspec.grad_clip
        self.params = [p for group in optimizer.param_groups for p in group["params"]]
        self.log = GradientLog(device) if log_gradients else None
        # the author's first_target_loss (SPEC 9.1): the window's sum of per-batch first-token CE, on the device
        self.first_sum, self.first_count = torch.zeros((), dtype=torch.float64, device=device), 0
        self.last_batch: torch.Tensor | None = None  # the rows of the latest step (the author's in-batch dz)

    def __call__(self, step: int) -> torch.Tensor:
        idx = torch.randint(self.n, (self.batch_size,), generator=self.batches)
        loss, loss_first = batch_loss_and_first(self.forward, self.tokens[idx.to(self.device)], self.loss_pos)
        if not bool(torch.isfinite(loss)):
            return loss.detach()
        self.first_sum.add_(loss_first)
        self.first_count += 1
        self.last_batch = idx
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.log is not None:
            self.log.add([p.grad for p in self.params], self.optimizer.param_groups[0]["lr"])
        if self.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        self.optimizer.step()
        return loss.detach()

    def logged(self) -> dict:
        """The gradient columns since the last call (empty without logging)."""
        return {} if self.log is None else self.log.row()

    def first_window(self) -> dict:
        """`train_loss_first`: the running mean of the per-batch first-token CE since the last call (the
        author's logging window, SPEC 9.1); starts a new window. Empty when no step was taken."""
        out = {"train_loss_first": float(self.first_sum) / self.first_count} if self.first_count else {}
        self.first_sum.zero_()
        self.first_count = 0
        return out


@dataclass
class Stepping:
    """What the training loop drives, made by a stepper factory
    `factory(run, forward, model, optimizer, tokens, device, resume) -> Stepping`.

    `step(t)` takes step t after the loop has set its lr (schedule.lr_at(t) * lr_scale) and returns
    the loss (not finite: nothing was updated); its optional `log` (a GradientLog) and `logged()`
    (columns for the metrics row) are read. `generators` are its random streams, saved with every
    resume state and restored by name. A resume state at step `origin` that lacks Q starts Q at 0."""

    step: Callable[[int], torch.Tensor]
    generators: dict[str, torch.Generator]
    schedule: TrainSpec
    lr_scale: float = 1.0
    origin: int | None = None


def minibatch_stepper(run, forward, model, optimizer, tokens, device: str, resume) -> Stepping:
    """The plain run's stepper: `MinibatchStep` on the run's own batch stream and schedule."""
    spec, task = run.spec, run.task
    batches = torch_generator(spec.seed, "batches")
    step = MinibatchStep(forward, model, optimizer, tokens, task.layout.loss_pos, task.n_train, batches, spec.train, device)
    return Stepping(step, {"batches": batches}, spec.train)


def compiled(model: torch.nn.Module):
    """The model's forward through torch.compile (inductor), for the training step only; the
    evaluation and the checkpoints use the model itself. The first steps pay the compile time."""
    import torch._dynamo

    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 16)
    return torch.compile(model, dynamic=False)
