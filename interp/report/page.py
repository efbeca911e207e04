"""The HTML page every report shares: an error recorder, plotly.js inline, figures as divs.

A page embeds plotly.js once, inline, and every figure as a div plus a call to
`Plotly.newPlot`, so it opens from disk with no network. A small script at the top of every
page records JavaScript errors (window error events, unhandled promise rejections,
console.error) in a hidden element `#js-errors`, so a headless browser can check that the
page rendered cleanly.
"""

from __future__ import annotations

import datetime as _dt
import html
import time
from dataclasses import dataclass
from pathlib import Path

from interp.errors import InterpError
from interp.files import atomic_write_bytes
from interp.report.mechanisms import mechanism_html

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
    else if (e && e.target && e.target !== window) {
      record("failed to load " + (e.target.src || e.target.href || e.target.tagName));
    }
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
.pending { background: #eef4fb; border-left: 4px solid #4a86c5; padding: 8px 14px; margin: 1em 0; }
figure.report-figure { margin: 0.5em 0 1.5em; }
table.mechanisms td { font-size: 0.92em; }
tr.verdict-consistent b { color: #1a7f37; }
tr.verdict-contradicted b { color: #b3261e; }
tr.verdict-inconclusive b { color: #8a6d00; }
tr.verdict-not-measured b { color: #777; }
tr.verdict-reproduced b { color: #1a7f37; }
tr.verdict-not-reproduced b { color: #b3261e; }
tr.verdict-differs-definition b, tr.verdict-differs-setting b { color: #8a6d00; }
p.digest { margin: 0.4em 0; }
details.verdicts > summary { cursor: pointer; color: #4a86c5; margin: 0.3em 0 0.6em; }
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
    pending: bool = False  # an analysis that runs only when asked: the section shows its command
    analysis: str = ""  # the registry analysis the section draws, if any


def figure_count(sections: list[Section]) -> str:
    """The header's count: figures drawn, then the sections not computed (analyses that run only
    when asked, named) and those that could not be made; a placeholder is never counted as drawn."""
    drawn = sum(1 for s in sections if not s.problem)
    pending = [s for s in sections if s.pending]
    failed = [s for s in sections if s.problem and not s.pending]
    out = f"{drawn} figure{'' if drawn == 1 else 's'} drawn"
    if pending:
        names = ", ".join(dict.fromkeys(s.analysis or s.key for s in pending))
        out += (f", {len(pending)} not computed ({names}: minutes each, run only when asked; "
                "each section shows its command)")
    if failed:
        out += f", {len(failed)} could not be made (listed below the summary)"
    return out


class NotComputed(InterpError):
    """A section's analysis runs only when asked for (minutes of work): say how, do not run it."""


# ---------------------------------------------------------------------------- page assembly
def figure_html(fig, key: str) -> str:
    """A figure as a div + script, without plotly.js (the page embeds it once)."""
    height = fig.layout.height or 450
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"fig-{key}", auto_play=False,
                       default_width="100%", default_height=f"{int(height)}px",
                       config={"responsive": True, "displaylogo": False})


def page(title: str, body: str) -> str:
    """A complete, self-contained HTML page: error recorder, plotly.js inline, then `body`."""
    from interp.plots.inline import plotly_js

    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{html.escape(title)}</title>\n"
        f"<script>{ERROR_RECORDER}</script>\n"
        f"<style>{STYLE}</style>\n"
        f"<script type=\"text/javascript\">{plotly_js()}</script>\n"
        "</head>\n<body>\n"
        "<pre id=\"js-errors\" data-count=\"0\" hidden></pre>\n"
        f"{body}\n</body>\n</html>\n"
    )


def write_html(path: Path, text: str) -> Path:
    path = Path(path)
    atomic_write_bytes(path, text.encode("utf-8"))
    return path


def summary_table(rows: list[tuple[str, str]]) -> str:
    cells = "\n".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<table class=\"summary\" id=\"summary\">\n{cells}\n</table>"



def report_top(title: str, source, made: str, start: float, summary: list[tuple[str, str]], notes: str,
               verdicts: bool = True) -> list[str]:
    """The top of every report on `source` (a run, a sweep or a fork family): the title, a line with its folder,
    when and by which interp the report was written, what it holds (`made`) and the seconds since `start`, then
    the summary table, `notes` and (unless `verdicts` is False: the caller places them) the mechanism and
    reconciliation tables (`interp.report.mechanisms`)."""
    stamp = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    from interp import __version__

    return [
        f"<h1>{title}: {html.escape(source.name)}</h1>",
        f"<p class=\"meta\">{html.escape(str(source.path))} · written {html.escape(stamp)} by interp {__version__} · "
        f"{made} · {time.perf_counter() - start:.1f} s</p>",
        "<h2 id=\"section-summary\">Summary</h2>",
        summary_table(summary),
        notes,
        *([mechanism_html(source)] if verdicts else []),
    ]


def section_html(s: Section) -> str:
    head = f"<h2 id=\"section-{s.key}\">{html.escape(s.title)}</h2>"
    if s.pending:
        return (f"<section class=\"pending\" data-section=\"{s.key}\">{head}\n"
                f"<p>{html.escape(s.caption)}</p><p>{html.escape(s.problem)}</p></section>")
    if s.problem:
        return (f"<section class=\"missing\" data-section=\"{s.key}\">{head}\n"
                f"<p>This figure could not be made: {html.escape(s.problem)}</p></section>")
    return (f"<section data-section=\"{s.key}\">{head}\n<figure class=\"report-figure\">{s.html}\n"
            f"<figcaption>{html.escape(s.caption)}</figcaption></figure></section>")
