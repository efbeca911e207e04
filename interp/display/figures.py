"""Figures of result objects in a notebook, drawn offline (`interp.plots.inline`). Result modules
(`interp.timelines`) reach plotting only through here, lazily, when a notebook shows them."""

from __future__ import annotations


def timeline_html(tl) -> str:
    """The timeline's figure (`interp.plots.timeline_figure`) as notebook HTML."""
    from interp.plots import timeline_figure
    from interp.plots.inline import figure_html

    return figure_html(timeline_figure(tl))
