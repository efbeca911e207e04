"""The Hessian bottom eigenvector at a fork step, for the `kick` arm, cached in the parent's cache/.

The eigenvector is `interp.analysis.directions.extreme_directions`'s v_min (Lanczos on
Hessian-vector products of the training objective over the Hessian analysis's default sample,
the whole training set) at the state's float32 parameters, oriented so that the gradient's
component along it is <= 0 (it points downhill). That module caches it as
cache/directions/vmin_step_NNNNNNN.safetensors with a content hash, the SHA-256 of the
checkpoint and of the parameters it belongs to, so a changed checkpoint or a damaged file is
recomputed, never used; the gradients analysis reads the same files. A bottom eigenpair that
does not converge is refused: a kick needs a computable direction.
"""

from __future__ import annotations

import torch

from interp.analysis.directions import CACHE  # noqa: F401  (re-exported: where the vectors live)
from interp.errors import InterpError


def bottom_eigenvector(parent, step: int, state) -> dict[str, torch.Tensor]:
    """The unit bottom eigenvector (parameter name -> tensor) at `state`, oriented downhill."""
    from interp.analysis import hessian
    from interp.analysis.directions import extreme_directions
    from interp.checkpoints import load_params
    from interp.model import build_model
    from interp.spec import VOCAB_SIZE

    model = build_model(parent.spec.model, parent.task.layout.length, VOCAB_SIZE)
    load_params(model, state.params)
    found = extreme_directions(parent, step, model.eval(), n_examples=hessian.DEFAULTS["n_examples"])
    if found.vmin is None:
        raise InterpError(f"kick: the Hessian bottom eigenpair at step {step} of {parent.path} did not converge "
                          f"(residual {found.residual_min:.3g}): no computable direction; use "
                          f"direction=random or another step")
    return found.vmin
