"""Sweep figures: the expected traces, log axes, the paper's reference, censored runs drawn apart."""

import math
import warnings

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from interp.errors import InterpError
from interp.plots import sweep as plots
from interp.sweeps import paper, scaling
from tests.synthetic_sweeps import asymmetry_sweep, fixed_d_sweep, metrics_for, noise_sweep, power_law_sweep


def _names(fig):
    return [t.name for t in fig.data]


def _one(fig, prefix):
    (trace,) = [t for t in fig.data if t.name and t.name.startswith(prefix)]
    return trace


@pytest.fixture(scope="module")
def censored_fit():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return scaling.power_law(power_law_sweep(planned_steps=400_000))


def test_tau_vs_d(censored_fit):
    fit = censored_fit
    fig = plots.tau_vs_d(fit)
    assert isinstance(fig, go.Figure)
    names = _names(fig)
    assert names[0] == "runs" and names[1].startswith("censored (tau_half > steps run): ")
    assert names[2:] == ["CI lower", "95% CI of the fit", names[4], names[5]]
    assert names[4].startswith("fit: δ = ") and names[5].startswith("paper: δ = 1.19")
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert fig.layout.xaxis.title.text == "dataset size D (examples)"
    assert fig.layout.yaxis.title.text == "τ_half (optimizer steps)"
    runs, cen = fig.data[0], fig.data[1]
    assert len(runs.x) == fit.n_used and len(cen.x) == fit.n_censored
    assert cen.marker.symbol == "triangle-up-open"
    pts = fit.points[fit.points["role"] == "censored"]
    np.testing.assert_allclose(cen.y, pts["steps_run"])           # drawn at steps_run: the value is above
    assert fig.data[3].fill == "tonexty"
    ref = fig.data[5]
    slope = math.log(ref.y[-1] / ref.y[0]) / math.log(ref.x[-1] / ref.x[0])
    assert slope == pytest.approx(paper.PAPER_DELTA)
    fit_line = fig.data[4]
    np.testing.assert_allclose(fit_line.y, fit.predict(fit_line.x), rtol=1e-9)


def test_tau_vs_d_without_the_paper_and_bad_input():
    fig = plots.tau_vs_d(scaling.power_law(power_law_sweep()), paper=False)
    assert _names(fig)[0] == "runs" and not any(n.startswith("paper") for n in _names(fig))
    assert not any(n.startswith("censored") for n in _names(fig))
    with pytest.raises(InterpError, match=r"not a sweep table; fit it first: power_law\(table\)"):
        plots.tau_vs_d(power_law_sweep())
    with pytest.raises(InterpError, match="expected the result of interp.sweeps.scaling.power_law, got FixedDResult"):
        plots.tau_vs_d(scaling.fixed_d(fixed_d_sweep()))


def test_tau_vs_k_fixed_d():
    res = scaling.fixed_d(fixed_d_sweep())
    fig = plots.tau_vs_k_fixed_d(res)
    assert _names(fig)[:2] == ["runs", "mean per K"]
    assert _names(fig)[2].startswith("fit: slope = ") and _names(fig)[2].endswith("(flat)")
    ref = _one(fig, "paper (D = 10,000)")
    assert list(ref.x) == [5, 10, 20, 36] and list(ref.y) == [1600, 1650, 1600, 1600]
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert fig.layout.xaxis.title.text == "K (targets per base)"
    other = plots.tau_vs_k_fixed_d(scaling.fixed_d(fixed_d_sweep(d=5000)))
    flat = _one(other, "flat at the mean")
    assert flat.y[0] == flat.y[1]
    assert not any(n.startswith("paper") for n in _names(other))


def test_tau_vs_noise():
    table = noise_sweep(never=(5e-3,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = scaling.noise(table)
    fig = plots.tau_vs_noise(res)
    for axis in ("xaxis", "xaxis2", "xaxis3", "yaxis", "yaxis2", "yaxis3"):
        assert fig.layout[axis].type == "log"
    assert fig.layout.xaxis.title.text == "learning rate"
    assert fig.layout.xaxis2.title.text == "batch size (examples per step)"
    assert fig.layout.yaxis3.title.text.startswith("examples seen")
    cen = _one(fig, "censored (tau_half > steps run)")
    assert cen.xaxis == "x" and set(cen.x) == {5e-3} and cen.marker.symbol == "triangle-up-open"
    assert _one(fig, "fit vs lr").name.endswith("(+)") and _one(fig, "fit vs batch").name.endswith("(-)")
    ref = _one(fig, "paper (K = 20")
    assert list(ref.x) == sorted(paper.PAPER_LR_TAU) and ref.xaxis == "x"
    assert _one(fig, "paper: lr 0.005 never snaps").y[0] == 50_000
    runs = [t for t in fig.data if t.name == "runs"]
    assert [t.xaxis for t in runs] == ["x", "x2", "x3"] and sum(bool(t.showlegend) for t in runs) == 1
    seen = runs[2]
    part = res.points[(res.points["lr"] == 1e-3) & res.points["used"]]
    np.testing.assert_allclose(sorted(seen.y), sorted(part["tau_half"] * part["batch_size"]))
    no_paper = plots.tau_vs_noise(scaling.noise(noise_sweep(k=10)))
    assert not any(n.startswith("paper") for n in _names(no_paper))


def test_asymmetry_bars():
    table = asymmetry_sweep()
    pick = (table["direction"] == "a_to_b") & (table["seed"] == 1)
    table.loc[pick, "steps_to_exact_99"] = np.nan
    table.loc[pick, "censored_steps_to_exact_99"] = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = scaling.asymmetry(table)
    fig = plots.asymmetry_bars(res)
    names = _names(fig)
    assert names[:4] == ["geometric mean over seeds", "seeds", "seeds", "per-seed ratio"]
    assert names[4].startswith("geometric mean ") and names[5] == "censored a_to_b: ratio > bound"
    assert list(fig.data[0].x) == ["bz_to_a", "a_to_b"]
    assert len(fig.data[3].x) == res.n_pairs == 5
    assert fig.data[5].marker.symbol == "triangle-up-open"
    (band,) = [s for s in fig.layout.shapes if s.name == "paper range"]
    assert (band.y0, band.y1) == paper.PAPER_ASYMMETRY
    assert fig.layout.yaxis2.title.text == "ratio a_to_b / bz_to_a (×)"
    with pytest.raises(InterpError, match="not a sweep table; fit it first: asymmetry"):
        plots.asymmetry_bars(table)


def test_candidate_loss_overlay():
    table = power_law_sweep()
    metrics = metrics_for(table)
    fig = plots.candidate_loss_overlay(metrics, table)
    runs = [t for t in fig.data if not t.name.startswith("log K")]
    levels = [t for t in fig.data if t.name.startswith("log K")]
    assert sorted(t.name for t in runs) == sorted(metrics)
    assert len(levels) == 5 and all(t.line.dash == "dash" for t in levels)
    for t in levels:  # same colour as the runs of that D, at log K
        k = int(t.name.split("K = ")[-1].rstrip(")"))
        assert t.y[0] == pytest.approx(math.log(k))
        assert {r.line.color for r in runs if r.legendgroup == t.legendgroup} == {t.line.color}
    assert len({t.line.color for t in levels}) == 5
    assert fig.layout.xaxis.title.text == "step (optimizer steps)"
    assert fig.layout.yaxis.title.text == "candidate loss (nats)"
    many = power_law_sweep(k_values=tuple(range(2, 40, 3)), seeds=1)
    cont = plots.candidate_loss_overlay(metrics_for(many), many)
    assert _one(cont, "D colour scale").marker.colorbar.title.text == "dataset size D (examples)"
    with pytest.raises(InterpError, match="not in the sweep table"):
        plots.candidate_loss_overlay({"nope": metrics["k3-s0"]}, table)
    with pytest.raises(InterpError, match="lacks the column"):
        plots.candidate_loss_overlay({"k3-s0": pd.DataFrame({"step": [0, 1]})}, table)


def test_figures_take_results_and_results_draw_nothing(censored_fit):
    """Figures depend on results, never the reverse: a result has no figure method, and each
    figure function draws its result."""
    results = [(censored_fit, plots.tau_vs_d), (scaling.fixed_d(fixed_d_sweep()), plots.tau_vs_k_fixed_d),
               (scaling.noise(noise_sweep()), plots.tau_vs_noise), (scaling.asymmetry(asymmetry_sweep()),
                                                                  plots.asymmetry_bars)]
    for result, draw in results:
        assert not hasattr(result, "figure")
        assert isinstance(draw(result), go.Figure)
    for draw in (plots.tau_vs_k_fixed_d, plots.tau_vs_noise):
        with pytest.raises(InterpError, match="not a sweep table"):
            draw(noise_sweep())
