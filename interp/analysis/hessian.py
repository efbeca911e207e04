"""Hessian extremes of the training objective, and where the escape direction lives.

The objective is `interp.metrics.batch_loss` (mean cross-entropy over the output tokens) on a
fixed sample of n training examples drawn from the run's "hessian" random stream. Its
Hessian is never formed: ARPACK's Lanczos (`scipy.sparse.linalg.eigsh`, which="LA" for the
top k and which="SA" for the bottom k) runs on a `LinearOperator` whose matvec is a
Hessian-vector product (double backward through `interp.fastpath.objective` where the fast path
supports the model, chunked over the sample, chunk sums accumulated in float64; each chunk's
gradient graph is kept between products within `graph_memory_mb`). Each eigenpair is checked
by recomputing Hv: residual = ||Hv - lambda v||.

Quantities (eigenvalues in nats per squared parameter unit):
- lambda_max, lambda_min: the extreme eigenvalues; lambda_min < 0 means a saddle;
- anisotropy = lambda_max / |lambda_min|: how much flatter the escape direction is than the
  dominant curvature;
- grad_norm: ||g||, the gradient of the same objective (nats per parameter unit);
- cos_grad_vmin = |g . v_min| / ||g||: the absolute value, because the sign of an
  eigenvector is arbitrary;
- escape mass: the share of v_min's squared entries in each component (each head's slices of
  W_Q/W_K/W_V/W_O and b_Q/b_K/b_V, each MLP, the embeddings W_E and W_pos, the unembedding,
  and "other": LayerNorms and b_O); the masses of a step sum to 1.

`restrict` computes the Hessian block of a subset of parameters (one head's slices, a layer,
the MLPs, ...; the grammar of `interp.analysis.params`): the other parameters stay fixed at
the checkpoint. The eigensolver is `interp.analysis.lanczos`, the operator `interp.analysis.hvp`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.analysis.common import across_of, head_name, select_steps
from interp.analysis.findings import Rows
from interp.analysis.hvp import OPERATOR_DEFAULTS, HessianOperator, moved
from interp.analysis.lanczos import MAXITER, TOL, both_ends, extreme_eigenpairs
from interp.analysis.params import component_of, component_order, part_rank
from interp.analysis.registry import Analysis, N_EXAMPLES
from interp.errors import InterpError
from interp.runs import Run
from interp.seeding import torch_generator
from interp.task import Task

DEFAULTS: dict = {
    "n_examples": None,  # None: the whole training set (the extremes are not sample-robust below it)
    "k": 1,  # eigenpairs from each end of the spectrum
    "tol": TOL,  # ARPACK's relative tolerance on each Ritz pair
    "maxiter": MAXITER,  # ARPACK restarts before giving up (the row is then flagged)
    "method": "both",  # "both": one ARPACK run for both ends (which="BE"); "separate": "LA" then "SA"
    "restrict": None,  # None: every parameter; else components (interp.analysis.params)
    **OPERATOR_DEFAULTS,  # chunk_size, dtype, forward, product, graph_memory_mb (interp.analysis.hvp)
}
METHODS = ("both", "separate")
HESSIAN_COLUMNS = (
    "step", "which", "rank", "eigenvalue", "residual", "converged", "n_matvec",
    "lambda_max", "lambda_min", "anisotropy", "grad_norm", "cos_grad_vmin", "loss",
    "n_examples", "n_params", "restrict",
)
ESCAPE_COLUMNS = ("step", "component", "part", "layer", "head", "mass")


# ---------------------------------------------------------------------------- escape mass
def escape_masses(
    vector: Float[Tensor, " p"], shapes: dict[str, tuple[int, ...]], index: dict[str, Tensor | None]
) -> pd.DataFrame:
    """Share of `vector`'s squared norm per component and part (rows part == "all" sum to 1)."""
    sq = vector.double().pow(2)
    total = float(sq.sum())
    if not total > 0:
        raise InterpError("escape mass: the eigenvector is zero or not finite")
    rows = []
    offset = 0
    for name, idx in index.items():
        shape = shapes[name]
        numel = int(np.prod(shape))
        size = numel if idx is None else len(idx)
        full = torch.zeros(numel, dtype=torch.float64)
        chosen = torch.zeros(numel, dtype=torch.bool)
        if idx is None:
            full = sq[offset : offset + size].clone()
            chosen[:] = True
        else:
            full[idx] = sq[offset : offset + size]
            chosen[idx] = True
        offset += size
        component, part, layer, per_head = component_of(name)
        if per_head:  # only the heads the selection covers
            per = full.view(shape[0], -1).sum(-1) / total
            covered = chosen.view(shape[0], -1).any(-1)
            for h in torch.nonzero(covered).view(-1).tolist():
                rows.append((head_name(layer, h), part, layer, h, float(per[h])))
        else:
            rows.append((component, part, layer, None, float(full.sum()) / total))
    parts = pd.DataFrame(rows, columns=["component", "part", "layer", "head", "mass"])
    parts["layer"] = parts["layer"].astype("Int64")
    parts["head"] = parts["head"].astype("Int64")
    totals = parts.groupby("component", sort=False, dropna=False).agg(
        layer=("layer", "first"), head=("head", "first"), mass=("mass", "sum")).reset_index()
    totals.loc[totals["component"].isin(["other"]), "layer"] = pd.NA
    totals["part"] = "all"
    out = pd.concat([totals[["component", "part", "layer", "head", "mass"]], parts], ignore_index=True)
    out["layer"] = out["layer"].astype("Int64")
    out["head"] = out["head"].astype("Int64")
    order = {c: i for i, c in enumerate(component_order(out["component"]))}
    key = out["component"].map(order).to_numpy() * 1000 + out["part"].map(part_rank).to_numpy()
    return out.iloc[np.argsort(key, kind="stable")].reset_index(drop=True)


# ---------------------------------------------------------------------------- one model
def sample_indices(task: Task, n_examples: int | None, seed: int) -> Int[Tensor, " n"]:
    """The fixed sample: the first n of a permutation of the training set (`task.train_tokens`, every example unless
    pairs are held out) from the "hessian" stream (so a larger n contains the smaller sample)."""
    size = task.n_train
    if n_examples is None:
        n_examples = size
    if not isinstance(n_examples, int) or isinstance(n_examples, bool) or not 1 <= n_examples <= size:
        raise InterpError(
            f"n_examples must be an integer between 1 and the training set size {size} (or None for all), "
            f"got {n_examples!r}"
        )
    return torch.randperm(size, generator=torch_generator(seed, "hessian"))[:n_examples]


def start_vector(seed: int, dim: int) -> np.ndarray:
    """ARPACK's starting vector, drawn from the "hessian" stream (so eigsh is reproducible)."""
    return torch.randn(dim, generator=torch_generator(seed, "hessian"), dtype=torch.float64).numpy()


def spectrum(
    model: nn.Module,
    tokens: Int[Tensor, "n seq"],
    loss_pos: tuple[int, ...],
    *,
    k: int = DEFAULTS["k"],
    restrict: str | Sequence[str] | None = None,
    seed: int = 0,
    chunk_size: int = DEFAULTS["chunk_size"],
    tol: float = DEFAULTS["tol"],
    maxiter: int | None = DEFAULTS["maxiter"],
    dtype: str = DEFAULTS["dtype"],
    method: str = DEFAULTS["method"],
    forward: str = DEFAULTS["forward"],
    product: str = DEFAULTS["product"],
    graph_memory_mb: int | float = DEFAULTS["graph_memory_mb"],
) -> dict:
    """Top and bottom eigenpairs, gradient and escape masses of one model on `tokens` (no run needed)."""
    if method not in METHODS:
        raise InterpError(f"unknown method {method!r}; allowed: {', '.join(METHODS)}")
    op = HessianOperator(model, tokens, loss_pos, restrict, chunk_size, dtype, forward, product, graph_memory_mb)
    v0 = start_vector(seed, op.dim)
    if method == "both":
        top, bottom = both_ends(op.matvec, op.dim, k, v0=v0, tol=tol, maxiter=maxiter)
    else:
        top = extreme_eigenpairs(op.matvec, op.dim, k, "LA", v0=v0, tol=tol, maxiter=maxiter)
        bottom = extreme_eigenpairs(op.matvec, op.dim, k, "SA", v0=v0, tol=tol, maxiter=maxiter)
    op.release()
    g, loss = op.gradient()
    g_norm = float(g.norm())
    v_min = torch.from_numpy(bottom.vectors[:, 0].copy())
    if bottom.converged[0]:
        cos = abs(float(g @ v_min)) / g_norm if g_norm > 0 else float("nan")
        shapes = {n: tuple(p.shape) for n, p in op.base.items()}
        escape = escape_masses(v_min, shapes, op.sel.index)
    else:
        cos = float("nan")
        escape = pd.DataFrame(columns=["component", "part", "layer", "head", "mass"])
    lam_max, lam_min = float(top.values[0]), float(bottom.values[0])
    return {
        "top": top, "bottom": bottom, "grad": g, "grad_norm": g_norm, "loss": loss, "cos_grad_vmin": cos,
        "lambda_max": lam_max, "lambda_min": lam_min,
        "anisotropy": lam_max / abs(lam_min) if lam_min != 0 else float("inf"),
        "escape": escape, "n_params": op.dim, "restrict": op.sel.label, "n_matvec": op.n_matvec,
    }


# ---------------------------------------------------------------------------- run level
def check_params(params: dict) -> dict:
    unknown = set(params) - set(DEFAULTS) - {"device", "model"}
    if unknown:
        raise InterpError(f"unknown Hessian parameter(s) {sorted(unknown)}; known: {sorted(DEFAULTS)}, device")
    return {**DEFAULTS, **params}


def at_step(
    run: Run,
    step: int,
    *,
    model: nn.Module | None = None,
    n_examples: int | None = DEFAULTS["n_examples"],
    k: int = DEFAULTS["k"],
    restrict: str | Sequence[str] | None = DEFAULTS["restrict"],
    device: str = "cpu",
    **solver,
) -> dict[str, pd.DataFrame]:
    """Hessian extremes and escape masses of the checkpoint at `step`.

    Contract:
      run, step     a saved checkpoint; `model` (optional) is that checkpoint already loaded
                    (then `run.model(step)` is not called; it is not modified).
      n_examples    size of the fixed sample from the "hessian" stream (None: all D examples).
      k             eigenpairs from each end; restrict: None (all parameters) or components
                    ("L0H3", "L0", "L0.mlp", "mlp", "attn", "embed", "unembed", "ln", lists).
      solver        chunk_size, tol, maxiter, dtype, method, forward, product, graph_memory_mb: passed to
                    `spectrum` (DEFAULTS where not given; the last three change the time and memory, not the
                    numbers beyond float rounding).
    Returns {"hessian": ..., "hessian_escape": ...}:
      hessian: one row per eigenpair: step, which ("top"/"bottom"), rank (0 = most extreme),
        eigenvalue (nats / param^2), residual (||Hv - lambda v||, same unit), converged (bool),
        n_matvec (Hessian-vector products ARPACK used for this end; with method="both" the
        one shared run), and per step:
        lambda_max, lambda_min, anisotropy (lambda_max / |lambda_min|, ratio), grad_norm
        (nats / param), cos_grad_vmin (|cos|, 0..1), loss (nats, on the sample), n_examples,
        n_params (dimension of the Hessian), restrict (label).
      hessian_escape: step, component ("L0H3", "L0.mlp", "embed", "unembed", "other"), part
        ("W_Q", ... or "all" for the component total), layer, head (nullable Int64), mass
        (fraction of |v_min|^2; the "all" rows sum to 1).
    """
    step = run.resolve_step(step)
    task = run.task
    idx = sample_indices(task, n_examples, run.spec.seed)
    if model is None:
        model = run.model(step, device=device)
    elif next(model.parameters()).device != torch.device(device):
        model = moved(model, device)
    res = spectrum(model, task.train_tokens[idx], task.layout.loss_pos, k=k, restrict=restrict, seed=run.spec.seed, **solver)
    rows = []
    for ext, label in ((res["top"], "top"), (res["bottom"], "bottom")):
        for rank in range(k):
            rows.append({"which": label, "rank": rank, "eigenvalue": float(ext.values[rank]),
                         "residual": float(ext.residuals[rank]), "converged": bool(ext.converged[rank]),
                         "n_matvec": ext.n_matvec})
    table = pd.DataFrame(rows)
    table.insert(0, "step", step)
    for name in ("lambda_max", "lambda_min", "anisotropy", "grad_norm", "cos_grad_vmin", "loss"):
        table[name] = res[name]
    table["n_examples"] = len(idx)
    table["n_params"] = res["n_params"]
    table["restrict"] = res["restrict"]
    escape = res["escape"].copy()
    escape.insert(0, "step", step)
    return {"hessian": table[list(HESSIAN_COLUMNS)], "hessian_escape": escape[list(ESCAPE_COLUMNS)]}


across_tables = across_of("hessian")  # both tables
across = across_of("hessian", table="hessian")
ENTRY = Analysis(
    "hessian", __name__, "loss Hessian extremes by Lanczos, gradient alignment and where the escape direction lives",
    default=False, tables=("hessian", "hessian_escape"), stream="hessian", options=(N_EXAMPLES,),
    steps="transition",  # minutes a checkpoint: the plateau (tau/4..tau) and the transition window
    order=70,
)


def escape_mass(run: Run, step: int, **params) -> pd.DataFrame:
    """The "hessian_escape" table of one step.

    Contract: params as in `at_step`; returns step, component, part, layer, head, mass
    (fraction of the bottom eigenvector's squared norm; the part == "all" rows sum to 1).
    """
    return at_step(run, step, **check_params(params))["hessian_escape"]


def robustness(
    run: Run,
    steps: int | str | Iterable | None = "pre,mid,post",
    n_examples: Sequence[int | None] = (2048, None),
    **params,
) -> pd.DataFrame:
    """The same checkpoints at two sample sizes, side by side: is the sample large enough?

    Contract: steps as in `across`; n_examples = (n_small, n_large), None meaning the whole
    training set (the small sample is a prefix of the large one); params as in `at_step`. Returns one row per (step, quantity) for
    quantity in lambda_min, lambda_max, anisotropy, grad_norm, cos_grad_vmin: step, quantity,
    n_small, n_large, value_small, value_large, rel_change = |large - small| / |large|.
    """
    if len(n_examples) != 2:
        raise InterpError(f"n_examples must be two sample sizes (small, large), got {n_examples!r}")
    params = check_params(params)
    params.pop("n_examples", None)
    params.pop("model", None)
    rows = []
    for step, _ in select_steps(run, steps):
        model = run.model(step, device=params.get("device", "cpu"))
        small, large = (at_step(run, step, model=model, n_examples=n, **params)["hessian"].iloc[0]
                        for n in n_examples)
        for q in ("lambda_min", "lambda_max", "anisotropy", "grad_norm", "cos_grad_vmin"):
            a, b = float(small[q]), float(large[q])
            rows.append({"step": step, "quantity": q, "n_small": int(small["n_examples"]),
                         "n_large": int(large["n_examples"]), "value_small": a, "value_large": b,
                         "rel_change": abs(b - a) / abs(b) if b != 0 else float("nan")})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------- findings and summary rows
def rows(f: dict, tables: dict) -> Rows:
    """One row per step of the Hessian extremes that were computed."""
    hess = tables.get("hessian")
    if hess is None or not len(hess):
        return []
    rows = []
    for step, df in hess.groupby("step", sort=True):
        r = df.iloc[0]
        rows.append((f"hessian step {int(step)}",
                     f"lambda_min {r['lambda_min']:+.4g}  lambda_max {r['lambda_max']:.4g}  anisotropy "
                     f"{r['anisotropy']:.3g}  |cos(g, v_min)| {r['cos_grad_vmin']:.3f}  (n = {r['n_examples']}, "
                     f"max residual {df['residual'].max():.1e})"))
    return rows
