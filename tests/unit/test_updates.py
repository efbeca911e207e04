"""One-step drift against diffusion (`interp.analysis.updates`) against independent computations:
torch.optim.AdamW stepping a copy of the model and optimizer, and the statistics written out in
numpy; and its figures. The state is made by hand (three AdamW steps on a tiny model), so no
run is trained here (tests/integration/test_training_logs.py runs it on a trained run)."""

import copy

import numpy as np
import pandas as pd
import pytest
import torch

from interp.analysis import updates
from interp.errors import InterpError
from interp.metrics import batch_loss
from interp.model import ModelSpec, build_model, copy_model
from interp.plots.updates import dissipation_curve, update_bars
from interp.task import VOCAB_SIZE, Task, TaskSpec

LR = 3e-3
BATCH = 8


@pytest.fixture(scope="module")
def state():
    """A tiny model after three AdamW steps (non-trivial moments, step counter 3)."""
    torch.use_deterministic_algorithms(True)
    task = Task.generate(TaskSpec(k=4, n_bases=12), seed=3)
    model = build_model(ModelSpec(n_layers=1, n_heads=2, d_model=16, d_head=8, d_mlp=32), task.layout.length,
                        VOCAB_SIZE, seed=1).train()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.999), weight_decay=0.01)
    gen = torch.Generator().manual_seed(7)
    for _ in range(3):
        idx = torch.randint(task.size, (BATCH,), generator=gen)
        opt.zero_grad()
        batch_loss(model, task.tokens[idx], task.layout.loss_pos).backward()
        opt.step()
    opt.zero_grad(set_to_none=True)
    yield updates.UpdateState(model, opt, 2e-3, task.tokens, task.layout.loss_pos, BATCH)
    torch.use_deterministic_algorithms(False)


def _indices(st, n_draws, seed=0):
    return updates.minibatch_indices(torch.Generator().manual_seed(seed), n_draws, st.tokens.shape[0], st.batch_size)


def _flat(model) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def _torch_step(st, rows: torch.Tensor | None) -> torch.Tensor:
    """theta' - theta of torch.optim.AdamW on a copy of model and optimizer (rows None: every example)."""
    model = copy_model(st.model)  # a TL 4 bridge may hold its last forward's captured activations (not deep-copyable)
    opt = torch.optim.AdamW(model.parameters(), lr=st.lr)
    opt.load_state_dict(copy.deepcopy(st.optimizer.state_dict()))
    opt.param_groups[0]["lr"] = st.lr
    before = _flat(model).clone()
    tokens = st.tokens if rows is None else st.tokens[rows]
    batch_loss(model, tokens, st.loss_pos).backward()
    opt.step()
    return _flat(model) - before


def test_one_draw_is_torch_adamw_on_that_minibatch_and_the_state_is_untouched(state):
    theta = _flat(state.model).clone()
    moments = {k: v.clone() for k, v in state.optimizer.state[state.params[0]].items()}
    idx = _indices(state, 3)
    u = torch.cat(list(updates.update_pairs(state, idx, chunk_pairs=2)))
    assert u.shape == (3, 2, theta.numel())
    for pair, side in ((0, 0), (2, 1)):
        ref = _torch_step(state, idx[pair, side])
        scale = float(ref.abs().max())
        assert float((u[pair, side] - ref).abs().max()) <= 1e-5 * scale, (pair, side)
    assert not torch.equal(u[0, 0], u[0, 1])  # two minibatches, two updates
    assert torch.equal(_flat(state.model), theta)  # nothing moved
    after = state.optimizer.state[state.params[0]]
    assert all(torch.equal(after[k], v) for k, v in moments.items())


def test_the_clean_update_is_torch_adamw_on_the_full_batch_gradient(state):
    s = updates.clean_update(state)
    ref = _torch_step(state, None)  # one backward over all 48 examples, unchunked
    assert float((s - ref).abs().max()) <= 1e-5 * float(ref.abs().max())


def test_statistics_equal_numpy_on_the_stored_draws(state):
    n_draws = 6
    idx = _indices(state, n_draws, seed=1)
    u = torch.cat(list(updates.update_pairs(state, idx))).double().numpy()  # [6, 2, P]
    s = updates.clean_update(state).double().numpy()
    got = updates.update_stats(state, idx, updates.clean_update(state), chunk_pairs=4)  # chunks of 4 + 2

    flat = u.reshape(2 * n_draws, -1)
    e = s / np.linalg.norm(s)
    along = flat @ e
    perp = flat - np.outer(along, e)
    mean_u = flat.mean(0)
    want = {
        "mu_par": float(mean_u @ e),
        "sd_par": float(np.std(along, ddof=1)),
        "v_perp": float(np.var(perp, axis=0, ddof=1).sum()),  # trace of the covariance
        "v_perp_paired": float(np.mean([np.sum((perp[2 * j] - perp[2 * j + 1]) ** 2) / 2 for j in range(n_draws)])),
        "clean_norm": float(np.linalg.norm(s)),
        "mean_update_norm": float(np.mean(np.linalg.norm(flat, axis=1))),
        "cos_mean_clean": float(mean_u @ s / (np.linalg.norm(mean_u) * np.linalg.norm(s))),
    }
    want["snr_par"] = want["mu_par"] / want["sd_par"]
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-6), key
    # the pairs are the rows of the stored draws: paired and plain estimates differ, both positive
    assert got["v_perp"] > 0 and got["v_perp_paired"] > 0 and got["v_perp"] != got["v_perp_paired"]


def test_bad_draw_counts_are_refused():
    for bad in (0, -3, 2.5, True, "8"):
        with pytest.raises(InterpError, match="n_draws must be a positive integer"):
            updates._check(bad)


# ---------------------------------------------------------------------------- figures
def _table() -> pd.DataFrame:
    return pd.DataFrame({"step": [925, 231], "mu_par": [2e-4, -1e-5], "sd_par": [1e-4, 4e-5], "snr_par": [2.0, -0.25],
                         "v_perp": [4e-6, 9e-6], "v_perp_paired": [4.1e-6, 8.8e-6], "clean_norm": [1e-3, 2e-3],
                         "mean_update_norm": [3e-3, 3e-3], "cos_mean_clean": [0.9, 0.1], "n_draws": 64,
                         "batch_size": 128, "source": "kept"})


def test_update_bars_draw_the_table_sorted_by_step():
    fig = update_bars(_table(), tau=900)
    by_name = {t.name: t for t in fig.data}
    mu = by_name["μ∥ (± sd over minibatches)"]
    assert list(mu.x) == [231, 925] and list(mu.y) == [-1e-5, 2e-4] and list(mu.error_y.array) == [4e-5, 1e-4]
    assert np.allclose(by_name["√V⊥ (transverse)"].y, [3e-3, 2e-3])
    assert list(by_name["SNR∥"].y) == [-0.25, 2.0]
    assert any(getattr(s, "name", None) == "tau" for s in fig.layout.shapes)
    with pytest.raises(InterpError, match="empty"):
        update_bars(_table().iloc[:0])
    with pytest.raises(InterpError, match="lacks the column"):
        update_bars(_table().drop(columns=["v_perp"]))


def test_dissipation_curve_needs_the_column_and_draws_it():
    old = pd.DataFrame({"step": [0, 10], "loss": [3.0, 2.0]})  # a run trained before the column existed
    with pytest.raises(InterpError, match="no dissipation column"):
        dissipation_curve(old)
    with pytest.raises(InterpError, match="no dissipation column"):
        dissipation_curve(old.assign(dissipation=np.nan))
    metrics = pd.DataFrame({"step": [10, 0, 20], "dissipation": [0.5, 0.0, 0.9], "grad_norm": [2.0, np.nan, 1.0],
                            "grad_sq_mean": [4.0, np.nan, 9.0]})
    fig = dissipation_curve(metrics, tau=15)
    traces = {t.name: t for t in fig.data}
    assert list(traces["Q(t) = Σ lr ‖g_B‖²"].y) == [0.0, 0.5, 0.9]
    assert list(traces["‖g_B‖ (the row's step)"].y) == [2.0, 1.0]
    assert list(traces["rms ‖g_B‖ since the previous row"].y) == [2.0, 3.0]
