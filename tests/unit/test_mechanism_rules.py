"""The mechanism table's rules on hand-made measurements: for every row, a consistent, a
contradicted, an inconclusive and a not-measured case, and too few replicates (docs/mechanisms.md)."""

import math

import pytest

from interp.mechanisms import rules
from interp.mechanisms.rules import (
    CONSISTENT,
    CONTRADICTED,
    INCONCLUSIVE,
    NOT_MEASURED,
    Measure,
    judge,
)


def m(value, low=math.nan, high=math.nan, n=30, **extra):
    """A measure resting on enough replicates for any row (30 runs over 5 x values) unless `n` says otherwise."""
    return Measure(value, low, high, n_runs=n, extra={"n_x": 5, **extra})


CASES = {
    # key: (consistent, contradicted, inconclusive)
    "cancellation": (m(0.95, 0.7, 1.2), m(0.02, -0.1, 0.15), m(0.5, 0.2, 0.8)),
    "cancellation_snr": (m(1.1, 0.8, 1.6), m(12.0, 8.0, 15.0), m(2.5, 1.0, 4.0)),
    "barrier": (m(-0.8, -1.2, -0.4), m(0.66, 0.4, 0.9), m(0.1, -0.3, 0.5)),
    "coverage": (m(0.4, 0.3, 0.5), m(0.0, 0.0, 0.0), m(0.1, 0.05, 0.2)),
    "spinodal": (m(0.01, 0.005, 0.02), m(-0.05, -0.08, -0.02), m(-0.001, -0.01, 0.01)),
    "drowning": (m(1.2, 0.9, 1.5, tau_slope=1.0), m(0.0, -0.2, 0.2, tau_slope=1.0), m(0.5, 0.2, 0.8, tau_slope=1.0)),
    "random_walk": (m(0.1, 0.04, 0.22, transition=0.7), m(0.6, 0.5, 0.7, transition=0.8),
                    m(0.3, 0.1, 0.5, transition=0.8)),
    "entropic_forks": (m(0.05, 0.03, 0.1), m(1.3, 1.1, 1.6), m(0.7, 0.4, 1.2)),
    "entropic_curvature": (m(40.0, 20.0, 80.0), m(0.5, 0.3, 0.9), m(5.0, 2.0, 30.0)),
}


def test_every_row_has_cases():
    assert set(CASES) == {r.key for r in rules.ROWS}


@pytest.mark.parametrize("key", list(CASES))
def test_each_rule_gives_each_verdict(key):
    consistent, contradicted, inconclusive = CASES[key]
    assert judge(key, consistent)[0] == CONSISTENT
    assert judge(key, contradicted)[0] == CONTRADICTED
    assert judge(key, inconclusive)[0] == INCONCLUSIVE
    verdict, why = judge(key, None, "runs/x")
    assert verdict == NOT_MEASURED and why.startswith("needs")
    assert judge(key, m(math.nan))[0] == NOT_MEASURED


def test_a_point_without_interval_is_judged_on_the_point_when_it_has_the_replicates():
    assert judge("coverage", Measure(0.0, n_runs=200))[0] == CONTRADICTED
    assert judge("coverage", Measure(0.5, n_runs=200))[0] == CONSISTENT


@pytest.mark.parametrize("key", list(CASES))
def test_too_few_replicates_decide_no_row(key):
    consistent = CASES[key][0]
    spec = rules.row(key)
    few = Measure(consistent.value, consistent.low, consistent.high, n_runs=spec.evidence.n - 1,
                  extra={**consistent.extra})
    verdict, why = judge(key, few)
    assert verdict == NOT_MEASURED and f"needs {spec.evidence.n}" in why
    if spec.evidence.x:  # a fit also needs its distinct x values
        few_x = Measure(consistent.value, consistent.low, consistent.high, n_runs=30, extra={**consistent.extra, "n_x": 2})
        verdict, why = judge(key, few_x)
        assert verdict == NOT_MEASURED and f"needs {spec.evidence.x}" in why


def test_an_inconclusive_row_says_how_many_more_runs_would_decide_it():
    from interp.mechanisms.intervals import mean_t

    e = mean_t([0.05, 0.25, 0.15, 0.35])  # straddles 0.3 (a random walk's bound)
    verdict, why = judge("random_walk", Measure.of(e, extra={"transition": 0.8}))
    assert verdict == INCONCLUSIVE and "would be expected to decide it" in why


def test_thresholds_sit_where_the_docs_say():
    # the boundary itself is never claimed for either side
    assert judge("cancellation", m(0.5, 0.5, 0.5))[0] == INCONCLUSIVE
    assert judge("coverage", m(0.1, 0.1, 0.1))[0] == INCONCLUSIVE
    # a random walk that never jumps is contradicted; one with no transition data is inconclusive
    assert judge("random_walk", m(0.1, 0.05, 0.15, transition=0.15))[0] == CONTRADICTED
    assert judge("random_walk", m(0.1, 0.05, 0.15))[0] == INCONCLUSIVE
    # drowning needs tau to grow with K
    assert judge("drowning", m(1.0, 0.8, 1.2, tau_slope=-0.1))[0] == INCONCLUSIVE


def test_not_measured_names_the_run():
    assert "runs/demo" in judge("spinodal", None, "runs/demo")[1]
