"""The circuit-formation timeline: when each head starts carrying z, when z is used, against
when the loss moves.

`timeline(run)` gathers, on one step axis, the run's losses and shuffle gaps (from its
metrics log), every head's z-sensitivity across checkpoints, each head's onset (the first
checkpoint at which the series has made `fraction` of its own rise and stays there for `m`
checkpoints; `interp.transition.rise_threshold` / `onset`), tau, and the routing head (the
largest z-share at the last step of the sensitivity table, `routing_step`: the last readable
checkpoint) and its events with their leads (tau - step) / tau:

- carried: the onsets of its attention to z and of its z-share;
- used: the first checkpoint from which resample-ablating it costs more than 0.1 nats of
  candidate loss, and the first from which patching it restores more than 20% of the logit
  difference (`interp.analysis.findings`; the `usage` analysis).

The paper's claim is a positive lead: the routing head forms while the loss still sits at
log K. Where the `edges` analysis is cached (it runs only when asked), the timeline carries each
edge's onsets too (`edge_onsets`), read from the cache and never computed. The analyses come
from the suite and its cache (`cache=False`: recompute, write nothing). The figure is
`interp.plots.timeline_figure(tl)`: plotting takes the Timeline, and this module never imports it
(a notebook finds a Timeline's figure by type: `interp.presentable`).

`interp.timeline(run)` is this module's `timeline`, imported lazily by the package (the
module is named `timelines` so that importing it never rebinds `interp.timeline`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from interp.analysis import findings as findings_module
from interp.analysis.sensitivity import COLUMNS as SENSITIVITY_COLUMNS
from interp.errors import InterpError
from interp.presentable import html
from interp.runs import Run
from interp.transition import ONSET_FRACTION, ONSET_M, onset, rise_threshold, tau as run_tau

MIN_CHECKPOINTS = 3  # an onset held for m >= 2 checkpoints needs a rise before it
EVENT_NAMES = {
    "decodable": "z linearly decodable (probe)",
    "carried_attn": "attention to z (carried)",
    "carried_share": "z-share (carried)",
    "used_ablation": "resample ablation > 0.1 nats (used)",
    "used_patching": "patching > 20% (used)",
}


@dataclass(repr=False)
class Timeline:
    """One run's circuit-formation timeline; draw it with `interp.plots.timeline_figure(tl)`."""

    metrics: pd.DataFrame
    sensitivity: pd.DataFrame
    log_k: float
    tau: int | None
    tau_window: int | None
    routing_head: str
    onsets: pd.DataFrame  # one row per head: head_name, layer, head, threshold, onset (Int64, NA: none)
    lead: float | None
    column: str = "z_share"
    fraction: float = ONSET_FRACTION
    m: int = ONSET_M
    name: str = ""
    usage: pd.DataFrame | None = None
    events: pd.DataFrame = field(default_factory=pd.DataFrame)  # event, kind, label, step (Int64), lead
    routing_step: int | None = None  # the step the routing head was read at (the last in `sensitivity`)
    trajectory: pd.DataFrame | None = None  # the trajectory analysis: direction consistency between checkpoints
    notes: list[str] = field(default_factory=list)  # what the suite warned of (unreadable steps, cache entries)
    edge_onsets: pd.DataFrame | None = None  # the cached edges analysis's `edges.onsets`; None when not cached
    edges_note: str = ""  # when it is not: the command that computes it

    def __repr__(self) -> str:
        onset = self.routing_onset
        lead = "" if self.lead is None else f", lead {self.lead:.2f}"
        return (f"Timeline({self.name!r}, tau {self.tau}, routing head {self.routing_head} "
                f"(onset {onset}{lead}), {len(self.onsets)} heads)")

    def _repr_html_(self) -> str:
        """The figure, drawn offline (`interp.display.figures`, found by type; plotting is loaded only there)."""
        return html(self)

    @property
    def routing_onset(self) -> int | None:
        row = self.onsets[self.onsets["head_name"] == self.routing_head]
        if row.empty or pd.isna(row["onset"].iloc[0]):
            return None
        return int(row["onset"].iloc[0])

    def event(self, name: str) -> int | None:
        """Step of one event ("decodable", "carried_attn", "carried_share", "used_ablation", "used_patching"), or
        None if it never happened (or was not measured)."""
        hit = self.events[self.events["event"] == name] if not self.events.empty else self.events
        if hit.empty or pd.isna(hit["step"].iloc[0]):
            return None
        return int(hit["step"].iloc[0])


def head_onsets(sens: pd.DataFrame, column: str = "z_share", fraction: float = ONSET_FRACTION,
                m: int = ONSET_M) -> pd.DataFrame:
    """Onset of every head's `column` series (relative to its own rise), L0H0 first."""
    rows = []
    heads = sens[["layer", "head", "head_name"]].drop_duplicates().sort_values(["layer", "head"])
    for layer, head, name in heads.itertuples(index=False):
        series = sens[sens["head_name"] == name].dropna(subset=[column]).sort_values("step")
        threshold, first = float("nan"), None
        if len(series):
            threshold = rise_threshold(series[column], fraction)
            first = onset(series["step"], series[column], threshold, m=m, above=True)
        rows.append({"head_name": str(name), "layer": int(layer), "head": int(head),
                     "threshold": threshold, "onset": pd.NA if first is None else first})
    df = pd.DataFrame(rows, columns=["head_name", "layer", "head", "threshold", "onset"])
    df["onset"] = df["onset"].astype("Int64")
    return df


def routing_events(sens: pd.DataFrame, usage: pd.DataFrame | None, head: str, t: int | None,
                   fraction: float = ONSET_FRACTION, m: int = ONSET_M, probes: pd.DataFrame | None = None
                   ) -> pd.DataFrame:
    """The routing head's carried and used events, and (given the probes table) when z first becomes linearly
    decodable at any site: event, kind, label, step, lead."""
    carried = findings_module.carried_onsets(sens, head, fraction, m)
    used = findings_module.used_onsets(usage, head, m=m) if usage is not None and not usage.empty else {}
    steps = {"carried_attn": carried["attn_to_z"], "carried_share": carried["z_share"],
             "used_ablation": used.get("ablation"), "used_patching": used.get("patching")}
    measured = {name: name.startswith("carried") or bool(used) for name in steps}
    if probes is not None and not probes.empty:
        from interp.analysis.probes import decodable_onsets

        dated = [s for s in decodable_onsets(probes, m).values() if s is not None]
        steps = {"decodable": min(dated) if dated else None, **steps}
        measured["decodable"] = True
    rows = [{"event": name, "kind": name.split("_")[0], "label": EVENT_NAMES[name],
             "step": pd.NA if step is None else step, "lead": findings_module.lead(t, step),
             "measured": measured[name]}
            for name, step in steps.items()]
    df = pd.DataFrame(rows)
    df["step"] = df["step"].astype("Int64")
    return df


def check_run(run: Run) -> None:
    """Raise InterpError, saying what is missing, if `run` cannot have a timeline."""
    steps = run.steps
    if len(steps) < MIN_CHECKPOINTS:
        raise InterpError(
            f"a timeline needs at least {MIN_CHECKPOINTS} saved checkpoints; {run.path} has {len(steps)}"
        )
    metrics = run.metrics
    if metrics.empty or "loss_cand" not in metrics or metrics["loss_cand"].isna().all():
        raise InterpError(
            f"a timeline needs the candidate loss, which {run.path} does not have "
            f"(direction {run.spec.task.direction!r} or no evaluations yet)"
        )
    if not run.layout.z_pos:  # the task has no selector (read from the layout: no task generated, no torch)
        raise InterpError(
            f"a timeline tracks when heads start reading the selector z, but direction "
            f"{run.spec.task.direction!r} of {run.path} has none"
        )


def timeline(
    run: Run,
    sens: pd.DataFrame | None = None,
    usage: pd.DataFrame | None = None,
    column: str = "z_share",
    fraction: float = ONSET_FRACTION,
    m: int = ONSET_M,
    n_groups: int | None = None,
    device: str = "cpu",
    cache: bool = True,
    with_usage: bool = True,
    progress: bool = False,
    trajectory: pd.DataFrame | None = None,
    with_trajectory: bool = True,
    edges: pd.DataFrame | None = None,
    with_edges: bool = True,
    probes: pd.DataFrame | None = None,
    with_probes: bool = True,
) -> Timeline:
    """Compute the timeline of `run`. `sens` and `usage` reuse tables already computed (e.g. the
    suite's); otherwise the sensitivity and (unless `with_usage=False`) usage analyses run
    through the suite and its cache, and what the suite warned of (steps whose checkpoint could
    not be read, cache entries recomputed) is kept in `Timeline.notes`. The last panel shows the
direction consistency of the weights between checkpoints (`trajectory`, the trajectory analysis,
computed the same way unless `with_trajectory=False`) and, for runs trained since interp logs
it, the dissipation Q(t) from the metrics log. The edges' onsets (`edge_onsets`) come from the `edges` table
given, else from the cache only (`with_edges=False`: none): the edges are minutes of work and run only when
asked, so when they are not cached `edges_note` names the command that computes them.

    Raises InterpError when the run cannot show a timeline: fewer than 3 saved checkpoints,
    no candidate loss (directions whose output is B, or no evaluation yet), or no selector.
    """
    check_run(run)
    if not 0.0 < fraction < 1.0:
        raise InterpError(f"the onset fraction must be between 0 and 1, got {fraction}")
    if m < 1:
        raise InterpError(f"m (checkpoints an onset must hold) must be >= 1, got {m}")
    wanted = [name for name, table in (("sensitivity", sens), ("usage", usage if with_usage else 0),
                                       ("trajectory", trajectory if with_trajectory else 0),
                                       ("probes", probes if with_probes and run.layout.z_pos else 0))
              if table is None]
    notes: list[str] = []
    if wanted:
        from interp.analysis.suite import run_suite

        result = run_suite(run, only=wanted, options={"n_groups": n_groups}, device=device, cache=cache,
                           progress=progress)
        sens = result.tables["sensitivity"] if sens is None else sens
        if with_usage and usage is None:
            usage = result.tables.get("usage")
        if with_trajectory and trajectory is None:
            trajectory = result.tables.get("trajectory")
        if with_probes and probes is None:
            probes = result.tables.get("probes")
        notes = result.notes + result.problems
    if column not in sens.columns:
        allowed = ", ".join(c for c in SENSITIVITY_COLUMNS if c in sens.columns)
        raise InterpError(f"unknown sensitivity column {column!r}; allowed: {allowed}")
    n_sens = sens["step"].nunique()
    if n_sens < MIN_CHECKPOINTS:
        raise InterpError(
            f"a timeline needs sensitivity at >= {MIN_CHECKPOINTS} checkpoints; the table given has {n_sens}"
        )
    t = run_tau(run)
    routing = findings_module.routing_head(sens, column)
    onsets = head_onsets(sens, column, fraction, m)
    routing_onset = onsets.loc[onsets["head_name"] == routing, "onset"].iloc[0]
    lead = None if (not t or pd.isna(routing_onset)) else (t - int(routing_onset)) / t
    usage = usage if with_usage else None
    edge_onsets, edges_note = None, ""
    if with_edges:
        edge_onsets, edges_note, edge_notes = cached_edge_onsets(run, edges, cache)
        notes = list(dict.fromkeys(notes + edge_notes))  # the cache's own notes (old formats) may repeat the suite's
    return Timeline(
        metrics=run.metrics, sensitivity=sens, log_k=run.log_k, tau=t, tau_window=run_tau(run, kind="window"),
        routing_head=routing, onsets=onsets, lead=lead, column=column, fraction=fraction, m=m, name=run.name,
        usage=usage, events=routing_events(sens, usage, routing, t, fraction, m, probes if with_probes else None),
        routing_step=int(sens["step"].max()), trajectory=trajectory if with_trajectory else None, notes=notes,
        edge_onsets=edge_onsets, edges_note=edges_note,
    )


def cached_edge_onsets(run: Run, edges: pd.DataFrame | None, cache: bool = True) -> tuple[pd.DataFrame | None, str, list[str]]:
    """The onsets of the `edges` table, else of the run's cached edges analysis (never computed), the note naming
    the command when there is none, and the cache's notes (entries left out)."""
    from interp.analysis import edges as edge_analysis

    notes: list[str] = []
    if edges is None:
        tables, notes = edge_analysis.cached(run, cache)
        edges = tables.get("edges")
    if edges is None or edges.empty:
        why = "not computed yet" if cache else "not read (the cache is off)"
        return None, f"edges {why}: {edge_analysis.command(run)} adds them to the timeline", notes
    return edge_analysis.onsets(edges), "", notes
