"""AdamW written out, so that each moment can be fed its own gradient.

The noisy fork arms need what `torch.optim.AdamW` cannot do: the first moment fed one gradient
and the second moment another (`v_only_noise`), and the update a state *would* take without
taking it (the shadow update of the realised update power). These functions follow
torch.optim.AdamW's single-tensor arithmetic operation for operation (decoupled weight decay,
bias correction from the step counter) on the optimizer's own state (`exp_avg`, `exp_avg_sq`,
`step`), so an arm can switch between them and torch's step. Tested against torch.optim.AdamW.
The shadow of the realised update power keeps its own clean moments beside them (`shadow_step`).
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor


def adamw_math(param: Float[Tensor, "..."], grad_m: Float[Tensor, "..."], grad_v: Float[Tensor, "..."],
               exp_avg: Float[Tensor, "..."], exp_avg_sq: Float[Tensor, "..."], step: int, lr: float,
               beta1: float, beta2: float, eps: float, weight_decay: float) -> None:
    """One AdamW update of `param` in place (step is the counter after this update, 1-based):
    `grad_m` enters the first moment, `grad_v` the second."""
    param.mul_(1 - lr * weight_decay)
    exp_avg.lerp_(grad_m, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad_v, grad_v, value=1 - beta2)
    step_size = lr / (1 - beta1**step)
    denom = (exp_avg_sq.sqrt() / (1 - beta2**step) ** 0.5).add_(eps)
    param.addcdiv_(exp_avg, denom, value=-step_size)


def _slots(optimizer: torch.optim.Optimizer):
    """(param, its state, its group) for every parameter; missing state is created as torch does."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            state = optimizer.state[p]
            if not state:
                state["step"] = torch.tensor(0.0)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            yield p, state, group


@torch.no_grad()
def explicit_step(optimizer: torch.optim.AdamW, grads_m: list[Tensor], grads_v: list[Tensor]) -> None:
    """Update the optimizer's parameters and state in place, as `optimizer.step()` would with
    gradient `grads_m` for the first moment and `grads_v` for the second (parameter order)."""
    for (p, state, group), gm, gv in zip(_slots(optimizer), grads_m, grads_v, strict=True):
        state["step"] += 1
        beta1, beta2 = group["betas"]
        adamw_math(p, gm, gv, state["exp_avg"], state["exp_avg_sq"], int(state["step"].item()), group["lr"],
                   beta1, beta2, group["eps"], group["weight_decay"])


SHADOW_KEYS = ("shadow_exp_avg", "shadow_exp_avg_sq", "shadow_step")


@torch.no_grad()
def shadow_params(optimizer: torch.optim.AdamW, grads: list[Tensor]) -> list[Tensor]:
    """The parameters one AdamW step on `grads` would give from the optimizer's own moments,
    leaving parameters and state untouched."""
    out = []
    for (p, state, group), g in zip(_slots(optimizer), grads, strict=True):
        beta1, beta2 = group["betas"]
        new = p.detach().clone()
        adamw_math(new, g, g, state["exp_avg"].clone(), state["exp_avg_sq"].clone(), int(state["step"].item()) + 1,
                   group["lr"], beta1, beta2, group["eps"], group["weight_decay"])
        out.append(new)
    return out


@torch.no_grad()
def shadow_step(optimizer: torch.optim.AdamW, grads: list[Tensor]) -> list[Tensor]:
    """The clean shadow's step: the parameters an AdamW step on `grads` gives from the current
    parameters with the *shadow's* moments, which it advances (kept in the optimizer state under
    SHADOW_KEYS, so they are saved and resumed with it; started from the optimizer's own moments
    the first time). Parameters and the optimizer's own moments are untouched."""
    out = []
    for (p, state, group), g in zip(_slots(optimizer), grads, strict=True):
        if "shadow_step" not in state:
            state["shadow_exp_avg"] = state["exp_avg"].clone()
            state["shadow_exp_avg_sq"] = state["exp_avg_sq"].clone()
            state["shadow_step"] = state["step"].clone()
        state["shadow_step"] += 1
        beta1, beta2 = group["betas"]
        new = p.detach().clone()
        adamw_math(new, g, g, state["shadow_exp_avg"], state["shadow_exp_avg_sq"], int(state["shadow_step"].item()),
                   group["lr"], beta1, beta2, group["eps"], group["weight_decay"])
        out.append(new)
    return out


def drop_shadow(optimizer: torch.optim.AdamW) -> None:
    """Forget the shadow's moments (the measurement window is over)."""
    for state in optimizer.state.values():
        for key in SHADOW_KEYS:
            state.pop(key, None)
