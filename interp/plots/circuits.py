"""Figures of the circuits across a family: one point per run, seeds as replicates.

    k_trend_figure   a per-run value against K (the shuffle gap's lead share, the routing
                     head's ablation effect at tau): runs, per-K means, the fitted trend in
                     log K, and the paper's values
    routing_bars     which head routes: runs per head, stacked by K
    timeline_grid    small multiples of the per-run timelines on one axis in units of tau_half

Each takes a result of `interp.sweeps.circuit_fits` (read by its attributes) or plain
tables; nothing is fitted here.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.errors import InterpError
from interp.plots.style import LOGK_COLOR, PALETTE, require
from interp.plots.sweep import FIT_COLOR, RUN_COLOR, X_TITLES, _run_traces

Y_TITLES = {"gap_lead": "shuffle-gap lead share (τ_half − t(dz > 0.1)) / τ_half",
            "gap_lead_snap": "shuffle-gap lead share against the snap",
            "ablation_at_tau": "candidate-loss change when ablated at τ (nats)"}
GRID_COLUMNS = 4
GRID_RANGE = (0.0, 2.0)  # steps / tau_half shown in every panel


def k_trend_figure(trend) -> go.Figure:
    """A `KTrend` (`lead_share`, `ablation_trend`): each run against K (log axis), the per-K
    means, the least-squares trend in log K, and the paper's values as grey references."""
    for name in ("points", "per_k", "y", "slope", "intercept", "ci", "mean", "mean_ci"):
        if not hasattr(trend, name):
            raise InterpError(f"k_trend_figure takes a lead_share or ablation_trend result; "
                              f"{type(trend).__name__} has no {name!r}")
    y = trend.y
    require(trend.points, ["run", "role", "used", "k", y], "k_trend_figure")
    traces = _run_traces(trend.points, "k", y)
    per_k = trend.per_k
    traces.append(go.Scatter(x=per_k["k"].to_numpy(float), y=per_k["mean"].to_numpy(float), mode="markers",
                             name="mean per K", marker=dict(symbol="diamond", size=11, color=RUN_COLOR),
                             hovertemplate="K %{x}<br>mean %{y:.3f}<extra></extra>"))
    ks = np.geomspace(float(trend.points["k"].min()), float(trend.points["k"].max()), 40)
    if math.isfinite(trend.slope):
        lo, hi = trend.ci
        traces.append(go.Scatter(x=ks, y=trend.intercept + trend.slope * np.log(ks), mode="lines",
                                 line=dict(color=FIT_COLOR, width=2),
                                 name=f"trend: {trend.slope:+.3g} per log K [{lo:.3g}, {hi:.3g}]"))
    paper = trend.paper or {}
    if "per_k" in paper:
        pk = sorted(paper["per_k"].items())
        traces.append(go.Scatter(x=[k for k, _ in pk], y=[v for _, v in pk], mode="markers+lines",
                                 line=dict(color=LOGK_COLOR, dash="dash", width=1), marker=dict(color=LOGK_COLOR),
                                 name=f"paper: {paper['mean']} ± {paper['sd']} over K = 3..36"))
    elif "value" in paper:
        traces.append(go.Scatter(x=[paper["k"]], y=[paper["value"]], mode="markers",
                                 marker=dict(color=LOGK_COLOR, symbol="star", size=13),
                                 name=f"paper: {paper['value']:+} nats at K = {paper['k']} ({paper['head']})"))
    fig = go.Figure(traces)
    lo, hi = trend.mean_ci
    fig.update_layout(title=f"{trend.label}: mean {trend.mean:.3g} [{lo:.3g}, {hi:.3g}] over {trend.n_used} runs",
                      height=440, xaxis=dict(type="log", title=X_TITLES["k"]), yaxis=dict(title=Y_TITLES.get(y, y)))
    return fig


def routing_bars(result) -> go.Figure:
    """A `RoutingHeads` result: runs per routing head, stacked by K."""
    if not hasattr(result, "counts") or not hasattr(result, "share_layer0"):
        raise InterpError(f"routing_bars takes a routing_heads result, got {type(result).__name__}")
    counts = result.counts
    ks = [c for c in counts.columns if c.startswith("k=")]
    traces = [go.Bar(x=counts["head"], y=counts[c], name=c.replace("k=", "K = "),
                     marker=dict(color=PALETTE[i % len(PALETTE)]),
                     hovertemplate=f"%{{x}}<br>{c.replace('k=', 'K = ')}: %{{y}} run(s)<extra></extra>")
              for i, c in enumerate(ks)]
    fig = go.Figure(traces)
    lo, hi = result.ci
    fig.update_layout(barmode="stack", height=380, xaxis=dict(title="routing head (largest z-share at the last step)"),
                      yaxis=dict(title="runs"),
                      title=f"Which head routes: layer 0 in {result.n_layer0} of {result.n_used} runs "
                            f"({result.share_layer0:.0%}, CI {lo:.2f}-{hi:.2f})")
    return fig


def timeline_grid(series: dict[str, dict], table: pd.DataFrame) -> go.Figure:
    """Small multiples, one per run, sharing the step axis in units of tau_half (0 to 2): the
    candidate loss over log K, the shuffle gap over its largest value, the routing head's
    z-share when the run was analysed, and vertical lines at the gap's onset (dz > 0.1 nats),
    the z-share's carried onset and tau itself, so the order of events reads across the family.

    `series[run]` holds "metrics" (step, loss_cand, shuffle_gap) and optionally "z_share"
    (step, z_share); `table` the sweep table with tau_half, k, gap_onset (and the circuit
    columns when present)."""
    require(table, ["run", "k", "tau_half", "gap_onset"], "timeline grid")
    info = table.set_index(table["run"].astype(str))
    runs = [r for r in series if r in info.index and np.isfinite(float(info.loc[r, "tau_half"]))]
    if not runs:
        raise InterpError("timeline grid: no run with a tau_half (every run is unfinished or censored)")
    runs.sort(key=lambda r: (float(info.loc[r, "k"]), r))
    cols = min(GRID_COLUMNS, len(runs))
    rows = math.ceil(len(runs) / cols)
    titles = [f"{r} (τ = {float(info.loc[r, 'tau_half']):.0f})" for r in runs]
    fig = make_subplots(rows=rows, cols=cols, shared_xaxes=True, shared_yaxes=True, subplot_titles=titles,
                        vertical_spacing=min(0.08, 0.5 / rows), horizontal_spacing=0.03)
    colors = {"loss": PALETTE[0], "gap": PALETTE[1], "share": PALETTE[2]}
    for i, name in enumerate(runs):
        row, col = i // cols + 1, i % cols + 1
        tau = float(info.loc[name, "tau_half"])
        k = int(info.loc[name, "k"])
        m = series[name]["metrics"].dropna(subset=["loss_cand"]).sort_values("step")
        x = m["step"].to_numpy(float) / tau
        keep = x <= GRID_RANGE[1]
        gap = m["shuffle_gap"].to_numpy(float)
        top = np.nanmax(gap) if np.isfinite(gap).any() and np.nanmax(gap) > 0 else 1.0
        first = i == 0
        fig.add_trace(go.Scatter(x=x[keep], y=m["loss_cand"].to_numpy(float)[keep] / math.log(k), mode="lines",
                                 line=dict(color=colors["loss"], width=1.5), name="candidate loss / log K",
                                 legendgroup="loss", showlegend=first,
                                 hovertemplate=f"{name}<br>step/τ %{{x:.2f}}<br>Lc / log K %{{y:.3f}}<extra></extra>"),
                      row=row, col=col)
        fig.add_trace(go.Scatter(x=x[keep], y=gap[keep] / top, mode="lines", line=dict(color=colors["gap"], width=1.2),
                                 name="shuffle gap / its max", legendgroup="gap", showlegend=first,
                                 hovertemplate=f"{name}<br>step/τ %{{x:.2f}}<br>dz / max %{{y:.3f}}<extra></extra>"),
                      row=row, col=col)
        share = series[name].get("z_share")
        if share is not None and len(share):
            xs = share["step"].to_numpy(float) / tau
            ks = xs <= GRID_RANGE[1]
            head = info.loc[name, "routing_head"] if "routing_head" in info.columns else "routing head"
            fig.add_trace(go.Scatter(x=xs[ks], y=share["z_share"].to_numpy(float)[ks], mode="lines+markers",
                                     marker=dict(size=4), line=dict(color=colors["share"], width=1.2),
                                     name="routing head's z-share", legendgroup="share", showlegend=first,
                                     hovertemplate=f"{name} {head}<br>step/τ %{{x:.2f}}<br>z-share %{{y:.3f}}"
                                                   f"<extra></extra>"), row=row, col=col)
        marks = [(1.0, "τ_half", "#444444", "solid")]
        onset = float(info.loc[name, "gap_onset"])
        if math.isfinite(onset):
            marks.append((onset / tau, "dz > 0.1 nats", colors["gap"], "dash"))
        if "carried_share_onset" in info.columns and math.isfinite(float(info.loc[name, "carried_share_onset"])):
            marks.append((float(info.loc[name, "carried_share_onset"]) / tau, "z carried", colors["share"], "dot"))
        for xv, label, color, dash in marks:
            fig.add_trace(go.Scatter(x=[xv, xv], y=[0, 1.05], mode="lines", line=dict(color=color, dash=dash, width=1),
                                     name=label, legendgroup=f"mark {label}", showlegend=first,
                                     hovertemplate=f"{name}: {label} at step/τ {xv:.2f}<extra></extra>"),
                          row=row, col=col)
    fig.update_xaxes(range=list(GRID_RANGE))
    fig.update_yaxes(range=[0, 1.08])
    for c in range(1, cols + 1):
        fig.update_xaxes(title_text="step / τ_half", row=rows, col=c)
    fig.update_layout(height=170 * rows + 140, title="Every run's timeline, steps in units of its τ_half",
                      hovermode="closest", margin=dict(t=90))
    return fig
