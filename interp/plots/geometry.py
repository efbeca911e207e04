"""Figures of the loss-landscape tables: Hessian extremes, anisotropy, escape mass and the LLC.

Inputs are the tidy tables of `interp.analysis.hessian` ("hessian", "hessian_escape") and
`interp.analysis.llc`; nothing heavier than a pivot is computed here.

Eigenvalues change sign and span decades, and plotly has no symlog axis, so they are drawn
on a signed-log scale y = sign(x) * log10(1 + |x| / c) (linear within about +-c of zero,
logarithmic beyond), with ticks labelled in real units (nats / param^2); c is `linthresh`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.analysis.params import component_order
from interp.errors import InterpError
from interp.plots.style import ONSET_COLOR, PALETTE, ROUTING_COLOR, STEP_TITLE, add_layout, require, tau_line, vline_shapes

EIGEN_TITLE = "eigenvalue (nats / param², signed log scale)"


def signed_log(x, linthresh: float) -> np.ndarray:
    """sign(x) * log10(1 + |x| / linthresh): the y coordinate of the signed-log axis."""
    x = np.asarray(x, dtype=float)
    return np.asarray(np.sign(x) * np.log10(1.0 + np.abs(x) / linthresh))


def _signed_log_ticks(values: np.ndarray, linthresh: float) -> tuple[list[float], list[str]]:
    """Tick positions at 0 and +-linthresh * 10^j, labelled in real units."""
    finite = np.abs(values[np.isfinite(values)])
    top = float(finite.max()) if finite.size else linthresh
    j_max = max(1, math.ceil(math.log10(max(top / linthresh, 1.0))))
    reals = [0.0]
    for j in range(0, j_max + 1):
        reals += [linthresh * 10**j, -linthresh * 10**j]
    reals = sorted(reals)
    return [float(signed_log(r, linthresh)) for r in reals], [f"{r:g}" for r in reals]


def _onset_lines(fig: go.Figure, onsets: Mapping[str, int | None] | None, row="all", col="all") -> None:
    """Dashed vertical line at each named onset step (None values are skipped), all added in one update."""
    lines, labels = [], []
    for i, (label, step) in enumerate((onsets or {}).items()):
        if step is None or (isinstance(step, float) and math.isnan(step)):
            continue
        lines += vline_shapes(fig, step, row=row, col=col, name=f"onset {label}",
                              line=dict(color=ONSET_COLOR, dash="dash", width=1))
        labels.append(dict(x=step, xref="x", y=1.0 - 0.06 * (i + 1), yref="y domain", showarrow=False, text=str(label),
                           name=f"onset label {label}", font=dict(size=10, color=ONSET_COLOR), xanchor="left"))
    add_layout(fig, shapes=lines, annotations=labels)


def _one_restriction(table: pd.DataFrame, restrict: str | None, what: str) -> pd.DataFrame:
    labels = list(dict.fromkeys(table["restrict"]))
    if restrict is None:
        if len(labels) > 1:
            raise InterpError(f"{what}: the table holds several restrictions ({', '.join(map(str, labels))}); "
                              f"choose one with restrict=")
        return table
    if restrict not in labels:
        raise InterpError(f"{what}: restriction {restrict!r} is not in the table; it has {', '.join(map(str, labels))}")
    return table[table["restrict"] == restrict]


# ---------------------------------------------------------------------------- Hessian
def eigenvalue_curves(
    hessian: pd.DataFrame,
    tau: int | None = None,
    onsets: Mapping[str, int | None] | None = None,
    linthresh: float = 0.1,
    restrict: str | None = None,
) -> go.Figure:
    """lambda_max and lambda_min over steps on a signed-log axis: when does the saddle appear and go?

    Lines are the most extreme pair (rank 0); the other ranks are faint markers. Rows that
    ARPACK did not converge on are left out.
    """
    require(hessian, ["step", "which", "rank", "eigenvalue", "converged", "restrict"], "eigenvalue curves")
    if not linthresh > 0:
        raise InterpError(f"eigenvalue curves: linthresh must be positive, got {linthresh!r}")
    df = _one_restriction(hessian, restrict, "eigenvalue curves")
    df = df[df["converged"].astype(bool)].sort_values("step")
    if df.empty:
        raise InterpError("eigenvalue curves: no converged eigenvalue in the table")
    fig = go.Figure()
    for i, (which, name) in enumerate((("top", "λ_max"), ("bottom", "λ_min"))):
        part = df[df["which"] == which]
        main, rest = part[part["rank"] == 0], part[part["rank"] > 0]
        color = PALETTE[0] if which == "top" else ROUTING_COLOR
        fig.add_trace(go.Scatter(
            x=main["step"], y=signed_log(main["eigenvalue"], linthresh), customdata=main["eigenvalue"],
            name=name, mode="lines+markers", marker=dict(size=5), line=dict(color=color),
            hovertemplate=f"step %{{x}}<br>{name} %{{customdata:.4g}}<extra></extra>",
        ))
        if not rest.empty:
            fig.add_trace(go.Scatter(
                x=rest["step"], y=signed_log(rest["eigenvalue"], linthresh), customdata=rest[["eigenvalue", "rank"]],
                name=f"{which} k > 1", mode="markers", marker=dict(size=4, color=color, opacity=0.35),
                hovertemplate="step %{x}<br>rank %{customdata[1]}: %{customdata[0]:.4g}<extra></extra>",
            ))
    tickvals, ticktext = _signed_log_ticks(df["eigenvalue"].to_numpy(dtype=float), linthresh)
    fig.add_hline(y=0.0, line=dict(color="#7f7f7f", width=1))
    tau_line(fig, tau)
    _onset_lines(fig, onsets)
    label = df["restrict"].iloc[0]
    fig.update_layout(
        title=f"Hessian extremes ({label}): λ_min < 0 marks a saddle", height=450, xaxis_title=STEP_TITLE,
        yaxis=dict(title=EIGEN_TITLE, tickvals=tickvals, ticktext=ticktext), hovermode="closest",
    )
    return fig


def anisotropy_curve(
    hessian: pd.DataFrame,
    tau: int | None = None,
    onsets: Mapping[str, int | None] | None = None,
    restrict: str | None = None,
) -> go.Figure:
    """lambda_max / |lambda_min| over steps (log axis): how much flatter the escape direction is."""
    require(hessian, ["step", "anisotropy", "restrict"], "anisotropy")
    df = _one_restriction(hessian, restrict, "anisotropy")
    per_step = df.groupby("step", as_index=False)["anisotropy"].first().sort_values("step")
    per_step = per_step[np.isfinite(per_step["anisotropy"]) & (per_step["anisotropy"] > 0)]
    if per_step.empty:
        raise InterpError("anisotropy: no positive, finite anisotropy in the table")
    fig = go.Figure([go.Scatter(
        x=per_step["step"], y=per_step["anisotropy"], name="anisotropy", mode="lines+markers",
        marker=dict(size=5), line=dict(color=PALETTE[2]),
        hovertemplate="step %{x}<br>λ_max / |λ_min| = %{y:.3g}<extra></extra>",
    )])
    fig.add_hline(y=1.0, line=dict(color="#7f7f7f", width=1, dash="dash"))
    tau_line(fig, tau)
    _onset_lines(fig, onsets)
    fig.update_layout(title="Anisotropy λ_max / |λ_min|", height=380, xaxis_title=STEP_TITLE,
                      yaxis=dict(title="λ_max / |λ_min| (ratio, log scale)", type="log"), showlegend=False)
    return fig


def escape_heatmap(
    escape: pd.DataFrame,
    tau: int | None = None,
    detail: bool = False,
    highlight: str | None = None,
) -> go.Figure:
    """Share of the escape direction's squared mass per component (rows) and step (columns).

    detail=False: one row per component (heads, MLPs, embed, unembed, other); detail=True: one
    row per (component, part), e.g. "L0H3 W_Q". `highlight` names a component (the routing
    head) whose label is drawn in red.
    """
    require(escape, ["step", "component", "part", "mass"], "escape heatmap")
    df = escape[escape["part"] == "all"] if not detail else escape[escape["part"] != "all"]
    if df.empty:
        raise InterpError("escape heatmap: no rows to draw")
    comps = component_order(df["component"])
    if detail:
        df = df.assign(row=df["component"] + " " + df["part"].astype(str))
        order = []
        for c in comps:
            order += list(dict.fromkeys(df.loc[df["component"] == c, "row"]))
    else:
        df = df.assign(row=df["component"])
        order = comps
    grid = df.pivot_table(index="row", columns="step", values="mass", aggfunc="sum")
    steps = sorted(df["step"].unique())
    grid = grid.reindex(index=order, columns=steps)
    fig = go.Figure(go.Heatmap(
        x=[int(s) for s in steps], y=order, z=grid.to_numpy(dtype=float), zmin=0.0, zmax=1.0,
        colorscale="Viridis", colorbar=dict(title=dict(text="share of |v_min|²", side="right")),
        hovertemplate="%{y}<br>step %{x}<br>mass %{z:.3f}<extra></extra>", name="escape mass",
    ))
    tau_line(fig, tau)
    ticktext = [f"<b style='color:{ROUTING_COLOR}'>{r}</b>" if highlight and r.split(" ")[0] == highlight else r
                for r in order]
    fig.update_layout(
        title="Where the escape direction (bottom eigenvector) lives", xaxis_title=STEP_TITLE,
        yaxis=dict(title="component", autorange="reversed", tickvals=order, ticktext=ticktext),
        height=max(320, 22 * len(order) + 140),
    )
    return fig


# ---------------------------------------------------------------------------- LLC
def _restriction_key(name: str) -> tuple:
    m = re.fullmatch(r"L(\d+)H(\d+)", str(name))
    return (0, 0, 0) if name == "full" else (1, int(m[1]), int(m[2])) if m else (2, 0, 0)


def llc_curves(
    llc: pd.DataFrame,
    tau: int | None = None,
    onsets: Mapping[str, int | None] | None = None,
    highlight: str | None = None,
) -> go.Figure:
    """LLC of the whole model (top) and refined per-head LLC (bottom) over steps, +- chain std."""
    require(llc, ["step", "restrict", "llc_mean", "llc_std"], "LLC curves")
    per = llc.groupby(["restrict", "step"], as_index=False).agg(
        llc_mean=("llc_mean", "first"), llc_std=("llc_std", "first")).sort_values("step")
    names = sorted(per["restrict"].unique(), key=_restriction_key)
    heads = [n for n in names if n != "full"]
    rows = (1 if "full" in names else 0) + (1 if heads else 0)
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=[t for t, on in (("whole model", "full" in names),
                                                        ("refined, per head", bool(heads))) if on])
    row = 1
    if "full" in names:
        d = per[per["restrict"] == "full"]
        fig.add_trace(go.Scatter(
            x=d["step"], y=d["llc_mean"], error_y=dict(type="data", array=d["llc_std"], visible=True),
            name="full", mode="lines+markers", marker=dict(size=5), line=dict(color="black"),
            hovertemplate="step %{x}<br>LLC %{y:.3g}<extra>full</extra>",
        ), row=1, col=1)
        fig.update_yaxes(title_text="LLC", row=1, col=1)
        row = 2
    for i, name in enumerate(heads):
        d = per[per["restrict"] == name]
        color = ROUTING_COLOR if name == highlight else PALETTE[(i + 1) % len(PALETTE)]
        fig.add_trace(go.Scatter(
            x=d["step"], y=d["llc_mean"], error_y=dict(type="data", array=d["llc_std"], visible=True),
            name=name, mode="lines+markers", marker=dict(size=5), line=dict(color=color, width=3 if name == highlight else 2),
            hovertemplate=f"step %{{x}}<br>LLC %{{y:.3g}}<extra>{name}</extra>",
        ), row=row, col=1)
    if heads:
        fig.update_yaxes(title_text="refined LLC", row=row, col=1)
    tau_line(fig, tau)
    _onset_lines(fig, onsets)
    fig.update_xaxes(title_text=STEP_TITLE, row=rows, col=1)
    fig.update_layout(title="Local learning coefficient (mean ± std over chains)", height=300 * rows + 120,
                      hovermode="closest")
    return fig
