"""The independent arithmetic the fork tests check the library against: a tiny plateau spec, the full
gradient by an explicit chunked loop, AdamW's step by hand in float64 (tests/integration/test_forks.py,
test_optimizer_forks.py)."""

from __future__ import annotations

import torch

from interp.metrics import batch_loss
from interp.model import build_model
from interp.presets import preset
from interp.runs import Run
from interp.task import VOCAB_SIZE

CHUNK = 100  # examples per chunk of the independent full gradient (520 examples; the library uses 512 + 8)
EPS = 1e-8  # torch.optim.AdamW's default, which training uses
EVERY_STEP = {"checkpoint_every": 1, "checkpoint_dtype": "float32", "eval_every": 1}


def _spec(**overrides):
    return preset("tiny").override(n_bases=130, k=4, n_layers=1, d_model=32, d_head=8, n_heads=2, d_mlp=64,
                                   steps=60, eval_every=10, checkpoint_every=10, eval_size=32, batch_size=16,
                                   stop_after_snap=None, dense_until=0, **overrides)


def _names(run: Run) -> list[str]:
    return [n for n, _ in _model(run).named_parameters()]


def _model(run: Run, params: dict | None = None):
    model = build_model(run.spec.model, run.task.layout.length, VOCAB_SIZE)
    if params is not None:
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(params[name])
    return model.train()


def _gradient(run: Run, params: dict, rows: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """The gradient (float64) of the mean training loss over `rows` (None: the whole training set),
    by an explicit loop over chunks, each weighted by its share of the rows."""
    model = _model(run, params)
    tokens = run.task.tokens if rows is None else rows
    n = tokens.shape[0]
    total = {name: torch.zeros(p.shape, dtype=torch.float64) for name, p in model.named_parameters()}
    for lo in range(0, n, CHUNK):
        part = tokens[lo : lo + CHUNK]
        model.zero_grad(set_to_none=True)
        batch_loss(model, part, run.task.layout.loss_pos).backward()
        for name, p in model.named_parameters():
            total[name] += p.grad.double() * (part.shape[0] / n)
    return total


def _moments(run: Run, state) -> dict[str, tuple]:
    """name -> (exp_avg, exp_avg_sq, step counter) of a state, in float64."""
    slots = state.optimizer["state"]
    return {name: (slots[i]["exp_avg"].double(), slots[i]["exp_avg_sq"].double(), int(slots[i]["step"].item()))
            for i, name in enumerate(_names(run))}


def _adamw(run: Run, state, grad_m: dict, grad_v: dict, lr: float, params: dict | None = None,
           moments: dict | None = None) -> dict[str, tuple]:
    """One torch.optim.AdamW step by hand, in float64 (decoupled weight decay, bias correction from
    the step counter) from `state` (or the given parameters and moments): name -> (param, exp_avg,
    exp_avg_sq, step counter after it)."""
    t = run.spec.train
    b1, b2, wd = t.beta1, t.beta2, t.weight_decay
    params = state.params if params is None else params
    moments = _moments(run, state) if moments is None else moments
    out = {}
    for name in _names(run):
        m0, v0, k = moments[name]
        k += 1
        m = b1 * m0 + (1 - b1) * grad_m[name]
        v = b2 * v0 + (1 - b2) * grad_v[name] ** 2
        p = params[name].double() * (1 - lr * wd)
        p = p - (lr / (1 - b1**k)) * m / ((v / (1 - b2**k)).sqrt() + EPS)
        out[name] = (p, m, v, k)
    return out
