"""Issue 32's fork measurements, recomputed independently: the per-step realised update power
||u_t - s_t||^2 / ||s_t||^2 each sample logs (and its median over a range of steps) against the
float32 per-step checkpoints and kept states of a noisy fork, with the clean shadow stepped by a
hand-written AdamW; and the first update of `v_only_noise:xi=isotropic` (the author's: the first
moment fed g, the second (g + s xi)^2 with xi isotropic of the measured noise's norm) against a
hand-written AdamW step. An escape criterion re-judges the same fork's log.

The parent is the session's 30-step tiny run (`tiny_run`), forked at its saved step 20.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
import torch

from interp.checkpoints import read_resume
from interp.forks.arm_steps import fork_stepper
from interp.forks.arms import make_arm
from interp.forks.family import escapes
from interp.forks.fork import create_fork, fork
from interp.metrics import batch_loss
from interp.model import build_model
from interp.run_states import kept_state, kept_steps
from interp.runs import RESUME_FILE, Run
from interp.task import VOCAB_SIZE
from interp.train import train

AT = 20
EPS = 1e-8  # torch.optim.AdamW's default, which training uses
EVERY_STEP = {"checkpoint_every": 1, "checkpoint_dtype": "float32", "eval_every": 1}


@pytest.fixture(scope="module")
def parent(tiny_run) -> Run:
    torch.set_num_threads(2)  # as every test runs: the replay of the state at step 20 must match the parent's
    run = Run.open(tiny_run())
    assert AT in run.steps
    return run


# ---------------------------------------------------------------------------- independent arithmetic
def _model(run: Run, params: dict):
    model = build_model(run.spec.model, run.task.layout.length, VOCAB_SIZE)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(params[name])
    return model.train()


def _names(run: Run, params: dict) -> list[str]:
    return [n for n, _ in _model(run, params).named_parameters()]


def _gradient(run: Run, params: dict, rows: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """The float64 gradient of the mean training loss over `rows` (None: the whole training set), in one pass."""
    model = _model(run, params)
    batch_loss(model, run.task.tokens if rows is None else rows, run.task.layout.loss_pos).backward()
    return {n: p.grad.double() for n, p in model.named_parameters()}


def _sq(tensors) -> float:
    return float(sum((t.double() ** 2).sum() for t in tensors))


def _adamw(run: Run, params: dict, moments: dict, grad_m: dict, grad_v: dict, lr: float) -> dict[str, tuple]:
    """One AdamW step by hand in float64: name -> (param, exp_avg, exp_avg_sq, step counter after it)."""
    t = run.spec.train
    out = {}
    for name, (m0, v0, k) in moments.items():
        k += 1
        m = t.beta1 * m0 + (1 - t.beta1) * grad_m[name]
        v = t.beta2 * v0 + (1 - t.beta2) * grad_v[name] ** 2
        p = params[name].double() * (1 - lr * t.weight_decay)
        out[name] = (p - (lr / (1 - t.beta1**k)) * m / ((v / (1 - t.beta2**k)).sqrt() + EPS), m, v, k)
    return out


def _moments(names: list[str], state) -> dict[str, tuple]:
    slots = state.optimizer["state"]
    return {n: (slots[i]["exp_avg"].double(), slots[i]["exp_avg_sq"].double(), int(slots[i]["step"].item()))
            for i, n in enumerate(names)}


# ---------------------------------------------------------------------------- Gamma per step
@pytest.fixture(scope="module")
def noisy(parent, tmp_path_factory) -> Run:
    """measured_noise from step 20 for 6 steps, the shadow over the first 4, with a float32 checkpoint and
    the optimizer state at every step (so a metrics row at every step)."""
    out = tmp_path_factory.mktemp("gamma-steps") / "noisy"
    return fork(parent, AT, "measured_noise", steps=6, out=out, gamma_every=1, gamma_window=4,
                settings={**EVERY_STEP, "save_optimizer": True}, progress=False)


def test_a_row_keeps_every_sample_since_the_previous_row(parent, noisy, tmp_path):
    """The same fork evaluated and checkpointed every 2 steps trains the same steps: each row holds the
    two samples since the previous one, with the ratios the per-step fork logged."""
    sparse = fork(parent, AT, "measured_noise", steps=6, out=tmp_path / "sparse", gamma_every=1, gamma_window=4,
                  settings={**EVERY_STEP, "eval_every": 2, "checkpoint_every": 2}, progress=False)
    rows = {r["step"]: r for r in sparse.metric_rows()}
    dense = {r["step"]: r for r in noisy.metric_rows()}
    assert rows[22]["gamma_steps"] == [21, 22] and rows[24]["gamma_steps"] == [23, 24]
    assert rows[22]["gamma_ratios"] == [dense[21]["gamma_ratios"][0], dense[22]["gamma_ratios"][0]]
    assert rows[24]["gamma_ratios"] == [dense[23]["gamma_ratios"][0], dense[24]["gamma_ratios"][0]]
    assert "gamma_steps" not in rows[26] and rows[26]["gamma_samples"] == 0  # past the window
    assert escapes(sparse, AT, "done")["gamma_median"] == escapes(noisy, AT, "done")["gamma_median"]


def test_the_per_step_ratio_agrees_with_a_recomputation(noisy):
    """u_t = params(t+1) - params(t) from the float32 checkpoints; s_t the clean AdamW step from params(t)
    with the shadow's own moments (started from the fork's at step 20, fed the full gradient g_t)."""
    run = noisy
    assert kept_steps(run) == list(range(AT, AT + 7))
    rows = {r["step"]: r for r in run.metric_rows()}
    assert [rows[s].get("gamma_steps") for s in range(AT + 1, AT + 7)] == [[21], [22], [23], [24], None, None]
    logged = {rows[s]["gamma_steps"][0]: rows[s]["gamma_ratios"][0] for s in range(AT + 1, AT + 5)}
    names = _names(run, run.state_dict(AT))
    shadow = _moments(names, kept_state(run, AT))
    mine, nums, dens = {}, [], []
    for step in range(AT, AT + 4):
        before, after = run.state_dict(step), run.state_dict(step + 1)
        assert all(torch.equal(kept_state(run, step).params[n], before[n]) for n in names)
        g = _gradient(run, before)
        taken = _adamw(run, before, shadow, g, g, run.spec.train.lr_at(step + 1))
        shadow = {n: taken[n][1:] for n in names}
        s = [taken[n][0] - before[n].double() for n in names]
        u = [after[n].double() - before[n].double() for n in names]
        nums.append(_sq(a - b for a, b in zip(u, s)))
        dens.append(_sq(s))
        mine[step + 1] = nums[-1] / dens[-1]
    assert logged.keys() == mine.keys()
    for step, ratio in mine.items():
        assert logged[step] == pytest.approx(ratio, rel=2e-3), step
    assert min(mine.values()) > 1e-3  # noise in both moments: far from the clean update
    # each row's sums are its samples' (the ratio of sums is today's Gamma)
    assert rows[22]["gamma_num"] == pytest.approx(nums[1], rel=2e-3)
    assert rows[24]["gamma_den"] == pytest.approx(dens[3], rel=1e-4)
    esc = escapes(run, AT, "done")
    assert esc["gamma"] == pytest.approx(sum(nums) / sum(dens), rel=2e-3)
    ordered = [mine[s] for s in sorted(mine)]
    assert esc["gamma_median"] == pytest.approx((sorted(ordered)[1] + sorted(ordered)[2]) / 2, rel=2e-3)
    assert escapes(run, AT, "done", gamma_window=(2, 4))["gamma_median"] == pytest.approx(sorted(ordered[1:])[1],
                                                                                          rel=2e-3)
    assert escapes(run, AT, "done", gamma_window=(3, 3))["gamma_median"] == pytest.approx(mine[AT + 3], rel=2e-3)


def test_an_escape_criterion_rejudges_the_log(noisy):
    """The same log under criteria: the default (never below 0.5 log K here: censored), a threshold the
    fork is below from its first evaluation on (escape 0), and one held longer than its evaluations go."""
    run = noisy
    series = run.metric_series("loss_first")
    top = max(series["loss_first"]) + 1.0
    assert escapes(run, AT, "done")["censored_escape"] is True
    now = escapes(run, AT, "done", f"loss_first<{top}")
    assert now["escape"] == 0 and not now["censored_escape"]
    assert escapes(run, AT, "done", f"loss_first<{top},hold=6")["escape"] == 0  # evaluated through step 26
    late = escapes(run, AT, "done", f"loss_first<{top},hold=7")
    assert math.isnan(late["escape"]) and late["censored_escape"] is True  # a hold past the horizon: a bound
    assert escapes(run, AT, "interrupted", f"loss_first<{top},hold=7")["censored_escape"] is False


# ---------------------------------------------------------------------------- v-only, isotropic xi
def test_v_only_isotropic_first_update_is_a_hand_written_adamw_step(parent, tmp_path):
    folder = tmp_path / "v_only_iso"
    arm = make_arm("v_only_noise", s=0.5, xi="isotropic")
    create_fork(parent, AT, arm, 3, folder, settings=EVERY_STEP)
    assert Run.open(folder).fork["params"] == {"s": 0.5, "xi": "isotropic"}
    shutil.copy(folder / RESUME_FILE, tmp_path / "start.safetensors")
    start = read_resume(tmp_path / "start.safetensors")
    train(Run.open(folder), stop_at=AT + 1, progress=False, stepper=fork_stepper)
    run = Run.open(folder)
    after = read_resume(folder / RESUME_FILE)
    names = _names(run, start.params)
    g = _gradient(run, start.params)
    batches = torch.Generator()
    batches.set_state(start.generators["batches"])  # the arm draws xi's two minibatches from its batch stream
    size, bs = run.task.size, run.spec.train.batch_size
    g1, g2 = (_gradient(run, start.params, run.task.tokens[torch.randint(size, (bs,), generator=batches)])
              for _ in range(2))
    xi = {n: (g1[n] - g2[n]) / math.sqrt(2) for n in names}
    noise = torch.Generator()
    noise.set_state(start.generators["noise"])  # ... and the isotropic draws from its noise stream
    draws = {n: torch.randn(start.params[n].shape, generator=noise).double() for n in names}
    scale = math.sqrt(_sq(xi.values()) / _sq(draws.values()))
    iso = {n: d * scale for n, d in draws.items()}
    assert math.sqrt(_sq(iso.values())) == pytest.approx(math.sqrt(_sq(xi.values())), rel=1e-9)
    moments = _moments(names, start)
    lr = run.spec.train.lr_at(AT + 1)
    expected = _adamw(run, start.params, moments, g, {n: g[n] + 0.5 * iso[n] for n in names}, lr)
    measured = _adamw(run, start.params, moments, g, {n: g[n] + 0.5 * xi[n] for n in names}, lr)
    got = run.state_dict(AT + 1)
    for i, name in enumerate(names):
        slot = after.optimizer["state"][i]
        assert int(slot["step"]) == expected[name][3]
        torch.testing.assert_close(slot["exp_avg"].double(), expected[name][1], rtol=1e-4, atol=1e-9)  # fed g only
        torch.testing.assert_close(slot["exp_avg_sq"].double(), expected[name][2], rtol=1e-4, atol=1e-12)
        torch.testing.assert_close(got[name].double(), expected[name][0], rtol=1e-5, atol=1e-6)
    # the second moment saw the isotropic draw, not the measured noise
    v_got = [after.optimizer["state"][i]["exp_avg_sq"].double() for i in range(len(names))]
    v_measured = [measured[n][2] for n in names]
    assert math.sqrt(_sq(a - b for a, b in zip(v_got, v_measured)) / _sq(v_measured)) > 1e-2


def test_v_only_xi_in_a_family_table(parent, tmp_path: Path):
    """Both xi in one family: distinct folders, labels that say which, the measured one named as before."""
    from interp.forks.arms import parse_arms
    from interp.forks.family import ForkFamily

    family = ForkFamily.create(parent, [str(AT)], parse_arms("v_only_noise,v_only_noise:xi=isotropic"), [0], 2,
                               tmp_path / "fam")
    names = [name for name, _, _ in family.points()]
    assert names == ["at20-v_only_noise_s1-s0", "at20-v_only_noise_s1_xiisotropic-s0"]
    table = family.table()
    assert list(table["arm_params"]) == ["s=1,xi=measured", "s=1,xi=isotropic"]
    assert set(table["escape_criterion"]) == {"loss_cand<0.5logK"}
