"""Delta at other thresholds: the author's robustness check of the scaling law (`interp scaling --threshold`).

tau at fraction f is the first evaluation with the candidate loss below f log K (the sweep table's `tau_0.3` ..
`tau_0.7` columns, `interp.collections.rows.TAU_FRACTIONS`; 0.5 is tau_half). The power law tau = C D^delta is
refit at each (`interp.sweeps.fits.power_law`, censored runs left out as always), and the spread of delta across
the thresholds judged by the author's rule (scripts/exp_threshold_sensitivity.py): a range below 0.1 is robust,
below 0.2 moderately robust, else sensitive. The author's numbers (EXPERIMENT_RESULTS.md, Experiment 6: K from 3
to 36 at n_bases 1000, 10 runs): range 0.104, mean 1.182, std 0.035 (numpy's population std), so "moderately
robust" by their own rule although their text says robust.
numpy and pandas only.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from interp.collections.rows import TAU_FRACTIONS, tau_column
from interp.errors import InterpError
from interp.sweeps.fits import PowerLawFit, power_law

AUTHOR = {"range": 0.104, "mean": 1.182, "std": 0.035, "n_runs": 10,
          "deltas": {0.3: 1.224, 0.4: 1.200, 0.5: 1.197, 0.6: 1.169, 0.7: 1.120}}
ROBUST, MODERATE = 0.1, 0.2  # the author's cut-offs on the range of delta across thresholds


def parse_fractions(text: str) -> tuple[float, ...]:
    """--threshold: "all" (0.3 to 0.7) or comma-separated fractions of log K among TAU_FRACTIONS."""
    if text.strip() == "all":
        return TAU_FRACTIONS
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise InterpError(f"--threshold {text!r}: give fractions of log K, comma-separated, among "
                          f"{', '.join(f'{f:g}' for f in TAU_FRACTIONS)} (or all)") from None
    bad = [v for v in values if not any(math.isclose(v, f) for f in TAU_FRACTIONS)]
    if bad or len(values) < 2:
        raise InterpError(f"--threshold {text!r}: give at least two of {', '.join(f'{f:g}' for f in TAU_FRACTIONS)} "
                          f"(the sweep table holds tau at those), or all")
    return tuple(sorted(set(values)))


def verdict(spread: float) -> str:
    if not math.isfinite(spread):
        return "undetermined"
    return "robust" if spread < ROBUST else "moderately robust" if spread < MODERATE else "sensitive"


@dataclass
class ThresholdResult:
    """delta of tau = C D^delta at each threshold, and its spread across them."""

    fits: dict[float, PowerLawFit] = field(default_factory=dict)
    problems: dict[float, str] = field(default_factory=dict)

    @property
    def deltas(self) -> dict[float, float]:
        return {f: fit.delta for f, fit in self.fits.items()}

    @property
    def spread(self) -> dict:
        d = np.array(list(self.deltas.values()), dtype=float)
        if len(d) < 2:
            return {"range": math.nan, "mean": math.nan, "std": math.nan}
        return {"range": float(d.max() - d.min()), "mean": float(d.mean()), "std": float(d.std())}

    def lines(self) -> list[str]:
        out = []
        for f in sorted({*self.fits, *self.problems}):
            if f in self.fits:
                fit = self.fits[f]
                author = AUTHOR["deltas"].get(f)
                out.append(f"tau at {f:g} log K: delta = {fit.delta:.3g} [{fit.ci[0]:.3g}, {fit.ci[1]:.3g}], "
                           f"{fit.n_used} runs used, {fit.n_censored} censored"
                           + (f" (the author: {author})" if author is not None else ""))
            else:
                out.append(f"tau at {f:g} log K: n/a: {self.problems[f]}")
        s = self.spread
        out.append(f"delta across {len(self.fits)} thresholds: range {s['range']:.3g}, mean {s['mean']:.4g}, std "
                   f"{s['std']:.3g} -> {verdict(s['range'])} by the author's rule (range < {ROBUST:g} robust, < "
                   f"{MODERATE:g} moderately); the author: range {AUTHOR['range']}, mean {AUTHOR['mean']}, std "
                   f"{AUTHOR['std']} ({verdict(AUTHOR['range'])} by that rule)")
        return out

    def to_dict(self) -> dict:
        return {"fits": {f"{f:g}": fit.to_dict() for f, fit in self.fits.items()},
                "not_applicable": {f"{f:g}": why for f, why in self.problems.items()},
                "spread": self.spread, "verdict": verdict(self.spread["range"]), "author": AUTHOR}


def threshold_robustness(table: pd.DataFrame, fractions=TAU_FRACTIONS, direction: str = "bz_to_a",
                         **fit_options) -> ThresholdResult:
    """Refit delta (tau against D) at each fraction of log K; a fraction whose fit fails (too few runs reach it)
    is a note, not an error. Warnings of the fits (censored runs) are raised once per fraction, as the fits do."""
    out = ThresholdResult()
    for f in fractions:
        column = tau_column(f)
        if column not in table:
            out.problems[f] = f"the table has no {column} column (a table made before thresholds were kept)"
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # censored runs: counted in each fit's summary
                out.fits[f] = power_law(table, x="D", y=column, direction=direction, **fit_options)
        except InterpError as exc:
            out.problems[f] = str(exc)
    return out
