"""interp.model, the one place that knows the TransformerLens version (issue 35): checkpoint-format
parameters on either version, the same initial weights, and a one-line refusal of other versions.
Run under TL 3.9 (the default venv) and under TL 4 (tests/tl4_env.sh), they check both paths."""

from __future__ import annotations

import importlib.metadata

import pytest
import torch

from interp.checkpoints import checkpoint_bytes, load_params
from interp.errors import InterpError
from interp.model import ModelSpec, build_model, initial_params, is_bridge, tl_major, tl_param_shapes, tl_params
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


def test_curvature_work_is_refused_on_a_bridge_until_it_is_ported():
    """The Hessian and gradient analyses differentiate HookedTransformer's parameter layout: on a bridge they would
    give wrong numbers, so they are refused in one line there (issue 35) and run unchanged on TL 3."""
    from interp.analysis.params import selection

    model = build_model(SPEC, N_CTX, VOCAB_SIZE, seed=1)
    if is_bridge(model):
        with pytest.raises(InterpError, match="needs TransformerLens 3.9 for now"):
            selection(model)
    else:
        assert selection(model).label == "all"
