"""Shared look of every figure: colours, axis titles and small trace helpers (plotly only)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

from interp.errors import InterpError

STEP_TITLE = "step (optimizer steps)"
LOSS_TITLE = "loss (nats)"
TAU_COLOR = "black"
LOGK_COLOR = "#7f7f7f"
ONSET_COLOR = "#555555"
ROUTING_COLOR = "#d62728"
PALETTE = qualitative.Plotly

# (column, legend name) of the loss curves, in drawing order
LOSSES = (("loss", "full loss"), ("loss_first", "first-token loss"), ("loss_cand", "candidate loss"))

COLUMN_TITLES = {
    "z_share": "z-share (fraction of output variance)",
    "attn_to_z": "attention to z (mass)",
    "z_var": "within-group variance (squared norm)",
    "out_norm": "mean output norm",
}
METRIC_TITLES = {
    "loss": "loss (nats)",
    "loss_first": "first-token loss (nats)",
    "loss_cand": "candidate loss (nats)",
    "shuffle_gap": "shuffle gap (nats)",
    "acc_first": "first-token accuracy (fraction)",
    "acc_cand": "candidate accuracy (fraction)",
    "acc_exact": "exact-match accuracy (fraction)",
}


# ---------------------------------------------------------------------------- helpers
def require(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    """Fail early, naming the table, instead of a KeyError deep inside plotly."""
    if df is None or df.empty:
        raise InterpError(f"{what}: the table is empty (nothing was analysed)")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InterpError(f"{what}: the table lacks the column(s) {', '.join(missing)}")


def metric_title(metric: str) -> str:
    if metric.startswith("delta_"):
        base = metric[len("delta_"):]
        return "Δ " + METRIC_TITLES.get(base, base)
    if metric.startswith("clean_"):
        return "unablated " + METRIC_TITLES.get(metric[len("clean_"):], metric)
    return METRIC_TITLES.get(metric, metric)


def head_order(df: pd.DataFrame) -> list[str]:
    """Head names sorted by (layer, head): L0H0 first, not lexicographic (L10 after L9)."""
    heads = df[["layer", "head", "head_name"]].drop_duplicates().sort_values(["layer", "head"])
    return [str(h) for h in heads["head_name"]]


def vline(fig: go.Figure, x, row="all", col="all", **shape) -> None:
    """What `fig.add_vline(x=x, row=row, col=col, **shape)` draws (a line across each non-empty subplot chosen),
    added in one layout update: plotly's own re-validates every shape of the figure once per subplot it adds
    a line to, seconds over a report."""
    add_layout(fig, shapes=vline_shapes(fig, x, row, col, **shape))


def add_layout(fig: go.Figure, **objects: list[dict]) -> None:
    """Append shapes, annotations... (as dicts) to the figure's layout in one update, validated once: what
    as many `fig.add_shape(...)` / `fig.add_annotation(...)` calls (no row or col) give."""
    for kind, new in objects.items():
        if new:
            fig.layout[kind] = fig.layout[kind] + tuple(new)


def vline_shapes(fig: go.Figure, x, row="all", col="all", **shape) -> list[dict]:
    """The shapes of `vline`, as dicts."""
    grid = fig._grid_ref  # None for a figure without subplots
    if grid is None:
        refs = [("x", "y")]
    else:
        rows = range(1, len(grid) + 1) if row == "all" else [row]
        cols = range(1, len(grid[0]) + 1) if col == "all" else [col]
        refs = [tuple(k.replace("axis", "") for k in grid[r - 1][c - 1][0].layout_keys)
                for r in rows for c in cols if grid[r - 1][c - 1]]
        used = {(t.xaxis or "x", t.yaxis or "y") for t in fig.data}  # plotly leaves out the empty subplots
        for kind in ("shapes", "annotations", "images"):
            used |= {(o.xref or "x", o.yref or "y") for o in fig.layout[kind]}
        refs = [ref for ref in refs if ref in used]
    return [dict(type="line", x0=x, x1=x, y0=0, y1=1, **shape, xref=xref, yref=f"{yref} domain") for xref, yref in refs]


def tau_line(fig: go.Figure, tau: int | None, label: str = "τ", row="all", col="all") -> None:
    """Dotted vertical line at tau on every subplot, labelled once above the first one."""
    if tau is None:
        return
    vline(fig, tau, row=row, col=col, name="tau", line=dict(color=TAU_COLOR, dash="dot", width=1.5))
    fig.add_annotation(x=tau, xref="x", y=1.0, yref="y domain", yanchor="bottom", showarrow=False,
                       text=f"{label} = {tau}", name="tau label", font=dict(size=11, color=TAU_COLOR))


def log_k_line(fig: go.Figure, log_k: float, row=None, col=None) -> None:
    fig.add_hline(y=log_k, row=row, col=col, name="log K", line=dict(color=LOGK_COLOR, dash="dash", width=1.5),
                  annotation=dict(text=f"log K = {log_k:.2f}", font=dict(size=11, color=LOGK_COLOR)),
                  annotation_position="bottom right")


def loss_traces(metrics: pd.DataFrame) -> list[go.Scatter]:
    traces = []
    for i, (column, name) in enumerate(LOSSES):
        if column not in metrics or metrics[column].isna().all():
            continue
        df = metrics.dropna(subset=[column])
        traces.append(go.Scatter(
            x=df["step"], y=df[column], name=name, mode="lines+markers", marker=dict(size=4),
            line=dict(color=PALETTE[i]),
            hovertemplate=f"step %{{x}}<br>{name} %{{y:.3f}} nats<extra></extra>",
        ))
    return traces


SHUFFLE_GAPS = (("shuffle_gap", "shuffle gap (first token)", 3), ("shuffle_gap_full", "shuffle gap (full target)", 4))


def shuffle_traces(metrics: pd.DataFrame) -> list[go.Scatter]:
    """The first-token and (where logged) full-target shuffle gaps over steps."""
    traces = []
    for column, name, color in SHUFFLE_GAPS:
        if column not in metrics or metrics[column].isna().all():
            continue
        df = metrics.dropna(subset=[column])
        traces.append(go.Scatter(x=df["step"], y=df[column], name=name, mode="lines+markers",
                                 marker=dict(size=4), line=dict(color=PALETTE[color]),
                                 hovertemplate=f"step %{{x}}<br>{name} %{{y:.3f}} nats<extra></extra>"))
    return traces


def head_heatmap(sens: pd.DataFrame, column: str, **kwargs) -> tuple[go.Heatmap, list[str]]:
    """Heads (rows, L0H0 first) x steps (columns, at their real step values)."""
    require(sens, ["step", "layer", "head", "head_name", column], f"heatmap of {column}")
    order = head_order(sens)
    grid = sens.pivot_table(index="head_name", columns="step", values=column, aggfunc="first", dropna=False)
    grid = grid.reindex(index=order, columns=sorted(sens["step"].unique()))
    title = COLUMN_TITLES.get(column, column)
    bounded = column in ("z_share", "attn_to_z")
    trace = go.Heatmap(
        x=[int(s) for s in grid.columns], y=order, z=grid.to_numpy(dtype=float), name=column,
        colorscale="Viridis", zmin=0.0 if bounded else None, zmax=1.0 if bounded else None,
        colorbar=dict(title=dict(text=title, side="right")),
        hovertemplate=f"%{{y}}<br>step %{{x}}<br>{column} %{{z:.3f}}<extra></extra>", **kwargs,
    )
    return trace, order


def onset_trace(onsets: pd.DataFrame, highlight: str | None = None) -> go.Scatter:
    have = onsets.dropna(subset=["onset"])
    colors = [ROUTING_COLOR if h == highlight else "white" for h in have["head_name"]]
    return go.Scatter(
        x=[int(v) for v in have["onset"]], y=[str(h) for h in have["head_name"]], name="onset",
        mode="markers", marker=dict(symbol="diamond", size=11, color=colors, line=dict(color="black", width=1.5)),
        hovertemplate="%{y}: onset at step %{x}<extra></extra>",
    )


def position_labels(positions: Sequence[int], labels: Sequence[str] | None) -> list[str]:
    if labels is None:
        return [str(p) for p in positions]
    return [f"{p} {labels[p]}" if p < len(labels) else str(p) for p in positions]


