"""Hessian extremes against an exact Hessian, finite differences and a known quadratic spectrum."""

import numpy as np
import pandas as pd
import pytest
import torch
from torch.func import grad, jvp

from interp.analysis import common, hessian, lanczos, params, registry
from interp.errors import InterpError
from interp.metrics import batch_loss
from interp.model import build_model, call_with, tl_params
from interp.runs import Run
from interp.task import VOCAB_SIZE, Task
from tests.helpers import random_model, tiny_spec

TINY = tiny_spec(n_bases=4, n_layers=1, d_model=4)


@pytest.fixture(scope="module")
def task() -> Task:
    return Task.generate(TINY.task, seed=1)


@pytest.fixture(scope="module")
def model(task):
    return random_model(task, TINY.model, dtype=torch.float64)


def flat_loss(model, task):
    """The objective as a function of one flat parameter vector (checkpoint order and shapes, on either TL)."""
    base = tl_params(model)
    names, shapes = list(base), [p.shape for p in base.values()]

    def f(flat):
        parts = flat.split([s.numel() for s in shapes])
        named = {n: x.view(s) for n, x, s in zip(names, parts, shapes)}
        return call_with(model, named, batch_loss, task.tokens, task.layout.loss_pos)

    return f, torch.cat([p.detach().reshape(-1) for p in base.values()])


@pytest.fixture(scope="module")
def exact(model, task):
    f, flat = flat_loss(model, task)
    return torch.autograd.functional.hessian(f, flat, vectorize=True)


@pytest.mark.parametrize("method", ["both", "separate"])
def test_extremes_equal_the_exact_hessian(model, task, exact, method):
    assert exact.shape[0] <= 3000
    res = hessian.spectrum(model, task.tokens, task.layout.loss_pos, k=3, dtype="float64", tol=1e-10, method=method)
    w = torch.linalg.eigvalsh(exact).numpy()
    lam_max = abs(w[-1])
    np.testing.assert_allclose(res["top"].values, w[::-1][:3], rtol=1e-4)
    np.testing.assert_allclose(res["bottom"].values, w[:3], rtol=1e-4)
    assert res["lambda_min"] < 0 < res["lambda_max"]
    assert (res["top"].residuals <= 1e-4 * lam_max).all()
    assert (res["bottom"].residuals <= 1e-4 * lam_max).all()
    assert res["top"].converged.all() and res["bottom"].converged.all()
    # the gradient and cos(grad, v_min) against autograd and the exact eigenvector
    f, flat = flat_loss(model, task)
    g = torch.autograd.functional.jacobian(f, flat)
    assert res["grad_norm"] == pytest.approx(float(g.norm()), rel=1e-9)
    v = torch.linalg.eigh(exact).eigenvectors[:, 0]
    assert res["cos_grad_vmin"] == pytest.approx(abs(float(g @ v)) / float(g.norm()), rel=1e-5, abs=1e-8)


def test_hvp_equals_central_difference_of_the_gradient(model, task):
    op = hessian.HessianOperator(model, task.tokens, task.layout.loss_pos, dtype="float64", chunk_size=3)
    f, flat = flat_loss(model, task)
    v = torch.randn(op.dim, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    h = 1e-5
    g_plus = torch.autograd.functional.jacobian(f, flat + h * v)
    g_minus = torch.autograd.functional.jacobian(f, flat - h * v)
    fd = (g_plus - g_minus) / (2 * h)
    hv = op.hvp(v)
    assert float((hv - fd).norm() / fd.norm()) < 1e-6


def test_float32_hvp_is_close_to_float64(model, task):
    op64 = hessian.HessianOperator(model, task.tokens, task.layout.loss_pos, dtype="float64")
    op32 = hessian.HessianOperator(model, task.tokens, task.layout.loss_pos, dtype="float32")
    v = torch.randn(op64.dim, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    a, b = op32.hvp(v), op64.hvp(v)
    assert a.dtype == torch.float64 and float((a - b).norm() / b.norm()) < 1e-4
    assert next(model.parameters()).dtype == torch.float64  # the caller's model is untouched


@pytest.mark.parametrize("forward", ["fast", "hooked"])
@pytest.mark.parametrize("product,graph_mb", [("reverse", 0), ("reverse", 4096), ("forward-over-reverse", 0)])
def test_hvp_variants_equal_the_exact_hessian(model, task, exact, forward, product, graph_mb):
    """Every way of computing H v (fast or hooked forward; double backward with kept or rebuilt
    graphs; forward-over-reverse) gives the exact Hessian's product, in float64 and float32."""
    basis = torch.randn(3, exact.shape[0], generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    for dtype, tol in (("float64", 1e-9), ("float32", 1e-4)):
        op = hessian.HessianOperator(model, task.tokens, task.layout.loss_pos, dtype=dtype, chunk_size=5,
                                     forward=forward, product=product, graph_memory_mb=graph_mb)
        assert op.forward == forward
        for v in basis:
            want = exact @ v
            for _ in range(2):  # the second product reuses kept graphs
                got = op.hvp(v)
                assert float((got - want).norm() / want.norm()) < tol
        assert (op.graph_bytes > 0) == (graph_mb > 0 and product == "reverse")


def test_batched_hvps_equal_the_exact_hessian(model, task, exact):
    op = hessian.HessianOperator(model, task.tokens, task.layout.loss_pos, dtype="float64", chunk_size=7)
    V = torch.randn(4, op.dim, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    got = op.hvps(V)
    want = V @ exact  # exact is symmetric
    assert got.shape == (4, op.dim) and float((got - want).norm() / want.norm()) < 1e-9
    with pytest.raises(InterpError, match="shape"):
        op.hvps(V[:, :-1])


def test_kept_graphs_give_bit_identical_products_within_their_budget(model, task):
    v = torch.randn(sum(p.numel() for p in model.parameters()), generator=torch.Generator().manual_seed(9),
                    dtype=torch.float64)
    rebuilt = hessian.HessianOperator(model, task.tokens, task.layout.loss_pos, dtype="float32", chunk_size=4,
                                      graph_memory_mb=0)
    kept = hessian.HessianOperator(model, task.tokens, task.layout.loss_pos, dtype="float32", chunk_size=4)
    a = rebuilt.hvp(v)
    assert torch.equal(kept.hvp(v), a) and torch.equal(kept.hvp(v), a)
    n_chunks = -(-len(task.tokens) // 4)
    assert len(kept._graphs) == n_chunks and rebuilt.graph_bytes == 0
    # a budget of about one chunk's graph keeps one, and the products stay identical
    one = kept.graph_bytes / n_chunks
    part = hessian.HessianOperator(model, task.tokens, task.layout.loss_pos, dtype="float32", chunk_size=4,
                                   graph_memory_mb=1.5 * one / 2**20)
    assert torch.equal(part.hvp(v), a) and torch.equal(part.hvp(v), a)
    assert 1 <= len(part._graphs) < n_chunks
    kept.release()
    assert kept.graph_bytes == 0 and torch.equal(kept.hvp(v), a)


def test_fast_objective_equals_the_hooked_loss_and_is_refused_with_a_hook(model, task):
    from interp.fastpath.objective import training_loss

    # a 2-layer model too: every position in the first layer, the scored ones in the last
    deep = random_model(task, tiny_spec(n_bases=4, n_layers=2, d_model=8).model, seed=3, dtype=torch.float64)
    for m in (model, deep):
        a = training_loss(m, task.tokens, task.layout.loss_pos)
        b = batch_loss(m, task.tokens, task.layout.loss_pos)
        ga = torch.autograd.grad(a, list(m.parameters()))
        gb = torch.autograd.grad(b, list(m.parameters()))
        assert abs(a.item() - b.item()) < 1e-12
        assert all(torch.allclose(x, y, rtol=1e-10, atol=1e-12) for x, y in zip(ga, gb))
        v = torch.randn(sum(p.numel() for p in m.parameters()), generator=torch.Generator().manual_seed(2),
                        dtype=torch.float64)
        fast, hooked = (hessian.HessianOperator(m, task.tokens, task.layout.loss_pos, dtype="float64", forward=f)
                        for f in ("fast", "hooked"))
        want = hooked.hvp(v)
        assert float((fast.hvp(v) - want).norm() / want.norm()) < 1e-10
    with model.hooks(fwd_hooks=[("blocks.0.hook_resid_pre", lambda x, hook: x)]):
        assert hessian.HessianOperator(model, task.tokens, task.layout.loss_pos).forward == "hooked"
        with pytest.raises(InterpError, match="forward='fast'"):
            hessian.HessianOperator(model, task.tokens, task.layout.loss_pos, forward="fast")
    for bad in ({"forward": "quick"}, {"product": "both"}, {"graph_memory_mb": -1}):
        with pytest.raises(InterpError, match=next(iter(bad))):
            hessian.HessianOperator(model, task.tokens, task.layout.loss_pos, **bad)


def test_lanczos_wrapper_finds_a_known_quadratic_spectrum():
    n = 300
    gen = torch.Generator().manual_seed(0)
    q, _ = torch.linalg.qr(torch.randn(n, n, generator=gen, dtype=torch.float64))
    lam = torch.cat([torch.tensor([-7.0, -3.0, -2.5]), torch.linspace(-1.0, 20.0, n - 6),
                     torch.tensor([40.0, 55.0, 90.0])]).double()
    a = q @ torch.diag(lam) @ q.T
    f = lambda x: 0.5 * x @ a @ x  # noqa: E731
    x0 = torch.randn(n, generator=gen, dtype=torch.float64)

    def matvec(v):
        _, hv = jvp(grad(f), (x0,), (torch.from_numpy(np.asarray(v).reshape(-1)),))
        return hv.numpy()

    top = lanczos.extreme_eigenpairs(matvec, n, 3, "LA", tol=1e-12)
    bottom = lanczos.extreme_eigenpairs(matvec, n, 3, "SA", tol=1e-12)
    np.testing.assert_allclose(top.values, [90.0, 55.0, 40.0], rtol=1e-10)
    np.testing.assert_allclose(bottom.values, [-7.0, -3.0, -2.5], rtol=1e-10)
    assert (top.residuals < 1e-8).all() and (bottom.residuals < 1e-8).all()
    assert top.n_matvec > 0
    top2, bottom2 = lanczos.both_ends(matvec, n, 3, tol=1e-12)  # one run, both ends
    np.testing.assert_allclose(top2.values, [90.0, 55.0, 40.0], rtol=1e-10)
    np.testing.assert_allclose(bottom2.values, [-7.0, -3.0, -2.5], rtol=1e-10)
    assert top2.n_matvec == bottom2.n_matvec
    # the eigenvector of -7 is the first column of q, up to its arbitrary sign
    assert abs(float(torch.from_numpy(bottom.vectors[:, 0]) @ q[:, 0])) == pytest.approx(1.0, abs=1e-8)


def test_non_convergence_is_flagged_not_raised():
    d = torch.linspace(1.0, 2.0, 400).double().numpy()
    res = lanczos.extreme_eigenpairs(lambda v: d * np.asarray(v).reshape(-1), 400, 2, "SA", tol=1e-14, maxiter=1, ncv=5)
    assert not res.converged.all()
    assert np.isnan(res.values[~res.converged]).all()
    top, bottom = lanczos.both_ends(lambda v: d * np.asarray(v).reshape(-1), 400, 2, tol=1e-14, maxiter=1, ncv=6)
    assert not bottom.converged.all() and np.isnan(bottom.residuals[~bottom.converged]).all()


@pytest.mark.parametrize("restrict", ["L0H1", "l0.mlp", "embed", ["L0H0", "unembed"]])
def test_restricted_hessian_is_the_block_of_the_full_one(model, task, exact, restrict):
    op = hessian.HessianOperator(model, task.tokens, task.layout.loss_pos, restrict, dtype="float64")
    idx = params.flat_index(model, restrict)
    assert op.dim == len(idx) < exact.shape[0]
    # random probes: H_SS u for generic u determines the block (any difference shows up)
    probes = torch.randn(op.dim, 3, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    got = torch.stack([op.hvp(u) for u in probes.T], dim=1)
    torch.testing.assert_close(got, exact[idx][:, idx] @ probes, rtol=1e-7, atol=1e-10)


def test_head_selection_is_the_head_slices(model):
    sel = params.selection(model, "l0h1")
    assert sel.label == "L0H1"
    assert set(sel.index) == {f"blocks.0.attn.{p}" for p in params.HEAD_PARTS}
    tensors = tl_params(model)
    for name, idx in sel.index.items():
        marked = torch.zeros(tensors[name].numel(), dtype=torch.bool)
        marked[idx] = True
        expected = torch.zeros(tensors[name].shape, dtype=torch.bool)
        expected[1] = True
        assert torch.equal(marked.view(tensors[name].shape), expected), name
    assert params.selection(model, None).label == "all"
    assert params.selection(model, None).size(tensors) == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("bad", ["L0H2", "L3", "heads", "L0.norm", []])
def test_unknown_restriction_is_refused(model, bad):
    with pytest.raises(InterpError, match="restrict"):
        params.selection(model, bad)


def test_escape_masses_sum_to_one_and_land_in_the_right_slice(model, task):
    res = hessian.spectrum(model, task.tokens, task.layout.loss_pos, k=1, dtype="float64", tol=1e-8)
    esc = res["escape"]
    totals = esc[esc["part"] == "all"]
    assert totals["mass"].sum() == pytest.approx(1.0, abs=1e-12)
    parts = esc[esc["part"] != "all"].groupby("component")["mass"].sum()
    np.testing.assert_allclose(parts[totals["component"]].to_numpy(), totals["mass"].to_numpy(), atol=1e-12)
    assert set(totals["component"]) == {"embed", "L0H0", "L0H1", "L0.mlp", "unembed", "other"}
    # a vector living only in head 1's W_V slice puts all its mass there
    op = hessian.HessianOperator(model, task.tokens, task.layout.loss_pos, dtype="float64")
    full = params.flat_index(model, None)
    wv = params.flat_index(model, "L0H1")
    names = list(tl_params(model))
    offset = sum(p.numel() for n, p in tl_params(model).items() if names.index(n) < names.index("blocks.0.attn.W_V"))
    size = model.blocks[0].attn.W_V.numel()
    v = torch.zeros(len(full), dtype=torch.float64)
    in_wv = wv[(wv >= offset) & (wv < offset + size)]
    v[in_wv] = 1.0
    shapes = {n: tuple(p.shape) for n, p in op.base.items()}
    mass = hessian.escape_masses(v, shapes, op.sel.index)
    row = mass[(mass["component"] == "L0H1") & (mass["part"] == "W_V")]
    assert float(row["mass"].iloc[0]) == pytest.approx(1.0)
    assert int(row["layer"].iloc[0]) == 0 and int(row["head"].iloc[0]) == 1
    assert mass.loc[mass["part"] == "all", "mass"].sum() == pytest.approx(1.0)


def test_same_call_gives_identical_numbers(model, task):
    a = hessian.spectrum(model, task.tokens, task.layout.loss_pos, k=1, seed=3)
    b = hessian.spectrum(model, task.tokens, task.layout.loss_pos, k=1, seed=3)
    assert np.array_equal(a["top"].values, b["top"].values)
    assert np.array_equal(a["bottom"].vectors, b["bottom"].vectors)
    pd.testing.assert_frame_equal(a["escape"], b["escape"])


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, model):
    """A run of the tiny model with two saved checkpoints (no training needed)."""
    run = Run.create(tmp_path_factory.mktemp("hessian") / "run", TINY)
    m = build_model(TINY.model, run.task.layout.length, VOCAB_SIZE, seed=0)
    run.save_checkpoint(0, m)
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(1.1)
    run.save_checkpoint(1, m)
    return run


def test_run_level_tables(tiny_run, monkeypatch):
    out = hessian.at_step(tiny_run, 1, n_examples=None, k=2, dtype="float64", tol=1e-10)
    h, e = out["hessian"], out["hessian_escape"]
    assert list(h.columns) == list(hessian.HESSIAN_COLUMNS)
    assert len(h) == 4 and list(h["which"]) == ["top", "top", "bottom", "bottom"]
    assert list(h["rank"]) == [0, 1, 0, 1]
    top = h[h["which"] == "top"]["eigenvalue"].to_numpy()
    bottom = h[h["which"] == "bottom"]["eigenvalue"].to_numpy()
    assert top[0] >= top[1] and bottom[0] <= bottom[1]
    assert (h["lambda_max"] == top[0]).all() and (h["lambda_min"] == bottom[0]).all()
    assert h["anisotropy"].iloc[0] == pytest.approx(top[0] / abs(bottom[0]))
    assert (h["n_examples"] == tiny_run.task.size).all() and (h["restrict"] == "all").all()
    assert list(e.columns) == list(hessian.ESCAPE_COLUMNS)
    assert str(e["head"].dtype) == "Int64" and str(e["layer"].dtype) == "Int64"
    assert e.loc[e["part"] == "all", "mass"].sum() == pytest.approx(1.0)
    # a model passed in is used as is: run.model is not called
    model = tiny_run.model(1)
    monkeypatch.setattr(tiny_run, "model", lambda *a, **k: pytest.fail("run.model was called"))
    again = hessian.at_step(tiny_run, 1, model=model, n_examples=None, k=2, dtype="float64", tol=1e-10)
    np.testing.assert_allclose(again["hessian"]["eigenvalue"], h["eigenvalue"], rtol=1e-9)


def test_across_escape_mass_and_robustness(tiny_run):
    settings = dict(k=1, dtype="float64", tol=1e-8)
    table = hessian.across(tiny_run, "all", n_examples=6, **settings)
    assert sorted(table["step"].unique()) == [0, 1] and len(table) == 4
    esc = hessian.escape_mass(tiny_run, 0, n_examples=6, restrict="L0H0", **settings)
    assert set(esc["component"]) == {"L0H0"}
    assert esc.loc[esc["part"] == "all", "mass"].sum() == pytest.approx(1.0)
    rob = hessian.robustness(tiny_run, [0], n_examples=(4, 8), **settings)
    assert list(rob["quantity"]) == ["lambda_min", "lambda_max", "anisotropy", "grad_norm", "cos_grad_vmin"]
    assert (rob["n_small"] == 4).all() and (rob["n_large"] == 8).all()
    row = rob.iloc[0]
    assert row["rel_change"] == pytest.approx(abs(row["value_large"] - row["value_small"]) / abs(row["value_large"]))
    with pytest.raises(InterpError, match="n_examples"):
        hessian.at_step(tiny_run, 0, n_examples=10**6)
    with pytest.raises(InterpError, match="unknown Hessian parameter"):
        hessian.across(tiny_run, "all", n_example=5)
    with pytest.raises(InterpError, match="dtype"):
        hessian.at_step(tiny_run, 0, dtype="float16")
    with pytest.raises(InterpError, match="method"):
        hessian.at_step(tiny_run, 0, method="lanczos")


def test_across_defaults_to_the_registry_steps(tiny_run, monkeypatch):
    """steps=None is the registry entry's steps ("transition"), not every checkpoint."""
    asked = []
    monkeypatch.setattr(common, "select_steps", lambda run, steps, **kw: asked.append(steps) or [(1, "")])
    monkeypatch.setattr(hessian, "at_step", lambda run, step, **kw: {
        "hessian": pd.DataFrame({"step": [step]}), "hessian_escape": pd.DataFrame({"step": [step]})})
    assert list(hessian.across(tiny_run)["step"]) == [1]
    hessian.across(tiny_run, "all")
    assert asked == [registry.get("hessian").steps, "all"] and asked[0] != "all"
    assert hessian.DEFAULTS["restrict"] is None  # every parameter the registry passes has its default here


def test_demo_plateau(demo_run):
    """The shipped demo at its plateau (step 400), at small settings (64 examples, k = 1)."""
    run = demo_run
    out = hessian.at_step(run, 400, n_examples=64, k=1)
    h = out["hessian"]
    assert len(h) == 2 and (h["n_params"] == 409128).all()
    assert h["converged"].all()
    assert (h["residual"] <= 1e-3 * h["lambda_max"].abs()).all()
    # measured on this sample (n = 64): lambda_min = -12.17, lambda_max = 66.9; on the whole
    # training set (the default) lambda_min = -4.26, lambda_max = 6.77: the plateau is a saddle
    assert h["lambda_min"].iloc[0] < 0
    e = out["hessian_escape"]
    assert e.loc[e["part"] == "all", "mass"].sum() == pytest.approx(1.0)
