"""The selector-sharing control of gradient cancellation (docs/scaling.md, "Gradient cancellation:
the selector-sharing control"): tau against the number of bases that share each selector string.

With `TaskSpec.selector_groups = G`, the bases fall into supergroups of G consecutive bases,
each with its own K selectors (G = 1: z private to each base; G = n_bases: the paper's task,
one set shared by every base). If the plateau lasts because the selector gradients of the
groups that share z cancel, the selector's gradient SNR falls as (bases sharing it)^(-1/2) and
tau grows about linearly with it: tau ~ G^beta with beta near 1. The author measured beta = 0.02.

`cancellation(table)` fits that power law with `interp.sweeps.fits.power_law` on the sweep
table's `bases_per_selector_set` column (G, or n_bases where selector_groups is unset; written
by `Sweep.table()`): the same run selection, censoring (runs that never snapped are counted,
flagged and left out with a warning), bootstrap intervals and band. numpy, pandas and scipy only.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import pandas as pd

from interp.errors import InterpError
from interp.sweeps.bootstrap import N_BOOT
from interp.sweeps.fits import PowerLawFit, ci_str, jsonable, per_value, power_law, warn_pooled

X = "bases_per_selector_set"
AXIS = "task.selector_groups"
PREDICTED_BETA = 1.0     # gradient cancellation: selector SNR ~ (bases sharing z)^(-1/2), tau ~ 1 / SNR^2
AUTHOR_BETA = 0.02       # what the author measured with the selector-sharing control (docs/mechanisms.md)


@dataclass(repr=False)
class CancellationFit(PowerLawFit):
    """tau = C * (bases per selector set)^beta: a `PowerLawFit` (so `plots.tau_vs_d` draws it) whose
    exponent is beta, with the prediction of gradient cancellation and the author's value."""

    per_set: pd.DataFrame        # per bases_per_selector_set: n, n_censored, mean, geo_mean, min, max of y
    n_bases: list[int]           # the n_bases of the runs the fit used

    @property
    def beta(self) -> float:
        return self.delta

    @property
    def exponent(self) -> float:
        """beta, under the name the mechanism table reads."""
        return self.delta

    @property
    def predicted_in_ci(self) -> bool:
        """Whether the CI of beta contains the cancellation prediction (beta = 1)."""
        return bool(self.ci[0] <= PREDICTED_BETA <= self.ci[1])

    @property
    def zero_in_ci(self) -> bool:
        """Whether the CI of beta contains 0 (tau does not depend on how widely z is shared)."""
        return bool(self.ci[0] <= 0.0 <= self.ci[1])

    @property
    def paper(self) -> dict:
        return dict(predicted_beta=PREDICTED_BETA, author_beta=AUTHOR_BETA,
                    prediction="gradient cancellation: tau ~ (bases sharing a selector set)^beta, beta near 1")

    def to_dict(self) -> dict:
        out = super().to_dict()
        out.update(fit="cancellation", beta=self.beta, predicted_in_ci=self.predicted_in_ci,
                   zero_in_ci=self.zero_in_ci, n_bases=jsonable(self.n_bases),
                   per_set=jsonable(self.per_set.to_dict(orient="records")))
        return out

    def summary(self) -> str:
        line = (f"beta = {self.beta:.3g} {ci_str(self.ci)} ({self.ci_level:.0%} CI, {self.method}): {self.y} "
                "against bases per selector set, " + self._fit_line())
        censored = self.per_set[self.per_set["n_censored"] > 0]
        if len(censored):
            line += " (censored at " + ", ".join(f"{int(r[X])} bases per set: {int(r['n_censored'])}"
                                                 for _, r in censored.iterrows()) + ")"
        line += (f"; gradient cancellation predicts beta ~ {PREDICTED_BETA:g} "
                 f"({'inside' if self.predicted_in_ci else 'outside'} the CI); the author measured "
                 f"beta = {AUTHOR_BETA:g}")
        if self.scheme == "over":
            line += " (one seed per value: this scheme under-covers; scheme='residual' is calibrated)"
        return line


def with_bases_per_set(table: pd.DataFrame, what: str) -> pd.DataFrame:
    """The table with its `bases_per_selector_set` column: as `Sweep.table()` writes it, or from the
    task.selector_groups axis and n_bases (an unset G: every base shares one set, n_bases)."""
    if not isinstance(table, pd.DataFrame):
        raise InterpError(f"{what}: expected a sweep table (a pandas DataFrame, Sweep.table()), "
                          f"got {type(table).__name__}")
    if table.empty:
        raise InterpError(f"{what}: the sweep table is empty (no runs)")
    if X in table.columns:
        return table
    if AXIS not in table.columns or "n_bases" not in table.columns:
        raise InterpError(f"{what}: the sweep table has no {X!r} column (Sweep.table() writes it) and no "
                          f"{AXIS!r} and 'n_bases' columns to compute it from")
    out = table.copy()
    g = pd.to_numeric(out[AXIS], errors="coerce")
    out[X] = g.where(g.notna(), pd.to_numeric(out["n_bases"], errors="coerce"))
    return out


def cancellation(table: pd.DataFrame, y: str = "tau_half", n_boot: int = N_BOOT, ci: float = 0.95, seed: int = 0,
                 scheme: str = "auto", direction: str | None = None) -> CancellationFit:
    """tau = C * (bases per selector set)^beta in log-log with a bootstrap CI on beta, over the
    done runs of a selector-sharing sweep (e.g. the `cancellation-tiny` preset).

    Runs, censoring and intervals are `power_law`'s (`scheme` as there). Needs at least 3
    distinct values of bases per selector set among the done runs; pooling runs of several K
    or n_bases is warned about (tau also depends on D)."""
    what = f"selector-sharing control ({y} against {X})"
    table = with_bases_per_set(table, what)
    if "status" in table.columns:
        done = table[table["status"].astype(str) == "done"]
        values = sorted(set(pd.to_numeric(done[X], errors="coerce").dropna().tolist()))
        if len(values) < 3:
            shown = ", ".join(f"{v:g}" for v in values) or "none"
            raise InterpError(f"{what}: the done runs have {len(values)} distinct value(s) of bases per selector "
                              f"set ({shown}); the control needs runs at 3 or more values of task.selector_groups "
                              f"(e.g. --grid task.selector_groups=1,10,50,200, the cancellation-tiny preset)")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*differ in .*the fit pools them", category=UserWarning)
        fit = power_law(table, x=X, y=y, n_boot=n_boot, ci=ci, seed=seed, scheme=scheme, direction=direction)
    used = fit.points[fit.points["used"]]
    warn_pooled(used, what, ["k", "n_bases", "lr", "batch_size"])
    fields = {name: getattr(fit, name) for name in PowerLawFit.__dataclass_fields__}
    n_bases = sorted({int(v) for v in pd.to_numeric(used["n_bases"], errors="coerce").dropna()}) \
        if "n_bases" in used.columns else []
    return CancellationFit(**fields, per_set=per_value(fit.points, X, y), n_bases=n_bases)


__all__ = ["cancellation", "CancellationFit", "with_bases_per_set", "PREDICTED_BETA", "AUTHOR_BETA", "X", "AXIS"]
