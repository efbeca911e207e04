"""Figures of the circuit-formation timeline (`interp.timelines.Timeline`) and of the routing
head's usage: what carries z, when z is used, against when the loss moves.

`timeline_figure(tl)` takes the Timeline (read by its attributes: the timeline module never
imports plotting, figures take results). Conventions as in `interp.plots.run`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.plots.style import (
    LOSS_TITLE,
    ONSET_COLOR,
    ROUTING_COLOR,
    STEP_TITLE,
    TAU_COLOR,
    add_layout,
    head_heatmap,
    log_k_line,
    loss_traces,
    onset_trace,
    require,
    shuffle_traces,
    tau_line,
    vline,
)

# ---------------------------------------------------------------------------- timeline
EVENT_STYLE = {"decodable": ("#17becf", "dash"), "carried": ("#2ca02c", "dashdot"), "used": ("#9467bd", "longdash")}


def timeline_figure(tl) -> go.Figure:
    """Losses, shuffle gaps, per-head sensitivity and (where measured) the routing head's usage
    on one step axis, with onsets, the routing head's carried / used events and tau marked.

    Onsets, events and tau are vertical lines across all panels (shapes named "onset HEAD",
    "event NAME" and "tau"); the onsets are also diamonds in the heatmap row (trace "onset").
    """
    usage = getattr(tl, "usage", None)
    with_usage = usage is not None and not usage.empty
    dynamics = dynamics_traces(getattr(tl, "trajectory", None), tl.metrics)
    edges, edge_names = edge_onset_traces(getattr(tl, "edge_onsets", None), tl.routing_head)
    edge_row = 4 + with_usage  # when the edges are cached, under the heads (and the usage)
    rows = 3 + with_usage + bool(edges) + bool(dynamics)
    heights = ([0.32, 0.16, 0.32] if with_usage else [0.38, 0.2, 0.42]) + ([0.2] if with_usage else [])
    specs = [[{}], [{}], [{}]] + [[{"secondary_y": True}]] * with_usage
    if edges:
        heights, specs = heights + [0.04 + 0.03 * len(edge_names)], specs + [[{}]]
    if dynamics:
        heights = [h * 0.82 for h in heights] + [0.18]
        specs = specs + [[{"secondary_y": True}]]
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, row_heights=heights, vertical_spacing=0.04,
                        specs=specs)
    for trace in loss_traces(tl.metrics):
        fig.add_trace(trace, row=1, col=1)
    log_k_line(fig, tl.log_k, row=1, col=1)
    for trace in shuffle_traces(tl.metrics):
        fig.add_trace(trace, row=2, col=1)
    domain = fig.layout.yaxis3.domain
    heat, order = head_heatmap(tl.sensitivity, tl.column)
    heat.colorbar.update(y=(domain[0] + domain[1]) / 2, len=domain[1] - domain[0], yanchor="middle")
    fig.add_trace(heat, row=3, col=1)
    fig.add_trace(onset_trace(tl.onsets, tl.routing_head), row=3, col=1)
    if with_usage:
        u = usage.sort_values("step")
        fig.add_trace(go.Scatter(x=u["step"], y=u["resample_delta_loss_cand"], mode="lines+markers",
                                 name=f"{tl.routing_head} resample-ablation Δ Lc", marker=dict(size=4),
                                 line=dict(color=EVENT_STYLE["used"][0]),
                                 hovertemplate="step %{x}<br>Δ Lc %{y:.3f} nats<extra></extra>"),
                      row=4, col=1, secondary_y=False)
        fig.add_trace(go.Scatter(x=u["step"], y=u["patch_normalized"], mode="lines+markers",
                                 name=f"{tl.routing_head} patching: restored fraction", marker=dict(size=4),
                                 line=dict(color="#8c564b", dash="dot"),
                                 hovertemplate="step %{x}<br>restored %{y:.2f}<extra></extra>"),
                      row=4, col=1, secondary_y=True)

    for trace in edges:
        fig.add_trace(trace, row=edge_row, col=1)
    for trace, secondary in dynamics:
        fig.add_trace(trace, row=rows, col=1, secondary_y=secondary)

    shapes: list[dict] = []  # the markers and their labels, added at the end in one update each
    notes: list[dict] = []

    def marker(x: int, name: str, color: str, dash: str, width: float) -> None:
        shapes.append(dict(type="line", xref="x", yref="paper", x0=x, x1=x, y0=0, y1=1, name=name,
                           line=dict(color=color, dash=dash, width=width), layer="above"))

    have = tl.onsets.dropna(subset=["onset"])
    have = have.iloc[np.argsort((have["head_name"] == tl.routing_head).to_numpy(), kind="stable")]  # routing on top
    labels: dict[int, list[str]] = {}
    for r in have.itertuples():
        routing = r.head_name == tl.routing_head
        marker(int(r.onset), f"onset {r.head_name}", ROUTING_COLOR if routing else ONSET_COLOR,
               "dash", 2.0 if routing else 1.0)
        labels.setdefault(int(r.onset), []).append(str(r.head_name))
    # the labels above the top panel (onsets and tau): close ones are stacked in rows, never drawn over each other
    tops = [(x, ", ".join(heads) + " onset", "onset label", 10,
             ROUTING_COLOR if tl.routing_head in heads else ONSET_COLOR) for x, heads in labels.items()]
    if tl.tau is not None:
        marker(tl.tau, "tau", TAU_COLOR, "dot", 2.0)
        tops.append((tl.tau, f"τ = {tl.tau}", "tau label", 11, TAU_COLOR))
    label_row = label_rows([(x, text, size) for x, text, _, size, _ in tops], _step_span(tl))
    for (x, text, name, size, color), row in zip(tops, label_row):
        notes.append(dict(x=x, xref="x", y=1.0, yref="paper", yanchor="bottom", yshift=LABEL_ROW_PX * row,
                          showarrow=False, text=text, name=name, hovertext=f"{text}: step {x}",
                          font=dict(size=size, color=color)))
    events = getattr(tl, "events", None)
    if events is not None and not events.empty:
        for i, r in enumerate(events.dropna(subset=["step"]).itertuples()):
            color, dash = EVENT_STYLE[r.kind]
            marker(int(r.step), f"event {r.event}", color, dash, 1.5)
            notes.append(dict(x=int(r.step), xref="x", y=1.0 - 0.035 * (i + 1), yref="paper", xanchor="left",
                              showarrow=False, text=f"{r.label}: step {int(r.step)}", name="event label",
                              font=dict(size=10, color=color), bgcolor="rgba(255,255,255,0.7)"))
    add_layout(fig, shapes=shapes, annotations=notes)
    onset = tl.routing_onset
    lead = "n/a" if tl.lead is None else f"{tl.lead:.2f}"
    fig.update_layout(
        title=dict(text=f"{tl.name + ': ' if tl.name else ''}routing head {tl.routing_head}, onset "
                        f"{'none' if onset is None else f'step {onset}'}, τ = {tl.tau if tl.tau is not None else 'n/a'}, "
                        f"lead (τ − onset)/τ = {lead}", y=0.98, yanchor="top"),
        height=(960 if with_usage else 820) + (160 if dynamics else 0) + ((60 + 22 * len(edge_names)) if edges else 0),
        margin=dict(t=110 + LABEL_ROW_PX * max(0, max(label_row, default=0) - 3)),  # 4 label rows under the title
        hovermode="closest",
        legend=dict(orientation="h", x=0, y=-0.08, yanchor="top"),
    )
    fig.update_yaxes(title_text=LOSS_TITLE, row=1, col=1)
    fig.update_yaxes(title_text="shuffle gap (nats)", row=2, col=1)
    fig.update_yaxes(title_text="head", autorange="reversed", type="category", row=3, col=1)
    if with_usage:
        fig.update_yaxes(title_text="Δ Lc (nats)", row=4, col=1, secondary_y=False)
        fig.update_yaxes(title_text="restored (fraction)", row=4, col=1, secondary_y=True)
    if edges:
        fig.update_yaxes(title_text="edge onsets", autorange="reversed", type="category", categoryorder="array",
                         categoryarray=edge_names, tickmode="array", tickvals=edge_names, tickfont=dict(size=10),
                         row=edge_row, col=1)
    if dynamics:
        fig.update_yaxes(title_text="direction consistency", row=rows, col=1, secondary_y=False)
        fig.update_yaxes(title_text="dissipation Q(t)", row=rows, col=1, secondary_y=True)
    fig.update_xaxes(title_text=STEP_TITLE, row=rows, col=1)
    return fig


LABEL_ROW_PX = 15  # one row of labels above the top panel
PLOT_WIDTH_PX = 800.0  # a narrow plot area (the report's figures are 100% wide, up to about 1250 px)


def label_rows(labels: list[tuple], span: float, width_px: float = PLOT_WIDTH_PX) -> list[int]:
    """A row (0: lowest) for each label (x, text, font size) centred at x on an axis `span` steps
    wide drawn `width_px` pixels wide: a label goes to the lowest row where it clears the labels
    already there (text width estimated at 0.62 em a character, 6 px apart)."""
    scale = max(float(span), 1.0) / width_px  # steps per pixel
    ends: list[float] = []  # right edge of the last label of each row, in steps
    rows = [0] * len(labels)
    for i in sorted(range(len(labels)), key=lambda i: labels[i][0]):
        x, text, size = labels[i]
        half = 0.62 * size * len(text) / 2 * scale
        row = next((r for r, end in enumerate(ends) if end + 6 * scale <= x - half), len(ends))
        ends[row:row + 1] = [x + half]
        rows[i] = row
    return rows


def _step_span(tl) -> float:
    steps = [pd.to_numeric(tl.metrics["step"]), pd.to_numeric(tl.sensitivity["step"])]
    steps = pd.concat(steps).dropna()
    return float(steps.max() - steps.min()) if len(steps) else 1.0


EDGES_SHOWN = 10  # the timeline's edge panel: the first edges by carried onset (the findings' choice)


def edge_onset_traces(onsets: pd.DataFrame | None, routing_head: str = "",
                      shown: int = EDGES_SHOWN) -> tuple[list[go.Scatter], list[str]]:
    """The timeline's edge panel (the cached `edges` analysis, docs/edges.md): the first `shown` edges by carried
    onset among those in the circuit at some step, one row each (the first on top), their carried onsets as diamonds
    (the routing head's edges in its colour) and used onsets as open circles; the traces and the rows' edges, none
    when the edges are not cached."""
    if onsets is None or onsets.empty:
        return [], []
    require(onsets, ["edge", "sender", "carried_onset", "used_onset", "ever_in_circuit"], "timeline edge panel")
    circuit = onsets[onsets["ever_in_circuit"].astype(bool)]
    first = (circuit if len(circuit) else onsets).head(shown)
    first = first[first["carried_onset"].notna() | first["used_onset"].notna()]
    if first.empty:
        return [], []
    names = first["edge"].astype(str).tolist()
    carried, used = first[first["carried_onset"].notna()], first[first["used_onset"].notna()]
    colors = [ROUTING_COLOR if str(s) == routing_head else ONSET_COLOR for s in carried["sender"]]
    out = [go.Scatter(x=carried["carried_onset"].astype(float), y=carried["edge"].astype(str), mode="markers",
                      marker=dict(symbol="diamond", size=9, color=colors), name="edge onset (carried: |score| rises)",
                      hovertemplate="%{y}<br>carried onset: step %{x}<extra></extra>")]
    if not used.empty:
        out.append(go.Scatter(x=used["used_onset"].astype(float), y=used["edge"].astype(str), mode="markers",
                              marker=dict(symbol="circle-open", size=9, color=EVENT_STYLE["used"][0], line=dict(width=2)),
                              name="edge onset (used: in the circuit)",
                              hovertemplate="%{y}<br>used onset: step %{x}<extra></extra>"))
    return out, names


def dynamics_traces(trajectory: pd.DataFrame | None, metrics: pd.DataFrame) -> list[tuple[go.Scatter, bool]]:
    """The timeline's last panel: the cosine between consecutive weight displacements of the whole
    model (the trajectory analysis) and the dissipation Q(t) = sum lr ||g_B||^2 (the metrics log,
    on the secondary axis); (trace, secondary) pairs, none when neither was measured."""
    out = []
    if trajectory is not None and not trajectory.empty and "cosine" in trajectory:
        whole = trajectory[trajectory["component"] == "all"].dropna(subset=["cosine"]).sort_values("step")
        if not whole.empty:
            out.append((go.Scatter(x=whole["step"], y=whole["cosine"], mode="lines+markers", marker=dict(size=4),
                                   name="direction consistency (cos of consecutive displacements)",
                                   line=dict(color="#17becf"),
                                   hovertemplate="step %{x}<br>cos %{y:.2f}<extra></extra>"), False))
    if "dissipation" in metrics and metrics["dissipation"].notna().any():
        m = metrics.dropna(subset=["dissipation"]).sort_values("step")
        out.append((go.Scatter(x=m["step"], y=m["dissipation"], mode="lines", name="dissipation Q(t) = Σ lr‖g_B‖²",
                               line=dict(color="#7f7f7f", dash="dot"),
                               hovertemplate="step %{x}<br>Q %{y:.4g}<extra></extra>"), True))
    return out


# ---------------------------------------------------------------------------- usage
def usage_curves(usage: pd.DataFrame, tau: int | None = None, events: pd.DataFrame | None = None) -> go.Figure:
    """The routing head's usage over steps: resample-ablation cost (nats) and the share of the
    logit difference patching restores (fraction), with its carried / used events marked."""
    require(usage, ["step", "head_name", "resample_delta_loss_cand", "patch_normalized"], "usage curves")
    u = usage.sort_values("step")
    head = str(u["head_name"].iloc[0])
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    fig.add_trace(go.Scatter(x=u["step"], y=u["resample_delta_loss_cand"], mode="lines+markers",
                             name="resample ablation Δ Lc", marker=dict(size=4), line=dict(color="#9467bd"),
                             hovertemplate="step %{x}<br>Δ Lc %{y:.3f} nats<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=u["step"], y=u["patch_normalized"], mode="lines+markers",
                             name="patching: restored fraction", marker=dict(size=4), line=dict(color="#8c564b"),
                             hovertemplate="step %{x}<br>restored %{y:.2f}<extra></extra>"), row=2, col=1)
    if events is not None and not events.empty:
        for r in events.dropna(subset=["step"]).itertuples():
            color = EVENT_STYLE.get(r.kind, EVENT_STYLE["used"])[0]
            vline(fig, int(r.step), name=f"event {r.event}", line=dict(color=color, dash="dashdot", width=1.2))
    tau_line(fig, tau)
    fig.update_yaxes(title_text="Δ candidate loss (nats)", row=1, col=1)
    fig.update_yaxes(title_text="restored (fraction)", row=2, col=1)
    fig.update_xaxes(title_text=STEP_TITLE, row=2, col=1)
    fig.update_layout(title=f"When {head}'s z is used", height=520, legend=dict(orientation="h", y=-0.15))
    return fig
