"""The dissipation laws of a phase sweep: Q = c log(K / K*) per learning rate, and c across learning rates.

Q is a run's dissipated work over a window (`interp.sweeps.phase.run_phase`: Q_dz, the author's dz window, by
default; Q_transition, Q_plateau, Q_prior or Q_total on request). Per lr, over the transitioned runs, an OLS of Q on
log K (every seed a point; the author fits the per-K seed means, which gives the same slope when every K has the
same seeds) gives c with its t interval, q0 and K* = exp(-q0 / c). Across lrs, c(lr) is tabled and, with three or
more positive c, log c is fitted on log lr. The author's c (SPEC 13.4: 9.91, 4.29, 110.2 at lr 3e-4, 1e-3, 3e-3)
are reconciliation rows (interp.mechanisms.reconcile_rules, "q_law_*").
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from interp.errors import InterpError
from interp.sweeps.phase import Q_COLUMNS

AUTHOR_C = {3e-4: 9.91, 1e-3: 4.29, 3e-3: 110.2}  # SPEC 13.4 (eta_sweep/analysis/fit_per_eta.py, affine c)


@dataclass(frozen=True)
class QLaw:
    lr: float
    c: float | None
    low: float | None
    high: float | None
    q0: float | None
    k_star: float | None
    n: int
    n_k: int
    why: str  # why there is no fit ("" when there is)

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self, column: str) -> str:
        if self.c is None:
            return f"lr {self.lr:g}: n/a ({self.why})"
        ks = "n/a" if self.k_star is None else f"{self.k_star:.3g}"
        author = AUTHOR_C.get(_key(self.lr))
        return (f"lr {self.lr:g}: {column} = c log(K / K*) with c = {self.c:.3g} [{self.low:.3g}, {self.high:.3g}] "
                f"(95%), K* = {ks}; {self.n} runs at {self.n_k} K" + (f"; the author's c = {author:g}" if author else ""))


def _key(lr: float) -> float | None:
    return next((a for a in AUTHOR_C if math.isclose(a, lr, rel_tol=1e-9)), None)


def transitioned_at(runs, lr: float, column: str):
    """The transitioned runs at learning rate `lr` whose `column` is a finite number."""
    import numpy as np
    import pandas as pd

    lrs = pd.to_numeric(runs["lr"], errors="coerce").to_numpy(float)
    values = pd.to_numeric(runs[column], errors="coerce").to_numpy(float)
    mask = (runs["outcome"] == "transitioned").to_numpy(bool) & np.isclose(lrs, lr, rtol=1e-9, atol=0) \
        & np.isfinite(values)
    return runs[mask]


def check_q(runs, column: str, label: str) -> None:
    if column not in Q_COLUMNS:
        raise InterpError(f"unknown Q window {column!r}; known: {', '.join(Q_COLUMNS)}")
    done = runs[runs["outcome"].notna()]
    if done.empty:
        raise InterpError(f"{label}: no run has finished; nothing to fit")
    if done["q_source"].isna().all():
        why = next((w for w in done["q_missing"] if isinstance(w, str)), "no gradient columns")
        raise InterpError(f"{label}: its runs log no gradient norms, so Q cannot be had: {why}")


def q_law(runs, lr: float, column: str = "Q_dz", level: float = 0.95) -> QLaw:
    """Q = c log K + q0 over the transitioned runs at `lr` (module docstring)."""
    d = transitioned_at(runs, lr, column)
    n_k = d["k"].nunique()
    if n_k < 3:
        return QLaw(lr, None, None, None, None, None, len(d), n_k,
                    f"{len(d)} transitioned runs with {column} at {n_k} K: needs 3 distinct K")
    import numpy as np

    x, y = np.log(d["k"].astype(float).to_numpy()), d[column].astype(float).to_numpy()
    c, low, high, q0 = ols_slope(x, y, level)
    k_star = math.exp(-q0 / c) if c else None
    return QLaw(lr, c, low, high, q0, k_star, len(d), n_k, "")


def q_laws(runs, column: str = "Q_dz") -> list[QLaw]:
    return [q_law(runs, float(lr), column) for lr in sorted(set(runs["lr"].astype(float)))]


def ols_slope(x, y, level: float = 0.95) -> tuple[float, float, float, float]:
    """(slope, its t interval's low and high, intercept) of an OLS of y on x (statsmodels)."""
    import numpy as np
    import statsmodels.api as sm

    fit = sm.OLS(np.asarray(y, float), sm.add_constant(np.asarray(x, float))).fit()
    low, high = fit.conf_int(1 - level)[1]
    return float(fit.params[1]), float(low), float(high), float(fit.params[0])


def c_trend(laws: list[QLaw]) -> dict:
    """log c on log lr over the lrs with a positive c (three or more), with its 95% t interval."""
    pts = [(law.lr, law.c) for law in laws if law.c is not None and law.c > 0]
    if len(pts) < 3:
        return {"slope": None, "why": f"{len(pts)} lr(s) with a positive c: needs 3"}
    slope, low, high, _ = ols_slope([math.log(a) for a, _ in pts], [math.log(c) for _, c in pts])
    return {"slope": slope, "low": low, "high": high, "n": len(pts), "why": ""}
