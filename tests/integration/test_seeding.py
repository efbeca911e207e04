"""One seed fixes data, initialisation and batch order; different seeds differ; nothing global."""

import torch

from interp.model import build_model
from interp.runs import Run
from interp.seeding import torch_generator
from interp.task import VOCAB_SIZE
from interp.train import train
from tests.helpers import cloned_params, small_spec


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_same_seed_same_initial_weights_and_other_seeds_differ():
    spec = small_spec().model
    a = cloned_params(build_model(spec, 16, VOCAB_SIZE, seed=5))
    torch.manual_seed(123)  # the global RNG must not matter
    b = cloned_params(build_model(spec, 16, VOCAB_SIZE, seed=5))
    c = cloned_params(build_model(spec, 16, VOCAB_SIZE, seed=6))
    assert _same(a, b)
    weights = [k for k in a if k.rsplit(".", 1)[-1].startswith("W_")]
    assert weights and all(not torch.equal(a[k], c[k]) for k in weights)


def test_building_a_model_leaves_the_global_rng_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    build_model(small_spec().model, 16, VOCAB_SIZE, seed=9)
    assert torch.equal(torch.rand(3), expected)


def test_same_seed_same_trained_weights(tmp_path):
    # batch 128: large enough for the CPU's embedding backward to run multi-threaded, whose
    # accumulation order is not fixed unless training asks for deterministic algorithms
    spec = small_spec(steps=12, eval_every=6, checkpoint_every=6, batch_size=128)
    runs = [Run.create(tmp_path / name, spec) for name in ("a", "b")]
    for run in runs:
        train(run, progress=False)
    a, b = (r.state_dict(12) for r in runs)
    assert _same(a, b)
    assert not _same(a, runs[0].state_dict(0))  # training moved the weights


def test_seed_changes_data_init_and_batch_order(tmp_path):
    a = Run.create(tmp_path / "a", small_spec(seed=1))
    b = Run.create(tmp_path / "b", small_spec(seed=2))
    assert not torch.equal(a.task.tokens, b.task.tokens)
    order = lambda seed: torch.randint(100, (16,), generator=torch_generator(seed, "batches"))  # noqa: E731
    assert not torch.equal(order(1), order(2))
    assert torch.equal(order(1), order(1))
