"""The training step every plain run takes, and the optimizer it steps.

One place for it, because three callers must take exactly the same arithmetic: training
(`interp.train`), the replay of a run's optimizer state (`interp.forks.state`, which must
reproduce the checkpoints bit for bit) and the forks that keep the parent's regime
(`interp.forks.arms`).
"""

from __future__ import annotations

import torch

from interp.metrics import batch_loss
from interp.spec import TrainSpec


def build_optimizer(model: torch.nn.Module, spec: TrainSpec) -> torch.optim.AdamW:
    # weight decay applies to every parameter, as torch.optim.AdamW does when given them all
    return torch.optim.AdamW(
        model.parameters(), lr=spec.lr, betas=(spec.beta1, spec.beta2), weight_decay=spec.weight_decay
    )


class MinibatchStep:
    """One AdamW step on a minibatch drawn from `batches`. Returns the batch loss; a loss that
    is not finite is returned before any update (the caller stops training)."""

    def __init__(self, forward, model, optimizer, tokens, loss_pos, n_examples: int, batches, tspec: TrainSpec,
                 device: str):
        self.forward, self.model, self.optimizer, self.tokens = forward, model, optimizer, tokens
        self.loss_pos, self.n, self.batches, self.device = loss_pos, n_examples, batches, device
        self.batch_size, self.grad_clip = tspec.batch_size, tspec.grad_clip

    def __call__(self, step: int) -> torch.Tensor:
        idx = torch.randint(self.n, (self.batch_size,), generator=self.batches)
        loss = batch_loss(self.forward, self.tokens[idx.to(self.device)], self.loss_pos)
        if not bool(torch.isfinite(loss)):
            return loss.detach()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        self.optimizer.step()
        return loss.detach()


def compiled(model: torch.nn.Module):
    """The model's forward through torch.compile (inductor), for the training step only; the
    evaluation and the checkpoints use the model itself. The first steps pay the compile time."""
    import torch._dynamo

    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 16)
    return torch.compile(model, dynamic=False)
