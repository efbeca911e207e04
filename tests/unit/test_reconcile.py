"""The reconciliation table (docs/reconciliation.md): its verdict rules on planted measures, every verdict
reached; the table on the demo (cache-free copy: nothing computed), every claim a row, not-measured rows
naming a command, the demo's missing author columns said in one line; --json round trip; bad input."""

import json
import math

import numpy as np
import pytest

from interp.mechanisms import reconcile_rules as R
from interp.mechanisms.reconcile import Gathered, ReconcileTable, reconcile, rows_of, table_claims
from interp.mechanisms.rules import Measure
from tests.helpers import DEMO, copy_run, run_main, snapshot
from tests.synthetic_sweeps import asymmetry_sweep, fixed_d_sweep, noise_sweep, power_law_sweep


def m(value, low=math.nan, high=math.nan, n=30):
    """A measure with replicates enough for any claim (30 runs over 10 x values): only its interval decides."""
    return Measure(value, low, high, n_runs=n, extra={"n_x": 10})


# ---------------------------------------------------------------------------- the rules (more: test_verdicts.py)
def test_a_claim_that_needs_the_authors_definition_is_not_measured_without_it():
    lead = R.claim("lead_share")
    v = R.verdict(lead, m(0.5, 0.45, 0.55), None, [], "its metrics log has no train_loss_first column")
    assert v.verdict == R.NOT_MEASURED and "train_loss_first" in v.why and lead.command in v.why
    assert v.command == lead.command
    assert R.verdict(lead, m(0.5, 0.45, 0.55), m(math.nan), []).verdict == R.NOT_MEASURED


@pytest.mark.parametrize("c", R.CLAIMS, ids=[c.key for c in R.CLAIMS])
def test_every_claim_not_measured_names_its_command(c):
    v = R.verdict(c, None, None, [])
    assert v.verdict == R.NOT_MEASURED and c.command in v.why and v.command == c.command
    assert c.command.startswith("interp ")


def test_a_censored_fork_ratio_is_a_bound_that_decides_only_a_bound_claim():
    from interp.mechanisms.intervals import Estimate

    bound = Estimate(30.0, 20.0, math.inf, 3, "test", "log", bound=">=")
    assert R.verdict(R.claim("fork_isotropic"), Measure.of(bound), None, []).verdict == R.REPRODUCED  # above 16
    v = R.verdict(R.claim("fork_v_only"), Measure.of(bound), None, [])  # a bound cannot sit inside 4.6-7.19
    assert v.verdict == R.NOT_REPRODUCED
    low = Estimate(6.0, 2.0, math.inf, 3, "test", "log", bound=">=")
    v = R.verdict(R.claim("fork_v_only"), Measure.of(low), None, [])
    assert v.verdict == R.INCONCLUSIVE and "a bound, not a value" in v.why


def test_setting_differences_name_each_field_and_the_forks_state():
    diffs = R.setting_differences(R.claim("collective_snap"), {"n_layers": [2], "d_model": [128], "k": [10],
                                                               "lr": [0.003], "batch_size": [128]})
    assert diffs == ["n_layers 2 (author 4)", "lr 0.003 (author 0.001)"]
    inside = R.setting_differences(R.claim("scaling"), {"k": [3, 13]})  # a range: ours within the author's
    assert inside == []
    assert "k 3..40 (author 3..36)" in R.setting_differences(R.claim("scaling"), {"k": [3, 40]})
    assert R.FORK_STATE in R.setting_differences(R.claim("fork_v_only"), {})


# ---------------------------------------------------------------------------- the table on planted sources
def test_planted_sources_give_their_own_rows_and_every_verdict():
    a = Gathered("sweeps/a", "sweep", {"n_layers": [4], "n_heads": [4], "d_model": [128], "d_mlp": [512],
                                       "n_bases": [1000], "lr": [1e-3], "batch_size": [128]}, run_path="sweeps/a")
    b = Gathered("sweeps/b", "sweep", {"n_layers": [2]}, run_path="sweeps/b")
    a.ours["scaling"] = m(1.2, 1.15, 1.25)                       # reproduced
    b.ours["scaling"] = m(0.6, 0.5, 0.7)                         # differs: setting (2 layers)
    a.ours["asymmetry"] = m(0.5, 0.4, 0.6)                       # not reproduced in the author's setting
    a.ours["lead_trend"], a.author["lead_trend"] = m(-0.3, -0.4, -0.2), m(0.2, 0.1, 0.3)  # differs: definition
    a.ours["noise_lr"] = m(0.1, -0.2, 0.4)                       # inconclusive
    b.missing["fixed_d"] = "the sweep does not hold D fixed"
    rows = rows_of([a, b])
    by = {}
    for r in rows:
        by.setdefault(r["key"], []).append(r)
    assert {r["key"] for r in rows} == {c.key for c in R.CLAIMS}
    assert [(r["measured_on"], r["verdict"]) for r in by["scaling"]] == [("sweeps/a", R.REPRODUCED),
                                                                         ("sweeps/b", R.DIFFERS_SETTING)]
    assert by["asymmetry"][0]["verdict"] == R.NOT_REPRODUCED
    assert by["lead_trend"][0]["verdict"] == R.DIFFERS_DEFINITION
    (fixed,) = by["fixed_d"]
    assert fixed["verdict"] == R.NOT_MEASURED and "sweeps/b: the sweep does not hold D fixed" in fixed["why"]
    assert fixed["command"] == R.claim("fixed_d").command
    assert {r["verdict"] for r in rows} == set(R.VERDICTS)


def _judged(table) -> dict:
    g = Gathered("synthetic", "sweep")
    table_claims(g, table)
    return {r["key"]: r for r in rows_of([g])}


def test_the_sweep_fits_are_judged_on_synthetic_sweeps_with_a_known_truth():
    rows = _judged(power_law_sweep(delta=1.2, sigma=0.02))
    assert rows["scaling"]["verdict"] == R.REPRODUCED and rows["scaling"]["value"] == pytest.approx(1.2, abs=0.05)
    assert _judged(power_law_sweep(delta=0.6, sigma=0.02))["scaling"]["verdict"] == R.NOT_REPRODUCED
    assert _judged(fixed_d_sweep(slope=0.0))["fixed_d"]["verdict"] == R.REPRODUCED
    assert _judged(fixed_d_sweep(slope=0.8, sigma=0.02))["fixed_d"]["verdict"] == R.NOT_REPRODUCED
    noisy = _judged(noise_sweep(lr_exponent=0.6, batch_exponent=-0.5))
    # tau_window (the author's) and tau_half (ours) scale alike here: both agree, so reproduced
    assert noisy["noise_lr"]["verdict"] == R.REPRODUCED and math.isfinite(noisy["noise_lr"]["author_value"])
    assert noisy["noise_batch"]["verdict"] == R.REPRODUCED
    assert _judged(asymmetry_sweep(ratio=2.5))["asymmetry"]["verdict"] == R.REPRODUCED
    assert _judged(asymmetry_sweep(ratio=0.5))["asymmetry"]["verdict"] == R.NOT_REPRODUCED
    # a table without the author's logged columns: the lead rows are not measured, and say why
    lead = rows["lead_share"]
    assert lead["verdict"] == R.NOT_MEASURED and "author" in lead["why"] and lead["command"]


def test_the_fork_rows_come_from_a_family_table():
    import pandas as pd

    from interp.mechanisms.reconcile import _fork_arms

    forks = {"full_batch": ([110], [False], [math.nan]),  # no randomness of its own: one fork
             "isotropic_noise": ([math.nan] * 3, [True] * 3, [2.0, 2.1, 2.05]),  # trapped: censored at 3000
             "measured_noise": ([600, 700, 650], [False] * 3, [1.9, 2.0, 1.95]),
             "v_only_noise": ([550, 600, 575], [False] * 3, [0.95, 1.05, 1.0])}
    rows = [{"run": f"{arm}-s{i}", "status": "done", "fork_step": 100, "arm": arm, "arm_params": "",
             "steps_run": 3000 if cen[i] else int(esc[i]) + 50, "horizon": 3000, "escape_half": esc[i],
             "censored_escape_half": cen[i], "gamma": gam[i], "eval_every": 5}
            for arm, (esc, cen, gam) in forks.items() for i in range(len(esc))]
    g = Gathered("forks/f", "fork family")
    _fork_arms(g, pd.DataFrame(rows))
    assert g.ours["fork_isotropic"].lo >= 16 and math.isinf(g.ours["fork_isotropic"].hi)  # a lower bound
    assert g.ours["fork_v_only"].value == pytest.approx(np.exp(np.mean(np.log([550, 600, 575]))) / 110)
    assert g.ours["fork_gamma_v_only"].value == pytest.approx(1.0, abs=2e-3) and g.ours["fork_gamma_v_only"].n_runs == 3
    both = g.ours["fork_gamma_both"]  # each arm on its own (1.95 and 2.05): the row is one arm's, naming both
    assert both.value in (pytest.approx(1.95, abs=2e-3), pytest.approx(2.05, abs=2e-3)) and both.n_runs == 3
    assert "measured_noise 1.95" in both.detail and "isotropic_noise 2.05" in both.detail
    by = {r["key"]: r for r in rows_of([g])}
    assert by["fork_isotropic"]["verdict"] == R.REPRODUCED and by["fork_gamma_both"]["verdict"] == R.REPRODUCED
    assert by["fork_measured"]["verdict"] == R.REPRODUCED  # 650 / 110 > 1.4: trapped at least as the author's 1.75x
    # the author's forks start from a relapsed state with a held escape: named as setting differences
    assert by["fork_full_batch"]["verdict"] == R.NOT_MEASURED  # no minibatch arm: the mechanism table's row
    g.ours["fork_v_only"] = m(1.2, 1.0, 1.4)
    row = {r["key"]: r for r in rows_of([g])}["fork_v_only"]
    assert row["verdict"] == R.DIFFERS_SETTING and R.FORK_STATE in row["setting"] and R.FORK_ESCAPE in row["setting"]


def test_gamma_in_both_moments_holds_only_if_it_holds_for_each_arm():
    """The relapse family's Gammas (measured_noise 0.77, 0.79; isotropic_noise 4.21, 4.26): their mean (2.5, with an
    interval [-0.71, 5.73] over the four forks) lies in the author's 1.5-2.5, yet neither arm is about 2."""
    import pandas as pd

    from interp.mechanisms.reconcile import _fork_arms

    gammas = {"full_batch": [0.0], "measured_noise": [0.7695, 0.7892, 0.7790],
              "isotropic_noise": [4.2138, 4.2608, 4.2370]}
    rows = [{"run": f"{arm}-s{i}", "status": "done", "fork_step": 400, "arm": arm, "arm_params": "c=1",
             "steps_run": 1500, "horizon": 1500, "escape_half": 100.0, "censored_escape_half": False, "gamma": gam[i]}
            for arm, gam in gammas.items() for i in range(len(gam))]
    g = Gathered("forks/relapse", "fork family")
    _fork_arms(g, pd.DataFrame(rows))
    (row,) = [r for r in rows_of([g]) if r["key"] == "fork_gamma_both"]
    assert row["verdict"] == R.DIFFERS_SETTING and row["value"] == pytest.approx(4.237, abs=1e-3), row
    assert "isotropic_noise 4.24" in row["why"] and "wholly outside" in row["why"]
    assert "measured_noise 0.779" in row["detail"] and row["n_runs"] == 3


def _family_table(gammas: dict, criterion: str | None = None, steps=(100,)):
    """A family table: per arm and fork step, three forks with the given Gammas (arm -> step -> [g0, g1, g2]); full
    batch escapes at 110 steps (one fork: no randomness of its own), every noise arm at 600-700 (a 5.9x ratio),
    under `criterion` when given."""
    import pandas as pd

    rows = []
    for arm, by_step in gammas.items():
        for step in steps:
            gam_of = by_step.get(step, [math.nan] * 3)
            for i, gam in enumerate(gam_of[:1] if arm == "full_batch" else gam_of):
                esc = 110.0 if arm == "full_batch" else [600.0, 700.0, 650.0][i]
                rows.append({"run": f"at{step}-{arm}-s{i}", "status": "done", "fork_step": step, "arm": arm,
                             "arm_params": "", "steps_run": 3000, "horizon": 3000, "escape_half": esc,
                             "censored_escape_half": False, "gamma": gam,
                             **({"escape": esc, "censored_escape": False, "escape_criterion": criterion}
                                if criterion else {})})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("criterion,named", [
    ("loss_first<3,hold=100", "escape loss_first < 3 held 100 steps (author: loss_first < 3.0 held 500 steps)"),
    ("loss_cand<0.5logK", "escape loss_cand < 0.5 log K, no hold (author: loss_first < 3.0 held 500 steps)"),
    ("loss_first<3.0,hold=500", None), ("loss_first<3,hold=1000", None), (None, R.FORK_ESCAPE)])
def test_a_held_escape_is_the_authors_only_with_his_metric_threshold_and_hold(criterion, named):
    """A criterion that holds is not enough: only loss_first < 3.0 held >= 500 steps clears the escape difference;
    any other is named on every fork row with the author's beside it, so a disagreement reads as a setting."""
    from interp.mechanisms.reconcile import _fork_arms

    g = Gathered("forks/f", "fork family")
    g.same.add(R.FORK_STATE)  # a relapsed family: the escape is the only fixed difference left
    _fork_arms(g, _family_table({"full_batch": {}, "v_only_noise": {}}, criterion))
    g.ours["fork_full_batch"] = m(0.1, 0.05, 0.2)
    by = {r["key"]: r for r in rows_of([g])}
    assert "loss_first<" not in str(criterion) or criterion in by["fork_v_only"]["detail"]
    for key in ("fork_v_only", "fork_full_batch"):
        assert by[key]["setting"] == (named or ""), by[key]
    g.ours["fork_v_only"] = m(1.2, 1.0, 1.4)  # not the author's 5.75x
    row = {r["key"]: r for r in rows_of([g])}["fork_v_only"]
    assert row["verdict"] == (R.DIFFERS_SETTING if named else R.NOT_REPRODUCED), row


def test_gamma_is_taken_at_the_earliest_fork_step_with_a_gamma_and_names_its_window():
    """As the trap ratios: Gamma at each arm's earliest fork step that has one (not pooled over fork steps), the step
    and the window in the detail; a window other than the author's T = 2,000 steps is a named setting difference."""
    from interp.mechanisms.reconcile import _fork_arms

    gammas = {"full_batch": {}, "v_only_noise": {100: [0.98, 1.02, 1.0], 300: [3.0, 3.2, 3.1]},
              "measured_noise": {300: [1.9, 2.0, 1.95]},  # no Gamma at 100: its earliest with one is 300
              "isotropic_noise": {100: [2.0, 2.1, 2.05], 300: [5.0, 5.5, 5.25]}}
    g = Gathered("forks/f", "fork family")
    _fork_arms(g, _family_table(gammas, steps=(100, 300)), {"gamma_window": 100, "gamma_every": 10})
    v_only, both = g.ours["fork_gamma_v_only"], g.ours["fork_gamma_both"]
    assert v_only.value == pytest.approx(1.0, abs=1e-3) and v_only.n_runs == 3  # pooled with step 300: about 2
    assert "at fork step 100" in v_only.detail and "over the first 100 steps after the fork" in v_only.detail
    assert "measured_noise 1.95" in both.detail and "isotropic_noise 2.05" in both.detail
    by = {r["key"]: r for r in rows_of([g])}
    window = ("Gamma window: ratio of sums over the first 100 steps after the fork, sampled every 10 steps (author: "
              "over T = 2,000 steps, or the median over steps 100-500)")
    for key in ("fork_gamma_v_only", "fork_gamma_both"):
        assert by[key]["verdict"] == R.REPRODUCED and window in by[key]["setting"], by[key]
    assert window not in by["fork_v_only"]["setting"]  # the window is Gamma's alone
    g = Gathered("forks/f", "fork family")
    _fork_arms(g, _family_table(gammas, steps=(100, 300)), {"gamma_window": 2000, "gamma_every": 1})
    assert "Gamma window" not in {r["key"]: r for r in rows_of([g])}["fork_gamma_v_only"]["setting"]


def _relapse_family(series: dict, steps, relapse: str | None = None):
    """A family (its parent's metrics log: `series`, metric -> {step: value in log K units for loss_cand, nats
    otherwise}) forked at `steps`, made with the relapse criterion `relapse` (None: none recorded)."""
    from types import SimpleNamespace

    class Parent:
        log_k = math.log(10)

        def metric_series(self, *names):
            scale = {"loss_cand": self.log_k}
            return {"step": list(series["loss_cand"]),
                    **{n: [v * scale.get(n, 1.0) for v in series[n].values()] for n in names}}

    return SimpleNamespace(parent=Parent(), design={"steps": list(steps), **({"relapse": relapse} if relapse else {})})


# in log K: solved, relapsed at 50, re-solved from 200, relapsed again from 300
LC = {0: 0.01, 50: 1.5, 100: 1.4, 150: 1.2, 200: 0.3, 250: 0.02, 300: 1.5, 350: 1.5, 400: 1.5, 450: 1.5}


def test_a_family_clears_the_forks_state_only_from_a_relapsed_state():
    """The author forked a collapsed state: a family clears FORK_STATE only when every fork step lies in its parent's
    first relapsed stretch under the family's relapse criterion (as `interp fork --at relapse` takes it)."""
    from interp.mechanisms.reconcile import _relapsed

    held = "loss_cand>0.9logK,hold=100"
    assert _relapsed(_relapse_family({"loss_cand": LC}, [50], held))
    assert _relapsed(_relapse_family({"loss_cand": LC}, [100, 175], held))
    assert not _relapsed(_relapse_family({"loss_cand": LC}, [0, 50], held))  # the solved state before the relapse
    assert not _relapsed(_relapse_family({"loss_cand": LC}, [50, 250], held))  # re-solved after it
    # past the threshold again, but after the parent re-solved: not the first relapsed stretch (relapse_at's)
    assert not _relapsed(_relapse_family({"loss_cand": LC}, [350], held))
    # none recorded: the default criterion (held 200 steps), never met by the first stretch (50..150)
    assert not _relapsed(_relapse_family({"loss_cand": LC}, [50]))


def test_a_family_made_with_a_loss_first_relapse_is_judged_by_that_metric():
    """The family's own relapse criterion decides, not Lc: here loss_first relapses from 100 to 300 while Lc is
    back below 0.9 log K from 200 (`interp fork --at relapse` records the criterion: test_adversarial_relapse)."""
    from interp.mechanisms.reconcile import _relapsed

    first = {s: 3.5 if 100 <= s < 300 else 0.1 for s in LC}
    criterion = "loss_first>3.0,hold=100"
    assert _relapsed(_relapse_family({"loss_cand": LC, "loss_first": first}, [225], criterion))  # Lc 0.3 log K there
    assert not _relapsed(_relapse_family({"loss_cand": LC, "loss_first": first}, [50], criterion))  # Lc relapsed, not it
    assert not _relapsed(_relapse_family({"loss_cand": LC, "loss_first": first}, [225], "loss_cand>0.9logK,hold=100"))


def test_a_sweep_folder_pools_with_a_run_and_names_its_settings(tmp_path, demo_copy):
    from interp.sweeps.sweep import SweepSpec
    from tests.helpers import small_spec
    from tests.synthetic_sweeps import write_sweep_folder

    spec = SweepSpec(base=small_spec(steps=6000, n_bases=24), grid=(("train.lr", (1e-3, 2e-3, 4e-3)),
                                                                    ("seed", (0, 1))), name="noise")
    sweep = write_sweep_folder(tmp_path / "noise", spec, lambda s, rng: 500.0 * (s.train.lr / 1e-3) ** 0.7
                               * math.exp(0.05 * rng.standard_normal()))
    table = reconcile([sweep.path, demo_copy])
    assert [s["kind"] for s in table.sources] == ["sweep", "run"]
    (lr,) = [r for r in table.rows if r["key"] == "noise_lr"]
    assert lr["measured_on"] == str(sweep.path) and lr["n_runs"] == 6 and lr["low"] <= 0.7 <= lr["high"]
    assert math.isfinite(lr["author_value"])  # tau_window, the author's definition for the lr sweep
    assert lr["verdict"] == R.REPRODUCED
    # the lead share: the sweep's runs and the demo each give a row; neither logged the author's columns
    leads = [r for r in table.rows if r["key"] == "lead_share"]
    assert [r["measured_on"] for r in leads] == [str(sweep.path), str(demo_copy)]
    assert all(r["verdict"] == R.NOT_MEASURED and "author" in r["why"] for r in leads)
    assert "n_layers 2 (author 4)" in lr["setting"] and "k 4 (author 20)" in lr["setting"]
    (fork,) = [r for r in table.rows if r["key"] == "fork_v_only"]  # the run is what a fork starts from, never the sweep
    assert fork["verdict"] == R.NOT_MEASURED and fork["command"].startswith(f"interp fork {demo_copy} --at mid")


# ---------------------------------------------------------------------------- the demo
@pytest.fixture(scope="module")
def demo_copy(tmp_path_factory):
    return copy_run(DEMO, tmp_path_factory.mktemp("reconcile") / "demo", cache=False)  # no cache: nothing measured


def test_the_demo_has_every_row_and_says_what_would_measure_the_rest(demo_copy):
    table = reconcile(demo_copy)
    assert [s["kind"] for s in table.sources] == ["run"]
    keys = [r["key"] for r in table.rows]
    assert set(keys) == {c.key for c in R.CLAIMS} and len(keys) == len(R.CLAIMS)
    for r in table.rows:
        assert r["verdict"] in R.VERDICTS and r["why"]
        if r["verdict"] == R.NOT_MEASURED:
            assert r["command"].startswith("interp ") and "RUN" not in r["command"]
    lead = next(r for r in table.rows if r["key"] == "lead_share")
    # the demo was trained before the author's columns were logged: one line says so; ours is still shown
    assert lead["verdict"] == R.NOT_MEASURED and "train_loss_first" in lead["why"]
    assert lead["value"] == pytest.approx((925 - 475) / 925)
    assert "n_layers 2 (author 4)" in lead["setting"] and "lr 0.003 (author 0.001)" in lead["setting"]
    hessian = next(r for r in table.rows if r["key"] == "saddle")
    assert hessian["command"] == f"interp analyze {demo_copy} --only hessian"
    assert "reconcile" in table.html() and "<script" not in table.html()
    assert "not measured" in table.summary().lower()


def test_the_reports_show_the_table_after_the_mechanism_table(demo_copy):
    from interp.report.mechanisms import mechanism_html
    from interp.runs import Run

    text = mechanism_html(Run.open(demo_copy))  # the section every report's top holds (report_top)
    assert text.index('id="section-mechanisms"') < text.index('id="section-reconcile"')
    for c in R.CLAIMS:
        assert c.claim.replace("'", "&#x27;") in text, c.key


def test_json_round_trip_and_the_command(demo_copy, capsys):
    before = snapshot(demo_copy)
    status, out, err = run_main(["reconcile", str(demo_copy), "--cached", "--json"], capsys)
    assert status == 0 and snapshot(demo_copy) == before  # --cached writes nothing
    d = json.loads(out)
    back = ReconcileTable.from_dict(d)
    assert json.loads(json.dumps(back.to_dict())) == d
    assert [r["verdict"] for r in back.rows] == [r["verdict"] for r in reconcile(demo_copy).rows]
    assert math.isnan(back.rows[0]["value"])  # JSON's null read back as NaN


def test_bad_input_is_one_line_exit_2_and_writes_nothing(demo_copy, tmp_path, capsys):
    before = snapshot(demo_copy)
    not_a_run = tmp_path / "folder"
    not_a_run.mkdir()
    for argv in (["reconcile", str(demo_copy), str(tmp_path / "missing")], ["reconcile", str(demo_copy), str(not_a_run)]):
        status, out, err = run_main(argv, capsys)
        lines = err.strip().splitlines()
        assert status == 2 and len(lines) == 1 and lines[0].startswith("interp: error:") and not out
    assert snapshot(demo_copy) == before


# ---------------------------------------------------------------------------- a real sweep (slow tier)
@pytest.mark.slow
def test_a_tiny_sweep_measures_the_lead_under_both_definitions(tmp_path):
    """Two runs (K = 3, 5) trained with the author's columns logged: the lead share is measured under ours
    and under the author's definition on the same runs, and judged, or, where two runs leave the interval wider
    than the author's scale, named inconclusive (never 'not measured' for want of a number)."""
    import torch

    from interp.sweeps.presets import sweep_spec
    from interp.sweeps.sweep import Sweep, train_sweep

    torch.set_num_threads(1)  # the tiers share the 2 cores
    spec = sweep_spec("scaling-tiny", fields={"task.k": "3,5", "train.stop_after_snap": "300", "train.eval_every": "10"},
                      grid=["seed=0"])
    sweep = Sweep.create(tmp_path / "sweep", spec)
    train_sweep(sweep, threads=1, progress=False)
    table = reconcile(sweep.path)
    (lead,) = [r for r in table.rows if r["key"] == "lead_share"]
    assert lead["measured_on"] == str(sweep.path) and lead["n_runs"] == 2
    assert math.isfinite(lead["value"]) and math.isfinite(lead["author_value"]), lead
    # two runs are measured under both definitions but decide nothing: the row says how many it needs, and the
    # command adds seeds to this sweep
    assert lead["verdict"] == R.NOT_MEASURED and "2 runs (seeds), needs 3" in lead["why"], lead
    assert lead["command"].startswith("interp sweep") and str(sweep.path) in lead["command"]
    assert lead["author_def"] != "not measured" and "k 3..5" not in lead["setting"]  # within the author's K range
    for key in ("lead_trend", "lead_exponent"):  # need 3 values of K: not measured, with the reason and a command
        (row,) = [r for r in table.rows if r["key"] == key]
        assert row["verdict"] == R.NOT_MEASURED and "landauer-dense-wide-tiny" in row["command"]
