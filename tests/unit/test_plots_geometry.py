"""Geometry figures from hand-made tables (what is drawn where, and refusals)."""

import numpy as np
import pandas as pd
import pytest

from interp.errors import InterpError
from interp.plots import geometry


def hessian_table() -> pd.DataFrame:
    rows = []
    for step, lmax, lmin in ((100, 50.0, -1.0), (400, 80.0, -0.5), (900, 30.0, 0.2)):
        for which, vals in (("top", (lmax, lmax / 2)), ("bottom", (lmin, lmin + 0.1))):
            for rank, v in enumerate(vals):
                rows.append(dict(step=step, which=which, rank=rank, eigenvalue=v, residual=1e-6, converged=True,
                                 lambda_max=lmax, lambda_min=lmin, anisotropy=lmax / abs(lmin), restrict="all"))
    return pd.DataFrame(rows)


def escape_table() -> pd.DataFrame:
    rows = []
    for step, head_mass in ((100, 0.2), (400, 0.7)):
        rest = 1.0 - head_mass
        for comp, part, layer, head, mass in (
            ("L0H3", "all", 0, 3, head_mass), ("L0H3", "W_Q", 0, 3, head_mass / 2), ("L0H3", "W_K", 0, 3, head_mass / 2),
            ("embed", "all", None, None, rest / 2), ("embed", "W_E", None, None, rest / 2),
            ("L0H0", "all", 0, 0, rest / 2), ("L0H0", "W_Q", 0, 0, rest / 2),
        ):
            rows.append(dict(step=step, component=comp, part=part, layer=layer, head=head, mass=mass))
    df = pd.DataFrame(rows)
    df["layer"] = df["layer"].astype("Int64")
    df["head"] = df["head"].astype("Int64")
    return df


def llc_table() -> pd.DataFrame:
    rows = []
    for step in (100, 400, 900):
        for restrict, base in (("full", 10.0), ("L0H3", 1.0), ("L0H1", 0.5)):
            vals = base * step / 100 + np.array([-0.1, 0.1])
            for chain, v in enumerate(vals):
                rows.append(dict(step=step, restrict=restrict, chain=chain, llc=v, llc_mean=vals.mean(),
                                 llc_std=vals.std()))
    return pd.DataFrame(rows)


def test_signed_log_is_odd_monotone_and_linear_near_zero():
    x = np.array([-100.0, -1.0, -0.01, 0.0, 0.01, 1.0, 100.0])
    y = geometry.signed_log(x, 0.1)
    assert np.all(np.diff(y) > 0)
    np.testing.assert_allclose(y, -y[::-1])
    assert y[3] == 0.0
    assert geometry.signed_log(0.001, 0.1) == pytest.approx(0.001 / 0.1 / np.log(10), rel=0.01)


def test_eigenvalue_curves_draw_both_extremes_with_real_unit_ticks():
    fig = geometry.eigenvalue_curves(hessian_table(), tau=400, onsets={"L0H3": 300, "never": None}, linthresh=0.1)
    names = [t.name for t in fig.data]
    assert names[0] == "λ_max" and "λ_min" in names
    lmin = next(t for t in fig.data if t.name == "λ_min")
    assert list(lmin.x) == [100, 400, 900]
    np.testing.assert_allclose(lmin.customdata, [-1.0, -0.5, 0.2])
    np.testing.assert_allclose(lmin.y, geometry.signed_log([-1.0, -0.5, 0.2], 0.1))
    ticks = dict(zip(fig.layout.yaxis.tickvals, fig.layout.yaxis.ticktext))
    assert ticks[0.0] == "0" and "-1" in ticks.values() and "100" in ticks.values()
    lines = [s for s in fig.layout.shapes if s.type == "line" and s.x0 == s.x1]
    assert sorted(s.x0 for s in lines) == [300, 400]  # the onset and tau; None onsets are skipped


def test_eigenvalue_curves_refuse_mixed_restrictions():
    df = pd.concat([hessian_table(), hessian_table().assign(restrict="L0H3")])
    with pytest.raises(InterpError, match="several restrictions"):
        geometry.eigenvalue_curves(df)
    fig = geometry.eigenvalue_curves(df, restrict="L0H3")
    assert "L0H3" in fig.layout.title.text
    with pytest.raises(InterpError, match="lacks the column"):
        geometry.eigenvalue_curves(df.drop(columns=["converged"]))


def test_anisotropy_curve_is_one_value_per_step_on_a_log_axis():
    fig = geometry.anisotropy_curve(hessian_table(), tau=400)
    (trace,) = fig.data
    assert list(trace.x) == [100, 400, 900]
    np.testing.assert_allclose(trace.y, [50.0, 160.0, 150.0])
    assert fig.layout.yaxis.type == "log"


def test_escape_heatmap_rows_are_components_in_model_order():
    fig = geometry.escape_heatmap(escape_table(), tau=400, highlight="L0H3")
    (heat,) = fig.data
    assert list(heat.y) == ["embed", "L0H0", "L0H3"]
    assert list(heat.x) == [100, 400]
    np.testing.assert_allclose(np.asarray(heat.z)[:, 1], [0.15, 0.15, 0.7])
    np.testing.assert_allclose(np.asarray(heat.z).sum(0), [1.0, 1.0])
    detail = geometry.escape_heatmap(escape_table(), detail=True)
    assert list(detail.data[0].y) == ["embed W_E", "L0H0 W_Q", "L0H3 W_Q", "L0H3 W_K"]


def test_llc_curves_split_whole_model_and_heads_with_error_bars():
    fig = geometry.llc_curves(llc_table(), tau=400, highlight="L0H3")
    names = [t.name for t in fig.data]
    assert names == ["full", "L0H1", "L0H3"]
    full = fig.data[0]
    np.testing.assert_allclose(full.y, [10.0, 40.0, 90.0])
    np.testing.assert_allclose(full.error_y.array, [0.1, 0.1, 0.1])
    assert fig.data[1].yaxis != full.yaxis  # heads on their own panel
    only_heads = geometry.llc_curves(llc_table().query("restrict != 'full'"))
    assert [t.name for t in only_heads.data] == ["L0H1", "L0H3"]
    with pytest.raises(InterpError, match="empty"):
        geometry.llc_curves(llc_table().iloc[0:0])


@pytest.mark.parametrize("grid", [None, (2, 2)])
def test_the_fast_vertical_line_draws_what_plotlys_does(grid):
    """`style.vline` (one layout update) gives the figure JSON of plotly's `add_vline`, on a single plot and on
    subplots where one is empty (left out, as plotly does), next to shapes and annotations already there."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from interp.plots.style import vline

    def figure():
        fig = go.Figure() if grid is None else make_subplots(rows=grid[0], cols=grid[1], subplot_titles=["a", "b", "c", "d"])
        cells = [(None, None)] if grid is None else [(1, 1), (1, 2), (2, 2)]  # (2, 1) stays empty
        for row, col in cells:
            fig.add_trace(go.Scatter(x=[0, 5], y=[1, 2]), row=row, col=col)
        fig.add_hline(y=1.5, line=dict(color="grey"))
        fig.add_annotation(x=1, y=1, text="here")
        return fig

    plotly, ours = figure(), figure()
    for x, name in ((2, "tau"), (3.5, "onset L0H1")):
        plotly.add_vline(x=x, name=name, line=dict(color="black", dash="dot", width=1.5))
        vline(ours, x, name=name, line=dict(color="black", dash="dot", width=1.5))
    if grid:  # one subplot only
        plotly.add_vline(x=4, row=1, col=1, name="one", line=dict(width=1))
        vline(ours, 4, row=1, col=1, name="one", line=dict(width=1))
    assert ours.to_json() == plotly.to_json()
    assert len(ours.layout.shapes) == (3 + 2 * 3 + 1 if grid else 1 + 2)  # the line at 1.5 on each non-empty subplot
