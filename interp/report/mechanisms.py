"""The mechanism table's section of the run, sweep and fork family reports."""

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
        return f"{title}<p class=\"missing\">{html.escape(str(exc))}</p>"
    return f"{title}{caption}{table.html()}"

