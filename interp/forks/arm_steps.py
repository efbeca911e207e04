"""The training step of a fork: its arm's step, and the stepper `interp.train.train` drives.

An arm (`interp.forks.arms`) either takes the parent's minibatch step (its optimizer, AdamW unless the spec names
another, as training does) or defines `gradients`, and then steps with the explicit Adam of
`interp.optimizer`, which feeds each moment its own gradient (clipped as training clips, where the run
clips); `ArmStep` hands it the pieces (the full gradient g, the measured noise xi, isotropic draws, a minibatch gradient).
With `gamma_every` > 0, every step within `gamma_window` steps of the fork also computes the
shadow update s_t: the step the clean full-batch arm would take from the same parameters, with
its own moments (started from the arm's at the fork and fed the clean gradient g at every step
of the window, so the noise a moment has accumulated shows in the realised update). Every
`gamma_every`-th step of the window, sum ||u_t - s_t||^2 and sum ||s_t||^2 (u_t the arm's actual
update) are added up for the next metrics row; Gamma is their ratio. Each sample's own ratio is kept
too (`gamma_steps`, `gamma_ratios`: lists in the row), for the median over a range of steps
(`interp.forks.escape.gamma_median`). The cost: one full-gradient
pass (about D / batch_size minibatch steps) at every step of the window for the minibatch arms;
the full-gradient arms compute g anyway.

Every arm logs the author's columns as a plain run does (`interp.train`: `train_loss_first` and
`batch_shuffled_loss_first` at multiples of eval_every): the minibatch arms from their minibatch step, the
explicit arms from the whole training set their full gradient reads (its first-token CE, and the set with z
permuted across its rows).

Every arm also logs the gradient columns of plain training (`interp.steps.GradientLog`:
grad_norm, grad_sq_mean, dissipation) for the gradient its first moment sees: g_B for the
minibatch arms (through their `MinibatchStep`), the first-moment gradient of `gradients` for
the others (g for `full_batch` and `v_only_noise`, g plus the noise for `measured_noise` and
`isotropic_noise`). Reading it changes no step.

`fork_stepper` is what a fork is trained with: `train(run, stepper=fork_stepper)` (`interp.fork`,
a family's jobs, `interp train --resume` of a fork; `stepper_for(run)` picks it for any run).
"""

from __future__ import annotations

import dataclasses
import math

import torch

from interp.errors import InterpError
from interp.forks.arms import Arm, arm_of
from interp.metrics import batch_loss, batch_loss_and_first
from interp.optimizer import drop_shadow, explicit_step, shadow_step
from interp.steps import MinibatchStep, Stepping

FULL_CHUNK = 512  # examples per chunk of the full-gradient pass


# ---------------------------------------------------------------------------- gradients
def minibatch_gradient(forward, params: list, tokens, loss_pos) -> tuple[torch.Tensor, list]:
    loss = batch_loss(forward, tokens, loss_pos)
    return loss.detach(), list(torch.autograd.grad(loss, params))


def full_gradient(forward, params: list, tokens, loss_pos, chunk: int = FULL_CHUNK,
                  first: torch.Tensor | None = None) -> tuple[torch.Tensor, list]:
    """The gradient of the mean loss over every row of `tokens`, in chunks (each weighted by its share). Given
    `first` (a float64 scalar on the device), the rows' mean first-token cross-entropy is added to it, from the same
    logits (`batch_loss_and_first`: the same operations as `batch_loss`, so the same gradient bit for bit)."""
    n = tokens.shape[0]
    total = [torch.zeros_like(p) for p in params]
    loss_sum = torch.zeros((), device=tokens.device)
    for lo in range(0, n, chunk):
        part = tokens[lo : lo + chunk]
        if first is None:
            loss = batch_loss(forward, part, loss_pos) * (part.shape[0] / n)
        else:
            loss, loss_first = batch_loss_and_first(forward, part, loss_pos)
            loss = loss * (part.shape[0] / n)
            first.add_(loss_first.double() * (part.shape[0] / n))
        for acc, g in zip(total, torch.autograd.grad(loss, params)):
            acc.add_(g)
        loss_sum += loss.detach()
    return loss_sum, total


@torch.no_grad()
def clip_like_torch(grads: list, max_norm: float) -> list:
    """`grads` scaled as torch.nn.utils.clip_grad_norm_ scales the gradients it is given (the global 2-norm, the
    coefficient max_norm / (norm + 1e-6) clamped at 1): what a parent trained with grad_clip does to g_B."""
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    return [g * coef.to(g.dtype) for g in grads]


def _sq_norm(tensors: list) -> torch.Tensor:
    return sum((t.double() ** 2).sum() for t in tensors)


class ArmStep:
    """One training step of an arm (called after the step's lr is set); `logged()` returns the
    realised-update-power sums since the last call (for the metrics row)."""

    def __init__(self, arm: Arm, minibatch_step, forward, model, optimizer, tokens, loss_pos, generators: dict,
                 batch_size: int, fork_step: int, gamma_every: int, gamma_window: int, device: str,
                 grad_clip: float | None = None):
        self.arm, self.minibatch_step, self.forward, self.optimizer = arm, minibatch_step, forward, optimizer
        self.grad_clip = grad_clip  # an explicit arm clips each moment's gradient as training clips g_B
        self.tokens, self.loss_pos, self.gen, self.batch_size = tokens, loss_pos, generators, batch_size
        self.fork_step, self.gamma_every, self.gamma_window, self.device = fork_step, gamma_every, gamma_window, device
        self.params = [p for group in optimizer.param_groups for p in group["params"]]
        self.sums = [0.0, 0.0, 0]
        self.per_step: list[tuple[int, float | None]] = []  # (step, ||u - s||^2 / ||s||^2) since the last row
        self.log = getattr(minibatch_step, "log", None)  # shared with the minibatch step: one dissipation
        # the author's columns (SPEC 9.1) of an explicit arm, whose "batch" is the whole training set (its full
        # gradient's first-token CE, summed over the window's steps); the other arms' are the minibatch step's
        self.first_sum, self.first_count = torch.zeros((), dtype=torch.float64, device=device), 0
        self.full_rows: torch.Tensor | None = None

    def _batch(self):
        idx = torch.randint(self.tokens.shape[0], (self.batch_size,), generator=self.gen["batches"])
        return self.tokens[idx.to(self.device)]

    # what an arm's `gradients` is handed
    def full_gradient(self) -> tuple[torch.Tensor, list]:
        """(mean loss, g) over the whole training set (its first-token CE kept for the author's columns)."""
        first = torch.zeros((), dtype=torch.float64, device=self.device)
        loss, g = full_gradient(self.forward, self.params, self.tokens, self.loss_pos, first=first)
        if bool(torch.isfinite(loss)):
            self.first_sum.add_(first)
            self.first_count += 1
            self.full_rows = torch.arange(self.tokens.shape[0])
        return loss, g

    @property
    def last_batch(self) -> torch.Tensor | None:
        """The rows of the latest step (the author's in-batch dz, `interp.train`): the minibatch step's, or for an
        explicit arm the whole training set, which its full gradient reads."""
        return self.full_rows if self.arm.explicit else self.minibatch_step.last_batch

    def first_window(self) -> dict:
        """`train_loss_first` since the last call, as a plain run logs it (`MinibatchStep.first_window`): the minibatch
        step's, or for an explicit arm the mean over the window's steps of its full gradient's first-token CE."""
        if not self.arm.explicit:
            return self.minibatch_step.first_window()
        out = {"train_loss_first": float(self.first_sum) / self.first_count} if self.first_count else {}
        self.first_sum.zero_()
        self.first_count = 0
        return out

    def minibatch_gradient(self) -> tuple[torch.Tensor, list]:
        """(loss, g_B) of one minibatch drawn from the fork's batch stream."""
        return minibatch_gradient(self.forward, self.params, self._batch(), self.loss_pos)

    def measured_noise(self) -> list:
        """xi = (g_B1 - g_B2) / sqrt(2) for two minibatches drawn from the fork's batch stream."""
        _, g1 = minibatch_gradient(self.forward, self.params, self._batch(), self.loss_pos)
        _, g2 = minibatch_gradient(self.forward, self.params, self._batch(), self.loss_pos)
        return [(a - b) / math.sqrt(2) for a, b in zip(g1, g2)]

    def isotropic(self, norm: torch.Tensor) -> list:
        """Gaussian draws from the fork's noise stream, one per parameter, scaled to total norm `norm`."""
        draws = [torch.randn(p.shape, generator=self.gen["noise"]).to(self.device) for p in self.params]
        scale = norm / _sq_norm(draws).sqrt()
        return [d * scale.to(d.dtype) for d in draws]

    @staticmethod
    def sq_norm(tensors: list) -> torch.Tensor:
        """sum ||t||^2 over `tensors`, in float64."""
        return _sq_norm(tensors)

    def gradients(self) -> tuple[torch.Tensor, list | None, list, list]:
        """(loss, clean g or None, gradient for the first moment, for the second) of an explicit arm."""
        return self.arm.gradients(self)

    def __call__(self, step: int) -> torch.Tensor:
        since = step - self.fork_step - 1
        window = self.gamma_every > 0 and 0 <= since < self.gamma_window
        clean = None
        explicit = self.arm.explicit
        if explicit:
            loss, clean, g_m, g_v = self.gradients()
        if window:  # the clean full-batch shadow advances at every step of the window
            if clean is None:
                _, clean = full_gradient(self.forward, self.params, self.tokens, self.loss_pos)
            before = [p.detach().clone() for p in self.params]
            shadow = shadow_step(self.optimizer, clean)
        elif self.gamma_every > 0 and since == self.gamma_window:
            drop_shadow(self.optimizer)
        if explicit:
            if not bool(torch.isfinite(loss)):
                return loss
            if self.log is not None:
                self.log.add(g_m, self.optimizer.param_groups[0]["lr"])
            if self.grad_clip is not None:  # after the log, as the minibatch step logs g_B before clipping
                g_m, g_v = (clip_like_torch(g_m, self.grad_clip),
                            None if g_v is g_m else clip_like_torch(g_v, self.grad_clip))
                g_v = g_m if g_v is None else g_v
            explicit_step(self.optimizer, g_m, g_v)
        else:
            loss = self.minibatch_step(step)
        if window and since % self.gamma_every == 0:
            with torch.no_grad():
                u = [p.detach() - b for p, b in zip(self.params, before)]
                s = [x - b for x, b in zip(shadow, before)]
                num, den = float(_sq_norm([a - b for a, b in zip(u, s)])), float(_sq_norm(s))
                self.sums[0] += num
                self.sums[1] += den
                self.sums[2] += 1
                self.per_step.append((step, num / den if den > 0 else None))
        return loss

    def logged(self) -> dict:
        out = {} if self.log is None else self.log.row()
        if self.gamma_every <= 0:
            return out
        out.update({"gamma_num": self.sums[0], "gamma_den": self.sums[1], "gamma_samples": self.sums[2]})
        if self.per_step:  # each sample's own ratio, for the median over a range of steps
            out.update({"gamma_steps": [s for s, _ in self.per_step], "gamma_ratios": [r for _, r in self.per_step]})
        self.sums, self.per_step = [0.0, 0.0, 0], []
        return out


def build_stepper(run, forward, model, optimizer, tokens, device: str) -> tuple[ArmStep, dict]:
    """(the step of `run`'s arm, its random streams by name)."""
    block = run.fork
    arm = arm_of(block)
    tspec = run.spec.train
    generators = {"batches": torch.Generator(device="cpu"), "noise": torch.Generator(device="cpu")}
    layout = run.task.layout
    plain = MinibatchStep(forward, model, optimizer, tokens, layout.loss_pos, run.task.n_train, generators["batches"],
                          tspec, device)
    step = ArmStep(arm, plain, forward, model, optimizer, tokens, layout.loss_pos, generators, tspec.batch_size,
                   block["parent_step"], block.get("gamma_every", 0), block.get("gamma_window", 0), device,
                   grad_clip=tspec.grad_clip)
    return step, generators


def fork_stepper(run, forward, model, optimizer, tokens, device: str, resume) -> Stepping:
    """A fork's stepper for `interp.train.train`: its arm's step and random streams, the parent's lr
    schedule at the same absolute steps (scaled by a changed lr), and Q counted from the fork step."""
    if resume is None:
        raise InterpError(f"{run.path} is a fork without its starting state (resume.safetensors): make it "
                          f"again with interp fork")
    step, generators = build_stepper(run, forward, model, optimizer, tokens, device)
    tspec = run.spec.train
    # the parent's schedule (its lr, its length), scaled by the fork's lr: the scale is applied once
    schedule = dataclasses.replace(tspec, steps=run.fork["parent_steps"], lr=run.fork["parent_lr"])
    return Stepping(step, generators, schedule, tspec.lr / run.fork["parent_lr"], origin=run.fork["parent_step"])


def stepper_for(run):
    """The stepper `interp.train.train` needs for `run`: `fork_stepper` for a fork, None (the
    minibatch step) for any other run."""
    return None if run.fork is None else fork_stepper
