"""Vectorised metrics against a per-example loop, and against models with known answers."""

import math

import pytest
import torch
from jaxtyping import TypeCheckError

from interp.metrics import PER_EXAMPLE, candidate_nll, evaluate_examples, summarize
from interp.model import ModelSpec
from interp.task import Task, TaskSpec
from tests.helpers import LookupModel, loop_metrics, random_model


SHAPE = ModelSpec(n_layers=2, n_heads=2, d_model=32, d_head=16, d_mlp=64, init_std=0.5)


def test_shape_annotations_are_checked_at_runtime():
    with pytest.raises(TypeCheckError):
        candidate_nll(torch.zeros(3, 4), torch.zeros(5, dtype=torch.long))


@pytest.mark.parametrize("chunk_size", [7, 4096])
def test_vectorised_metrics_equal_a_per_example_loop(small_task, chunk_size):
    model = random_model(small_task, SHAPE, dtype=torch.float64)
    idx = torch.tensor([0, 3, 5, 8, 13, 21, 30, 47])
    alt = small_task.other_selectors(idx, torch.Generator().manual_seed(1))
    with torch.no_grad():
        fast = evaluate_examples(model, small_task, idx, alt, chunk_size=chunk_size)
        slow = loop_metrics(model, small_task, idx, alt)
    assert set(fast) == set(PER_EXAMPLE) == set(slow)
    for name in PER_EXAMPLE:
        torch.testing.assert_close(fast[name].double(), torch.tensor(slow[name], dtype=torch.float64),
                                   atol=1e-6, rtol=0, msg=name)
    # the random model is far from the floor, so the comparison is not between constants
    assert fast["loss_cand"].std() > 0.05 and fast["shuffle_gap"].abs().max() > 1e-3
    # the full-target gap differs from the first-token one: it also scores a2..a4 and EOS
    assert (fast["shuffle_gap_full"] - fast["shuffle_gap"]).abs().max() > 1e-3


def test_shuffle_gap_refuses_the_correct_selector(small_task):
    model = random_model(small_task, SHAPE, dtype=torch.float64)
    idx = torch.arange(4)
    with pytest.raises(ValueError, match="never"):
        evaluate_examples(model, small_task, idx, small_task.selector_id[idx])


def test_a_model_that_ignores_z_sits_exactly_at_log_k():
    task = Task.generate(TaskSpec(k=5, n_bases=8), seed=0)
    model = LookupModel(task, see_z=False)
    idx = torch.arange(task.size)
    alt = task.other_selectors(idx, torch.Generator().manual_seed(0))
    m = summarize(evaluate_examples(model, task, idx, alt))
    assert m["loss_cand"] == pytest.approx(math.log(5), abs=1e-4)
    assert m["loss_cand_first"] == pytest.approx(math.log(5), abs=1e-4)
    assert m["loss_first"] == pytest.approx(math.log(5), abs=1e-4)
    assert m["shuffle_gap"] == pytest.approx(0.0, abs=1e-6)
    assert m["shuffle_gap_full"] == pytest.approx(0.0, abs=1e-6)
    # the continuation after the first token is deterministic given B and a1
    assert m["loss"] == pytest.approx(math.log(5) / 5, abs=1e-4)


def test_a_model_that_reads_z_is_exact():
    task = Task.generate(TaskSpec(k=5, n_bases=8), seed=0)
    model = LookupModel(task, see_z=True)
    idx = torch.arange(task.size)
    alt = task.other_selectors(idx, torch.Generator().manual_seed(0))
    m = summarize(evaluate_examples(model, task, idx, alt))
    assert m["loss_cand"] == pytest.approx(0.0, abs=1e-6)
    assert m["acc_cand"] == m["acc_first"] == m["acc_exact"] == 1.0
    # a selector the model has never seen with this base gives no information: large gap
    assert m["shuffle_gap"] > 5


def test_full_target_gap_sees_z_read_after_the_first_token():
    # z ignored for a1 but read for a2..EOS: the first-token gap misses it, the full gap does not
    task = Task.generate(TaskSpec(k=5, n_bases=8, unique_first=False), seed=0)
    model = LookupModel(task, see_z=True, blind_first=True)
    idx = torch.arange(task.size)
    alt = task.other_selectors(idx, torch.Generator().manual_seed(0))
    m = summarize(evaluate_examples(model, task, idx, alt))
    assert m["shuffle_gap"] == pytest.approx(0.0, abs=1e-6)
    assert m["shuffle_gap_full"] > 1.0


@pytest.mark.parametrize("direction", ["a_to_b", "az_to_b", "b_to_a"])
def test_other_directions_leave_undefined_metrics_nan(direction):
    task = Task.generate(TaskSpec(k=3, n_bases=5, direction=direction), seed=0)
    model = random_model(task, SHAPE, dtype=torch.float64)
    idx = torch.arange(task.size)
    alt = task.other_selectors(idx, torch.Generator().manual_seed(0)) if task.has_selector else None
    with torch.no_grad():
        m = summarize(evaluate_examples(model, task, idx, alt))
    assert math.isnan(m["loss_cand"]) == (not task.has_candidates)
    assert math.isnan(m["shuffle_gap"]) == (not task.has_selector)
    assert math.isnan(m["shuffle_gap_full"]) == (not task.has_selector)
    assert math.isfinite(m["loss"]) and math.isfinite(m["loss_first"])
