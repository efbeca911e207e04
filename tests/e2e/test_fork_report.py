"""The fork family report in a real browser: a real tiny family (tests/fork_families.py)
reported through `interp report`, and every figure (the curves after the fork, Gamma per arm,
the escapes) drawn with data and no JavaScript error; also when a fork is damaged and the
parent has gone missing, where the page is written from the forks alone."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from interp.cli import main
from interp.forks.family import ForkFamily
from interp.runs import RUN_FILE
from tests.fork_families import make_family
from tests.helpers import assert_drawn, copy_run, render

FIGURES = {"fig-curves", "fig-gamma", "fig-escapes"}


@pytest.fixture(scope="module")
def family(tmp_path_factory) -> ForkFamily:
    return make_family(tmp_path_factory.mktemp("fork-report-browser"))


def _traces(html: str, kind: str) -> int:
    """How many traces of `kind` (scatter, bars) plotly drew in a figure's SVG."""
    return len(re.findall(rf'class="trace {kind}\b', html))


def test_the_report_is_drawn_in_a_browser(family, tmp_path):
    page = tmp_path / "family.html"
    assert main(["report", str(family.path), "-o", str(page), "--quiet"]) == 0
    figs = assert_drawn(render(page, tmp_path), FIGURES)
    assert _traces(figs["fig-curves"], "scatter") == 12  # the parent in 2 panels and 10 forks
    # each drawn as a line, and the legend's four: the parent and the three arms (seeds share one entry)
    assert len(re.findall(r'<path class="js-line"', figs["fig-curves"])) == 12 + 4
    assert _traces(figs["fig-gamma"], "bars") == 2 and _traces(figs["fig-gamma"], "scatter") == 2
    assert len(re.findall(r'class="point"', figs["fig-gamma"])) >= 10  # 2 fork steps x 3 arms of bars, 10 forks
    assert _traces(figs["fig-escapes"], "scatter") == 3
    assert len(re.findall(r'class="point"', figs["fig-escapes"])) == 6  # 3 arms x 2 fork steps


def test_a_damaged_fork_and_a_missing_parent_still_render(family, tmp_path):
    copy = tmp_path / "family"
    copy_run(family.path, copy)
    file = copy / "at20-minibatch-s0" / RUN_FILE
    info = json.loads(file.read_text())
    info["fork"]["arm"] = "full_batch"  # edited by hand: its stored hash no longer matches
    file.write_text(json.dumps(info))
    parent = Path(family.design["parent"])
    away = parent.with_name("parent-moved")
    page = tmp_path / "damaged.html"
    os.rename(parent, away)
    try:
        assert main(["report", str(copy), "-o", str(page), "--quiet"]) == 1
    finally:
        os.rename(away, parent)
    dom = render(page, tmp_path)
    figs = assert_drawn(dom, FIGURES)
    assert _traces(figs["fig-curves"], "scatter") == 9  # no parent, and the damaged fork is not drawn
    assert "at20-minibatch-s0" in dom[dom.index('id="left-out"'):dom.index('id="section-curves"')]
