"""Early stopping by the outcome rules (TrainSpec.stop_when_decided, interp.outcome) on small runs that train in
seconds: a stuck run and a diverging one stop where the rules decide and record why; a transitioned one is never
stopped before its transition is held; a non-finite loss is a decided divergence; the live decision equals the one
made after the fact from the log."""

from __future__ import annotations

import math

import torch

from interp.outcome import outcome_of
from interp.runs import Run
from interp.steps import minibatch_stepper
from interp.train import train
from tests.helpers import SNAPPING, small_spec


def _trained(tmp_path, name, **overrides):
    run = Run.create(tmp_path / name, small_spec(stop_when_decided=True, **overrides))
    return run, train(run, progress=False)


def test_stuck_run_stops_and_says_why(tmp_path):
    # z constant: nothing tells the targets apart, so the candidate loss cannot go below log K; this small model
    # approaches it slowly from above (1.16 log K at step 280), hence a wide plateau band
    run, result = _trained(tmp_path, "stuck", selector="constant", steps=1000, lr=3e-3, plateau_band=0.6,
                           stuck_hold=100, stuck_after=150)
    status = run.status
    assert status["outcome"] == "stuck" and status["decided"] and status["stopped_early"]
    assert result.last_step == status["decided_at"] < 1000
    assert status["decided_at"] >= 150 and "on the plateau" in status["outcome_reason"]
    judged = outcome_of(run)
    assert (judged.outcome, judged.decided_at, judged.stopped) == ("stuck", status["decided_at"], True)
    assert run.steps[-1] == result.last_step  # the step it stopped at is checkpointed


def test_diverging_run_stops(tmp_path):
    run, result = _trained(tmp_path, "div", steps=2000, lr=3.0, diverge_hold=30, diverge_after=20)
    status = run.status
    assert status["outcome"] == "diverged" and status["stopped_early"] and result.last_step < 2000
    rows = [r for r in run.metric_rows() if status["decided_at"] - 30 <= r["step"] <= status["decided_at"]]
    log_k = math.log(run.spec.task.k)
    assert all(r["loss_cand"] > 1.5 * log_k for r in rows)


def test_transition_is_held_before_stopping(tmp_path, snapping_run):
    run, result = _trained(tmp_path, "snap", **{**SNAPPING, "transition_hold": 40, "decided_tail": 20})
    status = run.status
    assert status["outcome"] == "transitioned"
    log_k = math.log(run.spec.task.k)
    rows = run.metric_rows()
    decided = status["decided_at"]
    since = next(r["step"] for r in rows if r["step"] <= decided and all(
        x["loss_cand"] < 0.3 * log_k for x in rows if r["step"] <= x["step"] <= decided))
    assert decided - since >= 40
    # the first row below the threshold is not where it stopped: the hold and then the tail came first
    first_below = next(r["step"] for r in rows if r["loss_cand"] < 0.3 * log_k)
    assert result.last_step == decided + 20 > first_below + 40
    # without stop_when_decided the same run trained on (the session's snapping run), and its outcome after the fact,
    # by the same rule, is the same decision
    plain = Run.open(snapping_run)
    assert plain.status["last_step"] == SNAPPING["steps"]
    judged = outcome_of(plain, transition_hold=40)
    assert (judged.outcome, judged.decided_at, judged.stopped) == ("transitioned", decided, False)


def test_resuming_a_decided_run_writes_nothing(tmp_path):
    run, _ = _trained(tmp_path, "stuck", selector="constant", steps=1000, lr=3e-3, plateau_band=0.6, stuck_hold=60,
                      stuck_after=60)
    before = (run.path / "metrics.jsonl").read_bytes()
    again = train(Run.open(run.path), progress=False)
    assert not again.trained and (run.path / "metrics.jsonl").read_bytes() == before


def _nan_at(step_nan: int):
    """A stepper factory: the plain step, whose loss is NaN at `step_nan` (before any update, as a real one)."""
    def factory(*args):
        stepping = minibatch_stepper(*args)
        inner = stepping.step

        def step(step: int):
            loss = inner(step)
            return torch.tensor(math.nan) if step == step_nan else loss
        stepping.step = step
        return stepping
    return factory


def test_nan_loss_is_a_decided_divergence(tmp_path):
    run = Run.create(tmp_path / "nan", small_spec(stop_when_decided=True, steps=100))
    result = train(run, progress=False, stepper=_nan_at(37))
    status = run.status
    assert status["state"] == "done" and status["outcome"] == "diverged" and status["diverged_at"] == 37
    assert result.stopped_early and outcome_of(run).outcome == "diverged"
    # without stop_when_decided the same NaN fails the run, and the outcome still reads "diverged"
    plain = Run.create(tmp_path / "plain", small_spec(steps=100))
    try:
        train(plain, progress=False, stepper=_nan_at(37))
    except Exception as exc:  # noqa: BLE001 - the InterpError of a diverged run
        assert "diverged" in str(exc)
    assert plain.status["state"] == "failed" and plain.status["diverged_at"] == 37
    judged = outcome_of(plain)
    assert (judged.outcome, judged.decided_at) == ("diverged", 37)
