"""The card every notebook display shares: a title, label/value rows, an optional table.

The style is scoped to `.interp-card`, so it never restyles the rest of a notebook, and it is
inline (no stylesheet link): a display needs no network.
"""

from __future__ import annotations

import html

STYLE = """<style>
.interp-card { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; font-size: 13px; color: #222;
               border: 1px solid #ddd; border-radius: 6px; padding: 8px 12px; margin: 4px 0; max-width: 1100px; }
.interp-card h4 { margin: 0 0 6px; font-size: 14px; }
.interp-card table { border-collapse: collapse; margin: 4px 0; }
.interp-card th, .interp-card td { text-align: left; padding: 2px 12px 2px 0; border-bottom: 1px solid #eee;
                                   vertical-align: top; }
.interp-card th { font-weight: 600; white-space: nowrap; }
.interp-card .interp-note { color: #666; margin: 4px 0; }
.interp-card pre { margin: 4px 0; font-size: 12px; white-space: pre-wrap; }
</style>"""


def esc(value) -> str:
    return html.escape(str(value))


def rows_table(rows: list[tuple[str, str]]) -> str:
    """(label, text) rows as a two-column table, every cell escaped."""
    cells = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
    return f"<table>{cells}</table>"


def frame_table(df, max_rows: int = 10) -> str:
    """The head of a pandas table (at most `max_rows` rows), with a line saying how many more."""
    shown = df.head(max_rows).to_html(index=False, border=0, na_rep="", float_format=lambda v: f"{v:.4g}")
    more = len(df) - max_rows
    return shown + (f"<p class='interp-note'>... and {more} more row{'s' if more != 1 else ''}</p>" if more > 0 else "")


def card(title: str, rows: list[tuple[str, str]] = (), body: str = "", notes: list[str] = ()) -> str:
    """A titled card: label/value rows, then `body` (trusted HTML), then escaped notes."""
    parts = [STYLE, f"<div class='interp-card'><h4>{esc(title)}</h4>"]
    if rows:
        parts.append(rows_table(list(rows)))
    parts.append(body)
    parts += [f"<p class='interp-note'>{esc(n)}</p>" for n in notes]
    parts.append("</div>")
    return "".join(parts)
