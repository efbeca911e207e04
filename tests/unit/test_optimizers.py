"""The optimizers a run may train with (interp.optimizers, issue 51: 2): each first step equals its formula on the
same gradient, written out by hand; torch's own optimizers are what the spec builds; the batched one-step update
of the diagnostics equals stepping torch's optimizer from the same state; the explicit Adam of the fork arms
follows each Adam variant; settings another optimizer owns are refused; a default spec hashes as before."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from interp.errors import InterpError
from interp.optimizer import explicit_step
from interp.optimizers import RawMomentAdam, batched_step, kind_of, make_optimizer
from interp.spec import OPTIMIZERS, RunSpec, TrainSpec, describe_optimizer, spec_sha256

LR, WD, B1, B2, EPS = 0.01, 0.1, 0.8, 0.95, 1e-8


def _param(seed: int = 0) -> torch.nn.Parameter:
    return torch.nn.Parameter(torch.randn(6, 4, generator=torch.Generator().manual_seed(seed)))


def _grad(seed: int) -> torch.Tensor:
    return torch.randn(6, 4, generator=torch.Generator().manual_seed(100 + seed))


def _spec(**kw) -> TrainSpec:
    base = dict(lr=LR, weight_decay=WD, beta1=B1, beta2=B2)
    spec = TrainSpec(**{**base, **kw})
    spec.validate()
    return spec


def _first_step(spec: TrainSpec, p0: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    p = torch.nn.Parameter(p0.clone())
    opt = make_optimizer([p], spec)
    p.grad = g.clone()
    opt.step()
    return p.detach()


# each optimizer's first step from a fresh state, by hand: (spec settings, the expected parameters)
FIRST_STEPS = {
    "adamw": (dict(optimizer="adamw"), lambda p, g: p * (1 - LR * WD) - LR * g / (g.abs() + EPS)),
    "adam-l2": (dict(optimizer="adam-l2"), lambda p, g: p - LR * (g + WD * p) / ((g + WD * p).abs() + EPS)),
    "adam": (dict(optimizer="adam", weight_decay=0.0), lambda p, g: p - LR * g / (g.abs() + EPS)),
    "adamw-raw": (dict(optimizer="adamw", bias_correction=False),
                  lambda p, g: p * (1 - LR * WD) - LR * (1 - B1) * g / (math.sqrt(1 - B2) * g.abs() + EPS)),
    "adam-l2-raw": (dict(optimizer="adam-l2", bias_correction=False),
                    lambda p, g: p - LR * (1 - B1) * (g + WD * p) / (math.sqrt(1 - B2) * (g + WD * p).abs() + EPS)),
    "sgd": (dict(optimizer="sgd"), lambda p, g: p - LR * (g + WD * p)),
    "sgd-momentum": (dict(optimizer="sgd", momentum=0.9), lambda p, g: p - LR * (g + WD * p)),
    "rmsprop": (dict(optimizer="rmsprop"),
                lambda p, g: p - LR * (g + WD * p) / (math.sqrt(1 - B2) * (g + WD * p).abs() + EPS)),
    "rmsprop-momentum": (dict(optimizer="rmsprop", momentum=0.5),
                         lambda p, g: p - LR * (g + WD * p) / (math.sqrt(1 - B2) * (g + WD * p).abs() + EPS)),
}


@pytest.mark.parametrize("case", list(FIRST_STEPS))
def test_first_step_is_the_formula(case):
    settings, expected = FIRST_STEPS[case]
    p0, g = _param().detach(), _grad(0)
    got = _first_step(_spec(**settings), p0, g)
    assert torch.allclose(got, expected(p0, g), rtol=1e-5, atol=1e-7), (got - expected(p0, g)).abs().max()


def test_second_steps_differ_as_the_optimizers_do():
    """Momentum and bias correction act from the second step: SGD with momentum is p - lr (m b1 + d2) there."""
    p0, g1, g2 = _param().detach(), _grad(1), _grad(2)
    p = torch.nn.Parameter(p0.clone())
    opt = make_optimizer([p], _spec(optimizer="sgd", momentum=0.9))
    p.grad = g1.clone()
    opt.step()
    p1 = p.detach().clone()
    p.grad = g2.clone()
    opt.step()
    buf = 0.9 * (g1 + WD * p0) + (g2 + WD * p1)
    assert torch.allclose(p.detach(), p1 - LR * buf, rtol=1e-5, atol=1e-7)


def test_the_spec_builds_torchs_own_optimizers():
    p = [_param()]
    assert type(make_optimizer(p, _spec(optimizer="adamw"))) is torch.optim.AdamW
    adam = make_optimizer(p, _spec(optimizer="adam-l2"))
    assert type(adam) is torch.optim.Adam and adam.param_groups[0]["weight_decay"] == WD
    assert not adam.param_groups[0]["decoupled_weight_decay"]
    rms = make_optimizer(p, _spec(optimizer="rmsprop", momentum=0.3, eps=1e-6))
    assert type(rms) is torch.optim.RMSprop
    assert (rms.param_groups[0]["alpha"], rms.param_groups[0]["momentum"], rms.param_groups[0]["eps"]) == (B2, 0.3, 1e-6)
    sgd = make_optimizer(p, _spec(optimizer="sgd", momentum=0.9))
    assert type(sgd) is torch.optim.SGD and sgd.param_groups[0]["momentum"] == 0.9
    assert type(make_optimizer(p, _spec(bias_correction=False))) is RawMomentAdam


@pytest.mark.parametrize("case", list(FIRST_STEPS))
def test_batched_step_equals_stepping_the_optimizer(case):
    """From a state three steps in, the diagnostics' one-step update for each of three gradients equals the
    optimizer's own step from a copy of that state."""
    settings = FIRST_STEPS[case][0]
    spec = _spec(**settings)
    p = _param(3)
    opt = make_optimizer([p], spec)
    for i in range(3):
        p.grad = _grad(10 + i)
        opt.step()
    draws = torch.stack([_grad(20 + i) for i in range(3)])
    got = batched_step(kind_of(opt), opt.param_groups[0], opt.state[p], p, draws, LR)
    for i in range(3):
        q = torch.nn.Parameter(p.detach().clone())
        other = make_optimizer([q], spec)
        other.load_state_dict(copy.deepcopy(opt.state_dict()))  # torch shares a loaded state's tensors
        q.grad = draws[i].clone()
        other.step()
        assert torch.allclose(got[i], q.detach(), rtol=1e-6, atol=1e-8), (case, (got[i] - q.detach()).abs().max())


@pytest.mark.parametrize("settings", [dict(optimizer="adamw"), dict(optimizer="adam-l2"),
                                      dict(optimizer="adamw", bias_correction=False),
                                      dict(optimizer="adam-l2", bias_correction=False)])
def test_explicit_adam_follows_each_variant(settings):
    """The fork arms' explicit step (one gradient per moment) equals the optimizer's step when both are the same."""
    spec = _spec(**settings)
    ref, mine = _param(4), _param(4)
    opt_ref, opt_mine = make_optimizer([ref], spec), make_optimizer([mine], spec)
    for i in range(5):
        ref.grad = _grad(30 + i)
        opt_ref.step()
        explicit_step(opt_mine, [_grad(30 + i)], [_grad(30 + i)])
    assert torch.allclose(ref.detach(), mine.detach(), rtol=1e-6, atol=1e-8)


BAD = [
    (dict(optimizer="lion"), "unknown optimizer 'lion'; allowed: adamw, adam-l2, adam, sgd, rmsprop"),
    (dict(optimizer="adamw", momentum=0.9), "momentum 0.9 is SGD's and RMSProp's"),
    (dict(optimizer="sgd", bias_correction=False), "--no-bias-correction applies to Adam's moments"),
    (dict(optimizer="sgd", eps=1e-6), "optimizer sgd divides by nothing"),
    (dict(optimizer="adam"), "optimizer adam takes no weight decay (got 0.1): give --weight-decay 0"),
    (dict(optimizer="sgd", momentum=1.0), "momentum must be < 1"),
    (dict(optimizer="rmsprop", eps=0.0), "eps must be > 0"),
]


@pytest.mark.parametrize("settings,message", BAD)
def test_settings_another_optimizer_owns_are_refused(settings, message):
    with pytest.raises(InterpError, match=message.replace("(", r"\(").replace(")", r"\)")):
        TrainSpec(**{"weight_decay": WD, **settings}).validate()


def test_a_default_spec_hashes_as_before_the_optimizer_fields():
    """Every new field is left out of the spec at its default: the dict, so the hash, of a default run is the one
    written before they existed (its keys are exactly the older ones)."""
    data = RunSpec().to_dict()["train"]
    assert not {"optimizer", "momentum", "eps", "bias_correction"} & set(data)
    assert spec_sha256(RunSpec()) == spec_sha256(RunSpec.from_dict(RunSpec().to_dict()))
    changed = RunSpec().replace("train.optimizer", "sgd").to_dict()["train"]
    assert changed["optimizer"] == "sgd" and spec_sha256(RunSpec().replace("train.optimizer", "sgd")) != spec_sha256(RunSpec())


def test_every_optimizer_is_described():
    for name in OPTIMIZERS:
        spec = _spec(optimizer=name, weight_decay=0.0 if name == "adam" else WD)
        assert describe_optimizer(spec).startswith(name)
    assert describe_optimizer(_spec(optimizer="sgd", momentum=0.9)) == "sgd (momentum 0.9, weight decay 0.1 as L2)"
