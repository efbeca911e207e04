"""Figures of the weight-only tables: the trajectory between checkpoints and the head spectra.

Inputs are the tidy tables of `interp.analysis.trajectory` ("trajectory": step, component, kind,
displacement_per_step, cosine, weight_norm, ...) and `interp.analysis.spectra` ("spectra": step,
head_name, circuit, effective_rank, sigma_ratio, ...). Steps on a real axis, tau dotted and onsets
dashed as in every figure over steps; nothing heavier than a group-by is computed here.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.errors import InterpError
from interp.plots.geometry import _onset_lines
from interp.plots.style import PALETTE, ROUTING_COLOR, STEP_TITLE, head_order, require, tau_line

KIND_ORDER = ("embed", "head", "attn", "mlp", "ln", "unembed", "all")


def _per_kind(df: pd.DataFrame, column: str) -> pd.DataFrame:
    """Root-sum-square of `column` over the components of each kind, per step (the norm of the
    kind's concatenated weights, or of its displacement); "all" is the table's own row."""
    parts = df[df["kind"] != "all"].assign(_sq=lambda d: d[column] ** 2)
    rss = parts.groupby(["kind", "step"], as_index=False)["_sq"].sum(min_count=1)
    rss[column] = np.sqrt(rss.pop("_sq"))
    whole = df.loc[df["kind"] == "all", ["kind", "step", column]]
    return pd.concat([rss, whole], ignore_index=True)


def _kinds(df: pd.DataFrame) -> list[tuple[str, str]]:
    present = set(df["kind"])
    kinds = [k for k in KIND_ORDER if k in present] + sorted(present - set(KIND_ORDER))
    return [(k, "black" if k == "all" else PALETTE[i % len(PALETTE)]) for i, k in enumerate(kinds)]


def trajectory_curves(
    table: pd.DataFrame,
    tau: int | None = None,
    onsets: Mapping[str, int | None] | None = None,
) -> go.Figure:
    """Displacement per step per kind of component (top, log axis), the direction consistency of
    the whole parameter vector (middle: about 0 for a random walk, near 1 for a steady drift) and
    the weight norm per kind (bottom): does the plateau wander, and when does the drift line up?"""
    require(table, ["step", "component", "kind", "displacement_per_step", "cosine", "weight_norm"],
            "trajectory curves")
    df = table.sort_values("step")
    disp = _per_kind(df, "displacement_per_step")
    norms = _per_kind(df, "weight_norm")
    cos = df[df["kind"] == "all"].dropna(subset=["cosine"])
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.07,
                        subplot_titles=("displacement per step (root-sum-square over each kind's components)",
                                        "direction consistency: cosine of consecutive displacements (all)",
                                        "weight norm per kind"))
    drawn = 0
    for kind, color in _kinds(df):
        width = 3 if kind == "all" else 2
        d = disp[(disp["kind"] == kind) & np.isfinite(disp["displacement_per_step"])
                 & (disp["displacement_per_step"] > 0)]
        if not d.empty:
            fig.add_trace(dict(
                type="scatter", x=d["step"], y=d["displacement_per_step"], name=kind, legendgroup=kind, mode="lines+markers",
                marker=dict(size=4), line=dict(color=color, width=width),
                hovertemplate=f"step %{{x}}<br>{kind}: %{{y:.3g}} per step<extra></extra>",
            ), row=1, col=1)
            drawn += 1
        n = norms[(norms["kind"] == kind) & np.isfinite(norms["weight_norm"])]
        if not n.empty:
            fig.add_trace(dict(
                type="scatter", x=n["step"], y=n["weight_norm"], name=kind, legendgroup=kind, showlegend=d.empty,
                mode="lines+markers", marker=dict(size=4), line=dict(color=color, width=width),
                hovertemplate=f"step %{{x}}<br>{kind}: norm %{{y:.4g}}<extra></extra>",
            ), row=3, col=1)
            drawn += 1
    if not cos.empty:
        fig.add_trace(dict(
            type="scatter", x=cos["step"], y=cos["cosine"], name="cosine (all)", mode="lines+markers", marker=dict(size=5),
            line=dict(color=ROUTING_COLOR), hovertemplate="step %{x}<br>cosine %{y:.3f}<extra></extra>",
        ), row=2, col=1)
        drawn += 1
    if not drawn:
        raise InterpError("trajectory curves: no finite displacement, cosine or weight norm in the table")
    fig.add_hline(y=0.0, row=2, col=1, line=dict(color="#7f7f7f", width=1))
    tau_line(fig, tau)
    _onset_lines(fig, onsets)
    fig.update_yaxes(title_text="||Δθ|| / Δt (param units / step, log)", type="log", row=1, col=1)
    fig.update_yaxes(title_text="cosine", range=[-1.05, 1.05], row=2, col=1)
    fig.update_yaxes(title_text="||θ|| (param units)", row=3, col=1)
    fig.update_xaxes(title_text=STEP_TITLE, row=3, col=1)
    fig.update_layout(title="Weight trajectory between saved checkpoints", height=820, hovermode="closest")
    return fig


def spectra_curves(
    spectra: pd.DataFrame,
    tau: int | None = None,
    onsets: Mapping[str, int | None] | None = None,
    highlight: str | None = None,
) -> go.Figure:
    """Per circuit (OV top, QK bottom): each head's effective rank (left) and sigma_1 / sigma_2
    (right, log axis) over steps; the head named by `highlight` (the routing head) in thick red.
    A head that specialises shows a falling effective rank and a rising sigma ratio."""
    require(spectra, ["step", "layer", "head", "head_name", "circuit", "effective_rank", "sigma_ratio"],
            "spectra curves")
    df = spectra.sort_values("step")
    circuits = [c for c in ("OV", "QK") if c in set(df["circuit"])]
    if not circuits:
        raise InterpError(f"spectra curves: no OV or QK rows in the table (circuits: "
                          f"{', '.join(map(str, sorted(set(df['circuit']))))})")
    fig = make_subplots(rows=len(circuits), cols=2, shared_xaxes=True, vertical_spacing=0.1,
                        horizontal_spacing=0.1,
                        subplot_titles=[f"{c} {what}" for c in circuits
                                        for what in ("effective rank", "σ₁ / σ₂")])
    heads = head_order(df)
    palette = [c for c in PALETTE if c != PALETTE[1]] if highlight else PALETTE  # no second red beside the highlight
    drawn = 0
    for i, name in enumerate(heads):
        hot = highlight is not None and name == highlight
        color = ROUTING_COLOR if hot else palette[i % len(palette)]
        line = dict(color=color, width=4 if hot else 1.5)
        shown = False
        for row, circuit in enumerate(circuits, start=1):
            part = df[(df["head_name"] == name) & (df["circuit"] == circuit)]
            for col, column, label in ((1, "effective_rank", "effective rank"), (2, "sigma_ratio", "σ₁/σ₂")):
                d = part[np.isfinite(part[column]) & (part[column] > 0)]
                if d.empty:
                    continue
                fig.add_trace(dict(
                    type="scatter", x=d["step"], y=d[column], name=name, legendgroup=name, showlegend=not shown,
                    mode="lines+markers", marker=dict(size=6 if hot else 3), line=line,
                    opacity=1.0 if hot or not highlight else 0.7,
                    hovertemplate=f"step %{{x}}<br>{name} {circuit} {label} %{{y:.3g}}<extra></extra>",
                ), row=row, col=col)
                shown = True
                drawn += 1
    if not drawn:
        raise InterpError("spectra curves: no finite effective rank or σ₁/σ₂ in the table")
    tau_line(fig, tau)
    _onset_lines(fig, onsets)
    for row, circuit in enumerate(circuits, start=1):
        fig.update_yaxes(title_text=f"{circuit} effective rank", row=row, col=1)
        fig.update_yaxes(title_text=f"{circuit} σ₁ / σ₂ (log)", type="log", row=row, col=2)
    for col in (1, 2):
        fig.update_xaxes(title_text=STEP_TITLE, row=len(circuits), col=col)
    title = "Head spectra: effective rank and σ₁ / σ₂ of OV = W_V W_O and QK = W_Q W_Kᵀ"
    fig.update_layout(title=title + (f" ({highlight} in red)" if highlight else ""),
                      height=330 * len(circuits) + 140, hovermode="closest")
    return fig
