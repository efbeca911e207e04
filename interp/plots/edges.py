"""The edge-onset raster: edges ordered by onset against steps, with tau, the routing head's events and the
circuit's size (the `edges` analysis, docs/edges.md)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.plots.geometry import _onset_lines
from interp.plots.style import ONSET_COLOR, require, tau_line

SHOWN = 25  # edges drawn: the first by onset


def edge_raster(edges: pd.DataFrame, onsets: pd.DataFrame, circuits: pd.DataFrame, tau: int | None = None,
                marks: Mapping[str, int | None] | None = None, shown: int = SHOWN) -> go.Figure:
    """Top: the first `shown` edges by carried onset (rows, the first on top) against steps, coloured by |score| as
    a share of the edge's own largest, the onsets as markers; bottom: the circuit's size at each step."""
    require(edges, ["step", "edge", "score"], "edge raster")
    require(onsets, ["edge", "carried_onset"], "edge raster")
    order = [str(e) for e in onsets["edge"].head(shown)]
    table = edges[edges["edge"].isin(order)].pivot_table(index="edge", columns="step", values="score", aggfunc="first")
    table = table.abs().reindex(order)
    share = table.div(table.max(axis=1).replace(0, np.nan), axis=0)
    steps = [int(s) for s in table.columns]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.75, 0.25], vertical_spacing=0.06,
                        subplot_titles=("edges by onset: |score| / its largest", "the circuit's size (edges)"))
    fig.add_trace(go.Heatmap(x=steps, y=order, z=share.to_numpy(float), colorscale="Viridis", zmin=0, zmax=1,
                             colorbar=dict(title="|score| share", len=0.7, y=0.63),
                             hovertemplate="%{y}<br>step %{x}<br>|score| share %{z:.2f}<extra></extra>"), row=1, col=1)
    first = onsets.head(shown).dropna(subset=["carried_onset"])
    fig.add_trace(go.Scatter(x=first["carried_onset"].astype(float), y=first["edge"].astype(str), mode="markers",
                             marker=dict(symbol="line-ns-open", size=14, color=ONSET_COLOR, line=dict(width=2)),
                             name="carried onset", hovertemplate="%{y}: onset %{x}<extra></extra>"), row=1, col=1)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    if circuits is not None and not circuits.empty:
        c = circuits.sort_values("step")
        fig.add_trace(go.Scatter(x=c["step"], y=c["size"], mode="lines+markers", name="circuit size",
                                 customdata=c["faithfulness"], hovertemplate="step %{x}: %{y} edges, faithfulness "
                                 "%{customdata:.2f}<extra></extra>"), row=2, col=1)
        fig.update_yaxes(title_text="edges", row=2, col=1)
    tau_line(fig, tau)
    _onset_lines(fig, marks)
    fig.update_xaxes(title_text="step", row=2, col=1)
    fig.update_layout(height=max(420, 18 * len(order) + 260), showlegend=False, margin=dict(l=130))
    return fig


KIND_COLORS = {"q": "#1f77b4", "k": "#2ca02c", "v": "#d62728", "mlp": "#9467bd", "logits": "#7f7f7f"}


def _node(name: str, n_heads: int) -> tuple[float, float]:
    """Where a component sits: embeddings at the bottom, each layer's heads in a row, its MLP above, then the logits."""
    if name == "embed":
        return (n_heads - 1) / 2, 0.0
    if name.startswith("MLP"):
        return (n_heads - 1) / 2, 2.0 * int(name[3:]) + 2
    if name == "logits":
        return (n_heads - 1) / 2, float("inf")
    layer, head = name[1:].split("H")
    return float(head), 2.0 * int(layer) + 1


def circuit_graph(edges: pd.DataFrame, steps: Mapping[str, int]) -> go.Figure:
    """The circuit (its edges, `in_circuit`) at each of `steps` ({label: step}), one panel each: components by layer,
    an edge from its sender to its receiver's component coloured by what it feeds (q, k, v, the MLP, the logits),
    its width by |score| as a share of that step's largest."""
    require(edges, ["step", "sender", "receiver", "kind", "score", "in_circuit"], "circuit graph")
    chosen = {label: step for label, step in steps.items() if step in set(edges["step"])}
    fig = make_subplots(rows=1, cols=max(1, len(chosen)), subplot_titles=[f"{k}: step {v}" for k, v in chosen.items()])
    heads = [s for s in edges["sender"].unique() if str(s).startswith("L")]
    n_heads = 1 + max((int(str(h).split("H")[1]) for h in heads), default=0)
    top = 2.0 * (1 + max((int(str(h)[1:].split("H")[0]) for h in heads), default=0)) + 1
    place = lambda name: (lambda x, y: (x, top if y == float("inf") else y))(*_node(name, n_heads))  # noqa: E731
    for col, (label, step) in enumerate(chosen.items(), 1):
        part = edges[(edges["step"] == step) & edges["in_circuit"].astype(bool)]
        largest = float(part["score"].abs().max()) if len(part) else 1.0
        for r in part.itertuples():
            (x0, y0), (x1, y1) = place(str(r.sender)), place(str(r.receiver).split(".")[0])
            fig.add_trace(go.Scatter(x=[x0, x1], y=[y0, y1], mode="lines", showlegend=False, hoverinfo="text",
                                     line=dict(color=KIND_COLORS.get(str(r.kind), "#333"),
                                               width=1 + 6 * abs(float(r.score)) / (largest or 1.0)),
                                     text=f"{r.sender}->{r.receiver}: {float(r.score):.3f}"), row=1, col=col)
        names = sorted({*edges["sender"].astype(str), "logits"})
        xy = [place(n) for n in names]
        fig.add_trace(go.Scatter(x=[p[0] for p in xy], y=[p[1] for p in xy], mode="markers+text", text=names,
                                 textposition="middle right", marker=dict(size=9, color="white", line=dict(width=1)),
                                 showlegend=False, hoverinfo="skip"), row=1, col=col)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(height=420, title="the circuit at chosen steps (colour: q blue, k green, v red, MLP purple, "
                                        "logits grey; width: |score|)")
    return fig
