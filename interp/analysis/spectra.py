"""Head spectra: the singular values of each head's OV and QK circuits across checkpoints.

Per head h of layer l (docs/diagnostics.md): OV = W_V[h] @ W_O[h] and QK = W_Q[h] @ W_K[h]^T,
both d_model x d_model of rank at most d_head. A head that has learnt one thing (e.g. to copy z)
concentrates its spectrum on few directions: sigma_1 / sigma_2 rises and the effective rank falls.

Both products are A @ B^T with A, B of shape d_model x d_head (OV: A = W_V, B = W_O^T; QK: A = W_Q,
B = W_K). With reduced QR factors A = Q_A R_A and B = Q_B R_B, A B^T = Q_A (R_A R_B^T) Q_B^T, and
Q_A, Q_B have orthonormal columns, so the nonzero singular values of A B^T are those of the small
d_head x d_head matrix R_A R_B^T. Every circuit of every head of every layer goes through one batched
QR and one batched `torch.linalg.svdvals`, in float64 on the CPU (when d_head >= d_model the product
itself is decomposed). Only checkpoint weights are read (no forward pass).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor, nn

from interp.analysis.common import across_of
from interp.analysis.registry import Analysis
from interp.errors import InterpError
from interp.runs import Run

DEFAULTS: dict = {}
CIRCUITS = ("OV", "QK")
SPECTRA_COLUMNS = ("step", "layer", "head", "head_name", "circuit", "sigma_1", "sigma_2", "sigma_ratio",
                   "effective_rank", "nuclear_norm", "frobenius")
VALUES_COLUMNS = ("step", "layer", "head", "head_name", "circuit", "index", "value")


# ---------------------------------------------------------------------------- linear algebra
def low_rank_svdvals(
    a: Float[Tensor, "*batch d r"], b: Float[Tensor, "*batch d r"]
) -> Float[Tensor, "*batch k"]:
    """Singular values (descending, float64) of a @ b^T, min(d, r) of them: through the QR factors
    of a and b when r < d (the other d - r are exactly zero), else of the product itself."""
    a, b = a.double(), b.double()
    d, r = a.shape[-2], a.shape[-1]
    if r < d:
        r_a = torch.linalg.qr(a, mode="r").R
        r_b = torch.linalg.qr(b, mode="r").R
        return torch.linalg.svdvals(r_a @ r_b.transpose(-1, -2))
    return torch.linalg.svdvals(a @ b.transpose(-1, -2))[..., : min(d, r)]


def effective_rank(s: Float[Tensor, "*batch k"]) -> Float[Tensor, "*batch"]:
    """exp of the entropy of p_i = s_i / sum s (0 log 0 = 0); NaN where every singular value is 0."""
    s = s.double()
    total = s.sum(-1, keepdim=True)
    p = s / total
    plogp = torch.where(p > 0, p * torch.log(p), torch.zeros_like(p))
    out = torch.exp(-plogp.sum(-1))
    return torch.where(total.squeeze(-1) > 0, out, torch.full_like(out, float("nan")))


def head_spectra(
    w_q: Float[Tensor, "layer head d_model d_head"],
    w_k: Float[Tensor, "layer head d_model d_head"],
    w_v: Float[Tensor, "layer head d_model d_head"],
    w_o: Float[Tensor, "layer head d_head d_model"],
) -> Float[Tensor, "layer head circuit k"]:
    """Singular values of every head's OV (circuit 0) and QK (circuit 1), in one batched call."""
    a = torch.stack([w_v, w_q], dim=2)  # [L, H, 2, d_model, d_head]
    b = torch.stack([w_o.transpose(-1, -2), w_k], dim=2)
    return low_rank_svdvals(a, b)


# ---------------------------------------------------------------------------- tables
def spectra_tables(step: int, s: Float[Tensor, "layer head circuit k"]) -> dict[str, pd.DataFrame]:
    """The "spectra" and "spectra_values" tables of one step from the singular values."""
    n_layers, n_heads, n_circ, k = s.shape
    s = s.double()
    sigma_1 = s[..., 0]
    sigma_2 = s[..., 1] if k > 1 else torch.zeros_like(sigma_1)  # rank <= 1: the second one is exactly 0
    ratio = (sigma_1 / sigma_2).numpy()  # inf where sigma_2 = 0 < sigma_1, NaN where both are 0
    layer, head, circ = np.meshgrid(np.arange(n_layers), np.arange(n_heads), np.arange(n_circ), indexing="ij")
    layer, head, circ = layer.ravel(), head.ravel(), circ.ravel()
    names = np.char.add(np.char.add("L", layer.astype(str)), np.char.add("H", head.astype(str)))
    circuits = np.asarray(CIRCUITS)[circ]
    spectra = pd.DataFrame({
        "step": np.full(layer.size, step, dtype=np.int64),
        "layer": layer.astype(np.int64), "head": head.astype(np.int64), "head_name": names.astype(object),
        "circuit": circuits.astype(object),
        "sigma_1": sigma_1.numpy().ravel(), "sigma_2": sigma_2.numpy().ravel(), "sigma_ratio": ratio.ravel(),
        "effective_rank": effective_rank(s).numpy().ravel(),
        "nuclear_norm": s.sum(-1).numpy().ravel(),
        "frobenius": torch.sqrt((s * s).sum(-1)).numpy().ravel(),
    })[list(SPECTRA_COLUMNS)]
    rep = np.repeat
    values = pd.DataFrame({
        "step": np.full(layer.size * k, step, dtype=np.int64),
        "layer": rep(layer, k).astype(np.int64), "head": rep(head, k).astype(np.int64),
        "head_name": rep(names, k).astype(object), "circuit": rep(circuits, k).astype(object),
        "index": np.tile(np.arange(k, dtype=np.int64), layer.size),
        "value": s.numpy().reshape(-1),
    })[list(VALUES_COLUMNS)]
    return {"spectra": spectra, "spectra_values": values}


# ---------------------------------------------------------------------------- run level
def _weights(run: Run, step: int, model: nn.Module | None) -> dict[str, Tensor]:
    """W_Q, W_K, W_V, W_O stacked over layers ([L, H, ...]) from `model`, else from the checkpoint."""
    if model is not None:
        return {n: getattr(model, n).detach().to("cpu") for n in ("W_Q", "W_K", "W_V", "W_O")}
    params = run.state_dict(step)  # hash-checked; no model is built
    n_layers = run.spec.model.n_layers
    out = {}
    for n in ("W_Q", "W_K", "W_V", "W_O"):
        names = [f"blocks.{l}.attn.{n}" for l in range(n_layers)]
        missing = [x for x in names if x not in params]
        if missing:
            raise InterpError(f"spectra: the checkpoint at step {step} lacks {', '.join(missing[:3])}")
        out[n] = torch.stack([params[x].to(torch.float32) for x in names])
    return out


def _check_params(params: dict) -> None:
    if params:
        raise InterpError(f"the spectra analysis takes no parameters, got {sorted(params)}")


def at_step(run: Run, step: int, *, model: nn.Module | None = None, device: str = "cpu",
            **params) -> dict[str, pd.DataFrame]:
    """Singular values of every head's OV = W_V W_O and QK = W_Q W_K^T at `step` (float64, CPU
    whatever `device` is; weights from `model` when given, else the checkpoint's).

    "spectra": one row per (layer, head, circuit): step, layer, head, head_name ("L0H3"), circuit
    ("OV" or "QK"), sigma_1 and sigma_2 (the two largest singular values, weight units squared),
    sigma_ratio (sigma_1 / sigma_2; inf where sigma_2 = 0 < sigma_1), effective_rank (exp of the
    entropy of p_i = s_i / sum s, 1..d_head; NaN for an all-zero matrix), nuclear_norm (sum s),
    frobenius (sqrt of sum s^2).
    "spectra_values": one row per (layer, head, circuit, index) for the top min(d_head, d_model)
    singular values: step, layer, head, head_name, circuit, index (0 = largest), value.
    """
    _check_params(params)
    step = run.resolve_step(step)
    w = _weights(run, step, model)
    return spectra_tables(step, head_spectra(w["W_Q"], w["W_K"], w["W_V"], w["W_O"]))


across_tables = across_of("spectra")  # both tables
across = across_of("spectra", table="spectra")
ENTRY = Analysis(
    "spectra", __name__,
    "singular values, effective rank, sigma1/sigma2 and nuclear norm of every head's OV and QK circuits",
    tables=("spectra", "spectra_values"), order=100, groups=(("diagnostics", 2),),
)
