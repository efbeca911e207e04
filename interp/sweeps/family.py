"""Every family-level fit a sweep's design allows, with why the others do not apply.

`sweep_fits(table)` is what `interp scaling` prints and the sweep report shows: the power
law (claim 1), the fixed-D slope (claim 2), the noise trends (claim 3) and the direction
asymmetry (claim 4), each tried only when the done runs vary what it needs. A fit that does
not apply, or fails on the data, is a note (`Fits.problems`), never an error; the warnings
the fits raise (censored runs left out, pooled axes) are collected in `Fits.warnings`, and so
are the damaged runs (`interp.collections.states`), which no fit sees.
numpy, pandas and scipy only: no torch, no plotting.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import pandas as pd

from interp.errors import InterpError
from interp.presentable import html
from interp.sweeps.cancellation import cancellation
from interp.sweeps.conditions import asymmetry, noise
from interp.sweeps.fits import fixed_d, one_dataset_size, power_law


@dataclass
class Fits:
    """The fits that apply to a sweep, why the others do not, and what they warned about."""

    results: dict = field(default_factory=dict)  # name -> result
    problems: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return (f"Fits({', '.join(f'{k}: {v!r}' for k, v in self.results.items()) or 'none applies'}; "
                f"{len(self.problems)} not applicable, {len(self.warnings)} warning(s))")

    def _repr_html_(self) -> str:
        """Each result's card, then why the others do not apply (`interp.display.results`, found by type)."""
        return html(self)


def sweep_fits(table: pd.DataFrame, y: str = "tau_half") -> Fits:
    """Every fit of `interp.sweeps.scaling` that the sweep's design allows."""
    fits = Fits()
    damaged = table["status"] == "damaged"
    for name, error in zip(table.loc[damaged, "run"], table.loc[damaged, "error"]):
        fits.warnings.append(f"run {name} is damaged, left out of every fit: {error}")
    table = table[~damaged]  # its values are what its run.json says, or NaN: never fitted
    done = table[table["status"] == "done"]
    directions = set(done["direction"])
    cand = done[done["direction"].isin(["bz_to_a"])]
    one_d = one_dataset_size(cand["D"])  # n_bases = round(D / K): D = 10,008 at K = 36
    attempts = {
        "scaling": (not one_d and cand["D"].nunique() >= 3, "needs at least 3 values of D among the done bz_to_a runs",
                    lambda: power_law(table, x="D", y=y, direction="bz_to_a")),
        "fixed_d": (one_d and cand["k"].nunique() >= 2,
                    "needs one D and at least 2 values of K",
                    lambda: fixed_d(table, y=y, direction="bz_to_a")),
        "noise": (cand["lr"].nunique() >= 2 or cand["batch_size"].nunique() >= 2,
                  "needs at least 2 learning rates or batch sizes",
                  lambda: noise(table, y=y, direction="bz_to_a")),
        "asymmetry": ({"bz_to_a", "a_to_b"} <= directions, "needs done runs of both bz_to_a and a_to_b",
                      lambda: asymmetry(table)),
        "cancellation": ("bases_per_selector_set" in cand and cand["bases_per_selector_set"].nunique() >= 3,
                         "needs at least 3 values of task.selector_groups among the done bz_to_a runs",
                         lambda: cancellation(table, y=y, direction="bz_to_a")),
    }
    return attempt(fits, attempts)


def attempt(fits: Fits, attempts: dict, not_applicable: str = "not in this sweep's design") -> Fits:
    """Try each fit of `attempts` (name -> (applies, why not, fit)): a result, or the reason it
    does not apply or failed in `fits.problems`, and the warnings it raised in `fits.warnings`."""
    for name, (applies, why, fit) in attempts.items():
        if not applies:
            fits.problems[name] = f"{not_applicable} ({why})"
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                fits.results[name] = fit()
            except InterpError as exc:
                fits.problems[name] = str(exc)
        fits.warnings += [f"{name}: {w.message}" for w in caught]
    return fits
