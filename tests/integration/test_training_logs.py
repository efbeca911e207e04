"""What training logs for the diagnostics (docs/diagnostics.md), against
independent computations: a hand-written training loop (torch.optim.AdamW, the same seeded batch
stream) that sums lr * ||g_B||^2 in Python, numpy on the AdamW state kept at a checkpoint, torch
AdamW steps on the full-batch gradient for a fork; resume continues Q exactly; and the `updates`
analysis on a trained run (kept and replayed states agree; a GPU-trained run is refused)."""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from interp.analysis import updates
from interp.checkpoints import load_params, read_resume
from interp.errors import InterpError
from interp.forks.fork import fork
from interp.metrics import batch_loss
from interp.model import build_model
from interp.run_states import kept_state
from interp.runs import RESUME_FILE, Run
from interp.seeding import torch_generator
from interp.task import VOCAB_SIZE
from interp.train import resumed_dissipation, train
from tests.helpers import copy_run, small_spec

MODULES = {"embed", "pos_embed", "L0.attn", "L0.mlp", "L0.ln", "L1.attn", "L1.mlp", "L1.ln", "ln_final", "unembed",
           "all"}


@pytest.fixture(scope="module")
def kept(tmp_path_factory) -> Run:
    """40 steps of the small spec, with the optimizer state kept beside every checkpoint."""
    run = Run.create(tmp_path_factory.mktemp("logs") / "kept", small_spec(save_optimizer=True))
    train(run, progress=False)
    return run


@pytest.fixture(scope="module")
def resumed(tmp_path_factory) -> tuple[Run, float]:
    """The same training, killed at step 35 and resumed from its step-20 state; with the Q its
    resume state held before resuming."""
    run = Run.create(tmp_path_factory.mktemp("logs") / "resumed", small_spec())
    train(run, progress=False, stop_at=35)
    before = read_resume(run.path / RESUME_FILE)
    assert before.step == 20
    train(Run.open(run.path), progress=False)
    return Run.open(run.path), before.extra["dissipation"]


def _rows(run: Run) -> dict[int, dict]:
    return {r["step"]: r for r in run.metric_rows()}


def _hand_training(run: Run) -> tuple[torch.nn.Module, dict[int, float], dict[int, float]]:
    """The run's training written out (no interp.steps): the model after its steps, and ||g_B||^2
    (summed over parameters in float64) and lr of every step."""
    spec, task = run.spec, run.task
    tspec = spec.train
    model = build_model(spec.model, task.layout.length, VOCAB_SIZE, seed=spec.seed).train()
    opt = torch.optim.AdamW(model.parameters(), lr=tspec.lr, betas=(tspec.beta1, tspec.beta2),
                            weight_decay=tspec.weight_decay)
    gen = torch_generator(spec.seed, "batches")
    sq, lrs = {}, {}
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        for t in range(1, tspec.steps + 1):
            lrs[t] = tspec.lr_at(t)
            opt.param_groups[0]["lr"] = lrs[t]
            idx = torch.randint(task.size, (tspec.batch_size,), generator=gen)
            loss = batch_loss(model, task.tokens[idx], task.layout.loss_pos)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            sq[t] = sum(float((p.grad.double() ** 2).sum()) for p in model.parameters())
            opt.step()
    finally:
        torch.use_deterministic_algorithms(was)
    return model, sq, lrs


def test_dissipation_and_gradient_columns_equal_a_hand_written_training_loop(kept):
    model, sq, lrs = _hand_training(kept)
    # the logging reads the gradients only: the weights are those of plain torch AdamW, bit for bit
    saved = kept.state_dict(40)
    assert all(torch.equal(p.detach(), saved[n]) for n, p in model.named_parameters())
    rows = _rows(kept)
    assert rows[0]["dissipation"] == 0.0 and "grad_norm" not in rows[0]
    steps = sorted(rows)
    assert steps == [0, 1, 2, 4, 8, 10, 16, 20, 30, 40]
    for prev, step in zip(steps, steps[1:]):
        row = rows[step]
        q = sum(lrs[s] * sq[s] for s in range(1, step + 1))
        assert row["dissipation"] == pytest.approx(q, rel=1e-6), step
        assert row["grad_norm"] == pytest.approx(math.sqrt(sq[step]), rel=1e-6), step
        window = [sq[s] for s in range(prev + 1, step + 1)]
        assert row["grad_sq_mean"] == pytest.approx(sum(window) / len(window), rel=1e-6), step
    assert len({round(rows[s]["grad_norm"], 6) for s in steps[1:]}) > 3  # not a constant


def test_eff_step_and_v_mean_equal_numpy_on_the_kept_optimizer_state(kept):
    names = [n for n, _ in kept.model(40).named_parameters()]
    for step in (4, 40):
        state = kept_state(kept, step)
        group = state.optimizer["param_groups"][0]
        (b1, b2), eps = group["betas"], group["eps"]
        sq, vsum, count = {}, {}, {}
        for i, name in enumerate(names):
            slot = state.optimizer["state"][i]
            t = float(slot["step"])
            assert t == step
            m_hat = slot["exp_avg"].double().numpy() / (1 - b1**t)
            v_hat = slot["exp_avg_sq"].double().numpy() / (1 - b2**t)
            top, *rest = name.split(".")
            module = top if top != "blocks" else f"L{rest[0]}." + ("ln" if rest[1] in ("ln1", "ln2") else rest[1])
            for key in (module, "all"):
                sq[key] = sq.get(key, 0.0) + float(np.sum((m_hat / (np.sqrt(v_hat) + eps)) ** 2))
                vsum[key] = vsum.get(key, 0.0) + float(v_hat.sum())
                count[key] = count.get(key, 0) + v_hat.size
        assert set(sq) == MODULES
        row = _rows(kept)[step]
        logged = {k.split(".", 1)[1] for k in row if k.startswith("eff_step.")}
        assert logged == MODULES and {k.split(".", 1)[1] for k in row if k.startswith("v_mean.")} == MODULES
        for key in MODULES:
            assert row[f"eff_step.{key}"] == pytest.approx(math.sqrt(sq[key]), rel=1e-9), (step, key)
            assert row[f"v_mean.{key}"] == pytest.approx(vsum[key] / count[key], rel=1e-9), (step, key)


def test_resume_continues_q_exactly(kept, resumed):
    run, q_at_20 = resumed
    ours, theirs = _rows(run), _rows(kept)
    assert q_at_20 == theirs[20]["dissipation"]  # the resume state holds Q at its step
    assert sorted(ours) == sorted(theirs)
    logged = [k for k in theirs[40] if k.startswith(("eff_step.", "v_mean.", "grad_", "dissipation"))]
    assert len(logged) == 3 + 2 * len(MODULES)
    for step in (30, 40):  # rows after the resume point, computed again by the resumed session
        assert all(ours[step][k] == theirs[step][k] for k in logged), step
    author = ("train_loss_first", "batch_shuffled_loss_first")  # the author's lead columns, exactly too
    assert all(ours[step][k] == theirs[step][k] for step in (30, 40) for k in author)


def test_an_older_resume_state_takes_q_from_the_metrics_log_or_nan(kept, tmp_path):
    import json
    rows = _rows(kept)
    older = SimpleNamespace(step=20, extra={"wall_seconds": 1.0})  # no "dissipation": an older interp's
    assert resumed_dissipation(kept, older) == rows[20]["dissipation"]
    assert resumed_dissipation(kept, SimpleNamespace(step=20, extra={"dissipation": 0.25})) == 0.25
    assert math.isnan(resumed_dissipation(kept, SimpleNamespace(step=20, extra={"dissipation": None})))
    # a run trained before the column existed
    older_run = tmp_path / "older"
    copy_run(kept.path, older_run)
    lines = [json.loads(line) for line in (older_run / "metrics.jsonl").read_text().splitlines()]
    (older_run / "metrics.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "dissipation"}) + "\n"
                                                     for r in lines))
    assert math.isnan(resumed_dissipation(Run.open(older_run), SimpleNamespace(step=20, extra={})))


def test_a_full_batch_fork_logs_the_gradient_its_first_moment_sees(kept, tmp_path):
    run = fork(kept, 20, "full_batch", steps=10, out=tmp_path / "fb", progress=False)
    rows = _rows(run)
    assert "dissipation" not in rows[20] and rows[30]["dissipation"] > 0  # Q counts from the fork
    # the same ten steps by hand: torch AdamW on the full-training-set gradient from the kept state
    state, task, tspec = kept_state(kept, 20), kept.task, kept.spec.train
    model = build_model(kept.spec.model, task.layout.length, VOCAB_SIZE).train()
    load_params(model, state.params)
    opt = torch.optim.AdamW(model.parameters(), lr=tspec.lr)
    opt.load_state_dict(state.optimizer)
    q, last = 0.0, 0.0
    for t in range(21, 31):
        opt.param_groups[0]["lr"] = tspec.lr_at(t)
        opt.zero_grad(set_to_none=True)
        batch_loss(model, task.tokens, task.layout.loss_pos).backward()
        last = sum(float((p.grad.double() ** 2).sum()) for p in model.parameters())
        q += tspec.lr_at(t) * last
        opt.step()
    assert rows[30]["dissipation"] == pytest.approx(q, rel=1e-4)
    assert rows[30]["grad_norm"] == pytest.approx(math.sqrt(last), rel=1e-4)
    assert rows[30]["grad_norm"] < _rows(kept)[30]["grad_norm"]  # no minibatch noise in it


# ---------------------------------------------------------------------------- the updates analysis
def test_updates_from_a_kept_and_a_replayed_state_agree(kept, resumed):
    run, _ = resumed
    a = updates.at_step(kept, 20, n_draws=4)
    b = updates.at_step(run, 20, n_draws=4)  # no kept states: replayed from the initialisation
    assert list(a.columns) == list(updates.COLUMNS) and len(a) == 1
    assert a["source"].iloc[0] == "kept" and b["source"].iloc[0] == "replayed"
    numeric = [c for c in updates.COLUMNS if c != "source"]
    assert a[numeric].equals(b[numeric])
    row = a.iloc[0]
    assert row["n_draws"] == 4 and row["batch_size"] == 16 and row["clean_norm"] > 0 and row["v_perp"] > 0
    assert row["snr_par"] == pytest.approx(row["mu_par"] / row["sd_par"])


def test_a_run_level_draw_is_torch_adamw_from_the_kept_state(kept):
    raw = updates.raw_updates(kept, 20, n_draws=2)
    assert raw["updates"].shape[:2] == (2, 2) and raw["source"] == "kept"
    assert raw["lr"] == kept.spec.train.lr_at(21)
    state, task = kept_state(kept, 20), kept.task
    model = build_model(kept.spec.model, task.layout.length, VOCAB_SIZE).train()
    load_params(model, state.params)
    opt = torch.optim.AdamW(model.parameters(), lr=raw["lr"])
    opt.load_state_dict(state.optimizer)
    opt.param_groups[0]["lr"] = raw["lr"]
    before = torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()])
    batch_loss(model, task.tokens[raw["indices"][1, 0]], task.layout.loss_pos).backward()
    opt.step()
    ref = torch.cat([p.detach().reshape(-1) for p in model.parameters()]) - before
    assert float((raw["updates"][1, 0] - ref).abs().max()) <= 1e-5 * float(ref.abs().max())


def test_updates_refuse_a_state_that_cannot_be_had(resumed):
    run = Run.open(resumed[0].path)
    run.info["training"] = [{**s, "device": "cuda"} for s in run.info["training"]]
    with pytest.raises(InterpError, match=re.escape("trained on cuda") + ".*cannot be replayed"):
        updates.at_step(run, 20, n_draws=2)
    with pytest.raises(InterpError, match="n_draws must be a positive integer"):
        updates.at_step(run, 20, n_draws=0)
