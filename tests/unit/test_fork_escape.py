"""The escape criterion of forks (`interp.forks.escape`), on hand-made metric series: a fork escapes at
the first evaluation that starts a held stretch; a dip shorter than the hold is not an escape; a hold
that runs past the last evaluation is not known to hold (a finished fork is then censored); the
default is tau_half exactly; criteria parse, print and are refused as the CLI needs. Also the median
of the per-step Gamma over a range of steps, and the v_only_noise arm's `xi` parameter (recorded
only when not the default, so forks made before keep their folders and fork blocks)."""

from __future__ import annotations

import math

import pytest

from interp.errors import InterpError
from interp.forks.arms import arm_of, make_arm, parse_arms
from interp.forks.escape import (AUTHOR, DEFAULT, check_gamma_window, gamma_median, held_escape, parse_escape,
                                 parse_gamma_window)

STEPS = list(range(100, 1001, 50))  # a fork at step 100 evaluated every 50 steps, horizon 900


def series(low: dict[int, float], high: float = 4.0) -> list[float]:
    """The metric at STEPS: `high` except at the steps `low` gives."""
    return [low.get(s, high) for s in STEPS]


def test_a_dip_shorter_than_the_hold_is_not_an_escape():
    dip = {300: 2.0, 350: 2.0, 400: 2.5}  # below 3 for 100 steps, then back up
    values = series(dip)
    assert held_escape(STEPS, values, 100, 3.0, 0) == 300  # without a hold the dip counts
    assert held_escape(STEPS, values, 100, 3.0, 100) == 300  # 300..400 all below: held exactly 100 steps
    assert held_escape(STEPS, values, 100, 3.0, 150) is None  # 450 is above: the kick-back is not an escape
    # the dip, then a lasting descent: the escape is where the held stretch starts, not the dip
    values = series({**dip, **{s: 1.0 for s in range(600, 1001, 50)}})
    assert held_escape(STEPS, values, 100, 3.0, 300) == 600
    assert AUTHOR.judge(STEPS, values, 100, math.log(10)) is None  # hold 500: 600 + 500 lies past 1000


def test_a_hold_running_past_the_horizon_is_not_counted():
    values = series({s: 1.0 for s in range(800, 1001, 50)})  # below from 800 to the last evaluation, 1000
    assert held_escape(STEPS, values, 100, 3.0, 200) == 800  # 800..1000: held
    assert held_escape(STEPS, values, 100, 3.0, 250) is None  # would need an evaluation at 1050
    assert held_escape(STEPS, values, 100, 3.0, 150) == 800


def test_nan_breaks_a_stretch_and_evaluations_before_the_fork_do_not_count():
    values = series({s: 1.0 for s in range(300, 1001, 50)})
    values[STEPS.index(500)] = math.nan  # a missing evaluation is not below the threshold
    assert held_escape(STEPS, values, 100, 3.0, 200) == 550
    assert held_escape([0, 50, 100, 150], [1.0, 1.0, 5.0, 1.0], 100, 3.0, 0) == 150


def test_rising_metrics_use_greater_than():
    acc = [0.1, 0.2, 0.95, 0.99, 0.4, 0.97, 0.98, 0.99]
    steps = list(range(0, 80, 10))
    crit = parse_escape("acc_cand>0.9,hold=20")
    assert crit.judge(steps, acc, 0, 1.0) == 50
    assert held_escape(steps, acc, 0, 0.9, 0, ">") == 20


def test_the_default_is_tau_half():
    log_k = math.log(10)
    assert parse_escape(None) == DEFAULT and DEFAULT.is_default and DEFAULT.text == "loss_cand<0.5logK"
    assert parse_escape("loss_cand<0.5logK") == DEFAULT == parse_escape(" loss_cand < 0.5*logk ,hold=0")
    values = [1.2 * log_k, 0.9 * log_k, 0.5 * log_k, 0.49 * log_k, 0.6 * log_k]
    assert DEFAULT.judge([0, 10, 20, 30, 40], values, 0, log_k) == 30  # strictly below, as tau_half
    assert DEFAULT.limit(log_k) == 0.5 * log_k


def test_criteria_read_and_print():
    crit = parse_escape("loss_first<3.0,hold=500")
    assert crit == AUTHOR and crit.text == "loss_first<3,hold=500" and not crit.is_default
    assert parse_escape(crit.text) == crit and crit.limit(2.0) == 3.0
    assert crit.words == "loss_first < 3 held 500 steps"
    assert parse_escape("loss_cand<0.05logK").limit(math.log(10)) == pytest.approx(0.05 * math.log(10))
    crit.check_horizon(501)
    for horizon in (500, 499):  # a hold of the whole horizon leaves no room to escape (issue 54): refused as well
        with pytest.raises(InterpError, match="longer than the horizon"):
            crit.check_horizon(horizon)


@pytest.mark.parametrize("text, fragment", [
    ("loss_first=3", "is not a criterion"),
    ("loss_first", "is not a criterion"),
    ("", "is not a criterion"),
    ("loss_foo<3", "unknown metric 'loss_foo'; allowed"),
    ("train_loss<3", "unknown metric"),  # not an evaluated column
    ("loss_first<", "finite number"),
    ("loss_first<nan", "finite number"),
    ("loss_first<3logQ", "finite number"),
    ("loss_first<3,hold=-5", "hold=STEPS"),
    ("loss_first<3,hold=2.5", "hold=STEPS"),
    ("loss_first<3,wait=5", "hold=STEPS"),
])
def test_bad_criteria_are_refused_in_one_line(text, fragment):
    with pytest.raises(InterpError) as err:
        parse_escape(text)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_gamma_window_and_median():
    assert parse_gamma_window("100:500") == (100, 500) and parse_gamma_window("200") == (0, 200)
    assert parse_gamma_window(" 0 : 5 ") == (0, 5)
    for bad in ("500:100", "0", "-1:5", "a:b", "1:2:3", "0:0"):
        with pytest.raises(InterpError, match="--gamma-window"):
            parse_gamma_window(bad)
    check_gamma_window((100, 500), 500)
    with pytest.raises(InterpError, match="outside the horizon"):
        check_gamma_window((100, 500), 499)
    steps = [101, 102, 103, 104, 105, 106]
    ratios = [9.0, 1.0, 3.0, None, 2.0, 100.0]
    assert gamma_median(steps, ratios, 100, (2, 5)) == 2.0  # 1, 3, 2 (the undefined one left out)
    assert gamma_median(steps, ratios, 100, (1, 6)) == 3.0  # 9, 1, 3, 2, 100
    assert gamma_median(steps, ratios, 100, (2, 3)) == 2.0  # even count: the mean of the middle two
    assert math.isnan(gamma_median(steps, ratios, 100, (7, 9)))


def test_v_only_xi_is_recorded_only_when_isotropic():
    measured, isotropic = parse_arms("v_only_noise,v_only_noise:xi=isotropic")
    assert measured.kwargs == {"s": 1.0} and measured.slug == "v_only_noise_s1"  # as before xi existed
    assert measured == make_arm("v_only_noise", xi="measured") == arm_of({"arm": "v_only_noise", "params": {"s": 1.0}})
    assert isotropic.kwargs == {"s": 1.0, "xi": "isotropic"} and isotropic.slug == "v_only_noise_s1_xiisotropic"
    assert measured.label == "v_only_noise:s=1,xi=measured" and isotropic.label == "v_only_noise:s=1,xi=isotropic"
    with pytest.raises(InterpError, match="xi must be one of measured, isotropic"):
        make_arm("v_only_noise", xi="gaussian")
    with pytest.raises(InterpError, match="given twice"):
        parse_arms("v_only_noise,v_only_noise:xi=measured")


def test_the_comparison_and_the_mechanism_evidence_name_the_criterion_and_the_v_only_noise():
    import warnings

    import pandas as pd

    from interp.mechanisms.evidence import forks_measure
    from interp.sweeps.forks import forks

    rows = []
    for arm, params, escapes in (("full_batch", "", [100.0]), ("minibatch", "", [800.0, 1000.0, 900.0]),
                                 ("v_only_noise", "s=1,xi=measured", [120.0, 110.0, 130.0]),
                                 ("v_only_noise", "s=1,xi=isotropic", [500.0, 600.0, 700.0])):
        for seed, e in enumerate(escapes):
            rows.append(dict(run=f"{arm}{params}-s{seed}", status="done", fork_step=500, arm=arm, arm_params=params,
                             fork_seed=seed, horizon=4000, steps_run=4000, escape=e, censored_escape=False,
                             escape_half=50.0, censored_escape_half=False, escape_criterion="loss_first<3,hold=500",
                             gamma=1.0, gamma_median=0.5 + seed, gamma_range="100:500"))
    table = pd.DataFrame(rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cmp = forks(table)
        m, why = forks_measure(table)
    assert cmp.y == "escape" and cmp.criterion == "loss_first<3,hold=500" and cmp.gamma_range == "100:500"
    head = cmp.summary().splitlines()[0]
    assert head.startswith("escape [loss_first < 3 held 500 steps]") and "gamma med 100:500" in cmp.summary()
    assert cmp.rows.set_index("label").loc["minibatch", "gamma_median"] == pytest.approx(1.5)
    assert forks(table, y="escape_half").criterion == "loss_cand<0.5logK"
    assert why == "" and m.value == pytest.approx(100 / (800 * 1000 * 900) ** (1 / 3))  # geometric means
    assert "loss_first < 3 held 500 steps" in m.detail
    assert "v_only_noise:s=1,xi=isotropic 0.663" in m.detail and "v_only_noise:s=1,xi=measured 0.134" in m.detail
    assert m.estimate.method.startswith("Welch t on the log escapes")
