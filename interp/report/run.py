"""The run report and the timeline page of one run.

The analyses come from the suite (`interp.analysis.suite.run_suite`) and therefore from the
run's cache when present: a second report of the same run only redraws. Each analysis and
each figure is a section of its own; one that cannot be made (too few checkpoints, no tau,
no candidate loss) is replaced by a note saying why, and the rest of the report is still
written.
"""

from __future__ import annotations

import datetime as _dt
import html
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from interp.analysis import findings as findings_module
from interp.analysis import registry
from interp.analysis import suite as suite_analysis
from interp.analysis.cache import ResultCache
from interp.analysis.common import segment_names
from interp.errors import InterpError
from interp.formatting import fmt
from interp.report.page import NotComputed, Section, figure_html, page, section_html, summary_table, write_html
from interp.runs import Run
from interp.summary import run_summary
from interp.timelines import Timeline, check_run, timeline
from interp.transition import tau as run_tau


def _fmt(value, spec: str = "", none: str = "n/a") -> str:
    return fmt(value, spec, none)


# ---------------------------------------------------------------------------- analyses
@dataclass
class Analyses:
    """What the report knows: the suite's tables, why an analysis could not run, notes."""

    tables: dict[str, pd.DataFrame]
    problems: dict[str, str]  # analysis -> why it could not run
    notes: list[str]  # e.g. a relative step beyond the run
    step_problems: list[str]  # steps that could not be analysed
    params: dict[str, dict]
    counts: dict[str, int]


def _analyses(run: Run, cache: bool, device: str, progress: bool, n_groups: int | None) -> Analyses:
    """Every default analysis of the registry in one suite run (each checkpoint loaded once);
    an analysis placed relative to tau is skipped, with the reason, when the run has no tau."""
    t = _tau_or_none(run)
    names, problems = [], {}
    for name in registry.default_names():
        entry = registry.get(name)
        if entry.steps != "all" and t is None:
            problems[name] = (f"it runs at steps relative to τ ({entry.steps}), and the candidate loss never "
                              f"falls below 0.5 log K")
        else:
            names.append(name)
    tables: dict[str, pd.DataFrame] = {}
    result = None
    if names:
        try:
            result = suite_analysis.run_suite(run, only=names, options={"n_groups": n_groups}, progress=progress,
                                              cache=cache, device=device)
            tables = result.tables
        except InterpError as exc:
            problems.update({name: str(exc) for name in names})
    # analyses that are not part of the default suite (minutes of sampling) are read from the
    # cache only: the report never starts them unasked
    store = ResultCache(run, enabled=cache)
    for name, entry in registry.REGISTRY.items():
        if entry.default:
            continue
        try:
            params = entry.params()
        except InterpError:
            continue
        for table, df in store.cached_any(entry.cache_key(params)).items():
            tables[table] = df
    return Analyses(tables, problems, result.notes if result else [], result.problems if result else [],
                    result.params if result else {},
                    {"hits": result.cache_hits if result else 0, "misses": result.cache_misses if result else 0})


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
        rows.append(("z carried (attention / z-share)",
                     f"attention to z from step {_fmt(f.get('carried_attn_onset'), none='never')} "
                     f"(lead {_fmt(f.get('carried_attn_lead'), '.2f')}); z-share from step "
                     f"{_fmt(f.get('carried_share_onset'), none='never')} (lead {_fmt(f.get('carried_share_lead'), '.2f')})"))
        if "usage_head" in f:
            rows.append(("z used (ablation / patching)",
                         f"resample ablation costs > {f['used_ablation_nats']} nats from step "
                         f"{_fmt(f.get('used_ablation_onset'), none='never')} (lead {_fmt(f.get('used_ablation_lead'), '.2f')}); "
                         f"patching restores > {f['used_patch_fraction']:.0%} from step "
                         f"{_fmt(f.get('used_patching_onset'), none='never')} (lead {_fmt(f.get('used_patching_lead'), '.2f')})"))
        else:
            rows.append(("z used (ablation / patching)", "n/a (no usage analysis)"))
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


# ---------------------------------------------------------------------------- sections
@dataclass
class Context:
    """What a section builder may read."""

    run: Run
    analyses: Analyses
    timeline: Timeline | None
    timeline_problem: str
    tau: int | None
    findings: dict

    def need(self, table: str, analysis: str) -> pd.DataFrame:
        return _need(self.analyses.tables, self.analyses.problems, table, analysis)

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


SectionSpec = tuple[str, str, str, Callable[[Context], object]]  # key, title, caption, figure


def _run_sections(c: Context) -> list[SectionSpec]:
    """Sections of the run itself (its metrics log and the timeline), before the analyses."""
    from interp import plots

    tl = c.timeline

    def timeline_fig(c: Context):
        if c.timeline is None:
            raise InterpError(c.timeline_problem)
        return c.timeline.figure()

    return [
        ("timeline", "Circuit-formation timeline",
         "Losses, shuffle gaps, per-head z-share and the routing head's usage on one step axis. Dashed vertical "
         f"lines: each head's onset (first checkpoint at {_fmt(tl.fraction if tl else None, '.0%', '20%')} of "
         f"its own rise, held for {tl.m if tl else 2} checkpoints; the routing head in red); green dash-dot: "
         "when the routing head starts carrying z (attention to z, z-share); purple: when z is used "
         "(resample-ablating the head costs > 0.1 nats of candidate loss; patching it restores > 20% of the logit "
         "difference); dotted black line: τ. A positive lead means the routing head forms while the loss still "
         "sits near log K.",
         timeline_fig),
        ("loss", "Losses",
         "Full loss (a1..a4 and EOS), first-token loss and candidate loss (over the K candidates of the group), "
         "in nats. The candidate loss first drops to log K (z ignored: the K candidates of a group score alike), "
         "waits on the plateau, then snaps to 0 once z is used. The first-token loss shows whether the "
         "marginal over the K first characters was learned (it would sit at log K too).",
         lambda c: plots.loss_curves(c.need_metrics(), c.run.log_k, c.tau)),
        ("shuffle", "Shuffle gaps",
         "Loss with z replaced by another selector of the group, minus the clean loss: on the first token and on "
         "the full target (a1..a4 and EOS, which also sees z read at the later positions). ~0 while the model "
         "ignores z, large once it depends on it.",
         lambda c: plots.shuffle_gap(c.need_metrics(), c.tau)),
    ]


def _attention_fig(c: Context):
    from interp import plots

    patterns = c.need("attention", "attention")
    steps = sorted(int(s) for s in patterns["step"].unique())
    first = min(steps, key=lambda s: (abs(s - c.tau), s)) if c.tau else steps[0]  # open on the step nearest tau
    return plots.attention_evolution(patterns, labels=segment_names(c.run.task), step=first)


def _ablation_notes(c: Context) -> list[str]:
    return [n for n in c.analyses.notes if n.split(" ")[0] in ("pre", "mid", "post")]


def _analysis_sections(name: str, c: Context) -> list[SectionSpec]:
    """The report's sections for one registry analysis (a generic table figure if it has none)."""
    from interp import plots

    onsets = c.timeline.onsets if c.timeline is not None else None
    routing = c.findings.get("routing_head")
    builders: dict[str, list[SectionSpec]] = {
        "sensitivity": [
            ("sensitivity", "Head z-sensitivity",
             "Share of each head's output variance at the decision position explained by z (within-group variance "
             "over total), at every checkpoint; diamonds mark onsets.",
             lambda c: plots.sensitivity_heatmap(c.need("sensitivity", "sensitivity"), "z_share", c.tau, onsets,
                                                 routing)),
            ("attn_to_z", "Head attention to z",
             "Attention mass from the decision position to the z positions, per head and checkpoint.",
             lambda c: plots.sensitivity_heatmap(c.need("sensitivity", "sensitivity"), "attn_to_z", c.tau, onsets,
                                                 routing)),
        ],
        "attention": [
            ("segments", "Attention by segment",
             "Where each head's decision-position attention goes (mass per segment of the input), across checkpoints.",
             lambda c: plots.attention_segments(c.need("attention_segments", "attention"), c.tau)),
            ("attention", "Attention-pattern evolution",
             "Mean attention pattern of each head (query x key; positions labelled with their segment), averaged "
             "over a fixed probe; it opens at the checkpoint nearest τ: drag the slider or press play to move "
             "through the checkpoints.",
             _attention_fig),
        ],
        "ablation": [
            ("ablation", "Head ablation before, at and after τ",
             "Change in candidate loss (nats) when one head's output is zero-ablated at every position, at τ/4, τ "
             "and 2τ (snapped to saved checkpoints; a step beyond the run is left out and named below the figure). "
             "A routing head costs little before the transition and a lot after. Mean and resample ablation are in "
             "the same table (`interp analyze --only ablation --json`).",
             lambda c: plots.ablation_heatmaps(c.need("ablation", "ablation"), "delta_loss_cand",
                                               notes=_ablation_notes(c))),
        ],
        "patching": [
            ("patching", "Activation patching at τ",
             "Clean (B, z1) activations patched into the corrupted run (B, z2), measured by the logit difference "
             "a1(A1) − a1(A2) at the decision position: residual stream per layer and position, heads per position "
             "and at all positions.",
             lambda c: plots.patching_heatmaps(c.need("patching_residual", "patching"),
                                               c.need("patching_heads", "patching"))),
        ],
        "groups": [
            ("group_hist", "Per-group accuracy at fractions of τ",
             "Histogram of each group's candidate accuracy (over its K examples) at the checkpoints nearest to "
             "fractions of τ (fractions that land on one checkpoint share its panel; those beyond the run are "
             "named, not drawn); the dashed line is the 80% threshold. A collective snap moves all groups together.",
             lambda c: plots.group_histograms(c.need("groups", "groups"), c.need_tau())),
            ("group_share", "Share of groups ≥ 80% accurate",
             "Share of probe groups whose candidate accuracy is at least 80%, at every analysed checkpoint.",
             lambda c: plots.groups_share(c.need("groups", "groups"), c.tau)),
        ],
        "usage": [
            ("usage", "When the routing head's z is used",
             "At every checkpoint: the candidate-loss cost of resample-ablating the routing head (its hook_z taken "
             "from the same input with another selector of the group) and the share of the logit difference that "
             "patching its clean output restores (undefined on the plateau, where clean and corrupted runs agree). "
             "Vertical lines: when z is carried and when it is used.",
             lambda c: plots.usage_curves(c.need("usage", "usage"), c.tau,
                                          c.timeline.events if c.timeline is not None else None)),
        ],
    }
    if name in builders:
        return builders[name]
    entry = registry.get(name)
    return [(name, entry.summary[:1].upper() + entry.summary[1:],
             f"The {name} analysis ({entry.module}): every numeric column averaged per checkpoint.",
             lambda c: plots.table_over_steps(c.need(entry.table_names[0], name), name))]


def _geometry_sections(c: Context) -> list[SectionSpec]:
    """Loss-landscape geometry: drawn from cached results only, else the command that computes them."""
    from interp import plots

    def hessian_figs(c: Context):
        if c.analyses.tables.get("hessian") is None or c.analyses.tables["hessian"].empty:
            raise NotComputed(f"Not computed yet (minutes of Lanczos); compute it with: "
                              f"interp analyze {c.run.path} --only hessian")
        return plots.eigenvalue_curves(c.analyses.tables["hessian"], tau=c.tau, onsets=_event_steps(c))

    def anisotropy(c: Context):
        if c.analyses.tables.get("hessian") is None or c.analyses.tables["hessian"].empty:
            raise NotComputed(f"Not computed yet; compute it with: interp analyze {c.run.path} --only hessian")
        return plots.anisotropy_curve(c.analyses.tables["hessian"], tau=c.tau, onsets=_event_steps(c))

    def escape(c: Context):
        if c.analyses.tables.get("hessian_escape") is None or c.analyses.tables["hessian_escape"].empty:
            raise NotComputed(f"Not computed yet; compute it with: interp analyze {c.run.path} --only hessian")
        return plots.escape_heatmap(c.analyses.tables["hessian_escape"], tau=c.tau,
                                     highlight=c.findings.get("routing_head"))

    def llc_fig(c: Context):
        if c.analyses.tables.get("llc") is None or c.analyses.tables["llc"].empty:
            raise NotComputed(f"Not computed yet (minutes of SGLD sampling); compute it with: "
                              f"interp analyze {c.run.path} --only llc --heads {c.findings.get('routing_head', 'L0H3')}")
        return plots.llc_curves(c.analyses.tables["llc"], tau=c.tau, onsets=_event_steps(c),
                                highlight=c.findings.get("routing_head"))

    return [
        ("hessian", "Geometry: Hessian extremes",
         "The largest and smallest eigenvalues of the training loss's Hessian (Lanczos, on a fixed sample), with "
         "τ and the routing head's onsets marked. A negative smallest eigenvalue on the plateau is a saddle.",
         hessian_figs),
        ("anisotropy", "Geometry: anisotropy",
         "λ_max / |λ_min|: how much flatter the escape direction is than the dominant curvature.", anisotropy),
        ("escape", "Geometry: where the escape direction lives",
         "Share of the bottom eigenvector's squared mass in each component (heads' slices, MLPs, embeddings).",
         escape),
        ("llc", "Geometry: local learning coefficient",
         "LLC of the whole model and refined per head (devinterp SGLD), across checkpoints.", llc_fig),
    ]


def _event_steps(c: Context) -> dict[str, int]:
    if c.timeline is None or c.timeline.events.empty:
        return {}
    have = c.timeline.events.dropna(subset=["step"])
    return {str(r.label): int(r.step) for r in have.itertuples()}


def _sections(c: Context) -> list[Section]:
    specs = list(_run_sections(c))
    for name in registry.default_names():
        specs.extend(_analysis_sections(name, c))
    specs.extend(_geometry_sections(c))
    sections = []
    for key, title, caption, make in specs:
        section = Section(key, title, caption)
        try:
            section.html = figure_html(make(c), key)
        except NotComputed as exc:
            section.problem, section.pending = str(exc), True
        except InterpError as exc:
            section.problem = str(exc)
        sections.append(section)
    return sections


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
    analyses = _analyses(run, cache, device, progress, n_groups)
    t = _tau_or_none(run)
    findings = findings_module.findings(run, analyses.tables, t, analyses.params)
    tl, tl_problem = None, ""
    try:
        check_run(run)
        tl = timeline(run, sens=_need(analyses.tables, analyses.problems, "sensitivity", "sensitivity"),
                      usage=analyses.tables.get("usage"), with_usage="usage" in analyses.tables)
    except InterpError as exc:
        tl_problem = str(exc)
    sections = _sections(Context(run, analyses, tl, tl_problem, t, findings))
    counts = analyses.counts

    missing = [s for s in sections if s.problem and not s.pending]
    notes = ""
    extra = [f"<li>{html.escape(n)}</li>" for n in analyses.notes + analyses.step_problems]
    if missing or extra:  # each reason names the analysis or the run property it lacks
        items = [f"<li><b>{html.escape(s.title)}</b>: {html.escape(s.problem)}</li>" for s in missing] + extra
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
        summary_table(_summary_rows(run, summary, findings)),
        notes,
        *(section_html(s) for s in sections),
    ])
    return write_html(Path(path), page(f"interp report: {run.name}", body))


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
    tl = timeline(run, n_groups=n_groups, device=device, cache=cache, progress=progress)
    fig = tl.figure()
    body = (f"<h1>interp timeline: {html.escape(run.name)}</h1>\n"
            f"<figure class=\"report-figure\">{figure_html(fig, 'timeline')}</figure>")
    return write_html(Path(path), page(f"interp timeline: {run.name}", body))
