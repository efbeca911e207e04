"""The sweep report in a real browser: every figure of each family-level finding drawn with no
JavaScript error (on synthetic sweeps with known answers), and one real sweep trained, fitted
and reported end to end through the CLI."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from interp.cli import main
from interp.sweep_report import write_sweep_report
from interp.sweeps.sweep import Sweep
from tests import synthetic_sweeps as syn
from tests.test_report import FIGURE_DIV, figures, js_errors, render

DESIGNS = {
    "scaling": lambda: syn.power_law_sweep(seed=1),
    "fixed_d": lambda: syn.fixed_d_sweep(seed=2),
    "noise": lambda: syn.noise_sweep(seed=3),
    "asymmetry": lambda: syn.asymmetry_sweep(seed=4),
}
# the real sweep: the small, fast-snapping model of the report tests at three dataset sizes
REAL = ["--preset", "tiny", "--n-bases", "24", "--n-layers", "2", "--n-heads", "2", "--d-model", "32",
        "--d-head", "16", "--d-mlp", "64", "--batch-size", "16", "--lr", "0.003", "--eval-every", "10",
        "--eval-size", "64", "--checkpoint-every", "50", "--steps", "400", "--stop-after-snap", "30",
        "--threads-per-run", "1", "--quiet"]


class _SyntheticSweep(Sweep):
    """What the report reads of a sweep (its folder, spec name and axes, table and each run's
    metrics), from a synthetic table instead of trained runs."""

    def __init__(self, path: Path, name: str, table):
        fields = [c for c in ("task.k", "task.n_bases", "train.lr", "train.batch_size", "task.direction", "seed")
                  if c in table.columns]
        self.path, self.spec, self._table = path, SimpleNamespace(name=name, fields=fields), table
        self._runs = [SimpleNamespace(name=run, metrics=m) for run, m in syn.metrics_for(table).items()]

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def runs(self):
        return self._runs

    def table(self):
        return self._table.copy()


def _fake_sweep(path: Path, name: str, table) -> Sweep:
    return _SyntheticSweep(path, name, table)


def _drawn(dom: str, ids: set[str]) -> None:
    count, text = js_errors(dom)
    assert count == 0 and not text.strip(), f"JavaScript errors:\n{text}"
    figs = figures(dom)
    assert ids <= set(figs), (sorted(ids), sorted(figs))
    for div_id in ids:
        html = figs[div_id]
        assert "js-plotly-plot" in FIGURE_DIV.search(html).group(0), f"{div_id} was never handed to plotly"
        assert 'class="main-svg"' in html, f"{div_id} has no rendered SVG"


@pytest.mark.parametrize("design", DESIGNS)
def test_each_finding_is_drawn_in_a_browser(design, tmp_path):
    table = DESIGNS[design]()
    page = write_sweep_report(_fake_sweep(tmp_path / design, design, table), tmp_path / f"{design}.html")
    text = page.read_text()
    assert 'id="section-summary"' in text and 'id="runs"' in text
    dom = render(page, tmp_path)
    _drawn(dom, {f"fig-{design}", "fig-overlay"})
    others = set(DESIGNS) - {design}
    assert not any(f"fig-{o}" in figures(dom) for o in others)  # the other designs say n/a instead


def test_censored_runs_are_flagged_in_the_report(tmp_path):
    # the largest D's runs stop before their plateau ends: censored, as in a real sweep
    rows = [syn.run_row(k, 3.0 * (k * 1000) ** 1.2, seed=s, planned_steps=5_000_000 if k < 36 else 500_000)
            for k in (3, 6, 12, 24, 36) for s in range(3)]
    table = syn.make_table(rows)
    slow = table["D"] == 36_000
    assert table.loc[slow, "censored"].all() and not table.loc[~slow, "censored"].any()
    text = write_sweep_report(_fake_sweep(tmp_path / "c", "c", table), tmp_path / "c.html").read_text()
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
    assert set(fits["not_applicable"]) == {"fixed_d", "noise", "asymmetry"}
    page = tmp_path / "sweep.html"
    assert main(["report", str(real_sweep), "-o", str(page)]) == 0
    _drawn(render(page, tmp_path), {"fig-scaling", "fig-overlay"})
