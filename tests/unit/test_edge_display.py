"""The edges analysis outside its report sections (docs/edges.md, "Interfaces"): the timeline's edge panel, read from
the cache only (never computed), with the command named when it is missing; and the notebook card of `edges.view`."""

from __future__ import annotations

import dataclasses
import shutil

import pandas as pd
import pytest

from interp.analysis import edges
from interp.errors import InterpError
from interp.runs import CACHE_DIR, Run
from interp.timelines import timeline
from tests.helpers import copy_run

OPTIONS = {"n_pairs": 8, "edge_method": "eap"}  # not the defaults: the cache is read under whatever was computed
CARRIED = "edge onset (carried: |score| rises)"


@pytest.fixture(scope="module")
def runs(tiny_run, tmp_path_factory):
    """(a copy of the tiny run with the edges cached at every checkpoint, their tables, a copy without them)."""
    from interp.analysis.suite import run_suite

    root = tmp_path_factory.mktemp("edge-display")
    edged = Run.open(copy_run(tiny_run(), root / "edged", cache=False))
    tables = run_suite(edged, only="edges", steps="all", options=OPTIONS, progress=False).tables
    plain = copy_run(edged.path, root / "plain")
    shutil.rmtree(plain / CACHE_DIR / "edges")
    return edged, tables, Run.open(plain)


def _light(run: Run, **kwargs):
    return timeline(run, with_usage=False, with_trajectory=False, **kwargs)


def test_the_timeline_carries_the_cached_edge_onsets_and_draws_them_on_the_step_axis(runs):
    from interp.plots import timeline_figure

    edged, tables, _ = runs
    tl = _light(edged)
    assert tl.edges_note == ""
    pd.testing.assert_frame_equal(tl.edge_onsets, edges.onsets(tables["edges"]))
    fig = timeline_figure(dataclasses.replace(tl, tau=15))  # the tiny run has no tau: one is planted to see it drawn
    shown = edges.first_edges(tl.edge_onsets, dated=False)  # the timeline's rows: used onsets too
    shown = shown[shown["carried_onset"].notna() | shown["used_onset"].notna()]
    assert len(shown) >= 2
    carried = next(t for t in fig.data if t.name == CARRIED)
    have = shown[shown["carried_onset"].notna()]
    assert list(carried.y) == list(have["edge"]) and list(carried.x) == [float(s) for s in have["carried_onset"]]
    axis = fig.layout["yaxis" + carried.yaxis[1:]]
    assert list(axis.categoryarray) == list(shown["edge"]) and axis.title.text == "edge onsets"
    heads = next(t for t in fig.data if t.type == "heatmap")  # the heads' onsets and the edges share one step axis
    assert fig.layout["xaxis" + carried.xaxis[1:]].matches == fig.layout["xaxis" + heads.xaxis[1:]].matches
    tau = [s for s in fig.layout.shapes if s.name == "tau"]
    assert len(tau) == 1 and (tau[0].x0, tau[0].yref, tau[0].y0, tau[0].y1) == (15, "paper", 0, 1)


def test_without_cached_edges_the_timeline_names_the_command_and_draws_no_panel(runs):
    from interp.plots import timeline_figure

    edged, _, plain = runs
    tl = _light(plain)
    assert tl.edge_onsets is None
    assert tl.edges_note == f"edges not computed yet: interp analyze {plain.path} --only edges adds them to the timeline"
    fig = timeline_figure(tl)
    assert not [t for t in fig.data if str(t.name).startswith("edge onset")]
    assert fig.to_plotly_json() == timeline_figure(_light(plain, with_edges=False)).to_plotly_json()
    assert "--only edges" in tl._repr_html_()
    given = _light(edged, edges=pd.DataFrame())  # the report's way: it read the cache already, and found nothing
    assert given.edge_onsets is None and "--only edges" in given.edges_note
    off = _light(edged, cache=False)  # --no-cache: the cached edges are not read either, and the note says why
    assert off.edge_onsets is None and off.edges_note.startswith("edges not read (the cache is off)")


def test_the_timeline_page_shows_the_panel_or_the_command(runs, tmp_path):
    from interp.report import write_timeline

    edged, _, plain = runs
    with_edges = write_timeline(edged, tmp_path / "edged.html").read_text()
    assert CARRIED in with_edges and 'id="edges-note"' not in with_edges
    without = write_timeline(plain, tmp_path / "plain.html").read_text()
    assert CARRIED not in without and 'id="edges-note"' in without and f"{plain.path} --only edges" in without


def test_the_notebook_card_shows_the_circuit_at_the_chosen_steps_the_first_edges_and_the_raster(runs):
    edged, tables, plain = runs
    ec = edges.view(edged)
    assert repr(ec) == f"EdgeCircuits('edged', eap, {tables['edges']['edge'].nunique()} edges at 8 steps, tau None)"
    pd.testing.assert_frame_equal(ec.edges, edges.view(edged, tables).edges)
    last = ec.steps["last"]
    circuit = edges.circuits(tables["edges_curve"]).set_index("step").loc[last]
    top = ec.at(last)
    assert len(top) == circuit["size"] and (top["rank"].diff().dropna() > 0).all()
    page = ec._repr_html_()
    assert "<h4>Edges of edged</h4>" in page and "eap, 8 pairs" in page and "interp-figure" in page
    assert f"{int(circuit['size'])} of {int(circuit['n_edges_total'])} edges" in page
    assert f"{circuit['faithfulness']:.2f}" in page
    assert top["edge"].iloc[0].replace(">", "&gt;") in page  # the first of its top edges
    first = edges.first_edges(ec.onsets)["edge"]
    assert all(e.replace(">", "&gt;") in page for e in first)
    with pytest.raises(InterpError, match="--only edges"):
        edges.view(plain)


def test_the_circuit_is_shown_at_tau_over_4_tau_the_snap_and_the_last_step():
    assert edges.chosen_steps([0, 100, 200, 400, 800], tau=390, snap=420) == {"τ/4": 100, "τ/snap": 400, "last": 800}
    assert edges.chosen_steps([10, 30, 20], tau=None, snap=None) == {"last": 30}
