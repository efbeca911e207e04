"""Fit results in a notebook: the summary, the estimate with its interval, the runs it rests on,
and the paper's (or the author's) value beside it. `ResultDisplay` is mixed into each result
class (`@dataclass(repr=False)`, so that its short `__repr__` is the one shown instead of a dump
of every table); `fits_html` shows a sweep's `Fits`: each result, and why the others do not apply."""

from __future__ import annotations

import math

from interp.display.html import card, esc

ESTIMATES = ("beta", "delta", "slope", "geo_mean_ratio")  # the first a result has is its headline number
TITLES = {
    "PowerLawFit": "Power law", "CancellationFit": "Selector-sharing control (gradient cancellation)",
    "SlopeFit": "Log-log slope", "FixedDResult": "Fixed D: tau against K", "NoiseResult": "Gradient noise: tau "
    "against lr and batch size", "AsymmetryResult": "Direction asymmetry", "ForkComparison": "Fork comparison",
}


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


class ResultDisplay:
    """`_repr_html_` and a one-line `__repr__` from a result's `summary()` and `to_dict()`."""

    def _headline(self) -> str:
        for name in ESTIMATES:
            value = getattr(self, name, None)
            if isinstance(value, (int, float)):
                ci = getattr(self, "ci", None)
                interval = f" [{ci[0]:.3g}, {ci[1]:.3g}]" if ci is not None and len(ci) == 2 else ""
                return f"{name} = {value:.3g}{interval}"
        return self.summary().splitlines()[0][:100]

    def __repr__(self) -> str:
        n = getattr(self, "n_used", None)
        used = f", {n} runs used" if isinstance(n, int) else ""
        return f"{type(self).__name__}({self._headline()}{used})"

    def _repr_html_(self) -> str:
        rows = [("estimate", self._headline())]
        if isinstance(getattr(self, "n_used", None), int):
            rows.append(("runs used", str(self.n_used)))
        paper = paper_text(getattr(self, "paper", None))
        rows.append(("paper / author", paper or "no value of the paper for this design"))
        summary = self.summary()
        body = f"<pre>{esc(summary)}</pre>"
        return card(TITLES.get(type(self).__name__, type(self).__name__), rows, body)


def fits_html(fits) -> str:
    """Every fit of a sweep (`interp.sweeps.family.Fits`): each result's card, then the fits that do
    not apply with the reason, then the warnings."""
    body = "".join(result._repr_html_() for result in fits.results.values())
    rows = [(name, why) for name, why in fits.problems.items()]
    notes = [f"warning: {w}" for w in fits.warnings]
    return card(f"Fits: {', '.join(fits.results) or 'none applies'}", rows, body, notes)
