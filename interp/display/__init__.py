"""How interp's objects show themselves in a notebook: `_repr_html_` bodies and short reprs.

Each display reads only what is on disk or cached: it never trains or analyses anything, and
showing a run or a sweep never imports torch. The figures are drawn offline
(`interp.plots.inline`). docs/notebook.md lists what shows what.

    interp.display.html     the shared card layout and its scoped style
    interp.display.run      a Run: spec, steps saved, plateau, tau, the routing head if cached, status
    interp.display.family   a Sweep (axes, counts per status, the table's head) and a fork family
    interp.display.results  fit results (summary, interval, the paper's value) and a sweep's Fits
    interp.display.figures  figures of result objects (the timeline), for their `_repr_html_`
    interp.display.edges    the edges analysis (`interp.analysis.edges.view`): the circuit at chosen steps, the raster

The objects find their displays by type (`interp.presentable`): each module below registers its
renderers when imported, and the package imports this one on the first card or repr shown.
"""

from interp.display import edges, family, figures, results, run  # noqa: F401 - each registers its renderers
