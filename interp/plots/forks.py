"""The figure of a fork comparison (`interp.sweeps.forks.forks`): escape per fork step and arm.

One trace per arm: its median escape at each fork step (log y) with the interval over seeds.
A censored median is an open triangle pointing up at its lower bound (the true median lies
above); an interval without an upper end is drawn up to the point only and says so on hover.
The reference arm is drawn in black, larger. The result is read by its attributes: no import
of the fits (figures depend on results, never the reverse).
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from interp.errors import InterpError
from interp.plots.style import PALETTE, TAU_COLOR, require

COLUMNS = ("fork_step", "label", "n", "n_censored", "median", "median_censored", "ci_low", "ci_high", "ratio",
           "ratio_bound")


def _hover(r) -> str:
    med = f"censored: > {r.median:,.0f}" if r.median_censored else f"median {r.median:,.4g}"
    if math.isnan(r.ci_low):
        ci = "CI n/a"
    elif math.isinf(r.ci_high):
        ci = f"CI > {r.ci_low:,.4g} (unbounded above)"
    else:
        ci = f"CI [{r.ci_low:,.4g}, {r.ci_high:,.4g}]"
    ratio = "ratio undefined" if not math.isfinite(r.ratio) else f"ratio {r.ratio_bound} {r.ratio:.3g}".replace("  ", " ")
    return f"{r.label} at fork step {r.fork_step}<br>{med}<br>{ci}<br>{ratio}<br>{r.n} runs, {r.n_censored} censored"


def fork_escapes(result) -> go.Figure:  # an interp.sweeps.forks.ForkComparison
    """Median escape (steps after the fork) per fork step, one trace per arm, on a log axis."""
    if not all(hasattr(result, a) for a in ("rows", "reference", "y", "level")):
        raise InterpError(f"fork escapes: expected the result of interp.sweeps.forks.forks, got {type(result).__name__}")
    rows = result.rows
    require(rows, COLUMNS, "fork escapes")
    steps = sorted(set(int(s) for s in rows["fork_step"]))
    traces = []
    colors = iter(PALETTE)
    for label in dict.fromkeys(rows["label"]):
        part = rows[(rows["label"] == label) & (rows["n"] > 0)]
        ref = label == result.reference
        color = TAU_COLOR if ref else next(colors)
        med = part["median"].to_numpy(float)
        up = np.where(np.isfinite(part["ci_high"].to_numpy(float)), part["ci_high"].to_numpy(float) - med, 0.0)
        down = np.clip(med - part["ci_low"].to_numpy(float), 0.0, None)
        cen = part["median_censored"].to_numpy(bool)
        traces.append(go.Scatter(
            x=[str(int(s)) for s in part["fork_step"]], y=med, mode="markers", name=label + (" (reference)" if ref else ""),
            marker=dict(color=color, size=13 if ref else 9,
                        symbol=["triangle-up-open" if c else "circle" for c in cen], line=dict(width=2 if ref else 1)),
            error_y=dict(type="data", symmetric=False, array=np.where(cen, 0.0, up), arrayminus=down,
                         thickness=2.5 if ref else 1.5, color=color),
            text=[_hover(r) for r in part.itertuples(index=False)], hovertemplate="%{text}<extra></extra>",
        ))
    fig = go.Figure(traces)
    fig.update_layout(
        title=f"{result.y} after the fork by arm: median over seeds, {result.level:.0%} CI; "
              f"triangles: censored (lower bounds); reference {result.reference!r}",
        height=480, scattermode="group",
        xaxis=dict(title="fork step (optimizer steps)", type="category", categoryorder="array",
                   categoryarray=[str(s) for s in steps]),
        yaxis=dict(type="log", title=f"{result.y} (optimizer steps after the fork)"),
    )
    return fig
