"""The outcome rules (interp.outcome) on hand-built metric logs: each status, each rule's boundary, a NaN."""

from __future__ import annotations

import math

import pytest

from interp.errors import InterpError
from interp.outcome import Rules, Tracker, judge_rows, parse_rules
from interp.spec import TrainSpec

LOG_K = math.log(10)
DONE = {"state": "done"}


def log(values, every=50, dz=0.0, start=0):
    """Rows every `every` steps from `start` with candidate loss values[i] (a float, or a multiple of log K given as
    ('k', f)), dz constant or a list."""
    rows = []
    for i, v in enumerate(values):
        rows.append({"step": start + i * every, "loss_cand": v, "train_loss": 1.0,
                     "shuffle_gap": dz[i] if isinstance(dz, list) else dz})
    return rows


def plateau(n):
    return [LOG_K] * n


def test_transitioned_needs_the_full_hold():
    # below 0.3 log K from step 1000: held 500 steps at step 1500, not at 1450
    rows = log(plateau(20) + [0.2 * LOG_K] * 11)
    got = judge_rows(rows, LOG_K, Rules(), DONE)
    assert (got.outcome, got.decided_at) == ("transitioned", 1500)
    assert judge_rows(rows[:-1], LOG_K, Rules(), DONE).outcome == "inconclusive"


def test_transition_boundary_is_strict():
    # exactly 0.3 log K is not below it; a single excursion above restarts the hold
    assert judge_rows(log(plateau(2) + [0.3 * LOG_K] * 20), LOG_K, Rules(), DONE).outcome == "inconclusive"
    rows = log(plateau(2) + [0.2 * LOG_K] * 5 + [0.31 * LOG_K] + [0.2 * LOG_K] * 11)
    got = judge_rows(rows, LOG_K, Rules(), DONE)
    assert got.outcome == "transitioned" and got.decided_at == 50 * (2 + 5 + 1 + 10)


def test_stuck_needs_hold_and_minimum_step():
    rows = log(plateau(41))  # steps 0..2000 on the plateau, dz 0
    got = judge_rows(rows, LOG_K, Rules(), DONE)
    assert (got.outcome, got.decided_at) == ("stuck", 2000)
    assert judge_rows(rows[:-1], LOG_K, Rules(), DONE).outcome == "inconclusive"
    # the plateau entered at step 500: held 2000 steps only at 2500, even though 2000 >= stuck_after
    late = log([2.0 * LOG_K] * 10 + plateau(41))
    got = judge_rows(late, LOG_K, Rules(diverge_hold=10**6), DONE)
    assert (got.outcome, got.decided_at) == ("stuck", 2500)
    # stuck_after: a plateau held 2000 steps from 0 is decided no earlier than stuck_after
    got = judge_rows(log(plateau(61)), LOG_K, Rules(stuck_after=3000), DONE)
    assert got.decided_at == 3000


def test_plateau_band_and_gap_boundaries():
    inside = LOG_K * 1.05  # exactly at the band's edge: on the plateau
    assert judge_rows(log([inside] * 41), LOG_K, Rules(), DONE).outcome == "stuck"
    assert judge_rows(log([LOG_K * 1.051] * 41), LOG_K, Rules(), DONE).outcome == "inconclusive"
    # dz at 0.05 is not below it; a missing dz is not the plateau
    assert judge_rows(log(plateau(41), dz=0.05), LOG_K, Rules(), DONE).outcome == "inconclusive"
    assert judge_rows(log(plateau(41), dz=0.049), LOG_K, Rules(), DONE).outcome == "stuck"
    assert judge_rows(log(plateau(41), dz=math.nan), LOG_K, Rules(), DONE).outcome == "inconclusive"
    assert judge_rows(log(plateau(41), dz=None), LOG_K, Rules(), DONE).outcome == "inconclusive"


def test_diverged_by_high_loss_counts_from_diverge_after():
    high = 1.6 * LOG_K
    rows = log([high] * 15)  # steps 0..700; counted from 200: held 500 at 700
    got = judge_rows(rows, LOG_K, Rules(), DONE)
    assert (got.outcome, got.decided_at) == ("diverged", 700)
    assert judge_rows(rows[:-1], LOG_K, Rules(), DONE).outcome == "inconclusive"
    assert judge_rows(log([1.5 * LOG_K] * 40), LOG_K, Rules(), DONE).outcome == "inconclusive"  # not above 1.5


def test_nan_is_diverged_at_once():
    rows = log(plateau(5) + [math.nan])
    got = judge_rows(rows, LOG_K, Rules(), DONE)
    assert (got.outcome, got.decided_at) == ("diverged", 250)
    assert "nan" in got.reason
    got = judge_rows(log(plateau(5) + [math.inf]), LOG_K, Rules(), DONE)
    assert got.outcome == "diverged"


def test_order_first_decision_wins_and_transition_before_stuck():
    # stuck at 2000, then a transition: the outcome stays stuck (the first decision)
    rows = log(plateau(41) + [0.1 * LOG_K] * 20)
    assert judge_rows(rows, LOG_K, Rules(), DONE).outcome == "stuck"
    # the same evaluation satisfying two rules: transition first (a band wide enough to include 0.2 log K)
    t = Tracker(Rules(plateau_band=0.9, transition_below=0.05, transition_hold=0, stuck_hold=0, stuck_after=0), LOG_K)
    assert t.update(0, 0.01, 0.0).outcome == "transitioned"


def test_statuses_of_undecided_runs():
    rows = log(plateau(3))
    assert judge_rows(rows, LOG_K, Rules(), None).outcome == "running"
    assert judge_rows(rows, LOG_K, Rules(), {"state": "interrupted"}).outcome == "running"
    assert judge_rows(rows, LOG_K, Rules(), {"state": "failed", "error": "boom"}).outcome == "crashed"
    got = judge_rows(rows, LOG_K, Rules(), {"state": "failed", "error": "the training loss became nan",
                                            "diverged_at": 170})
    assert (got.outcome, got.decided_at) == ("diverged", 170)


def test_rules_from_spec_and_changes():
    spec = TrainSpec(stuck_hold=100)
    assert Rules.of(spec).stuck_hold == 100
    assert Rules.of(spec, stuck_hold=7).stuck_hold == 7
    with pytest.raises(InterpError, match="unknown outcome rule 'stuck_holds'"):
        Rules.of(spec, stuck_holds=7)
    with pytest.raises(InterpError, match="plateau_band must be"):
        Rules.of(spec, plateau_band=2.0)
    assert parse_rules(["stuck-hold=300", "plateau_band=0.1"]) == {"stuck_hold": 300, "plateau_band": 0.1}
    for bad in ("nope=1", "stuck_hold", "stuck_hold=1.5"):
        with pytest.raises(InterpError):
            parse_rules([bad])


def test_spec_refuses_bad_thresholds():
    for field, value in (("transition_below", 0.96), ("diverge_above", 1.0), ("stuck_hold", -1)):
        with pytest.raises(InterpError):
            TrainSpec(**{field: value}).validate()
    # at their defaults the fields are omitted from run.json (old runs keep their hashes)
    assert "stuck_hold" not in TrainSpec().to_dict() and TrainSpec(stuck_hold=5).to_dict()["stuck_hold"] == 5


def test_k1_has_no_outcome():
    with pytest.raises(InterpError, match="K >= 2"):
        Tracker(Rules(), 0.0)


@pytest.mark.parametrize("argv, expected", [
    (["train", "--plateau-band", "2"], "plateau_band must be"),
    (["train", "--stuck-holds", "5"], "unrecognized arguments"),
    (["sweep", "--preset", "tiny", "--grid", "train.stuck_holds=1,2"], "unknown field"),
    (["train", "--transition-below", "0.99"], "transition_below 0.99 must lie below the plateau band"),
])
def test_bad_thresholds_on_the_command_line(tmp_path, capsys, argv, expected):
    from tests.helpers import run_main

    out = tmp_path / "run"
    code, _, err = run_main([*argv, "--out", str(out)], capsys)
    assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
