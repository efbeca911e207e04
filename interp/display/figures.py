"""Figures of result objects in a notebook, drawn offline (`interp.plots.inline`). Result modules
(`interp.timelines`) never reach plotting: their cards are found here by type, and plotting is
imported only when a notebook shows one."""

from __future__ import annotations

from interp.presentable import renders


@renders("interp.timelines:Timeline")
def timeline_html(tl) -> str:
    """The timeline's figure (`interp.plots.timeline_figure`) as notebook HTML."""
    from interp.plots import timeline_figure
    from interp.plots.inline import figure_html

    return figure_html(timeline_figure(tl))
