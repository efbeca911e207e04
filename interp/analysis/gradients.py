"""Gradient signal and noise at a checkpoint: is the plateau held by noise or by cancellation?

Everything is measured on the training objective, exactly what training minimises: the mean
cross-entropy over the output tokens a1..a4 and EOS (`interp.metrics.batch_loss`); an example's
loss l_i is that mean over its own output tokens, so the objective is the mean of the l_i and
its gradient g the mean of the per-example gradients g_i = grad l_i. Training draws minibatches
of B examples uniformly WITH replacement (`interp.steps`: torch.randint), so a minibatch gradient
g_B is the mean of B independent draws of g_i and

    E||g_B - g||^2 = (1/B) mean_i ||g_i - g||^2,     Var <g_B, v> = (1/B) Var_i <g_i, v>

(population moments over the training set of D examples). What is computed (see
docs/diagnostics.md), from one seeded permutation of the training set whose first `n_examples`
examples are the per-example sample S and whose first `n_full` examples hold S:

- per-example gradients g_i of S (torch.func: vmap over grad of `interp.model.call_with`, in chunks),
  reduced chunk by chunk to sum_i g_i, ||g_i||^2 and <g_i, v> for each direction v;
- `n_batches` minibatch gradients g_B, drawn as training draws them (from this analysis's own
  random stream, never the training one);
- g: with n_full None (or >= D) the exact mean over the training set. Else g^, the mean over
  every draw at hand: the first n_full examples (S's per-example gradients plus one batched
  reverse pass over the rest, drawn without replacement) and the minibatches' draws (with
  replacement, independent of them): N = n_full + n_batches B draws, error E||g^ - g||^2 =
  s^2 (n_full (D - n_full) / (D - 1) + n_batches B) / N^2 with s^2 = mean_i ||g_i - g||^2
  estimated on S (`combined_error`). grad_norm = sqrt(||g^||^2 - that), unbiased for ||g||^2
  (a plain ||g^|| would be biased up by the noise: +25% on the demo's plateau at N = 1024);
- noise_rms = sqrt(s^2 / B); coherence = ||mean_S g_i||^2 / mean_S ||g_i||^2 (1/n for
  orthogonal gradients, 1 when all agree) and n x coherence;
- noise_norm: E||g_B - g|| directly, the mean over the minibatches of ||g_B - g^_-B|| (g^
  without that minibatch, so independent of it), each squared deviation less g^_-B's error;
- noise along directions v (random unit directions; with `curvature` the Hessian's v_max and
  v_min, `interp.analysis.directions`, cached in the run): Var_i <g_i, v> / B, by default
  (`direction_source` "sample") from the per-example gradients of S (unbiased sample variance,
  scaled to the population's), or ("full") over the whole training set by forward-mode AD
  (torch.func.jvp of the vector of per-example losses along v, one pass per direction);
- selector gradient SNR (the paper's cancellation probe) on `n_groups` seeded groups, over all
  N_k groups that share selector k: exact when the probe holds every group, else estimated with
  finite-population corrections (`interp.analysis.selector_snr`).

Computation is float32 on the model's device, sums accumulated in float64. The model is used in
eval mode and its parameters' .grad is never touched (torch.func and torch.autograd.grad only).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor, nn
from torch.func import grad, jvp, vmap

from interp.analysis.common import across_of, group_examples, probe_groups
from interp.analysis.selector_snr import selector_snr
from interp.analysis.registry import Analysis, N_EXAMPLES, N_GROUPS, Option, parse_switch
from interp.errors import InterpError
from interp.runs import Run
from interp.seeding import torch_generator
from interp.task import Task

DEFAULTS: dict = {
    "n_examples": 256,  # per-example gradients: noise_rms, coherence, the directional noise (a seeded sample)
    "n_batches": 4,  # minibatches for noise_norm (their draws also count in g)
    "n_random": 4,  # random unit directions for the noise variance
    "curvature": False,  # also v_max / v_min (a Lanczos run per checkpoint, cached)
    "curvature_examples": 512,  # the Hessian's sample for v_max / v_min
    "chunk_size": 64,  # examples per vmap call of the per-example gradients (bounds memory)
    "n_full": 512,  # g: a seeded sample holding the per-example one, plus the minibatches (None or "all": whole set)
    "n_groups": 128,  # selector SNR probe, seeded groups (None: every group)
    "direction_source": "sample",  # <g_i, v> from the per-example sample, or "full": jvp over the whole set
}
DIRECTION_SOURCES = ("sample", "full")
COLUMNS = (
    "step", "grad_norm", "noise_norm", "noise_rms", "noise_to_signal", "noise_rms_to_signal", "coherence",
    "n_coherence", "n", "n_full", "noise_var_random", "noise_var_vmax", "noise_var_vmin", "lambda_max",
    "lambda_min", "vmax_over_random", "vmin_over_random", "selector_snr", "selector_snr_sqrt_n", "batch_size",
)
PASS_CHUNK = 1024  # sequences per chunk of the batched passes (gradient, jvp)
STREAM = "gradients"
Params = dict[str, Tensor]


# ---------------------------------------------------------------------------- losses
def per_example_loss(
    forward: Callable[[Tensor], Tensor], tokens: Int[Tensor, "n seq"], loss_pos: tuple[int, ...]
) -> Float[Tensor, " n"]:
    """Each example's mean output cross-entropy (their mean is `batch_loss`), cut after the last scored position."""
    first, last = loss_pos[0], loss_pos[-1]
    logits = forward(tokens[:, : last + 1])[:, first : last + 1]
    targets = tokens[:, first + 1 : last + 2]
    nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), reduction="none")
    return nll.view(len(tokens), -1).mean(1)


# ---------------------------------------------------------------------------- the objective
@dataclass
class Objective:
    """A float32 eval-mode model as a function of its parameters, on the training objective."""

    model: nn.Module
    loss_pos: tuple[int, ...]

    def __post_init__(self):
        from interp.model import tl_params  # checkpoint layout on TL 3 or 4; lazy, as every model import
        self.base: Params = {n: p.detach() for n, p in tl_params(self.model).items()}
        self.names = list(self.base)
        self.device = next(iter(self.base.values())).device
        self.sizes = [self.base[n].numel() for n in self.names]
        starts = [sum(self.sizes[:i]) for i in range(len(self.sizes))]
        self.slices = {n: slice(a, a + s) for n, a, s in zip(self.names, starts, self.sizes)}
        self.dim = sum(self.sizes)

    def forward(self, params: Params) -> Callable[[Tensor], Tensor]:
        from interp.model import call_with
        return lambda x: call_with(self.model, params, lambda model, t: model(t), x)

    def mean_loss(self, params: Params, tokens: Int[Tensor, "n seq"]) -> Float[Tensor, ""]:
        return per_example_loss(self.forward(params), tokens, self.loss_pos).mean()

    def losses(self, params: Params, tokens: Int[Tensor, "n seq"]) -> Float[Tensor, " n"]:
        return per_example_loss(self.forward(params), tokens, self.loss_pos)

    def flat(self, tensors: Params, dtype=torch.float64) -> Float[Tensor, " p"]:
        return torch.cat([tensors[n].reshape(-1).to(dtype) for n in self.names])

    def unflat(self, flat: Float[Tensor, " p"]) -> Params:
        return {n: part.view(self.base[n].shape).to(self.base[n].dtype)
                for n, part in zip(self.names, flat.split(self.sizes))}

    def gradient(self, tokens: Int[Tensor, "n seq"]) -> Params:
        """Gradient of the mean loss over `tokens` (one chunk), by reverse mode on detached leaves."""
        leaves = {n: p.clone().requires_grad_(True) for n, p in self.base.items()}
        grads = torch.autograd.grad(self.mean_loss(leaves, tokens.to(self.device)), list(leaves.values()))
        return dict(zip(self.names, grads))


def _prepared(model: nn.Module, device: str | None) -> nn.Module:
    """`model` itself if it is float32, in eval mode and on `device`; else a prepared copy."""
    p = next(model.parameters())
    want = p.device if device is None else torch.device(device)
    if p.dtype == torch.float32 and p.device == want and not model.training:
        return model
    from interp.model import copy_model  # a bridge's copy drops its last forward's captured activations
    other = copy_model(model)
    try:
        other = other.to(want, torch.float32, print_details=False)
    except TypeError:  # not a HookedTransformer
        other = other.to(want, torch.float32)
    return other.eval()


# ---------------------------------------------------------------------------- gradients
def gradient_sum(obj: Objective, tokens: Int[Tensor, "n seq"]) -> Float[Tensor, " p"]:
    """sum_i g_i over `tokens` by batched reverse mode (chunked), float64."""
    total = torch.zeros(obj.dim, dtype=torch.float64, device=obj.device)
    for start in range(0, len(tokens), PASS_CHUNK):
        chunk = tokens[start : start + PASS_CHUNK]
        total += len(chunk) * obj.flat(obj.gradient(chunk))
    return total


def full_gradient(obj: Objective, tokens: Int[Tensor, "n seq"]) -> Float[Tensor, " p"]:
    """g: the gradient of the mean loss over all of `tokens`, chunked, summed in float64."""
    return gradient_sum(obj, tokens) / len(tokens)


@dataclass
class SampleGradients:
    """Reductions of the per-example gradients g_i of a sample (never all of them held at once)."""

    total: Float[Tensor, " p"]  # sum_i g_i, float64
    head: Float[Tensor, " p"]  # sum of g_i over the sample's first n_head examples, float64
    sq_norms: Float[Tensor, " n"]  # ||g_i||^2, float64
    dots: Float[Tensor, "n m"]  # <g_i, v> for each direction v, float64


def per_example_pass(
    obj: Objective, tokens: Int[Tensor, "n seq"], directions: Float[Tensor, "m p"], chunk_size: int, n_head: int
) -> SampleGradients:
    """Per-example gradients of `tokens` (vmap over grad, `chunk_size` at a time) reduced as they
    come: their sum, the sum of the first `n_head`, their squared norms and their dot products
    with `directions` (each row a parameter vector). Norms and dots are float32 per parameter
    tensor, summed in float64: converting the [chunk, P] gradients to float64 cost more than
    computing them."""
    one = vmap(grad(lambda params, x: obj.mean_loss(params, x.unsqueeze(0))), in_dims=(None, 0))
    dirs = directions.to(obj.device, torch.float32)
    total = torch.zeros(obj.dim, dtype=torch.float64, device=obj.device)
    head = torch.zeros_like(total)
    sq_norms, dots = [], []
    for start in range(0, len(tokens), chunk_size):
        per = one(obj.base, tokens[start : start + chunk_size].to(obj.device))
        c = len(per[obj.names[0]])
        k = max(0, min(n_head - start, c))  # rows of this chunk among the first n_head
        sq = torch.zeros(c, dtype=torch.float64, device=obj.device)
        dot = torch.zeros(c, len(dirs), dtype=torch.float64, device=obj.device)
        for name in obj.names:
            gi, part = per[name].reshape(c, -1), obj.slices[name]
            chunk_sum = gi.sum(0).double()
            total[part] += chunk_sum
            if k == c:
                head[part] += chunk_sum
            elif k > 0:
                head[part] += gi[:k].sum(0).double()
            sq += torch.linalg.vector_norm(gi, dim=1).double().pow(2)
            if len(dirs):
                dot += (gi @ dirs[:, part].T).double()
        sq_norms.append(sq)
        dots.append(dot)
    return SampleGradients(total, head, torch.cat(sq_norms), torch.cat(dots))


def minibatch_gradients(
    obj: Objective, tokens: Int[Tensor, "n seq"], batches: Int[Tensor, "m b"]
) -> Float[Tensor, "m p"]:
    """g_B for each minibatch (a row of example indices into `tokens`), float64."""
    return torch.stack([obj.flat(obj.gradient(tokens[idx])) for idx in batches])


def directional_values(
    obj: Objective, tokens: Int[Tensor, "n seq"], directions: Float[Tensor, "m p"]
) -> Float[Tensor, "m n"]:
    """<g_i, v> for every example i and direction v: forward-mode AD (jvp) of the vector of
    per-example losses along v, one pass over `tokens` (chunked) per direction. (vmapping the
    jvp over the directions measured slower on the CPU than this loop.)"""
    rows = []
    for v in directions:
        tangent = obj.unflat(v.to(obj.device))
        parts = [jvp(lambda params: obj.losses(params, chunk), (obj.base,), (tangent,))[1]
                 for chunk in tokens.to(obj.device).split(PASS_CHUNK)]
        rows.append(torch.cat(parts))
    return torch.stack(rows) if rows else torch.zeros(0, len(tokens), device=obj.device)


def noise_variances(
    obj: Objective, tokens: Int[Tensor, "n seq"], directions: Float[Tensor, "m p"], batch_size: int
) -> Float[Tensor, " m"]:
    """Var over minibatches of <g_B, v> for each direction v: (1/B) Var_i <g_i, v>, the
    population variance over `tokens` (minibatches of B drawn with replacement), float64; by
    forward-mode AD over every example (direction_source "full")."""
    if len(directions) == 0:
        return torch.zeros(0, dtype=torch.float64)
    values = directional_values(obj, tokens, directions.float()).double()
    return values.var(dim=1, correction=0).cpu() / batch_size


# ---------------------------------------------------------------------------- estimators
def combined_error(spread: float, n_full: int, size: int, n_draws: int) -> float:
    """E||g^ - g||^2 for g^ the mean over n_full of the `size` examples drawn without replacement
    and n_draws more drawn uniformly with replacement (independently), `spread` the population's
    mean squared deviation mean_i ||g_i - g||^2: s^2 (n_full (size - n_full) / (size - 1) +
    n_draws) / (n_full + n_draws)^2 (the two parts' summed errors are independent)."""
    without = n_full * (size - n_full) / (size - 1) if n_full < size else 0.0
    return spread * (without + n_draws) / (n_full + n_draws) ** 2


def gradient_estimates(
    g_sum: Float[Tensor, " p"], n_full: int, batch_grads: Float[Tensor, "m p"], batch_size: int,
    stats: SampleGradients, size: int,
) -> dict:
    """g and what rests on it, from the sum of the g_i of the first n_full examples of the order
    (drawn without replacement; the whole set when n_full == size), the minibatch gradients
    (drawn with replacement, independent of that sample) and the per-example sample S.

    Exact g (n_full == size): g = g_sum / size, nothing to correct. Otherwise every draw counts:
    g^ = (g_sum + B sum_j g_Bj) / N over N = n_full + m B draws, whose error has
    E||g^ - g||^2 = s^2 (n_full (size - n_full) / (size - 1) + m B) / N^2 (s^2 = mean_i
    ||g_i - g||^2 over the training set, estimated on S); each minibatch is compared with g^
    without it, g^_-j, independent of it, so E||g_Bj - g^_-j||^2 = E||g_B - g||^2 + (the same
    with m - 1). Returns g, N ("n_g"), s^2 ("spread": mean_S ||g_i - g^||^2, exact up to O(s^2 /
    N)), "signal" (||g^||^2 less its error: unbiased for ||g||^2) and "deviations" (each
    ||g_Bj - g^_-j||^2 less its error: estimates of ||g_B - g||^2)."""
    m, b = len(batch_grads), batch_size
    exact = n_full >= size
    n_g = size if exact else n_full + m * b
    g = g_sum / size if exact else (g_sum + b * batch_grads.sum(0)) / n_g
    n = len(stats.sq_norms)
    spread = float(stats.sq_norms.mean()) - 2 * float(stats.total @ g) / n + float(g @ g)
    if exact:
        return {"g": g, "n_g": n_g, "spread": spread, "signal": float(g @ g),
                "deviations": (batch_grads - g).pow(2).sum(1)}
    error = combined_error(spread, n_full, size, m * b)
    error_minus = combined_error(spread, n_full, size, (m - 1) * b)
    deviations = (n_g / (n_g - b)) ** 2 * (batch_grads - g).pow(2).sum(1)  # g_Bj - g^_-j = N (g_Bj - g^) / (N - B)
    return {"g": g, "n_g": n_g, "spread": spread, "signal": float(g @ g) - error,
            "deviations": deviations - error_minus}


def sample_noise_variances(
    dots: Float[Tensor, "n m"], size: int, batch_size: int
) -> Float[Tensor, " m"]:
    """Var over minibatches of <g_B, v> from <g_i, v> on a sample of n of the `size` training
    examples (without replacement): the unbiased sample variance times (size - 1) / size is
    unbiased for the population variance (and equals it when the sample is the whole set)."""
    return (dots.double().var(dim=0, correction=1) * (size - 1) / size).cpu() / batch_size


def sample_order(task: Task, gen: torch.Generator) -> Int[Tensor, " d"]:
    """The seeded permutation of the training set: the per-example sample is its first n_examples,
    the set that stands for the training set its first n_full (so one holds the other)."""
    return torch.randperm(task.n_train, generator=gen)


def sample_indices(task: Task, n_examples: int, gen: torch.Generator) -> Int[Tensor, " n"]:
    """The per-example gradient sample: the first n of the seeded permutation (all when n >= D)."""
    return sample_order(task, gen)[: min(n_examples, task.n_train)]


def full_size(task: Task, n_full: int | str | None) -> int:
    """How many examples stand for the training set (n_full None or "all": every one)."""
    return task.n_train if n_full is None or n_full == "all" else min(n_full, task.n_train)


def draw_batches(n: int, batch_size: int, n_batches: int, gen: torch.Generator) -> Int[Tensor, "m b"]:
    """Minibatches as training draws them: B indices uniformly with replacement, one draw per batch."""
    return torch.stack([torch.randint(n, (batch_size,), generator=gen) for _ in range(n_batches)])


def random_directions(obj: Objective, n: int, gen: torch.Generator) -> Float[Tensor, "m p"]:
    """n random unit directions of parameter space (Gaussian, normalised), drawn on the CPU."""
    draws = torch.randn(n, obj.dim, generator=gen, dtype=torch.float64)
    return draws / draws.norm(dim=1, keepdim=True)


# ---------------------------------------------------------------------------- one model
def ratio(a: float, b: float) -> float:
    """a / b, NaN when b is 0 or NaN."""
    return a / b if b != 0 and not math.isnan(b) else math.nan


def child_generators(seed: int) -> dict[str, torch.Generator]:
    """Independent generators per purpose from the "gradients" stream, so that changing one
    option (say n_batches) leaves the other draws alone. ("full" drew an earlier version's
    separate sample for g; kept so that the others keep their seeds.)"""
    gen = torch_generator(seed, STREAM)
    seeds = torch.randint(0, 2**62, (4,), generator=gen).tolist()
    return {name: torch.Generator().manual_seed(s) for name, s in zip(("sample", "batches", "random", "full"), seeds)}


def _check(params: dict) -> dict:
    unknown = set(params) - set(DEFAULTS)
    if unknown:
        raise InterpError(f"unknown gradients parameter(s) {sorted(unknown)}; known: {sorted(DEFAULTS)}, device")
    params = {**DEFAULTS, **params}
    for name in ("n_examples", "n_batches", "n_random", "curvature_examples", "chunk_size", "n_full", "n_groups"):
        value = params[name]
        if value is None and name in ("n_full", "n_groups") or value == "all" and name == "n_full":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "n_random" else 1):
            allowed = "a non-negative integer" if name == "n_random" else "a positive integer"
            other = {"n_full": ', None or "all"', "n_groups": " or None"}.get(name, "")
            raise InterpError(f"gradients: {name} must be {allowed}{other}, got {value!r}")
    if not isinstance(params["curvature"], bool):
        raise InterpError(f"gradients: curvature must be True or False, got {params['curvature']!r}")
    if params["n_examples"] < 2:
        raise InterpError("gradients: n_examples must be at least 2 (a coherence of one example is 1)")
    if params["direction_source"] not in DIRECTION_SOURCES:
        raise InterpError(f"gradients: direction_source must be one of {', '.join(DIRECTION_SOURCES)}, "
                          f"got {params['direction_source']!r}")
    return params


def measure(
    model: nn.Module,
    task: Task,
    *,
    batch_size: int,
    seed: int,
    extremes=None,
    device: str | None = None,
    **params,
) -> dict[str, float]:
    """Every column of the table but `step`, for one model on `task` (no run needed).

    `extremes`: an `interp.analysis.directions.ExtremeDirections` for the curvature columns
    (None: they are NaN). params: those of DEFAULTS (curvature and curvature_examples are the
    caller's business here). Minibatches have `batch_size` examples, drawn with replacement.
    """
    params = _check(params)
    if not isinstance(batch_size, int) or batch_size < 1:
        raise InterpError(f"gradients: batch_size must be a positive integer, got {batch_size!r}")
    model = _prepared(model, device)
    obj = Objective(model, task.layout.loss_pos)
    gens = child_generators(seed)
    size, tokens = task.n_train, task.train_tokens  # the training set (every example unless pairs are held out)
    order = sample_order(task, gens["sample"])
    n, n_full = min(params["n_examples"], size), full_size(task, params["n_full"])

    directions, kinds = [random_directions(obj, params["n_random"], gens["random"])], []
    for kind in ("vmax", "vmin") if extremes is not None else ():
        vector = extremes.vector(kind)
        if vector is not None:  # None: that end of the spectrum did not converge
            directions.append(obj.flat({name: vector[name] for name in obj.names}).cpu().unsqueeze(0))
            kinds.append(kind)
    directions = torch.cat(directions)
    from_sample = params["direction_source"] == "sample"

    # per-example gradients of the sample S; g over the first n_full of the order (S among them)
    stats = per_example_pass(obj, tokens[order[:n]], directions if from_sample else directions[:0],
                             params["chunk_size"], n_head=min(n, n_full))
    g_sum = stats.head
    if n_full > n:
        g_sum = g_sum + gradient_sum(obj, tokens[order[n:n_full]])
    batches = draw_batches(size, batch_size, params["n_batches"], gens["batches"])
    batch_grads = minibatch_gradients(obj, tokens, batches)  # [m, P]: g_B of each minibatch
    est = gradient_estimates(g_sum, n_full, batch_grads, batch_size, stats, size)
    noise_norm = float(est["deviations"].clamp(min=0).sqrt().mean())
    grad_norm = math.sqrt(est["signal"]) if est["signal"] > 0 else math.nan  # NaN: cannot tell g from 0
    noise_rms = math.sqrt(max(est["spread"], 0.0) / batch_size)
    mean_sample = stats.total / n
    sq_norm = float(stats.sq_norms.mean())  # mean_i ||g_i||^2 over S
    coherence = float(mean_sample @ mean_sample) / sq_norm if sq_norm > 0 else math.nan

    if from_sample:
        var = sample_noise_variances(stats.dots, size, batch_size)
    else:
        var = noise_variances(obj, tokens, directions, batch_size)
    by_kind = dict(zip(kinds, var[params["n_random"]:].tolist()))
    probe = group_examples(task, probe_groups(task, params["n_groups"], seed))
    snr, snr_sqrt_n = selector_snr(model, task, probe)
    nan = math.nan
    row = {
        "grad_norm": grad_norm, "noise_norm": noise_norm, "noise_rms": noise_rms,
        "noise_to_signal": ratio(noise_norm, grad_norm), "noise_rms_to_signal": ratio(noise_rms, grad_norm),
        "coherence": coherence, "n_coherence": n * coherence, "n": n, "n_full": est["n_g"],
        "noise_var_random": float(var[: params["n_random"]].mean()) if params["n_random"] else nan,
        "noise_var_vmax": by_kind.get("vmax", nan), "noise_var_vmin": by_kind.get("vmin", nan),
        "lambda_max": extremes.lambda_max if extremes is not None else nan,
        "lambda_min": extremes.lambda_min if extremes is not None else nan,
        "selector_snr": snr, "selector_snr_sqrt_n": snr_sqrt_n, "batch_size": batch_size,
    }
    row["vmax_over_random"] = ratio(row["noise_var_vmax"], row["noise_var_random"])
    row["vmin_over_random"] = ratio(row["noise_var_vmin"], row["noise_var_random"])
    return row


# ---------------------------------------------------------------------------- run level
def at_step(run: Run, step: int, *, model: nn.Module | None = None, device: str = "cpu", **params) -> pd.DataFrame:
    """Gradient signal, noise, coherence, noise along directions and selector SNR at `step`.

    Contract:
      run, step   a saved checkpoint; `model` (optional) is it already loaded (not modified).
      params      DEFAULTS: n_examples (256: the per-example gradient sample), n_full (512:
                  the seeded sample, holding the per-example one, that g^ is the mean over
                  together with the minibatches' draws; None or "all": g exact over the
                  whole training set), n_batches (4 minibatches for noise_norm, their draws
                  also in g^), n_random (4 random directions), direction_source ("sample":
                  <g_i, v> from the per-example gradients; "full": a jvp pass over the whole
                  training set per direction), curvature (False; True: also v_max / v_min, a
                  Lanczos run on `curvature_examples` = 512 examples, cached under
                  RUN/cache/directions), chunk_size (64 examples per vmap call), n_groups
                  (128 seeded groups in the selector probe; None: every group).
      cost        about 1.2-1.5 s per checkpoint of the demo run (D = 3000, a 2-core CPU)
                  with the defaults and the model loaded (46 s for its 29 checkpoints, loading
                  included). The exact options add, there: n_full None ~1.5 s, n_batches 16
                  ~0.8 s, n_groups None ~0.3-0.6 s, direction_source "full" ~1.3 s per
                  direction (all of them: ~10 s).
    Returns one row: step; grad_norm (||g||, nats / param; with a sample for g, sqrt of ||g^||^2
    less its sampling variance, NaN when that is not positive); noise_norm (E||g_B - g||, same
    unit, mean over the minibatches); noise_rms (sqrt(E||g_B - g||^2) from per-example gradients,
    same unit); noise_to_signal (noise_norm / grad_norm), noise_rms_to_signal (ratios); coherence
    (||mean g_i||^2 / mean ||g_i||^2, 1/n..1), n_coherence (n x coherence; 1 for orthogonal
    gradients), n (the per-example sample size), n_full (the draws g^ rests on, n_full +
    n_batches B; D: g exact);
    noise_var_random, noise_var_vmax, noise_var_vmin (Var over minibatches of <g_B, v>, nats^2 /
    param^2; random: mean over the random directions); lambda_max, lambda_min (the Hessian
    extremes on the curvature sample, nats / param^2); vmax_over_random, vmin_over_random
    (ratios); selector_snr (mean over selectors of SNR_k, over all N_k groups sharing selector
    k: exact with every group in the probe, else estimated from the probe's groups),
    selector_snr_sqrt_n (mean of SNR_k sqrt(N_k): about 1 when the group gradients cancel like
    independent noise); batch_size (B of the run). The curvature columns are NaN when curvature is off
    (or a Lanczos end did not converge), the selector columns for a task without z.
    """
    params = _check(params)
    step = run.resolve_step(step)
    if model is None:
        model = run.model(step, device=device)
    model = _prepared(model, device)
    extremes = None
    if params["curvature"]:
        from interp.analysis.directions import extreme_directions

        extremes = extreme_directions(run, step, model, n_examples=params["curvature_examples"], device=device)
    row = measure(model, run.task, batch_size=run.spec.train.batch_size, seed=run.spec.seed, extremes=extremes,
                  **params)
    return pd.DataFrame([{"step": step, **row}])[list(COLUMNS)]


across = across_of("gradients")
CURVATURE = Option("curvature", "curvature", "gradients: also the minibatch noise along the Hessian's v_max and v_min "
                   "(a small Lanczos run per checkpoint, cached; default off)", parse_switch, choices=("on", "off"),
                   metavar="on|off")
ENTRY = Analysis(
    "gradients", __name__, "full-gradient norm, minibatch noise and its ratio, per-example coherence, noise along "
    "directions, selector gradient SNR",
    default=False, stream="gradients", options=(N_EXAMPLES, N_GROUPS, CURVATURE), order=130, groups=(("diagnostics", 5),),
)
