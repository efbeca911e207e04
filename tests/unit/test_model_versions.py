"""interp.model, the one place that knows the TransformerLens version (issue 35): checkpoint-format
parameters on either version, the same initial weights, and a one-line refusal of other versions.
Run under TL 3.9 (the default venv) and under TL 4 (tests/tl4_env.sh), they check both paths."""

from __future__ import annotations

import importlib.metadata

import pytest
import torch

from interp.checkpoints import checkpoint_bytes, load_params
from interp.errors import InterpError
from interp.fastpath.objective import training_loss
from interp.metrics import batch_loss
from interp.model import (ModelSpec, build_model, call_with, copy_model, initial_params, is_bridge, native_optimizer_state,
                          native_params, tl_apply, tl_major, tl_module, tl_named_parameters, tl_optimizer_state,
                          tl_param_shapes, tl_params)
from interp.task import VOCAB_SIZE

SPEC = ModelSpec(n_layers=2, n_heads=2, d_model=16, d_head=8, d_mlp=32)
N_CTX = 9


def test_the_model_matches_the_installed_transformer_lens():
    model = build_model(SPEC, N_CTX, VOCAB_SIZE)
    assert is_bridge(model) == (tl_major() == 4)
    assert type(model).__name__ == ("TransformerBridge" if tl_major() == 4 else "HookedTransformer")


def test_parameters_have_the_checkpoint_names_and_shapes_on_either_version():
    model = build_model(SPEC, N_CTX, VOCAB_SIZE, seed=1)
    assert {n: tuple(p.shape) for n, p in tl_params(model).items()} == tl_param_shapes(SPEC, N_CTX, VOCAB_SIZE)


def test_the_initial_weights_are_the_drawn_ones_on_either_version():
    """init_params (TL 3) and initial_params (a bridge's start) draw the same numbers, so the same seed gives
    the same weights whatever TransformerLens is installed."""
    model = build_model(SPEC, N_CTX, VOCAB_SIZE, seed=5)
    drawn = initial_params(SPEC, N_CTX, VOCAB_SIZE, 5)
    assert all(torch.equal(p, drawn[n]) for n, p in tl_params(model).items())
    other = initial_params(SPEC, N_CTX, VOCAB_SIZE, 6)
    assert not torch.equal(drawn["blocks.0.attn.W_Q"], other["blocks.0.attn.W_Q"])


def test_loaded_parameters_come_back_unchanged_and_give_the_same_logits():
    params = initial_params(SPEC, N_CTX, VOCAB_SIZE, 2)
    model = build_model(SPEC, N_CTX, VOCAB_SIZE)
    load_params(model, params)
    assert all(torch.equal(p, params[n]) for n, p in tl_params(model).items())
    seeded = build_model(SPEC, N_CTX, VOCAB_SIZE, seed=2)
    assert checkpoint_bytes(model, 0, "float32") == checkpoint_bytes(seeded, 0, "float32")
    tokens = torch.arange(2 * N_CTX).remainder(VOCAB_SIZE).reshape(2, N_CTX)
    assert torch.equal(model(tokens), seeded(tokens))


def test_a_checkpoint_that_does_not_fit_is_refused_in_one_line():
    model = build_model(SPEC, N_CTX, VOCAB_SIZE)
    params = initial_params(SPEC, N_CTX, VOCAB_SIZE, 2)
    params["blocks.0.attn.W_Q"] = params["blocks.0.attn.W_Q"][:1]
    with pytest.raises(InterpError, match="blocks.0.attn.W_Q has shape"):
        load_params(model, params)
    del params["unembed.b_U"]
    with pytest.raises(InterpError, match=r"missing \['unembed.b_U'\]"):
        load_params(model, params)


@pytest.mark.parametrize("found", ["3.8.1", "5.0.0", "2.16.0"])
def test_an_unsupported_transformer_lens_is_refused_naming_the_supported_ones(monkeypatch, found):
    monkeypatch.setattr(importlib.metadata, "version", lambda name: found)
    tl_major.cache_clear()
    try:
        with pytest.raises(InterpError, match=rf"TransformerLens {found} is not supported; supported: .*3\.9.*4\.x"):
            build_model(SPEC, N_CTX, VOCAB_SIZE)
    finally:
        tl_major.cache_clear()


def test_every_checkpoint_parameter_is_a_trained_parameter():
    """The optimizer sees exactly the checkpoint's numbers (TL 4.3's native unembedding bias is a fixed buffer until
    interp.model makes it a parameter), and each gets a gradient."""
    import math

    model = build_model(SPEC, N_CTX, VOCAB_SIZE, seed=3)
    shapes = tl_param_shapes(SPEC, N_CTX, VOCAB_SIZE)
    assert sum(p.numel() for p in model.parameters()) == sum(math.prod(s) for s in shapes.values())
    tokens = torch.arange(2 * N_CTX).remainder(VOCAB_SIZE).reshape(2, N_CTX)
    model(tokens).log_softmax(-1)[:, :, 0].sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_parameters_come_in_hookedtransformers_order_on_either_version():
    """Flat vectors (Hessian eigenvectors, gradients, updates) concatenate tensors in this order on both versions."""
    model = build_model(SPEC, N_CTX, VOCAB_SIZE, seed=1)
    assert list(tl_params(model)) == list(tl_param_shapes(SPEC, N_CTX, VOCAB_SIZE))
    assert [n for n, _ in tl_named_parameters(model)] == list(tl_param_shapes(SPEC, N_CTX, VOCAB_SIZE))


def test_call_with_differentiates_checkpoint_format_tensors_on_either_version():
    """call_with runs the model with checkpoint-layout tensors in place of its own: the same logits, and gradients in
    the checkpoint layout that are the model's own gradients converted (issue 35: the curvature analyses)."""
    model = build_model(SPEC, N_CTX, VOCAB_SIZE, seed=4)
    tokens = torch.arange(3 * N_CTX).remainder(VOCAB_SIZE).reshape(3, N_CTX)
    leaves = {n: t.detach().clone().requires_grad_(True) for n, t in tl_params(model).items()}
    out = call_with(model, leaves, lambda m, x: m(x), tokens)
    assert torch.equal(out, model(tokens))
    grads = dict(zip(leaves, torch.autograd.grad(out.logsumexp(-1).sum(), list(leaves.values()))))
    model(tokens).logsumexp(-1).sum().backward()
    own = dict(model.named_parameters())
    for path, g in native_params(model, grads).items():
        torch.testing.assert_close(g, own[path].grad, rtol=1e-5, atol=1e-6)
    # the fast path reads LayerNorm weights through a bridge's aliases of its parameters: those follow the call too
    fast = dict(zip(leaves, torch.autograd.grad(call_with(model, leaves, training_loss, tokens, (4, 5, 6)),
                                                list(leaves.values()), allow_unused=True)))
    model.zero_grad()
    batch_loss(model, tokens, (4, 5, 6)).backward()
    assert not [name for name, g in fast.items() if g is None]
    for path, g in native_params(model, fast).items():
        torch.testing.assert_close(g, own[path].grad, rtol=1e-5, atol=1e-6)
    zeroed = call_with(model, {"blocks.0.attn.W_Q": torch.zeros_like(leaves["blocks.0.attn.W_Q"])}, lambda m, x: m(x), tokens)
    assert not torch.equal(zeroed, out)
    assert torch.equal(model(tokens), out)  # the model's own parameters are untouched


def test_optimizer_states_are_kept_in_checkpoint_layout_and_load_back():
    """AdamW's moments are saved in the checkpoint's order and shapes on either version (so a state saved under
    TL 3.9 opens under TL 4 and the other way), and load back into the model's own optimizer unchanged."""
    model = build_model(SPEC, N_CTX, VOCAB_SIZE, seed=4)
    tokens = torch.arange(3 * N_CTX).remainder(VOCAB_SIZE).reshape(3, N_CTX)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(tokens).logsumexp(-1).sum().backward()
    optimizer.step()
    saved = tl_optimizer_state(model, optimizer.state_dict())
    shapes = list(tl_param_shapes(SPEC, N_CTX, VOCAB_SIZE).values())
    assert [tuple(slot["exp_avg"].shape) for _, slot in sorted(saved["state"].items())] == shapes
    back = native_optimizer_state(model, saved)
    own = optimizer.state_dict()
    assert back["param_groups"][0]["params"] == own["param_groups"][0]["params"]
    assert all(torch.equal(back["state"][i][k], own["state"][i][k]) for i in own["state"] for k in own["state"][i])
    view = tl_module(model)  # a bridge's parameters in checkpoint layout; a HookedTransformer itself
    assert [n for n, _ in view.named_parameters()] == list(tl_param_shapes(SPEC, N_CTX, VOCAB_SIZE))
    torch.optim.AdamW(view.parameters(), lr=1e-3).load_state_dict(saved)
    with torch.no_grad():
        assert torch.equal(view(tokens), model(tokens))
        assert torch.equal(tl_apply(view, lambda m, x: m(x)[:, -1], tokens), model(tokens)[:, -1])


def test_a_model_copies_while_holding_a_captured_activation():
    """TL 4.3's bridge can keep a forward's pre-LayerNorm residual (a non-leaf tensor that copy.deepcopy refuses);
    copy_model drops it from the copy, which computes the same (the Hessian's float32 copy of a float64 model)."""
    model = build_model(SPEC, N_CTX, VOCAB_SIZE, seed=1)
    tokens = torch.arange(2 * N_CTX).remainder(VOCAB_SIZE).reshape(2, N_CTX)
    if is_bridge(model):  # what its capture hook leaves behind (seen after the Hessian's tests' forwards)
        model.blocks[0].attn._captured_pre_ln_residual = torch.ones(2, N_CTX, SPEC.d_model, requires_grad=True) * 2
    other = copy_model(model)
    with torch.no_grad():
        assert torch.equal(other(tokens), model(tokens))
    assert all(torch.equal(a, b) for a, b in zip(tl_params(other).values(), tl_params(model).values()))
