"""The shuffle gap's lead by the author's definition, (t_loss - t(dz > 0.1 nats)) / t_loss, against
a hand computation from the demo's metrics.jsonl and on hand-made series."""

import json

import pytest

from interp.errors import InterpError
from interp.summary import run_rows, run_summary
from interp.transition import gap_lead
from tests.helpers import DEMO


def _hand(path, t_kind: str) -> tuple[int, int, float]:
    """A plain loop over the metrics log: the first step with dz > 0.1 and the first with Lc below
    0.5 log K (tau_half) or 0.05 log K (the snap)."""
    import math

    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows = [r for r in rows if r.get("loss_cand") is not None]
    log_k = math.log(json.loads((path.parent / "run.json").read_text())["spec"]["task"]["k"])
    gap = next(r["step"] for r in rows if r["shuffle_gap"] is not None and r["shuffle_gap"] > 0.1)
    frac = 0.5 if t_kind == "half" else 0.05
    t = next(r["step"] for r in rows if r["loss_cand"] < frac * log_k)
    return gap, t, (t - gap) / t


@pytest.mark.parametrize("kind", ["half", "snap"])
def test_the_demo_lead_equals_a_hand_computation(demo_run, kind):
    gap, t, lead = _hand(DEMO / "metrics.jsonl", kind)
    m = demo_run.metric_series("loss_cand", "shuffle_gap")
    got = gap_lead(m["step"], m["loss_cand"], m["shuffle_gap"], demo_run.log_k, kind)
    assert got == {"gap_onset": gap, "t_loss": t, "gap_lead": pytest.approx(lead, abs=1e-12), "censored": False}
    assert 0 < lead < 1  # the gap moves before the loss
    summary = run_summary(demo_run)
    assert summary["gap_onset"] == gap
    assert summary["gap_lead" if kind == "half" else "gap_lead_snap"] == pytest.approx(lead, abs=1e-12)


def test_the_summary_row_names_the_step_and_both_leads(demo_run):
    s = run_summary(demo_run)
    row = dict(run_rows(s))["gap lead"]
    assert f"from step {s['gap_onset']}" in row and f"{s['gap_lead']:.2f} with t_loss = tau_half" in row
    assert f"{s['gap_lead_snap']:.2f} with the snap" in row


def test_hand_made_series():
    steps, log_k = [0, 10, 20, 30, 40], 1.0
    lc = [1.0, 1.0, 0.9, 0.4, 0.01]
    # the first step above 0.1 counts even when dz falls back (no hold), NaN never counts
    dz = [float("nan"), 0.2, 0.05, 0.5, 3.0]
    assert gap_lead(steps, lc, dz, log_k) == {"gap_onset": 10, "t_loss": 30, "gap_lead": pytest.approx(2 / 3),
                                              "censored": False}
    assert gap_lead(steps, lc, dz, log_k, "snap")["gap_lead"] == pytest.approx(0.75)
    assert gap_lead(steps, lc, dz, log_k, 20)["gap_lead"] == pytest.approx(0.5)
    # an exact 0.1 is not above it; a gap after t_loss gives a negative lead
    assert gap_lead(steps, lc, [0, 0.1, 0.1, 0.1, 0.2], log_k)["gap_lead"] == pytest.approx((30 - 40) / 30)
    # never: None, not a guess
    assert gap_lead(steps, lc, [0.0] * 5, log_k) == {"gap_onset": None, "t_loss": 30, "gap_lead": None, "censored": False}
    assert gap_lead(steps, [1.0] * 5, dz, log_k)["gap_lead"] is None
    for bad in ("tau", 0, -5, True):
        with pytest.raises(InterpError, match="t_loss"):
            gap_lead(steps, lc, dz, log_k, bad)
