"""The run report and the timeline page of one run.

The analyses come from the suite (`interp.analysis.suite.run_suite`) and therefore from the
run's cache when present: a second report of the same run only redraws. Analyses that run
only when asked (minutes of work: the geometry) are read from the cache and never started;
their sections say how to compute them. Every section is registered by its figure function
(`interp.report.sections`: title, caption, figure); one that cannot be made (too few
checkpoints, no tau, no candidate loss) is replaced by a note saying why, and the rest of the
report is still written. Cache entries that were damaged (recomputed, or left out) and a
cache that could not be used are named in a box under the timeline; the routing head is read
at the last step whose checkpoint can be read, and the summary says which.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from interp.analysis import registry
from interp.analysis.cache import ResultCache
from interp.analysis.common import select_steps
from interp.analysis.findings import findings as find, summary_rows
from interp.analysis.suite import run_suite
from interp.errors import InterpError
from interp.report import decoding_figures, diagnostic_figures, edge_figures, figures  # noqa: F401 - their figure functions register the sections
from interp.report.mechanisms import mechanism_html
from interp.report.page import (NotComputed, Section, figure_count, figure_html, page, report_top, section_html,
                                write_html)
from interp.report.sections import RUN, ReportSection, sections_of
from interp.runs import CACHE_DIR, Run
from interp.summary import run_rows, run_summary
from interp.timelines import Timeline, check_run, timeline
from interp.transition import tau_or_none


FIRST_SECTION = "timeline"  # the section a run's report opens with, right under the summary


@dataclass
class Context:
    """What a figure function may read: the run, the analyses' tables and findings, the timeline."""

    run: Run
    tables: dict[str, pd.DataFrame]
    problems: dict[str, str]  # analysis -> why it could not run
    notes: list[str]  # e.g. a relative step beyond the run
    step_problems: list[str]  # steps that could not be analysed
    counts: dict[str, int] = field(default_factory=dict)
    cache_notes: list[str] = field(default_factory=list)  # cache entries not used, a cache not usable
    unreadable: dict[int, str] = field(default_factory=dict)  # steps whose checkpoint could not be read
    tau: int | None = None
    findings: dict = field(default_factory=dict)
    timeline: Timeline | None = None
    timeline_problem: str = ""

    def need(self, table: str, analysis: str | None = None) -> pd.DataFrame:
        """A table of an analysis; NotComputed (with the command) for one that runs only when asked."""
        analysis = analysis or table
        df = self.tables.get(table)
        if df is not None and not df.empty:
            return df
        entry = registry.REGISTRY.get(analysis)
        if entry is not None and not entry.default:
            raise NotComputed(f"Not computed yet (minutes of work); compute it with: "
                              f"interp analyze {self.run.path} --only {analysis}")
        raise InterpError(f"the {analysis} analysis could not run: {self.problems.get(analysis, 'it produced no rows')}")

    def need_tau(self) -> int:
        if not self.tau:
            raise InterpError("this figure is placed relative to τ, and the candidate loss never falls below "
                              "0.5 log K (or the run has no candidate loss)")
        return self.tau

    def need_metrics(self) -> pd.DataFrame:
        metrics = self.run.metrics
        if metrics.empty:
            raise InterpError(f"{self.run.path} has no evaluations yet")
        return metrics

    def event_steps(self) -> dict[str, int]:
        """The routing head's carried / used events, for figures that mark them."""
        if self.timeline is None or self.timeline.events.empty:
            return {}
        have = self.timeline.events.dropna(subset=["step"])
        return {str(r.label): int(r.step) for r in have.itertuples()}


def analyses(run: Run, cache: bool = True, device: str = "cpu", progress: bool = False,
             n_groups: int | None = None) -> Context:
    """Every default analysis of the registry in one suite run (each checkpoint loaded once),
    and whatever the cache holds of the others. An analysis placed relative to tau is skipped,
    with the reason, when the run has no tau."""
    t = tau_or_none(run)
    c = Context(run, {}, {}, [], [], {"hits": 0, "misses": 0}, tau=t)
    names = []
    for name in registry.default_names():
        entry = registry.get(name)
        if entry.needs_tau and t is None:
            c.problems[name] = (f"it runs at steps relative to τ ({entry.steps}), and the candidate loss never "
                                f"falls below 0.5 log K")
        else:
            names.append(name)
    if names:
        try:
            result = run_suite(run, only=names, options={"n_groups": n_groups}, progress=progress, cache=cache,
                               device=device)
            c.tables.update(result.tables)
            c.notes = [n for n in result.notes if n not in result.cache_notes]
            c.step_problems, c.cache_notes, c.unreadable = result.problems, list(result.cache_notes), result.unreadable
            c.counts = {"hits": result.cache_hits, "misses": result.cache_misses}
        except InterpError as exc:
            c.problems.update({name: str(exc) for name in names})
    store = ResultCache(run, enabled=cache)  # the others are read from the cache only, never started
    for entry in registry.REGISTRY.values():
        if not entry.default:
            try:
                c.tables.update(store.cached_any(entry.cache_key(entry.params())))
            except InterpError:  # e.g. its optional extra is not installed: the section says how
                continue
    c.cache_notes = list(dict.fromkeys(c.cache_notes + store.notes))
    c.findings = find(run, c.tables, t, unreadable=c.unreadable)
    try:
        check_run(run)
        c.timeline = timeline(run, sens=c.need("sensitivity"), usage=c.tables.get("usage"),
                              with_usage="usage" in c.tables, trajectory=c.tables.get("trajectory"),
                              with_trajectory="trajectory" in c.tables,
                              edges=c.tables.get("edges", pd.DataFrame()))  # read above from the cache, or not there
    except InterpError as exc:
        c.timeline_problem = str(exc)
    return c


def sections(c: Context) -> list[Section]:
    """The report's own sections, then each analysis's (a generic table figure for one that
    has none), each drawn or replaced by the reason it could not be."""
    specs = [(s, "") for s in sections_of(RUN)]
    for entry in registry.REGISTRY.values():
        own = sections_of(entry.name)
        specs.extend((s, entry.name) for s in own)
        if not own and entry.default:
            specs.append((_generic(entry), entry.name))
    out = []
    for spec, analysis in specs:
        section = Section(spec.key, spec.title, spec.caption, analysis=analysis)
        try:
            section.html = figure_html(spec.figure(c), spec.key)
        except NotComputed as exc:
            section.problem, section.pending = str(exc), True
        except InterpError as exc:
            section.problem = str(exc)
        out.append(section)
    return out


def _generic(entry: registry.Analysis) -> ReportSection:
    """The section of an analysis that has none: every numeric column averaged per step."""
    from interp import plots

    title = entry.summary[:1].upper() + entry.summary[1:]
    return ReportSection(entry.name, title, f"The {entry.name} analysis: every numeric column averaged per checkpoint.",
                         lambda c: plots.table_over_steps(c.need(entry.table_names[0], entry.name), entry.name))


def summary(run: Run, c: Context) -> list[tuple[str, str]]:
    """The summary table: the run's rows, its model, then the findings' rows."""
    spec = run.spec
    rows = run_rows(run_summary(run))
    rows.insert(2, ("model", f"{spec.model.n_layers} layers x {spec.model.n_heads} heads, d_model {spec.model.d_model}"))
    story = story_row(c.findings)
    found = [r for r in summary_rows(c.findings, c.tables) if r[0] not in DRAWN_BELOW]
    return rows + ([story] if story else []) + found


# findings rows the report leaves out of its summary (`interp analyze` prints them): the order-of-events row says the
# decodable onset, and the figures below draw the rest, so the summary still fits above the timeline on one screen
DRAWN_BELOW = ("z decodable", "erasure", "unembedding", "logit attribution")


def story_row(f: dict) -> tuple[str, str] | None:
    """The order of events in one sentence: "z is decodable from step A, carried by L0H3 from B, used from C, tau
    at D" (each part only where it was measured)."""
    from interp.formatting import fmt

    parts = []
    if "decodable_onsets" in f:
        parts.append(f"z is decodable from step {fmt(f.get('decodable_onset'), none='never')}"
                     + (f" ({f['decodable_site']})" if f.get("decodable_site") else ""))
    if f.get("routing_head"):
        carried = [x for x in (f.get("carried_attn_onset"), f.get("carried_share_onset")) if x is not None]
        parts.append(f"carried by {f['routing_head']} from step {fmt(min(carried) if carried else None, none='never')}")
    if "usage_head" in f:
        used = [x for x in (f.get("used_ablation_onset"), f.get("used_patching_onset")) if x is not None]
        parts.append(f"used from step {fmt(min(used) if used else None, none='never')}")
    if not parts:
        return None
    parts.append(f"tau at {fmt(f.get('tau'), none='never')}")
    return ("in order", ", ".join(parts))


# ---------------------------------------------------------------------------- what a report will compute
# seconds per checkpoint of each default analysis, cold, on 2 otherwise idle CPU cores (its progress bar in
# `interp report checkpoints/demo --no-cache`, 2026-12-04: 148 s in all; the first analysis of a step loads its
# checkpoint), and what a report costs besides (importing torch and TransformerLens, the figures, plotly.js)
SECONDS_PER_STEP = {"sensitivity": 0.31, "attention": 0.34, "groups": 3.25, "ablation": 10.0, "patching": 1.0,
                    "usage": 0.72, "trajectory": 0.03, "spectra": 0.03, "representations": 0.31, "lens": 0.14,
                    "probes": 0.2, "erasure": 0.12, "unembed_geometry": 0.01}  # the last three: 2026-12-07
OTHER_SECONDS = 35.0


def plan(run: Run, cache: bool = True) -> str:
    """One line saying what `write_report(run)` will compute before it starts: the default analyses, at
    how many checkpoints, how many results the cache already holds, and about how long on 2 cores."""
    t = tau_or_none(run)
    names, todo, cached, seconds = [], 0, 0, OTHER_SECONDS
    steps: set[int] = set()
    for name in registry.default_names():
        entry = registry.get(name)
        if entry.needs_tau and t is None:
            continue
        try:
            chosen = [s for s, _ in select_steps(run, entry.steps, notes=[], defaults=True)]
        except InterpError:
            continue
        names.append(name)
        steps.update(chosen)
        folder = run.path / CACHE_DIR / name  # an estimate: an entry under any parameters counts as cached
        have = {s for s in chosen if cache and any(folder.glob(f"*/step_{s:07d}.json"))}
        todo += len(chosen) - len(have)
        cached += len(have)
        seconds += SECONDS_PER_STEP.get(name, 0.5) * (len(chosen) - len(have))
    if not todo:
        return (f"interp report: {run.path}: {', '.join(names)} at {len(steps)} checkpoints, all {cached} results "
                "from the cache; drawing the figures takes under a minute")
    when = "under a minute" if seconds < 60 else f"about {round(seconds / 30) / 2:g} min"  # to half a minute
    return (f"interp report: {run.path}: computing {', '.join(names)} at {len(steps)} checkpoints ({todo} results"
            + (f"; {cached} from the cache" if cached else "") + f"): {when} on 2 idle cores")


# ---------------------------------------------------------------------------- entry points
def _html_page(make: Callable[[Run, bool, str, bool, int | None], tuple[str, str, list[str]]]) -> Callable[..., Path]:
    """An entry point `(run, path, cache=True, device="cpu", progress=False, n_groups=None, warn=None) -> path` writing,
    as one self-contained HTML file, the page `make(run, cache, device, progress, n_groups) -> (title, body, notes)`
    builds; `warn(note)` is told each of the page's notes (the CLI says them on stderr too)."""

    def write(run: Run, path: str | Path, cache: bool = True, device: str = "cpu", progress: bool = False,
              n_groups: int | None = None, warn: Callable[[str], None] | None = None) -> Path:
        title, body, notes = make(run, cache, device, progress, n_groups)
        for note in dict.fromkeys(notes) if warn else ():
            warn(note)
        return write_html(Path(path), page(title, body))

    write.__name__, write.__qualname__, write.__doc__ = make.__name__, make.__qualname__, make.__doc__
    return write


@_html_page
def write_report(run: Run, cache: bool, device: str, progress: bool, n_groups: int | None) -> tuple[str, str, list[str]]:
    """Write one self-contained HTML report of `run` to `path`: the summary table, the circuit-formation
    timeline, what could not be made, the mechanism and reconciliation tables (a digest line each, the rows
    folded), then every other figure.

    Analyses go through the suite and its per-run cache (`cache=False`: recompute, write
    nothing). `n_groups` overrides the probe size of every analysis, as in `interp analyze`.
    Sections that cannot be made are listed at the top with the reason; nothing raises for them.
    """
    start = time.perf_counter()
    c = analyses(run, cache, device, progress, n_groups)
    made_sections = sections(c)
    missing = [s for s in made_sections if s.problem and not s.pending]
    notes = ""
    extra = [f"<li>{html.escape(n)}</li>" for n in c.notes + c.step_problems]
    if missing or extra:  # each reason names the analysis or the run property it lacks
        items = [f"<li><b>{html.escape(s.title)}</b>: {html.escape(s.problem)}</li>" for s in missing] + extra
        notes = ("<div class=\"missing\" id=\"missing\"><b>Not everything could be made for this run.</b>"
                 f"<ul>\n{chr(10).join(items)}\n</ul></div>")
    if c.cache_notes:  # damaged cache entries (recomputed or left out), a cache that could not be used
        items = [f"<li>{html.escape(n)}</li>" for n in c.cache_notes]
        notes += ("<div class=\"missing\" id=\"cache-notes\"><b>Cache entries not used (recomputed unless said "
                  f"otherwise):</b><ul>\n{chr(10).join(items)}\n</ul></div>")
    made = f"{figure_count(made_sections)} · analyses: {c.counts['misses']} computed, {c.counts['hits']} from cache"
    first = [s for s in made_sections if s.key == FIRST_SECTION]  # the picture, right under the summary
    body = "\n".join([
        *report_top("interp report", run, made, start, summary(run, c), "", verdicts=False),
        *(section_html(s) for s in first),
        notes,  # what could not be made, and cache entries not used: under the picture, above the rest
        mechanism_html(run),  # the verdict tables, each a digest line with its rows folded
        *(section_html(s) for s in made_sections if s not in first),
    ])
    return f"interp report: {run.name}", body, c.notes + c.step_problems + c.cache_notes


@_html_page
def write_timeline(run: Run, cache: bool, device: str, progress: bool, n_groups: int | None) -> tuple[str, str, list[str]]:
    """Write the timeline figure alone as a self-contained HTML page; raises InterpError if it
    cannot be made. What the analyses warned of (unreadable steps, cache entries recomputed) is
    listed above the figure."""
    from interp import plots

    check_run(run)  # before the (possibly slow) analysis
    tl = timeline(run, n_groups=n_groups, device=device, cache=cache, progress=progress)
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in tl.notes)
    edges = f"<p class=\"meta\" id=\"edges-note\">{html.escape(tl.edges_note)}</p>\n" if tl.edges_note else ""
    body = (f"<h1>interp timeline: {html.escape(run.name)}</h1>\n"
            + (f"<div class=\"missing\" id=\"missing\"><ul>{notes}</ul></div>\n" if notes else "") + edges
            + f"<figure class=\"report-figure\">{figure_html(plots.timeline_figure(tl), 'timeline')}</figure>")
    return f"interp timeline: {run.name}", body, tl.notes
