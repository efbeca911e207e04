"""Figures of result objects in a notebook, drawn offline (`interp.plots.inline`). Result modules
(`interp.timelines`) never reach plotting: their cards are found here by type, and plotting is
imported only when a notebook shows one."""

from __future__ import annotations

from interp.display.html import esc
from interp.presentable import renders


@renders("interp.timelines:Timeline")
def timeline_html(tl) -> str:
    """The timeline's figure (`interp.plots.timeline_figure`) as notebook HTML, and the command that adds the edge
    panel when the edges are not cached."""
    from interp.plots import timeline_figure
    from interp.plots.inline import figure_html

    note = getattr(tl, "edges_note", "")
    return figure_html(timeline_figure(tl)) + (f"<p style='color:#666'>{esc(note)}</p>" if note else "")
