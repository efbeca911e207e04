"""Issue 42: verdicts that never overclaim. The six reproductions of the probe (each failed on the overlap rules),
equivalence decided as the two one-sided tests decide it (statsmodels, an independent computation), the minimum of
evidence, censored fork leads, the deciding n, and commands that add what is missing."""

import math
import shlex

import numpy as np
import pandas as pd
import pytest

from interp.mechanisms import equivalence as Q
from interp.mechanisms import intervals as I
from interp.mechanisms import reconcile_rules as R
from interp.mechanisms.fork_measures import escape_ratio
from interp.mechanisms.reconcile import Gathered, reconcile, rows_of, table_claims
from interp.mechanisms.rules import Measure, judge
from interp.mechanisms.table import build
from tests.helpers import DEMO, copy_run
from tests.synthetic_sweeps import power_law_sweep


# ---------------------------------------------------------------------------- 1. an interval as wide as the claim
@pytest.mark.parametrize("key, value", [("scaling", (0.7, 0.05, 1.35)), ("lead_exponent", (1.0, 0.1, 2.2)),
                                        ("fork_v_only", (1.5, 1.05, 6.7)), ("anisotropy", (300.0, 2.0, 1000.0)),
                                        ("lead_share", (0.35, 0.02, 0.67)), ("noise_signal", (1.0, 0.1, 2.55))])
def test_an_interval_as_wide_as_the_claim_is_inconclusive(key, value):
    c = R.claim(key)
    m = Measure(*value, n_runs=30, extra={"n_x": 10})  # evidence enough: only the interval can decide
    v = R.verdict(c, m, m if c.needs_author else None, [])
    assert v.verdict == R.INCONCLUSIVE, v
    assert "neither lies inside nor wholly outside the margin" in v.why


def test_each_outcome_follows_the_margin():
    c = R.claim("scaling")  # margin 0.80-1.25 x 1.19, null 0
    enough = dict(n_runs=30, extra={"n_x": 10})
    assert R.verdict(c, Measure(1.2, 1.1, 1.3, **enough), None, []).verdict == R.REPRODUCED
    assert R.verdict(c, Measure(0.6, 0.5, 0.7, **enough), None, []).verdict == R.NOT_REPRODUCED
    v = R.verdict(c, Measure(0.6, 0.5, 0.7, **enough), None, ["n_layers 2 (author 4)"])
    assert v.verdict == R.DIFFERS_SETTING and "n_layers 2 (author 4)" in v.why
    assert R.verdict(c, Measure(1.2, 0.9, 1.5, **enough), None, []).verdict == R.INCONCLUSIVE
    # a direction: the interval must clear the null on the claimed side
    lr = R.claim("noise_lr")
    assert R.verdict(lr, Measure(0.5, 0.2, 0.8, **enough), None, []).verdict == R.REPRODUCED
    assert R.verdict(lr, Measure(0.1, -0.2, 0.4, **enough), None, []).verdict == R.INCONCLUSIVE
    assert R.verdict(lr, Measure(-0.5, -0.8, -0.2, **enough), None, []).verdict == R.NOT_REPRODUCED
    # both definitions decisive and opposite: a definition
    trend = R.claim("lead_trend")
    v = R.verdict(trend, Measure(-0.3, -0.4, -0.2, **enough), Measure(0.2, 0.1, 0.3, **enough), [])
    assert v.verdict == R.DIFFERS_DEFINITION and R.LEAD_DEF in v.why
    assert set(R.VERDICTS) == {R.REPRODUCED, R.DIFFERS_DEFINITION, R.DIFFERS_SETTING, R.NOT_REPRODUCED,
                               R.INCONCLUSIVE, R.NOT_MEASURED}


def test_every_claim_fixes_a_margin_evidence_and_interval_method():
    for c in R.CLAIMS:
        assert c.margin.reason and c.margin.low < c.margin.high, c.key
        assert c.evidence.n >= 3 or c.key == "collective_snap", c.key
        assert c.interval and c.command.startswith("interp ")
        if c.margin.null is not None:  # an effect's margin never holds the value of no effect
            assert not (c.margin.low < c.margin.null < c.margin.high), c.key


# ---------------------------------------------------------------------------- equivalence is the two one-sided tests
def test_inside_the_margin_is_the_tost_at_five_percent():
    from statsmodels.stats.weightstats import DescrStatsW, ttost_ind

    rng = np.random.default_rng(3)
    margin = Q.Margin(0.38, 0.66, "test")
    agree = 0
    for i in range(300):
        n = (3, 5, 10)[i % 3]
        x = rng.normal(rng.uniform(0.3, 0.75), rng.uniform(0.02, 0.15), n)
        inside = Q.decide(margin, Q.Evidence(3), I.mean_t(x)) == Q.INSIDE
        p = DescrStatsW(x).ttost_mean(0.38, 0.66)[0]
        agree += inside == (p < 0.05)
    assert agree == 300
    # a ratio of geometric means (Welch on the logs) against statsmodels' ttost_ind with a log transform
    ratio = Q.Margin(4.6, 7.1875, "test")
    for i in range(200):
        a = np.exp(rng.normal(math.log(rng.uniform(3, 9)), 0.2, 5))
        b = np.exp(rng.normal(math.log(1.0), 0.2, 5))
        e = I.log_ratio_t([(v, v) for v in a], [(v, v) for v in b])
        inside = Q.decide(ratio, Q.Evidence(3), e) == Q.INSIDE
        p = ttost_ind(a, b, 4.6, 7.1875, usevar="unequal", transform=np.log)[0]  # the margin as a ratio
        assert inside == (p < 0.05), (a, b, e)


def test_the_projected_replicates_decide_at_the_observed_spread():
    margin = Q.Margin(0.38, 0.66, "test")
    x = np.array([0.35, 0.65, 0.45, 0.55])  # mean 0.5, inside the margin but too spread to show it at n = 4
    e = I.mean_t(x)
    assert Q.decide(margin, Q.Evidence(3), e) == Q.UNDECIDED
    n = Q.replicates_to_decide(margin, Q.Evidence(3), e)
    assert n is not None and n > 4

    def at(size):  # data of that size with the same mean and standard deviation
        z = np.linspace(-1, 1, size)
        z = (z - z.mean()) / z.std(ddof=1)
        return x.mean() + x.std(ddof=1) * z

    assert Q.decide(margin, Q.Evidence(3), I.mean_t(at(n))) == Q.INSIDE
    assert Q.decide(margin, Q.Evidence(3), I.mean_t(at(n - 1))) == Q.UNDECIDED
    # a value on the margin's edge: nothing would decide it
    assert Q.replicates_to_decide(margin, Q.Evidence(3), I.mean_t([0.36, 0.38, 0.40])) is None


# ---------------------------------------------------------------------------- 2. one run decides nothing
def _family(escapes: dict, step: int = 500, every: int = 25, horizon: int = 1500) -> pd.DataFrame:
    rows = []
    for arm, values in escapes.items():
        name, _, params = arm.partition(":")
        for seed, e in enumerate(values):
            rows.append(dict(run=f"{arm}-s{seed}", status="done", error="", fork_step=step, arm=name, arm_params=params,
                             fork_seed=seed, horizon=horizon, steps_run=horizon, eval_every=every,
                             escape=math.nan if e is None else float(e), censored_escape=e is None,
                             escape_half=math.nan if e is None else float(e), censored_escape_half=e is None,
                             escape_snap=math.nan, censored_escape_snap=False, gamma=math.nan, gamma_median=math.nan,
                             escape_criterion="loss_cand<0.5logK"))
    return pd.DataFrame(rows)


def test_one_fork_per_arm_decides_no_fork_claim():
    table = _family({"full_batch": [75], "minibatch": [275]})
    m, why = escape_ratio(table, "full_batch", "minibatch")
    assert why == "" and m.n_runs == 1 and math.isnan(m.low)
    g = Gathered("forks/f", "fork family")
    g.ours["fork_full_batch"] = m
    row = next(r for r in rows_of([g]) if r["key"] == "fork_full_batch")
    assert row["verdict"] == R.NOT_MEASURED and "1 fork per seeded arm, needs 3" in row["why"], row
    verdict, why = judge("entropic_forks", m)
    assert verdict == "not measured" and "needs 3" in why
    # three minibatch forks decide it; full_batch (no randomness of its own) counts as one for every seed
    m, _ = escape_ratio(_family({"full_batch": [75], "minibatch": [275, 300, 250]}), "full_batch", "minibatch")
    assert judge("entropic_forks", m)[0] == "consistent"


def test_the_escape_interval_counts_the_evaluation_grid():
    # both arms escape at the same evaluation: the ratio is 1, but the grid allows (50/75 .. 75/50)
    m, _ = escape_ratio(_family({"full_batch": [75], "v_only_noise:xi=isotropic": [75, 75, 75]}),
                        "v_only_noise:xi=isotropic", "full_batch")
    assert m.value == pytest.approx(1.0)
    assert m.low == pytest.approx(50 / 75) and m.high == pytest.approx(75 / 50)


def test_an_all_censored_family_says_so():
    m, why = escape_ratio(_family({"full_batch": [None], "minibatch": [None, None, None]}), "full_batch",
                          "minibatch")
    assert m is None and "censored" in why and "no full_batch" not in why
    m, _ = escape_ratio(_family({"full_batch": [75], "isotropic_noise": [None, None, None]}), "isotropic_noise",
                        "full_batch")
    assert m.as_estimate().bound == ">=" and math.isinf(m.high) and m.low > 1


# ---------------------------------------------------------------------------- 3. calibrated small-sample intervals
def test_three_runs_one_per_d_are_not_enough_and_the_interval_is_the_ols_t():
    from scipy import stats

    table = power_law_sweep(k_values=(3, 6, 12), seeds=1, sigma=0.1)
    g = Gathered("sweeps/s", "sweep")
    table_claims(g, table)
    m = g.ours["scaling"]
    x, y = np.log(table["D"].to_numpy(float)), np.log(table["tau_half"].to_numpy(float))
    ref = stats.linregress(x, y)
    half = stats.t.ppf(0.95, 1) * ref.stderr  # 90%, 1 degree of freedom
    assert (m.value, m.low, m.high) == pytest.approx((ref.slope, ref.slope - half, ref.slope + half))
    row = next(r for r in rows_of([g]) if r["key"] == "scaling")
    assert row["verdict"] == R.NOT_MEASURED and "3 runs, needs 5" in row["why"] and row["n_runs"] == 3
    # 5 seeds per D decide it
    g = Gathered("sweeps/s", "sweep")
    table_claims(g, power_law_sweep(k_values=(3, 6, 12, 24, 36), seeds=5, sigma=0.05, delta=1.2))
    assert next(r for r in rows_of([g]) if r["key"] == "scaling")["verdict"] == R.REPRODUCED


# ---------------------------------------------------------------------------- 4. the deciding n is the n shown
def test_the_deciding_n_is_shown():
    table = power_law_sweep(k_values=(3, 6, 12), seeds=1)
    table["gap_lead"] = [0.5, 0.55, 0.45]
    table["gap_lead_author"] = [0.8, math.nan, math.nan]  # one run logged the author's columns
    table["author_logged"] = [True, False, False]
    table.loc[2, "status"] = "damaged"
    g = Gathered("sweeps/s", "sweep")
    table_claims(g, table)
    row = next(r for r in rows_of([g]) if r["key"] == "lead_share")
    assert row["n_runs"] == 1 and row["verdict"] == R.NOT_MEASURED and "1 run (seeds), needs 3" in row["why"]


# ---------------------------------------------------------------------------- 5. fork leads are left-censored
def test_a_forks_dz_onset_at_its_first_row_is_censored():
    from interp.transition import derive

    steps = [250, 260, 270, 280, 290, 300, 310, 320]
    lc = [2.0, 1.9, 1.8, 1.5, 1.2, 1.0, 0.9, 0.5]
    fork = derive(steps, lc, [1.37] * 8, math.log(10))
    assert fork.gap_onset == 250 and fork.gap_onset_censored and fork.gap_lead is None
    assert fork.gap_lead_at("half", "unbiased")["censored"] and fork.gap_lead_at("half")["gap_lead"] is None
    run = derive([0] + steps, [2.3] + lc, [0.0] + [1.37] * 8, math.log(10))  # the same from step 0: a value
    assert run.gap_onset == 250 and not run.gap_onset_censored and run.gap_lead == pytest.approx((300 - 250) / 300)


def test_censored_leads_are_left_out_of_the_lead_fits():
    from interp.sweeps.circuit_fits import lead_share

    table = power_law_sweep(k_values=(3, 6, 12), seeds=2)
    table["gap_lead"] = [0.5, 0.4, 0.6, 0.5, 0.45, 0.55]
    table["censored_gap_lead"] = [True, True, False, False, False, False]
    with pytest.warns(UserWarning, match="2 censored"):
        fit = lead_share(table)
    assert fit.n_used == 4 and fit.n_censored == 2


def test_an_edge_onset_at_a_forks_first_step_is_censored():
    from interp.analysis.edges import first_edge, onsets

    rows = []
    for step, scores in ((400, (1.0, 0.0)), (450, (1.0, 0.5)), (500, (1.0, 1.0))):
        for edge, score in zip(("L0H3->logits", "L1H0->logits"), scores):
            rows.append(dict(step=step, edge=edge, sender=edge.split("->")[0], receiver="logits", score=score,
                             in_circuit=score > 0.2))
    table = onsets(pd.DataFrame(rows))
    by = table.set_index("edge")
    assert bool(by.loc["L1H0->logits", "carried_censored"]) is False
    assert bool(by.loc["L0H3->logits", "used_censored"]) is True
    assert by.loc["L0H3->logits", "used_onset"] == 400  # in the circuit from the fork's first step on: a bound
    onset = by.loc["L0H3->logits", "carried_onset"]
    if not pd.isna(onset) and onset == 400:
        out = first_edge(table, "L0H3")
        assert out["routing_first"] is None and "censored" in out["why"]


# ---------------------------------------------------------------------------- 6. rows that mislead
def test_duplicate_paths_count_once(tmp_path):
    run = copy_run(DEMO, tmp_path / "demo", cache=False)
    table = reconcile([run, str(run) + "/", run], compute=False)
    assert [s["path"] for s in table.sources] == [str(run)]
    assert any("counted once" in n for n in table.notes)


def test_too_few_runs_recommend_more_seeds_of_the_runs_own_setting():
    from interp.cli import build_parser
    from interp.cli_sweep import _sweep_spec
    from interp.mechanisms.commands import run_seeds
    from interp.runs import Run

    g = Gathered(str(DEMO), "run", replicate=run_seeds(Run.open(DEMO).spec, str(DEMO), 3))
    g.ours["noise_signal"] = Measure(2.3, 1.8, 2.5, n_runs=1)
    row = next(r for r in rows_of([g]) if r["key"] == "noise_signal")
    assert row["verdict"] == R.NOT_MEASURED and "--only gradients" not in row["command"]
    args = build_parser().parse_args(shlex.split(row["command"])[1:])  # the command parses, and trains the demo's
    spec = _sweep_spec(args)                                          # own setting at seeds 0, 1, 2
    assert [s for _, s, _ in spec.runs()] == [Run.open(DEMO).spec.replace("seed", s) for s in (0, 1, 2)]


def test_too_few_forks_recommend_the_familys_design_with_more_seeds(tmp_path):
    from interp.cli import build_parser
    from interp.forks.arms import parse_arms
    from interp.mechanisms.commands import family_seeds

    class Family:  # a family's design, as forks.json holds it
        path = tmp_path / "family"
        design = {"parent": "/runs/p", "steps": [400], "arms": [{"arm": "full_batch", "params": {}},
                                                              {"arm": "v_only_noise", "params": {"xi": "isotropic"}}],
                  "seeds": [0, 1], "horizon": 1500, "gamma_every": 10, "gamma_window": 500, "gamma_from": 100,
                  "settings": {"eval_every": 25, "save_optimizer": False, "stop_after_snap": 600},
                  "escape": "loss_first<3.0,hold=500"}

    command = family_seeds(Family, 3)
    args = build_parser().parse_args(shlex.split(command)[1:])
    assert args.seed == [0, 1, 2] and args.steps == 1500 and args.escape == "loss_first<3.0,hold=500"
    from interp.forks.arms import arm_of

    assert [a.label for a in parse_arms(args.arm)] == [arm_of(a).label for a in Family.design["arms"]]
    assert args.gamma_window == "100:500" and args.out.endswith("family-seeds")


def test_the_mechanism_table_names_the_replicates_too():
    table = build("runs/x", "run", {"random_walk": Measure(0.1, 0.05, 0.15, 1, extra={"transition": 0.7})}, {}, [],
                  "interp sweep --preset tiny --seed 0,1,2 --out sweeps/seeds-x --workers 2")
    row = next(r for r in table.rows if r["key"] == "random_walk")
    assert row["verdict"] == "not measured" and "1 run (seeds), needs 3" in row["why"]
    assert "--seed 0,1,2" in row["why"]


def test_the_docs_rule_table_states_each_claims_margin_and_replicates():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "reconciliation.md").read_text()
    table = text[text.index("### The rules, claim by claim"):text.index("### Intervals and their coverage")]
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| ") and "---" not in line}
    for c in R.CLAIMS:
        assert c.key in rows, c.key
        assert f"| {c.margin.text()} |" in rows[c.key], (c.key, c.margin.text())
        assert str(c.evidence.n) in rows[c.key].split("|")[5], c.key


def test_a_cached_analysis_that_gave_nothing_is_not_sent_back_to_its_command():
    from interp.mechanisms.evidence import RunEvidence
    from interp.mechanisms.reconcile import _from_evidence

    ev = RunEvidence("runs/x", 1000)
    ev.missing["spinodal"] = "the cached Hessian (steps 0, 1000) has no converged bottom eigenpair on the plateau"
    g = Gathered("runs/x", "run", run_path="runs/x")
    _from_evidence(g, [ev])
    row = next(r for r in rows_of([g]) if r["key"] == "saddle")
    assert row["verdict"] == R.NOT_MEASURED and row["command"] == "" and "no converged" in row["why"]
    assert "no command measures it" in row["why"]
    other = next(r for r in rows_of([g]) if r["key"] == "noise_signal")  # not cached: its analysis is named
    assert other["command"] == "interp analyze runs/x --only gradients"


def test_show_says_a_forks_lead_is_censored():
    from interp.summary import lead_row, run_rows

    s = {"path": "forks/f", "direction": "bz_to_a", "k": 10, "n_bases": 100, "dataset_size": 1000, "seed": 0,
         "log_k": math.log(10), "n_checkpoints": 3, "first_step": 250, "last_step": 320, "planned_steps": 320,
         "last_evaluated": 320, "plateau_height": None, "plateau_start": None, "plateau_end": None, "tau_half": 320,
         "tau_window": None, "window_start": None, "window_end": None, "snap_step": None, "gap_onset": 250,
         "gap_onset_censored": True, "gap_lead": None, "gap_lead_snap": None}
    text = dict(run_rows(s))["gap lead"]
    assert "at or before step 250" in text and "censored" in text and "lead (t_loss - t)" not in text
    label, text = lead_row({"definition": "ours", "t_loss": "half", "dz": "unbiased", "gap_onset": 250,
                            "t_loss_step": 320, "gap_lead": None, "not_measured": None, "censored": True})
    assert "censored" in text and "no lead" in text
