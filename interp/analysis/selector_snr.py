"""The selector gradient SNR, the paper's cancellation probe (docs/diagnostics.md).

g_bk is the gradient of the first-token loss L1 of example (B_b, z_k) with respect to the
embedding rows W_E[t] of z_k's distinct tokens t. SNR_k = ||mean_b g_bk|| / sqrt(mean_b ||g_bk -
mean_b g_bk||^2) over the N_k groups that share selector k, averaged over selectors. A
"selector" is a distinct z string read from the tokens, so with supergroups of bases that own
their selectors (the task's `selector_groups`) b runs over the groups that share it. Part of
the `gradients` analysis (`interp.analysis.gradients`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.task import Task

PASS_CHUNK = 1024  # sequences per chunk of the backward pass


def z_row_gradients(model: nn.Module, task: Task, idx: Int[Tensor, " n"]) -> Float[Tensor, "n z d"]:
    """Per example: the gradient of its first-token loss L1 with respect to the embedding row of
    each of its z tokens (rows of a repeated z token after the first are zero, so each distinct
    token counts once). One backward of the summed L1 per chunk, the gradient captured at the
    embedding's output and added, per position, into the row of the token there."""
    dec = task.layout.decision_pos
    z_pos = list(task.layout.z_pos)
    device = next(model.parameters()).device
    out = []
    for start in range(0, len(idx), PASS_CHUNK):
        tokens = task.tokens[idx[start : start + PASS_CHUNK]].to(device)
        prefix, target, z = tokens[:, : dec + 1], tokens[:, dec + 1], tokens[:, z_pos]
        store: dict[str, Tensor] = {}

        def leaf(act, hook):
            store["embed"] = act.detach().requires_grad_(True)
            return store["embed"]

        with model.hooks(fwd_hooks=[("hook_embed", leaf)]):
            logits = model(prefix)[:, dec]
        l1 = F.cross_entropy(logits.float(), target, reduction="sum")
        (at_pos,) = torch.autograd.grad(l1, store["embed"])  # [n, pos, d]: example i's own dL1_i/dx
        match = (prefix.unsqueeze(2) == z.unsqueeze(1)).to(at_pos.dtype)  # [n, pos, z]
        first = torch.ones_like(z, dtype=torch.bool)
        for j in range(1, len(z_pos)):  # a z token seen at an earlier z position: counted there
            first[:, j] = ~(z[:, :j] == z[:, j : j + 1]).any(1)
        out.append(torch.einsum("npj,npd->njd", match, at_pos) * first.unsqueeze(-1))
    return torch.cat(out)


def population_moments(
    mean_sq: Float[Tensor, " k"], spread: Float[Tensor, " k"], n: Float[Tensor, " k"], size: Float[Tensor, " k"]
) -> tuple[Float[Tensor, " k"], Float[Tensor, " k"]]:
    """From a sample of n of `size` vectors drawn without replacement, its squared mean norm
    ||m||^2 and mean squared deviation S^2 (divisor n): unbiased estimates of the population's
    ||mu||^2 and sigma^2 = mean ||x - mu||^2 (divisor size). Exact (||m||^2, S^2) when n == size."""
    sigma2 = spread * n / (n - 1) * (size - 1) / size
    return mean_sq - sigma2 / n * (size - n) / (size - 1), sigma2


def selector_snr(model: nn.Module, task: Task, idx: Int[Tensor, " n"]) -> tuple[float, float]:
    """(mean_k SNR_k, mean_k SNR_k sqrt(N_k)) for the selectors of the probe examples `idx`; N_k
    the task's groups that share selector k, n_k those in the probe. SNR_k is the definition's (docs/diagnostics.md), over all
    N_k groups: exactly when the probe holds them all, else estimated from the n_k probe groups
    (`population_moments`: ||mean||^2 less its sampling variance, over the unbiased spread; 0
    when that signal estimate is negative). A probe SNR over n_k < N_k groups is not that: its
    noise floor is n_k^-1/2, not N_k^-1/2. Selectors seen fewer than twice in the probe are left
    out. NaN without z."""
    if not task.has_selector:
        return math.nan, math.nan
    rows = z_row_gradients(model, task, idx).flatten(1).double()
    _, every = torch.unique(task.tokens[:, list(task.layout.z_pos)], dim=0, return_inverse=True)
    kinds, sel = torch.unique(every[idx], return_inverse=True)
    sel = sel.to(rows.device)
    n_sel = len(kinds)
    size = torch.bincount(every)[kinds].double().to(rows.device)  # N_k: examples (= groups) with z_k
    count = torch.bincount(sel, minlength=n_sel).double()
    mean = torch.zeros(n_sel, rows.shape[1], dtype=torch.float64, device=rows.device).index_add_(0, sel, rows)
    mean = mean / count.unsqueeze(1)
    spread = torch.zeros(n_sel, dtype=torch.float64, device=rows.device).index_add_(
        0, sel, (rows - mean[sel]).pow(2).sum(1)) / count
    keep = count >= 2
    if not bool(keep.any()):
        return math.nan, math.nan
    signal, sigma2 = population_moments(mean.pow(2).sum(1)[keep], spread[keep], count[keep], size[keep])
    snr = (signal.clamp(min=0) / sigma2).sqrt()
    return float(snr.mean()), float((snr * size[keep].sqrt()).mean())
