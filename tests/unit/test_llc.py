"""LLC through devinterp: a regular model's known value, head restrictions, the objective, tables."""

import random
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from interp.analysis import common, llc, params, registry
from interp.errors import InterpError
from interp.metrics import batch_loss
from interp.model import tl_apply, tl_module, tl_params
from interp.runs import Run
from interp.task import Task
from tests.helpers import random_model, tiny_spec

pytest.importorskip("devinterp")

TINY = tiny_spec(n_bases=8, n_layers=2, d_model=8)


@pytest.fixture(scope="module")
def task() -> Task:
    return Task.generate(TINY.task, seed=2)


@pytest.fixture(scope="module")
def model(task):
    return random_model(task, TINY.model)


@pytest.mark.slow  # 4-5 s of SGLD chains (the LLC runs only when asked)
def test_linear_regression_llc_is_half_the_dimension():
    """A regular model at its minimum: the LLC is d / 2."""
    d, n = 8, 2048
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, d, generator=gen)
    y = x @ torch.randn(d, generator=gen) + 0.1 * torch.randn(n, generator=gen)
    w_star = torch.linalg.lstsq(x, y.unsqueeze(1)).solution.squeeze(1)
    model = nn.Linear(d, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(w_star)

    def loss_fn(m, ids):  # rows of the dataset are addressed by index: ids = [i, i]
        i = ids[:, 0]
        return 0.5 * (y[i] - m(x[i]).squeeze(1)).pow(2).unsqueeze(1)

    ids = torch.arange(n).unsqueeze(1).repeat(1, 2)
    res = llc.sample_llc(model, ids, loss_fn, None, seed=0, chains=4, draws=512, epsilon=1e-4, gamma=1.0,
                         n_beta=1000.0, batch_size=64, init_loss_batches=n // 64)
    assert res["llc_mean"] == pytest.approx(d / 2, rel=0.25)
    assert len(res["chain_values"]) == 4 and not res["failed"]
    assert torch.equal(model.weight.detach(), w_star.unsqueeze(0))  # the caller's model is not moved


def test_per_head_restriction_moves_only_that_head(model, task):
    """Along devinterp's own chain, every parameter outside L1H0's slices stays bit-identical."""
    from devinterp.optim import SGMCMC
    from devinterp.slt.lm_loss import make_evaluate_fn
    from devinterp.slt.sampler import sample_single_chain

    masks = llc.param_masks(model, "l1h0")
    assert set(masks) == {f"blocks.1.attn.{p}" for p in params.HEAD_PARTS}
    model = tl_module(model)  # TL 4: the bridge's parameters under the masks' (checkpoint) names, as sample_llc samples
    ref = {n: p.detach().clone() for n, p in model.named_parameters()}
    moved: dict[str, bool] = {}

    def record(*, model, draw, **_):
        for name, p in model.named_parameters():
            if name in masks:
                inside = masks[name].to(torch.bool)
                assert torch.equal(p[~inside], ref[name][~inside]), f"{name} moved outside head 0 at draw {draw}"
                moved[name] = moved.get(name, False) or not torch.equal(p[inside], ref[name][inside])
            else:
                assert torch.equal(p, ref[name]), f"{name} moved at draw {draw}"

    loss_pos = task.layout.loss_pos
    ids = task.tokens[:, : loss_pos[-1] + 2]
    with torch.random.fork_rng():  # devinterp reseeds the global generator
        sample_single_chain(
        model, llc._Examples(ids), make_evaluate_fn(lambda m, x: tl_apply(m, llc.output_token_loss, x, loss_pos)), masks,
        num_draws=5, sampling_method=SGMCMC.sgld,
        sampling_method_kwargs=dict(lr=1e-3, nbeta=10.0, localization=1.0), seed=0, batch_size=8,
        callbacks=[record],
        )
    assert moved and all(moved[n] for n in ("blocks.1.attn.W_Q", "blocks.1.attn.W_O"))
    for name, p in model.named_parameters():  # the reference model itself is untouched
        assert torch.equal(p, ref[name])


def test_head_masks_are_the_head_slices(model):
    masks = llc.param_masks(model, "L0H1")
    params = tl_params(model)
    for name, mask in masks.items():
        expected = torch.zeros(params[name].shape, dtype=torch.bool)
        expected[1] = True
        assert torch.equal(mask.bool(), expected), name
    full = llc.param_masks(model, "FULL")
    assert set(full) == set(params) and all(m is None for m in full.values())


@pytest.mark.parametrize("name,canon", [("full", "full"), ("Full", "full"), ("l0h1", "L0H1"), ("L1h0", "L1H0")])
def test_restriction_names(name, canon):
    assert llc.canonical_restriction(name, 2, 2) == canon


@pytest.mark.parametrize("bad", ["L2H0", "L0H2", "embed", "l0", ""])
def test_unknown_restriction_lists_what_is_allowed(bad):
    with pytest.raises(InterpError, match=r"allowed: 'full' or a head L0H0\.\.L1H1"):
        llc.canonical_restriction(bad, 2, 2)


def test_output_token_loss_is_the_training_objective(model, task):
    loss_pos = task.layout.loss_pos
    ids = task.tokens[:, : loss_pos[-1] + 2]
    per = llc.output_token_loss(model, ids, loss_pos)
    assert per.shape == (len(ids), ids.shape[1] - 1)
    with torch.no_grad():
        assert float(per.mean()) == pytest.approx(float(batch_loss(model, task.tokens, loss_pos)), rel=1e-6)
    # the fast objective (taken here) against the model's own forward (taken with a hook attached)
    with model.hooks(fwd_hooks=[("blocks.0.hook_resid_pre", lambda x, hook: x)]):
        hooked = llc.output_token_loss(model, ids, loss_pos)
    assert llc.fast_objective(model) and torch.allclose(per, hooked, rtol=1e-5, atol=1e-6)


def test_across_defaults_to_the_registry_steps(monkeypatch, tmp_path):
    """steps=None is the registry entry's steps ("transition"), not every checkpoint."""
    run = Run.create(tmp_path / "run", TINY)
    asked = []
    monkeypatch.setattr(common, "select_steps", lambda run, steps, **kw: asked.append(steps) or [(7, "")])
    monkeypatch.setattr(llc, "at_step", lambda run, step, restrict, **kw: pd.DataFrame({"step": [step]}))
    assert list(llc.across(run)["step"]) == [7]
    llc.across(run, [3])
    assert asked == [registry.get("llc").steps, [3]] and asked[0] != "all"
    assert llc.DEFAULTS["restrict"] == llc.RESTRICT


def test_head_masks_are_the_hessians_head_selection(model):
    """The LLC's head masks and the Hessian's restrict="L0H1" are one selection (interp.analysis.params)."""
    masks = llc.param_masks(model, "l0h1")
    sel = params.selection(model, "L0H1")
    assert list(masks) == list(sel.index)
    for name, idx in sel.index.items():
        assert torch.equal(torch.nonzero(masks[name].reshape(-1)).view(-1), idx), name


def test_missing_devinterp_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "devinterp.slt.llc", None)
    with pytest.raises(InterpError, match=r"pip install -e '\.\[landscape\]'"):
        llc._devinterp()


@pytest.mark.slow  # 4-5 s of SGLD chains (the LLC runs only when asked)
def test_sampling_is_reproducible_and_leaves_global_rngs_alone(model, task):
    loss_pos = task.layout.loss_pos
    ids = task.tokens[:, : loss_pos[-1] + 2]
    fn = lambda m, x: llc.output_token_loss(m, x, loss_pos)  # noqa: E731
    # the masks before the states: under the tests' beartype checks, calling a function whose signature
    # has a Sequence hint (params.selection's `restrict`) draws from `random` (beartype's item pick)
    masks = llc.param_masks(model, "L0H0")
    torch.manual_seed(123)
    np.random.seed(5)
    random.seed(9)
    states = torch.random.get_rng_state(), np.random.get_state()[1].copy(), random.getstate()
    kw = dict(seed=1, chains=2, draws=6, batch_size=4, init_loss_batches=2, epsilon=1e-4, gamma=100.0)
    a = llc.sample_llc(model, ids, fn, masks, **kw)
    b = llc.sample_llc(model, ids, fn, masks, **kw)
    assert np.array_equal(a["chain_values"], b["chain_values"])
    assert torch.equal(torch.random.get_rng_state(), states[0])
    assert np.array_equal(np.random.get_state()[1], states[1]) and random.getstate() == states[2]


def test_bad_settings_are_refused(model, task):
    ids = task.tokens[:, :8]
    fn = lambda m, x: llc.output_token_loss(m, x, task.layout.loss_pos)  # noqa: E731
    with pytest.raises(InterpError, match="chains"):
        llc.sample_llc(model, ids, fn, None, chains=0)
    with pytest.raises(InterpError, match="batch_size"):
        llc.sample_llc(model, ids, fn, None, batch_size=10**6)
    with pytest.raises(InterpError, match="epsilon"):
        llc.sample_llc(model, ids, fn, None, epsilon=0.0)


@pytest.mark.slow  # 4-5 s of SGLD chains (the LLC runs only when asked)
def test_demo_table_at_small_settings(demo_run):
    table = llc.at_step(demo_run, 400, restrict=("full", "l0h3"), chains=2, draws=8, batch_size=16,
                        init_loss_batches=2)
    assert list(table.columns) == list(llc.COLUMNS)
    assert len(table) == 4 and list(table["restrict"]) == ["full", "full", "L0H3", "L0H3"]
    assert list(table["chain"]) == [0, 1, 0, 1]
    assert (table["n_params"] == [409128, 409128, 16480, 16480]).all()
    assert np.isfinite(table["llc"]).all()
    for _, grp in table.groupby("restrict"):
        assert grp["llc_mean"].iloc[0] == pytest.approx(grp["llc"].mean())
        assert grp["llc_std"].iloc[0] == pytest.approx(grp["llc"].std(ddof=0))
    summary = llc.summary(table)
    assert list(summary["restrict"]) == ["full", "L0H3"]
    with pytest.raises(InterpError, match="allowed"):
        llc.at_step(demo_run, 400, restrict="L5H0", chains=1, draws=2)
