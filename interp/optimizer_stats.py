"""AdamW's state per module: the effective step and the mean second moment (docs/diagnostics.md).

With t the optimizer's step count, m_hat = m / (1 - beta1^t) and v_hat = v / (1 - beta2^t) (the
bias-corrected moments AdamW divides by), a module's

- effective step `eff_step` = ||m_hat / (sqrt(v_hat) + eps)|| over its parameters: the norm of
  the step AdamW takes per unit lr, weight decay aside (dimensionless: each coordinate is a
  signal-to-noise ratio of the gradient, at most about 1 in size);
- mean second moment `v_mean` = the mean of v_hat over its parameters (squared gradient units,
  nats^2 / param^2): the preconditioner's scale.

Modules: "embed" (W_E), "pos_embed" (W_pos), "L{l}.attn" (every attention parameter of block l,
b_O included), "L{l}.mlp", "L{l}.ln" (both LayerNorms of block l, when the model has LayerNorm
parameters), "ln_final", "unembed" (W_U, b_U), anything else "other", and "all". Training logs
them at every evaluation row as `eff_step.<module>` and `v_mean.<module>`
(`interp.train`); `state_columns` reads them from a kept state (`interp.run_states.kept_state`).
Sums are float64; nothing here changes the optimizer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

import torch

ALL = "all"


def module_of(name: str) -> str:
    """The module a TransformerLens parameter name belongs to (module docstring)."""
    if name.startswith("embed."):
        return "embed"
    if name.startswith("pos_embed."):
        return "pos_embed"
    if name.startswith("unembed."):
        return "unembed"
    if name.startswith("ln_final."):
        return "ln_final"
    m = re.match(r"blocks\.(\d+)\.(attn|mlp|ln\d*)\.", name)
    if m:
        kind = "ln" if m[2].startswith("ln") else m[2]
        return f"L{m[1]}.{kind}"
    return "other"


def modules(names: Iterable[str]) -> list[str]:
    """The modules of `names` in parameter order, then "all"."""
    return [*dict.fromkeys(module_of(n) for n in names), ALL]


@torch.no_grad()
def adam_stats(slots: Iterable[tuple[str, torch.Tensor, torch.Tensor, float]], beta1: float, beta2: float,
               eps: float, bias_correction: bool = True) -> dict[str, float]:
    """`eff_step.<module>` and `v_mean.<module>` from (name, exp_avg, exp_avg_sq, step) per parameter.
    A parameter at step 0 (no update yet) has no bias-corrected moments: its modules are left out. Without
    `bias_correction` (an Adam that divides the raw moments, interp.optimizers) m_hat, v_hat are the raw m, v."""
    sums: dict[str, list] = {}
    for name, m, v, t in slots:
        if t <= 0:
            continue
        m_hat = m.double() / ((1 - beta1**t) if bias_correction else 1.0)
        v_hat = v.double() / ((1 - beta2**t) if bias_correction else 1.0)
        ratio_sq = (m_hat / (v_hat.sqrt() + eps)).square().sum()
        for key in (module_of(name), ALL):
            acc = sums.setdefault(key, [torch.zeros((), dtype=torch.float64, device=m.device)] * 2 + [0])
            acc[0] = acc[0] + ratio_sq
            acc[1] = acc[1] + v_hat.sum()
            acc[2] += m.numel()
    if not sums:
        return {}
    keys = [k for k in dict.fromkeys([*sums]) if k != ALL] + [ALL]
    values = torch.stack([torch.stack(sums[k][:2]) for k in keys]).cpu().tolist()  # one host read
    out: dict[str, float] = {}
    for key, (sq, v_sum) in zip(keys, values):
        out[f"eff_step.{key}"] = math.sqrt(sq)
        out[f"v_mean.{key}"] = v_sum / sums[key][2]
    return out


def optimizer_columns(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, float]:
    """The columns of `model`'s live Adam state (empty before the first step, and for SGD or RMSProp, which keep no
    Adam moments)."""
    group = optimizer.param_groups[0]
    if "betas" not in group:
        return {}
    beta1, beta2 = group["betas"]

    from interp.model import tl_named_parameters  # checkpoint names on either TransformerLens

    def slots():
        for name, p in tl_named_parameters(model):
            state = optimizer.state.get(p)
            if state and "exp_avg" in state:
                yield name, state["exp_avg"], state["exp_avg_sq"], float(state["step"])

    return adam_stats(slots(), beta1, beta2, group["eps"], group.get("bias_correction", True))


def state_columns(param_names: list[str], optimizer_state: dict) -> dict[str, float]:
    """The columns of a saved AdamW state_dict (`ResumeState.optimizer`), whose integer keys follow
    `param_names` (the model's parameter order, as `torch.optim` numbers them)."""
    group = optimizer_state["param_groups"][0]
    if "betas" not in group:
        return {}
    beta1, beta2 = group["betas"]
    state = optimizer_state["state"]
    slots = ((name, state[i]["exp_avg"], state[i]["exp_avg_sq"], float(state[i]["step"]))
             for i, name in enumerate(param_names) if i in state and "exp_avg" in state[i])
    return adam_stats(slots, beta1, beta2, group["eps"], group.get("bias_correction", True))
