"""Forks that change the data (issue 51: 3; docs/forks.md, "Forks that change the data"): `reassign` permutes the
targets of a nested share of the bases with no target left in place; `resize` keeps or extends the parent's
strings; `switch_task` continues on another direction from the same strings (a model with too few positions is
refused, a shorter sequence keeps the parent's positions); each starts its optimizer fresh unless told to carry it,
evaluates the fork step on the new data, and a solved model forgets what it is reassigned."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from interp.checkpoints import read_resume
from interp.errors import InterpError
from interp.forks.arms import make_arm, parse_arms
from interp.forks.fork import create_fork, fork
from interp.run_layout import RESUME_FILE
from interp.runs import Run
from interp.spec import TaskSpec
from interp.task import FIRST_CHAR_ID, N_CHARS, Task
from interp.train import train
from tests.helpers import small_spec


def _task(**kw) -> Task:
    spec = TaskSpec(**{"k": 5, "n_bases": 40, **kw})
    spec.validate()
    return Task.generate(spec, seed=2)


def test_reassign_permutes_a_nested_share_of_the_bases_with_no_target_in_place():
    base = _task()
    changed = {}
    for fraction in (0.25, 0.5, 1.0):
        new = _task(reassign_fraction=fraction)
        assert torch.equal(new.bases, base.bases) and torch.equal(new.selector_sets, base.selector_sets)
        moved = (new.targets != base.targets).any(-1)  # [n, K]: which selectors got another target
        groups = set(torch.nonzero(moved.any(1)).squeeze(1).tolist())
        assert len(groups) == math.floor(fraction * 40)
        for g in groups:
            assert bool(moved[g].all())  # none left in place
            assert sorted(map(tuple, new.targets[g].tolist())) == sorted(map(tuple, base.targets[g].tolist()))
        changed[fraction] = groups
    assert changed[0.25] <= changed[0.5] <= changed[1.0]  # nested, as the author's


def test_resize_keeps_the_parents_strings():
    base = _task(k=5)
    fewer = _task(k=3, resized_from=5)
    assert torch.equal(fewer.selector_sets[0], base.selector_sets[0, :3])
    assert torch.equal(fewer.targets, base.targets[:, :3]) and torch.equal(fewer.bases, base.bases)
    more = _task(k=8, resized_from=5)
    assert torch.equal(more.selector_sets[0, :5], base.selector_sets[0]) and torch.equal(more.targets[:, :5], base.targets)
    assert len({tuple(z) for z in more.selector_sets[0].tolist()}) == 8
    every = more.targets.reshape(-1, more.spec.len_a)
    assert len({tuple(t) for t in every.tolist()}) == len(every)  # distinct across the dataset
    assert all(len(set(more.targets[g, :, 0].tolist())) == 8 for g in range(40))  # unique first characters kept
    assert int(more.targets.min()) >= FIRST_CHAR_ID and int(more.targets.max()) < FIRST_CHAR_ID + N_CHARS


@pytest.fixture(scope="module")
def parents(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("data-forks")
    out = {}
    for name, kw in (("az", dict(direction="az_to_b")), ("short", dict(direction="a_to_b"))):
        run = Run.create(root / name, small_spec(steps=20, **kw))
        train(run, progress=False)
        out[name] = run.path
    return out


def test_switch_task_continues_on_the_same_strings_with_a_fresh_optimizer(parents, tmp_path):
    parent = Run.open(parents["az"])
    run = fork(parent, 20, "switch_task:direction=bz_to_a", steps=5, out=tmp_path / "bz", progress=False)
    assert run.spec.task.direction == "bz_to_a" and run.fork["params"] == {"direction": "bz_to_a", "optimizer": "fresh"}
    assert torch.equal(run.task.targets, parent.task.targets) and torch.equal(run.task.bases, parent.task.bases)
    assert read_resume(tmp_path / "bz" / RESUME_FILE).step == 25
    first = next(r for r in run.metric_rows() if r["step"] == 20)
    assert first["loss_cand"] > 0.5 * run.log_k  # evaluated on the new direction at the fork: not learned yet
    carried = tmp_path / "carried"
    create_fork(parent, 20, make_arm("switch_task", direction="bz_to_a", optimizer="carried"), 5, carried)
    assert read_resume(carried / RESUME_FILE).optimizer["state"]  # the parent's moments go on
    fresh = tmp_path / "fresh"
    create_fork(parent, 20, make_arm("switch_task", direction="bz_to_a"), 5, fresh)
    assert read_resume(fresh / RESUME_FILE).optimizer["state"] == {}


def test_a_shorter_or_longer_sequence(parents, tmp_path):
    az = Run.open(parents["az"])  # 16 tokens
    shorter = create_fork(az, 20, make_arm("switch_task", direction="b_to_a"), 5, tmp_path / "b")
    assert shorter.spec.task.sequence_length == 13 and shorter.spec.model.n_ctx == 16  # keeps its positions
    short = Run.open(parents["short"])  # a_to_b: 13 tokens, a model of 13 positions
    with pytest.raises(InterpError, match="the new task's sequences are 16 tokens and .* has 13 positions; train the "
                                          "parent with --n-ctx 16"):
        create_fork(short, 20, make_arm("switch_task", direction="bz_to_a"), 5, tmp_path / "long")
    assert not (tmp_path / "long").exists()


def test_a_solved_model_forgets_what_is_reassigned(snapping_run, tmp_path):
    parent = Run.open(snapping_run)
    last = parent.steps[-1]
    solved = next(r for r in parent.metric_rows() if r["step"] == last)["loss_cand"]
    assert solved < 0.05 * parent.log_k
    run = create_fork(parent, last, make_arm("reassign", fraction=1.0), 5, tmp_path / "re")
    at_fork = next(r for r in run.metric_rows() if r["step"] == last)["loss_cand"]
    assert at_fork > 2 * parent.log_k  # every pairing changed: confidently wrong
    half = create_fork(parent, last, make_arm("reassign", fraction=0.5), 5, tmp_path / "half")
    partial = next(r for r in half.metric_rows() if r["step"] == last)["loss_cand"]
    assert solved < partial < at_fork
    resized = create_fork(parent, last, make_arm("resize", k=2), 5, tmp_path / "k2")
    assert resized.spec.task.k == 2 and resized.spec.task.resized_from == parent.spec.task.k
    kept = next(r for r in resized.metric_rows() if r["step"] == last)["loss_cand"]
    assert kept < 0.05 * math.log(2)  # the candidates it keeps it knows


@pytest.mark.parametrize("text,message", [
    ("reassign:fraction=0", "arm reassign: fraction must be a finite number > 0"),
    ("reassign:fraction=1.5", "arm reassign: fraction must be in (0, 1], got '1.5'"),
    ("switch_task:direction=up", "arm switch_task: direction must be one of bz_to_a, a_to_b, az_to_b, b_to_a"),
    ("resize:k=0", "arm resize: k must be a finite number >= 1"),
    ("reassign:fraction=0.5,optimizer=warm", "arm reassign: optimizer must be one of fresh, carried"),
])
def test_bad_data_arms_are_one_line(text, message):
    with pytest.raises(InterpError) as caught:
        parse_arms(text)
    assert message in str(caught.value)
