"""Figures of one run's analysis tables.

Every function maps tidy tables of `interp.analysis.*` (or a run's metrics) to a
`plotly.graph_objects.Figure` and computes nothing heavier than a pivot, so figures can be
redrawn from cached tables in milliseconds. Conventions shared by all figures: steps are
optimizer steps on a real (unevenly sampled) step axis, losses are in nats, heads are named
`L{layer}H{head}` with L0H0 first, log K is a dashed horizontal line on loss plots and tau
a dotted vertical line wherever time is on the x axis.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.analysis import groups as groups_analysis
from interp.errors import InterpError
from interp.plots.style import (
    COLUMN_TITLES,
    LOGK_COLOR,
    LOSS_TITLE,
    ONSET_COLOR,
    PALETTE,
    ROUTING_COLOR,
    STEP_TITLE,
    TAU_COLOR,
    head_heatmap,
    head_order,
    log_k_line,
    loss_traces,
    metric_title,
    onset_trace,
    position_labels,
    require,
    shuffle_trace,
    tau_line,
)


# ---------------------------------------------------------------------------- losses
def loss_curves(metrics: pd.DataFrame, log_k: float, tau: int | None = None) -> go.Figure:
    """Full, first-token and candidate loss vs step: the plateau at log K and the snap."""
    require(metrics, ["step"], "loss curves")
    traces = loss_traces(metrics)
    if not traces:
        raise InterpError("loss curves: the metrics have no loss values yet")
    fig = go.Figure(traces)
    log_k_line(fig, log_k)
    tau_line(fig, tau)
    fig.update_layout(title="Losses: the plateau at log K, then the snap", height=450,
                      xaxis_title=STEP_TITLE, yaxis_title=LOSS_TITLE, hovermode="x unified")
    return fig


def shuffle_gap(metrics: pd.DataFrame, tau: int | None = None) -> go.Figure:
    """Shuffle gap (first-token loss with another selector minus the clean one): does z matter yet?"""
    require(metrics, ["step", "shuffle_gap"], "shuffle gap")
    if metrics["shuffle_gap"].isna().all():
        raise InterpError("shuffle gap: the run has no shuffle gap (its direction has no selector z)")
    fig = go.Figure([shuffle_trace(metrics)])
    fig.add_hline(y=0.0, line=dict(color=LOGK_COLOR, width=1))
    tau_line(fig, tau)
    fig.update_layout(title="Shuffle gap: the cost of replacing z by another selector", height=380,
                      xaxis_title=STEP_TITLE, yaxis_title="shuffle gap Δz (nats)", showlegend=False)
    return fig


# ---------------------------------------------------------------------------- sensitivity
def sensitivity_heatmap(
    sens: pd.DataFrame,
    column: str = "z_share",
    tau: int | None = None,
    onsets: pd.DataFrame | None = None,
    highlight: str | None = None,
) -> go.Figure:
    """Heads x steps heatmap of one sensitivity column, with each head's onset as a marker."""
    trace, order = head_heatmap(sens, column)
    fig = go.Figure([trace])
    if onsets is not None and not onsets.empty:
        fig.add_trace(onset_trace(onsets, highlight))
    tau_line(fig, tau)
    fig.update_layout(
        title=f"Per-head {COLUMN_TITLES.get(column, column)} at the decision position", height=120 + 34 * len(order),
        xaxis_title=STEP_TITLE, yaxis=dict(title="head", autorange="reversed", type="category"),
        showlegend=False,
    )
    return fig


# ---------------------------------------------------------------------------- attention
def attention_evolution(
    patterns: pd.DataFrame, labels: list[str] | None = None, step: int | None = None
) -> go.Figure:
    """One query x key heatmap per head, with a slider over checkpoints (one plotly frame per step).

    Entries above the diagonal are masked: causal attention cannot look ahead, and leaving
    them blank makes the lower triangle readable. `step` is the frame shown first (default
    the first step).
    """
    require(patterns, ["step", "layer", "head", "head_name", "query", "key", "weight"], "attention evolution")
    steps = sorted(int(s) for s in patterns["step"].unique())
    n_layers, n_heads = int(patterns["layer"].max()) + 1, int(patterns["head"].max()) + 1
    t = int(max(patterns["query"].max(), patterns["key"].max())) + 1
    cube = np.full((len(steps), n_layers, n_heads, t, t), np.nan)
    cube[np.searchsorted(steps, patterns["step"].to_numpy()), patterns["layer"].to_numpy(),
         patterns["head"].to_numpy(), patterns["query"].to_numpy(), patterns["key"].to_numpy()] = \
        patterns["weight"].to_numpy(dtype=float)
    q, k = np.meshgrid(np.arange(t), np.arange(t), indexing="ij")
    cube[..., k > q] = np.nan
    if step is not None and step not in steps:
        raise InterpError(f"attention evolution: step {step} is not in the table; steps: {steps}")
    first = 0 if step is None else steps.index(step)
    names = {(int(r.layer), int(r.head)): str(r.head_name)
             for r in patterns[["layer", "head", "head_name"]].drop_duplicates().itertuples()}
    heads = [(l, h) for l in range(n_layers) for h in range(n_heads)]
    panel, gap = 270, 120  # pixels: a panel, the gap below it (ticks, next title)
    height = n_layers * (panel + gap) + 160
    fig = make_subplots(rows=n_layers, cols=n_heads, subplot_titles=[names.get(lh, "") for lh in heads],
                        horizontal_spacing=0.05, vertical_spacing=min(0.3, gap / (height - 160)))
    positions = list(range(t))
    ticks = position_labels(positions, labels)

    def heatmap(s: int, l: int, h: int) -> go.Heatmap:
        return go.Heatmap(z=cube[s, l, h], x=positions, y=positions, coloraxis="coloraxis",
                          name=names.get((l, h), f"L{l}H{h}"), customdata=np.array(ticks)[None, :].repeat(t, 0),
                          hovertemplate="query %{y}<br>key %{customdata}<br>weight %{z:.3f}<extra>%{fullData.name}</extra>")

    for l, h in heads:
        fig.add_trace(heatmap(first, l, h), row=l + 1, col=h + 1)
    fig.frames = [go.Frame(name=str(s), data=[heatmap(i, l, h) for l, h in heads], traces=list(range(len(heads))))
                  for i, s in enumerate(steps)]
    animate = dict(mode="immediate", frame=dict(duration=0, redraw=True), transition=dict(duration=0))
    fig.update_layout(
        title="Mean attention pattern per head (query x key), across checkpoints",
        height=height,
        coloraxis=dict(colorscale="Viridis", cmin=0.0, cmax=1.0,
                       colorbar=dict(title=dict(text="attention weight (mass)", side="right"))),
        sliders=[dict(
            active=first, currentvalue=dict(prefix="step "), pad=dict(t=60),
            steps=[dict(method="animate", label=str(s), args=[[str(s)], animate]) for s in steps],
        )],
        updatemenus=[dict(
            type="buttons", direction="left", x=0.0, y=0.0, yanchor="top", xanchor="right", pad=dict(t=70, r=10),
            buttons=[
                dict(label="▶", method="animate",
                     args=[None, dict(mode="immediate", fromcurrent=True, frame=dict(duration=400, redraw=True),
                                      transition=dict(duration=0))]),
                dict(label="❚❚", method="animate", args=[[None], animate]),
            ],
        )],
    )
    fig.update_xaxes(tickvals=positions, ticktext=ticks, tickangle=-90, tickfont=dict(size=8))
    fig.update_yaxes(tickvals=positions, ticktext=ticks, tickfont=dict(size=8), autorange="reversed")
    for h in range(n_heads):
        fig.update_xaxes(title_text="key position", row=n_layers, col=h + 1)
    for l in range(n_layers):
        fig.update_yaxes(title_text="query position", row=l + 1, col=1)
    return fig


def attention_segments(segments: pd.DataFrame, tau: int | None = None) -> go.Figure:
    """Decision-position attention mass per segment over steps: one subplot per head."""
    require(segments, ["step", "layer", "head", "head_name", "segment", "mass"], "attention segments")
    n_layers, n_heads = int(segments["layer"].max()) + 1, int(segments["head"].max()) + 1
    names = {(int(r.layer), int(r.head)): str(r.head_name)
             for r in segments[["layer", "head", "head_name"]].drop_duplicates().itertuples()}
    order = [str(s) for s in pd.unique(segments["segment"])]
    colors = {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(order)}
    fig = make_subplots(rows=n_layers, cols=n_heads, shared_xaxes=True, shared_yaxes=True,
                        subplot_titles=[names.get((l, h), "") for l in range(n_layers) for h in range(n_heads)])
    shown = set()
    for (layer, head), df in segments.groupby(["layer", "head"], sort=True):
        for seg in order:
            part = df[df["segment"] == seg].sort_values("step")
            if part.empty:
                continue
            fig.add_trace(go.Scatter(
                x=part["step"], y=part["mass"], name=seg, legendgroup=seg, showlegend=seg not in shown,
                mode="lines+markers", marker=dict(size=4), line=dict(color=colors[seg]),
                hovertemplate=f"{names.get((int(layer), int(head)), '')} → {seg}<br>step %{{x}}<br>mass %{{y:.3f}}"
                              "<extra></extra>",
            ), row=int(layer) + 1, col=int(head) + 1)
            shown.add(seg)
    tau_line(fig, tau)
    fig.update_yaxes(range=[-0.02, 1.02])
    for h in range(n_heads):
        fig.update_xaxes(title_text=STEP_TITLE, row=n_layers, col=h + 1)
    for l in range(n_layers):
        fig.update_yaxes(title_text="attention mass", row=l + 1, col=1)
    fig.update_layout(title="Where the decision position looks: attention mass per segment", height=250 * n_layers + 140,
                      legend=dict(title=dict(text="segment")))
    return fig


# ---------------------------------------------------------------------------- ablation, patching
def ablation_heatmaps(abl: pd.DataFrame, metric: str = "delta_loss_cand") -> go.Figure:
    """Layer x head heatmaps of an ablation effect, side by side per step (pre / mid / post)."""
    require(abl, ["step", "layer", "head", metric], "ablation heatmaps")
    heads = abl[abl["head"].notna()].copy()
    if heads.empty:
        raise InterpError("ablation heatmaps: the table has no per-head rows")
    heads["head"] = heads["head"].astype(int)
    label_of = abl.groupby("step")["label"].first() if "label" in abl else pd.Series(dtype=str)
    steps = sorted(int(s) for s in heads["step"].unique())
    n_layers, n_heads = int(heads["layer"].max()) + 1, int(heads["head"].max()) + 1
    method = str(abl["method"].iloc[0]) if "method" in abl else ""
    titles = [f"{label_of.get(s) or 'step'} (step {s})" if label_of.get(s) else f"step {s}" for s in steps]
    fig = make_subplots(rows=1, cols=len(steps), subplot_titles=titles, horizontal_spacing=0.06)
    vmax = float(np.nanmax(np.abs(heads[metric].to_numpy(dtype=float)))) if heads[metric].notna().any() else 1.0
    for i, s in enumerate(steps):
        grid = heads[heads["step"] == s].pivot_table(index="layer", columns="head", values=metric, aggfunc="first")
        grid = grid.reindex(index=range(n_layers), columns=range(n_heads))
        fig.add_trace(go.Heatmap(
            z=grid.to_numpy(dtype=float), x=[f"H{h}" for h in range(n_heads)], y=[f"L{l}" for l in range(n_layers)],
            name=titles[i], coloraxis="coloraxis", texttemplate="%{z:+.2f}", textfont=dict(size=11),
            hovertemplate=f"%{{y}}%{{x}}<br>{metric} %{{z:+.3f}}<extra>step {s}</extra>",
        ), row=1, col=i + 1)
        fig.update_xaxes(title_text="head", row=1, col=i + 1)
    fig.update_yaxes(autorange="reversed")
    fig.update_yaxes(title_text="layer", row=1, col=1)
    fig.update_layout(
        title=f"{method.capitalize() or 'Head'}-ablating one head at a time: {metric_title(metric)}",
        height=200 + 60 * n_layers,
        coloraxis=dict(colorscale="RdBu_r", cmin=-max(vmax, 1e-9), cmax=max(vmax, 1e-9),
                       colorbar=dict(title=dict(text=metric_title(metric), side="right"))),
    )
    return fig


def patching_heatmaps(residual: pd.DataFrame, heads: pd.DataFrame, step: int | None = None) -> go.Figure:
    """Residual-stream (layer x position) and head (head x position, plus all positions) patching.

    Shows the normalised effect when it is defined (clean and corrupt logit differences far
    enough apart), the raw patched logit difference otherwise; the colorbar says which.
    `step` picks one step when the tables hold several (default: the last).
    """
    cols = ["step", "layer", "position", "segment", "patched_ld", "normalized", "clean_ld", "corrupt_ld"]
    require(residual, cols, "residual patching")
    require(heads, cols + ["head", "head_name"], "head patching")
    if step is None:
        step = int(residual["step"].max())
    residual, heads = residual[residual["step"] == step], heads[heads["step"] == step]
    if residual.empty or heads.empty:
        raise InterpError(f"patching heatmaps: no patching results at step {step}")
    use_norm = residual["normalized"].notna().any() and heads["normalized"].notna().any()
    value = "normalized" if use_norm else "patched_ld"
    cbar = "normalised<br>effect" if use_norm else "patched<br>logit diff.<br>(nats)"
    what = ("normalised: (patched − corrupt) / (clean − corrupt)" if use_norm
            else "raw patched logit difference (clean ≈ corrupt, so not normalised)")
    seg_of = dict(zip(residual["position"].astype(int), residual["segment"].astype(str)))
    positions = sorted(seg_of)
    xlabels = [f"{p} {seg_of[p]}" for p in positions]
    n_layers = int(residual["layer"].max()) + 1
    res = residual.pivot_table(index="layer", columns="position", values=value, aggfunc="first", dropna=False)
    res = res.reindex(index=range(n_layers), columns=positions)
    per_pos = heads[heads["position"].notna()].copy()
    per_pos["position"] = per_pos["position"].astype(int)
    order = head_order(heads)
    hp = per_pos.pivot_table(index="head_name", columns="position", values=value, aggfunc="first", dropna=False)
    hp = hp.reindex(index=order, columns=positions)
    allpos = heads[heads["position"].isna()].set_index("head_name")[value].reindex(order)
    fig = make_subplots(rows=1, cols=3, column_widths=[0.44, 0.44, 0.12], horizontal_spacing=0.07,
                        subplot_titles=["residual stream (resid_pre)", "heads (hook_z) at one position",
                                        "heads, all positions"])
    common = dict(coloraxis="coloraxis")
    fig.add_trace(go.Heatmap(z=res.to_numpy(dtype=float), x=xlabels, y=[f"L{l}" for l in range(n_layers)],
                             name="residual", hovertemplate="resid_pre %{y}, position %{x}<br>%{z:.3f}<extra></extra>",
                             **common), row=1, col=1)
    fig.add_trace(go.Heatmap(z=hp.to_numpy(dtype=float), x=xlabels, y=order, name="heads by position",
                             hovertemplate="%{y} at position %{x}<br>%{z:.3f}<extra></extra>", **common), row=1, col=2)
    fig.add_trace(go.Heatmap(z=allpos.to_numpy(dtype=float)[:, None], x=["all"], y=order, name="heads all positions",
                             texttemplate="%{z:.2f}", hovertemplate="%{y} at all positions<br>%{z:.3f}<extra></extra>",
                             **common), row=1, col=3)
    vals = np.concatenate([res.to_numpy(dtype=float).ravel(), hp.to_numpy(dtype=float).ravel(),
                           allpos.to_numpy(dtype=float)])
    vmax = float(np.nanmax(np.abs(vals))) if np.isfinite(vals).any() else 1.0
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text="position", tickangle=-60, tickfont=dict(size=9), row=1, col=1)
    fig.update_xaxes(title_text="position", tickangle=-60, tickfont=dict(size=9), row=1, col=2)
    fig.update_yaxes(title_text="layer", row=1, col=1)
    fig.update_yaxes(title_text="head", row=1, col=2)
    fig.update_yaxes(showticklabels=False, row=1, col=3)
    clean, corrupt = float(residual["clean_ld"].iloc[0]), float(residual["corrupt_ld"].iloc[0])
    fig.update_layout(
        title=f"Activation patching at step {step}, {what}<br><sup>logit difference a1(A1) − a1(A2): "
              f"clean {clean:+.2f}, corrupt {corrupt:+.2f} nats</sup>",
        height=max(380, 160 + 30 * len(order)),
        coloraxis=dict(colorscale="RdBu_r", cmin=-max(vmax, 1e-9), cmax=max(vmax, 1e-9),
                       colorbar=dict(title=dict(text=cbar, side="top"))),
        margin=dict(t=100),
    )
    return fig


# ---------------------------------------------------------------------------- groups
def group_histograms(
    acc: pd.DataFrame,
    tau: int | None,
    fractions: Sequence[float] = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0),
    threshold: float = groups_analysis.THRESHOLD,
) -> go.Figure:
    """Per-group candidate accuracy histograms at fractions of tau: a collective snap moves them all at once."""
    require(acc, ["step", "group_id", "acc_cand"], "group histograms")
    if not tau:
        raise InterpError("group histograms need tau, and the candidate loss never falls below 0.5 log K")
    share = groups_analysis.share_above(acc, tau, fractions=fractions, threshold=threshold)
    titles = [f"{r.fraction:g} τ → step {r.step}<br>{r.n_above}/{r.n_groups} ≥ {threshold:.0%}"
              for r in share.itertuples()]
    fig = make_subplots(rows=1, cols=len(share), shared_yaxes=True, subplot_titles=titles, horizontal_spacing=0.02)
    for i, r in enumerate(share.itertuples()):
        values = acc.loc[acc["step"] == r.step, "acc_cand"]
        fig.add_trace(go.Histogram(
            x=values, name=f"{r.fraction:g} tau (step {r.step})", xbins=dict(start=-0.025, end=1.025, size=0.05),
            marker=dict(color=PALETTE[0]), showlegend=False,
            hovertemplate="accuracy %{x}<br>%{y} groups<extra></extra>",
        ), row=1, col=i + 1)
        fig.add_vline(x=threshold, row=1, col=i + 1, name="threshold", line=dict(color=ROUTING_COLOR, dash="dash", width=1))
        fig.update_xaxes(range=[-0.05, 1.05], title_text="accuracy" if i else "group accuracy", row=1, col=i + 1)
    fig.update_yaxes(title_text="groups (count)", row=1, col=1)
    fig.update_layout(title="Per-group candidate accuracy (fraction) at fractions of τ", height=420, bargap=0.05,
                      margin=dict(t=130))
    return fig


def groups_share(acc: pd.DataFrame, tau: int | None = None, threshold: float = groups_analysis.THRESHOLD) -> go.Figure:
    """Share of groups at or above `threshold` candidate accuracy, at every analysed step."""
    require(acc, ["step", "acc_cand"], "groups share")
    share = (acc["acc_cand"] >= threshold).groupby(acc["step"]).mean().sort_index()
    fig = go.Figure([go.Scatter(
        x=share.index, y=share.to_numpy(), name=f"share ≥ {threshold:.0%}", mode="lines+markers",
        hovertemplate=f"step %{{x}}<br>share ≥ {threshold:.0%}: %{{y:.3f}}<extra></extra>",
    )])
    if tau:
        fig.add_vline(x=tau / 2, name="tau/2", line=dict(color=LOGK_COLOR, dash="dot", width=1))
        fig.add_annotation(x=tau / 2, xref="x", y=1.0, yref="y domain", yanchor="bottom", showarrow=False,
                           text="τ/2", name="tau/2 label", font=dict(size=11, color=LOGK_COLOR))
    tau_line(fig, tau)
    fig.update_layout(title=f"Share of groups with candidate accuracy ≥ {threshold:.0%}", height=380,
                      xaxis_title=STEP_TITLE, yaxis=dict(title="share of groups (fraction)", range=[-0.02, 1.05]),
                      showlegend=False)
    return fig


# ---------------------------------------------------------------------------- timeline
def timeline_figure(tl) -> go.Figure:
    """Losses, shuffle gap and per-head sensitivity on one step axis, with onsets and tau marked.

    Onsets and tau are vertical lines across all three panels (shapes named "onset HEAD"
    and "tau") and the onsets are also diamonds in the heatmap row (trace "onset").
    """
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, row_heights=[0.38, 0.2, 0.42], vertical_spacing=0.05)
    for trace in loss_traces(tl.metrics):
        fig.add_trace(trace, row=1, col=1)
    log_k_line(fig, tl.log_k, row=1, col=1)
    if "shuffle_gap" in tl.metrics and tl.metrics["shuffle_gap"].notna().any():
        fig.add_trace(shuffle_trace(tl.metrics), row=2, col=1)
    domain = fig.layout.yaxis3.domain
    heat, order = head_heatmap(tl.sensitivity, tl.column)
    heat.colorbar.update(y=(domain[0] + domain[1]) / 2, len=domain[1] - domain[0], yanchor="middle")
    fig.add_trace(heat, row=3, col=1)
    fig.add_trace(onset_trace(tl.onsets, tl.routing_head), row=3, col=1)

    def marker(x: int, name: str, color: str, dash: str, width: float) -> None:
        fig.add_shape(type="line", xref="x", yref="paper", x0=x, x1=x, y0=0, y1=1, name=name,
                      line=dict(color=color, dash=dash, width=width), layer="above")

    have = tl.onsets.dropna(subset=["onset"])
    have = have.iloc[np.argsort((have["head_name"] == tl.routing_head).to_numpy(), kind="stable")]  # routing on top
    labels: dict[int, list[str]] = {}
    for r in have.itertuples():
        routing = r.head_name == tl.routing_head
        marker(int(r.onset), f"onset {r.head_name}", ROUTING_COLOR if routing else ONSET_COLOR,
               "dash", 2.0 if routing else 1.0)
        labels.setdefault(int(r.onset), []).append(str(r.head_name))
    for x, heads in labels.items():
        routing = tl.routing_head in heads
        fig.add_annotation(x=x, xref="x", y=1.0, yref="paper", yanchor="bottom", showarrow=False,
                           text=", ".join(heads) + " onset", name="onset label",
                           font=dict(size=10, color=ROUTING_COLOR if routing else ONSET_COLOR))
    if tl.tau is not None:
        marker(tl.tau, "tau", TAU_COLOR, "dot", 2.0)
        fig.add_annotation(x=tl.tau, xref="x", y=1.0, yref="paper", yanchor="bottom", showarrow=False,
                           text=f"τ = {tl.tau}", name="tau label", font=dict(size=11, color=TAU_COLOR))
    onset = tl.routing_onset
    lead = "n/a" if tl.lead is None else f"{tl.lead:.2f}"
    fig.update_layout(
        title=dict(text=f"{tl.name + ': ' if tl.name else ''}routing head {tl.routing_head}, onset "
                        f"{'none' if onset is None else f'step {onset}'}, τ = {tl.tau if tl.tau is not None else 'n/a'}, "
                        f"lead (τ − onset)/τ = {lead}", y=0.98, yanchor="top"),
        height=820, margin=dict(t=110), hovermode="closest",
        legend=dict(orientation="h", x=0, y=-0.08, yanchor="top"),
    )
    fig.update_yaxes(title_text=LOSS_TITLE, row=1, col=1)
    fig.update_yaxes(title_text="shuffle gap (nats)", row=2, col=1)
    fig.update_yaxes(title_text="head", autorange="reversed", type="category", row=3, col=1)
    fig.update_xaxes(title_text=STEP_TITLE, row=3, col=1)
    return fig
