"""Extreme eigenpairs of a symmetric operator given only its matvec: ARPACK's Lanczos through
`scipy.sparse.linalg.eigsh`.

`extreme_eigenpairs` finds the top ("LA") or bottom ("SA") k, `both_ends` both from one
ARPACK run (which="BE", falling back to two runs if it does not converge). Works on any
matvec (a Hessian-vector product, an explicit matrix); residuals ||Av - lambda v|| are
recomputed with one extra matvec per pair, and pairs ARPACK did not converge on come back
as NaN with converged=False instead of raising. numpy and scipy only (no torch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from interp.errors import InterpError

TOL = 1e-4  # ARPACK's relative tolerance on each Ritz pair
MAXITER = 300  # ARPACK restarts before giving up (the pair is then flagged, not raised)


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
    tol: float = TOL,
    maxiter: int | None = MAXITER,
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
    tol: float = TOL,
    maxiter: int | None = MAXITER,
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
