"""The optimizer a run trains with (`TrainSpec.optimizer`, docs/runs.md "Optimizers"), built from torch.optim.

    adamw     torch.optim.AdamW: weight decay decoupled from the gradient (the paper's)
    adam-l2   torch.optim.Adam with weight_decay: weight decay as an L2 term added to the gradient (coupled)
    adam      torch.optim.Adam without weight decay
    sgd       torch.optim.SGD (momentum: --momentum; weight decay coupled)
    rmsprop   torch.optim.RMSprop with alpha = beta2 (momentum: --momentum; weight decay coupled)

torch has no Adam without bias correction, so `bias_correction=False` (a cell of the author's optimizer
decomposition, docs/runs.md) takes `RawMomentAdam` below, the same arithmetic with both corrections left
out. Every state is a torch state_dict of tensors, so the resume state, the kept states and forks hold any of them.
"""

from __future__ import annotations

import torch

from interp.spec import ADAM_FAMILY, TrainSpec


class RawMomentAdam(torch.optim.Optimizer):
    """Adam whose update divides the raw first moment by the root of the raw second moment (no 1 - beta^t
    corrections), with weight decay decoupled (AdamW's) or coupled (an L2 term of the gradient). The state has
    torch's Adam keys (step, exp_avg, exp_avg_sq); the group says `bias_correction: False`."""

    def __init__(self, params, lr: float, betas: tuple[float, float], eps: float, weight_decay: float,
                 decoupled_weight_decay: bool):
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                                  "decoupled_weight_decay": bool(decoupled_weight_decay), "bias_correction": False})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                adam_math(p, p.grad, p.grad, state["exp_avg"], state["exp_avg_sq"], 0, lr, beta1, beta2, eps, wd,
                          decoupled=group["decoupled_weight_decay"], bias_correction=False)
        return loss


def adam_math(param, grad_m, grad_v, exp_avg, exp_avg_sq, step: int, lr: float, beta1: float, beta2: float,
              eps: float, weight_decay: float, *, decoupled: bool = True, bias_correction: bool = True) -> None:
    """One Adam update of `param` in place, in torch.optim.Adam(W)'s single-tensor order of operations: `grad_m`
    enters the first moment and `grad_v` the second (the same tensor but for the noisy fork arms); weight decay
    decoupled (AdamW) or added to both gradients (coupled L2); `step` is the counter after this update (unused
    without bias correction)."""
    if weight_decay and not decoupled:
        same = grad_v is grad_m
        grad_m = grad_m.add(param, alpha=weight_decay)
        grad_v = grad_m if same else grad_v.add(param, alpha=weight_decay)
    elif weight_decay:
        param.mul_(1 - lr * weight_decay)
    exp_avg.lerp_(grad_m, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad_v, grad_v, value=1 - beta2)
    if not bias_correction:
        param.addcdiv_(exp_avg, exp_avg_sq.sqrt().add_(eps), value=-lr)
        return
    step_size = lr / (1 - beta1**step)
    denom = (exp_avg_sq.sqrt() / (1 - beta2**step) ** 0.5).add_(eps)
    param.addcdiv_(exp_avg, denom, value=-step_size)


def make_optimizer(params, spec: TrainSpec) -> torch.optim.Optimizer:
    """The optimizer `spec` names over `params`, at the spec's lr (the training loop sets each step's)."""
    name, wd = spec.optimizer, spec.weight_decay
    betas = (spec.beta1, spec.beta2)
    if name in ADAM_FAMILY and not spec.bias_correction:
        return RawMomentAdam(params, spec.lr, betas, spec.eps, wd, decoupled_weight_decay=name == "adamw")
    if name == "adamw":
        return torch.optim.AdamW(params, lr=spec.lr, betas=betas, eps=spec.eps, weight_decay=wd)
    if name in ("adam-l2", "adam"):
        return torch.optim.Adam(params, lr=spec.lr, betas=betas, eps=spec.eps, weight_decay=wd)
    if name == "sgd":
        return torch.optim.SGD(params, lr=spec.lr, momentum=spec.momentum, weight_decay=wd)
    if name == "rmsprop":
        return torch.optim.RMSprop(params, lr=spec.lr, alpha=spec.beta2, eps=spec.eps, weight_decay=wd,
                                   momentum=spec.momentum)
    raise ValueError(f"unknown optimizer {name!r}")  # TrainSpec.validate refuses it first


def is_adam(optimizer: torch.optim.Optimizer) -> bool:
    """Whether `optimizer` keeps Adam's two moments (exp_avg, exp_avg_sq): what the explicit fork arms, the update
    diagnostics and the per-module optimizer columns read."""
    return isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW, RawMomentAdam))


def kind_of(optimizer: torch.optim.Optimizer) -> str:
    """"adam" (any of the Adam family), "sgd" or "rmsprop": which arithmetic `batched_step` applies."""
    if is_adam(optimizer):
        return "adam"
    if isinstance(optimizer, torch.optim.SGD):
        return "sgd"
    if isinstance(optimizer, torch.optim.RMSprop):
        return "rmsprop"
    raise ValueError(f"no batched step for {type(optimizer).__name__}")


@torch.no_grad()
def batched_step(kind: str, group: dict, state: dict, param, grads, lr: float):
    """The parameters one step of the optimizer would give from `state` (never changed) for each of n gradients:
    `param` [*shape], `grads` [n, *shape] -> [n, *shape], in torch.optim's single-tensor arithmetic (SGD and RMSProp
    without nesterov or centering, which interp does not use). The update diagnostics draw many one-step updates
    from one state with it (interp.analysis.updates)."""
    n = grads.shape[0]
    shape = (n, *param.shape)
    new = param.detach().expand(shape).clone()
    wd = group["weight_decay"]
    if kind == "adam":
        beta1, beta2 = group["betas"]
        t = int(state["step"]) if "step" in state else 0
        m = state["exp_avg"] if "exp_avg" in state else torch.zeros_like(param)
        v = state["exp_avg_sq"] if "exp_avg_sq" in state else torch.zeros_like(param)
        adam_math(new, grads, grads, m.expand(shape).clone(), v.expand(shape).clone(), t + 1, lr, beta1, beta2,
                  group["eps"], wd, decoupled=group.get("decoupled_weight_decay", True),
                  bias_correction=group.get("bias_correction", True))
        return new
    d = grads.add(new, alpha=wd) if wd else grads
    momentum = group["momentum"]
    if kind == "sgd":
        if momentum:
            buf = state.get("momentum_buffer")
            d = d.clone() if buf is None else buf.expand(shape).mul(momentum).add_(d, alpha=1 - group["dampening"])
        return new.add_(d, alpha=-lr)
    if kind == "rmsprop":
        alpha = group["alpha"]
        sq = state["square_avg"] if "square_avg" in state else torch.zeros_like(param)
        avg = sq.expand(shape).mul(alpha).addcmul_(d, d, value=1 - alpha).sqrt_().add_(group["eps"])
        if momentum:
            buf = state["momentum_buffer"] if "momentum_buffer" in state else torch.zeros_like(param)
            return new.add_(buf.expand(shape).mul(momentum).addcdiv_(d, avg), alpha=-lr)
        return new.addcdiv_(d, avg, value=-lr)
    raise ValueError(f"unknown optimizer kind {kind!r}")
