"""Figures of the decision-position activation tables: representations and the logit lens.

Inputs are the tidy tables of `interp.analysis.representations` ("representations": step,
layer, site, within, between, ratio, ...) and `interp.analysis.lens` ("lens": step, layer,
site, loss_cand, loss_first, ...); one colour per site (embed, L0, L1, ...), steps on a real
axis, tau dotted and onsets dashed as in every figure over steps.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.errors import InterpError
from interp.plots.geometry import _onset_lines
from interp.plots.style import LOSS_TITLE, PALETTE, STEP_TITLE, log_k_line, require, tau_line


def _panel_titles_left(fig: go.Figure) -> None:
    """Subplot titles at the left edge, clear of the tau label drawn above each panel."""
    for note in fig.layout.annotations:
        note.update(x=0.0, xanchor="left", font=dict(size=13))


def _sites(table: pd.DataFrame) -> list[tuple[str, str]]:
    """(site, colour) in layer order: embed first, then L0, L1, ..."""
    order = table[["layer", "site"]].drop_duplicates().sort_values("layer")
    return [(str(s), PALETTE[i % len(PALETTE)]) for i, s in enumerate(order["site"])]


def representation_curves(
    table: pd.DataFrame,
    tau: int | None = None,
    onsets: Mapping[str, int | None] | None = None,
) -> go.Figure:
    """Within- (solid) and between-group (dashed) variance of each site over steps, and their
    ratio below (both log axes): does z get written into the stream, at which layer, when?

    Zero variances (the embeddings at the decision position are one SEP token for every
    example) and undefined ratios cannot sit on a log axis and are left out."""
    require(table, ["step", "layer", "site", "within", "between", "ratio"], "representation curves")
    df = table.sort_values("step")
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("variance at the decision position", "within / between"))
    drawn = 0
    for site, color in _sites(df):
        part = df[df["site"] == site]
        shown = False
        for column, dash, label in (("within", "solid", "within"), ("between", "dash", "between")):
            d = part[np.isfinite(part[column]) & (part[column] > 0)]
            if d.empty:
                continue
            fig.add_trace(dict(
                type="scatter", x=d["step"], y=d[column], name=f"{site} {label}", legendgroup=site, mode="lines+markers",
                marker=dict(size=4), line=dict(color=color, dash=dash),
                hovertemplate=f"step %{{x}}<br>{site} {label} %{{y:.4g}}<extra></extra>",
            ), row=1, col=1)
            shown = True
            drawn += 1
        d = part[np.isfinite(part["ratio"]) & (part["ratio"] > 0)]
        if not d.empty:
            fig.add_trace(dict(
                type="scatter", x=d["step"], y=d["ratio"], name=f"{site} ratio", legendgroup=site, showlegend=not shown,
                mode="lines+markers", marker=dict(size=4), line=dict(color=color),
                hovertemplate=f"step %{{x}}<br>{site} within / between %{{y:.4g}}<extra></extra>",
            ), row=2, col=1)
            drawn += 1
    if not drawn:
        raise InterpError("representation curves: no positive variance in the table (every site is constant)")
    _panel_titles_left(fig)
    tau_line(fig, tau)
    _onset_lines(fig, onsets)
    fig.update_yaxes(title_text="squared norm (residual units², log)", type="log", row=1, col=1)
    fig.update_yaxes(title_text="within / between (ratio, log)", type="log", row=2, col=1)
    fig.update_xaxes(title_text=STEP_TITLE, row=2, col=1)
    fig.update_layout(title="Representations: within-group (z) against between-group (B) variance", height=640,
                      hovermode="closest")
    return fig


def lens_curves(
    table: pd.DataFrame,
    log_k: float,
    tau: int | None = None,
    onsets: Mapping[str, int | None] | None = None,
) -> go.Figure:
    """The logit lens over steps: each site's first-token candidate loss (top, log K dashed)
    and full-vocabulary first-token loss (bottom): which layer resolves z, and when."""
    require(table, ["step", "layer", "site", "loss_cand", "loss_first"], "lens curves")
    df = table.sort_values("step")
    if df["loss_cand"].isna().all() and df["loss_first"].isna().all():
        raise InterpError("lens curves: every loss in the table is NaN")
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("first-token candidate loss", "first-token loss (full vocabulary)"))
    for site, color in _sites(df):
        part = df[df["site"] == site]
        for row, column, name in ((1, "loss_cand", "candidate loss"), (2, "loss_first", "first-token loss")):
            d = part.dropna(subset=[column])
            if d.empty:
                continue
            fig.add_trace(dict(
                type="scatter", x=d["step"], y=d[column], name=site, legendgroup=site, showlegend=bool(row == 1 or
                part["loss_cand"].isna().all()), mode="lines+markers", marker=dict(size=4), line=dict(color=color),
                hovertemplate=f"step %{{x}}<br>{site} {name} %{{y:.3f}} nats<extra></extra>",
            ), row=row, col=1)
    _panel_titles_left(fig)
    log_k_line(fig, log_k, row=1, col=1)
    tau_line(fig, tau)
    _onset_lines(fig, onsets)
    fig.update_yaxes(title_text="candidate loss (nats)", row=1, col=1)
    fig.update_yaxes(title_text=LOSS_TITLE, row=2, col=1)
    fig.update_xaxes(title_text=STEP_TITLE, row=2, col=1)
    fig.update_layout(title="Logit lens at the decision position", height=640, hovermode="closest")
    return fig
