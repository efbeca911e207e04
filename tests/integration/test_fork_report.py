"""The fork family report (`interp.report.forks`) and `interp report` / `interp ls` on a family,
on a real tiny family (tests/fork_families.py: 10 forks, all censored, Gamma sampled): every
arm, fork and Gamma value is on the page, censored medians read ">= N", a damaged fork is
named and makes the command exit 1, a missing parent is stated while the forks are still
drawn, and `interp ls` lists the family as one line without loading torch."""

from __future__ import annotations

import html
import json
import math
import os
import re
import shutil
from pathlib import Path

import pytest

from interp.cli import main
from interp.forks.design import design_points
from interp.forks.family import ForkFamily
from interp.plots.fork_curves import fork_loss_curves
from interp.report.fork_data import read_family
from interp.report.forks import fork_family_report
from interp.runs import RUN_FILE
from interp.sweeps.forks import forks as compare_forks
from tests.fork_families import LABELS, make_family
from tests.helpers import copy_run, model_code_loaded

# a 10-fork family (8 s) under every test: the slow tier's (tests/e2e/test_fork_report.py renders the page too)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def family(tmp_path_factory) -> ForkFamily:
    return make_family(tmp_path_factory.mktemp("fork-report"))


def _text(path: Path) -> str:
    """The page's visible text and attributes, scripts left out, entities decoded."""
    raw = path.read_text()
    body = raw[raw.index("<body>"):]
    return html.unescape(re.sub(r"<script\b.*?</script>", "", body, flags=re.S))


def _copy(family: ForkFamily, where: Path) -> ForkFamily:
    return ForkFamily.open(copy_run(family.path, where / family.name))


def _damage(family: ForkFamily, name: str) -> None:
    """Edit a fork's fork block by hand (another seed), leaving its stored hash as it was."""
    file = family.path / name / RUN_FILE
    info = json.loads(file.read_text())
    info["fork"]["seed"] = 7
    file.write_text(json.dumps(info))


def test_the_family_is_what_the_report_assumes(family):
    table = family.table()
    assert len(table) == 10 and set(table["status"]) == {"done"}
    assert table["censored_escape_half"].all() and table["censored_escape_snap"].all()
    assert (table["gamma_samples"] == 4).all() and (table.loc[table["arm"] == "full_batch", "gamma"] == 0).all()
    # the torch-free naming of `interp ls` and of a report without its parent is the family's own
    assert [p[0] for p in design_points(family.design)] == [p[0] for p in family.points()]


def test_the_page_shows_arms_forks_censoring_and_gamma(family, tmp_path):
    path = fork_family_report(family, tmp_path / "family.html")
    raw = path.read_text()
    assert raw.count("Plotly.newPlot") == 3 and len(re.findall(r"plotly\.js v\d", raw)) == 1  # plotly.js once
    text = _text(path)
    for key in ("curves", "gamma", "escapes"):
        assert f'id="fig-{key}"' in text
    assert 'id="left-out"' not in text  # nothing is missing
    # the mechanism table: every fork is censored on both arms, so the forks' ratio is not defined
    mech = text[text.index('id="section-mechanisms"'):]
    row = mech[mech.index("entropic stabilisation (forks)"):]
    row = row[:row.index("</tr>")]
    assert "not measured" in row and "censored at its horizon" in row and "no full_batch" not in row, row  # the real cause
    assert str(family.parent.path) in text and "fork steps" in text and "20, 40" in text
    assert "10 done (10 censored" in text and "0 damaged" in text
    arms = text[text.index('id="arms-escape_half"'):text.index('id="arms-escape_snap"')]
    for label in LABELS:
        assert label in arms
    assert arms.count(">= 20") == 6  # every median is censored: a lower bound, never a value
    assert "1 (reference)" in arms and "> 20 (unbounded above)" in arms
    forks = text[text.index('id="forks"'):]
    table = family.table()
    for r in table.to_dict("records"):
        row = forks[forks.index(f"<td>{r['run']}</td>"):]
        row = row[:row.index("</tr>")]
        assert ">20 (censored)" in row and f"{r['gamma']:.3g}" in row, row
    for arm, gamma in table[table["arm"] != "full_batch"].groupby("arm")["gamma"]:
        assert f"{gamma.iloc[0]:.3g}" in text


def test_the_curves_are_on_the_forks_clock(family):
    data = read_family(family)
    fig = fork_loss_curves(data.curves, data.parent_curve, data.log_k, 20, data.labels)
    parent = [t for t in fig.data if t.name == "parent"]
    forks = [t for t in fig.data if t.name != "parent"]
    assert len(parent) == 2 and len(forks) == 10
    for t in parent:
        assert t.line.color == "black" and t.line.width == 4 and list(t.x) == [0, 10, 20]
    for t in forks:
        assert list(t.x) == [0, 10, 20] and t.line.width < 2
        assert all(0 < y < 3 for y in t.y)  # in units of log K
    colors = {t.name: {u.line.color for u in forks if u.name == t.name} for t in forks}
    assert all(len(c) == 1 for c in colors.values()) and len({c.pop() for c in colors.values()}) == 3
    assert {s.y0 for s in fig.layout.shapes} == {0.5, 0.05}


def test_a_damaged_fork_is_named_and_exits_1(family, tmp_path, capsys):
    copy = _copy(family, tmp_path)
    out = tmp_path / "ok.html"
    assert main(["report", str(copy.path), "-o", str(out)]) == 0
    assert out.is_file()
    _damage(copy, "at40-minibatch-s1")
    capsys.readouterr()
    out = tmp_path / "damaged.html"
    assert main(["report", str(copy.path), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "1 of 10 run(s) damaged" in err and "at40-minibatch-s1" in err
    text = _text(out)
    left = text[text.index('id="left-out"'):]
    left = left[:left.index("</div>")]
    assert "at40-minibatch-s1" in left and "damaged" in left and "fork block" in left
    assert "9 done" in text and "1 damaged" in text
    forks = text[text.index('id="forks"'):]
    assert "at40-minibatch-s1" in forks
    assert "Not drawn (damaged or never made): at40-minibatch-s1" in text
    arms = text[text.index('id="arms-escape_half"'):text.index('id="arms-escape_snap"')]
    row = arms[arms.index("<td>40</td><td>minibatch</td>"):]
    assert "<td>1</td><td>1</td></tr>" in row[:row.index("</tr>") + 5]  # n = 1: the damaged fork is left out


def test_a_fork_never_made_is_named(family, tmp_path):
    copy = _copy(family, tmp_path)
    shutil.rmtree(copy.path / "at20-full_batch-s0")
    text = _text(fork_family_report(copy, tmp_path / "r.html"))
    left = text[text.index('id="left-out"'):]
    assert "at20-full_batch-s0" in left[:left.index("</div>")] and "not started" in left
    assert "1 unfinished" in text


def test_a_missing_parent_is_stated_and_the_forks_still_drawn(family, tmp_path):
    parent = Path(family.design["parent"])
    away = parent.with_name("parent-moved")
    os.rename(parent, away)
    try:
        data = read_family(family)
        path = fork_family_report(family, tmp_path / "orphan.html", data=data)
    finally:
        os.rename(away, parent)
    assert data.parent is None and set(data.table["status"]) == {"done"}
    assert len(data.curves["run"].unique()) == 10 and math.isclose(data.log_k, math.log(4))
    text = _text(path)
    assert f"{parent}: missing" in text and "only the forks are drawn" in text
    assert 'id="fig-curves"' in text and 'id="fig-escapes"' in text
    assert text.count("<td>>= 20</td>") == 12  # the censored medians (the mechanism table, shown too, quotes ">= 20x")


def test_gamma_not_measured_is_a_sentence(family, tmp_path):
    data = read_family(family)
    data.family = ForkFamily(family.path, {**family.design, "gamma_every": 0})
    data.table = data.table.assign(gamma=math.nan)
    text = _text(fork_family_report(data.family, tmp_path / "g.html", data=data))
    assert 'id="fig-gamma"' not in text
    assert "Gamma was not measured" in text and "--gamma-every" in text


def test_interp_ls_lists_the_family_as_one_line(family, tmp_path, capsys):
    root = family.path.parent
    capsys.readouterr()
    assert main(["ls", str(root)]) == 0
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if x.startswith("family ")]
    assert "fork family: 10/10 forks done" in line and str(root / "parent") in line
    assert main(["ls", str(family.path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    (row,) = [r for r in rows if r.get("kind") == "fork family"]
    assert row["forks"] == 10 and row["done"] == 10
    assert len([r for r in rows if "kind" not in r]) == 10  # and each fork, a run, below it
    copy = _copy(family, tmp_path)
    _damage(copy, "at20-minibatch-s0")
    assert main(["ls", str(tmp_path)]) == 1  # the damaged fork is named (issue 30, case 22)
    listed = capsys.readouterr()
    assert "fork family: 9/10 forks done, 1 damaged" in listed.out and "at20-minibatch-s0" in listed.err


def test_interp_ls_of_a_family_never_loads_torch(family):
    loaded = model_code_loaded([["ls", str(family.path.parent)]])  # what it prints: test_interp_ls_lists_the_family_as_one_line
    assert not [m for m in loaded if m.split(".")[0] == "torch"], loaded


def test_the_family_report_loads_no_model_code(family, tmp_path):
    """The family report reads its forks' logs (issue 34): neither torch nor TransformerLens nor transformers."""
    out = tmp_path / "family.html"
    loaded = model_code_loaded([["report", str(family.path), "--out", str(out)]])
    assert not {m.split(".")[0] for m in loaded} & {"torch", "transformer_lens", "transformers"}, loaded
    assert out.stat().st_size > 0


def test_the_family_shows_itself_in_a_notebook(family):
    page = family._repr_html_()
    assert str(family.parent.path) in page and "20, 40" in page and "10: 10 done" in page
    assert "minibatch" in page and "v_only_noise:s=0.5" in page and "20 steps" in page
    assert page.count("<tr>") >= 10 and "escape_half" in page
    assert repr(family).startswith("ForkFamily(") and "\n" not in repr(family)
    comparison = compare_forks(family.table(), n_boot=200)
    assert repr(comparison).startswith("ForkComparison(") and "<pre>" in comparison._repr_html_()
