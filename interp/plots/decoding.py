"""Figures of what the residual stream knows and what each part writes (issue 50): the probe accuracy by layer and
step, the per-head direct logit attribution by step, the erasure curve and the unembedding's geometry.

Inputs are the tidy tables of `interp.analysis.probes` (step, layer, site, accuracy, selectivity, decodable, ...),
`interp.analysis.attribution` (step, component, kind, attribution, ...), `interp.analysis.erasure` (step, site,
used_share, ...) and `interp.analysis.unembed_geometry` (step, within_cos, ...); steps on a real axis, tau dotted and
the events dashed as in every figure over steps.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.errors import InterpError
from interp.plots.activations import _panel_titles_left, _sites
from interp.plots.geometry import _onset_lines
from interp.plots.style import PALETTE, STEP_TITLE, require, tau_line


def probe_heatmap(table: pd.DataFrame, tau: int | None = None, onsets: Mapping[str, int | None] | None = None
                  ) -> go.Figure:
    """Held-out probe accuracy by site (rows: embed, L0, L1, ...) and checkpoint (columns), with the decodable cells
    marked, and below it each site's selectivity over steps."""
    require(table, ["step", "layer", "site", "accuracy", "selectivity", "decodable", "chance"], "probe heatmap")
    df = table.sort_values(["layer", "step"])
    sites = [s for s, _ in _sites(df)]
    steps = sorted(df["step"].unique())
    grid = df.pivot_table(index="site", columns="step", values="accuracy").reindex(index=sites, columns=steps)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=False, vertical_spacing=0.14, row_heights=[0.5, 0.5],
                        subplot_titles=("held-out probe accuracy for z (chance 1/K; x: decodable)",
                                        "selectivity (accuracy - control accuracy)"))
    fig.add_trace(go.Heatmap(x=[str(s) for s in steps], y=sites, z=grid.to_numpy(float), colorscale="Viridis",
                             zmin=float(df["chance"].iloc[0]), zmax=1, colorbar=dict(title="accuracy", len=0.45, y=0.78),
                             hovertemplate="step %{x}<br>%{y}: accuracy %{z:.3f}<extra></extra>"), row=1, col=1)
    hit = df[df["decodable"].astype(bool)]
    if not hit.empty:
        fig.add_trace(go.Scatter(x=hit["step"].astype(str), y=hit["site"], mode="text", text=["x"] * len(hit),
                                 textfont=dict(color="white", size=11), showlegend=False, hoverinfo="skip"), row=1, col=1)
    for site, color in _sites(df):
        part = df[df["site"] == site]
        fig.add_trace(go.Scatter(x=part["step"], y=part["selectivity"], name=site, mode="lines+markers",
                                 marker=dict(size=4), line=dict(color=color),
                                 hovertemplate=f"step %{{x}}<br>{site} selectivity %{{y:.3f}}<extra></extra>"),
                      row=2, col=1)
    _panel_titles_left(fig)
    tau_line(fig, tau, row=2, col=1)
    _onset_lines(fig, onsets)
    fig.update_xaxes(title_text=STEP_TITLE + " (checkpoints)", type="category", row=1, col=1)
    fig.update_xaxes(title_text=STEP_TITLE, row=2, col=1)
    fig.update_yaxes(title_text="site", row=1, col=1)
    fig.update_yaxes(title_text="selectivity", row=2, col=1)
    fig.update_layout(title="Probes: when is z linearly decodable at the decision position?", height=680,
                      hovermode="closest")
    return fig


def attribution_curves(table: pd.DataFrame, tau: int | None = None, onsets: Mapping[str, int | None] | None = None,
                       highlight: str | None = None) -> go.Figure:
    """Each head's (and MLP's, and the embeddings') direct logit attribution to the correct candidate over steps,
    with the model's own logit difference; the routing head thick."""
    require(table, ["step", "component", "kind", "attribution"], "attribution curves")
    df = table.sort_values("step")
    fig = go.Figure()
    shown = df[df["kind"].isin(["head", "mlp", "embed", "logit_diff"])]
    for i, (name, part) in enumerate(shown.groupby("component", sort=False)):
        kind = str(part["kind"].iloc[0])
        width = 3.5 if name == highlight else 2.0 if kind == "logit_diff" else 1.2
        dash = "dot" if kind == "mlp" else "dash" if kind == "logit_diff" else "solid"
        color = "#000000" if kind == "logit_diff" else PALETTE[i % len(PALETTE)]
        fig.add_trace(go.Scatter(x=part["step"], y=part["attribution"], name=str(name), mode="lines+markers",
                                 marker=dict(size=3), line=dict(color=color, width=width, dash=dash),
                                 hovertemplate=f"step %{{x}}<br>{name}: %{{y:+.3f}} nats<extra></extra>"))
    if not fig.data:
        raise InterpError("attribution curves: the table holds no component")
    tau_line(fig, tau)
    _onset_lines(fig, onsets)
    fig.update_xaxes(title_text=STEP_TITLE)
    fig.update_yaxes(title_text="direct logit attribution (nats of logit difference)")
    fig.update_layout(title="Who writes the correct candidate's logit difference (direct logit attribution)",
                      height=520, hovermode="closest")
    return fig


def erasure_curves(table: pd.DataFrame, log_k: float, tau: int | None = None,
                   onsets: Mapping[str, int | None] | None = None) -> go.Figure:
    """Per site, the first-token candidate loss with z erased by LEACE against the clean one (top), and the share of
    the model's use of z that erasing removes (bottom)."""
    require(table, ["step", "layer", "site", "loss_clean", "loss_erased", "used_share"], "erasure curves")
    df = table.sort_values("step")
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("first-token candidate loss: clean (black) and with z erased at each site",
                                        "share of the use of z that erasure removes"))
    clean = df.drop_duplicates("step")
    fig.add_trace(go.Scatter(x=clean["step"], y=clean["loss_clean"], name="clean", mode="lines",
                             line=dict(color="#000000", width=2)), row=1, col=1)
    for site, color in _sites(df):
        part = df[df["site"] == site]
        fig.add_trace(go.Scatter(x=part["step"], y=part["loss_erased"], name=f"{site} erased", legendgroup=site,
                                 mode="lines+markers", marker=dict(size=4), line=dict(color=color)), row=1, col=1)
        d = part[np.isfinite(part["used_share"].astype(float))]
        fig.add_trace(go.Scatter(x=d["step"], y=d["used_share"], name=site, legendgroup=site, showlegend=False,
                                 mode="lines+markers", marker=dict(size=4), line=dict(color=color)), row=2, col=1)
    fig.add_hline(y=log_k, line=dict(color="#7f7f7f", dash="dash", width=1), row=1, col=1)
    _panel_titles_left(fig)
    tau_line(fig, tau)
    _onset_lines(fig, onsets)
    fig.update_yaxes(title_text="candidate loss (nats)", row=1, col=1)
    fig.update_yaxes(title_text="share", row=2, col=1)
    fig.update_xaxes(title_text=STEP_TITLE, row=2, col=1)
    fig.update_layout(title="Erasure: how much of the use of z is linearly decodable", height=640, hovermode="closest")
    return fig


def unembed_curves(table: pd.DataFrame, tau: int | None = None, onsets: Mapping[str, int | None] | None = None
                   ) -> go.Figure:
    """The unembedding's geometry over steps: cosines among a base's candidates' columns, the alignment with the
    selectors, and W_U's effective rank."""
    require(table, ["step", "within_cos", "cos_to_centroid", "selector_alignment", "effective_rank"], "unembedding")
    df = table.sort_values("step")
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("cosines over a base's candidates' first-character columns",
                                        "W_U's effective rank"))
    for i, (column, label) in enumerate((("within_cos", "mean pairwise cosine"), ("cos_to_centroid", "cosine to centroid"),
                                         ("centroid_to_mean_cos", "centroid to mean column"),
                                         ("selector_alignment", "alignment with own selector"))):
        if column in df:
            fig.add_trace(go.Scatter(x=df["step"], y=df[column], name=label, mode="lines+markers", marker=dict(size=4),
                                     line=dict(color=PALETTE[i % len(PALETTE)])), row=1, col=1)
    fig.add_trace(go.Scatter(x=df["step"], y=df["effective_rank"], name="effective rank", mode="lines+markers",
                             marker=dict(size=4), line=dict(color="#000000")), row=2, col=1)
    _panel_titles_left(fig)
    tau_line(fig, tau)
    _onset_lines(fig, onsets)
    fig.update_xaxes(title_text=STEP_TITLE, row=2, col=1)
    fig.update_layout(title="The unembedding's geometry over the candidates", height=600, hovermode="closest")
    return fig
