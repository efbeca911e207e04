"""The gradients analysis's figure: gradient signal against minibatch noise across checkpoints.

Input is the tidy "gradients" table of `interp.analysis.gradients` (one row per step); nothing
heavier than a sort is computed here.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.plots.geometry import _onset_lines
from interp.plots.style import PALETTE, STEP_TITLE, require, tau_line

# (column, legend name, colour index) of each panel's curves
PANELS = (
    ("‖g‖ and E‖g_B − g‖ (nats / param, log)", (("grad_norm", "‖g‖", 0), ("noise_norm", "E‖g_B − g‖", 1)), "log"),
    ("noise / signal (ratio)", (("noise_to_signal", "noise / signal", 1),), "linear"),
    ("n × coherence (1: orthogonal)", (("n_coherence", "n × coherence", 2),), "linear"),
    ("selector SNR × √n (≈ 1: cancellation)", (("selector_snr_sqrt_n", "selector SNR × √n", 3),), "linear"),
)
CURVATURE = ("Var ⟨g_B, v⟩ (nats² / param², log)",
             (("noise_var_vmax", "along v_max", 4), ("noise_var_vmin", "along v_min", 5),
              ("noise_var_random", "random", 7)), "log")


def gradient_curves(
    table: pd.DataFrame, tau: int | None = None, onsets: Mapping[str, int | None] | None = None
) -> go.Figure:
    """Stacked panels on one step axis: ||g|| against the minibatch noise (log), their ratio,
    n x coherence, selector SNR x sqrt(n) and, when the table has them, the minibatch noise
    variance along v_max, v_min and random directions (log)."""
    require(table, ["step", "grad_norm", "noise_norm", "noise_to_signal", "n_coherence", "selector_snr_sqrt_n"],
            "gradients")
    df = table.sort_values("step")
    panels = list(PANELS)
    if any(c in df and np.isfinite(df[c].to_numpy(dtype=float)).any() for c in ("noise_var_vmax", "noise_var_vmin")):
        panels.append(CURVATURE)
    fig = make_subplots(rows=len(panels), cols=1, shared_xaxes=True, vertical_spacing=0.04,
                        subplot_titles=[title for title, _, _ in panels])
    for row, (title, curves, scale) in enumerate(panels, start=1):
        for column, name, colour in curves:
            if column not in df:
                continue
            values = df[column].to_numpy(dtype=float)
            keep = np.isfinite(values) & ((values > 0) if scale == "log" else True)
            if not keep.any():
                continue
            fig.add_trace(go.Scatter(
                x=df["step"][keep], y=values[keep], name=name, mode="lines+markers", marker=dict(size=5),
                line=dict(color=PALETTE[colour % len(PALETTE)]), legendgroup=name,
                hovertemplate=f"step %{{x}}<br>{name} = %{{y:.3g}}<extra></extra>",
            ), row=row, col=1)
        fig.update_yaxes(type=scale, title_text=None, row=row, col=1)
    fig.add_hline(y=1.0, row=3, col=1, line=dict(color="#7f7f7f", width=1, dash="dash"))
    fig.add_hline(y=1.0, row=4, col=1, line=dict(color="#7f7f7f", width=1, dash="dash"))
    tau_line(fig, tau)
    _onset_lines(fig, onsets)
    fig.update_xaxes(title_text=STEP_TITLE, row=len(panels), col=1)
    fig.update_layout(title="Gradient signal and minibatch noise", height=230 * len(panels) + 80,
                      legend=dict(orientation="h", y=-0.06 if len(panels) > 4 else -0.08))
    return fig
