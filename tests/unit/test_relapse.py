"""The relapse detection (`interp.forks.relapse`) on planted metrics logs: a solved run that falls back to
the marginal, held for a window, and the state a family forks from there (docs/forks.md, "Relapse")."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from interp.errors import InterpError
from interp.forks.relapse import DEFAULT_RELAPSE, detect, parse_relapse, relapse_at, relapse_shown, relapse_step

LOG_K = math.log(10)


class PlantedRun:
    """What the detection reads of a run: its metrics log (`metric_series`), log K, and for `relapse_at`
    its manifest (kept states), saved steps, resume state and fork block."""

    def __init__(self, rows: dict[int, dict], kept=(), saved=None, resume=None, fork=None):
        self.rows, self.log_k, self.path, self.fork = rows, LOG_K, "planted", fork
        self.steps = sorted(rows) if saved is None else list(saved)
        self._kept, self._resume = list(kept), resume

    def metric_series(self, *names):
        steps = sorted(self.rows)
        return {"step": steps, **{n: [self.rows[s].get(n, math.nan) for s in steps] for n in names}}

    def manifest(self):
        return {s: ({"state": {"file": f"states/{s}", "sha256": "x"}} if s in self._kept else {}) for s in self.steps}

    def load_resume(self):
        return None if self._resume is None else SimpleNamespace(step=self._resume)


def planted(lc_over_logk: dict[int, float], first: dict[int, float] | None = None, **kw) -> PlantedRun:
    rows = {s: {"loss_cand": v * LOG_K, **({"loss_first": first[s]} if first else {})} for s, v in lc_over_logk.items()}
    return PlantedRun(rows, **kw)


def series(run: PlantedRun, criterion):
    c = parse_relapse(criterion)
    s = run.metric_series("loss_cand", c.metric)
    return detect(s["step"], s["loss_cand"], s[c.metric], LOG_K, c)


# a run from scratch: the first plateau at the marginal (not a relapse), solved at 300, relapsed from 600
SCRATCH = {0: 1.0, 100: 1.0, 200: 0.95, 300: 0.01, 400: 0.01, 500: 0.3, 600: 0.95, 700: 0.97, 800: 0.99, 900: 1.0}


def test_the_first_plateau_is_no_relapse_and_a_held_return_is():
    run = planted(SCRATCH)
    assert series(run, "loss_cand>0.9logK,hold=200") == (300, 600)
    assert relapse_step(run, "loss_cand>0.9logK,hold=200") == 600
    assert relapse_step(run, "loss_cand>0.9logK,hold=300") == 600  # 600..900 all above, and 900 was evaluated
    assert relapse_step(run, "loss_cand>0.9logK,hold=400") is None  # would need an evaluation at 1000: not known


def test_a_spike_shorter_than_the_hold_is_not_a_relapse():
    spike = {0: 0.01, 50: 0.95, 100: 0.5, 150: 0.01, 200: 0.92, 250: 0.93, 300: 0.95, 350: 0.96}
    run = planted(spike)
    assert relapse_step(run, "loss_cand>0.9logK,hold=100") == 200  # 50 holds only until 100 (0.5): broken
    assert relapse_step(run, "loss_cand>0.9logK,hold=0") == 50  # no hold: the spike counts
    assert relapse_step(run, "loss_cand>0.9logK,hold=150") == 200
    assert relapse_step(run, "loss_cand>0.9logK,hold=200") is None


def test_never_solved_or_never_relapsed_is_none_with_a_reason():
    plateau = planted({s: 1.0 for s in range(0, 1000, 100)})
    assert series(plateau, None) == (None, None)
    (label, text), fields = relapse_shown(plateau)
    assert (label, fields["relapse_step"]) == ("relapse", None) and "never solved" in text
    stays = planted({0: 0.01, 100: 0.02, 200: 0.01})
    assert relapse_step(stays) is None
    text = relapse_shown(stays)[0][1]
    assert "did not relapse" in text and "solved (step 0)" in text


def test_an_absolute_threshold_on_the_full_vocabulary_first_token_loss():
    """The author's relapse: first-token CE back near log 36 (3.58 nats); loss_first > 3.0 held."""
    lc = {0: 0.01, 100: 0.01, 200: 0.98, 300: 0.99, 400: 1.0}
    first = {0: 0.05, 100: 0.04, 200: 2.9, 300: 3.4, 400: 3.5}
    run = planted(lc, first)
    assert relapse_step(run, "loss_first>3.0,hold=100") == 300
    assert relapse_step(run, "loss_cand>0.9logK,hold=100") == 200


def test_the_default_and_bad_criteria():
    assert parse_relapse(None) == parse_relapse(DEFAULT_RELAPSE)
    assert parse_relapse(None).op == ">" and parse_relapse(None).hold == 200
    for bad, fragment in (("loss_cand>>1", "--relapse"), ("nope>1", "unknown metric"), ("loss_cand>1,wait=3", "hold=")):
        with pytest.raises(InterpError, match=fragment):
            parse_relapse(bad)


def test_the_fork_step_is_the_state_nearest_at_or_after_the_relapse():
    crit = "loss_cand>0.9logK,hold=200"
    kept = planted(SCRATCH, kept=[0, 300, 500, 700, 900], fork={"parent": "p"})
    assert relapse_at(kept, crit) == 700  # detected at 600; the next kept state
    resume_only = planted(SCRATCH, kept=[0, 300], resume=900, fork={"parent": "p"})
    assert relapse_at(resume_only, crit) == 900  # the resume state at the last checkpoint
    plain = planted(SCRATCH, saved=[0, 300, 650, 900])
    assert relapse_at(plain, crit) == 650  # not a fork: a saved step, replayed
    bare_fork = planted(SCRATCH, kept=[0, 300], resume=300, fork={"parent": "p"})
    with pytest.raises(InterpError, match="relapsed at step 600.*--save-optimizer"):
        relapse_at(bare_fork, crit)
    with pytest.raises(InterpError, match="did not relapse"):
        relapse_at(planted({0: 0.01, 100: 0.01}), crit)


# solved at 300, relapsed from 600 (held through 800), re-solved from 900: only 600..899 is a relapsed state
RESOLVED = {**SCRATCH, 900: 0.02, 1000: 0.01}


def test_the_fork_step_lies_within_the_relapsed_stretch():
    crit = "loss_cand>0.9logK,hold=200"
    kept = planted(RESOLVED, kept=[0, 300, 700, 900, 1000], resume=1000, fork={"parent": "p"})
    assert relapse_at(kept, crit) == 700  # inside 600..899
    plain = planted(RESOLVED, kept=[1000], saved=[0, 300, 650, 900, 1000])
    assert relapse_at(plain, crit) == 650  # the kept state at 1000 re-solved: the saved step inside is replayed
    # the loss_first criterion's own metric bounds the stretch, not Lc
    first = {s: 3.5 if 600 <= s <= 900 else 0.1 for s in RESOLVED}
    late = planted(RESOLVED, first, kept=[900, 1000], fork={"parent": "p"})
    assert relapse_at(late, "loss_first>3.0,hold=200") == 900


def test_a_state_only_after_the_run_resolved_is_refused():
    crit = "loss_cand>0.9logK,hold=200"
    resume_only = planted(RESOLVED, kept=[0, 300], resume=1000, fork={"parent": "p"})
    with pytest.raises(InterpError) as err:
        relapse_at(resume_only, crit)
    text = str(err.value)
    assert "\n" not in text
    for fragment in ("relapsed at step 600", "no longer relapsed from step 900", "the resume state at step 1000",
                     "--save-optimizer", "--checkpoint-every", "600..899", "--at STEP"):
        assert fragment in text, text
    plain = planted(RESOLVED, saved=[0, 300, 900, 1000])
    with pytest.raises(InterpError, match="no longer relapsed from step 900.*a saved step, replayed at step 900"):
        relapse_at(plain, crit)
