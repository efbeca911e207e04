"""Hessian extremes of the training objective, and where the escape direction lives.

The objective is `interp.metrics.batch_loss` (mean cross-entropy over the output tokens) on a
fixed sample of n training examples drawn from the run's "hessian" random stream. Its
Hessian is never formed: ARPACK's Lanczos (`scipy.sparse.linalg.eigsh`, which="LA" for the
top k and which="SA" for the bottom k) runs on a `LinearOperator` whose matvec is a
Hessian-vector product (double backward, chunked over the sample, chunk sums accumulated in
float64). Each eigenpair is checked by recomputing Hv: residual = ||Hv - lambda v||.

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
the MLPs, ...): the other parameters stay fixed at the checkpoint.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor, nn
from torch.func import functional_call

from interp.analysis.common import head_name, select_steps, steps_progress
from interp.errors import InterpError
from interp.metrics import batch_loss
from interp.runs import Run
from interp.seeding import torch_generator
from interp.task import Task

DEFAULTS: dict = {
    "n_examples": None,  # None: the whole training set (the extremes are not sample-robust below it)
    "k": 1,  # eigenpairs from each end of the spectrum
    "chunk_size": 256,  # examples per double-backward pass (bounds memory)
    "tol": 1e-4,  # ARPACK's relative tolerance on each Ritz pair
    "maxiter": 300,  # ARPACK restarts before giving up (the row is then flagged)
    "dtype": "float32",  # precision of the model during the HVP; sums are always float64
    "method": "both",  # "both": one ARPACK run for both ends (which="BE"); "separate": "LA" then "SA"
}
METHODS = ("both", "separate")
DTYPES = {"float32": torch.float32, "float64": torch.float64}
HEAD_PARTS = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V")
MLP_PARTS = ("W_in", "b_in", "W_out", "b_out")
EMBED_PARTS = {"embed.W_E": "W_E", "pos_embed.W_pos": "W_pos"}
UNEMBED_PARTS = {"unembed.W_U": "W_U", "unembed.b_U": "b_U"}
HESSIAN_COLUMNS = (
    "step", "which", "rank", "eigenvalue", "residual", "converged", "n_matvec",
    "lambda_max", "lambda_min", "anisotropy", "grad_norm", "cos_grad_vmin", "loss",
    "n_examples", "n_params", "restrict",
)
ESCAPE_COLUMNS = ("step", "component", "part", "layer", "head", "mass")


# ---------------------------------------------------------------------------- parameter subsets
@dataclass(frozen=True)
class Selection:
    """Which parameter entries a Hessian covers: name -> flat indices (None: the whole tensor)."""

    label: str
    index: dict[str, Tensor | None]

    def size(self, params: dict[str, Tensor]) -> int:
        return sum(params[n].numel() if i is None else len(i) for n, i in self.index.items())


def _head_index(shape: torch.Size, head: int) -> Int[Tensor, " m"]:
    """Flat indices of slice [head] of a tensor whose first axis is the head axis."""
    per = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    return torch.arange(head * per, (head + 1) * per)


def _component_index(model: nn.Module, token: str) -> dict[str, Tensor | None]:
    names = [n for n, _ in model.named_parameters()]
    shapes = {n: p.shape for n, p in model.named_parameters()}
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    low = token.strip().lower()
    if low == "all":
        return {n: None for n in names}
    if low == "embed":
        return {n: None for n in names if n in EMBED_PARTS}
    if low == "unembed":
        return {n: None for n in names if n in UNEMBED_PARTS}
    if low == "mlp":
        return {n: None for n in names if ".mlp." in n}
    if low == "attn":
        return {n: None for n in names if ".attn." in n}
    if low == "ln":
        return {n: None for n in names if re.search(r"(^|\.)ln\w*\.", n)}
    m = re.fullmatch(r"l(\d+)(?:\.(attn|mlp))?", low)
    if m:
        layer = int(m[1])
        if layer >= n_layers:
            raise InterpError(f"restrict {token!r}: layer {layer} does not exist (layers 0..{n_layers - 1})")
        prefix = f"blocks.{layer}." + (f"{m[2]}." if m[2] else "")
        return {n: None for n in names if n.startswith(prefix)}
    m = re.fullmatch(r"l(\d+)h(\d+)", low)
    if m:
        layer, head = int(m[1]), int(m[2])
        if layer >= n_layers or head >= n_heads:
            raise InterpError(
                f"restrict {token!r}: no such head; heads are L0H0..L{n_layers - 1}H{n_heads - 1}"
            )
        prefix = f"blocks.{layer}.attn."
        return {prefix + part: _head_index(shapes[prefix + part], head)
                for part in HEAD_PARTS if prefix + part in shapes}
    raise InterpError(
        f"unknown restrict component {token!r}; allowed: None or 'all', a head 'L0H3', a layer 'L0', "
        f"'L0.attn', 'L0.mlp', 'attn', 'mlp', 'embed', 'unembed', 'ln', or a list of these"
    )


def _canonical(token: str) -> str:
    low = token.strip().lower()
    m = re.fullmatch(r"l(\d+)h(\d+)", low)
    if m:
        return head_name(int(m[1]), int(m[2]))
    m = re.fullmatch(r"l(\d+)(\.(attn|mlp))?", low)
    if m:
        return f"L{m[1]}" + (m[2] or "")
    return low


def selection(model: nn.Module, restrict: str | Sequence[str] | None = None) -> Selection:
    """Resolve `restrict` (None = all parameters; a component name or a list of them) on `model`."""
    if restrict is None:
        tokens = ["all"]
    elif isinstance(restrict, str):
        tokens = [t for t in restrict.split("+") if t.strip()] or ["all"]
    else:
        tokens = list(restrict)
        if not tokens or not all(isinstance(t, str) for t in tokens):
            raise InterpError(f"restrict must be None, a component name or a list of names, got {restrict!r}")
    order = [n for n, _ in model.named_parameters()]
    numel = {n: p.numel() for n, p in model.named_parameters()}
    merged: dict[str, Tensor | None] = {}
    for token in tokens:
        for name, idx in _component_index(model, token).items():
            if name in merged and (merged[name] is None or idx is None):
                merged[name] = None
            elif name in merged:
                merged[name] = torch.unique(torch.cat([merged[name], idx]))
            else:
                merged[name] = idx
    if not merged:
        raise InterpError(f"restrict {restrict!r} selects no parameters of this model")
    for name, idx in list(merged.items()):
        if idx is not None and len(idx) == numel[name]:
            merged[name] = None
    label = "all" if tokens == ["all"] or (
        len(merged) == len(order) and all(v is None for v in merged.values())) else "+".join(
        _canonical(t) for t in tokens)
    return Selection(label, {n: merged[n] for n in order if n in merged})


def flat_index(model: nn.Module, restrict: str | Sequence[str] | None = None) -> Int[Tensor, " p"]:
    """Positions of the selected entries in the concatenation of all parameters (model order)."""
    sel = selection(model, restrict)
    out, offset = [], 0
    for name, p in model.named_parameters():
        if name in sel.index:
            idx = sel.index[name]
            out.append(offset + (torch.arange(p.numel()) if idx is None else idx))
        offset += p.numel()
    return torch.cat(out)


# ---------------------------------------------------------------------------- the operator
@contextmanager
def _deterministic():
    """Deterministic kernels (the CPU's embedding backward otherwise sums in a thread-dependent order)."""
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was)


def _as_dtype(model: nn.Module, dtype: torch.dtype) -> nn.Module:
    """`model` itself if it already has `dtype`, else a converted copy (the caller's model is untouched)."""
    if next(model.parameters()).dtype == dtype:
        return model
    other = copy.deepcopy(model)
    try:
        return other.to(dtype, print_details=False)
    except TypeError:  # not a HookedTransformer
        return other.to(dtype)


def _moved(model: nn.Module, device: str) -> nn.Module:
    """A copy of `model` on `device` (the caller's model stays where it is)."""
    other = copy.deepcopy(model)
    try:
        return other.to(device, print_details=False)
    except TypeError:  # not a HookedTransformer
        return other.to(device)


class HessianOperator:
    """Hessian-vector products of the mean output cross-entropy on a fixed token sample.

    Vectors live in the selected subspace (see `selection`), as float64 on the CPU. Products
    are double backward passes over chunks of `chunk_size` examples; each chunk's product is
    weighted by its share of the sample and summed in float64.
    """

    def __init__(
        self,
        model: nn.Module,
        tokens: Int[Tensor, "n seq"],
        loss_pos: tuple[int, ...],
        restrict: str | Sequence[str] | None = None,
        chunk_size: int = DEFAULTS["chunk_size"],
        dtype: str = DEFAULTS["dtype"],
    ):
        if dtype not in DTYPES:
            raise InterpError(f"unknown dtype {dtype!r}; allowed: {', '.join(DTYPES)}")
        if not isinstance(chunk_size, int) or chunk_size < 1:
            raise InterpError(f"chunk_size must be a positive integer, got {chunk_size!r}")
        if len(tokens) < 1:
            raise InterpError("the Hessian needs at least one example")
        self.model = _as_dtype(model, DTYPES[dtype]).eval()
        self.device = next(self.model.parameters()).device
        self.tokens = tokens.to(self.device)
        self.loss_pos = loss_pos
        self.chunk_size = chunk_size
        self.sel = selection(self.model, restrict)
        self.base = {n: p.detach() for n, p in self.model.named_parameters()}
        self.names = list(self.sel.index)
        self.sizes = [self.base[n].numel() if i is None else len(i) for n, i in self.sel.index.items()]
        self.dim = sum(self.sizes)
        self.n_matvec = 0

    # -- vectors <-> parameter tensors
    def _split(self, v: Float[Tensor, " p"]) -> list[Tensor]:
        """A subspace vector as full-shape tangents of the selected tensors (zeros elsewhere)."""
        out = []
        for (name, idx), part in zip(self.sel.index.items(), v.split(self.sizes)):
            p = self.base[name]
            part = part.to(self.device, p.dtype)
            if idx is None:
                out.append(part.view(p.shape))
            else:
                full = torch.zeros(p.numel(), dtype=p.dtype, device=self.device)
                full[idx.to(self.device)] = part
                out.append(full.view(p.shape))
        return out

    def _join(self, tensors: Sequence[Tensor]) -> Float[Tensor, " p"]:
        parts = []
        for (name, idx), t in zip(self.sel.index.items(), tensors):
            flat = t.reshape(-1)
            parts.append(flat if idx is None else flat[idx.to(flat.device)])
        return torch.cat(parts).to("cpu", torch.float64)

    def _chunks(self) -> Iterable[tuple[Tensor, float]]:
        n = len(self.tokens)
        for start in range(0, n, self.chunk_size):
            chunk = self.tokens[start : start + self.chunk_size]
            yield chunk, len(chunk) / n

    def _loss(self, leaves: dict[str, Tensor], tokens: Tensor) -> Tensor:
        params = {**self.base, **leaves}
        return batch_loss(lambda x: functional_call(self.model, params, (x,)), tokens, self.loss_pos)

    def _leaves(self) -> dict[str, Tensor]:
        return {n: self.base[n].clone().requires_grad_(True) for n in self.names}

    # -- products
    def hvp(self, v: Float[Tensor, " p"]) -> Float[Tensor, " p"]:
        """H v for a vector of the selected subspace (float64 in, float64 out)."""
        if v.shape != (self.dim,):
            raise InterpError(f"HVP: expected a vector of {self.dim} entries, got shape {tuple(v.shape)}")
        tangents = self._split(v)
        total = torch.zeros(self.dim, dtype=torch.float64)
        with _deterministic():
            for chunk, weight in self._chunks():
                leaves = self._leaves()
                inputs = list(leaves.values())
                grads = torch.autograd.grad(self._loss(leaves, chunk), inputs, create_graph=True,
                                            allow_unused=True)
                dot = sum((g * t).sum() for g, t in zip(grads, tangents) if g is not None)
                hv = torch.autograd.grad(dot, inputs, allow_unused=True)
                hv = [torch.zeros_like(x) if h is None else h for h, x in zip(hv, inputs)]
                total += weight * self._join(hv)
        self.n_matvec += 1
        return total

    def gradient(self) -> tuple[Float[Tensor, " p"], float]:
        """Gradient of the objective in the selected subspace, and the objective itself (nats)."""
        total = torch.zeros(self.dim, dtype=torch.float64)
        loss = 0.0
        with _deterministic():
            for chunk, weight in self._chunks():
                leaves = self._leaves()
                value = self._loss(leaves, chunk)
                grads = torch.autograd.grad(value, list(leaves.values()), allow_unused=True)
                grads = [torch.zeros_like(x) if g is None else g for g, x in zip(grads, leaves.values())]
                total += weight * self._join(grads)
                loss += weight * float(value.detach())
        return total, loss

    def matvec(self, x: np.ndarray) -> np.ndarray:
        """The numpy matvec ARPACK calls."""
        v = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64).reshape(-1))
        return self.hvp(v).numpy()


# ---------------------------------------------------------------------------- Lanczos
@dataclass
class Extremes:
    """k eigenpairs from one end, most extreme first; NaN where ARPACK did not converge."""

    which: str
    values: np.ndarray  # [k]
    vectors: np.ndarray  # [dim, k]
    residuals: np.ndarray  # [k]
    converged: np.ndarray  # [k] bool
    n_matvec: int


def _arpack():
    try:
        from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, LinearOperator, eigsh
    except ImportError:
        raise InterpError("the Hessian extremes need scipy: pip install -e '.[landscape]'") from None
    return ArpackError, ArpackNoConvergence, LinearOperator, eigsh


def _eigsh(matvec, dim: int, n_eig: int, which: str, v0, tol, maxiter, ncv) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """(values, vectors, matvecs used, all converged) of one ARPACK run."""
    ArpackError, ArpackNoConvergence, LinearOperator, eigsh = _arpack()
    calls = [0]

    def counted(x):
        calls[0] += 1
        return matvec(x)

    op = LinearOperator((dim, dim), matvec=counted, dtype=np.float64)
    try:
        w, v = eigsh(op, k=n_eig, which=which, v0=v0, tol=tol, maxiter=maxiter, ncv=ncv)
        ok = True
    except ArpackNoConvergence as exc:
        w, v = np.asarray(exc.eigenvalues, dtype=np.float64), np.asarray(exc.eigenvectors, dtype=np.float64)
        ok = False
    except ArpackError as exc:
        raise InterpError(f"ARPACK failed ({which}, {n_eig} eigenpairs): {exc}") from None
    return np.asarray(w, dtype=np.float64), np.asarray(v, dtype=np.float64).reshape(dim, -1), calls[0], ok


def _extremes(matvec, which: str, k: int, w: np.ndarray, v: np.ndarray, n_matvec: int) -> Extremes:
    """Most extreme first, padded with NaN rows, residuals recomputed by one matvec each."""
    dim = v.shape[0]
    order = np.argsort(w)[::-1] if which == "LA" else np.argsort(w)
    m = min(len(order), k)
    values, vectors, residuals = np.full(k, np.nan), np.full((dim, k), np.nan), np.full(k, np.nan)
    values[:m] = w[order[:m]]
    vectors[:, :m] = v[:, order[:m]]
    for i in range(m):
        residuals[i] = float(np.linalg.norm(matvec(vectors[:, i]) - values[i] * vectors[:, i]))
    return Extremes(which, values, vectors, residuals, np.arange(k) < m, n_matvec)


def _check_k(k, dim: int, per_run: int) -> None:
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k or per_run * k >= dim:
        raise InterpError(
            f"k must be an integer >= 1 with {per_run} * k below the operator's dimension {dim}, got {k!r}")


def extreme_eigenpairs(
    matvec: Callable[[np.ndarray], np.ndarray],
    dim: int,
    k: int,
    which: str,
    v0: np.ndarray | None = None,
    tol: float = DEFAULTS["tol"],
    maxiter: int | None = DEFAULTS["maxiter"],
    ncv: int | None = None,
) -> Extremes:
    """Top ("LA") or bottom ("SA") k eigenpairs of the symmetric operator `matvec` by ARPACK.

    Works on any matvec (an HVP, an explicit matrix). Residuals ||Av - lambda v|| are
    recomputed with one extra matvec per pair; pairs ARPACK did not converge on come back as
    NaN with converged=False instead of raising.
    """
    if which not in ("LA", "SA"):
        raise InterpError(f"which must be 'LA' (top) or 'SA' (bottom), got {which!r}")
    _check_k(k, dim, 1)
    w, v, n_matvec, _ = _eigsh(matvec, dim, k, which, v0, tol, maxiter, ncv)
    return _extremes(matvec, which, k, w, v, n_matvec)


def both_ends(
    matvec: Callable[[np.ndarray], np.ndarray],
    dim: int,
    k: int,
    v0: np.ndarray | None = None,
    tol: float = DEFAULTS["tol"],
    maxiter: int | None = DEFAULTS["maxiter"],
    ncv: int | None = None,
) -> tuple[Extremes, Extremes]:
    """Top k and bottom k from one ARPACK run (which="BE": 2k eigenpairs, k from each end).

    One Krylov space serves both ends, so this costs about half of an "LA" run plus an "SA"
    run. If ARPACK does not converge on all 2k, the ends are computed separately instead.
    """
    _check_k(k, dim, 2)
    w, v, n_matvec, ok = _eigsh(matvec, dim, 2 * k, "BE", v0, tol, maxiter, ncv)
    if not ok:
        top = extreme_eigenpairs(matvec, dim, k, "LA", v0, tol, maxiter, ncv)
        bottom = extreme_eigenpairs(matvec, dim, k, "SA", v0, tol, maxiter, ncv)
        top.n_matvec += n_matvec
        bottom.n_matvec += n_matvec
        return top, bottom
    order = np.argsort(w)
    low, high = order[:k], order[k:]
    return (_extremes(matvec, "LA", k, w[high], v[:, high], n_matvec),
            _extremes(matvec, "SA", k, w[low], v[:, low], n_matvec))


# ---------------------------------------------------------------------------- escape mass
def _component_of(name: str) -> tuple[str, str, int | None, bool]:
    """(component, part, layer, per_head) of a parameter name."""
    if name in EMBED_PARTS:
        return "embed", EMBED_PARTS[name], None, False
    if name in UNEMBED_PARTS:
        return "unembed", UNEMBED_PARTS[name], None, False
    m = re.fullmatch(r"blocks\.(\d+)\.(attn|mlp)\.(\w+)", name)
    if m:
        layer, kind, leaf = int(m[1]), m[2], m[3]
        if kind == "attn" and leaf in HEAD_PARTS:
            return "head", leaf, layer, True
        if kind == "mlp":
            return f"L{layer}.mlp", leaf, layer, False
    m = re.match(r"blocks\.(\d+)\.", name)
    return "other", name, (int(m[1]) if m else None), False


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
        component, part, layer, per_head = _component_of(name)
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
    known = {p: i + 1 for i, p in enumerate(HEAD_PARTS + MLP_PARTS + tuple(EMBED_PARTS.values())
                                           + tuple(UNEMBED_PARTS.values()))}
    part_rank = out["part"].map(lambda p: 0 if p == "all" else known.get(p, len(known) + 1))
    key = out["component"].map(order).to_numpy() * 1000 + part_rank.to_numpy()
    return out.iloc[np.argsort(key, kind="stable")].reset_index(drop=True)


def component_order(components: Iterable[str]) -> list[str]:
    """embed, then per layer its heads (L0H0 first) and its MLP, then unembed and other."""
    def key(c: str) -> tuple:
        if c == "embed":
            return (0, 0, 0)
        m = re.fullmatch(r"L(\d+)H(\d+)", c)
        if m:
            return (1, int(m[1]), int(m[2]))
        m = re.fullmatch(r"L(\d+)\.mlp", c)
        if m:
            return (1, int(m[1]), 10**9)
        return (2, 0 if c == "unembed" else 1, 0)
    return sorted(dict.fromkeys(components), key=key)


# ---------------------------------------------------------------------------- one model
def sample_indices(task: Task, n_examples: int | None, seed: int) -> Int[Tensor, " n"]:
    """The fixed sample: the first n of a permutation of the training set from the "hessian" stream
    (so a larger n contains the smaller sample)."""
    if n_examples is None:
        n_examples = task.size
    if not isinstance(n_examples, int) or isinstance(n_examples, bool) or not 1 <= n_examples <= task.size:
        raise InterpError(
            f"n_examples must be an integer between 1 and the training set size {task.size} (or None for all), "
            f"got {n_examples!r}"
        )
    return torch.randperm(task.size, generator=torch_generator(seed, "hessian"))[:n_examples]


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
) -> dict:
    """Top and bottom eigenpairs, gradient and escape masses of one model on `tokens` (no run needed)."""
    if method not in METHODS:
        raise InterpError(f"unknown method {method!r}; allowed: {', '.join(METHODS)}")
    op = HessianOperator(model, tokens, loss_pos, restrict, chunk_size, dtype)
    v0 = start_vector(seed, op.dim)
    if method == "both":
        top, bottom = both_ends(op.matvec, op.dim, k, v0=v0, tol=tol, maxiter=maxiter)
    else:
        top = extreme_eigenpairs(op.matvec, op.dim, k, "LA", v0=v0, tol=tol, maxiter=maxiter)
        bottom = extreme_eigenpairs(op.matvec, op.dim, k, "SA", v0=v0, tol=tol, maxiter=maxiter)
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
def _check_params(params: dict) -> dict:
    unknown = set(params) - set(DEFAULTS) - {"restrict", "device", "model"}
    if unknown:
        raise InterpError(f"unknown Hessian parameter(s) {sorted(unknown)}; known: {sorted(DEFAULTS)}, restrict, device")
    return {**DEFAULTS, **params}


def at_step(
    run: Run,
    step: int,
    *,
    model: nn.Module | None = None,
    n_examples: int | None = DEFAULTS["n_examples"],
    k: int = DEFAULTS["k"],
    restrict: str | Sequence[str] | None = None,
    device: str = "cpu",
    chunk_size: int = DEFAULTS["chunk_size"],
    tol: float = DEFAULTS["tol"],
    maxiter: int | None = DEFAULTS["maxiter"],
    dtype: str = DEFAULTS["dtype"],
    method: str = DEFAULTS["method"],
) -> dict[str, pd.DataFrame]:
    """Hessian extremes and escape masses of the checkpoint at `step`.

    Contract:
      run, step     a saved checkpoint; `model` (optional) is that checkpoint already loaded
                    (then `run.model(step)` is not called; it is not modified).
      n_examples    size of the fixed sample from the "hessian" stream (None: all D examples).
      k             eigenpairs from each end; restrict: None (all parameters) or components
                    ("L0H3", "L0", "L0.mlp", "mlp", "attn", "embed", "unembed", "ln", lists).
      chunk_size, tol, maxiter, dtype, method: see DEFAULTS.
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
        model = _moved(model, device)
    res = spectrum(model, task.tokens[idx], task.layout.loss_pos, k=k, restrict=restrict, seed=run.spec.seed,
                   chunk_size=chunk_size, tol=tol, maxiter=maxiter, dtype=dtype, method=method)
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


def across_tables(
    run: Run, steps: int | str | Iterable | None = None, progress: bool = False, **params
) -> dict[str, pd.DataFrame]:
    """Both tables of `at_step`, concatenated over `steps` (see `interp.analysis.common.select_steps`)."""
    params = _check_params(params)
    params.pop("model", None)
    chosen = select_steps(run, steps)
    parts = [at_step(run, s, **params) for s, _ in steps_progress(chosen, "hessian", progress)]
    return {name: pd.concat([p[name] for p in parts], ignore_index=True) for name in ("hessian", "hessian_escape")}


def across(run: Run, steps: int | str | Iterable | None = None, progress: bool = False, **params) -> pd.DataFrame:
    """The "hessian" table of `at_step` over `steps` (None: every saved step; ints; "pre,mid,post").

    Contract: params are those of `at_step` (n_examples, k, restrict, device, chunk_size, tol,
    maxiter, dtype); returns one row per (step, which, rank) with the columns of `at_step`.
    """
    return across_tables(run, steps, progress, **params)["hessian"]


def escape_mass(run: Run, step: int, **params) -> pd.DataFrame:
    """The "hessian_escape" table of one step.

    Contract: params as in `at_step`; returns step, component, part, layer, head, mass
    (fraction of the bottom eigenvector's squared norm; the part == "all" rows sum to 1).
    """
    return at_step(run, step, **_check_params(params))["hessian_escape"]


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
    params = _check_params(params)
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
