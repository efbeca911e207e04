"""Fit results in a notebook: the summary, the estimate with its interval, the runs it rests on,
and the paper's (or the author's) value beside it. Each result class (`@dataclass(repr=False)`,
mixing in `interp.presentable.Presentable`) finds its card and its short `__repr__` here by type,
so that the repr is one line instead of a dump of every table; `fits_html` shows a sweep's
`Fits`: each result, and why the others do not apply."""

from __future__ import annotations

import math

from interp.display.html import card, esc
from interp.presentable import REPR, renders

ESTIMATES = ("beta", "delta", "slope", "geo_mean_ratio")  # the first a result has is its headline number
TITLES = {
    "PowerLawFit": "Power law", "CancellationFit": "Selector-sharing control (gradient cancellation)",
    "SlopeFit": "Log-log slope", "FixedDResult": "Fixed D: tau against K", "NoiseResult": "Gradient noise: tau "
    "against lr and batch size", "AsymmetryResult": "Direction asymmetry", "ForkComparison": "Fork comparison",
}
# the result classes shown by `result_repr` and `result_html` (a subclass, CancellationFit, as its base)
RESULTS = ("interp.sweeps.fits:SlopeFit", "interp.sweeps.fits:PowerLawFit", "interp.sweeps.fits:FixedDResult",
           "interp.sweeps.conditions:NoiseResult", "interp.sweeps.conditions:AsymmetryResult",
           "interp.sweeps.circuit_fits:KTrend", "interp.sweeps.circuit_fits:RoutingHeads",
           "interp.sweeps.forks:ForkComparison")


def _number(value) -> str:
    if isinstance(value, float):
        return "n/a" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def paper_text(paper) -> str:
    """The paper's values as "key: value; ..." (nested dicts flattened one level)."""
    if not paper:
        return ""
    parts = []
    for key, value in paper.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}: {_number(v)}" for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            value = "[" + ", ".join(_number(v) for v in value) + "]"
        parts.append(f"{key.replace('_', ' ')}: {_number(value)}")
    return "; ".join(parts)


def headline(result) -> str:
    """The first estimate a result has, with its interval, else the first line of its summary."""
    for name in ESTIMATES:
        value = getattr(result, name, None)
        if isinstance(value, (int, float)):
            ci = getattr(result, "ci", None)
            interval = f" [{ci[0]:.3g}, {ci[1]:.3g}]" if ci is not None and len(ci) == 2 else ""
            return f"{name} = {value:.3g}{interval}"
    return result.summary().splitlines()[0][:100]


@renders(*RESULTS, kind=REPR)
def result_repr(result) -> str:
    """One line: the class, the headline estimate, how many runs it used."""
    n = getattr(result, "n_used", None)
    used = f", {n} runs used" if isinstance(n, int) else ""
    return f"{type(result).__name__}({headline(result)}{used})"


@renders(*RESULTS)
def result_html(result) -> str:
    """A card from the result's `summary()`: the estimate, the runs used, the paper's value."""
    rows = [("estimate", headline(result))]
    if isinstance(getattr(result, "n_used", None), int):
        rows.append(("runs used", str(result.n_used)))
    paper = paper_text(getattr(result, "paper", None))
    rows.append(("paper / author", paper or "no value of the paper for this design"))
    summary = result.summary()
    body = f"<pre>{esc(summary)}</pre>"
    return card(TITLES.get(type(result).__name__, type(result).__name__), rows, body)


@renders("interp.sweeps.family:Fits")
def fits_html(fits) -> str:
    """Every fit of a sweep (`interp.sweeps.family.Fits`): each result's card, then the fits that do
    not apply with the reason, then the warnings."""
    body = "".join(result._repr_html_() for result in fits.results.values())
    rows = [(name, why) for name, why in fits.problems.items()]
    notes = [f"warning: {w}" for w in fits.warnings]
    return card(f"Fits: {', '.join(fits.results) or 'none applies'}", rows, body, notes)
