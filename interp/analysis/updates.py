"""Drift against diffusion in one step: many one-step AdamW updates from one optimizer-complete state.

docs/diagnostics.md: from the state at a saved step (the parameters, AdamW's moments
and step counter: `interp.replay.state_at`, kept or replayed), draw minibatches at the
run's batch size with replacement, as training does, from the analysis's own stream "updates",
in pairs of two independent minibatches; each gives the update u_i = theta' - theta that one
AdamW step (the moments advanced by that minibatch's gradient, the lr of the next training
step, decoupled weight decay, bias correction) would take. The clean update s is the step the
full-training-set gradient g would take from the same state; e = s / ||s||.

Per state: the drift along e, mu_par = <mean u, e>, against its spread over minibatches sd_par
(snr_par = mu_par / sd_par), and the transverse diffusion V_perp = tr Cov(u - <u, e> e), both
as the plain sample estimate over all 2 n_draws updates and as the paired estimate
mean_j ||(u_j1 - u_j2)_perp||^2 / 2 (unbiased from the pairs alone). A plateau held by noise
shows sqrt(V_perp) >> |mu_par| and snr_par < 1.

The updates are computed with the explicit AdamW of `interp.optimizers` (torch.optim.AdamW's
arithmetic, batched over draws; a run trained with another optimizer, docs/runs.md "Optimizers", takes that
optimizer's step instead); gradients one batched backward per minibatch; sums in float64.
Nothing is written and the run's state is untouched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.analysis.common import across_of
from interp.analysis.hvp import deterministic
from interp.analysis.registry import Analysis, Need, Option, positive_int
from interp.errors import InterpError
from interp.optimizers import batched_step, kind_of
from interp.metrics import batch_loss
from interp.runs import Run
from interp.seeding import torch_generator

DEFAULTS: dict = {"n_draws": 64}  # pairs of minibatches: 2 x 64 = 128 one-step updates per state
COLUMNS = ("step", "mu_par", "sd_par", "snr_par", "v_perp", "v_perp_paired", "clean_norm", "mean_update_norm",
           "cos_mean_clean", "n_draws", "batch_size", "source")
CHUNK_PAIRS = 8  # pairs whose updates are formed together (memory: 4 x 2 x CHUNK_PAIRS x n_params floats)
FULL_CHUNK = 512  # examples per chunk of the full-gradient pass


@dataclass
class UpdateState:
    """What the updates are drawn from: a model holding theta, its optimizer (AdamW: moments and step
    counter; never stepped here), the lr of the next step and the training examples."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    lr: float
    tokens: Tensor  # [D, T] on the model's device
    loss_pos: tuple[int, ...]
    batch_size: int

    @property
    def params(self) -> list[Tensor]:
        return [p for group in self.optimizer.param_groups for p in group["params"]]


# ---------------------------------------------------------------------------- the updates
def next_lr(run: Run, step: int) -> float:
    """The lr training takes at step + 1 (a fork's: its parent's schedule, scaled by its changed lr)."""
    tspec = run.spec.train
    if run.fork is None:
        return tspec.lr_at(step + 1)
    schedule = dataclasses.replace(tspec, steps=run.fork["parent_steps"], lr=run.fork["parent_lr"])  # scaled once
    return schedule.lr_at(step + 1) * tspec.lr / run.fork["parent_lr"]


def minibatch_indices(gen: torch.Generator, n_draws: int, n_examples: int, batch_size: int
                      ) -> Int[Tensor, "draws 2 batch"]:
    """The examples of every minibatch, sampled with replacement as training does: [pair, 2, batch]."""
    return torch.randint(n_examples, (n_draws, 2, batch_size), generator=gen)


def minibatch_gradients(st: UpdateState, idx: Int[Tensor, "n batch"]) -> list[Tensor]:
    """Per parameter, the gradients of the n minibatches stacked: [n, *shape] (one backward each)."""
    params = st.params
    out: list[list[Tensor]] = [[] for _ in params]
    device = st.tokens.device
    for rows in idx:
        loss = batch_loss(st.model, st.tokens[rows.to(device)], st.loss_pos)
        for acc, g in zip(out, torch.autograd.grad(loss, params)):
            acc.append(g)
    return [torch.stack(gs) for gs in out]


def full_gradient(st: UpdateState) -> list[Tensor]:
    """The gradient of the mean loss over every training example (chunks weighted by their share)."""
    params, n = st.params, st.tokens.shape[0]
    total = [torch.zeros_like(p) for p in params]
    for lo in range(0, n, FULL_CHUNK):
        part = st.tokens[lo : lo + FULL_CHUNK]
        loss = batch_loss(st.model, part, st.loss_pos) * (part.shape[0] / n)
        for acc, g in zip(total, torch.autograd.grad(loss, params)):
            acc.add_(g)
    return total


@torch.no_grad()
def one_step_updates(st: UpdateState, grads: list[Tensor]) -> Float[Tensor, "n params"]:
    """u = theta' - theta of one optimizer step from the state for each of n gradients (per parameter
    [n, *shape]), flattened in parameter order; the state is untouched (`interp.optimizers.batched_step`: the run's
    own optimizer's arithmetic, AdamW's unless its spec names another)."""
    kind, parts = kind_of(st.optimizer), []
    for group in st.optimizer.param_groups:
        for p in group["params"]:
            g = grads[len(parts)]
            new = batched_step(kind, group, st.optimizer.state.get(p) or {}, p, g, st.lr)
            parts.append((new - p.detach()).reshape(g.shape[0], -1))
    return torch.cat(parts, dim=1)


def clean_update(st: UpdateState) -> Float[Tensor, " params"]:
    """s: the update the full-training-set gradient would take from the state."""
    with deterministic(st.tokens.device):
        g = full_gradient(st)
    return one_step_updates(st, [x.unsqueeze(0) for x in g])[0]


def update_pairs(st: UpdateState, idx: Int[Tensor, "draws 2 batch"], chunk_pairs: int = CHUNK_PAIRS
                 ) -> Iterator[Float[Tensor, "c 2 params"]]:
    """The paired updates of the minibatches `idx`, a chunk of pairs at a time."""
    for lo in range(0, idx.shape[0], chunk_pairs):
        part = idx[lo : lo + chunk_pairs]
        with deterministic(st.tokens.device):
            grads = minibatch_gradients(st, part.reshape(-1, part.shape[-1]))
        yield one_step_updates(st, grads).view(part.shape[0], 2, -1)


# ---------------------------------------------------------------------------- statistics
class _Sums:
    """Float64 running sums of the paired updates, enough for every statistic of the table."""

    def __init__(self, e: Float[Tensor, " params"]):
        self.e = e.double()
        self.sum_u = torch.zeros_like(self.e)
        self.along: list[Tensor] = []  # <u_i, e>, [c, 2] per chunk
        self.perp_sq = torch.zeros((), dtype=torch.float64, device=e.device)
        self.pair_perp_sq = torch.zeros_like(self.perp_sq)
        self.norm_sum = torch.zeros_like(self.perp_sq)

    def add(self, u: Float[Tensor, "c 2 params"]) -> None:
        u = u.double()
        a = u @ self.e  # [c, 2]
        perp = u - a.unsqueeze(-1) * self.e
        self.sum_u += u.sum((0, 1))
        self.along.append(a)
        self.perp_sq += perp.square().sum()
        self.pair_perp_sq += (perp[:, 0] - perp[:, 1]).square().sum()
        self.norm_sum += u.norm(dim=-1).sum()

    def stats(self, s: Float[Tensor, " params"]) -> dict[str, float]:
        a = torch.cat(self.along).reshape(-1)
        n, pairs = a.numel(), a.numel() // 2
        mean_u = self.sum_u / n
        mu = a.mean()
        sd = a.std(correction=1)  # n >= 2: every draw is a pair
        mean_perp = mean_u - mu * self.e
        s64 = s.double()
        out = {
            "mu_par": mu, "sd_par": sd, "snr_par": mu / sd,
            "v_perp": (self.perp_sq - n * mean_perp.square().sum()) / (n - 1),
            "v_perp_paired": self.pair_perp_sq / (2 * pairs),
            "clean_norm": s64.norm(),
            "mean_update_norm": self.norm_sum / n,
            "cos_mean_clean": (mean_u @ s64) / (mean_u.norm() * s64.norm()),
        }
        return {k: float(v) for k, v in out.items()}


def update_stats(st: UpdateState, idx: Int[Tensor, "draws 2 batch"], s: Float[Tensor, " params"],
                 chunk_pairs: int = CHUNK_PAIRS) -> dict[str, float]:
    """The table's statistics of the paired updates of `idx` around the clean update `s` (module docstring)."""
    sums = _Sums(s / s.norm())
    for u in update_pairs(st, idx, chunk_pairs):
        sums.add(u)
    return sums.stats(s)


# ---------------------------------------------------------------------------- run level
def state_of(run: Run, step: int, device: str = "cpu", cache: bool = True) -> tuple[UpdateState, str]:
    """(the UpdateState at a saved `step`, "kept" or "replayed"); InterpError, with state_at's
    reason, when the state cannot be had (a GPU-trained run without kept states, a fork...). With
    `cache`, a replayed state is kept in the run's cache and read back from it (`interp.replay`)."""
    from interp.checkpoints import load_params
    from interp.replay import state_at
    from interp.model import build_model, tl_module, to_device
    from interp.steps import build_optimizer
    from interp.task import VOCAB_SIZE

    state, how = state_at(run, step, cache=cache)
    task, tspec = run.task, run.spec.train
    model = build_model(run.spec.model, task.layout.length, VOCAB_SIZE)
    load_params(model, state.params)
    # TL 4: the bridge's parameters in checkpoint order and shapes, where a saved state's moments are
    model = tl_module(to_device(model, device)).train()
    optimizer = build_optimizer(model, tspec)
    optimizer.load_state_dict(state.optimizer)  # moments move to the parameters' device
    st = UpdateState(model, optimizer, next_lr(run, state.step), task.train_tokens.to(device), task.layout.loss_pos,
                     tspec.batch_size)
    return st, "replayed" if how.startswith("replayed") else "kept"


def _check(n_draws) -> int:
    if isinstance(n_draws, bool) or not isinstance(n_draws, int) or n_draws < 1:
        raise InterpError(f"updates: n_draws must be a positive integer (pairs of minibatches), got {n_draws!r}")
    return n_draws


def raw_updates(run: Run, step: int, n_draws: int = DEFAULTS["n_draws"], device: str = "cpu",
                state_cache: bool = True) -> dict:
    """What `at_step` summarises, whole: {"updates": [n_draws, 2, n_params] float32, "clean": s,
    "indices": the minibatches [n_draws, 2, batch], "lr", "source"} (memory: 2 n_draws x n_params
    floats; for tests and a closer look)."""
    n_draws = _check(n_draws)
    st, source = state_of(run, run.resolve_step(step), device, state_cache)
    idx = minibatch_indices(torch_generator(run.spec.seed, "updates"), n_draws, st.tokens.shape[0], st.batch_size)
    updates = torch.cat(list(update_pairs(st, idx)))
    return {"updates": updates, "clean": clean_update(st), "indices": idx, "lr": st.lr, "source": source}


def at_step(run: Run, step: int, *, model: nn.Module | None = None, device: str = "cpu",
            n_draws: int = DEFAULTS["n_draws"], state_cache: bool = True) -> pd.DataFrame:
    """Drift against diffusion of one AdamW step from the optimizer-complete state at `step`.

    `model` is ignored: the updates start from the state's float32 parameters, not from a
    (possibly float16) checkpoint. One row: step; mu_par (<mean u, e>, parameter units);
    sd_par (sd of <u_i, e> over the 2 n_draws updates, parameter units); snr_par (mu_par /
    sd_par); v_perp (trace of the covariance of u's component perpendicular to e, the sum over
    coordinates, squared parameter units; sample estimate over all updates); v_perp_paired
    (the same from the pairs: mean ||(u_1 - u_2)_perp||^2 / 2); clean_norm (||s||); mean_update_norm
    (mean of ||u_i||); cos_mean_clean (cosine between mean u and s); n_draws (pairs); batch_size;
    source ("kept": a state saved by training; "replayed": recomputed from an earlier one).
    Cost: 2 n_draws minibatch backward passes plus one full-training-set pass, after any replay; a
    replayed state is kept in the run's cache/replayed/ and read back by the next call (`state_cache`
    False: neither, as `interp analyze --no-cache`).
    """
    n_draws = _check(n_draws)
    step = run.resolve_step(step)
    st, source = state_of(run, step, device, state_cache)
    idx = minibatch_indices(torch_generator(run.spec.seed, "updates"), n_draws, st.tokens.shape[0], st.batch_size)
    row = {"step": step, **update_stats(st, idx, clean_update(st)), "n_draws": n_draws,
           "batch_size": st.batch_size, "source": source}
    return pd.DataFrame([row], columns=list(COLUMNS))


across = across_of("updates")
N_DRAWS = Option("n-draws", "n_draws", "updates: pairs of one-step minibatch updates per state (default: 64)",
                 positive_int, metavar="N")
ENTRY = Analysis(
    "updates", __name__, "drift against diffusion: many paired one-step AdamW updates from the optimizer-complete state",
    default=False, stream="updates", steps="pre,mid,post", options=(N_DRAWS,),
    needs=(Need("optimizer_state", "state_cache"),), order=140,
)
