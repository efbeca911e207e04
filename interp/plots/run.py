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

from interp.errors import InterpError
from interp.plots.style import (
    COLUMN_TITLES,
    LOGK_COLOR,
    LOSS_TITLE,
    PALETTE,
    ROUTING_COLOR,
    STEP_TITLE,
    head_heatmap,
    head_order,
    log_k_line,
    loss_traces,
    metric_title,
    onset_trace,
    position_labels,
    require,
    shuffle_traces,
    tau_line,
    vline,
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
    """Shuffle gaps (the loss with another selector minus the clean one), on the first token and
    on the full target where logged: does z matter yet, and where is it read?"""
    require(metrics, ["step", "shuffle_gap"], "shuffle gap")
    if metrics["shuffle_gap"].isna().all():
        raise InterpError("shuffle gap: the run has no shuffle gap (its direction has no selector z)")
    traces = shuffle_traces(metrics)
    fig = go.Figure(traces)
    fig.add_hline(y=0.0, line=dict(color=LOGK_COLOR, width=1))
    tau_line(fig, tau)
    fig.update_layout(title="Shuffle gap: the cost of replacing z by another selector", height=380,
                      xaxis_title=STEP_TITLE, yaxis_title="shuffle gap Δz (nats)", showlegend=len(traces) > 1)
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

    def heatmap(s: int, l: int, h: int) -> dict:  # a dict: plotly validates it once, where it lands
        return dict(type="heatmap", z=cube[s, l, h], x=positions, y=positions, coloraxis="coloraxis",
                    name=names.get((l, h), f"L{l}H{h}"), customdata=np.array(ticks)[None, :].repeat(t, 0),
                    hovertemplate="query %{y}<br>key %{customdata}<br>weight %{z:.3f}<extra>%{fullData.name}</extra>")

    for l, h in heads:
        fig.add_trace(heatmap(first, l, h), row=l + 1, col=h + 1)
    fig.frames = [dict(name=str(s), data=[heatmap(i, l, h) for l, h in heads], traces=list(range(len(heads))))
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
    traces, rows, cols = [], [], []  # dicts, added at once: plotly validates each once
    for (layer, head), df in segments.groupby(["layer", "head"], sort=True):
        for seg in order:
            part = df[df["segment"] == seg].sort_values("step")
            if part.empty:
                continue
            traces.append(dict(
                type="scatter", x=part["step"], y=part["mass"], name=seg, legendgroup=seg, showlegend=seg not in shown,
                mode="lines+markers", marker=dict(size=4), line=dict(color=colors[seg]),
                hovertemplate=f"{names.get((int(layer), int(head)), '')} → {seg}<br>step %{{x}}<br>mass %{{y:.3f}}"
                              "<extra></extra>",
            ))
            rows.append(int(layer) + 1)
            cols.append(int(head) + 1)
            shown.add(seg)
    if traces:
        fig.add_traces(traces, rows=rows, cols=cols)
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
def ablation_heatmaps(abl: pd.DataFrame, metric: str = "delta_loss_cand", method: str | None = None,
                      notes: Sequence[str] = ()) -> go.Figure:
    """Layer x head heatmaps of an ablation effect, side by side per step (pre / mid / post), for
    one method (default: zero if present). `notes` (e.g. a step beyond the run) are shown below."""
    require(abl, ["step", "layer", "head", metric], "ablation heatmaps")
    if "method" in abl:
        methods = list(dict.fromkeys(abl["method"]))
        method = method or ("zero" if "zero" in methods else methods[0])
        if method not in methods:
            raise InterpError(f"ablation heatmaps: no {method!r} rows; the table has {', '.join(methods)}")
        abl = abl[abl["method"] == method]
    heads = abl[abl["head"].notna()].copy()
    if heads.empty:
        raise InterpError("ablation heatmaps: the table has no per-head rows")
    heads["head"] = heads["head"].astype(int)
    label_of = abl.groupby("step")["label"].first() if "label" in abl else pd.Series(dtype=str)
    steps = sorted(int(s) for s in heads["step"].unique())
    n_layers, n_heads = int(heads["layer"].max()) + 1, int(heads["head"].max()) + 1
    method = method or ""
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
    if notes:
        note_below_axis_title(fig, "; ".join(notes), "notes", x=0.0, xanchor="left")
    return fig


NOTE_SHIFT_PX = 62  # a note's top below the plot area: under the tick labels and the x-axis title (about 50 px)


def note_below_axis_title(fig: go.Figure, text: str, name: str, x: float, xanchor: str) -> None:
    """A note under the x-axis titles, placed in pixels from the plot area (so at any figure height it
    clears the tick labels and axis title), with the bottom margin it needs."""
    fig.add_annotation(text=text, name=name, showarrow=False, xref="paper", yref="paper", x=x, y=0.0,
                       xanchor=xanchor, yanchor="top", yshift=-NOTE_SHIFT_PX, font=dict(size=11))
    fig.update_layout(margin=dict(b=NOTE_SHIFT_PX + 18 * (1 + text.count("<br>")) + 16))


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
    threshold: float | None = None,
    last_step: int | None = None,
    last_evaluated: int | None = None,
) -> go.Figure:
    """Per-group candidate accuracy histograms at fractions of tau: a collective snap moves them all at once.

    `threshold`: None is the groups analysis' (`interp.analysis.groups.THRESHOLD`, 0.8). Fractions beyond
    the last analysed step are named in a note, with the run's last saved step `last_step` and last
    evaluation `last_evaluated` when given (None: the last analysed step is taken as the run's last)."""
    from interp.analysis import groups as groups_analysis  # here: the module loads torch

    require(acc, ["step", "group_id", "acc_cand"], "group histograms")
    if not tau:
        raise InterpError("group histograms need tau, and the candidate loss never falls below 0.5 log K")
    threshold = groups_analysis.THRESHOLD if threshold is None else threshold
    share = groups_analysis.share_above(acc, tau, fractions=fractions, threshold=threshold)
    inside, beyond = share[~share["beyond"]], share[share["beyond"]]
    if inside.empty:
        raise InterpError(f"every fraction of τ lies beyond the last analysed step ({int(acc['step'].max())})")
    # one panel per checkpoint: fractions that snap to the same checkpoint share it
    panels = inside.groupby("step", sort=True).agg(fractions=("fraction", list), n_above=("n_above", "first"),
                                                    n_groups=("n_groups", "first")).reset_index()
    titles = [" = ".join(f"{f:g} τ" for f in r.fractions) + f" → step {r.step}<br>{r.n_above}/{r.n_groups} "
              f"≥ {threshold:.0%}" for r in panels.itertuples()]
    fig = make_subplots(rows=1, cols=len(panels), shared_yaxes=True, subplot_titles=titles, horizontal_spacing=0.02)
    for i, r in enumerate(panels.itertuples()):
        values = acc.loc[acc["step"] == r.step, "acc_cand"]
        fig.add_trace(go.Histogram(
            x=values, name=f"step {r.step}", xbins=dict(start=-0.025, end=1.025, size=0.05),
            marker=dict(color=PALETTE[0]), showlegend=False,
            hovertemplate="accuracy %{x}<br>%{y} groups<extra></extra>",
        ), row=1, col=i + 1)
        vline(fig, threshold, row=1, col=i + 1, name="threshold", line=dict(color=ROUTING_COLOR, dash="dash", width=1))
        fig.update_xaxes(range=[-0.05, 1.05], title_text="accuracy" if i else "group accuracy", row=1, col=i + 1)
    if not beyond.empty:
        note_below_axis_title(fig, beyond_note(beyond, int(acc["step"].max()), last_step, last_evaluated), "beyond",
                              x=1.0, xanchor="right")
    fig.update_yaxes(title_text="groups (count)", row=1, col=1)
    fig.update_layout(title="Per-group candidate accuracy (fraction) at fractions of τ", height=420, bargap=0.05,
                      margin=dict(t=130))
    return fig


def beyond_note(beyond: pd.DataFrame, analysed: int, last_step: int | None, last_evaluated: int | None) -> str:
    """What the fractions of τ past the last analysed step are: beyond the run, named with the run's last
    step as the summary calls it (the last saved checkpoint, and the last evaluation when that differs),
    or inside the run but after the last step the groups analysis read."""
    saved = analysed if last_step is None else int(last_step)
    where = (f"last step {saved}" if last_evaluated is None or int(last_evaluated) == saved
             else f"last saved checkpoint {saved}; last evaluation {int(last_evaluated)}")
    parts = []
    past = [r for r in beyond.itertuples() if r.target_step > saved]
    within = [r for r in beyond.itertuples() if r.target_step <= saved]
    if within:
        parts.append("; ".join(f"{r.fraction:g} τ = {r.target_step:.0f}" for r in within)
                     + f": after the last analysed step {analysed}" + ("" if past else f" ({where})"))
    if past:
        parts.append("; ".join(f"{r.fraction:g} τ = {r.target_step:.0f}" for r in past) + f": beyond the run ({where})")
    return "; ".join(parts)


def groups_share(acc: pd.DataFrame, tau: int | None = None, threshold: float | None = None) -> go.Figure:
    """Share of groups at or above `threshold` candidate accuracy (None: the groups analysis' 0.8), at every
    analysed step."""
    if threshold is None:
        from interp.analysis.groups import THRESHOLD as threshold  # here: the module loads torch
    require(acc, ["step", "acc_cand"], "groups share")
    share = (acc["acc_cand"] >= threshold).groupby(acc["step"]).mean().sort_index()
    fig = go.Figure([go.Scatter(
        x=share.index, y=share.to_numpy(), name=f"share ≥ {threshold:.0%}", mode="lines+markers",
        hovertemplate=f"step %{{x}}<br>share ≥ {threshold:.0%}: %{{y:.3f}}<extra></extra>",
    )])
    if tau:
        vline(fig, tau / 2, name="tau/2", line=dict(color=LOGK_COLOR, dash="dot", width=1))
        fig.add_annotation(x=tau / 2, xref="x", y=1.0, yref="y domain", yanchor="bottom", showarrow=False,
                           text="τ/2", name="tau/2 label", font=dict(size=11, color=LOGK_COLOR))
    tau_line(fig, tau)
    fig.update_layout(title=f"Share of groups with candidate accuracy ≥ {threshold:.0%}", height=380,
                      xaxis_title=STEP_TITLE, yaxis=dict(title="share of groups (fraction)", range=[-0.02, 1.05]),
                      showlegend=False)
    return fig


# ---------------------------------------------------------------------------- generic
def table_over_steps(df: pd.DataFrame, name: str) -> go.Figure:
    """Any analysis table: the mean of each numeric column per step (the report's fallback)."""
    require(df, ["step"], name)
    numeric = [c for c in df.columns if c != "step" and pd.api.types.is_numeric_dtype(df[c])
               and not pd.api.types.is_bool_dtype(df[c])]
    if not numeric:
        raise InterpError(f"{name}: the table has no numeric column to draw")
    means = df.groupby("step")[numeric].mean().reset_index()
    fig = go.Figure([go.Scatter(x=means["step"], y=means[c], mode="lines+markers", name=c) for c in numeric])
    fig.update_layout(title=f"{name}: mean per checkpoint", xaxis_title=STEP_TITLE, height=380)
    return fig
