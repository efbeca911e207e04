"""Notebook displays (`interp.display`, `interp.plots.inline`): what each card says, short reprs,
plotly.js embedded once and never fetched, and showing a run or a sweep without torch."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from interp.analysis import registry
from interp.analysis.cache import ResultCache
from interp.plots import inline
from interp.runs import Run
from interp.sweeps.family import sweep_fits
from interp.sweeps.fits import power_law
from interp.sweeps.sweep import Sweep
from tests.helpers import DEMO, copy_run
from tests.synthetic_sweeps import power_law_sweep, sweep_folders

SCRIPT_SRC = re.compile(r"<script[^>]*\bsrc\s*=", re.I)


@pytest.fixture
def fresh_embed(monkeypatch):
    """A kernel that has shown no figure yet."""
    monkeypatch.setitem(inline._state, "embedded", False)


def test_a_run_card_says_spec_steps_plateau_tau_and_status(tmp_path):
    run = Run.open(copy_run(DEMO, tmp_path / "demo"))
    page = run._repr_html_()
    for text in ("K=10", "n_bases=300", "18 checkpoints", "tau_half = 925", "Lc / log K", "done after"):
        assert text in page, text
    assert "not computed yet" in page  # no sensitivity in the cache: the card says so, computes nothing
    assert not (run.path / "cache").exists()
    assert repr(run).startswith("Run(") and "\n" not in repr(run)


def test_the_run_card_reads_the_routing_head_from_the_cache(tmp_path):
    run = Run.open(copy_run(DEMO, tmp_path / "demo"))
    entry = registry.REGISTRY["sensitivity"]
    rows = [{"step": 1650, "layer": 0, "head": h, "head_name": f"L0H{h}", "z_share": share, "attn_to_z": 0.5}
            for h, share in enumerate([0.1, 0.7, 0.2, 0.05])]
    ResultCache(run).store(entry.cache_key({"n_groups": 7}), 1650, {"sensitivity": pd.DataFrame(rows)})
    page = run._repr_html_()
    assert "L0H1 (z-share 0.700 at step 1650" in page


@pytest.mark.slow
def test_showing_a_run_or_a_sweep_imports_no_torch(tmp_path):
    folders = sweep_folders(tmp_path)
    code = textwrap.dedent(f"""
        import sys
        import interp
        run = interp.Run.open({str(DEMO)!r})
        html, text = run._repr_html_(), repr(run)
        sweep = interp.Sweep.open({str(folders['scaling'].path)!r})
        html += sweep._repr_html_() + repr(sweep)
        assert "tau_half" in html, html
        print("torch" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_a_sweep_card_has_axes_counts_and_the_table_head(tmp_path):
    sweep = Sweep.open(sweep_folders(tmp_path)["scaling"].path)
    page = sweep._repr_html_()
    assert "task.k = 3, 4, 6, 8, 12" in page and "seed = 0, 1, 2" in page
    assert "15: 15 done" in page
    assert page.count("<tr>") >= 10 and "... and 5 more rows" in page  # the head of 15 rows, not all of them
    assert repr(sweep) == f"Sweep({str(sweep.path)!r}, 15 points over task.k, seed)"


def test_a_fit_shows_its_estimate_interval_and_the_papers_value():
    fit = power_law(power_law_sweep(), x="D", n_boot=200)
    text = repr(fit)
    assert text.startswith("PowerLawFit(delta = ") and "\n" not in text and len(text) < 120
    assert f"[{fit.ci[0]:.3g}, {fit.ci[1]:.3g}]" in text and f"{fit.n_used} runs used" in text
    page = fit._repr_html_()
    assert f"delta = {fit.delta:.3g}" in page and "delta: 1.19" in page  # the paper's exponent beside ours
    assert "R^2" in page  # the summary


def test_fits_show_every_result_and_why_the_others_do_not_apply():
    fits = sweep_fits(power_law_sweep())
    page = fits._repr_html_()
    assert "Power law" in page and "fixed_d" in page and "not in this sweep&#x27;s design" in page
    assert repr(fits).startswith("Fits(scaling: PowerLawFit(delta")


def test_plotly_js_is_embedded_once_and_never_fetched(fresh_embed):
    fig = go.Figure(go.Scatter(x=[0, 1], y=[1, 0]))
    first, second = inline.figure_html(fig), inline.figure_html(fig)
    marker = 'typeof window.Plotly === "undefined"'
    assert marker in first and marker not in second
    assert len(first) > 1_000_000 > len(second)  # plotly.js itself is in the first only
    assert not SCRIPT_SRC.search(first + second)
    assert "newPlot" in second and re.search(r'<div id="interp-fig-\w+"', second)


def test_in_a_kernel_plotly_figures_use_the_offline_renderer(fresh_embed, monkeypatch):
    monkeypatch.setattr(pio.renderers, "default", pio.renderers.default)
    inline.install(default=True)
    html = go.Figure(go.Bar(x=[1], y=[2]))._repr_html_()
    assert 'typeof window.Plotly === "undefined"' in html and not SCRIPT_SRC.search(html)
    assert "cdn" not in html.lower().split("plotly.js v")[0]  # no CDN before plotly.js's own text


def test_outside_a_kernel_plotly_settings_are_left_alone(monkeypatch):
    monkeypatch.setattr(pio.renderers, "default", "json")
    inline.install()
    assert pio.renderers.default == "json" and "interp" in pio.renderers


def test_every_object_finds_its_display_by_type():
    # displays are registered under "module:Class" names (interp.presentable), so that registering imports none
    # of the classes: a renamed or moved class must not lose its card or its short repr
    import importlib

    from interp import presentable
    from interp.sweeps import circuit_fits, conditions, fits, forks  # noqa: F401 - the Presentable results

    for kind in (presentable.HTML, presentable.REPR):
        for name in presentable.registered(kind):
            module, cls = name.split(":")
            assert isinstance(getattr(importlib.import_module(module), cls), type), name
    for cls in presentable.Presentable.__subclasses__():
        for kind in (presentable.HTML, presentable.REPR):
            assert presentable.renderer(object.__new__(cls), kind), (cls, kind)
