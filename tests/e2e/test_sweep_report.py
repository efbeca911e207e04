"""The sweep report in a real browser: every figure of each family-level finding drawn with no
JavaScript error (on synthetic sweeps with known answers), and one real sweep trained, fitted
and reported end to end through the CLI."""

from pathlib import Path

import pytest

from interp.cli import main
from interp.report.sweep import write_sweep_report
from interp.sweeps.sweep import Sweep
from tests import synthetic_sweeps as syn
from tests.helpers import assert_drawn, copy_run, figures, render

# each finding's figure id -> its synthetic sweep folder (tests/synthetic_sweeps.py)
DESIGNS = {"scaling": "scaling", "fixed_d": "fixed-d", "noise": "noise", "asymmetry": "asymmetry"}
# the real sweep: the small, fast-snapping model of the report tests at three dataset sizes
REAL = ["--preset", "tiny", "--n-bases", "24", "--n-layers", "2", "--n-heads", "2", "--d-model", "32",
        "--d-head", "16", "--d-mlp", "64", "--batch-size", "16", "--lr", "0.003", "--eval-every", "10",
        "--eval-size", "64", "--checkpoint-every", "50", "--steps", "400", "--stop-after-snap", "30",
        "--threads-per-run", "1", "--quiet"]


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory) -> dict:
    return syn.sweep_folders(tmp_path_factory.mktemp("synthetic"))


@pytest.mark.parametrize("design", DESIGNS)
def test_each_finding_is_drawn_in_a_browser(design, sweeps, tmp_path):
    page = write_sweep_report(sweeps[DESIGNS[design]], tmp_path / f"{design}.html")
    text = page.read_text()
    assert 'id="section-summary"' in text and 'id="runs"' in text
    dom = render(page, tmp_path)
    assert_drawn(dom, {f"fig-{design}", "fig-overlay"})
    others = set(DESIGNS) - {design}
    assert not any(f"fig-{o}" in figures(dom) for o in others)  # the other designs say n/a instead


def test_censored_runs_are_flagged_in_the_report(tmp_path):
    # the largest D's runs stop before their plateau ends: censored, as in a real sweep
    from interp.sweeps.sweep import SweepSpec
    from tests.helpers import small_spec

    spec = SweepSpec(base=small_spec(steps=3000, n_bases=24), grid=(("task.k", (3, 4, 6, 8)), ("seed", (0, 1))))
    sweep = syn.write_sweep_folder(tmp_path / "c", spec, lambda s, rng: 10 * s.task.dataset_size if s.task.k < 8
                                   else 10_000.0)
    table = sweep.table()
    slow = table["k"] == 8
    assert table.loc[slow, "censored"].all() and not table.loc[~slow, "censored"].any()
    text = write_sweep_report(sweep, tmp_path / "c.html").read_text()
    assert f"{int(slow.sum())} censored" in text and 'class="censored"' in text
    assert "(censored)" in text


@pytest.fixture(scope="module")
def real_sweep(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("real") / "scaling"
    assert main(["sweep", *REAL, "--grid", "task.k=3,5,8", "--grid", "seed=0,1", "--workers", "2",
                 "--out", str(out)]) == 0
    return out


def test_a_real_sweep_end_to_end(real_sweep, tmp_path, capsys):
    table = Sweep.open(real_sweep).table()
    assert len(table) == 6 and set(table["status"]) == {"done"}
    assert table["tau_half"].notna().all() and not table["censored"].any()
    # the plateau grows with D on average, also for this small model
    per_d = table.groupby("D")["tau_half"].mean()
    assert per_d.iloc[-1] > per_d.iloc[0]
    capsys.readouterr()
    assert main(["scaling", str(real_sweep), "--json"]) == 0
    import json

    fits = json.loads(capsys.readouterr().out)
    delta = fits["results"]["scaling"]
    assert delta["n_used"] == 6 and delta["ci"][0] <= delta["delta"] <= delta["ci"][1]
    assert set(fits["not_applicable"]) == {"fixed_d", "noise", "asymmetry", "cancellation"}
    page = tmp_path / "sweep.html"
    assert main(["report", str(real_sweep), "-o", str(page)]) == 0
    assert_drawn(render(page, tmp_path), {"fig-scaling", "fig-overlay"})


def test_the_circuits_of_a_real_sweep_are_drawn_once_it_is_analysed(real_sweep, tmp_path):
    sweep_dir = tmp_path / "analysed"
    copy_run(real_sweep, sweep_dir)
    before = write_sweep_report(Sweep.open(sweep_dir), tmp_path / "before.html")
    dom = render(before, tmp_path)
    # the lead needs only the metrics; the routing heads and the ablation need the analysis: a note says so
    assert_drawn(dom, {"fig-lead_share", "fig-lead_exponent", "fig-timelines"})
    assert "fig-routing_heads" not in figures(dom) and "interp analyze SWEEP" in before.read_text()
    assert main(["analyze", str(sweep_dir), "--workers", "2", "--quiet"]) == 0
    page = tmp_path / "after.html"
    assert main(["report", str(sweep_dir), "-o", str(page), "--quiet"]) == 0
    text = page.read_text()
    dom = render(page, tmp_path)
    assert_drawn(dom, {"fig-lead_share", "fig-lead_exponent", "fig-routing_heads", "fig-ablation_trend", "fig-timelines",
                 "fig-scaling", "fig-overlay"})
    assert "routing head's z-share" in figures(dom)["fig-timelines"]  # the analysed runs' z-share is drawn
    for name in Sweep.open(sweep_dir).table()["run"]:  # each run row still says how to get its own report
        assert f"<td>{name}</td>" in text and f"interp report {sweep_dir / name} -o" in text
