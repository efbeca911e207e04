"""Runs trained with each optimizer (issue 51: 2): a resumed run equals the uninterrupted one bit for bit, the
spec says which optimizer, and the resume state holds what that optimizer keeps."""

from __future__ import annotations

import pytest
import torch

from interp.checkpoints import read_resume
from interp.run_layout import RESUME_FILE
from interp.runs import Run
from interp.summary import run_rows, run_summary
from interp.train import train
from tests.helpers import cloned_params, small_spec

# (settings, the state keys each parameter's slot holds after a step)
OPTIMIZERS = {
    "sgd-momentum": (dict(optimizer="sgd", momentum=0.9, lr=0.05), {"momentum_buffer"}),
    "rmsprop-momentum": (dict(optimizer="rmsprop", momentum=0.5), {"step", "square_avg", "momentum_buffer"}),
    "adam-l2": (dict(optimizer="adam-l2"), {"step", "exp_avg", "exp_avg_sq"}),
    "adam": (dict(optimizer="adam", weight_decay=0.0, beta1=0.8), {"step", "exp_avg", "exp_avg_sq"}),
    "adamw-raw": (dict(bias_correction=False, eps=1e-6), {"step", "exp_avg", "exp_avg_sq"}),
}


@pytest.mark.parametrize("case", list(OPTIMIZERS))
def test_resume_is_bit_exact_for_each_optimizer(tmp_path, case):
    settings, keys = OPTIMIZERS[case]
    whole = Run.create(tmp_path / "whole", small_spec(**settings))
    train(whole, progress=False)
    cut = Run.create(tmp_path / "cut", small_spec(**settings))
    train(cut, progress=False, stop_at=35)  # killed after the checkpoint at 20
    assert cut.steps[-1] == 20
    state = read_resume(cut.path / RESUME_FILE)
    assert {k for slot in state.optimizer["state"].values() for k in slot} == keys
    resumed = Run.open(cut.path)
    train(resumed, progress=False)
    a, b = cloned_params(whole.model(40)), cloned_params(resumed.model(40))
    assert all(torch.equal(a[k], b[k]) for k in a), case
    cols = [c for c in whole.metrics if c != "seconds"]
    assert whole.metrics[cols].equals(resumed.metrics[cols])
    recorded = whole.info["spec"]["train"]
    assert recorded.get("optimizer", "adamw") == settings.get("optimizer", "adamw")
    assert ("optimizer" in recorded) == ("optimizer" in settings)  # the default is left out of the spec
    rows = dict(run_rows(run_summary(whole)))
    assert rows["optimizer"].startswith(settings.get("optimizer", "adamw"))


def test_optimizers_train_differently_and_sgd_logs_no_adam_columns(tmp_path):
    runs = {}
    for name, settings in (("adamw", {}), ("sgd", dict(optimizer="sgd", momentum=0.9, lr=0.05))):
        runs[name] = Run.create(tmp_path / name, small_spec(steps=20, **settings))
        train(runs[name], progress=False)
    a, b = cloned_params(runs["adamw"].model(20)), cloned_params(runs["sgd"].model(20))
    assert any(not torch.equal(a[k], b[k]) for k in a)
    assert any(c.startswith("eff_step.") for c in runs["adamw"].metrics)
    assert not any(c.startswith("eff_step.") for c in runs["sgd"].metrics)
    assert "optimizer" not in dict(run_rows(run_summary(runs["adamw"])))  # the paper's AdamW: as before
