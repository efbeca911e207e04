"""The verdicts of the author's program at tiny scale (interp.mechanisms.variants; issue 51: 5), on constructed
tables whose answer is known: each claim is reproduced, not reproduced or inconclusive as SPEC 10's rules say."""

from __future__ import annotations

import math

import pandas as pd

from interp.mechanisms import variants as V
from interp.mechanisms.reconcile_rules import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED


def _runs(rows: list[dict]) -> pd.DataFrame:
    base = {"status": "done", "steps_run": 4000, "censored_tau_half": False, "censored_steps_to_exact_99": False}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_k1_control():
    fast = _runs([{"k": 1, "steps_to_exact_99": 200 + 10 * s, "tau_half": math.nan} for s in range(3)]
                 + [{"k": 10, "tau_half": 900 + 20 * s} for s in range(3)])
    assert V.k1_control(fast)[0].verdict == REPRODUCED
    slow = _runs([{"k": 1, "steps_to_exact_99": 3000 + 10 * s} for s in range(3)]
                 + [{"k": 10, "tau_half": 900 + 20 * s} for s in range(3)])
    assert V.k1_control(slow)[0].verdict == NOT_REPRODUCED


def test_label_noise_ratios():
    rows = [{"task.label_noise": 0.0, "tau_acc_half": 1000 + 10 * s} for s in range(3)]
    rows += [{"task.label_noise": 0.05, "tau_acc_half": 850 + 10 * s} for s in range(3)]  # 0.85: the author's 0.835
    rows += [{"task.label_noise": 0.2, "tau_acc_half": 2000 + 10 * s} for s in range(3)]  # 2x: far from 0.94
    got = {c.name: c.verdict for c in V.label_noise(_runs([{**r, "censored_tau_acc_half": False} for r in rows]))}
    assert got["tau_acc_half at P = 0.05 / clean"] == REPRODUCED
    assert got["tau_acc_half at P = 0.2 / clean"] == NOT_REPRODUCED


def test_the_label_noise_time_is_half_way_to_what_the_noisy_targets_allow():
    steps = [0, 25, 50, 75, 100]
    # K = 10, P = 0.2: chance 0.1, ceiling 0.8 on the clean targets, half-way 0.45 (tau_half's "half of log K")
    assert V.acc_half(steps, [0.1, 0.3, 0.44, 0.45, 0.78], 10, 0.2) == (75.0, False)
    assert V.acc_half(steps, [0.1, 0.3, 0.44, 0.45, 0.54], 10, 0.0) == (100.0, True)  # 0.55 never reached: censored
    assert V.acc_half(steps, [0.1, 0.6, 0.6, 0.6, 0.6], 10, 0.0) == (25.0, False)


def test_two_plateaus_rule_and_hierarchy_shares():
    steps = list(range(0, 1000, 25))
    stair = [2.3] * 10 + [0.69] * 12 + [0.05] * 18  # 12 evaluations near log 2 over 275 steps, then solved
    assert V.two_plateaus(steps, stair, math.log(2))
    assert not V.two_plateaus(steps, [2.3] * 10 + [0.69] * 4 + [0.05] * 26, math.log(2))  # too few
    assert not V.two_plateaus(steps, [2.3] * 10 + [0.69] * 30, math.log(2))  # never solved
    table = _runs([{"two_plateaus": True, "z1_onset": 100, "z2_onset": 400} for _ in range(5)])
    claims = V.hierarchy(table)
    assert [c.verdict for c in claims] == [REPRODUCED, REPRODUCED]
    three = _runs([{"two_plateaus": True, "z1_onset": 100, "z2_onset": 400} for _ in range(3)])
    assert V.hierarchy(three)[0].verdict == INCONCLUSIVE and "needs 5" in V.hierarchy(three)[0].why


def test_holdout_lookup_table():
    table = _runs([{"task.holdout_by": by, "heldout_acc_exact": v} for by in ("pair", "base") for v in (0.0, 0.01, 0.0)])
    assert [c.verdict for c in V.holdout(table)] == [REPRODUCED, REPRODUCED]
    program = _runs([{"task.holdout_by": "pair", "heldout_acc_exact": v} for v in (0.9, 0.95, 0.92)])
    assert V.holdout(program)[0].verdict == NOT_REPRODUCED


def test_optimizer_branch_rule():
    rows = []
    for arm in (*V.DECOUPLED, *V.COUPLED, "minibatch"):
        name, _, params = arm.partition(":")
        escapes = arm in V.DECOUPLED or arm == "minibatch"
        rows += [{"arm": name, "arm_params": params, "censored_escape": not escapes,
                  "escape": 300.0 if escapes else math.nan} for _ in range(5)]
    claims = V.optimizer_branch(_runs(rows))
    assert claims[-1].verdict == REPRODUCED
    assert {c.name.split(":")[0] for c in claims[:-1]} >= {"optimizer"}
    flipped = _runs([{**r, "censored_escape": False, "escape": 300.0} for r in rows])  # L2 escapes too
    assert V.optimizer_branch(flipped)[-1].verdict == NOT_REPRODUCED
