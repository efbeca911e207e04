"""A run's transition facts: derived once per version of its metrics log, equal to the functions' values."""

import json
import math
import os
import shutil
import time

import numpy as np
import pytest

import interp.metrics_log as metrics_log
import interp.transition as transition
from interp.runs import METRICS_FILE, RUN_FILE, Run
from interp.transition import (facts, gap_lead, plateau_height, plateau_span, snap_step, tau, tau_half, tau_window,
                               window_bounds)

from tests.helpers import DEMO


def _copy(tmp_path) -> Run:
    """run.json and metrics.jsonl of the demo run: all the facts read."""
    folder = tmp_path / "run"
    folder.mkdir()
    for name in (RUN_FILE, METRICS_FILE):
        shutil.copy(DEMO / name, folder / name)
    return Run.open(folder)


def _age(path, seconds: float = 10.0) -> None:
    """Date the file `seconds` back: out of the window where a same-tick rewrite could go unseen."""
    then = time.time_ns() - int(seconds * 1e9)
    os.utime(path, ns=(then, then))


def _by_the_functions(run: Run) -> dict:
    """The facts as each function gives them on the log (what the summary and tau computed before)."""
    series = run.metric_series("loss_cand", "shuffle_gap")
    rows = [(s, lc, dz) for s, lc, dz in zip(series["step"], series["loss_cand"], series["shuffle_gap"]) if lc == lc]
    s, lc, dz = [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]
    lk = run.log_k
    bounds = window_bounds(s, lc, lk)
    span = plateau_span(s, lc, dz, lk) if all(v == v for v in dz) else None
    return {"tau_half": tau_half(s, lc, lk), "tau_window": tau_window(s, lc, lk), "snap_step": snap_step(s, lc, lk),
            "window": bounds, "plateau_height": plateau_height(s, lc, lk), "plateau_span": span,
            "gap_onset": gap_lead(s, lc, dz, lk)["gap_onset"], "gap_lead": gap_lead(s, lc, dz, lk)["gap_lead"],
            "gap_lead_snap": gap_lead(s, lc, dz, lk, "snap")["gap_lead"],
            "gap_lead_100": gap_lead(s, lc, dz, lk, 100)}


def _as_facts(run: Run) -> dict:
    f = facts(run)
    span = None if f.plateau_start is None else (f.plateau_start, f.plateau_end)
    return {"tau_half": f.tau_half, "tau_window": f.tau_window, "snap_step": f.snap_step, "window": f.window,
            "plateau_height": f.plateau_height, "plateau_span": span, "gap_onset": f.gap_onset, "gap_lead": f.gap_lead,
            "gap_lead_snap": f.gap_lead_snap, "gap_lead_100": f.gap_lead_at(100)}


@pytest.fixture
def counted(monkeypatch):
    """Counts of log reads (opens), parses and derivations, from an empty memory."""
    metrics_log.forget()
    transition._FACTS.clear()
    counts = {"open": 0, "parse": 0, "derive": 0}

    def wrap(module, name, key, fn):
        def counting(*a, **k):
            counts[key] += 1
            return fn(*a, **k)
        monkeypatch.setattr(module, name, counting, raising=False)

    wrap(metrics_log, "open", "open", open)  # shadows the builtin in interp.metrics_log only
    wrap(metrics_log, "parse", "parse", metrics_log.parse)
    wrap(transition, "derive", "derive", transition.derive)
    yield counts
    metrics_log.forget()
    transition._FACTS.clear()


def test_facts_equal_the_functions_values(tmp_path, counted):
    run = _copy(tmp_path)
    assert _as_facts(run) == _by_the_functions(run)  # exact: the same arithmetic on the same numbers
    assert (tau(run), tau(run, kind="window")) == (facts(run).tau_half, facts(run).tau_window)
    assert facts(run).tau_half is not None and facts(run).window is not None  # the demo run snaps


def test_facts_are_derived_once_per_log_version(tmp_path, counted):
    run = _copy(tmp_path)
    log = run.path / METRICS_FILE
    _age(log)
    first = facts(run)
    assert counted == {"open": 1, "parse": 1, "derive": 1}
    # another Run on the same folder, the summary, tau and the rows: no log read, nothing derived
    again = Run.open(run.path)
    assert facts(again) is first and tau(again) == first.tau_half
    again.metric_series("loss_cand")
    assert counted == {"open": 1, "parse": 1, "derive": 1}
    # a line appended (training goes on): parsed and derived afresh
    last = again.metric_rows()[-1]
    with open(log, "a") as fh:
        fh.write(json.dumps({**last, "step": last["step"] + 100, "loss_cand": 0.0, "shuffle_gap": 5.0}) + "\n")
    _age(log)
    fresh = facts(Run.open(run.path))
    assert counted == {"open": 2, "parse": 2, "derive": 2}
    assert fresh is not first and fresh.steps[-1] == last["step"] + 100
    assert _as_facts(run) == _by_the_functions(run)
    # rewritten whole (a resume's atomic replace) to the first content: fresh again
    rows = again.metric_rows()[:-1]
    tmp = log.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    os.replace(tmp, log)
    assert facts(run) == first and counted["parse"] == 3 and counted["derive"] == 3


def test_a_young_log_is_read_again_but_parsed_once(tmp_path, counted):
    """Within a timestamp tick a same-size rewrite keeps the version: young logs are compared by content."""
    run = _copy(tmp_path)
    facts(run)
    facts(run)
    assert counted["parse"] == 1 and counted["derive"] == 1 and counted["open"] == 2
    log = run.path / METRICS_FILE
    st = log.stat()
    text = log.read_text()
    assert '"step": 0,' in text, "the demo log's step-0 row is what this test changes in place"
    changed = text.replace('"step": 0,', '"step": 1,', 1)
    log.write_text(changed)  # the same size, in place
    os.utime(log, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert facts(run).steps[0] == 1 and counted["parse"] == 2


def test_a_log_without_candidate_loss_has_no_facts(tmp_path, counted):
    run = _copy(tmp_path)
    log = run.path / METRICS_FILE
    log.write_text("".join(json.dumps({"step": s, "loss_cand": None, "shuffle_gap": 0.1}) + "\n" for s in (0, 10)))
    f = facts(run)
    assert not f.has_cand and f.tau_half is None and f.window is None and f.gap_lead_at("snap")["gap_lead"] is None
    with pytest.raises(Exception, match="tau needs the candidate loss"):
        tau(run)
    log.unlink()
    assert not facts(run).has_cand and run.metric_rows() == []


def test_facts_on_gaps_in_the_log():
    """Missing candidate losses are skipped; a missing shuffle gap drops the plateau span only."""
    lk = math.log(5)
    steps = list(range(0, 1000, 50))
    lc = [lk * (1.0 if s < 400 else 0.01) for s in steps]
    dz = [0.0 if s < 300 else 1.0 for s in steps]
    lc[3], dz[5] = math.nan, None
    f = transition.derive(steps, lc, dz, lk)
    keep = [i for i in range(len(steps)) if i != 3]
    s, v = [steps[i] for i in keep], [lc[i] for i in keep]
    assert f.steps == tuple(s) and f.tau_half == tau_half(s, v, lk) == 400 and f.window == window_bounds(s, v, lk)
    assert f.plateau_start is None and f.gap_onset == 300 and f.gap_lead == pytest.approx(0.25)
    assert f.reached_from(500) == (500, 500, 950) and f.reached_from(2000) == (None, None, None)
    assert np.isclose(f.plateau_height, plateau_height(s, v, lk))
