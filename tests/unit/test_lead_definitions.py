"""The lead under both definitions across a family (issue 31 items 1-2): the sweep report's section and
`interp analyze SWEEP`'s lines show ours and the author's on the same runs, each with our interval and the
author's statistic, a family whose runs lack the logged columns says so in one line; the two presets are
SPEC 9.1's protocol and its CPU analog.

The sweeps are real folders with planted metrics logs (tests/synthetic_sweeps.py), the author's columns
written into them here: his t_loss lags tau_half more and more as K grows, the dz onsets are shared, so
his share rises with K while ours stays flat, as SPEC 9.1 describes."""

import json
import math

import pytest

from interp.cli import main
from interp.sweeps.circuit_fits import AUTHOR_NOT_LOGGED, circuit_fits, lead_definitions
from interp.sweeps.presets import SWEEP_PRESETS
from interp.sweeps.sweep import Sweep, SweepSpec
from tests import synthetic_sweeps as syn
from tests.helpers import small_spec

KS = (3, 4, 6, 8, 12)
TAU = 600.0


def _lag(k: int) -> float:
    """The author's t_loss over tau_half: 1.2 at K = 3, rising with log K."""
    return 1.2 + 0.5 * math.log(k / 3)


def _planted(root, name: str, logged: bool) -> Sweep:
    spec = SweepSpec(base=small_spec(steps=3000, n_bases=24), grid=(("task.k", KS), ("seed", (0, 1))), name=name)
    noise = lambda rng: 0.03 * rng.standard_normal()  # noqa: E731
    sweep = syn.write_sweep_folder(root / name, spec, lambda s, rng: TAU * (1 + noise(rng)),
                                   gap_of=lambda s, rng, tau: (0.5 + noise(rng)) * tau)
    if not logged:
        return sweep
    for run in sweep.runs:
        path = run.path / "metrics.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        log_k, t_half = math.log(run.spec.task.k), next(r["step"] for r in rows if r["loss_cand"] < 0.5 * math.log(
            run.spec.task.k))
        onset = next(r["step"] for r in rows if r["shuffle_gap"] > 0.1)
        t_l1 = _lag(run.spec.task.k) * t_half
        for r in rows[1:]:  # the running mean crosses 0.9 log K at t_l1; the in-batch dz opens with ours
            r["train_loss_first"] = log_k * (0.95 if r["step"] < t_l1 else 0.5)
            r["batch_shuffled_loss_first"] = r["train_loss_first"] + (0.3 if r["step"] >= onset else 0.0)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return Sweep.open(sweep.path)


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    root = tmp_path_factory.mktemp("leads")
    return {"logged": _planted(root, "logged", True), "old": _planted(root, "old", False)}


def test_both_definitions_on_the_same_runs_the_authors_share_rises_with_k_and_ours_stays_flat(sweeps):
    table = sweeps["logged"].table()
    ours, author = lead_definitions(circuit_fits(table, n_boot=400), table)
    assert (ours["definition"], author["definition"]) == ("ours", "author")
    assert ours["not_measured"] is None and author["not_measured"] is None
    assert ours["n_used"] == author["n_used"] == 10 and author["n_not_logged"] == 0
    assert ours["sign"] == "flat" and ours["mean_ci"][0] <= 0.5 <= ours["mean_ci"][1]
    assert author["sign"] == "+" and author["slope_ci"][0] > 0
    assert author["per_k"][12] > author["per_k"][3] + 0.1
    # the author's statistic on the same runs: every lead positive here, so its mean is the plain mean
    done = table[table["status"] == "done"]
    stat = author["author_statistic"]
    assert stat["n_positive"] == stat["n"] == 10
    assert stat["mean"] == pytest.approx(done["gap_lead_author"].mean())
    assert stat["sd"] == pytest.approx(done["gap_lead_author"].std(ddof=0))
    assert author["exponent"] is not None and author["exponent"] > ours["exponent"]


def test_the_sweep_report_shows_both_definitions_and_an_old_family_says_why_in_one_line(sweeps, tmp_path):
    from interp.report.sweep import _lead_definitions, write_sweep_report

    page = write_sweep_report(sweeps["logged"], tmp_path / "report.html").read_text()
    section = page[page.index('id="section-lead_definitions"'):]
    section = section[:section.index("</section>")]
    assert "ours (t_loss tau_half, unbiased dz)" in section and "the author&#x27;s (t_loss l1_0.9, in-batch dz)" in section
    assert section.count("over 10 positive of 10") == 2  # the author's statistic beside each of our intervals
    assert "the author (published)" in section and "0.52 ± 0.14" in section and "not measured" not in section
    assert "lead share, the author&#x27;s definition" in page  # the summary row at the top
    old = sweeps["old"].table(circuits=True)
    html = _lead_definitions(circuit_fits(old, n_boot=200), old).html
    assert html.count("not measured") == 1 and html.count("none of these runs") == 1
    assert "ours (t_loss tau_half, unbiased dz)</td><td>0.4" in html  # ours is still shown (0.49)


def test_analyze_sweep_prints_both_definitions_or_the_one_line_reason(sweeps, monkeypatch, capsys):
    import interp.sweeps.analyze as analyze

    def planted(sweep, **_):  # the suite is not run: the lead needs only the metrics logs
        table = sweep.table(circuits=True)
        return analyze.SweepAnalysis(table=table, fits=circuit_fits(table, n_boot=200))

    monkeypatch.setattr(analyze, "analyze_sweep", planted)
    assert main(["analyze", str(sweeps["logged"].path), "--quiet"]) == 0
    out = capsys.readouterr().out
    block = out[out.index("the shuffle gap's lead under both definitions"):].splitlines()
    assert block[1].strip().startswith("ours (t_loss tau_half, unbiased dz): share 0.")
    assert block[2].strip().startswith("the author's (t_loss l1_0.9, in-batch dz): share 0.")
    assert all("the author's statistic: " in line and "least squares on the logs" in line for line in block[1:3])
    assert block[3].strip().startswith("the author (published, SPEC 9.1): 0.52 +- 0.14")
    assert main(["analyze", str(sweeps["old"].path), "--quiet"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "not measured" in line]
    assert lines == [f"    the author's (t_loss l1_0.9, in-batch dz): not measured: {AUTHOR_NOT_LOGGED}"]
    assert main(["analyze", str(sweeps["old"].path), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["lead_definitions"]
    assert got[1]["not_measured"] == AUTHOR_NOT_LOGGED and got[0]["mean"] is not None


def test_landauer_dense_is_the_authors_ten_runs_exactly():
    """SPEC 9.1: landauer_dense_k{3..36}, n_bases 1000, 4L/4H/128/512, AdamW lr 1e-3, wd 0.01, batch 128,
    constant lr, no warmup, no clipping, 50,000 steps, seed 42, one seed per K, logged every 50 steps,
    checkpoints every 100."""
    runs = SWEEP_PRESETS["landauer-dense"].runs()
    assert [p.task.k for _, p, _ in runs] == [3, 5, 7, 10, 13, 17, 20, 25, 30, 36]
    for _, point, _ in runs:
        m, t = point.model, point.train
        assert (point.task.n_bases, point.task.dataset_size) == (1000, 1000 * point.task.k)
        assert (m.n_layers, m.n_heads, m.d_model, m.d_mlp) == (4, 4, 128, 512)
        assert (t.lr, t.weight_decay, t.batch_size, t.schedule, t.warmup_steps, t.grad_clip) == (
            1e-3, 0.01, 128, "constant", 0, None)
        assert (t.steps, point.seed, t.eval_every, t.checkpoint_every) == (50_000, 42, 50, 100)
        assert t.stop_after_snap is None and t.stop_after_exact is None and not t.early_checkpoints  # all 50,000 steps


def test_the_cpu_analog_spans_k_3_to_13_with_seeds_and_dense_evaluations_at_small_k():
    runs = SWEEP_PRESETS["landauer-dense-tiny"].runs()
    ks = sorted({p.task.k for _, p, _ in runs})
    assert ks[0] == 3 and ks[-1] >= 13 and len(ks) >= 4
    for k in ks:
        at = [p for _, p, _ in runs if p.task.k == k]
        assert len({p.seed for p in at}) >= 2
    assert all(p.train.eval_every <= 10 for _, p, _ in runs if p.task.k == 3)


def test_the_wide_family_holds_the_analog_and_reaches_k_20_with_six_seeds():
    """landauer-dense-wide-tiny (issue 46): K = 3..20, six seeds each; its K <= 13, seeds 0-2 runs train the very
    specs of landauer-dense-tiny except the step cap (6000 against 4000, which a constant lr never reads)."""
    wide = {(p.task.k, p.seed): p for _, p, _ in SWEEP_PRESETS["landauer-dense-wide-tiny"].runs()}
    assert sorted({k for k, _ in wide}) == [3, 5, 7, 10, 13, 17, 20]
    assert all(len({s for k2, s in wide if k2 == k}) == 6 for k in (3, 5, 7, 10, 13, 17, 20))
    for _, p, _ in SWEEP_PRESETS["landauer-dense-tiny"].runs():
        w = wide[(p.task.k, p.seed)]
        assert w.train.schedule == "constant" and w.replace("train.steps", p.train.steps) == p
