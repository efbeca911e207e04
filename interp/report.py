"""Self-contained HTML pages of a run: the full report and the timeline alone.

A page embeds plotly.js once, inline, and every figure as a div plus a call to
`Plotly.newPlot`, so it opens from disk with no network. The analyses come from the suite
(`interp.analysis.suite.run_suite`) and therefore from the run's cache when present: a
second report of the same run only redraws. Each analysis and each figure is a section of
its own; one that cannot be made (too few checkpoints, no tau, no candidate loss) is
replaced by a note saying why, and the rest of the report is still written.

A small script at the top of every page records JavaScript errors (window error events,
unhandled promise rejections, console.error) in a hidden element `#js-errors`, so a
headless browser can check that the page rendered cleanly.
"""

from __future__ import annotations

import datetime as _dt
import html
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from interp.analysis import suite as suite_analysis
from interp.analysis.common import segment_names
from interp.errors import InterpError
from interp.io import atomic_write_bytes
from interp.runs import Run
from interp.summary import run_summary
from interp.timelines import Timeline, check_run, timeline
from interp.transition import tau as run_tau

ERROR_RECORDER = """
(function () {
  var errors = [];
  window.__interpErrors = errors;
  function flush() {
    var el = document.getElementById("js-errors");
    if (el) { el.textContent = errors.join("\\n"); el.setAttribute("data-count", String(errors.length)); }
  }
  function record(text) { errors.push(String(text)); flush(); }
  window.addEventListener("error", function (e) {
    if (e && e.message) { record("error: " + e.message + " (" + (e.filename || "") + ":" + (e.lineno || "") + ")"); }
    else if (e && e.target && e.target !== window) { record("failed to load " + (e.target.src || e.target.href || e.target.tagName)); }
    else { record("error: " + e); }
  }, true);
  window.addEventListener("unhandledrejection", function (e) {
    var r = e && e.reason; record("unhandled rejection: " + (r && r.stack ? r.stack : r));
  });
  var consoleError = console.error;
  console.error = function () {
    record("console.error: " + Array.prototype.map.call(arguments, String).join(" "));
    return consoleError.apply(console, arguments);
  };
  document.addEventListener("DOMContentLoaded", flush);
  window.addEventListener("load", function () {
    flush();
    document.body.setAttribute("data-loaded", "1");
  });
})();
"""

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto; max-width: 1300px;
       color: #222; padding: 0 16px; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; margin-top: 1.8em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
.meta { color: #666; font-size: 0.9em; }
table.summary { border-collapse: collapse; margin: 0.5em 0 1em; }
table.summary th, table.summary td { text-align: left; padding: 4px 14px 4px 0; border-bottom: 1px solid #eee;
       vertical-align: top; }
table.summary th { font-weight: 600; white-space: nowrap; }
.missing { background: #fff6e0; border-left: 4px solid #e6a700; padding: 8px 14px; margin: 1em 0; }
.missing ul { margin: 0.3em 0; }
figure.report-figure { margin: 0.5em 0 1.5em; }
figcaption { color: #444; font-size: 0.92em; margin-top: 4px; max-width: 1000px; }
"""


@dataclass
class Section:
    """One figure of the report: how to draw it, or why it could not be drawn."""

    key: str
    title: str
    caption: str
    html: str = ""
    problem: str = ""


# ---------------------------------------------------------------------------- page assembly
def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    # an inline script ends at the first "</script"; plotly.js never contains one, but be sure
    return get_plotlyjs().replace("</script", "<\\/script")


def figure_html(fig, key: str) -> str:
    """A figure as a div + script, without plotly.js (the page embeds it once)."""
    height = fig.layout.height or 450
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"fig-{key}", auto_play=False,
                       default_width="100%", default_height=f"{int(height)}px",
                       config={"responsive": True, "displaylogo": False})


def page(title: str, body: str) -> str:
    """A complete, self-contained HTML page: error recorder, plotly.js inline, then `body`."""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{html.escape(title)}</title>\n"
        f"<script>{ERROR_RECORDER}</script>\n"
        f"<style>{STYLE}</style>\n"
        f"<script type=\"text/javascript\">{_plotly_js()}</script>\n"
        "</head>\n<body>\n"
        "<pre id=\"js-errors\" data-count=\"0\" hidden></pre>\n"
        f"{body}\n</body>\n</html>\n"
    )


def _write(path: Path, text: str) -> Path:
    path = Path(path)
    atomic_write_bytes(path, text.encode("utf-8"))
    return path


def _fmt(value, spec: str = "", none: str = "n/a") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return none
    return format(value, spec)


# ---------------------------------------------------------------------------- analyses
def _analyses(run: Run, cache: bool, device: str, progress: bool, n_groups: int | None
              ) -> tuple[dict[str, pd.DataFrame], dict[str, str], dict]:
    """Every suite analysis on its own, so that one failing (e.g. no tau) spares the others."""
    tables: dict[str, pd.DataFrame] = {}
    problems: dict[str, str] = {}
    counts = {"hits": 0, "misses": 0}
    for name in suite_analysis.ANALYSES:
        try:
            result = suite_analysis.run_suite(run, only=name, progress=progress, cache=cache, device=device,
                                              n_groups=n_groups)
        except InterpError as exc:
            problems[name] = str(exc)
            continue
        tables.update(result.tables)
        counts["hits"] += result.cache_hits
        counts["misses"] += result.cache_misses
    return tables, problems, counts


def _need(tables: dict[str, pd.DataFrame], problems: dict[str, str], table: str, analysis: str) -> pd.DataFrame:
    if table not in tables or tables[table].empty:
        why = problems.get(analysis, "it produced no rows")
        raise InterpError(f"the {analysis} analysis could not run: {why}")
    return tables[table]


def _tau_or_none(run: Run, kind: str = "half") -> int | None:
    try:
        return run_tau(run, kind=kind)
    except InterpError:
        return None


# ---------------------------------------------------------------------------- summary
def _summary_rows(run: Run, summary: dict, findings: dict) -> list[tuple[str, str]]:
    spec = run.spec
    f = findings
    rows = [
        ("run", f"{run.path} (seed {spec.seed})"),
        ("task", f"{spec.task.direction}, K = {spec.task.k}, D = {spec.task.dataset_size:,} "
                 f"({spec.task.n_bases:,} bases)"),
        ("model", f"{spec.model.n_layers} layers x {spec.model.n_heads} heads, d_model {spec.model.d_model}"),
        ("checkpoints", f"{summary['n_checkpoints']} saved" + (
            f", steps {summary['first_step']}–{summary['last_step']}" if summary["n_checkpoints"] else "")),
        ("plateau height / log K", f"{_fmt(summary.get('plateau_height'), '.3f')} "
                                   f"(log K = {run.log_k:.3f} nats)"),
        ("τ (half / window)", f"{_fmt(summary.get('tau_half'), none='never')} / "
                              f"{_fmt(summary.get('tau_window'), none='n/a')} steps"),
        ("snap (Lc < 0.05 log K)", f"step {summary['snap_step']}" if summary.get("snap_step") is not None else "never"),
    ]
    if "routing_head" in f:
        rows.append(("routing head", f"{f['routing_head']} (z-share {f['routing_z_share']:.2f} at the last step, "
                                     f"next best {_fmt(f.get('runner_up_z_share'), '.2f')}; "
                                     f"attention to z {f['routing_attn_to_z']:.2f})"))
        onset = f.get("onset")
        rows.append(("its onset", "none" if onset is None else
                     f"step {onset} ({int(100 * f['onset_fraction'])}% of its rise, held {f['onset_m']} checkpoints)"))
        rows.append(("lead (τ − onset) / τ", _fmt(f.get("lead"), ".2f")))
    else:
        rows.append(("routing head", "n/a (no sensitivity analysis)"))
    if "ablation_mid_delta_loss_cand" in f:
        rows.append((f"{f['ablation_method']}-ablating {f['routing_head']} at τ",
                     f"{f['ablation_mid_delta_loss_cand']:+.2f} nats of candidate loss "
                     f"(step {f['ablation_mid_step']})"))
    else:
        rows.append(("ablating the routing head at τ", "n/a"))
    if "groups_share_above_80_at_half_tau" in f:
        n = f["groups_n"]
        share = f["groups_share_above_80_at_half_tau"]
        rows.append(("groups ≥ 80% accurate at τ/2", f"{round(share * n)} of {n} ({100 * share:.1f}%) "
                                                    f"at step {f['groups_half_tau_step']}"))
    else:
        rows.append(("groups ≥ 80% accurate at τ/2", "n/a"))
    return rows


def _summary_table(rows: list[tuple[str, str]]) -> str:
    cells = "\n".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<table class=\"summary\" id=\"summary\">\n{cells}\n</table>"


# ---------------------------------------------------------------------------- sections
def _sections(run: Run, tables: dict, problems: dict, tl: Timeline | None, tl_problem: str,
              t: int | None, findings: dict) -> list[Section]:
    from interp import plots

    metrics = run.metrics
    routing = findings.get("routing_head")
    onsets = tl.onsets if tl is not None else None

    def timeline_fig():
        if tl is None:
            raise InterpError(tl_problem)
        return tl.figure()

    def need(table: str, analysis: str) -> pd.DataFrame:
        return _need(tables, problems, table, analysis)

    def need_metrics() -> pd.DataFrame:
        if metrics.empty:
            raise InterpError(f"{run.path} has no evaluations yet")
        return metrics

    def need_tau() -> int:
        if not t:
            raise InterpError("this figure is placed relative to τ, and the candidate loss never falls below "
                              "0.5 log K (or the run has no candidate loss)")
        return t

    def attention_fig():
        patterns = need("attention", "attention")
        steps = sorted(int(s) for s in patterns["step"].unique())
        # open on the saved step nearest tau (mid-transition), else on the first one
        first = min(steps, key=lambda s: (abs(s - t), s)) if t else steps[0]
        return plots.attention_evolution(patterns, labels=segment_names(run.task), step=first)

    specs: list[tuple[str, str, str, Callable]] = [
        ("timeline", "Circuit-formation timeline",
         "Losses, shuffle gap and per-head z-share on one step axis. Dashed vertical lines: each head's onset "
         f"(first checkpoint at {_fmt(tl.fraction if tl else None, '.0%', '20%')} of its own rise, held for "
         f"{tl.m if tl else 2} checkpoints; the routing head in red); dotted black line: τ. A positive lead means "
         "the routing head forms while the loss still sits near log K.",
         timeline_fig),
        ("loss", "Losses",
         "Full loss (a1..a4 and EOS), first-token loss and candidate loss (over the K candidates of the group), "
         "in nats. The candidate loss first drops to log K (z ignored: the K candidates of a group score alike), "
         "waits on the plateau, then snaps to 0 once z is used. The first-token loss shows whether the "
         "marginal over the K first characters was learned (it would sit at log K too).",
         lambda: plots.loss_curves(need_metrics(), run.log_k, t)),
        ("shuffle", "Shuffle gap",
         "First-token loss with z replaced by another selector of the group, minus the clean loss: ~0 while the "
         "model ignores z, large once it depends on it.",
         lambda: plots.shuffle_gap(need_metrics(), t)),
        ("sensitivity", "Head z-sensitivity",
         "Share of each head's output variance at the decision position explained by z (within-group variance "
         "over total), at every checkpoint; diamonds mark onsets.",
         lambda: plots.sensitivity_heatmap(need("sensitivity", "sensitivity"), "z_share", t, onsets, routing)),
        ("attn_to_z", "Head attention to z",
         "Attention mass from the decision position to the z positions, per head and checkpoint.",
         lambda: plots.sensitivity_heatmap(need("sensitivity", "sensitivity"), "attn_to_z", t, onsets, routing)),
        ("segments", "Attention by segment",
         "Where each head's decision-position attention goes (mass per segment of the input), across checkpoints.",
         lambda: plots.attention_segments(need("attention_segments", "attention"), t)),
        ("attention", "Attention-pattern evolution",
         "Mean attention pattern of each head (query x key; positions labelled with their segment), averaged over "
         "a fixed probe; it opens at the checkpoint nearest τ: drag the slider or press play to move through "
         "the checkpoints.",
         lambda: attention_fig()),
        ("ablation", "Head ablation before, at and after τ",
         "Change in candidate loss (nats) when one head's output is ablated at every position, at τ/4, τ and 2τ "
         "(snapped to saved checkpoints). A routing head costs little before the transition and a lot after.",
         lambda: plots.ablation_heatmaps(need("ablation", "ablation"), "delta_loss_cand")),
        ("patching", "Activation patching at τ",
         "Clean (B, z1) activations patched into the corrupted run (B, z2), measured by the logit difference "
         "a1(A1) − a1(A2) at the decision position: residual stream per layer and position, heads per position "
         "and at all positions.",
         lambda: plots.patching_heatmaps(need("patching_residual", "patching"), need("patching_heads", "patching"))),
        ("group_hist", "Per-group accuracy at fractions of τ",
         "Histogram of each group's candidate accuracy (over its K examples) at checkpoints nearest to fractions "
         "of τ; the dashed line is the 80% threshold. A collective snap moves all groups together.",
         lambda: plots.group_histograms(need("groups", "groups"), need_tau())),
        ("group_share", "Share of groups ≥ 80% accurate",
         "Share of probe groups whose candidate accuracy is at least 80%, at every checkpoint.",
         lambda: plots.groups_share(need("groups", "groups"), t)),
    ]
    sections = []
    for key, title, caption, make in specs:
        section = Section(key, title, caption)
        try:
            section.html = figure_html(make(), key)
        except InterpError as exc:
            section.problem = str(exc)
        sections.append(section)
    return sections


def _section_html(s: Section) -> str:
    head = f"<h2 id=\"section-{s.key}\">{html.escape(s.title)}</h2>"
    if s.problem:
        return (f"<section class=\"missing\" data-section=\"{s.key}\">{head}\n"
                f"<p>This figure could not be made: {html.escape(s.problem)}</p></section>")
    return (f"<section data-section=\"{s.key}\">{head}\n<figure class=\"report-figure\">{s.html}\n"
            f"<figcaption>{html.escape(s.caption)}</figcaption></figure></section>")


# ---------------------------------------------------------------------------- entry points
def write_report(
    run: Run,
    path: str | Path,
    cache: bool = True,
    device: str = "cpu",
    progress: bool = False,
    n_groups: int | None = None,
) -> Path:
    """Write one self-contained HTML report of `run` (summary table, then every figure) to `path`.

    Analyses go through the suite and its per-run cache (`cache=False`: recompute, write
    nothing). `n_groups` overrides the probe size of every analysis, as in `interp analyze`.
    Sections that cannot be made are listed at the top with the reason; nothing raises for them.
    """
    start = time.perf_counter()
    summary = run_summary(run)
    tables, problems, counts = _analyses(run, cache, device, progress, n_groups)
    t = _tau_or_none(run)
    findings = suite_analysis.findings(run, tables, t)
    tl, tl_problem = None, ""
    try:
        check_run(run)
        tl = timeline(run, sens=_need(tables, problems, "sensitivity", "sensitivity"))
    except InterpError as exc:
        tl_problem = str(exc)
    sections = _sections(run, tables, problems, tl, tl_problem, t, findings)

    missing = [s for s in sections if s.problem]
    notes = ""
    if missing:  # each reason names the analysis or the run property it lacks
        items = [f"<li><b>{html.escape(s.title)}</b>: {html.escape(s.problem)}</li>" for s in missing]
        notes = ("<div class=\"missing\" id=\"missing\"><b>Not everything could be made for this run.</b>"
                 f"<ul>\n{chr(10).join(items)}\n</ul></div>")
    made = len(sections) - len(missing)
    stamp = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    from interp import __version__

    body = "\n".join([
        f"<h1>interp report: {html.escape(run.name)}</h1>",
        f"<p class=\"meta\">{html.escape(str(run.path))} · written {html.escape(stamp)} by interp {__version__} · "
        f"{made} of {len(sections)} figures · analyses: {counts['misses']} computed, {counts['hits']} from cache · "
        f"{time.perf_counter() - start:.1f} s</p>",
        "<h2 id=\"section-summary\">Summary</h2>",
        _summary_table(_summary_rows(run, summary, findings)),
        notes,
        *(_section_html(s) for s in sections),
    ])
    return _write(Path(path), page(f"interp report: {run.name}", body))


def write_timeline(
    run: Run,
    path: str | Path,
    cache: bool = True,
    device: str = "cpu",
    progress: bool = False,
    n_groups: int | None = None,
) -> Path:
    """Write the timeline figure alone as a self-contained HTML page; raises InterpError if it cannot be made."""
    check_run(run)  # before the (possibly slow) analysis
    result = suite_analysis.run_suite(run, only="sensitivity", progress=progress, cache=cache, device=device,
                                      n_groups=n_groups)
    tl = timeline(run, sens=result.tables["sensitivity"])
    fig = tl.figure()
    body = (f"<h1>interp timeline: {html.escape(run.name)}</h1>\n"
            f"<figure class=\"report-figure\">{figure_html(fig, 'timeline')}</figure>")
    return _write(Path(path), page(f"interp timeline: {run.name}", body))
