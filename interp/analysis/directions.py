"""The Hessian's extreme eigenvectors at a checkpoint, as unit parameter directions, cached in the run.

v_max and v_min are the top and bottom eigenvectors of the Hessian of the training objective
(`interp.analysis.hessian.spectrum`: one ARPACK run for both ends, k = 1, on the fixed sample of
`interp.analysis.hessian.sample_indices`). Each is a dict parameter name -> float32 tensor of
unit total norm, its sign fixed so that the sample gradient's component along it is <= 0 (it
points downhill; an eigenvector's sign is otherwise arbitrary, and this makes it reproducible).

Lanczos costs minutes on a large sample, and two users need the same vectors (the gradients
analysis's noise along curvature, the forks' kick arm), so each converged vector is cached as
safetensors under RUN/cache/directions/:

    vmin_step_0000900.safetensors          the whole training set as the sample
    vmax_step_0000900_n512.safetensors     a sample of 512 examples

with a content hash and, in its metadata, the SHA-256 of the checkpoint (the run's manifest),
the sample size and the SHA-256 of the float32 parameters it was computed at (a fork computes
at the optimizer state's float32 weights, which differ from a float16 checkpoint's). A file that
is damaged, written by an older interp, or for other weights or another sample is recomputed
and replaced, never used. A pair that did not converge is returned as None and not cached; a
run folder that cannot be written to is only read (the vectors are recomputed next time).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from interp.errors import InterpError

CACHE = "cache/directions"
KINDS = ("vmax", "vmin")


@dataclass
class ExtremeDirections:
    """v_max and v_min at one checkpoint (None where Lanczos did not converge) and their eigenvalues."""

    vmax: dict[str, Tensor] | None
    vmin: dict[str, Tensor] | None
    lambda_max: float  # nats / param^2; NaN when not converged
    lambda_min: float
    residual_max: float  # ||H v - lambda v||, same unit (NaN when not known)
    residual_min: float
    n_examples: int  # size of the Hessian's sample
    cached: bool  # whether every converged vector came from the cache

    def vector(self, kind: str) -> dict[str, Tensor] | None:
        return {"vmax": self.vmax, "vmin": self.vmin}[kind]


def cache_path(run, step: int, kind: str, n_examples: int):
    """Where the `kind` vector of `step` on a sample of n_examples is cached (no suffix: the whole set)."""
    suffix = "" if n_examples == run.task.n_train else f"_n{n_examples}"
    return run.path / CACHE / f"{kind}_step_{step:07d}{suffix}.safetensors"


def params_sha256(model: nn.Module) -> str:
    """SHA-256 of the model's parameters as float32, in checkpoint names, shapes and order (what the vectors were
    computed at; the same on either TransformerLens, whose vectors share one layout)."""
    from interp.model import tl_params

    digest = hashlib.sha256()
    for name, p in tl_params(model).items():
        digest.update(name.encode())
        digest.update(p.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()


def _read(path, expected: dict[str, str], shapes: dict[str, tuple[int, ...]]) -> tuple[dict[str, Tensor], dict] | None:
    """The cached vector and its metadata, or None when missing, damaged or stale."""
    from interp.checkpoints import read

    if not path.exists():
        return None
    try:
        tensors, meta = read(path, self_hashed=True)
    except InterpError:
        return None
    if any(meta.get(key) != value for key, value in expected.items()):
        return None
    if {n: tuple(t.shape) for n, t in tensors.items()} != shapes:
        return None
    if not all(torch.isfinite(t).all() for t in tensors.values()):
        return None
    return {n: tensors[n].float().contiguous() for n in shapes}, meta


def _write(path, tensors: dict[str, Tensor], meta: dict[str, str]) -> None:
    from interp.checkpoints import serialize
    from interp.files import atomic_write_bytes

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, serialize(tensors, meta, self_hash=True))
    except OSError:
        pass  # a read-only run folder: the vectors are recomputed next time


def _as_params(model: nn.Module, flat: Tensor) -> dict[str, Tensor]:
    from interp.model import tl_params

    named = list(tl_params(model).items())
    sizes = [p.numel() for _, p in named]
    if sum(sizes) != flat.numel():
        raise InterpError(f"the Hessian vector has {flat.numel()} entries, the model {sum(sizes)} parameters")
    return {n: part.view(p.shape).float().contiguous() for (n, p), part in zip(named, flat.split(sizes))}


def extreme_directions(run, step: int, model: nn.Module | None = None, *, n_examples: int | None = 512,
                       device: str = "cpu") -> ExtremeDirections:
    """Unit v_max and v_min (parameter name -> float32 CPU tensor, downhill) and their eigenvalues.

    `model` holds the parameters to compute at (None: the checkpoint at `step`, loaded on
    `device`); it is not modified. n_examples: the Hessian's sample (None or >= the training
    set: the whole set). Reads and writes the cache described in the module docstring.
    """
    from interp.analysis.hessian import sample_indices, spectrum

    step = run.resolve_step(step)
    task = run.task
    n = task.n_train if n_examples is None else min(int(n_examples), task.n_train)
    sha = run.manifest()[step]["sha256"]
    if model is None:
        model = run.model(step, device=device)
    from interp.model import tl_params

    shapes = {name: tuple(p.shape) for name, p in tl_params(model).items()}
    expected = {"checkpoint_sha256": sha, "step": str(step), "n_examples": str(n),
                "params_sha256": params_sha256(model)}
    hits = {kind: _read(cache_path(run, step, kind, n), {**expected, "kind": kind}, shapes) for kind in KINDS}
    if all(hit is not None for hit in hits.values()):
        (vmax, mmax), (vmin, mmin) = hits["vmax"], hits["vmin"]
        return ExtremeDirections(vmax, vmin, float(mmax["eigenvalue"]), float(mmin["eigenvalue"]),
                                 float(mmax["residual"]), float(mmin["residual"]), n, True)
    idx = sample_indices(task, None if n == task.n_train else n, run.spec.seed)
    res = spectrum(model.eval() if model.training else model, task.train_tokens[idx], task.layout.loss_pos, k=1,
                   seed=run.spec.seed)
    out: dict[str, dict[str, Tensor] | None] = {}
    values, residuals = {}, {}
    for kind, ext in (("vmax", res["top"]), ("vmin", res["bottom"])):
        values[kind], residuals[kind] = float(ext.values[0]), float(ext.residuals[0])
        if not bool(ext.converged[0]) or not math.isfinite(values[kind]):
            out[kind] = None
            continue
        vector = torch.from_numpy(ext.vectors[:, 0].copy())
        if float(res["grad"] @ vector) > 0:
            vector = -vector
        out[kind] = _as_params(model, vector / vector.norm())
        meta = {**expected, "kind": kind, "eigenvalue": repr(values[kind]), "residual": repr(residuals[kind])}
        _write(cache_path(run, step, kind, n), out[kind], meta)
    return ExtremeDirections(out["vmax"], out["vmin"], values["vmax"] if out["vmax"] is not None else math.nan,
                             values["vmin"] if out["vmin"] is not None else math.nan, residuals["vmax"],
                             residuals["vmin"], n, False)
