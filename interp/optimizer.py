"""Adam written out, so that each moment can be fed its own gradient.

The noisy fork arms need what `torch.optim.AdamW` cannot do: the first moment fed one gradient
and the second moment another (`v_only_noise`), and the update a state *would* take without
taking it (the shadow update of the realised update power). These functions follow
torch.optim.AdamW's single-tensor arithmetic operation for operation (decoupled weight decay,
bias correction from the step counter) on the optimizer's own state (`exp_avg`, `exp_avg_sq`,
`step`), so an arm can switch between them and torch's step. Tested against torch.optim.AdamW.
The shadow of the realised update power keeps its own clean moments beside them (`shadow_step`).
The same holds for the rest of the Adam family a run may train with (`interp.optimizers`): Adam with coupled L2
weight decay, and either without bias correction; each group says which (`decoupled_weight_decay`,
`bias_correction`). SGD and RMSProp keep no such moments: the arms that need them refuse those runs.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from interp.optimizers import adam_math


def adamw_math(param: Float[Tensor, "..."], grad_m: Float[Tensor, "..."], grad_v: Float[Tensor, "..."],
               exp_avg: Float[Tensor, "..."], exp_avg_sq: Float[Tensor, "..."], step: int, lr: float,
               beta1: float, beta2: float, eps: float, weight_decay: float, *, decoupled: bool = True,
               bias_correction: bool = True) -> None:
    """One Adam(W) update of `param` in place (step is the counter after this update, 1-based):
    `grad_m` enters the first moment, `grad_v` the second (`interp.optimizers.adam_math`)."""
    adam_math(param, grad_m, grad_v, exp_avg, exp_avg_sq, step, lr, beta1, beta2, eps, weight_decay,
              decoupled=decoupled, bias_correction=bias_correction)


def _flags(group: dict) -> dict:
    """The group's weight-decay placement and bias correction (AdamW's where a group predates them)."""
    return {"decoupled": group.get("decoupled_weight_decay", True), "bias_correction": group.get("bias_correction", True)}


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
def explicit_step(optimizer: torch.optim.Optimizer, grads_m: list[Tensor], grads_v: list[Tensor]) -> None:
    """Update the optimizer's parameters and state in place, as `optimizer.step()` would with
    gradient `grads_m` for the first moment and `grads_v` for the second (parameter order)."""
    for (p, state, group), gm, gv in zip(_slots(optimizer), grads_m, grads_v, strict=True):
        state["step"] += 1
        beta1, beta2 = group["betas"]
        adamw_math(p, gm, gv, state["exp_avg"], state["exp_avg_sq"], int(state["step"].item()), group["lr"],
                   beta1, beta2, group["eps"], group["weight_decay"], **_flags(group))


SHADOW_KEYS = ("shadow_exp_avg", "shadow_exp_avg_sq", "shadow_step")


@torch.no_grad()
def shadow_params(optimizer: torch.optim.Optimizer, grads: list[Tensor]) -> list[Tensor]:
    """The parameters one AdamW step on `grads` would give from the optimizer's own moments,
    leaving parameters and state untouched."""
    out = []
    for (p, state, group), g in zip(_slots(optimizer), grads, strict=True):
        beta1, beta2 = group["betas"]
        new = p.detach().clone()
        adamw_math(new, g, g, state["exp_avg"].clone(), state["exp_avg_sq"].clone(), int(state["step"].item()) + 1,
                   group["lr"], beta1, beta2, group["eps"], group["weight_decay"], **_flags(group))
        out.append(new)
    return out


@torch.no_grad()
def shadow_step(optimizer: torch.optim.Optimizer, grads: list[Tensor]) -> list[Tensor]:
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
                   group["lr"], beta1, beta2, group["eps"], group["weight_decay"], **_flags(group))
        out.append(new)
    return out


def drop_shadow(optimizer: torch.optim.Optimizer) -> None:
    """Forget the shadow's moments (the measurement window is over)."""
    for state in optimizer.state.values():
        for key in SHADOW_KEYS:
            state.pop(key, None)
