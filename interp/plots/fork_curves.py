"""Figures of a fork family's runs: candidate loss after the fork, and Gamma per arm.

The curves put every fork on the same clock, steps since its fork step, so that arms started
at one step compare directly; one panel per fork step, the parent (from that step on, up to
the horizon) as the thick black line the arms are measured against. The loss is in units of
log K, where the escape thresholds are fixed (0.5 for escape_half, 0.05 for the snap).
Gamma is drawn per fork step and arm: a bar at the mean, each fork's own value as a point,
so one odd seed is visible. Tables in, figures out: nothing here reads a run.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.errors import InterpError
from interp.plots.style import PALETTE, TAU_COLOR, require

CURVE_COLUMNS = ("run", "fork_step", "label", "seed", "step", "loss_cand")
THRESHOLDS = ((0.5, "dash", "0.5 log K (escape_half)"), (0.05, "dot", "0.05 log K (snap)"))


def arm_colors(labels: list[str]) -> dict[str, str]:
    """One colour per arm label, in the order given (the same in every figure of a report)."""
    return {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(labels)}


def fork_loss_curves(curves: pd.DataFrame, parent: pd.DataFrame | None, log_k: float, horizon: int,
                     labels: list[str] | None = None) -> go.Figure:
    """Candidate loss / log K against steps since the fork: one panel per fork step, one thin line
    per fork (coloured by arm), the parent's curve from the fork step on as a thick black line.
    `curves` has CURVE_COLUMNS; `parent` has step and loss_cand (None: the parent is missing)."""
    require(curves, CURVE_COLUMNS, "fork loss curves")
    if not (math.isfinite(log_k) and log_k > 0):
        raise InterpError(f"fork loss curves: log K must be positive, got {log_k}")
    steps = sorted(int(s) for s in curves["fork_step"].unique())
    labels = labels or list(dict.fromkeys(curves["label"]))
    colors = arm_colors(labels)
    cols = min(len(steps), 3)
    rows = -(-len(steps) // cols)
    fig = make_subplots(rows=rows, cols=cols, shared_yaxes=True, horizontal_spacing=0.04,
                        vertical_spacing=0.12, subplot_titles=[f"forked at step {s}" for s in steps])
    shown: set[str] = set()
    for i, step in enumerate(steps):
        where = dict(row=i // cols + 1, col=i % cols + 1)
        if parent is not None and not parent.empty:
            part = parent[(parent["step"] >= step) & (parent["step"] <= step + horizon)].dropna(subset=["loss_cand"])
            fig.add_trace(go.Scatter(
                x=part["step"] - step, y=part["loss_cand"] / log_k, mode="lines", name="parent",
                legendgroup="parent", showlegend="parent" not in shown, line=dict(color=TAU_COLOR, width=4),
                hovertemplate="parent at step %{customdata}<br>Lc / log K %{y:.3f}<extra></extra>",
                customdata=part["step"]), **where)
            shown.add("parent")
        for label in labels:
            for run, one in curves[(curves["fork_step"] == step) & (curves["label"] == label)].groupby("run", sort=False):
                one = one.sort_values("step").dropna(subset=["loss_cand"])
                seed = one["seed"].iloc[0]
                fig.add_trace(go.Scatter(
                    x=one["step"] - step, y=one["loss_cand"] / log_k, mode="lines", name=label, legendgroup=label,
                    showlegend=label not in shown, line=dict(color=colors.get(label, PALETTE[0]), width=1.3),
                    opacity=0.85, hovertemplate=f"{run} (seed {seed})<br>%{{x}} steps after the fork<br>"
                                                f"Lc / log K %{{y:.3f}}<extra></extra>"), **where)
                shown.add(label)
    for y, dash, text in THRESHOLDS:
        fig.add_hline(y=y, line=dict(color="#7f7f7f", dash=dash, width=1), annotation_text=text,
                      annotation_position="top right", annotation_font=dict(size=10, color="#555"),
                      row="all", col="all")
    fig.update_xaxes(title_text="steps since the fork", row=rows)
    fig.update_yaxes(title_text="candidate loss / log K", col=1)
    fig.update_layout(height=420 * rows, title="Candidate loss after the fork: parent (black) and every fork, "
                                               "coloured by arm (one line per seed)")
    return fig


def gamma_by_arm(table: pd.DataFrame, labels: list[str] | None = None) -> go.Figure:
    """Gamma (realised update power) per arm: a bar at the mean of the done forks that measured it,
    one bar group per fork step, each fork's value as a point. `table` has run, fork_step, label, gamma."""
    require(table, ("run", "fork_step", "label", "gamma"), "Gamma by arm")
    df = table.assign(gamma=pd.to_numeric(table["gamma"], errors="coerce")).dropna(subset=["gamma"])
    if df.empty:
        raise InterpError("Gamma by arm: no fork measured Gamma")
    labels = [lab for lab in (labels or list(dict.fromkeys(df["label"]))) if lab in set(df["label"])]
    traces = []
    for i, step in enumerate(sorted(int(s) for s in df["fork_step"].unique())):
        at = df[df["fork_step"] == step]
        means = at.groupby("label")["gamma"].mean().reindex(labels)
        color = PALETTE[i % len(PALETTE)]
        traces.append(go.Bar(x=labels, y=means.to_numpy(), name=f"fork step {step} (mean)", offsetgroup=str(step),
                             marker=dict(color=color, opacity=0.45), legendgroup=str(step),
                             hovertemplate=f"fork step {step}<br>%{{x}}: mean Gamma %{{y:.3g}}<extra></extra>"))
        traces.append(go.Scatter(x=at["label"], y=at["gamma"], mode="markers", offsetgroup=str(step),
                                 name=f"fork step {step} (each fork)", legendgroup=str(step),
                                 marker=dict(color=color, size=8, line=dict(width=1, color="black")),
                                 text=at["run"], hovertemplate="%{text}<br>Gamma %{y:.3g}<extra></extra>"))
    fig = go.Figure(traces)
    fig.update_layout(title="Gamma per arm: sum ||u - s||² / sum ||s||² (realised against clean full-batch "
                            "update); bars: mean over forks, points: each fork", height=440, barmode="group",
                      scattermode="group",
                      xaxis=dict(title="arm", type="category", categoryorder="array", categoryarray=labels),
                      yaxis=dict(title="Gamma (realised update power)", rangemode="tozero"))
    return fig
