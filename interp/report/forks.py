"""The fork family report: one self-contained HTML page comparing the arms of a fork family.

At the top what the family is (parent, fork steps, arms, seeds, horizon) and how many forks
are done, censored, failed, damaged or unfinished; every fork that is not done is named with
its reason, never silently dropped. Then the candidate loss of the parent and of every fork
on the clock that matters, steps since the fork; the comparison of the arms
(`interp.sweeps.forks.forks`, per escape measure: median with its interval, a censored median
as ">= N", the ratio to minibatch); Gamma per arm when it was measured; the escape figure;
and the per-fork table. A missing parent is stated and the forks are still drawn
(`interp.report.fork_data`). Page assembly is shared with the other reports.
"""

from __future__ import annotations

import html
import math
import time
import warnings
from pathlib import Path

import pandas as pd

from interp.errors import InterpError
from interp.forks.family import ForkFamily
from interp.report.fork_data import FamilyData, read_family
from interp.report.page import Section, figure_html, page, report_top, section_html, write_html
from interp.sweeps.forks import ESCAPES, FIXED, ForkComparison, forks

REFERENCE = "minibatch"
UNFINISHED = ("running", "interrupted", "not started")


# ---------------------------------------------------------------------------- formatting
def _num(v) -> str:
    if v is None or v is pd.NA or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    return f"{v:,.0f}" if abs(v) >= 100 or float(v).is_integer() else f"{v:.3g}"


def _ci(lo: float, hi: float) -> str:
    if math.isnan(lo) or math.isnan(hi):
        return "n/a"
    return f"> {_num(lo)} (unbounded above)" if math.isinf(hi) else f"[{_num(lo)}, {_num(hi)}]"


def _gamma(v) -> str:
    return "–" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.3g}"


def _escape(r: dict, y: str) -> str:
    if r.get(f"censored_{y}"):
        return f">{_num(r['steps_run'])} (censored)"
    return _num(r[y])


def _html_table(table_id: str, head: list[str], rows: list[list[str]], klass: list[str] | None = None) -> str:
    header = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "\n".join((f"<tr class=\"{klass[i]}\">" if klass and klass[i] else "<tr>")
                     + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for i, row in enumerate(rows))
    return f"<table class=\"summary\" id=\"{table_id}\">\n<tr>{header}</tr>\n{body}\n</table>"


# ---------------------------------------------------------------------------- the parts
def _criterion(data: FamilyData):
    """The escape criterion the table was judged under (`escape_criterion`; the family's when absent)."""
    from interp.forks.escape import parse_escape

    texts = set(data.table["escape_criterion"].dropna()) if "escape_criterion" in data.table else set()
    return parse_escape(texts.pop()) if len(texts) == 1 else data.family.escape


def _summary_rows(data: FamilyData) -> list[tuple[str, str]]:
    d, table = data.family.design, data.table
    counts = table["status"].value_counts().to_dict()
    done = table["status"] == "done"
    criterion = _criterion(data)
    censored = int((done & table["censored_escape"].astype(bool)).sum()) if "censored_escape" in table else int(
        (done & table["censored_escape_half"].astype(bool)).sum())
    own = data.family.escape
    judged = (f"{criterion.words} (escape: the first evaluation that starts a held stretch; a hold that runs past "
              f"the horizon is censored)" + ("" if criterion == own else f"; re-judged from the logs (the family's: "
                                                                          f"{own.words})"))
    rng = table["gamma_range"].dropna().iloc[0] if "gamma_range" in table and table["gamma_range"].notna().any() \
        else "{}:{}".format(*data.family.gamma_range)
    parent = d["parent"] if data.parent is not None else (
        f"{d['parent']}: missing ({data.parent_problem}); the forks are drawn without it")
    gamma = (f"every {d['gamma_every']} steps within {d['gamma_window']} steps of the fork; the per-step median "
             f"over steps {rng.replace(':', '..')} after the fork" if d.get("gamma_every")
             else "not measured (the family was made without --gamma-every)")
    return [
        ("family", f"{data.family.path}: {len(table)} forks"),
        ("parent", parent),
        ("fork steps", ", ".join(str(s) for s in d["steps"])),
        ("arms", ", ".join(data.labels) + " (continue and full_batch have no randomness: one fork per step)"),
        ("seeds", ", ".join(str(s) for s in d["seeds"])),
        ("horizon", f"{d['horizon']} steps after the fork"),
        ("escape criterion", judged),
        ("Gamma sampling", gamma),
        ("forks", f"{int(done.sum())} done ({censored} censored: never escaped under the criterion within the "
                  f"horizon), "
                  f"{counts.get('failed', 0)} failed, {counts.get('damaged', 0)} damaged, "
                  f"{sum(counts.get(s, 0) for s in UNFINISHED)} unfinished (running, interrupted or not started)"),
    ]


def _left_out(data: FamilyData) -> str:
    out = data.table[data.table["status"] != "done"]
    items = [f"<li><b>{html.escape(r['run'])}</b>: {html.escape(r['status'])}"
             + (f" ({html.escape(r['error'])})" if isinstance(r.get("error"), str) and r["error"] else "") + "</li>"
             for r in out.to_dict("records")]
    items += [f"<li>{html.escape(n)}</li>" for n in data.notes]
    if data.parent is None:
        items.insert(0, f"<li><b>the parent</b> {html.escape(data.family.design['parent'])} is missing: "
                        f"{html.escape(data.parent_problem)}</li>")
    if not items:
        return ""
    return ("<div class=\"missing\" id=\"left-out\"><b>Not done, damaged or missing (left out of the comparison)"
            "</b><ul>\n" + "\n".join(items) + "\n</ul></div>")


def _compare(table: pd.DataFrame, y: str) -> tuple[ForkComparison | None, str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its notes say the same, and are shown under the table
        try:
            return forks(table, y=y, reference=REFERENCE), ""
        except InterpError as exc:
            return None, str(exc)


def _arms_table(y: str, comparison: ForkComparison | None, problem: str, criterion=None) -> str:
    from interp.forks.escape import parse_escape

    words = (comparison.criterion_words if comparison is not None and comparison.criterion
             else criterion.words if y == "escape" and criterion is not None
             else parse_escape(FIXED[y]).words if y in FIXED else "")
    head = f"<h3>{html.escape(y)}{html.escape(f': {words}' if words else '')} (steps after the fork)</h3>"
    if comparison is None:
        return f"{head}\n<p class=\"missing\">No comparison: {html.escape(problem)}</p>"
    rows = []
    for r in comparison.rows.itertuples(index=False):
        median = f">= {_num(r.median)}" if r.median_censored else _num(r.median)
        ratio, rci = comparison.ratio_cells(r, "1 (reference)", _ci)
        gamma = _gamma(r.gamma) + (f" ({r.gamma_n})" if r.gamma_n else "")
        rows.append([html.escape(str(v)) for v in (r.fork_step, r.label, median, _ci(r.ci_low, r.ci_high), ratio,
                                                   rci, gamma, _gamma(r.gamma_median), r.n, r.n_censored)])
    klass = ["censored" if c else "" for c in comparison.rows["median_censored"]]
    cols = ["fork step", "arm", "median", f"{comparison.level:.0%} CI", f"ratio to {comparison.reference}",
            "ratio CI", "Gamma (forks)", f"Gamma median {comparison.gamma_range}".strip(), "n", "n censored"]
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in comparison.notes)
    return (f"{head}\n" + _html_table(f"arms-{y}", cols, rows, klass)
            + (f"\n<ul class=\"meta\">{notes}</ul>" if notes else ""))


def _forks_table(table: pd.DataFrame, criterion=None) -> str:
    held = criterion is not None and not criterion.is_default  # the criterion's own column beside tau_half's
    rows, klass = [], []
    for r in table.to_dict("records"):
        status = html.escape(r["status"]) + (f"<br><small>{html.escape(r['error'])}</small>"
                                              if isinstance(r.get("error"), str) and r["error"] else "")
        rows.append([html.escape(str(r["run"])), html.escape(str(r["fork_step"])), html.escape(r["arm"]),
                     html.escape(r["arm_params"] or "–"), html.escape(str(r["fork_seed"])), status,
                     html.escape(_num(r["steps_run"])), html.escape(_escape(r, "escape_half")),
                     html.escape(_escape(r, "escape_snap")), html.escape(_gamma(r["gamma"])),
                     html.escape(_gamma(r.get("gamma_median")))])
        if held:
            rows[-1].insert(9, html.escape(_escape(r, "escape")))
        klass.append(r["status"].replace(" ", "-") if r["status"] != "done"
                     else "censored" if r["censored_escape" if held else "censored_escape_half"] else "")
    cols = ["run", "fork step", "arm", "params", "seed", "status", "steps run", "escape_half", "escape_snap", "Gamma",
            "Gamma median"]
    if held:
        cols.insert(9, f"escape ({criterion.words})")
    return _html_table("forks", cols, rows, klass)


def _figures(data: FamilyData, escape: ForkComparison | None, problem: str) -> list[Section]:
    from interp.plots.fork_curves import fork_loss_curves, gamma_by_arm
    from interp.plots.forks import fork_escapes

    d, table = data.family.design, data.table
    missing = [r for r, s in zip(table["run"], table["status"]) if s == "damaged" or s == "not started"]
    curves = Section(
        "curves", "Candidate loss after the fork",
        "Candidate loss in units of log K against steps since the fork step, one panel per fork step. Black: the "
        "parent from the fork step on (up to the horizon); thin lines: each fork, coloured by arm, one line per "
        "seed. Dashed: 0.5 log K (escape_half); dotted: 0.05 log K (the snap)."
        + (" The parent is missing, so only the forks are drawn." if data.parent is None else "")
        + (f" Not drawn (damaged or never made): {', '.join(missing)}." if missing else ""))
    done = table[table["status"] == "done"]
    gamma = Section("gamma", "Gamma per arm",
                    "Realised update power Gamma = sum ||u - s||² / sum ||s||² over the sampled steps, u the update "
                    "the arm made and s the clean full-batch AdamW update from the same state. It is exactly 0 for "
                    "full_batch; the paper finds about 1 for noise in the second moment only, about 2 in both.")
    escapes = Section("escapes", "Escape per fork step and arm",
                      f"Median {escape.y if escape is not None else 'escape'}"
                      + (f" ({escape.criterion_words})" if escape is not None and escape.criterion else "")
                      + " over seeds with its interval; open triangles: censored medians (lower "
                      "bounds, the true median lies above); the reference arm in black.")
    for section, make in ((curves, lambda: fork_loss_curves(data.curves, data.parent_curve, data.log_k,
                                                            int(d["horizon"]), data.labels)),
                          (gamma, lambda: gamma_by_arm(done, data.labels)),
                          (escapes, lambda: fork_escapes(escape))):
        try:
            if section is escapes and escape is None:
                raise InterpError(problem)
            if section is curves and data.curves.empty:
                raise InterpError("no fork has a metrics log to draw yet")
            if section is gamma and not pd.to_numeric(done["gamma"], errors="coerce").notna().any():
                section.pending = True
                section.problem = ("Gamma was not measured: make the family with --gamma-every K to sample it "
                                   "(each sample costs one full-gradient pass)." if not d.get("gamma_every") else
                                   "No done fork has logged a Gamma sample yet.")
                continue
            section.html = figure_html(make(), section.key)
        except InterpError as exc:
            section.problem = str(exc)
    return [curves, gamma, escapes]


# ---------------------------------------------------------------------------- the page
def fork_family_report(family: ForkFamily | str | Path, path: str | Path, progress: bool = False,
                       data: FamilyData | None = None, escape=None, gamma_window=None) -> Path:
    """Write the report of `family` (a ForkFamily or its folder) to `path`. `data` is
    `read_family(family, escape, gamma_window)` (the family's criterion and Gamma range unless given),
    read here unless given; `progress` is accepted like the other reports' (reading a family is quick:
    nothing is shown). The escape under a criterion other than the default gets its own table."""
    start = time.perf_counter()
    family = family if isinstance(family, ForkFamily) else ForkFamily.open(family)
    data = read_family(family, escape, gamma_window) if data is None else data
    criterion = _criterion(data)
    shown = [y for y in ESCAPES if y != "escape" or (not criterion.is_default and "escape" in data.table)]
    comparisons = {y: _compare(data.table, y) for y in shown}
    sections = _figures(data, *comparisons[shown[0]])
    body = "\n".join([
        *report_top("interp fork family report", family, f"{len(data.table)} forks", start, _summary_rows(data),
                    _left_out(data)),
        section_html(sections[0]),
        "<h2 id=\"section-arms\">Arms</h2>",
        f"<p>Per fork step and arm, over the done forks: the median escape over seeds with a bootstrap interval "
        f"(a censored fork enters only as a lower bound; a median it can move is shown as \">= N\"), the ratio to "
        f"{REFERENCE} at the same fork step, the mean Gamma (ratio of sums) and the mean of each fork's median "
        f"per-step Gamma. Each table names the escape criterion it was judged under.</p>",
        *(_arms_table(y, *comparisons[y], criterion) for y in shown),
        *(section_html(s) for s in sections[1:]),
        "<h2 id=\"section-forks\">Forks</h2>",
        _forks_table(data.table, criterion),
    ])
    return write_html(Path(path), page(f"interp fork family report: {family.name}", body))
