"""The Hessian bottom eigenvector at a fork step, for the `kick` arm, cached in the parent's cache/.

The eigenvector comes from the Hessian analysis (`interp.analysis.hessian.spectrum`, Lanczos on
Hessian-vector products of the training objective over the whole training set) at the state's
float32 parameters. Its sign is fixed so that the gradient's component along it is <= 0 (it
points downhill). It is stored as safetensors with a content hash and the SHA-256 of the
checkpoint it belongs to, so a changed checkpoint or a damaged file is recomputed, never used.
A bottom eigenpair that does not converge is refused: a kick needs a computable direction.
"""

from __future__ import annotations

import torch

from interp.errors import InterpError

CACHE = "cache/directions"


def _cached(parent, step: int, checkpoint_sha: str) -> dict[str, torch.Tensor] | None:
    from interp.checkpoints import read

    path = parent.path / CACHE / f"vmin_step_{step:07d}.safetensors"
    if not path.exists():
        return None
    try:
        tensors, meta = read(path, self_hashed=True)
    except InterpError:
        return None
    return tensors if meta.get("checkpoint_sha256") == checkpoint_sha else None


def bottom_eigenvector(parent, step: int, state) -> dict[str, torch.Tensor]:
    """The unit bottom eigenvector (parameter name -> tensor) at `state`, oriented downhill."""
    from interp.analysis.hessian import DEFAULTS, sample_indices, spectrum
    from interp.checkpoints import load_params, serialize
    from interp.files import atomic_write_bytes
    from interp.model import build_model
    from interp.spec import VOCAB_SIZE

    sha = parent.manifest()[step]["sha256"]
    hit = _cached(parent, step, sha)
    if hit is not None:
        return hit
    task = parent.task
    model = build_model(parent.spec.model, task.layout.length, VOCAB_SIZE)
    load_params(model, state.params)
    idx = sample_indices(task, DEFAULTS["n_examples"], parent.spec.seed)
    res = spectrum(model.eval(), task.tokens[idx], task.layout.loss_pos, k=1, seed=parent.spec.seed)
    bottom = res["bottom"]
    if not bool(bottom.converged[0]):
        raise InterpError(f"kick: the Hessian bottom eigenpair at step {step} of {parent.path} did not converge "
                          f"(residual {float(bottom.residuals[0]):.3g}): no computable direction; use "
                          f"direction=random or another step")
    vector = torch.from_numpy(bottom.vectors[:, 0].copy())
    if float(res["grad"] @ vector) > 0:
        vector = -vector
    vector = vector / vector.norm()
    names = [n for n, _ in model.named_parameters()]
    sizes = [p.numel() for _, p in model.named_parameters()]
    if sum(sizes) != vector.numel():
        raise InterpError(f"kick: the Hessian vector has {vector.numel()} entries, the model {sum(sizes)} parameters")
    out = {n: part.view(p.shape).float().contiguous()
           for n, part, (_, p) in zip(names, vector.split(sizes), model.named_parameters())}
    meta = {"checkpoint_sha256": sha, "step": str(step), "lambda_min": repr(float(res["lambda_min"]))}
    path = parent.path / CACHE / f"vmin_step_{step:07d}.safetensors"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, serialize(out, meta, self_hash=True))
    except OSError:
        pass  # a read-only parent: the direction is recomputed next time
    return out
