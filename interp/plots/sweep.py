"""Figures of a sweep: the family-level claims, one point per run, seeds as replicates.

Each function takes a result of `interp.sweeps.scaling` (`power_law`, `fixed_d`, `noise`,
`asymmetry`) and draws it; nothing heavier than evaluating a fitted line happens here. The
results are read by their attributes (no import of the fits: figures depend on results,
never the reverse), so fit the table first: `tau_vs_d(scaling.power_law(table))`. The
paper's numbers come from `interp.sweeps.paper`. Conventions: steps are optimizer steps,
both axes are logarithmic wherever a power law is read off, a censored run (the threshold
was never reached) is an open triangle pointing up at its steps_run (the true value lies
above), and the paper's number is drawn as a labelled grey reference.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from interp.errors import InterpError
from interp.plots.style import LOGK_COLOR, METRIC_TITLES, PALETTE, STEP_TITLE, TAU_COLOR, require
from interp.sweeps.paper import (
    PAPER_ASYMMETRY,
    PAPER_DELTA,
    PAPER_FIXED_D,
    PAPER_FIXED_D_TAU,
    PAPER_LR_K,
    PAPER_LR_MEASURE,
    PAPER_LR_NEVER,
    PAPER_LR_NEVER_STEPS,
    PAPER_LR_TAU,
)

if TYPE_CHECKING:
    from interp.sweeps.conditions import AsymmetryResult, NoiseResult
    from interp.sweeps.fits import FixedDResult, PowerLawFit, SlopeFit

MEASURE_TITLES = {
    "tau_half": "τ_half (optimizer steps)",
    "tau_window": "τ_window (optimizer steps)",
    "t_start": "plateau exit t_start (optimizer steps)",
    "t_end": "snap end t_end (optimizer steps)",
    "plateau_height": "plateau height (candidate loss / log K)",
    "snap_step": "snap step (optimizer steps)",
    "steps_to_acc_cand_99": "steps to candidate accuracy ≥ 0.99 (optimizer steps)",
    "steps_to_exact_99": "steps to exact match ≥ 0.99 (optimizer steps)",
}
X_TITLES = {
    "D": "dataset size D (examples)",
    "k": "K (targets per base)",
    "n_bases": "bases (count)",
    "lr": "learning rate",
    "batch_size": "batch size (examples per step)",
}
RUN_COLOR = PALETTE[0]
FIT_COLOR = PALETTE[1]
BAND_COLOR = "rgba(239, 85, 59, 0.18)"   # PALETTE[1] at low opacity
PAPER_COLOR = LOGK_COLOR
CENSORED_MARKER = dict(symbol="triangle-up-open", size=11, color=TAU_COLOR, line=dict(width=1.5))


def _title(column: str) -> str:
    return MEASURE_TITLES.get(column) or X_TITLES.get(column) or METRIC_TITLES.get(column, column)


def _censored_name(y: str, runs: list[str], at_most: int = 4) -> str:
    shown = ", ".join(runs[:at_most]) + (f" +{len(runs) - at_most}" if len(runs) > at_most else "")
    return f"censored ({y} > steps run): {shown}"


def _run_traces(points: pd.DataFrame, x: str, y: str, show_legend: bool = True, group: str = "") -> list[go.Scatter]:
    """Used runs as filled circles, censored runs as open triangles at steps_run."""
    used = points[points["used"]]
    traces = [go.Scatter(
        x=used[x].to_numpy(float), y=used[y].to_numpy(float), mode="markers", name="runs",
        legendgroup=group + "runs", showlegend=show_legend,
        marker=dict(size=8, color=RUN_COLOR, line=dict(color="white", width=0.5)), text=used["run"].astype(str),
        hovertemplate=f"%{{text}}<br>{x} %{{x:g}}<br>{y} %{{y:.4g}}<extra></extra>",
    )]
    cen = points[points["role"] == "censored"]
    if len(cen):
        if "steps_run" not in cen.columns:
            raise InterpError("censored runs need the column 'steps_run' (where their triangle is drawn)")
        runs = [str(r) for r in cen["run"]]
        traces.append(go.Scatter(
            x=cen[x].to_numpy(float), y=cen["steps_run"].to_numpy(float), mode="markers",
            name=_censored_name(y, runs), legendgroup=group + "censored", showlegend=show_legend,
            marker=CENSORED_MARKER, text=runs,
            hovertemplate=f"%{{text}} (censored)<br>{x} %{{x:g}}<br>{y} > %{{y:.4g}}<extra></extra>",
        ))
    return traces


def _line(x: np.ndarray, intercept: float, slope: float) -> np.ndarray:
    return np.exp(intercept) * np.asarray(x, float) ** slope


def _result(obj, what: str, fit: str, attributes: tuple[str, ...]):
    """`obj` itself if it has the result's attributes; a table or anything else is refused, naming the fit."""
    if isinstance(obj, pd.DataFrame):
        raise InterpError(f"{what}: takes the result of interp.sweeps.scaling.{fit}, not a sweep table; "
                          f"fit it first: {fit}(table)")
    missing = [a for a in attributes if not hasattr(obj, a)]
    if missing:
        raise InterpError(f"{what}: expected the result of interp.sweeps.scaling.{fit}, got {type(obj).__name__} "
                          f"(no {', '.join(missing)})")
    return obj


# ---------------------------------------------------------------------------- 1. tau vs D
def tau_vs_d(fit: PowerLawFit, paper: bool = True) -> go.Figure:
    """tau against D on log-log axes: runs, censored runs, the fit with its CI band, the paper's slope.

    `fit` is a `power_law` result. The paper's delta = 1.19 is drawn through the geometric
    centre of the used runs, so only its slope is compared (the paper's C belongs to its own
    setup).
    """
    fit = _result(fit, "tau vs D", "power_law", ("points", "band", "x", "y", "delta", "ci", "ci_level"))
    require(fit.points, ["run", "role", "used", fit.x, fit.y], "tau vs D")
    require(fit.band, [fit.x, "fit", "lo", "hi"], "tau vs D (fit band)")
    x, y = fit.x, fit.y
    band = fit.band
    traces = _run_traces(fit.points, x, y)
    bx = band[x].to_numpy(float)
    lo, hi = fit.ci
    traces += [
        go.Scatter(x=bx, y=band["lo"].to_numpy(float), mode="lines", line=dict(width=0), name="CI lower",
                   showlegend=False, hoverinfo="skip"),
        go.Scatter(x=bx, y=band["hi"].to_numpy(float), mode="lines", line=dict(width=0), fill="tonexty",
                   fillcolor=BAND_COLOR, name=f"{fit.ci_level:.0%} CI of the fit", hoverinfo="skip"),
        go.Scatter(x=bx, y=band["fit"].to_numpy(float), mode="lines", line=dict(color=FIT_COLOR, width=2),
                   name=f"fit: δ = {fit.delta:.3g} [{lo:.3g}, {hi:.3g}]",
                   hovertemplate=f"fit<br>{x} %{{x:g}}<br>{y} %{{y:.4g}}<extra></extra>"),
    ]
    # the paper's exponent of the same claim (delta = 1.19 for tau against D, 2.13 for the lead in steps against K)
    expected = PAPER_DELTA if x == "D" else (getattr(fit, "paper", None) or {}).get("delta")
    if paper and expected is not None:
        used = fit.points[fit.points["used"]]
        lx, ly = np.log(used[x].to_numpy(float)), np.log(used[y].to_numpy(float))
        ref = np.exp(ly.mean()) * (bx / np.exp(lx.mean())) ** expected
        traces.append(go.Scatter(
            x=bx, y=ref, mode="lines", line=dict(color=PAPER_COLOR, dash="dash", width=1.5),
            name=f"paper: δ = {expected} (through the data's centre)",
            hovertemplate=f"paper δ = {expected}<br>{x} %{{x:g}}<br>{y} %{{y:.4g}}<extra></extra>",
        ))
    fig = go.Figure(traces)
    fig.update_layout(
        title=f"{y} against {x}: δ = {fit.delta:.3g} [{lo:.3g}, {hi:.3g}] ({fit.method}), "
              f"{fit.n_used} runs, {fit.n_censored} censored",
        height=480, xaxis=dict(type="log", title=_title(x)), yaxis=dict(type="log", title=_title(y)),
        legend=dict(title=dict(text="")),
    )
    return fig


# ---------------------------------------------------------------------------- 2. tau vs K at fixed D
def tau_vs_k_fixed_d(result: FixedDResult) -> go.Figure:
    """tau against K at one D (a `fixed_d` result): runs, per-K means, the fitted slope, and the paper's
    values at D = 10,000 (otherwise a flat line at the mean: what "tau is flat in K" predicts)."""
    res = _result(result, "tau vs K at fixed D", "fixed_d", ("points", "per_k", "y", "d", "fit", "slope", "ci"))
    y = res.y
    require(res.points, ["run", "role", "used", "k", y], "tau vs K at fixed D")
    require(res.per_k, ["k", "mean"], "tau vs K at fixed D (per-K means)")
    traces = _run_traces(res.points, "k", y)
    per_k = res.per_k.dropna(subset=["mean"])
    traces.append(go.Scatter(x=per_k["k"].to_numpy(float), y=per_k["mean"].to_numpy(float), mode="lines+markers",
                             name="mean per K", line=dict(color=RUN_COLOR, width=1),
                             marker=dict(symbol="diamond", size=10, color=RUN_COLOR),
                             hovertemplate=f"K %{{x}}<br>mean {y} %{{y:.4g}}<extra></extra>"))
    ks = np.linspace(res.points["k"].min(), res.points["k"].max(), 40)
    lo, hi = res.ci
    traces.append(go.Scatter(x=ks, y=_line(ks, res.fit.intercept, res.slope), mode="lines",
                             line=dict(color=FIT_COLOR, width=2),
                             name=f"fit: slope = {res.slope:+.3g} [{lo:.3g}, {hi:.3g}]"
                                  f" ({'flat' if res.flat else 'not flat'})"))
    if res.paper:
        pk = sorted(PAPER_FIXED_D_TAU)
        traces.append(go.Scatter(x=pk, y=[PAPER_FIXED_D_TAU[k] for k in pk], mode="lines+markers",
                                 line=dict(color=PAPER_COLOR, dash="dash", width=1.5),
                                 marker=dict(symbol="square-open", size=9, color=PAPER_COLOR),
                                 name=f"paper (D = {PAPER_FIXED_D:,})"))
    else:
        used = res.points[res.points["used"]]
        mean = float(used[y].mean())
        traces.append(go.Scatter(x=[ks[0], ks[-1]], y=[mean, mean], mode="lines",
                                 line=dict(color=PAPER_COLOR, dash="dash", width=1.5),
                                 name=f"flat at the mean ({mean:.4g})"))
    fig = go.Figure(traces)
    fig.update_layout(
        title=f"{y} against K at D = {res.d:,}: slope {res.slope:+.3g} [{lo:.3g}, {hi:.3g}], "
              f"max/min of per-K means {res.ratio_max_min:.3g}",
        height=450, xaxis=dict(type="log", title=_title("k")), yaxis=dict(type="log", title=_title(y)),
    )
    return fig


# ---------------------------------------------------------------------------- 3. tau vs gradient noise
def tau_vs_noise(result: NoiseResult, paper: bool | None = None) -> go.Figure:
    """Three log-log panels of a `noise` result: tau against lr (at one batch size), against batch size
    (at one lr), and examples seen (tau x batch) against batch size; censored runs as open triangles.

    `paper`: draw the paper's lr table (K = 20, tau_window); default when the lr runs are at K = 20.
    """
    res = _result(result, "tau vs noise", "noise", ("points", "y", "lr", "batch", "examples"))
    y = res.y
    pts = res.points
    require(pts, ["run", "role", "used", "lr", "batch_size", y], "tau vs noise")
    at_b = res.lr.fixed["batch_size"] if res.lr else None
    at_lr = res.batch.fixed["lr"] if res.batch else None
    titles = [f"against learning rate (batch {at_b:g})" if at_b else "against learning rate (no lr axis)",
              f"against batch size (lr {at_lr:g})" if at_lr else "against batch size (no batch axis)",
              f"examples seen (lr {at_lr:g})" if at_lr else "examples seen"]
    fig = make_subplots(rows=1, cols=3, subplot_titles=titles, horizontal_spacing=0.08)
    shown = set()

    def add(traces: list[go.Scatter], col: int) -> None:
        for t in traces:
            t.showlegend = t.name not in shown and t.showlegend is not False
            t.legendgroup = t.name
            shown.add(t.name)
            fig.add_trace(t, row=1, col=col)

    def fit_line(f: SlopeFit, xs: np.ndarray, col: int, label: str) -> None:
        grid = np.geomspace(xs.min(), xs.max(), 40)
        lo, hi = f.ci
        add([go.Scatter(x=grid, y=_line(grid, f.intercept, f.slope), mode="lines",
                        line=dict(color=FIT_COLOR, width=2),
                        name=f"{label}: slope {f.slope:+.3g} [{lo:.3g}, {hi:.3g}] ({f.sign})")], col)

    if res.lr:
        part = pts[np.isclose(pts["batch_size"].to_numpy(float), at_b)]
        add(_run_traces(part, "lr", y), 1)
        fit_line(res.lr, part["lr"].to_numpy(float), 1, "fit vs lr")
        ks = set(part["k"]) if "k" in part else set()
        if paper or (paper is None and ks == {PAPER_LR_K}):
            lrs = sorted(PAPER_LR_TAU)
            add([go.Scatter(x=lrs, y=[PAPER_LR_TAU[v] for v in lrs], mode="lines+markers",
                            line=dict(color=PAPER_COLOR, dash="dash", width=1.5),
                            marker=dict(symbol="square-open", size=9, color=PAPER_COLOR),
                            name=f"paper (K = {PAPER_LR_K}, {PAPER_LR_MEASURE})"),
                 go.Scatter(x=[PAPER_LR_NEVER], y=[PAPER_LR_NEVER_STEPS], mode="markers",
                            marker=dict(symbol="triangle-up-open", size=11, color=PAPER_COLOR),
                            name=f"paper: lr {PAPER_LR_NEVER:g} never snaps in "
                                 f"{PAPER_LR_NEVER_STEPS:,} steps")], 1)
    if res.batch:
        part = pts[np.isclose(pts["lr"].to_numpy(float), at_lr, rtol=1e-9, atol=0)]
        add(_run_traces(part, "batch_size", y), 2)
        fit_line(res.batch, part["batch_size"].to_numpy(float), 2, "fit vs batch")
        seen = part.assign(examples_seen=part[y] * part["batch_size"],
                           steps_run=part["steps_run"] * part["batch_size"] if "steps_run" in part else np.nan)
        add(_run_traces(seen, "batch_size", "examples_seen"), 3)
        if res.examples:
            fit_line(res.examples, part["batch_size"].to_numpy(float), 3, "fit of examples seen")
    fig.update_xaxes(type="log")
    fig.update_yaxes(type="log")
    fig.update_xaxes(title_text=_title("lr"), row=1, col=1)
    fig.update_xaxes(title_text=_title("batch_size"), row=1, col=2)
    fig.update_xaxes(title_text=_title("batch_size"), row=1, col=3)
    fig.update_yaxes(title_text=_title(y), row=1, col=1)
    fig.update_yaxes(title_text=_title(y), row=1, col=2)
    fig.update_yaxes(title_text=f"examples seen, {y} x batch (examples)", row=1, col=3)
    fig.update_layout(title=f"{y} against gradient noise: {res.n_used} runs, {res.n_censored} censored",
                      height=460, legend=dict(orientation="h", x=0, y=-0.2, yanchor="top"))
    return fig


# ---------------------------------------------------------------------------- 4. asymmetry
def asymmetry_bars(result: AsymmetryResult) -> go.Figure:
    """An `asymmetry` result. Left: steps per direction (geometric mean over seeds, CI, each seed a dot).
    Right: the per-seed ratio a_to_b / bz_to_a, its geometric mean with CI, and the paper's 1.7-4.4x shaded."""
    result = _result(result, "asymmetry bars", "asymmetry", ("steps", "pairs", "measure", "geo_mean_ratio", "ci"))
    require(result.steps, ["direction", "geo_mean", "lo", "hi"], "asymmetry bars")
    require(result.pairs, ["seed", "steps_bz_to_a", "steps_a_to_b", "ratio", "status"], "asymmetry bars")
    m = result.measure
    fig = make_subplots(rows=1, cols=2, column_widths=[0.4, 0.6], horizontal_spacing=0.12,
                        subplot_titles=[f"{m} per direction", "ratio a_to_b / bz_to_a per seed"])
    st = result.steps
    fig.add_trace(go.Bar(
        x=st["direction"].tolist(), y=st["geo_mean"].to_numpy(float), name="geometric mean over seeds",
        marker=dict(color=[PALETTE[0], PALETTE[2]][: len(st)]),
        error_y=dict(type="data", symmetric=False, array=(st["hi"] - st["geo_mean"]).to_numpy(float),
                     arrayminus=(st["geo_mean"] - st["lo"]).to_numpy(float)),
        hovertemplate="%{x}: %{y:.4g} steps<extra></extra>",
    ), row=1, col=1)
    good = result.pairs[result.pairs["status"] == "used"]
    for d, col in (("bz_to_a", "steps_bz_to_a"), ("a_to_b", "steps_a_to_b")):
        fig.add_trace(go.Scatter(
            x=[d] * len(good), y=good[col].to_numpy(float), mode="markers", name="seeds", legendgroup="seeds",
            showlegend=d == "bz_to_a", marker=dict(color="black", size=6), text=[f"seed {s}" for s in good["seed"]],
            hovertemplate="%{text}: %{y:.4g} steps<extra></extra>",
        ), row=1, col=1)
    labels = [f"seed {s}" for s in result.pairs["seed"]]
    fig.add_trace(go.Bar(
        x=[lab for lab, st_ in zip(labels, result.pairs["status"]) if st_ == "used"],
        y=good["ratio"].to_numpy(float), name="per-seed ratio", marker=dict(color=PALETTE[4]),
        hovertemplate="%{x}: ratio %{y:.3g}<extra></extra>",
    ), row=1, col=2)
    lo, hi = result.ci
    fig.add_trace(go.Bar(
        x=["geometric mean"], y=[result.geo_mean_ratio], name=f"geometric mean {result.geo_mean_ratio:.3g} "
                                                              f"[{lo:.3g}, {hi:.3g}]",
        marker=dict(color=FIT_COLOR),
        error_y=dict(type="data", symmetric=False, array=[hi - result.geo_mean_ratio],
                     arrayminus=[result.geo_mean_ratio - lo]),
    ), row=1, col=2)
    lower = result.pairs[result.pairs["status"] == "a_to_b censored (lower bound)"]
    if len(lower):
        fig.add_trace(go.Scatter(
            x=[f"seed {s}" for s in lower["seed"]], y=lower["ratio_bound"].to_numpy(float), mode="markers",
            name="censored a_to_b: ratio > bound", marker=CENSORED_MARKER,
            hovertemplate="%{x}: ratio > %{y:.3g}<extra></extra>",
        ), row=1, col=2)
    p_lo, p_hi = PAPER_ASYMMETRY
    fig.add_hrect(y0=p_lo, y1=p_hi, row=1, col=2, fillcolor=PAPER_COLOR, opacity=0.18, line_width=0,
                  name="paper range", annotation=dict(text=f"paper {p_lo}–{p_hi}×", font=dict(color=PAPER_COLOR)),
                  annotation_position="top left")
    fig.add_hline(y=1.0, row=1, col=2, name="ratio 1", line=dict(color=LOGK_COLOR, width=1))
    fig.update_yaxes(title_text=_title(m), row=1, col=1)
    fig.update_yaxes(title_text="ratio a_to_b / bz_to_a (×)", row=1, col=2)
    fig.update_xaxes(title_text="direction", row=1, col=1)
    fig.update_xaxes(title_text="seed (same seed = same mapping)", row=1, col=2)
    fig.update_layout(title=f"Direction asymmetry: a_to_b needs {result.geo_mean_ratio:.3g}× "
                            f"[{lo:.3g}, {hi:.3g}] the steps of bz_to_a ({result.n_pairs} seeds)",
                      height=440, bargap=0.3, barmode="overlay")
    return fig


# ---------------------------------------------------------------------------- candidate loss curves
def candidate_loss_overlay(metrics_by_run: dict[str, pd.DataFrame], table: pd.DataFrame, color_by: str = "D",
                           log_x: bool = False) -> go.Figure:
    """Every run's candidate loss against step, coloured by `color_by` (default D), with each run's
    log K plateau as a dashed line in the same colour: the plateau's length grows with D."""
    require(table, ["run", "k", color_by], "candidate loss overlay")
    if not metrics_by_run:
        raise InterpError("candidate loss overlay: no metrics given (metrics_by_run is empty)")
    info = table.set_index(table["run"].astype(str))
    unknown = [r for r in metrics_by_run if r not in info.index]
    if unknown:
        raise InterpError(f"candidate loss overlay: run(s) {', '.join(unknown)} are not in the sweep table")
    for name, df in metrics_by_run.items():
        require(df, ["step", "loss_cand"], f"candidate loss overlay (metrics of {name})")
    values = sorted({float(info.loc[r, color_by]) for r in metrics_by_run})
    label = "D" if color_by == "D" else color_by
    if len(values) <= len(PALETTE):
        colors = {v: PALETTE[i] for i, v in enumerate(values)}
        continuous = False
    else:
        lv = np.log(values) if min(values) > 0 else np.asarray(values)
        span = (lv.max() - lv.min()) or 1.0
        colors = dict(zip(values, sample_colorscale("Viridis", list((lv - lv.min()) / span))))
        continuous = True
    fig = go.Figure()
    groups_started = set()
    spans: dict[tuple[float, int], list[float]] = {}
    for name in sorted(metrics_by_run, key=lambda r: (float(info.loc[r, color_by]), r)):
        df = metrics_by_run[name].dropna(subset=["loss_cand"]).sort_values("step")
        v, k = float(info.loc[name, color_by]), int(info.loc[name, "k"])
        group = f"{label} = {v:g}"
        fig.add_trace(go.Scatter(
            x=df["step"].to_numpy(), y=df["loss_cand"].to_numpy(float), mode="lines", name=name,
            legendgroup=group, legendgrouptitle=dict(text=group) if group not in groups_started else None,
            showlegend=not continuous, line=dict(color=colors[v], width=1.5),
            hovertemplate=f"{name} ({group}, K = {k})<br>step %{{x}}<br>candidate loss %{{y:.3f}} nats<extra></extra>",
        ))
        groups_started.add(group)
        s = spans.setdefault((v, k), [math.inf, -math.inf])
        s[0], s[1] = min(s[0], float(df["step"].min())), max(s[1], float(df["step"].max()))
    for (v, k), (s0, s1) in sorted(spans.items()):
        fig.add_trace(go.Scatter(
            x=[s0, s1], y=[math.log(k)] * 2, mode="lines", name=f"log K = {math.log(k):.2f} (K = {k})",
            legendgroup=f"{label} = {v:g}", showlegend=False, line=dict(color=colors[v], dash="dash", width=1),
            hovertemplate=f"log K = {math.log(k):.3f} nats (K = {k})<extra></extra>",
        ))
    if continuous:  # the colours were sampled on log values: the colourbar is too, with real tick labels
        ticks = np.unique(np.quantile(lv, [0, 0.25, 0.5, 0.75, 1]))
        fig.add_trace(go.Scatter(
            x=[None], y=[None], mode="markers", name=f"{label} colour scale", showlegend=False, hoverinfo="skip",
            marker=dict(colorscale="Viridis", cmin=float(lv.min()), cmax=float(lv.max()), color=[float(lv.min())],
                        colorbar=dict(title=dict(text=_title(color_by), side="right"), tickvals=list(ticks),
                                      ticktext=[f"{np.exp(t) if min(values) > 0 else t:.3g}" for t in ticks])),
        ))
    fig.update_layout(
        title=f"Candidate loss of every run, coloured by {label}; dashed: each run's log K",
        height=480, xaxis=dict(title=STEP_TITLE, type="log" if log_x else "linear"),
        yaxis=dict(title="candidate loss (nats)"), hovermode="closest",
    )
    return fig
