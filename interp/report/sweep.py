"""The sweep report: one self-contained HTML page of a family of runs.

At the top a summary of the family-level findings, each with its interval and the paper's
value beside it (the scaling exponent, the fixed-D slope, the noise trends, the direction
asymmetry, and how many runs are done, censored or failed); then the figures; then the
per-run table, each run linked to its own report (written with `runs=True`, or listed with
the command that makes it). A fit that does not apply to the sweep's design (e.g. no
asymmetry without both directions) is a note, never an error: the fits are
`interp.sweeps.family.sweep_fits`'s, the figures `interp.plots.sweep`'s. Page assembly is
shared with the run report (`interp.report`).
"""

from __future__ import annotations

import html
import math
import time
from pathlib import Path

import pandas as pd

from interp.errors import InterpError
from interp.report.page import Section, figure_html, page, report_top, section_html, write_html
from interp.sweeps.circuit_fits import circuit_fits
from interp.sweeps.family import Fits, sweep_fits
from interp.sweeps.sweep import Sweep


CIRCUIT_LABELS = {"lead_share": "shuffle-gap lead share (τ_half − t(dz > 0.1)) / τ_half",
                  "lead_exponent": "lead in steps against K (∝ K^e)",
                  "lead_share_author": "lead share, the author's definition (t_loss l1_0.9, in-batch dz)",
                  "lead_exponent_author": "lead in steps against K, the author's definition",
                  "routing_heads": "routing head across the runs",
                  "ablation_trend": "routing head's ablation effect at τ"}


def _summary_rows(sweep: Sweep, table: pd.DataFrame, fits: Fits, circuits: Fits) -> list[tuple[str, str]]:
    counts = table["status"].value_counts().to_dict()
    censored = int(table.get("censored", pd.Series(dtype=bool)).fillna(False).sum())
    rows = [
        ("sweep", f"{sweep.path} ({sweep.spec.name or 'custom'}): {len(table)} runs, axes "
                  f"{', '.join(sweep.spec.fields) or 'none'}"),
        ("runs", f"{counts.get('done', 0)} done, {censored} censored (never reached 0.5 log K), "
                 f"{counts.get('failed', 0)} failed, {counts.get('damaged', 0)} damaged (left out; the table says "
                 f"why), {counts.get('running', 0)} running, "
                 f"{counts.get('interrupted', 0) + counts.get('not started', 0)} not finished"),
    ]
    labels = {"scaling": "scaling exponent δ (τ ∝ D^δ)", "fixed_d": "fixed-D slope of log τ on log K",
              "noise": "noise trend", "asymmetry": "direction asymmetry (a_to_b / bz_to_a)",
              "cancellation": "selector sharing β (τ ∝ G^β)"}
    for name, label in labels.items():
        if name in fits.results:
            rows.append((label, fits.results[name].summary()))
        else:
            rows.append((label, f"n/a: {fits.problems.get(name, '')}"))
    for name, label in CIRCUIT_LABELS.items():
        result = circuits.results.get(name)
        rows.append((label, result.summary() if result is not None else f"n/a: {circuits.problems.get(name, '')}"))
    return rows


def _circuit_series(sweep: Sweep, table: pd.DataFrame, metrics: dict[str, pd.DataFrame]) -> dict[str, dict]:
    """Per analysed run its metrics and its routing head's z-share over the checkpoints (read from
    the cache; nothing is computed), for the timeline grid."""
    from interp.analysis.suite import run_suite

    out = {}
    heads = table.set_index("run")["routing_head"] if "routing_head" in table.columns else pd.Series(dtype=object)
    for name, df in metrics.items():
        entry = {"metrics": df}
        head = heads.get(name)
        if isinstance(head, str):
            try:
                sens = run_suite(sweep.run(name), only=("sensitivity",), progress=False, compute=False)
                sens = sens.tables.get("sensitivity")
            except InterpError:
                sens = None
            if sens is not None and not sens.empty:
                entry["z_share"] = sens[sens["head_name"] == head][["step", "z_share"]].sort_values("step")
        out[name] = entry
    return out


def _circuit_sections(circuits: Fits, table: pd.DataFrame, series: dict[str, dict]) -> list[Section]:
    from interp import plots

    res = circuits.results
    specs = [
        ("lead_share", "The shuffle gap's lead across K",
         "Each run's lead of the shuffle gap over the loss, (τ_half − t(dz > 0.1 nats)) / τ_half, against K, with the "
         "per-K means and the trend in log K; grey: the author's 0.20 at K = 3, 0.47 at K = 10 and 0.68 at K = 36 "
         "(0.52 ± 0.14 over K).",
         lambda: plots.k_trend_figure(res["lead_share"])),
        ("lead_exponent", "The lead in steps against K",
         "τ_half − t(dz > 0.1 nats) per run on log-log axes, the power-law fit with its bootstrap band, and the "
         "author's K^2.13 through the data's centre.",
         lambda: plots.tau_vs_d(res["lead_exponent"])),
        ("routing_heads", "Which head routes",
         "The routing head of each analysed run (the largest z-share at its last step), counted per head and "
         "stacked by K; the paper's run routes through L0H3, in layer 0.",
         lambda: plots.routing_bars(res["routing_heads"])),
        ("ablation_trend", "Ablating the routing head at τ, across K",
         "The candidate-loss change when the run's routing head is ablated at the checkpoint nearest τ_half, against "
         "K; grey: the paper's +1.41 nats for zero-ablating L0H3 at K = 10.",
         lambda: plots.k_trend_figure(res["ablation_trend"])),
    ]
    sections = _drawn(specs, circuits)
    sections.insert(2, _lead_definitions(circuits, table))
    grid = Section("timelines", "Every run's timeline, in units of τ",
                   "Small multiples sharing the step axis in units of each run's τ_half (0 to 2): the candidate loss over "
                   "log K, the shuffle gap over its largest value and, for analysed runs, the routing head's z-share, "
                   "with lines at the gap's onset (dz > 0.1 nats), the z-share's carried onset and τ_half, so the order "
                   "of events can be compared across the family.")
    try:
        grid.html = figure_html(plots.timeline_grid(series, table), "timelines")
    except InterpError as exc:
        grid.problem = str(exc)
    sections.append(grid)
    return sections


def _lead_definitions(circuits: Fits, table: pd.DataFrame) -> Section:
    """The lead share and its exponent under our definition and the author's on the same runs (a table, not a
    figure): our bootstrap intervals beside the author's statistic, then the author's published numbers; a
    definition the runs cannot give is one line saying why (`circuit_fits.lead_definitions`)."""
    from interp.sweeps.circuit_fits import lead_definitions
    from interp.sweeps.paper import PAPER_LEAD_EXPONENT, PAPER_LEAD_SHARE, PAPER_LEAD_SHARE_K, PAPER_LEAD_SHARE_SD

    section = Section("lead_definitions", "The shuffle gap's lead under both definitions",
                      "The same runs under ours (t_loss = τ_half, the unbiased dz on a fixed evaluation subset) and the "
                      "author's (SPEC 9.1: t_loss = the first logged step whose running-mean first-token loss is below "
                      "0.9 log K, the in-batch dz): the share's mean, its slope on log K and the lead in steps ∝ K^e, "
                      "each with our 95% bootstrap interval, and the author's statistic on the same runs (positive "
                      "leads only, mean ± np.std with ddof 0, least squares of log lead in steps on log K).")
    head = ["definition", "lead share, mean [95% CI]", "per K", "per unit of log K [95% CI]", "lead in steps ∝ K^e [95% CI]",
            "the author's statistic on these runs"]

    def ci(pair, spec):
        return f"[{format(pair[0], spec)}, {format(pair[1], spec)}]"

    rows = []
    for r in lead_definitions(circuits, table):
        if r["not_measured"]:
            rows.append(f"<tr><td>{html.escape(r['text'])}</td><td colspan=\"5\">not measured: "
                        f"{html.escape(r['not_measured'])}</td></tr>")
            continue
        a = r["author_statistic"] or {}
        stat = (f"{_fmt(a.get('mean'), '.3f')} ± {_fmt(a.get('sd'), '.3f')} over {a.get('n_positive')} positive of "
                f"{a.get('n')}; K^{_fmt(a.get('exponent'), '.2f')}" if a else "–")
        if r["n_not_logged"]:
            stat += f" ({r['n_not_logged']} finished run(s) without the logged columns left out)"
        cells = [r["text"], f"{r['mean']:.3f} {ci(r['mean_ci'], '.3f')} ({r['n_used']} runs)",
                 ", ".join(f"{v:.2f} at K = {k}" for k, v in r["per_k"].items()),
                 f"{r['slope']:+.3f} {ci(r['slope_ci'], '+.3f')} ({r['sign']})" if r["slope"] is not None else "–",
                 f"{r['exponent']:.2f} {ci(r['exponent_ci'], '.2f')}" if r["exponent"] is not None else "–", stat]
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    ends = sorted(PAPER_LEAD_SHARE_K)
    rise = (PAPER_LEAD_SHARE_K[ends[-1]] - PAPER_LEAD_SHARE_K[ends[0]]) / math.log(ends[-1] / ends[0])
    published = ["the author (published)", f"{PAPER_LEAD_SHARE} ± {PAPER_LEAD_SHARE_SD} over K = 3..36",
                 ", ".join(f"{v:.2f} at K = {k}" for k, v in PAPER_LEAD_SHARE_K.items()),
                 f"about {rise:+.2f} (K = {ends[0]} to {ends[-1]})", f"{PAPER_LEAD_EXPONENT}", "–"]
    rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in published) + "</tr>")
    header = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    section.html = f"<table class=\"summary\" id=\"lead-definitions\">\n<tr>{header}</tr>\n" + "\n".join(rows) + "\n</table>"
    return section


def _edges_section(sweep: Sweep, table: pd.DataFrame) -> Section:
    """The runs' circuits by edges at τ (`interp.sweeps.edge_overlap`, read from the caches; a table, not a figure):
    their overlap across seeds and K, whether the routing head's edges form first; the command when none is cached."""
    from interp.sweeps.edge_overlap import edge_overlap

    section = Section("edge_overlap", "Circuits by edges across the runs",
                      "Each run's circuit at the cached step nearest τ_half (the smallest top-|score| edge set keeping "
                      "the faithfulness target), compared between runs by the Jaccard index, with 95% intervals of a "
                      "bootstrap over runs; and whether the routing head's edges (its output, or into its q/k/v) have "
                      "the earliest carried onset among the run's circuit edges (a tie counts as first), as a share of "
                      "runs with a Wilson interval (docs/edges.md, \"On a sweep\").", analysis="edges")
    try:
        found = edge_overlap(sweep, table)
    except InterpError as exc:
        section.problem = str(exc)
        return section
    if found.empty:
        section.pending = True
        section.problem = f"No run has the edges analysis cached; compute it with: interp analyze {sweep.path} --only edges"
        return section
    head = ["run", "K", "seed", "method", "step (τ)", "circuit", "faithfulness", "routing head", "first edges (onset)",
            "routing head's first onset", "first?"]
    rows = []
    for r in found.runs.to_dict("records"):
        first = "–" if r["routing_first"] is None else ("yes" if r["strictly_first"] else "tied" if r["routing_first"]
                                                           else "no")
        shown = ", ".join(r["first_edges"][:3]) + (" …" if len(r["first_edges"]) > 3 else "")
        cells = [r["run"], _fmt(r["k"]), _fmt(r["seed"]), r["method"], f"{r['tau_step']} ({r['tau']:.0f})",
                 _fmt(r["size"], ".0f"), _fmt(r["faithfulness"], ".2f"), r["routing_head"] or "–",
                 f"{shown or '–'} ({_fmt(r['first_onset'], '.0f')})",
                 _fmt(r["routing_onset"], ".0f"), first]
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    lines = "".join(f"<li>{html.escape(line.strip())}</li>" for line in found.lines())
    header = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    section.html = (f"<ul id=\"edge-overlap-summary\">{lines}</ul>\n<table class=\"summary\" id=\"edge-overlap\">\n"
                    f"<tr>{header}</tr>\n" + "\n".join(rows) + "\n</table>")
    return section


def _figures(fits: Fits, table: pd.DataFrame, metrics: dict[str, pd.DataFrame]) -> list[Section]:
    from interp import plots

    specs = [
        ("scaling", "Scaling law: τ against D",
         "Each done run (censored runs as open triangles at the step they ended), the least-squares fit in "
         "log-log with its bootstrap band, and the paper's δ = 1.19 as a reference line.",
         lambda: plots.tau_vs_d(fits.results["scaling"])),
        ("fixed_d", "Fixed D: τ against K",
         "At one dataset size the plateau should not depend on K (the paper: 1600-1650 steps at D = 10,000).",
         lambda: plots.tau_vs_k_fixed_d(fits.results["fixed_d"])),
        ("noise", "Gradient noise: τ against learning rate and batch size",
         "More gradient noise (a higher learning rate or a smaller batch) lengthens the plateau in the paper "
         "(7x the learning rate gave 3.6x the plateau at batch 128); examples seen = τ x batch.",
         lambda: plots.tau_vs_noise(fits.results["noise"])),
        ("asymmetry", "Direction asymmetry",
         "Steps to exact match >= 0.99 of the reverse direction (a_to_b) over the disambiguation direction "
         "(bz_to_a) on the same mapping, per seed; the paper: 1.7-4.4x.",
         lambda: plots.asymmetry_bars(fits.results["asymmetry"])),
        ("cancellation", "Gradient cancellation: τ against the bases sharing a selector set",
         "The selector-sharing control: each set of K selectors is shared by G bases (task.selector_groups; G = "
         "n_bases is the paper's task). Gradient cancellation predicts τ ∝ G^β with β near 1; the author measured "
         "β = 0.02. Each done run, the log-log fit with its bootstrap band.",
         lambda: plots.tau_vs_d(fits.results["cancellation"])),
        ("overlay", "Candidate loss of every run",
         "Every run's candidate loss over steps, coloured by D, with its log K level dashed.",
         lambda: plots.candidate_loss_overlay(metrics, table)),
    ]
    return _drawn(specs, fits, always=("overlay",))


def _drawn(specs, fits: Fits, always=()) -> list[Section]:
    """A section per (key, title, caption, make): its figure, or why it cannot be drawn (the fit
    does not apply: its note in `fits.problems`; drawing failed: the error)."""
    sections = []
    for key, title, caption, make in specs:
        section = Section(key, title, caption)
        if key not in always and key not in fits.results:
            section.problem = fits.problems.get(key, "not computed")
        else:
            try:
                section.html = figure_html(make(), key)
            except InterpError as exc:
                section.problem = str(exc)
        sections.append(section)
    return sections


def _fmt(value, spec: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return "–"
    return format(value, spec)


def _runs_table(sweep: Sweep, table: pd.DataFrame, out: Path, linked: set[str]) -> str:
    head = ["run", *sweep.spec.fields, "status", "steps", "τ_half", "τ_window", "exact ≥ 0.99", "gap lead",
            "routing head", "wall", "report"]
    rows = []
    for r in table.to_dict("records"):
        tau = f"> {r['steps_run']} (censored)" if r.get("censored_tau_half") else _fmt(r["tau_half"], ".0f")
        exact = (f"> {r['steps_run']} (censored)" if r.get("censored_steps_to_exact_99")
                 else _fmt(r["steps_to_exact_99"], ".0f"))
        if r["run"] in linked:
            report = f"<a href=\"{html.escape(r['run'])}.html\">report</a>"
        else:
            command = f"interp report {sweep.path / r['run']} -o {out.parent / (r['run'] + '.html')}"
            report = f"<code>{html.escape(command)}</code>"
        status = html.escape(r["status"]) + (f"<br><small>{html.escape(r['error'])}</small>"
                                              if isinstance(r.get("error"), str) and r["error"] else "")
        routing = r.get("routing_head")
        routing = (html.escape(routing) if isinstance(routing, str)
                   else f"<small>{html.escape(r['circuits_reason'])}</small>"
                   if r["status"] == "done" and isinstance(r.get("circuits_reason"), str) else "–")
        cells = [html.escape(r["run"]), *(html.escape(_fmt(r[f])) for f in sweep.spec.fields), status,
                 _fmt(r["steps_run"]), tau, _fmt(r["tau_window"], ".0f"), exact, _fmt(r.get("gap_lead"), ".2f"), routing,
                 "–" if _fmt(r["wall_seconds"]) == "–" else f"{r['wall_seconds']:.0f} s", report]
        klass = " class=\"censored\"" if r.get("censored") else ""
        rows.append(f"<tr{klass}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    header = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    return (f"<table class=\"summary runs\" id=\"runs\">\n<tr>{header}</tr>\n" + "\n".join(rows) + "\n</table>")


PHASE_SIMS = 500  # simulated grids per scenario for the report's eta_c interval (interp phase: 1000 by default)


def _phase_section(sweep: Sweep, table: pd.DataFrame) -> Section | None:
    """The learning-rate phase diagram (interp.sweeps.phase), for a sweep over two or more learning rates where some
    run did not transition; None for any other sweep (it has no phase diagram to show)."""
    from interp.plots.phase import phase_svg
    from interp.sweeps.phase import phase, phase_table

    judged = table[table["outcome"].notna()] if "outcome" in table else table.iloc[:0]
    if judged["lr"].nunique() < 2 or (judged["outcome"] == "transitioned").all():
        return None
    section = Section("phase", "The learning-rate phase diagram",
                      "The share of seeds that transitioned per (lr, K) by the outcome rules each run was trained "
                      "with (S stuck, D diverged); per K, eta_c with its calibrated profile interval (diamond and "
                      f"bar) and the author's least-squares fit (circle); the interval's cutoff is calibrated with "
                      f"{PHASE_SIMS} simulated grids per scenario (docs/phase.md).")
    try:
        result = phase(sweep, sims=PHASE_SIMS, runs=phase_table(sweep, table=table))
    except InterpError as exc:
        section.problem = str(exc)
        return section
    text = "\n".join(result.lines())
    section.html = (f"<div id=\"phase-diagram\">{phase_svg(result)}</div>\n"
                    f"<pre id=\"phase-text\">{html.escape(text)}</pre>")
    return section


def write_sweep_report(sweep: Sweep, path: str | Path, runs: bool = False, y: str = "tau_half",
                       progress: bool = False, table: pd.DataFrame | None = None) -> Path:
    """Write the sweep's report to `path`; with `runs`, also each done run's own report beside it.
    `table` is `sweep.table()`, computed here unless given. A damaged run is a row of the runs
    table with its reason, named among the warnings, and left out of the fits and figures."""
    from interp.report.run import write_report
    from interp.runs import Run

    start = time.perf_counter()
    path = Path(path)
    table = sweep.table(circuits=True) if table is None or "circuits_reason" not in table.columns else table
    fits = sweep_fits(table, y=y)
    circuits = circuit_fits(table)
    usable = set(table.loc[table["status"] != "damaged", "run"])
    metrics = {r.name: r.metrics for r in sweep.runs if r.name in usable}
    sections = _figures(fits, table, metrics)
    sections += _circuit_sections(circuits, table, _circuit_series(sweep, table, metrics))
    sections.append(_edges_section(sweep, table))
    phase_section = _phase_section(sweep, table)
    if phase_section is not None:
        sections.insert(0, phase_section)
    linked = set()
    if runs:
        for name in table.loc[table["status"] == "done", "run"]:
            try:
                write_report(Run.open(sweep.path / name), path.parent / f"{name}.html", progress=progress)
                linked.add(name)
            except InterpError:
                continue
    notes = ""
    if fits.warnings or circuits.warnings:
        items = "\n".join(f"<li>{html.escape(w)}</li>" for w in dict.fromkeys(fits.warnings + circuits.warnings))
        notes = f"<div class=\"missing\" id=\"warnings\"><b>Left out of the fits</b><ul>\n{items}\n</ul></div>"
    body = "\n".join([
        *report_top("interp sweep report", sweep, f"{len(table)} runs", start, _summary_rows(sweep, table, fits, circuits),
                    notes),
        *(section_html(s) for s in sections),
        "<h2 id=\"section-runs\">Runs</h2>",
        _runs_table(sweep, table, path, linked),
    ])
    return write_html(path, page(f"interp sweep report: {sweep.name}", body))
