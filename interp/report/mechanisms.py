"""The mechanism table's section of the run, sweep and fork family reports, and the reconciliation table's
after it (docs/reconciliation.md), built on the same evidence.

Each opens with a one-line digest (its rows counted by verdict, whatever the verdicts are called: read from the
rows) and keeps its rows folded in a plain HTML `<details>`, open on a click: a report's first screen is its
summary and its picture, not three screens of tables."""

from __future__ import annotations

import html

from interp.errors import InterpError


def mechanism_html(source) -> str:
    """The mechanism table's section (docs/mechanisms.md), from what the caches hold: the report's
    analyses have just run, so nothing more is computed. A run, a sweep or a fork family."""
    from interp.mechanisms.table import mechanisms

    title = "<h2 id=\"section-mechanisms\">Which mechanism holds the plateau</h2>"
    caption = ("<p class=\"caption\">One row per candidate mechanism: the measured value with its interval, the "
               "number of runs it rests on and the verdict of a rule fixed before the data (docs/mechanisms.md). "
               "Rows not measured say what would measure them; <code>interp mechanisms PATH</code> computes the "
               "cheap ones.</p>")
    try:
        table = mechanisms(source.path, compute=False)
    except InterpError as exc:
        return f"{title}<p class=\"missing\">{html.escape(str(exc))}</p>" + reconcile_html(source)
    return title + folded("mechanisms", "mechanism", table.rows, caption + table.html()) + reconcile_html(source, table)


def reconcile_html(source, table=None) -> str:
    """The reconciliation table's section: each published claim beside ours (docs/reconciliation.md), from the
    mechanism table `table` already built (its evidence is reused) and the caches; nothing is computed."""
    from interp.mechanisms.reconcile import reconcile

    title = "<h2 id=\"section-reconcile\">The author's claims beside ours</h2>"
    caption = ("<p class=\"caption\">One row per published claim: the author's number and its source, ours under the "
               "author's definition where it can be computed, ours under ours with its interval and runs, the "
               "differences in setting and the verdict of a rule fixed before the data (docs/reconciliation.md). "
               "Rows not measured name the command that would measure them; <code>interp reconcile PATH...</code> "
               "pools runs, sweeps and fork families.</p>")
    try:
        rec = reconcile(source.path, compute=False, tables={str(source.path): table} if table is not None else None)
    except InterpError as exc:
        return f"{title}<p class=\"missing\">{html.escape(str(exc))}</p>"
    return title + folded("reconcile", "claim", rec.rows, caption + rec.html())


def digest(rows: list[dict]) -> str:
    """"7: 4 contradicted, 2 not measured, 1 consistent": the rows counted by their `verdict`, most first (ties in
    the order the rows give them)."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[str(row.get("verdict"))] = counts.get(str(row.get("verdict")), 0) + 1
    ordered = sorted(counts.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{n} {verdict}" for verdict, n in ordered)


def folded(key: str, noun: str, rows: list[dict], inner: str) -> str:
    """The digest line, then `inner` (the caption and the table) folded in a <details>."""
    n = len(rows)
    line = f"{n} {noun}{'' if n == 1 else 's'}: {digest(rows)}" if n else f"no {noun}s"
    return (f"<p class=\"digest\" id=\"digest-{key}\"><b>{html.escape(line)}</b></p>"
            f"<details class=\"verdicts\" id=\"details-{key}\"><summary>the {n} row{'' if n == 1 else 's'}: each "
            f"{noun}, its evidence and the rule's reason</summary>{inner}</details>")

