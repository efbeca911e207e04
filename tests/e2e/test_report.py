"""The HTML report in a real browser: it renders every figure with no JavaScript error, opens
from disk without a network, and degrades to notes (not a crash) on runs that lack what a
section needs. Needs Debian's chromium at /usr/bin/chromium (CI installs it)."""

import re
from pathlib import Path

import pytest

from interp.errors import InterpError
from interp.runs import Run
from interp.train import train
from tests.helpers import FIGURE_DIV, figures, js_errors, layout, render, small_spec

from interp.report import write_report, write_timeline

SNAPPING = dict(steps=300, lr=3e-3, checkpoint_every=50, early_checkpoints=False)
SECTIONS = ("timeline", "loss", "shuffle", "dissipation", "sensitivity", "attn_to_z", "segments", "attention", "probes",
            "erasure", "unembed_geometry", "group_hist", "group_share", "ablation", "patching", "usage", "trajectory",
            "spectra", "representations", "lens")
# computed only when asked: the command is shown (the edges' two sections first: their analysis is ordered before)
GEOMETRY = ("attribution", "edges", "edges_graph", "hessian", "anisotropy", "escape", "llc", "gradients", "updates")


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Run:
    run = Run.create(tmp_path_factory.mktemp("report") / "run", small_spec(**SNAPPING))
    train(run, progress=False)
    return run


@pytest.fixture(scope="module")
def report(run, tmp_path_factory) -> Path:
    return write_report(run, tmp_path_factory.mktemp("html") / "report.html")


def test_report_renders_every_figure_in_a_browser(report, tmp_path):
    dom = render(report, tmp_path)
    count, text = js_errors(dom)
    assert count == 0 and not text.strip(), f"JavaScript errors:\n{text}"
    figs = figures(dom)
    assert sorted(figs) == sorted(f"fig-{s}" for s in SECTIONS)
    for div_id, html in figs.items():
        opening = FIGURE_DIV.search(html).group(0)
        assert "js-plotly-plot" in opening, f"{div_id} was never handed to plotly"
        assert 'class="main-svg"' in html, f"{div_id} has no rendered SVG"
    assert 'class="missing"' not in dom  # a run that snaps gets every section
    for key in GEOMETRY:  # not computed unasked: each says which command computes it
        assert f'class="pending" data-section="{key}"' in dom
    assert "interp analyze" in dom and "--only hessian" in dom and "--only llc" in dom
    assert 'id="section-mechanisms"' in dom and "incremental group coverage" in dom  # the mechanism table


FIRST_SCREEN = (1280, 1080)  # a desktop's window: the report's first screen


def test_the_first_screen_holds_the_summary_and_the_timeline(report, tmp_path):
    """Summary, then the circuit-formation timeline, then the two verdict tables as one-line digests (their rows
    folded in <details>), then the other figures; drawn by Chromium in a 1280 x 1080 window."""
    ids = ["summary", "fig-timeline", "digest-mechanisms", "details-mechanisms", "digest-reconcile", "details-reconcile",
           "section-loss"]
    found = layout(report, tmp_path, ids, window=FIRST_SCREEN)
    at, height = found["at"], found["viewport"][1]
    assert found["viewport"][0] == FIRST_SCREEN[0] and set(at) == set(ids), found  # height: the window's, less its frame
    assert at["summary"]["bottom"] < height, "the summary does not fit the first screen"
    assert at["fig-timeline"]["top"] < height - 200, "the timeline does not begin on the first screen"
    tops = [at[i]["top"] for i in ("summary", "fig-timeline", "digest-mechanisms", "digest-reconcile", "section-loss")]
    assert tops == sorted(tops), at
    text = report.read_text()
    for key in ("mechanisms", "reconcile"):
        assert at[f"details-{key}"]["bottom"] - at[f"details-{key}"]["top"] < 60, f"the {key} rows are not folded"
        digest = re.search(rf'id="digest-{key}"><b>(\d+) \w+: (.*?)</b>', text)
        folded = text.split(f'id="details-{key}"', 1)[1].split("</details>", 1)[0]
        verdicts = re.findall(r"<tr class='verdict-[^']*'>(?:<td>.*?</td>){0,7}?<td><b>([^<]*)</b>", folded)
        assert int(digest.group(1)) == len(verdicts) > 0
        counted = {v: int(n) for n, v in (part.split(" ", 1) for part in digest.group(2).split(", "))}
        assert counted == {v: verdicts.count(v) for v in set(verdicts)}, (counted, verdicts)


def test_the_error_recorder_sees_errors(run, tmp_path):
    """The browser test is not vacuous: a throwing script and a rejected promise are recorded."""
    page = write_timeline(run, tmp_path / "timeline.html")
    broken = tmp_path / "broken.html"
    broken.write_text(page.read_text().replace(
        "</body>", "<script>Promise.reject(new Error('nope')); throw new Error('boom');</script></body>"))
    count, text = js_errors(render(broken, tmp_path))
    assert count == 2 and "boom" in text and "nope" in text
    count, text = js_errors(dom := render(page, tmp_path))
    assert count == 0, text
    assert list(figures(dom)) == ["fig-timeline"] and 'class="main-svg"' in dom


def test_report_is_self_contained(report):
    text = report.read_text()
    assert not re.search(r"<script[^>]*\bsrc=", text), "a script is loaded from elsewhere"
    assert not re.search(r"<link\b", text), "a stylesheet or resource is loaded from elsewhere"
    assert text.count("* plotly.js v") == 1, "plotly.js must be embedded exactly once"
    assert text.count("Plotly.newPlot(") == len(SECTIONS)


def test_report_summary_table(run, report):
    text = report.read_text()
    summary = text[text.index('id="summary"'): text.index("</table>")]
    # the same rows as `interp show` and `interp analyze` print (one rendering of the summary)
    for label in ("K=4", "D=96", "<th>plateau</th>", "<th>tau</th>", "tau_half = ", "<th>model</th>",
                  "<th>routing head</th>", "<th>z carried</th>", "<th>z used</th>", "zero-ablating",
                  "<th>collective snap</th>", "≥ 80% accurate at τ/2", "<th>patching</th>"):
        assert label in summary, label


def test_report_header_counts_drawn_figures_only(report):
    text = report.read_text()
    meta = text[text.index('<p class="meta">'):].split("</p>", 1)[0]
    # the geometry placeholders are named apart, never counted among the figures
    assert (f" · {len(SECTIONS)} figures drawn, {len(GEOMETRY)} not computed (attribution, edges, hessian, llc, gradients, "
            f"updates: ") in meta
    assert "could not be made" not in meta and f"of {len(SECTIONS) + len(GEOMETRY)}" not in meta


def test_second_report_comes_from_the_cache(run, report, tmp_path):
    again = write_report(run, tmp_path / "again.html")
    assert re.search(r"analyses: 0 computed, [1-9]\d* from cache", again.read_text())


def test_report_of_a_run_with_too_few_checkpoints(tmp_path):
    short = Run.create(tmp_path / "short", small_spec(steps=1))
    train(short, progress=False)
    page = write_report(short, tmp_path / "short.html")
    text = page.read_text()
    assert "a timeline needs at least 3 saved checkpoints" in text and "has 2" in text
    assert 'data-section="timeline"' in text and 'class="missing" data-section="timeline"' in text
    assert 'class="missing" data-section="ablation"' in text and "never falls below 0.5 log K" in text
    assert 'class="missing" id="missing"' in text  # listed at the top as well
    assert 'id="fig-loss"' in text  # what can be drawn still is
    dom = render(page, tmp_path)
    count, errors = js_errors(dom)
    assert count == 0, errors
    assert all('class="main-svg"' in html for html in figures(dom).values())

    empty = Run.create(tmp_path / "empty", small_spec())
    text = write_report(empty, tmp_path / "empty.html").read_text()
    assert "has no saved checkpoints" in text or "has 0" in text
    assert "has no evaluations yet" in text and "Plotly.newPlot(" not in text


def test_write_timeline_explains_what_is_missing(tmp_path):
    short = Run.create(tmp_path / "short", small_spec(steps=1))
    train(short, progress=False)
    with pytest.raises(InterpError, match="at least 3 saved checkpoints"):
        write_timeline(short, tmp_path / "t.html")
    assert not (tmp_path / "t.html").exists()
