"""A censored held escape's lower bound (issue 54: 2): a fork whose criterion is met over its last evaluations, for
less than the hold, may have escaped where that trailing stretch began; one not past the threshold at its last
evaluation cannot have escaped before it. The bound reaches the family table (escape_bound), the fork comparison of
`interp fork status` and the escape ratios the verdicts read, which agree."""

from __future__ import annotations

import math

import pandas as pd

from interp.forks.escape import censored_bound, parse_escape
from interp.mechanisms.fork_measures import censored_at, escapes
from interp.sweeps.forks import forks

STEPS = list(range(300, 601, 10))  # a fork at 300, evaluated every 10 steps, 300 steps run


def log(below_from: int | None, dip: tuple[int, int] | None = None) -> list[float]:
    """loss_cand (in units of log K = 1) above 0.5 until `below_from`, below after; `dip`: a brief stretch below."""
    out = []
    for s in STEPS:
        below = (below_from is not None and s >= below_from) or (dip is not None and dip[0] <= s <= dip[1])
        out.append(0.3 if below else 0.9)
    return out


def test_the_bound_is_the_start_of_the_trailing_stretch_or_the_last_evaluation():
    c = parse_escape("loss_cand<0.5logK,hold=250")
    values = log(360)  # below from 360 to 600: 240 of the 250 hold steps
    assert c.judge(STEPS, values, 300, 1.0) is None  # no held escape: censored
    assert c.bound(STEPS, values, 300, 1.0) == 360  # it may have escaped at 360: >= 60 steps after the fork
    assert censored_bound(STEPS, log(None), 300, 0.5) == 600  # never below: not before its last evaluation
    assert censored_bound(STEPS, log(None, dip=(400, 450)), 300, 0.5) == 600  # a kick-back that ended: the last
    assert censored_bound(STEPS, log(590, dip=(400, 450)), 300, 0.5) == 590  # the trailing stretch, not the dip
    assert censored_bound(STEPS, [math.nan] * len(STEPS), 300, 0.5) == 600  # NaN is never past the threshold
    held = parse_escape("loss_cand<0.5logK,hold=200")
    assert held.judge(STEPS, values, 300, 1.0) == 360  # with a hold it outlives: an escape, not a bound


def _table() -> pd.DataFrame:
    """Two arms at one fork step: full_batch escapes (10, 20 steps after the fork, 3 seeds), minibatch is censored
    with bounds 60, 60, 300 (two met the criterion from step 360 on, one never)."""
    rows = []
    for seed, esc in enumerate((10.0, 20.0, 10.0)):
        rows.append({"run": f"fb{seed}", "status": "done", "fork_step": 300, "arm": "full_batch", "arm_params": "",
                     "fork_seed": seed, "steps_run": 300, "eval_every": 10, "horizon": 300, "escape": esc,
                     "censored_escape": False, "escape_bound": math.nan, "gamma": math.nan, "gamma_median": math.nan})
    for seed, bound in enumerate((60.0, 60.0, 300.0)):
        rows.append({"run": f"mb{seed}", "status": "done", "fork_step": 300, "arm": "minibatch", "arm_params": "",
                     "fork_seed": seed, "steps_run": 300, "eval_every": 10, "horizon": 300, "escape": math.nan,
                     "censored_escape": True, "escape_bound": bound, "gamma": math.nan, "gamma_median": math.nan})
    return pd.DataFrame(rows)


def test_the_status_the_ratios_and_the_verdicts_read_the_same_bound():
    table = _table()
    assert [censored_at(r) for r in table.to_dict("records")][3:] == [60.0, 60.0, 300.0]
    got, undefined = escapes(table[table["arm"] == "minibatch"])
    assert got == [(60.0, math.inf), (60.0, math.inf), (300.0, math.inf)] and undefined == 0
    comparison = forks(table, y="escape", reference="minibatch")
    row = comparison.rows.set_index("label").loc["minibatch"]
    assert row["median_censored"] and row["median"] == 60.0  # ">= 60", never ">= 300"
    text = comparison.summary()
    assert ">= 60" in text and ">= 300" not in text
    fb = comparison.rows.set_index("label").loc["full_batch"]
    assert fb["ratio_bound"] == "<=" and abs(fb["ratio"] - 10 / 60) < 1e-9  # <= 0.167, not <= 0.0333
    # a table kept before the bound existed (no escape_bound column) still reads steps_run
    old = table.drop(columns=["escape_bound"])
    assert escapes(old[old["arm"] == "minibatch"])[0] == [(300.0, math.inf)] * 3
    assert forks(old, y="escape").rows.set_index("label").loc["minibatch", "median"] == 300.0


def test_the_verdicts_ratio_is_a_bound_and_is_shown_as_one():
    from interp.mechanisms.fork_measures import escape_ratio
    from interp.mechanisms.reconcile_table import value_text

    table = _table().assign(label=lambda t: t["arm"])
    m, _ = escape_ratio(table, "full_batch", "minibatch", y="escape")
    assert m.extra["bound"] == "<="  # the reference arm's forks are censored: the ratio can only be lower
    # its value rests on the bounds 60, 60, 300 (geometric means 12.6 / 102.6), not on steps_run's 300, 300, 300
    assert abs(m.value - (10 * 20 * 10) ** (1 / 3) / (60 * 60 * 300) ** (1 / 3)) < 1e-9
    text = value_text({"value": m.value, "low": m.low, "high": m.high, "bound": m.extra["bound"]}, "")
    assert text.startswith("<= 0.123")


def test_a_ratio_censored_on_both_sides_is_no_bound_either_way():
    """One full_batch fork censored too (as forks-relapse-depth-tiny's H = 1,000): a later escape of the arm raises the
    ratio, one of the reference lowers it, so the value is written "censored both ways", never ">=" or "<=", and
    no count of replicates is promised to decide it."""
    import dataclasses

    from interp.mechanisms import equivalence as Q
    from interp.mechanisms.fork_measures import escape_ratio
    from interp.mechanisms.intervals import BOTH_CENSORED
    from interp.mechanisms.reconcile_rules import CLAIMS, _more
    from interp.mechanisms.reconcile_table import value_text

    table = _table().assign(label=lambda t: t["arm"])
    table.loc[2, ["escape", "censored_escape", "escape_bound"]] = [math.nan, True, 250.0]
    m, _ = escape_ratio(table, "minibatch", "full_batch", y="escape")
    e = m.as_estimate()
    assert m.extra["bound"] == e.bound == BOTH_CENSORED
    assert math.isinf(m.hi) and e.text().startswith("censored both ways: ")
    text = value_text({"value": m.value, "low": m.low, "high": m.high, "bound": m.extra["bound"]}, "")
    assert text.startswith("censored both ways: ") and ">=" not in text and "<=" not in text
    claim = next(c for c in CLAIMS if c.key == "fork_isotropic")
    assert Q.replicates_to_decide(claim.margin, claim.evidence, e) is None
    assert "a longer horizon" in _more(claim, dataclasses.replace(m))
    one_side = _table().assign(label=lambda t: t["arm"])
    assert escape_ratio(one_side, "minibatch", "full_batch", y="escape")[0].as_estimate().bound == ">="
