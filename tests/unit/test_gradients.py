"""The gradients analysis against independent computations: explicit loops of single-example
gradients (torch.autograd.grad one example at a time, allowed here only), autograd of the mean
loss, sampled minibatches, and the selector SNR definition (docs/diagnostics.md) followed word for word; the sampling
corrections of the cheap defaults (a sample for g, the directional noise from the per-example
sample, a probe of some groups) against exact expectations over every possible sample; the cached
Hessian extreme directions (hit, damage, staleness, read-only runs); the figure."""

import copy
import itertools
import math

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch.func import grad, jvp

from interp.analysis import gradients, selector_snr
from interp.analysis.directions import cache_path, extreme_directions
from interp.analysis.hessian import sample_indices as hessian_sample
from interp.checkpoints import serialize
from interp.errors import InterpError
from interp.metrics import batch_loss
from interp.model import ModelSpec, build_model, call_with, tl_module, tl_params
from interp.runs import Run
from interp.spec import VOCAB_SIZE
from interp.task import Task, TaskSpec
from tests.helpers import random_model, small_spec

SMALL = ModelSpec(n_layers=2, n_heads=2, d_model=32, d_head=16, d_mlp=64)
B = 8  # the minibatch size of these tests
SEED = 5


@pytest.fixture(scope="module")
def task() -> Task:
    return Task.generate(TaskSpec(k=4, n_bases=12), seed=3)


@pytest.fixture(scope="module")
def model(task):
    return random_model(task, SMALL, seed=1)


def flat(grads) -> torch.Tensor:
    return torch.cat([g.reshape(-1).double() for g in grads])


@pytest.fixture(scope="module")
def loop_grads(task, model) -> torch.Tensor:
    """[D, P]: each example's gradient, one autograd call per example."""
    view = tl_module(model)  # checkpoint layout on either TransformerLens, as the analysis's vectors
    params = list(view.parameters())
    rows = []
    for i in range(task.size):
        loss = batch_loss(view, task.tokens[i : i + 1], task.layout.loss_pos)
        rows.append(flat(torch.autograd.grad(loss, params)))
    return torch.stack(rows)


@pytest.fixture(scope="module")
def full_grad(task, model) -> torch.Tensor:
    view = tl_module(model)
    loss = batch_loss(view, task.tokens, task.layout.loss_pos)
    return flat(torch.autograd.grad(loss, list(view.parameters())))


@pytest.fixture(scope="module")
def measured(task, model) -> dict:
    """The expensive exact options: g over the whole set, every group in the selector probe."""
    return gradients.measure(model, task, batch_size=B, seed=SEED, n_examples=20, n_batches=6, n_groups=None,
                             n_full=None)


# ---------------------------------------------------------------------------- signal, noise, coherence
def test_per_example_loss_averages_to_the_training_objective(task, model):
    with torch.no_grad():
        per = gradients.per_example_loss(model, task.tokens, task.layout.loss_pos)
        whole = batch_loss(model, task.tokens, task.layout.loss_pos)
    assert per.shape == (task.size,)
    assert float(per.mean()) == pytest.approx(float(whole), rel=1e-6)


def test_grad_norm_is_the_norm_of_autograd_of_the_mean_loss(measured, full_grad, loop_grads, model, task):
    assert measured["grad_norm"] == pytest.approx(float(full_grad.norm()), rel=1e-5)
    assert measured["n_full"] == task.size  # g exact
    # the mean of the per-example gradients is the full gradient (equal-length examples)
    torch.testing.assert_close(loop_grads.mean(0), full_grad, rtol=0, atol=1e-6)
    assert all(p.grad is None for p in model.parameters())  # .grad untouched
    assert not model.training


def test_coherence_and_noise_rms_equal_a_loop_of_single_example_gradients(measured, task, loop_grads, full_grad):
    idx = gradients.sample_indices(task, 20, gradients.child_generators(SEED)["sample"])
    assert len(set(idx.tolist())) == 20 and measured["n"] == 20
    gi = loop_grads[idx]
    coherence = float(gi.mean(0).pow(2).sum() / gi.pow(2).sum(1).mean())
    assert measured["coherence"] == pytest.approx(coherence, rel=1e-4)
    assert measured["n_coherence"] == pytest.approx(20 * coherence, rel=1e-4)
    rms = math.sqrt(float((gi - full_grad).pow(2).sum(1).mean()) / B)
    assert measured["noise_rms"] == pytest.approx(rms, rel=1e-4)
    assert measured["noise_rms_to_signal"] == pytest.approx(rms / float(full_grad.norm()), rel=1e-4)


def test_noise_norm_is_the_mean_minibatch_deviation(measured, task, loop_grads, full_grad):
    batches = gradients.draw_batches(task.size, B, 6, gradients.child_generators(SEED)["batches"])
    assert batches.shape == (6, B)
    deviations = torch.stack([(loop_grads[b].mean(0) - full_grad).norm() for b in batches])
    assert measured["noise_norm"] == pytest.approx(float(deviations.mean()), rel=1e-4)
    assert measured["noise_to_signal"] == pytest.approx(measured["noise_norm"] / measured["grad_norm"], rel=1e-9)


def test_noise_variance_along_a_direction_matches_sampled_minibatches(task, model, loop_grads):
    obj = gradients.Objective(model, task.layout.loss_pos)
    gen = torch.Generator().manual_seed(11)
    v = torch.randn(2, obj.dim, generator=gen, dtype=torch.float64)
    v = v / v.norm(dim=1, keepdim=True)
    got = gradients.noise_variances(obj, task.tokens, v, B)
    along = loop_grads @ v.T  # [D, 2]: <g_i, v> by reverse mode, one example at a time
    exact = along.var(0, correction=0) / B
    torch.testing.assert_close(got, exact, rtol=1e-4, atol=0)
    # and by brute force: 3000 minibatches of B drawn with replacement, the sample variance of <g_B, v>
    n_draws = 3000
    draws = torch.randint(task.size, (n_draws, B), generator=gen)
    for j in range(2):
        dots = along[draws, j].mean(1)
        dev2 = (dots - dots.mean()).pow(2)
        sampled = float(dev2.sum()) / (n_draws - 1)
        se = float(dev2.std()) / math.sqrt(n_draws)  # standard error of that sample variance
        assert abs(sampled - float(got[j])) < 5 * se, (sampled, float(got[j]), se)


def test_random_direction_noise_from_the_per_example_sample(task, model, measured, loop_grads):
    """Default source: Var_i <g_i, v> on the per-example sample (unbiased, scaled to the population)."""
    obj = gradients.Objective(model, task.layout.loss_pos)
    gens = gradients.child_generators(SEED)
    dirs = gradients.random_directions(obj, 4, gens["random"])
    torch.testing.assert_close(dirs.norm(dim=1), torch.ones(4, dtype=torch.float64))
    idx = gradients.sample_indices(task, 20, gradients.child_generators(SEED)["sample"])
    along = loop_grads[idx] @ dirs.T  # [20, 4]: <g_i, v> by reverse mode, one example at a time
    d = task.size
    expected = float((along.var(0, correction=1) * (d - 1) / d / B).mean())
    assert measured["noise_var_random"] == pytest.approx(expected, rel=1e-4)
    for col in ("noise_var_vmax", "noise_var_vmin", "lambda_max", "lambda_min", "vmax_over_random"):
        assert math.isnan(measured[col])  # curvature off


def test_random_direction_noise_over_the_whole_set_by_jvp(task, model, loop_grads):
    """direction_source "full": the population variance over every example, by forward mode; and
    the per-example source on a sample that is the whole set gives the same number."""
    obj = gradients.Objective(model, task.layout.loss_pos)
    dirs = gradients.random_directions(obj, 3, gradients.child_generators(SEED)["random"])
    exact = float(((loop_grads @ dirs.T).var(0, correction=0) / B).mean())
    full = gradients.measure(model, task, batch_size=B, seed=SEED, n_examples=8, n_batches=1, n_random=3,
                             direction_source="full", n_full="all")
    assert full["noise_var_random"] == pytest.approx(exact, rel=1e-4) and full["n_full"] == task.size
    whole = gradients.measure(model, task, batch_size=B, seed=SEED, n_examples=task.size, n_batches=1, n_random=3)
    assert whole["noise_var_random"] == pytest.approx(exact, rel=1e-4)


# ---------------------------------------------------------------------------- sampled g
def test_sampled_g_and_its_corrections_equal_the_same_from_single_example_gradients(task, model, loop_grads):
    """n_full < D: g from a sample plus the minibatches, ||g||^2 and each minibatch's deviation
    corrected for its sampling error; recomputed here from per-example gradients, each
    minibatch's leave-one-out g formed directly."""
    n, n_full, m = 12, 20, 3
    row = gradients.measure(model, task, batch_size=B, seed=SEED, n_examples=n, n_full=n_full, n_batches=m,
                            n_groups=2)
    gens = gradients.child_generators(SEED)
    order = gradients.sample_order(task, gens["sample"])
    batches = gradients.draw_batches(task.size, B, m, gens["batches"])
    d, n_g = task.size, n_full + m * B
    g_b = torch.stack([loop_grads[b].mean(0) for b in batches])  # [m, P]
    sum_f = loop_grads[order[:n_full]].sum(0)
    g = (sum_f + B * g_b.sum(0)) / n_g
    s2 = float((loop_grads[order[:n]] - g).pow(2).sum(1).mean())

    def error(draws: int) -> float:  # E||g^ - g||^2 of a mean over n_full without and `draws` with replacement
        return s2 * (n_full * (d - n_full) / (d - 1) + draws) / (n_full + draws) ** 2

    assert row["n_full"] == n_g and row["n"] == n
    assert row["grad_norm"] == pytest.approx(math.sqrt(float(g @ g) - error(m * B)), rel=1e-4)
    assert row["noise_rms"] == pytest.approx(math.sqrt(s2 / B), rel=1e-4)
    devs = []
    for j in range(m):
        others = (sum_f + B * (g_b.sum(0) - g_b[j])) / (n_g - B)  # g^ without minibatch j
        devs.append(math.sqrt(max(float((g_b[j] - others).pow(2).sum()) - error((m - 1) * B), 0.0)))
    assert row["noise_norm"] == pytest.approx(sum(devs) / m, rel=1e-4)
    assert row["noise_to_signal"] == pytest.approx(row["noise_norm"] / row["grad_norm"], rel=1e-9)


def test_combined_error_is_the_exact_expected_squared_error_over_every_sample():
    """E||g^ - g||^2 enumerated over every subset of n_full (without replacement) and every tuple
    of draws (with replacement), for random vectors, and for the leave-one-out deviation of a
    minibatch: E||g_B - g^_-B||^2 = s^2 / b + the error of g^_-B."""
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(6, 3, generator=gen, dtype=torch.float64)
    mu = x.mean(0)
    s2 = float((x - mu).pow(2).sum(1).mean())
    for n_full, draws in ((2, 0), (3, 2), (6, 1), (1, 3)):
        subsets = torch.tensor(list(itertools.combinations(range(6), n_full)))  # [S, n_full]
        tuples = torch.tensor(list(itertools.product(range(6), repeat=draws)), dtype=torch.long).reshape(6**draws, draws)
        sums = x[subsets].sum(1).unsqueeze(1) + x[tuples].sum(1).unsqueeze(0)  # [S, T, 3]
        errors = (sums / (n_full + draws) - mu).pow(2).sum(-1)
        assert gradients.combined_error(s2, n_full, 6, draws) == pytest.approx(float(errors.mean()), rel=1e-12)
    n_full, b = 3, 2  # two minibatches of 2: the deviation of the second from g^ over the sample and the first
    subsets = torch.tensor(list(itertools.combinations(range(6), n_full)))
    tuples = torch.tensor(list(itertools.product(range(6), repeat=2 * b)))  # [T, 2b]: both minibatches' draws
    rest = (x[subsets].sum(1).unsqueeze(1) + x[tuples[:, :b]].sum(1).unsqueeze(0)) / (n_full + b)  # [S, T, 3]
    devs = (x[tuples[:, b:]].mean(1).unsqueeze(0) - rest).pow(2).sum(-1)
    want = s2 / b + gradients.combined_error(s2, n_full, 6, b)
    assert float(devs.mean()) == pytest.approx(want, rel=1e-12)


def test_sample_noise_variance_is_unbiased_over_every_sample():
    gen = torch.Generator().manual_seed(4)
    dots = torch.randn(7, 2, generator=gen, dtype=torch.float64)
    population = dots.var(0, correction=0) / B
    for n in (2, 4, 7):
        estimates = torch.stack([gradients.sample_noise_variances(dots[list(s)], 7, B)
                                 for s in itertools.combinations(range(7), n)])
        torch.testing.assert_close(estimates.mean(0), population, rtol=1e-12, atol=0)


def test_population_moments_are_unbiased_over_every_sample_and_exact_on_the_whole():
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(7, 3, generator=gen, dtype=torch.float64) + 0.3
    mu2, sigma2 = float(x.mean(0).pow(2).sum()), float((x - x.mean(0)).pow(2).sum(1).mean())
    for n in (2, 3, 5, 7):
        got = []
        for s in itertools.combinations(range(7), n):
            sample = x[list(s)]
            mean = sample.mean(0)
            stats = [torch.tensor([v], dtype=torch.float64) for v in
                     (float(mean.pow(2).sum()), float((sample - mean).pow(2).sum(1).mean()), n, 7)]
            got.append([float(t) for t in selector_snr.population_moments(*stats)])
        got = torch.tensor(got, dtype=torch.float64)
        assert float(got[:, 0].mean()) == pytest.approx(mu2, rel=1e-12)
        assert float(got[:, 1].mean()) == pytest.approx(sigma2, rel=1e-12)
    assert got[0].tolist() == pytest.approx([mu2, sigma2], rel=1e-12)  # n = 7: the whole population, exact


# ---------------------------------------------------------------------------- selector SNR
def loop_rows(model, task: Task, i: int) -> tuple[tuple, torch.Tensor]:
    """Example i's z string and g: dL1/dW_E at the rows of its distinct z tokens [n_distinct, d]
    (autograd of W_E: every position holding the token counts)."""
    dec, z_pos = task.layout.decision_pos, list(task.layout.z_pos)
    tokens = task.tokens[i : i + 1]
    l1 = F.cross_entropy(model(tokens)[0, dec], tokens[0, dec + 1])
    (dW,) = torch.autograd.grad(l1, model.embed.W_E)
    z = tuple(tokens[0, z_pos].tolist())
    return z, dW[list(dict.fromkeys(z))].double()


def loop_selector_snr(model, task: Task, idx: torch.Tensor) -> tuple[float, float]:
    """The definition word for word: g_bk = dL1(B_b, z_k)/dW_E at the rows of z_k's tokens; per
    selector the SNR over the groups sharing it; the mean over selectors. With only n of the N
    groups sharing z_k in `idx`, SNR_k over all N estimated by the finite-population
    corrections: sigma^2 = S^2 n/(n-1) (N-1)/N, ||mu||^2 = ||mean||^2 - sigma^2 (N-n) / (n (N-1))."""
    by_selector: dict[tuple, list[torch.Tensor]] = {}
    for i in idx.tolist():
        z, rows = loop_rows(model, task, i)
        by_selector.setdefault(z, []).append(rows.reshape(-1))
    every = [tuple(t) for t in task.tokens[:, list(task.layout.z_pos)].tolist()]
    snrs, scaled = [], []
    for z, vectors in by_selector.items():
        g = torch.stack(vectors)
        n, size = len(vectors), every.count(z)
        mean = g.mean(0)
        spread = float((g - mean).pow(2).sum(1).mean())
        if n == size:
            snr = float(mean.norm()) / math.sqrt(spread)
        else:
            sigma2 = spread * n / (n - 1) * (size - 1) / size
            mu2 = float(mean.pow(2).sum()) - sigma2 * (size - n) / (n * (size - 1))
            snr = math.sqrt(max(mu2, 0.0) / sigma2)
        snrs.append(snr)
        scaled.append(snr * math.sqrt(size))
    return sum(snrs) / len(snrs), sum(scaled) / len(scaled)


def test_selector_snr_equals_the_spec_loop(task, model, measured):
    from interp.analysis.common import group_examples, probe_groups

    dec, z_pos = task.layout.decision_pos, list(task.layout.z_pos)
    z = task.tokens[:, z_pos]
    assert (task.tokens[:, 1:dec].unsqueeze(2) == z.unsqueeze(1)).any(1).any(1).any()  # a z token also in B
    every = group_examples(task, probe_groups(task, None, SEED))
    snr, snr_n = selector_snr.selector_snr(model, task, every)
    want, want_n = loop_selector_snr(model, task, every)
    assert snr == pytest.approx(want, rel=1e-4)
    assert snr_n == pytest.approx(want_n, rel=1e-4)
    assert snr_n == pytest.approx(snr * math.sqrt(task.n_groups), rel=1e-9)  # one shared selector set
    assert measured["selector_snr"] == pytest.approx(snr, rel=1e-9)
    some = group_examples(task, probe_groups(task, 5, SEED))  # 5 of the 12 groups: SNR over all 12 estimated
    got, got_n = selector_snr.selector_snr(model, task, some)
    want, want_n = loop_selector_snr(model, task, some)
    assert got == pytest.approx(want, rel=1e-4) and got_n == pytest.approx(want_n, rel=1e-4)
    assert got_n == pytest.approx(got * math.sqrt(task.n_groups), rel=1e-9)


def test_selector_snr_counts_a_repeated_z_token_once(task, model):
    """A selector whose two characters are one token: its row's gradient sums both positions, once."""
    twin = copy.copy(task)
    tokens = task.tokens.clone()
    z0, z1 = task.layout.z_pos
    first = task.selector_id == 0
    tokens[first, z1] = tokens[first, z0]
    twin.tokens = tokens
    idx = torch.arange(task.size)
    assert selector_snr.selector_snr(model, twin, idx)[0] == pytest.approx(loop_selector_snr(model, twin, idx)[0],
                                                                         rel=1e-4)
    rows = selector_snr.z_row_gradients(model, twin, idx)  # [n, len_z, d]
    for i in (0, 1, 4):  # selector 0 (one distinct token: its second row is zero), then others
        _, want = loop_rows(model, twin, i)
        torch.testing.assert_close(rows[i, : len(want)].double(), want, rtol=1e-4, atol=1e-7)
        assert not rows[i, len(want) :].any()


def test_selector_snr_follows_selectors_shared_by_supergroups(model):
    """selector_groups = 4: 3 supergroups own their selectors; SNR_k is over the 4 groups sharing z_k."""
    grouped = Task.generate(TaskSpec(k=4, n_bases=12, selector_groups=4), seed=3)
    idx = torch.arange(grouped.size)
    snr, snr_n = selector_snr.selector_snr(model, grouped, idx)
    want, want_n = loop_selector_snr(model, grouped, idx)
    assert snr == pytest.approx(want, rel=1e-4) and snr_n == pytest.approx(want_n, rel=1e-4)
    assert snr_n == pytest.approx(2.0 * snr, rel=1e-9)  # sqrt of the 4 groups sharing each selector


def test_a_task_without_selector_has_nan_selector_snr():
    plain = Task.generate(TaskSpec(k=4, n_bases=12, direction="b_to_a"), seed=3)
    row = gradients.measure(random_model(plain, SMALL, seed=1), plain, batch_size=B, seed=SEED, n_examples=8, n_batches=2,
                            n_random=1)
    assert math.isnan(row["selector_snr"]) and math.isnan(row["selector_snr_sqrt_n"])
    assert row["grad_norm"] > 0 and row["noise_var_random"] > 0


# ---------------------------------------------------------------------------- the run level, cached directions
@pytest.fixture
def tiny_run(tmp_path) -> Run:
    """A run folder holding one saved checkpoint (its initialisation): nothing is trained."""
    spec = small_spec()
    run = Run.create(tmp_path / "run", spec)
    run.save_checkpoint(0, build_model(spec.model, spec.task.sequence_length, VOCAB_SIZE, seed=spec.seed))
    run.release()
    return Run.open(run.path)


def hvp(model, tokens, loss_pos, v: torch.Tensor) -> torch.Tensor:
    """H v by forward-over-reverse (torch.func), independent of the Hessian analysis's double backward."""
    base = {n: p.detach() for n, p in tl_params(model).items()}
    names, sizes = list(base), [p.numel() for p in base.values()]
    tangent = {n: part.view(base[n].shape).float() for n, part in zip(names, v.split(sizes))}
    f = lambda p: call_with(model, p, batch_loss, tokens, loss_pos)  # noqa: E731
    _, out = jvp(grad(f), (base,), (tangent,))
    return torch.cat([out[n].reshape(-1).double() for n in names])


def test_extreme_directions_are_unit_downhill_eigenvectors_cached_and_reused(tiny_run):
    n = 32
    found = extreme_directions(tiny_run, 0, n_examples=n)
    assert not found.cached and found.n_examples == n
    assert found.vmax is not None and found.vmin is not None and found.lambda_max > found.lambda_min
    model = tiny_run.model(0)
    task = tiny_run.task
    tokens = task.tokens[hessian_sample(task, n, tiny_run.spec.seed)]
    view = tl_module(model)
    g = flat(torch.autograd.grad(batch_loss(view, tokens, task.layout.loss_pos), list(view.parameters())))
    for kind, lam in (("vmax", found.lambda_max), ("vmin", found.lambda_min)):
        v = flat(found.vector(kind)[name] for name in tl_params(model))
        assert float(v.norm()) == pytest.approx(1.0, abs=1e-5)
        assert float(g @ v) <= 0  # downhill
        residual = float((hvp(model, tokens, task.layout.loss_pos, v) - lam * v).norm())
        assert residual < 1e-2 * abs(found.lambda_max)
        assert cache_path(tiny_run, 0, kind, n).exists()
    again = extreme_directions(tiny_run, 0, n_examples=n)
    assert again.cached and again.lambda_min == found.lambda_min
    assert all(torch.equal(again.vmin[k], found.vmin[k]) and torch.equal(again.vmax[k], found.vmax[k])
               for k in found.vmin)


def test_a_damaged_stale_or_old_cache_file_is_recomputed_never_used(tiny_run, monkeypatch):
    n = 24
    found = extreme_directions(tiny_run, 0, n_examples=n)
    path = cache_path(tiny_run, 0, "vmin", n)
    data = bytearray(path.read_bytes())
    data[-20] ^= 0xFF  # one flipped byte in the vector
    path.write_bytes(bytes(data))
    redone = extreme_directions(tiny_run, 0, n_examples=n)
    assert not redone.cached
    for k in found.vmin:
        torch.testing.assert_close(redone.vmin[k], found.vmin[k], rtol=0, atol=1e-5)
    assert extreme_directions(tiny_run, 0, n_examples=n).cached  # the file was rewritten whole
    # a file of the older format (the forks' v_min before the shared cache: no sample size) is not used
    wrong = {k: torch.ones_like(t) for k, t in found.vmin.items()}
    sha = tiny_run.manifest()[0]["sha256"]
    path.write_bytes(serialize(wrong, {"checkpoint_sha256": sha, "step": "0", "lambda_min": "-1.0"}, self_hash=True))
    assert not extreme_directions(tiny_run, 0, n_examples=n).cached
    # other weights than those cached (say a fork's float32 state): recomputed, not read
    other = tiny_run.model(0)
    with torch.no_grad():
        next(other.parameters()).add_(0.01)
    assert not extreme_directions(tiny_run, 0, other, n_examples=n).cached
    # a run folder that cannot be written: computed all the same, nothing written
    import interp.files

    def refuse(path, data):
        raise PermissionError("read-only")

    monkeypatch.setattr(interp.files, "atomic_write_bytes", refuse)
    path.unlink()
    assert extreme_directions(tiny_run, 0, n_examples=n).vmin is not None
    assert not path.exists()


def test_at_step_with_curvature_measures_the_noise_along_the_cached_extremes(tiny_run):
    size = tiny_run.task.size  # the per-example sample is the whole set: the population variance exactly
    table = gradients.at_step(tiny_run, 0, curvature=True, curvature_examples=32, n_examples=size, n_batches=2,
                              n_random=2)
    assert list(table.columns) == list(gradients.COLUMNS) and len(table) == 1
    row = table.iloc[0]
    found = extreme_directions(tiny_run, 0, n_examples=32)
    assert found.cached and row["lambda_max"] == found.lambda_max and row["lambda_min"] == found.lambda_min
    task, model = tiny_run.task, tiny_run.model(0)
    batch = tiny_run.spec.train.batch_size
    assert row["batch_size"] == batch and row["step"] == 0
    view = tl_module(model)
    params = list(view.parameters())
    along = []
    for i in range(task.size):  # <g_i, v> by reverse mode, one example at a time
        gi = flat(torch.autograd.grad(batch_loss(view, task.tokens[i : i + 1], task.layout.loss_pos), params))
        along.append([float(gi @ flat(found.vector(kind)[name] for name in tl_params(model)))
                      for kind in ("vmax", "vmin")])
    var = torch.tensor(along, dtype=torch.float64).var(0, correction=0) / batch
    assert row["noise_var_vmax"] == pytest.approx(float(var[0]), rel=1e-3)
    assert row["noise_var_vmin"] == pytest.approx(float(var[1]), rel=1e-3)
    assert row["vmax_over_random"] == pytest.approx(row["noise_var_vmax"] / row["noise_var_random"], rel=1e-9)
    jvp_row = gradients.at_step(tiny_run, 0, curvature=True, curvature_examples=32, n_examples=4, n_batches=1,
                                n_random=1, direction_source="full").iloc[0]  # forward mode over the whole set
    assert jvp_row["noise_var_vmin"] == pytest.approx(float(var[1]), rel=1e-3)
    both = gradients.across(tiny_run, steps=[0], n_examples=16, n_batches=2, n_random=1)
    assert list(both.columns) == list(gradients.COLUMNS) and math.isnan(both.iloc[0]["lambda_max"])


@pytest.mark.parametrize("params, fragment", [
    ({"n_examples": 0}, "n_examples must be a positive integer"),
    ({"n_examples": 1}, "at least 2"),
    ({"n_batches": 2.5}, "n_batches must be a positive integer"),
    ({"n_random": -1}, "n_random must be a non-negative integer"),
    ({"curvature": "yes"}, "curvature must be True or False"),
    ({"n_groups": 0}, "n_groups must be a positive integer or None"),
    ({"n_full": "some"}, 'n_full must be a positive integer, None or "all"'),
    ({"direction_source": "jvp"}, "direction_source must be one of sample, full"),
    ({"n_steps": 3}, "unknown gradients parameter"),
])
def test_bad_parameters_are_refused_clearly(task, model, params, fragment):
    with pytest.raises(InterpError, match=fragment):
        gradients.measure(model, task, batch_size=B, seed=SEED, **params)


# ---------------------------------------------------------------------------- the figure
def gradients_table(curvature: bool) -> pd.DataFrame:
    rows = []
    for step, g in ((100, 1.0), (400, 0.5), (900, 0.8)):
        rows.append({c: float("nan") for c in gradients.COLUMNS} | {
            "step": step, "grad_norm": g, "noise_norm": 2 * g, "noise_to_signal": 2.0, "n_coherence": 1.4,
            "selector_snr_sqrt_n": 1.1, "noise_var_random": 1e-6,
            "noise_var_vmax": 1e-4 if curvature else float("nan"),
            "noise_var_vmin": 1e-7 if curvature else float("nan")})
    return pd.DataFrame(rows)


def test_gradient_curves_draw_four_panels_and_a_fifth_with_curvature():
    from interp.plots.gradients import gradient_curves

    plain = gradient_curves(gradients_table(False), tau=500, onsets={"L0H3": 300})
    assert {t.name for t in plain.data} >= {"‖g‖", "E‖g_B − g‖", "noise / signal", "n × coherence",
                                            "selector SNR × √n"}
    assert "yaxis5" not in plain.layout.to_plotly_json()
    full = gradient_curves(gradients_table(True), tau=500)
    names = {t.name for t in full.data}
    assert {"along v_max", "along v_min", "random"} <= names
    assert full.layout.yaxis5.type == "log" and full.layout.yaxis.type == "log"
    assert any(s.get("name") == "tau" for s in full.layout.to_plotly_json()["shapes"])
    with pytest.raises(InterpError, match="empty"):
        gradient_curves(pd.DataFrame(columns=list(gradients.COLUMNS)))
