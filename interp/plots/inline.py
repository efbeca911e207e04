"""Figures inline in a notebook, offline: plotly.js embedded once per notebook, never fetched.

Plotly's own notebook renderers either load plotly.js from a CDN ("notebook_connected", and
MathJax from a CDN in "iframe"/"browser") or need a kernel-side setup call. Here the first
figure a kernel shows carries plotly.js inline (about 4.8 MB, in a script guarded so that it
runs only when `window.Plotly` is missing), and every later one is a div plus a call to
`Plotly.newPlot` that waits for it. No output has a `<script src>`, so a notebook shows its
figures in Jupyter, JupyterLab and VS Code with no network.

`figure_html(fig)` is that HTML. Importing `interp.plots` inside a Jupyter kernel registers the
renderer "interp" with plotly and makes it the default, so every plotly figure a cell returns
(`interp.plots.*`, a timeline, a fit's figure) uses it; `pio.renderers.default = "..."` after
the import chooses another. Outside a kernel nothing is changed. When the output that carried
plotly.js has been cleared, show `IPython.display.HTML(embed_plotly(force=True))` (docs/notebook.md).
"""

from __future__ import annotations

import json
import sys
import uuid

import plotly.io as pio

RENDERER = "interp"
WAIT_MS = 10000  # how long a figure waits for plotly.js before saying what is missing
_state = {"embedded": False}


def plotly_js() -> str:
    """plotly.js's source, safe inside an inline <script> (no "</script")."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs().replace("</script", "<\\/script")


def embed_plotly(force: bool = False) -> str:
    """The inline plotly.js script the first time (or with `force`), else "": once per kernel."""
    if _state["embedded"] and not force:
        return ""
    _state["embedded"] = True
    return f'<script type="text/javascript">if (typeof window.Plotly === "undefined") {{\n{plotly_js()}\n}}</script>\n'


def figure_html(fig, div_id: str | None = None, height: int | None = None) -> str:
    """A figure (a plotly Figure or its dict) as notebook HTML: plotly.js when not yet embedded,
    a div, and a script that draws it once plotly.js is there (or says how to get it)."""
    import plotly.graph_objects as go

    fig = fig if isinstance(fig, go.Figure) else go.Figure(fig)
    div_id = div_id or f"interp-fig-{uuid.uuid4().hex[:12]}"
    height = int(height or fig.layout.height or 450)
    spec = fig.to_json().replace("</", "<\\/")
    config = json.dumps({"responsive": True, "displaylogo": False})
    draw = (
        "(function () {\n"
        f"  var id = {json.dumps(div_id)}, spec = {spec}, waited = 0;\n"
        "  function draw() {\n"
        "    var el = document.getElementById(id);\n"
        "    if (!el) { return; }\n"
        "    if (typeof window.Plotly === 'undefined') {\n"
        f"      if ((waited += 100) > {WAIT_MS}) {{ el.textContent = 'plotly.js is not loaded in this page: re-run the "
        "first cell that showed a figure, or show '\n"
        "        + 'IPython.display.HTML(interp.plots.inline.embed_plotly(force=True)).'; return; }\n"
        "      setTimeout(draw, 100); return;\n"
        "    }\n"
        f"    window.Plotly.newPlot(el, spec.data || [], spec.layout || {{}}, {config});\n"
        "  }\n"
        "  draw();\n"
        "})();"
    )
    return (f"{embed_plotly()}<div id=\"{div_id}\" class=\"interp-figure\" style=\"width:100%;height:{height}px\"></div>\n"
            f"<script type=\"text/javascript\">{draw}</script>")


def renderer():
    """plotly's renderer interface over `figure_html`: text/html only, plotly.js inline once. Made when
    installed: plotly's renderers module imports IPython (half a second that a report never needs)."""
    from plotly.io._base_renderers import MimetypeRenderer

    class InlineRenderer(MimetypeRenderer):
        def to_mimebundle(self, fig_dict):
            return {"text/html": figure_html(fig_dict)}

    return InlineRenderer()


def in_kernel() -> bool:
    """Whether this process is a Jupyter kernel (ipykernel loaded and an IPython kernel running)."""
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def install(default: bool | None = None) -> None:
    """Register the "interp" renderer; make it plotly's default in a kernel (or when `default`)."""
    pio.renderers[RENDERER] = renderer()
    if default or (default is None and in_kernel()):
        pio.renderers.default = RENDERER
