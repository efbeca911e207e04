"""Forks and optimizers (issue 51: 2): a `continue` fork of an SGD run is its parent bit for bit (the replayed
state holds SGD's buffer); the `optimizer` arm switches the optimizer with a fresh state, records both, and its
first update is SGD's written out by hand; a fork switching optimizers resumes bit for bit; a parent trained with
gradient clipping takes the full-gradient arm clipped the same way; the arms and measures that need Adam's moments
are refused for SGD. The independent arithmetic is tests/fork_arithmetic.py's."""

from __future__ import annotations

import pytest
import torch

from interp.checkpoints import read_resume
from interp.errors import InterpError
from interp.forks.arm_steps import clip_like_torch, fork_stepper
from interp.forks.arms import make_arm
from interp.forks.fork import create_fork, fork
from interp.run_layout import RESUME_FILE
from interp.runs import Run
from interp.train import train
from tests.fork_arithmetic import EVERY_STEP, _adamw, _gradient, _names, _spec

AT = 20
SGD = dict(optimizer="sgd", momentum=0.9, lr=0.05)


@pytest.fixture(scope="module")
def parents(tmp_path_factory) -> dict[str, Run]:
    torch.set_num_threads(2)  # as every test runs (tests/conftest.py): replays must match it
    root = tmp_path_factory.mktemp("optimizer-forks")
    made = {}
    for name, extra in (("adamw", {}), ("sgd", SGD), ("clipped", dict(grad_clip=0.05))):
        made[name] = Run.create(root / name, _spec(**extra).override(steps=30))
        train(made[name], progress=False)
    return {name: Run.open(run.path) for name, run in made.items()}


def test_a_continue_fork_of_an_sgd_run_is_its_parent(parents, tmp_path):
    parent = parents["sgd"]
    run = fork(parent, AT, "continue", steps=10, out=tmp_path / "cont", progress=False)
    assert run.spec.train.optimizer == "sgd" and "parent_optimizer" not in run.fork
    mine, theirs = run.state_dict(30), parent.state_dict(30)
    assert all(torch.equal(mine[n], theirs[n]) for n in theirs)


def test_the_optimizer_arm_starts_sgd_fresh_and_its_first_step_is_sgds(parents, tmp_path):
    parent = parents["adamw"]
    arm = make_arm("optimizer", name="sgd", momentum=0.9, lr=0.05)
    assert arm.label == "optimizer:name=sgd,lr=0.05,momentum=0.9"
    folder = tmp_path / "sgd"
    create_fork(parent, AT, arm, 5, folder, settings=EVERY_STEP)
    run = Run.open(folder)
    assert run.spec.train.optimizer == "sgd" and run.spec.train.momentum == 0.9 and run.spec.train.lr == 0.05
    assert run.fork["parent_optimizer"] == "adamw (betas 0.9,0.999, weight decay 0.01 decoupled)"
    assert run.fork["optimizer"] == "sgd (momentum 0.9, weight decay 0.01 as L2)"
    start = read_resume(folder / RESUME_FILE)
    assert start.optimizer["state"] == {}  # fresh: the parent's moments are not carried (the author's branch)
    train(Run.open(folder), stop_at=AT + 1, progress=False, stepper=fork_stepper)
    run = Run.open(folder)
    gen = torch.Generator()
    gen.set_state(start.generators["batches"])
    rows = run.task.tokens[torch.randint(run.task.size, (run.spec.train.batch_size,), generator=gen)]
    g = _gradient(run, start.params, rows)
    got = run.state_dict(AT + 1)
    for name in _names(run):  # SGD's first step: its buffer is the (L2-decayed) gradient itself
        p = start.params[name].double()
        want = p - 0.05 * (g[name] + 0.01 * p)
        torch.testing.assert_close(got[name].double(), want, rtol=1e-5, atol=1e-6)


def test_a_fork_switching_optimizers_resumes_bit_for_bit(parents, tmp_path):
    parent = parents["adamw"]
    arm = "optimizer:name=rmsprop,momentum=0.5"
    whole = fork(parent, AT, arm, steps=20, out=tmp_path / "whole", progress=False)
    cut_folder = tmp_path / "cut"
    create_fork(parent, AT, make_arm("optimizer", name="rmsprop", momentum=0.5), 20, cut_folder)
    train(Run.open(cut_folder), stop_at=AT + 15, progress=False, stepper=fork_stepper)
    resumed = fork(parent, AT, arm, steps=20, out=cut_folder, progress=False)
    assert resumed.steps == whole.steps and (resumed.status or {}).get("state") == "done"
    a, b = whole.state_dict(AT + 20), resumed.state_dict(AT + 20)
    assert all(torch.equal(a[n], b[n]) for n in a)
    # and the switch matters: AdamW's own minibatch fork is elsewhere
    other = fork(parent, AT, "minibatch", steps=20, out=tmp_path / "mb", progress=False)
    assert not torch.equal(other.state_dict(AT + 20)["embed.W_E"], a["embed.W_E"])


def test_a_clipped_parent_takes_the_full_gradient_clipped(parents, tmp_path):
    parent = parents["clipped"]
    folder = tmp_path / "fb"
    create_fork(parent, AT, make_arm("full_batch"), 5, folder, settings=EVERY_STEP)
    start = read_resume(folder / RESUME_FILE)
    train(Run.open(folder), stop_at=AT + 1, progress=False, stepper=fork_stepper)
    run = Run.open(folder)
    g = _gradient(run, start.params)
    norm = float(sum((t**2).sum() for t in g.values()).sqrt())
    assert norm > 0.05  # the clip binds
    clipped = {n: t * (0.05 / (norm + 1e-6)) for n, t in g.items()}
    expected = _adamw(run, start, clipped, clipped, run.spec.train.lr_at(AT + 1))
    got = run.state_dict(AT + 1)
    for name, (p, _, _, _) in expected.items():
        if name == "blocks.0.attn.b_K":  # its gradient is rounding error (test_forks.py), scaled by Adam
            continue
        torch.testing.assert_close(got[name].double(), p, rtol=1e-5, atol=1e-7)


def test_clip_like_torch_is_torchs_clip():
    gen = torch.Generator().manual_seed(0)
    grads = [torch.randn(5, 3, generator=gen), torch.randn(7, generator=gen)]
    params = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    torch.nn.utils.clip_grad_norm_(params, 0.5)
    for p, c in zip(params, clip_like_torch(grads, 0.5)):
        assert torch.equal(p.grad, c)
    assert all(torch.equal(a, b) for a, b in zip(clip_like_torch(grads, 1e9), grads))  # a clip that does not bind


def test_adam_only_arms_and_gamma_are_refused_for_sgd(parents, tmp_path):
    parent = parents["sgd"]
    with pytest.raises(InterpError, match="arm v_only_noise feeds Adam's two moments .* trains with sgd"):
        create_fork(parent, AT, make_arm("v_only_noise"), 5, tmp_path / "v")
    with pytest.raises(InterpError, match="--gamma-every 5: Gamma measures against the clean shadow's Adam update"):
        create_fork(parent, AT, make_arm("minibatch"), 5, tmp_path / "g", gamma_every=5)
    with pytest.raises(InterpError, match="optimizer adam takes no weight decay"):
        create_fork(parents["adamw"], AT, make_arm("optimizer", name="adam", weight_decay=0.01), 5, tmp_path / "a")
    assert not any(tmp_path.iterdir())  # nothing written
    made = create_fork(parents["adamw"], AT, make_arm("optimizer", name="adam"), 5, tmp_path / "adam")
    assert made.spec.train.weight_decay == 0.0  # Adam has none: the arm says so rather than refusing
    with pytest.raises(InterpError, match="arm optimizer: name must be one of adamw, adam-l2, adam, sgd, rmsprop"):
        make_arm("optimizer", name="lion")
