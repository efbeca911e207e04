"""Hessian-vector products of the training objective on a fixed token sample: the operator
ARPACK's Lanczos runs on (`interp.analysis.hessian`).

A product differentiates the mean output cross-entropy twice, chunk by chunk (sums in float64):
through `interp.fastpath.objective` (only what the loss reads) where the fast path supports the
model, else TransformerLens's own forward; by double backward with each chunk's gradient graph
kept between products within a memory budget (the fastest measured: benchmarks/README.md), or
forward-over-reverse; `hvps` gives several at once by `vmap`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.analysis.params import selection
from interp.devices import deterministic_kernels
from interp.errors import InterpError
from interp.fastpath.objective import fast_objective, training_loss
from interp.fastpath.support import problems
from interp.metrics import batch_loss

OPERATOR_DEFAULTS: dict = {
    "chunk_size": 256,  # examples per double-backward pass (bounds memory)
    "dtype": "float32",  # precision of the model during the HVP; sums are always float64
    "forward": "auto",  # "auto": the fast objective where supported, else "hooked" (TransformerLens's forward)
    "product": "reverse",  # "reverse": double backward; "forward-over-reverse": torch.func.jvp over grad
    "graph_memory_mb": 4096,  # keep each chunk's gradient graph between products up to this much (0: none)
}
DTYPES = {"float32": torch.float32, "float64": torch.float64}
FORWARDS = ("auto", "fast", "hooked")
PRODUCTS = ("reverse", "forward-over-reverse")


# ---------------------------------------------------------------------------- the operator
def deterministic(device="cpu"):
    """Deterministic kernels where the work runs on the CPU (its embedding backward otherwise sums in a
    thread-dependent order); on a GPU left as they are (`interp.devices.deterministic_kernels`)."""
    return deterministic_kernels(device)


def _as_dtype(model: nn.Module, dtype: torch.dtype) -> nn.Module:
    """`model` itself if it already has `dtype`, else a converted copy (the caller's model is untouched)."""
    from interp.model import copy_model

    if next(model.parameters()).dtype == dtype:
        return model
    other = copy_model(model)
    try:
        return other.to(dtype, print_details=False)
    except TypeError:  # not a HookedTransformer
        return other.to(dtype)


def moved(model: nn.Module, device: str) -> nn.Module:
    """A copy of `model` on `device` (the caller's model stays where it is)."""
    from interp.model import copy_model

    other = copy_model(model)
    try:
        return other.to(device, print_details=False)
    except TypeError:  # not a HookedTransformer
        return other.to(device)


class HessianOperator:
    """Hessian-vector products of the mean output cross-entropy on a fixed token sample.

    Vectors live in the selected subspace (see `selection`), as float64 on the CPU. Products
    run over chunks of `chunk_size` examples; each chunk's product is weighted by its share of
    the sample and summed in float64.

    - forward: "fast" differentiates `interp.fastpath.objective.training_loss` (the same
      function, computing only what the loss reads; about half the time a product), "hooked"
      TransformerLens's own forward; "auto" takes "fast" wherever the fast path supports the model.
    - product: "reverse" (double backward, the fastest here: benchmarks/hvp.py) or
      "forward-over-reverse" (`torch.func.jvp` over `torch.func.grad`).
    - graph_memory_mb: with "reverse", each chunk's gradient graph is kept between products
      while the graphs' saved tensors fit in this many MiB (measured on the first chunk), so a
      product is one backward pass through it instead of a forward and two backward passes.
      Kept and rebuilt graphs give bit-identical products; 0 keeps none.
    `hvps` gives several products at once (`torch.func.vmap` over forward-over-reverse).
    """

    def __init__(
        self,
        model: nn.Module,
        tokens: Int[Tensor, "n seq"],
        loss_pos: tuple[int, ...],
        restrict: str | Sequence[str] | None = None,
        chunk_size: int = OPERATOR_DEFAULTS["chunk_size"],
        dtype: str = OPERATOR_DEFAULTS["dtype"],
        forward: str = OPERATOR_DEFAULTS["forward"],
        product: str = OPERATOR_DEFAULTS["product"],
        graph_memory_mb: int | float = OPERATOR_DEFAULTS["graph_memory_mb"],
    ):
        if dtype not in DTYPES:
            raise InterpError(f"unknown dtype {dtype!r}; allowed: {', '.join(DTYPES)}")
        if not isinstance(chunk_size, int) or chunk_size < 1:
            raise InterpError(f"chunk_size must be a positive integer, got {chunk_size!r}")
        if forward not in FORWARDS:
            raise InterpError(f"unknown forward {forward!r}; allowed: {', '.join(FORWARDS)}")
        if product not in PRODUCTS:
            raise InterpError(f"unknown product {product!r}; allowed: {', '.join(PRODUCTS)}")
        if isinstance(graph_memory_mb, bool) or not isinstance(graph_memory_mb, (int, float)) or not graph_memory_mb >= 0:
            raise InterpError(f"graph_memory_mb must be a number >= 0 (MiB; 0 keeps no graph), got {graph_memory_mb!r}")
        if len(tokens) < 1:
            raise InterpError("the Hessian needs at least one example")
        self.model = _as_dtype(model, DTYPES[dtype]).eval()
        if forward == "auto":
            forward = "fast" if fast_objective(self.model) else "hooked"
        elif forward == "fast" and not fast_objective(self.model):
            raise InterpError("forward='fast' needs a model of the interp family with no hook attached "
                              f"({', '.join(problems(self.model)) or 'a hook is attached'}); use 'auto' or 'hooked'")
        self.forward, self.product = forward, product
        self.device = next(self.model.parameters()).device
        self.tokens = tokens.to(self.device)
        self.loss_pos = loss_pos
        self.chunk_size = chunk_size
        self.sel = selection(self.model, restrict)
        from interp.model import tl_params  # lazy: a cached report never imports the model

        # checkpoint names and shapes on either TransformerLens: vectors and products live in one layout
        self.base = {n: p.detach() for n, p in tl_params(self.model).items()}
        self.names = list(self.sel.index)
        self.sizes = [self.base[n].numel() if i is None else len(i) for n, i in self.sel.index.items()]
        self.dim = sum(self.sizes)
        self.n_matvec = 0
        self.graph_budget = float(graph_memory_mb) * 2**20 if product == "reverse" else 0.0
        self.graph_bytes = 0  # saved-tensor bytes of the graphs kept so far
        self._graphs: dict[int, tuple[list[Tensor], list[Tensor]]] = {}
        self._full = False  # a graph did not fit: stop measuring

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

    def _chunks(self) -> Iterable[tuple[int, Tensor, float]]:
        n = len(self.tokens)
        for i, start in enumerate(range(0, n, self.chunk_size)):
            chunk = self.tokens[start : start + self.chunk_size]
            yield i, chunk, len(chunk) / n

    def _loss(self, leaves: dict[str, Tensor], tokens: Tensor) -> Tensor:
        from interp.model import call_with

        params = {**self.base, **leaves}
        return call_with(self.model, params, training_loss if self.forward == "fast" else batch_loss, tokens,
                         self.loss_pos)

    def _leaves(self) -> dict[str, Tensor]:
        return {n: self.base[n].clone().requires_grad_(True) for n in self.names}

    # -- products
    def _graph(self, i: int, chunk: Tensor) -> tuple[list[Tensor], list[Tensor], bool]:
        """(leaves, gradient, kept) of chunk i: the gradient with its graph (create_graph), kept
        for the next products while the budget allows."""
        if i in self._graphs:
            return (*self._graphs[i], True)
        leaves = list(self._leaves().values())
        room = self.graph_budget - self.graph_bytes
        measure = room > 0 and not self._full
        saved = [0]

        def pack(t: Tensor) -> Tensor:
            saved[0] += t.numel() * t.element_size()
            return t

        if measure:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                grads = self._first_grads(leaves, chunk)
        else:
            grads = self._first_grads(leaves, chunk)
        keep = measure and saved[0] <= room
        self._full = self._full or (measure and not keep)
        if keep:
            self._graphs[i] = (leaves, grads)
            self.graph_bytes += saved[0]
        return leaves, grads, keep

    def _first_grads(self, leaves: list[Tensor], chunk: Tensor) -> list[Tensor]:
        loss = self._loss(dict(zip(self.names, leaves)), chunk)
        grads = torch.autograd.grad(loss, leaves, create_graph=True, allow_unused=True)
        return [torch.zeros_like(x) if g is None else g for g, x in zip(grads, leaves)]

    def _reverse(self, i: int, chunk: Tensor, tangents: list[Tensor]) -> list[Tensor]:
        leaves, grads, kept = self._graph(i, chunk)
        live = [(g, t) for g, t in zip(grads, tangents) if g.requires_grad]
        if not live:
            return [torch.zeros_like(x) for x in leaves]
        hv = torch.autograd.grad([g for g, _ in live], leaves, grad_outputs=[t for _, t in live],
                                 retain_graph=kept, allow_unused=True)
        return [torch.zeros_like(x) if h is None else h for h, x in zip(hv, leaves)]

    def _grad_fn(self, chunk: Tensor):
        """The chunk's gradient as a function of the selected tensors (for torch.func)."""
        return torch.func.grad(lambda leaves: self._loss(leaves, chunk))

    def _forward_over_reverse(self, chunk: Tensor, tangents: list[Tensor]) -> list[Tensor]:
        primals = {n: self.base[n] for n in self.names}
        _, hv = torch.func.jvp(self._grad_fn(chunk), (primals,), (dict(zip(self.names, tangents)),))
        return [hv[n] for n in self.names]

    def hvp(self, v: Float[Tensor, " p"]) -> Float[Tensor, " p"]:
        """H v for a vector of the selected subspace (float64 in, float64 out)."""
        if v.shape != (self.dim,):
            raise InterpError(f"HVP: expected a vector of {self.dim} entries, got shape {tuple(v.shape)}")
        tangents = self._split(v)
        total = torch.zeros(self.dim, dtype=torch.float64)
        with deterministic(self.device):
            for i, chunk, weight in self._chunks():
                if self.product == "reverse":
                    hv = self._reverse(i, chunk, tangents)
                else:
                    hv = self._forward_over_reverse(chunk, tangents)
                total += weight * self._join(hv)
        self.n_matvec += 1
        return total

    def hvps(self, vectors: Float[Tensor, "m p"]) -> Float[Tensor, "m p"]:
        """H V for m vectors at once: `torch.func.vmap` over forward-over-reverse products."""
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise InterpError(f"HVPs: expected vectors of shape [m, {self.dim}], got {tuple(vectors.shape)}")
        split = [self._split(v) for v in vectors]
        tangents = {n: torch.stack([s[j] for s in split]) for j, n in enumerate(self.names)}
        primals = {n: self.base[n] for n in self.names}
        total = torch.zeros(vectors.shape, dtype=torch.float64)
        with deterministic(self.device):
            for _, chunk, weight in self._chunks():
                grad_fn = self._grad_fn(chunk)
                hv = torch.func.vmap(lambda t: torch.func.jvp(grad_fn, (primals,), (t,))[1])(tangents)
                for row in range(len(vectors)):
                    total[row] += weight * self._join([hv[n][row] for n in self.names])
        self.n_matvec += len(vectors)
        return total

    def release(self) -> None:
        """Drop the kept graphs (their memory)."""
        self._graphs.clear()
        self.graph_bytes = 0
        self._full = False

    def gradient(self) -> tuple[Float[Tensor, " p"], float]:
        """Gradient of the objective in the selected subspace, and the objective itself (nats)."""
        total = torch.zeros(self.dim, dtype=torch.float64)
        loss = 0.0
        with deterministic(self.device):
            for _, chunk, weight in self._chunks():
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
