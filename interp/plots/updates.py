"""Figures of one-step drift against diffusion (`interp.analysis.updates`) and of the gradient
columns training logs (`dissipation`, `grad_norm`: `interp.train`). Nothing heavier than a sort
is computed here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.errors import InterpError
from interp.plots.style import PALETTE, ROUTING_COLOR, STEP_TITLE, require, tau_line

UPDATE_COLUMNS = ("step", "mu_par", "sd_par", "snr_par", "v_perp")


def update_bars(table: pd.DataFrame, tau: int | None = None) -> go.Figure:
    """Per analysed state: the drift mu_par (± sd_par over minibatches) beside the transverse
    spread sqrt(V_perp), and snr_par below. Noise holds the state where sqrt(V_perp) dwarfs
    |mu_par| and |snr_par| < 1."""
    require(table, UPDATE_COLUMNS, "update bars")
    df = table.sort_values("step")
    steps = df["step"].astype(int).tolist()
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1, row_heights=[0.62, 0.38],
                        subplot_titles=("one AdamW step: drift along the clean update against transverse spread",
                                        "SNR along the clean update (μ∥ / sd∥)"))
    fig.add_trace(go.Bar(
        x=steps, y=df["mu_par"], name="μ∥ (± sd over minibatches)", marker_color=PALETTE[0], offsetgroup="mu",
        error_y=dict(type="data", array=df["sd_par"].to_numpy(dtype=float), visible=True),
        hovertemplate="step %{x}<br>μ∥ %{y:.3g} ± %{error_y.array:.3g}<extra></extra>",
    ), row=1, col=1)
    fig.add_trace(go.Bar(
        x=steps, y=np.abs(df["mu_par"].to_numpy(dtype=float)), name="|μ∥|", marker_color=PALETTE[2],
        offsetgroup="abs", opacity=0.6, visible="legendonly",
        hovertemplate="step %{x}<br>|μ∥| %{y:.3g}<extra></extra>",
    ), row=1, col=1)
    fig.add_trace(go.Bar(
        x=steps, y=np.sqrt(np.clip(df["v_perp"].to_numpy(dtype=float), 0.0, None)), name="√V⊥ (transverse)",
        marker_color=ROUTING_COLOR, offsetgroup="perp",
        hovertemplate="step %{x}<br>√V⊥ %{y:.3g}<extra></extra>",
    ), row=1, col=1)
    fig.add_trace(go.Scatter(
        x=steps, y=df["snr_par"], name="SNR∥", mode="lines+markers", marker=dict(size=7, color=PALETTE[0]),
        line=dict(color=PALETTE[0]), hovertemplate="step %{x}<br>SNR∥ %{y:.3g}<extra></extra>",
    ), row=2, col=1)
    for y in (-1.0, 1.0):
        fig.add_hline(y=y, row=2, col=1, line=dict(color="#7f7f7f", dash="dash", width=1))
    fig.add_hline(y=0.0, row=1, col=1, line=dict(color="#7f7f7f", width=1))
    tau_line(fig, tau)
    fig.update_yaxes(title_text="parameter units", row=1, col=1)
    fig.update_yaxes(title_text="μ∥ / sd∥", row=2, col=1)
    fig.update_xaxes(title_text=STEP_TITLE, row=2, col=1)
    fig.update_layout(title="Drift against diffusion in one step", height=560, barmode="group",
                      hovermode="closest")
    return fig


def dissipation_curve(metrics: pd.DataFrame, tau: int | None = None) -> go.Figure:
    """The dissipation Q(t) = sum_{s <= t} lr_s ||g_B,s||^2 over training, and the minibatch
    gradient norm (the latest step's at each row, and the root mean square since the previous
    row) below, from the metrics log."""
    if metrics is None or metrics.empty:
        raise InterpError("dissipation curve: the metrics log is empty")
    if "dissipation" not in metrics.columns or metrics["dissipation"].isna().all():
        raise InterpError("dissipation curve: the metrics log has no dissipation column (the run was trained "
                          "before interp logged the gradient norm at every step)")
    df = metrics.sort_values("step")
    q = df.dropna(subset=["dissipation"])
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.55, 0.45])
    fig.add_trace(go.Scatter(
        x=q["step"], y=q["dissipation"], name="Q(t) = Σ lr ‖g_B‖²", mode="lines", line=dict(color=PALETTE[0]),
        hovertemplate="step %{x}<br>Q %{y:.4g}<extra></extra>",
    ), row=1, col=1)
    for i, (column, name, transform) in enumerate((("grad_norm", "‖g_B‖ (the row's step)", None),
                                                   ("grad_sq_mean", "rms ‖g_B‖ since the previous row", np.sqrt))):
        if column not in df.columns or df[column].isna().all():
            continue
        part = df.dropna(subset=[column])
        y = part[column].to_numpy(dtype=float)
        fig.add_trace(go.Scatter(
            x=part["step"], y=transform(y) if transform else y, name=name, mode="lines+markers",
            marker=dict(size=3), line=dict(color=PALETTE[1 + i], width=1.5),
            hovertemplate=f"step %{{x}}<br>{name} %{{y:.3g}}<extra></extra>",
        ), row=2, col=1)
    tau_line(fig, tau)
    fig.update_yaxes(title_text="Q = Σ lr ‖g_B‖²", row=1, col=1)
    fig.update_yaxes(title_text="‖g_B‖ (nats / param)", row=2, col=1)
    fig.update_xaxes(title_text=STEP_TITLE, row=2, col=1)
    fig.update_layout(title="Dissipation and the minibatch gradient norm", height=520, hovermode="x unified")
    return fig
