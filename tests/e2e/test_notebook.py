"""examples/tour.ipynb, executed top to bottom in a real ipykernel (nbclient), and what it shows:
every object displays itself as HTML, plotly.js is embedded once and never fetched, and the
outputs render in headless Chromium with the timeline drawn and no script error."""

from __future__ import annotations

import html
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from interp.report.page import ERROR_RECORDER
from tests.helpers import DEMO, copy_run, js_errors, render

ROOT = Path(__file__).resolve().parents[2]
TOUR = ROOT / "examples" / "tour.ipynb"
EMBED = 'typeof window.Plotly === "undefined"'
SCRIPT_SRC = re.compile(r"<script[^>]*\bsrc\s*=\s*[\"']?(https?:)?//", re.I)


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    nb = nbformat.read(TOUR, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "outputs are committed"
    # the kernel starts in a folder of its own whose checkpoints/demo is the shipped demo without the cache
    # the user's commands may have left (the tour looks for checkpoints/demo upward from where it starts)
    where = tmp_path_factory.mktemp("tour")
    copy_run(DEMO, where / "checkpoints" / "demo")
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(where)}}).execute()
    return nb


def _html(cell) -> str:
    return "".join(o.get("data", {}).get("text/html", "") for o in cell.get("outputs", []))


def _cell(nb, source_start: str):
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith(source_start)]
    return cell


def test_the_tour_runs_without_errors(executed):
    errors = [o for c in executed.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    assert not any("Traceback" in o.get("text", "") for c in executed.cells for o in c.get("outputs", []))


def test_every_object_shows_itself(executed):
    run_card = _html(_cell(executed, "import shutil"))
    assert "Run demo" in run_card and "tau_half = 925" in run_card and "not computed yet" in run_card
    after = _html(_cell(executed, "print(repr(tl))"))  # the same run, once the timeline has cached its analyses
    assert re.search(r"routing head</th><td>L\dH\d \(z-share", after), after[-2000:]
    sweep = _html(_cell(executed, "from dataclasses import replace"))
    assert "Sweep sweep" in sweep and "2: 2 done" in sweep and "seed = 0, 1" in sweep
    fork = _html(_cell(executed, "fork = interp.fork"))
    assert "fork of" in fork and "at step 100, arm full_batch" in fork
    table = _html(_cell(executed, "from interp.mechanisms"))
    assert "incremental group coverage" in table and "verdict" in table


def test_plotly_js_is_embedded_once_and_never_fetched(executed):
    pages = [_html(c) for c in executed.cells if c.cell_type == "code"]
    assert sum(EMBED in p for p in pages) == 1
    assert EMBED in _html(_cell(executed, "tl = interp.timeline"))  # the first figure carries it
    for page in pages:
        assert not SCRIPT_SRC.search(page), SCRIPT_SRC.search(page).group(0)


def test_the_outputs_render_in_a_browser(executed, tmp_path):
    body = "\n".join(f"<section data-cell='{i}'>{_html(c)}</section>" for i, c in enumerate(executed.cells)
                     if c.cell_type == "code" and _html(c))
    page = tmp_path / "tour.html"
    page.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'><script>{ERROR_RECORDER}</script></head>"
                    f"<body><pre id=\"js-errors\" data-count=\"0\" hidden></pre>{body}</body></html>")
    dom = render(page, tmp_path)
    count, text = js_errors(dom)
    assert count == 0, html.unescape(text)
    figure = re.search(r'<div id="interp-fig-\w+"[^>]*>(.*?)</section>', dom, re.S)
    assert figure and "main-svg" in figure.group(1), "the timeline was not drawn"
    assert "Run demo" in dom and "Sweep sweep" in dom
