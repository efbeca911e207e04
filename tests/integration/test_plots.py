"""Figures and the timeline: each figure draws exactly the table it is given, on labelled axes."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from interp.analysis import groups, sensitivity
from interp.analysis.common import segment_names
from interp.analysis.suite import run_suite
from interp.errors import InterpError
from interp.runs import Run
from interp.train import train
from interp.transition import rise_onset
from tests.helpers import copy_run, small_spec

from interp import plots
from interp.timelines import Timeline, head_onsets, timeline


@pytest.fixture(scope="module")
def run(snapping_run, tmp_path_factory) -> Run:
    """The session's snapping run (tests/conftest.py), copied: this module's suite caches into it."""
    run = Run.open(copy_run(snapping_run, tmp_path_factory.mktemp("plots") / "run"))
    assert run.metrics["loss_cand"].min() < 0.5 * run.log_k  # the figures need a transition
    return run


@pytest.fixture(scope="module")
def suite(run):
    # the analyses these figures draw (the decoding ones have their own tests: tests/unit/test_probes.py)
    return run_suite(run, only=("sensitivity", "attention", "groups", "ablation", "patching", "usage", "trajectory"),
                     progress=False)


@pytest.fixture(scope="module")
def tl(run, suite) -> Timeline:
    return timeline(run, sens=suite.tables["sensitivity"], usage=suite.tables["usage"], with_probes=False)


def _shapes(fig, name):
    return [s for s in fig.layout.shapes if s.name == name]


def test_loss_curves(run, tl):
    fig = plots.loss_curves(run.metrics, run.log_k, tau=tl.tau)
    assert [t.name for t in fig.data] == ["full loss", "first-token loss", "candidate loss"]
    np.testing.assert_array_equal(fig.data[2].x, run.metrics["step"])
    np.testing.assert_allclose(fig.data[2].y, run.metrics["loss_cand"])
    assert fig.layout.xaxis.title.text == "step (optimizer steps)"
    assert fig.layout.yaxis.title.text == "loss (nats)"
    (log_k,) = _shapes(fig, "log K")
    assert log_k.y0 == log_k.y1 == pytest.approx(run.log_k) and log_k.line.dash == "dash"
    (tau,) = _shapes(fig, "tau")
    assert tau.x0 == tau.x1 == tl.tau
    assert not _shapes(plots.loss_curves(run.metrics, run.log_k), "tau")  # no tau given, no line


def test_shuffle_gap(run, tl):
    fig = plots.shuffle_gap(run.metrics, tau=tl.tau)
    assert [t.name for t in fig.data] == ["shuffle gap (first token)", "shuffle gap (full target)"]
    np.testing.assert_allclose(fig.data[0].y, run.metrics["shuffle_gap"])
    np.testing.assert_allclose(fig.data[1].y, run.metrics["shuffle_gap_full"])
    assert "nats" in fig.layout.yaxis.title.text and fig.layout.xaxis.title.text == "step (optimizer steps)"
    assert [s.x0 for s in _shapes(fig, "tau")] == [tl.tau]


def test_sensitivity_heatmap_uses_real_steps_and_orders_heads(suite, tl):
    sens = suite.tables["sensitivity"]
    fig = plots.sensitivity_heatmap(sens, "z_share", tau=tl.tau, onsets=tl.onsets)
    heat, onset = fig.data
    assert list(heat.y) == ["L0H0", "L0H1", "L1H0", "L1H1"]
    steps = sorted(sens["step"].unique())
    assert list(heat.x) == steps and len(set(np.diff(steps))) > 1  # unevenly spaced, drawn as such
    row = sens[sens["head_name"] == "L1H0"].sort_values("step")["z_share"].to_numpy()
    np.testing.assert_allclose(np.asarray(heat.z)[2], row)
    have = tl.onsets.dropna(subset=["onset"])
    assert onset.name == "onset" and list(onset.x) == list(have["onset"]) and list(onset.y) == list(have["head_name"])
    assert "z-share" in heat.colorbar.title.text and fig.layout.yaxis.autorange == "reversed"
    assert fig.layout.xaxis.title.text == "step (optimizer steps)"
    other = plots.sensitivity_heatmap(sens, "attn_to_z")
    assert "attention to z" in other.data[0].colorbar.title.text and len(other.data) == 1


def test_attention_evolution_has_one_frame_per_step(run, suite):
    patterns = suite.tables["attention"]
    steps = sorted(int(s) for s in patterns["step"].unique())
    labels = segment_names(run.task)
    fig = plots.attention_evolution(patterns, labels=labels)
    assert [t.name for t in fig.data] == ["L0H0", "L0H1", "L1H0", "L1H1"]
    assert len(fig.frames) == len(steps) == len(fig.layout.sliders[0].steps)
    assert [f.name for f in fig.frames] == [str(s) for s in steps]
    assert [s.label for s in fig.layout.sliders[0].steps] == [str(s) for s in steps]
    frame = fig.frames[-1].data[3]  # L1H1 at the last step
    want = patterns[(patterns["step"] == steps[-1]) & (patterns["head_name"] == "L1H1")]
    z = np.asarray(frame.z)
    dec = run.task.layout.decision_pos
    row = want[want["query"] == dec].sort_values("key")["weight"].to_numpy()
    np.testing.assert_allclose(z[dec, : dec + 1], row[: dec + 1])
    assert np.isnan(z[dec, dec + 1 :]).all()  # causal: nothing above the diagonal
    assert f"{dec} {labels[dec]}" in fig.layout.xaxis.ticktext
    assert fig.layout.xaxis4.title.text == "key position" and fig.layout.yaxis.title.text == "query position"
    assert plots.attention_evolution(patterns, step=steps[2]).layout.sliders[0].active == 2
    with pytest.raises(InterpError, match="not in the table"):
        plots.attention_evolution(patterns, step=steps[-1] + 1)


def test_attention_segments(run, suite, tl):
    seg = suite.tables["attention_segments"]
    fig = plots.attention_segments(seg, tau=tl.tau)
    names = list(run.task.layout.segments)
    assert len(fig.data) == 4 * len(names)  # 4 heads, one line per segment
    assert [t.name for t in fig.data[: len(names)]] == names
    assert sum(bool(t.showlegend) for t in fig.data) == len(names)  # one legend entry per segment
    assert len(_shapes(fig, "tau")) == 4 and fig.layout.yaxis.title.text == "attention mass"
    assert fig.layout.xaxis3.title.text == "step (optimizer steps)"


def test_ablation_heatmaps_use_per_head_rows(suite):
    abl = suite.tables["ablation"]
    assert set(abl["method"]) == {"zero", "mean", "resample"}
    fig = plots.ablation_heatmaps(abl)  # zero ablation by default
    assert [t.name for t in fig.data] == [f"{lab} (step {s})" for s, lab in
                                          abl[["step", "label"]].drop_duplicates().itertuples(index=False)]
    mid = abl[(abl["label"] == "mid") & abl["head"].notna() & (abl["method"] == "zero")]
    z = np.asarray(fig.data[1].z)
    assert z.shape == (2, 2)
    for r in mid.itertuples():
        assert z[r.layer, r.head] == pytest.approx(r.delta_loss_cand)
    assert fig.layout.coloraxis.colorbar.title.text == "Δ candidate loss (nats)"
    acc = plots.ablation_heatmaps(abl, metric="delta_acc_cand")
    assert "accuracy" in acc.layout.coloraxis.colorbar.title.text
    with pytest.raises(InterpError, match="lacks the column"):
        plots.ablation_heatmaps(abl, metric="nope")
    resample = plots.ablation_heatmaps(abl, method="resample")
    row = abl[(abl["label"] == "mid") & (abl["method"] == "resample") & (abl["component"] == "L0H0")].iloc[0]
    assert np.asarray(resample.data[1].z)[0, 0] == pytest.approx(row.delta_loss_cand)
    noted = plots.ablation_heatmaps(abl, notes=["post (2τ = 1800) lies beyond the run (last step 1350)"])
    assert any("beyond the run" in a.text for a in noted.layout.annotations if a.name == "notes")


def test_patching_heatmaps_say_what_they_show(suite):
    res, heads = suite.tables["patching_residual"], suite.tables["patching_heads"]
    fig = plots.patching_heatmaps(res, heads)
    assert [t.name for t in fig.data] == ["residual", "heads by position", "heads all positions"]
    n_pos = res["position"].nunique()
    assert np.asarray(fig.data[0].z).shape == (2, n_pos) and np.asarray(fig.data[1].z).shape == (4, n_pos)
    allpos = heads[heads["position"].isna()].sort_values(["layer", "head"])
    assert res["normalized"].notna().any()  # mid-transition: clean and corrupt differ
    np.testing.assert_allclose(np.asarray(fig.data[2].z)[:, 0], allpos["normalized"])
    assert "normalised" in fig.layout.coloraxis.colorbar.title.text
    # on the plateau clean ~ corrupt and `normalized` is NaN: the raw logit difference is shown
    raw = plots.patching_heatmaps(res.assign(normalized=np.nan), heads.assign(normalized=np.nan))
    np.testing.assert_allclose(np.asarray(raw.data[2].z)[:, 0], allpos["patched_ld"])
    assert "logit diff" in raw.layout.coloraxis.colorbar.title.text
    assert "nats" in raw.layout.coloraxis.colorbar.title.text


def test_group_histograms_and_share(suite, tl):
    acc = suite.tables["groups"]
    fractions = (0.5, 1.0, 2.0)
    fig = plots.group_histograms(acc, tl.tau, fractions=fractions)
    share = groups.share_above(acc, tl.tau, fractions=fractions)
    drawn = sorted(set(share.loc[~share["beyond"], "step"]))
    assert [t.name for t in fig.data] == [f"step {s}" for s in drawn]
    for trace, s in zip(fig.data, drawn):
        np.testing.assert_allclose(sorted(trace.x), sorted(acc.loc[acc["step"] == s, "acc_cand"]))
    every = groups.share_above(acc, tl.tau)
    assert len(plots.group_histograms(acc, tl.tau).data) == every.loc[~every["beyond"], "step"].nunique()
    assert fig.layout.yaxis.title.text == "groups (count)"
    line = plots.groups_share(acc, tau=tl.tau)
    want = (acc["acc_cand"] >= 0.8).groupby(acc["step"]).mean()
    np.testing.assert_allclose(line.data[0].y, want.to_numpy())
    assert [s.x0 for s in _shapes(line, "tau")] == [tl.tau]
    assert "fraction" in line.layout.yaxis.title.text
    with pytest.raises(InterpError, match="need tau"):
        plots.group_histograms(acc, None)


def test_timeline_matches_the_suite_findings(run, suite, tl):
    sens = suite.tables["sensitivity"]
    f = suite.findings
    assert tl.routing_head == f["routing_head"] == sensitivity.routing_head(sens)
    assert tl.routing_onset == f["carried_share_onset"] and tl.lead == f["carried_share_lead"] and tl.tau == f["tau"]
    assert list(tl.onsets.columns) == ["head_name", "layer", "head", "threshold", "onset"]
    assert str(tl.onsets["onset"].dtype) == "Int64" and list(tl.onsets["head_name"]) == ["L0H0", "L0H1", "L1H0", "L1H1"]
    for r in tl.onsets.itertuples():
        series = sens[sens["head_name"] == r.head_name].sort_values("step")
        expect = rise_onset(series["step"], series["z_share"])
        assert (pd.isna(r.onset) and expect is None) or r.onset == expect
    if tl.routing_onset is not None:
        assert tl.lead == pytest.approx((tl.tau - tl.routing_onset) / tl.tau)


def test_timeline_figure_marks_onsets_and_tau(tl):
    fig = plots.timeline_figure(tl)
    head = tl.routing_head
    assert [t.name for t in fig.data] == ["full loss", "first-token loss", "candidate loss",
                                          "shuffle gap (first token)", "shuffle gap (full target)", "z_share",
                                          "onset", f"{head} resample-ablation Δ Lc", f"{head} patching: restored fraction",
                                          "direction consistency (cos of consecutive displacements)",
                                          "dissipation Q(t) = Σ lr‖g_B‖²"]
    cos = next(t for t in fig.data if t.name.startswith("direction consistency"))
    whole = tl.trajectory[tl.trajectory["component"] == "all"].dropna(subset=["cosine"]).sort_values("step")
    assert list(cos.x) == list(whole["step"]) and list(cos.y) == pytest.approx(list(whole["cosine"]))
    q = next(t for t in fig.data if t.name.startswith("dissipation"))
    assert list(q.y) == pytest.approx(list(tl.metrics.dropna(subset=["dissipation"])["dissipation"]))
    have = tl.onsets.dropna(subset=["onset"])
    assert len(have)  # the test is vacuous otherwise
    markers = {s.name[len("onset "):]: s for s in fig.layout.shapes if (s.name or "").startswith("onset ")}
    assert set(markers) == set(have["head_name"])
    for r in have.itertuples():
        assert markers[r.head_name].x0 == markers[r.head_name].x1 == r.onset
        assert markers[r.head_name].yref == "paper"  # across all panels
    diamonds = fig.data[6]
    assert dict(zip(diamonds.y, diamonds.x)) == dict(zip(have["head_name"], have["onset"]))
    labels = " ".join(a.text for a in fig.layout.annotations if a.name == "onset label")
    assert all(h in labels for h in have["head_name"])
    events = {s.name[len("event "):]: s.x0 for s in fig.layout.shapes if (s.name or "").startswith("event ")}
    for name in ("carried_attn", "carried_share", "used_ablation", "used_patching"):
        assert events.get(name) == tl.event(name)  # absent exactly when the event never happened
    (tau,) = _shapes(fig, "tau")
    assert tau.x0 == tl.tau
    (log_k,) = _shapes(fig, "log K")
    assert log_k.y0 == pytest.approx(tl.log_k)
    assert tl.routing_head in fig.layout.title.text and "lead" in fig.layout.title.text
    assert fig.layout.xaxis5.title.text == "step (optimizer steps)" and fig.layout.yaxis.title.text == "loss (nats)"
    assert list(fig.data[5].y) == list(tl.onsets["head_name"])
    np.testing.assert_allclose(fig.data[7].y, tl.usage.sort_values("step")["resample_delta_loss_cand"])


def test_group_histograms_never_draw_one_checkpoint_twice():
    acc = pd.DataFrame({"step": [0, 0, 10, 10, 20, 20], "group_id": [0, 1] * 3, "acc_cand": [0, 0, 1, 0, 1, 1]})
    share = groups.share_above(acc, tau=10, fractions=(0.9, 1.0, 1.8, 3.0))
    assert share["beyond"].tolist() == [False, False, False, True]  # 3 tau = 30 > last step 20
    assert pd.isna(share["step"].iloc[3])
    fig = plots.group_histograms(acc, tau=10, fractions=(0.9, 1.0, 1.8, 3.0))
    titles = [a.text for a in fig.layout.annotations if a.name != "beyond"]
    assert len(fig.data) == 2  # 0.9 tau and 1 tau both land on step 10: one panel
    assert titles[0].startswith("0.9 τ = 1 τ → step 10") and titles[1].startswith("1.8 τ → step 20")
    (note,) = [a.text for a in fig.layout.annotations if a.name == "beyond"]
    assert note == "3 τ = 30: beyond the run (last step 20)"


def test_onsets_with_other_fraction(suite):
    sens = suite.tables["sensitivity"]
    strict = head_onsets(sens, fraction=0.9, m=1)
    loose = head_onsets(sens, fraction=0.1, m=1)
    for a, b in zip(loose["onset"], strict["onset"]):
        assert pd.isna(b) or a <= b  # a higher bar is crossed no earlier


def test_timeline_needs_three_checkpoints(tmp_path):
    empty = Run.create(tmp_path / "empty", small_spec())
    with pytest.raises(InterpError, match=r"at least 3 saved checkpoints; .*empty has 0"):
        timeline(empty)
    short = Run.create(tmp_path / "short", small_spec(steps=1))
    train(short, progress=False)
    assert len(short.steps) == 2
    with pytest.raises(InterpError, match=r"at least 3 saved checkpoints; .*short has 2"):
        timeline(short)


def test_timeline_needs_the_candidate_loss(tmp_path):
    run = Run.create(tmp_path / "rev", small_spec(direction="a_to_b", steps=20, checkpoint_every=10))
    train(run, progress=False)
    with pytest.raises(InterpError, match="candidate loss"):
        timeline(run)


def test_timeline_rejects_an_unknown_column(run, suite):
    with pytest.raises(InterpError, match="unknown sensitivity column 'nope'"):
        timeline(run, sens=suite.tables["sensitivity"], column="nope")


@pytest.mark.slow
def test_timeline_does_not_import_plotly():
    code = "import sys, interp.timelines; assert 'plotly' not in sys.modules, 'plotly imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_interp_timeline_is_the_function(run, suite):
    """`interp.timeline` stays a function after `interp.timelines` is imported (no rebinding)."""
    import interp

    assert "interp.timelines" in sys.modules
    tl = interp.timeline(run, sens=suite.tables["sensitivity"])
    assert isinstance(tl, Timeline) and tl.routing_head == timeline(run, sens=suite.tables["sensitivity"]).routing_head


def _hand_timeline(onsets: dict[str, int], tau: int, last: int = 1650):
    """A timeline made by hand (the figure reads it by its attributes): 4 heads, steps 0..last."""
    from types import SimpleNamespace

    steps = list(range(0, last + 1, 25))
    metrics = pd.DataFrame({"step": steps, "loss": 1.0, "loss_first": 1.0, "loss_cand": 1.0, "shuffle_gap": 0.0})
    names = ["L0H0", "L0H1", "L1H0", "L1H1"]
    sens = pd.DataFrame([{"step": s, "layer": int(h[1]), "head": int(h[3]), "head_name": h, "z_share": 0.1}
                         for s in steps for h in names])
    table = pd.DataFrame({"head_name": names, "onset": pd.array([onsets.get(h) for h in names], dtype="Int64")})
    routing = max(onsets, key=onsets.get)
    return SimpleNamespace(metrics=metrics, sensitivity=sens, column="z_share", onsets=table, routing_head=routing,
                           log_k=2.3, events=pd.DataFrame(), tau=tau, routing_onset=onsets[routing], lead=0.5,
                           name="hand", usage=None, trajectory=None)


def test_timeline_labels_of_close_onsets_do_not_overlap():
    """Onsets a few steps apart (as on the demo: three within 100 of 1650 steps) and tau among them:
    labels closer than 12% of the axis range sit on different rows, and the rows fit under the title."""
    tl = _hand_timeline({"L1H1": 250, "L1H0": 275, "L0H1": 325, "L0H0": 900}, tau=925)
    fig = plots.timeline_figure(tl)
    labels = [a for a in fig.layout.annotations if a.name in ("onset label", "tau label")]
    assert len(labels) == 5 and {a.text for a in labels} >= {"L1H1 onset", "L0H0 onset", "τ = 925"}
    for i, a in enumerate(labels):
        assert a.yref == "paper" and a.y == 1.0 and a.yanchor == "bottom" and str(a.x) in a.hovertext
        for b in labels[i + 1:]:
            if abs(a.x - b.x) < 0.12 * 1650:
                assert (a.yshift or 0) != (b.yshift or 0), (a.text, b.text)
    rows = {(a.yshift or 0) // 15 for a in labels}
    assert max(rows) >= 1 and fig.layout.margin.t >= 110 + 15 * max(0, max(rows) - 3)
    # far apart, they stay on the lowest row
    apart = plots.timeline_figure(_hand_timeline({"L1H1": 100, "L0H0": 800}, tau=1400))
    assert {a.yshift or 0 for a in apart.layout.annotations if a.name in ("onset label", "tau label")} == {0}


def test_label_rows_leave_room_for_every_label():
    from interp.plots.timeline import label_rows

    labels = [(x, "L1H1 onset", 10) for x in (200, 210, 220, 230, 240)]
    assert sorted(label_rows(labels, span=1650.0)) == [0, 1, 2, 3, 4]  # all close: one row each
    assert label_rows([(0, "a", 10), (1000, "b", 10)], span=1650.0) == [0, 0]


def _note_below_the_axis_title(fig, name):
    """The note `name` hangs from the plot area's bottom edge by a fixed number of pixels (below the tick
    labels and the x-axis title, about 50 px at any figure height), inside a bottom margin that holds it."""
    (note,) = [a for a in fig.layout.annotations if a.name == name]
    assert note.yref == "paper" and note.y == 0 and note.yanchor == "top"
    assert note.yshift <= -55 and fig.layout.margin.b >= -note.yshift + 18
    return note.text


def test_beyond_notes_do_not_overlap_the_axis_titles():
    acc = pd.DataFrame({"step": [0, 0, 10, 10, 20, 20], "group_id": [0, 1] * 3, "acc_cand": [0, 0, 1, 0, 1, 1]})
    fig = plots.group_histograms(acc, tau=10, fractions=(1.0, 3.0), last_step=25, last_evaluated=30)
    # named with the run's last step as the summary calls it, and the last evaluation where that differs
    assert _note_below_the_axis_title(fig, "beyond") == "3 τ = 30: beyond the run (last saved checkpoint 25; last evaluation 30)"
    fig = plots.group_histograms(acc, tau=10, fractions=(1.0, 2.3, 3.0), last_step=25, last_evaluated=25)
    assert _note_below_the_axis_title(fig, "beyond") == ("2.3 τ = 23: after the last analysed step 20; "
                                                          "3 τ = 30: beyond the run (last step 25)")
    abl = pd.DataFrame([{"step": s, "label": lab, "method": "zero", "layer": l, "head": h, "delta_loss_cand": 0.1 * h}
                        for s, lab in ((100, "pre"), (200, "mid")) for l in range(2) for h in range(4)])
    note = "post (2τ = 400) lies beyond the run (last step 300)"
    assert _note_below_the_axis_title(plots.ablation_heatmaps(abl, notes=[note]), "notes") == note
