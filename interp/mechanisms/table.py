"""The mechanism table: one row per candidate mechanism of the plateau (docs/mechanisms.md).

Each row shows the quantity, what the mechanism predicts, the measured value with its interval
and the number of runs it rests on, the verdict of its rule (`interp.mechanisms.rules`, fixed
before any data) with the sentence that says why, and the paper's or the author's number
beside ours. `mechanisms(path)` builds it for a run, a sweep or a fork family.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from pathlib import Path

from interp.errors import InterpError
from interp.mechanisms.rules import NOT_MEASURED, ROWS, VERDICTS, Measure, judge
from interp.mechanisms.rules import row as rule_of


MAX_NOTES = 8  # notes on a sweep's runs shown before the rest are counted


@dataclass
class MechanismTable:
    """The rows (dicts with the columns of COLUMNS) and what they were measured on."""

    source: str  # the run, sweep or family folder
    kind: str  # "run", "sweep" or "fork family"
    rows: list[dict]
    notes: list[str] = field(default_factory=list)
    damaged: dict[str, str] = field(default_factory=dict)  # run or fork -> why: named, left out of every row
    warnings: list[str] = field(default_factory=list)  # for stderr: e.g. a damaged cache entry recomputed
    evidence: list = field(default_factory=list, repr=False)  # the RunEvidence it rests on (reused: interp.mechanisms.reconcile)
    measures: dict = field(default_factory=dict, repr=False)  # row key -> the Measure judged (its calibrated estimate)

    COLUMNS = ("key", "mechanism", "quantity", "prediction", "value", "low", "high", "n_runs", "verdict", "why",
               "paper", "detail")

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame(self.rows, columns=list(self.COLUMNS))

    def to_dict(self) -> dict:
        from interp.sweeps.fits import jsonable

        return jsonable({"source": self.source, "kind": self.kind, "rows": self.rows, "notes": self.notes,
                         "damaged": self.damaged, "verdicts": list(VERDICTS)})

    def verdict(self, key: str) -> str:
        return next(r["verdict"] for r in self.rows if r["key"] == key)

    def summary(self) -> str:
        lines = [f"mechanism table of {self.source} ({self.kind}); rules: docs/mechanisms.md"]
        for r in self.rows:
            lines.append(f"- {r['mechanism']}: {r['verdict'].upper()}")
            lines.append(f"    {r['quantity']} = {value_text(r)}   predicts: {r['prediction']}")
            lines.append(f"    {r['why']}")
            if r["paper"]:
                lines.append(f"    {r['paper']}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def html(self) -> str:
        """The table as an HTML fragment (no script; the report's styles)."""
        head = "".join(f"<th>{h}</th>" for h in ("mechanism", "quantity", "predicts", "measured", "runs", "verdict",
                                                    "why", "paper / author"))
        body = []
        for r in self.rows:
            cls = r["verdict"].replace(" ", "-")
            body.append(
                f"<tr class='verdict-{cls}'><td>{html.escape(r['mechanism'])}</td><td>{html.escape(r['quantity'])}</td>"
                f"<td>{html.escape(r['prediction'])}</td><td>{html.escape(value_text(r))}</td>"
                f"<td>{r['n_runs'] or ''}</td><td><b>{html.escape(r['verdict'])}</b></td>"
                f"<td>{html.escape(r['why'])}</td><td>{html.escape(r['paper'])}</td></tr>")
        notes = "".join(f"<p class='note'>{html.escape(n)}</p>" for n in self.notes)
        return f"<table class='summary mechanisms'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{notes}"

    def _repr_html_(self) -> str:
        return self.html()

    def __repr__(self) -> str:
        counts = {}
        for r in self.rows:
            counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
        return f"MechanismTable({self.source!r}, {self.kind}, " + ", ".join(f"{v} {k}" for k, v in counts.items()) + ")"


def value_text(r: dict) -> str:
    """"0.42 [0.3, 0.55]", or the value alone without an interval, or "—" when not measured."""
    v, lo, hi = r["value"], r["low"], r["high"]
    if v is None or not math.isfinite(v):
        return "—"
    if lo is None or hi is None or (math.isnan(lo) and math.isnan(hi)):
        return f"{v:.3g}"
    return f"{v:.3g} [{lo:.3g}, {hi:.3g}]"


def build(source: str, kind: str, measures: dict[str, Measure | None], why_missing: dict[str, str],
          notes: list[str], replicate: str = "") -> MechanismTable:
    """Judge every row of ROWS on `measures` (missing: not measured, with what would measure it; too few replicates:
    not measured, with `replicate`, the command that adds them, `interp.mechanisms.commands`)."""
    rows = []
    for spec in ROWS:
        m = measures.get(spec.key)
        verdict, why = judge(spec.key, m, source)
        few = m is not None and m.usable and bool(spec.evidence.short(m.as_estimate()))
        if verdict == NOT_MEASURED and few:
            x_short = m.as_estimate().n >= spec.evidence.n
            more = spec.needs_sweep if x_short or not replicate else f"measure it with: {replicate}"
            why = f"{why}; {more}"
        elif verdict == NOT_MEASURED:
            need = spec.needs_sweep if kind != "run" else spec.needs_run.replace("{run}", source)
            reason = why_missing.get(spec.key)
            why = need + (f" ({reason})" if reason else "")
        rows.append({
            "key": spec.key, "mechanism": spec.mechanism, "quantity": spec.quantity, "prediction": spec.prediction,
            "value": m.value if m is not None and m.usable else math.nan,
            "low": m.low if m is not None and m.usable else math.nan,
            "high": m.high if m is not None and m.usable else math.nan,
            "n_runs": m.n_runs if m is not None and m.usable else 0, "verdict": verdict, "why": why,
            "paper": spec.paper, "detail": m.detail if m is not None else "",
        })
    return MechanismTable(source, kind, rows, notes,
                          measures={k: m for k, m in measures.items() if m is not None and m.usable})


# ---------------------------------------------------------------------------- entry points
def for_run(run, compute: bool = True, progress: bool = False) -> MechanismTable:
    from interp.mechanisms.evidence import run_evidence

    from interp.mechanisms.commands import run_seeds

    ev = run_evidence(run, compute=compute, progress=progress)
    table = build(str(run.path), "run", ev.measures, {}, ev.notes, run_seeds(run.spec, str(run.path), 3))
    table.warnings, table.evidence = ev.warnings, [ev]
    return table


def for_sweep(sweep, compute: bool = True, progress: bool = False) -> MechanismTable:
    import interp.mechanisms.evidence as E

    table = sweep.table()
    done = table[table["status"] == "done"]
    damaged = damaged_points(table)
    notes: list[str] = [f"{name} is damaged, left out: {why}" for name, why in damaged.items()]
    skipped = table[~table["status"].isin(["done", "damaged"])]
    if len(skipped):
        notes.append(f"{len(skipped)} run(s) not done are left out: " + ", ".join(skipped["run"].astype(str)[:6]))
    evidence, aniso = [], {}
    for name in done["run"]:
        run = sweep.run(str(name))
        try:
            ev = E.run_evidence(run, compute=compute, progress=progress)
        except InterpError as exc:
            notes.append(f"{name}: {exc}")
            continue
        evidence.append(ev)
        aniso[str(name)] = {"anisotropy": E.anisotropy_of(run, ev.tau)}
    run_notes = [f"{Path(ev.run).name}: {n}" for ev in evidence for n in ev.notes]
    notes += run_notes[:MAX_NOTES] + ([f"... and {len(run_notes) - MAX_NOTES} more notes on the runs"]
                                      if len(run_notes) > MAX_NOTES else [])
    measures: dict[str, Measure | None] = {key: E.pooled(evidence, key) for key in E.PER_RUN}
    missing: dict[str, str] = {}
    for key, fn in (("cancellation", E.cancellation_measure), ("barrier", E.barrier_measure)):
        measures[key], missing[key] = fn(table)
    from interp.mechanisms.commands import sweep_seeds

    measures["drowning"], missing["drowning"] = E.drowning_measure(done, aniso)
    out = build(str(sweep.path), "sweep", measures, missing, notes, sweep_seeds(sweep, 5))
    out.damaged, out.evidence = damaged, evidence
    out.warnings = [f"{Path(ev.run).name}: {w}" for ev in evidence for w in ev.warnings]
    return out


def damaged_points(table) -> dict[str, str]:
    """The damaged runs or forks of a collection's table (name -> why), which no row may rest on."""
    bad = table[table["status"] == "damaged"]
    return {str(name): str(why) for name, why in zip(bad["run"], bad["error"])}


def for_family(family, compute: bool = True, progress: bool = False) -> MechanismTable:
    from interp.mechanisms.evidence import forks_measure, run_evidence

    gone = family.parent_problem()  # moved or deleted: the forks' row is judged from their own folders
    parent = family.design["parent"]
    measures: dict[str, Measure | None] = {}
    warnings: list[str] = []
    evidence = []
    notes = [f"the parent run {parent} is missing ({gone}): its per-run rows are not measured; the forks' row "
             f"is judged from the forks' own folders"] if gone else []
    if not gone:
        ev = run_evidence(family.parent, compute=compute, progress=progress)
        measures.update(ev.measures)
        evidence = [ev]
        notes += [f"the per-run rows are those of the parent run {parent}"] + ev.notes
        warnings = ev.warnings
    missing: dict[str, str] = {}
    forks = family.table()
    damaged = damaged_points(forks)
    notes += [f"{name} is damaged, left out: {why}" for name, why in damaged.items()]
    from interp.mechanisms.commands import family_seeds

    from interp.mechanisms.fork_measures import deepest_relapse

    measures["entropic_forks"], missing["entropic_forks"] = forks_measure(forks, deepest=deepest_relapse(family))
    table = build(str(family.path), "fork family", measures, missing, notes, family_seeds(family, 3))
    table.damaged, table.warnings, table.evidence = damaged, warnings, evidence
    for r in table.rows:  # the sweep-only rows of a family: say what would measure them
        if r["verdict"] == NOT_MEASURED and r["key"] not in missing:
            need = rule_of(r["key"]).needs_run
            r["why"] = need.replace("{run}", parent) + (" (the parent is missing)" if gone and "{run}" in need else "")
    return table


def mechanisms(path, compute: bool = True, progress: bool = False) -> MechanismTable:
    """The mechanism table of a run, a sweep or a fork family folder.

    compute=True computes the cheap analyses it needs (groups, trajectory, gradients on the
    plateau) and caches them in each run; the Hessian and the curvature noise are only read
    from the cache. compute=False reads the caches only."""
    from interp.collections.folders import FAMILY, RUN, SWEEP, kind_of, open as open_folder

    build = {FAMILY: for_family, SWEEP: for_sweep, RUN: for_run}[kind_of(path)]
    return build(open_folder(path), compute, progress)
