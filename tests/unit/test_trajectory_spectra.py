"""Trajectory and head spectra against independent computations: explicit state-dict differences
of HookedTransformers with known weights, torch.linalg.svd of the explicit circuit matrices, and a
hand formula of the effective rank on matrices built with known singular values."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from interp.analysis import spectra, trajectory
from interp.analysis.cache import decode_table, encode_table
from interp.analysis.common import Checkpoints
from interp.errors import InterpError
from interp.model import build_model
from interp.names import head_name
from interp.runs import Run
from interp.task import VOCAB_SIZE
from tests.helpers import small_spec

STEPS = (0, 10, 30, 60, 100)


@pytest.fixture(scope="module")
def hand_run(tmp_path_factory) -> Run:
    """A run whose checkpoints are models of known, different weights (no training): each step is
    the previous one plus a random move, partly along a fixed direction, so consecutive
    displacements have a cosine well away from 0 and from 1. Stored in float16."""
    spec = small_spec(checkpoint_dtype="float16")
    run = Run.create(tmp_path_factory.mktemp("traj") / "run", spec)
    model = build_model(spec.model, spec.task.sequence_length, VOCAB_SIZE, seed=1)
    gen = torch.Generator().manual_seed(7)
    drift = {n: torch.randn(p.shape, generator=gen) for n, p in model.named_parameters()}
    for i, step in enumerate(STEPS):
        if i:
            with torch.no_grad():
                for n, p in model.named_parameters():
                    p.add_(0.02 * (step / 10) * drift[n] + 0.03 * torch.randn(p.shape, generator=gen))
        run.save_checkpoint(step, model)
    run.release()
    return run


def members(model, component: str) -> list[torch.Tensor]:
    """The tensors (or slices) of one trajectory component, listed by hand from the model's blocks."""
    if component == "all":
        return [p for _, p in model.named_parameters()]
    if component == "W_E":
        return [model.embed.W_E]
    if component == "W_pos":
        return [model.pos_embed.W_pos]
    if component == "W_U":
        return [model.unembed.W_U, model.unembed.b_U]
    if component == "ln_final":
        return [model.ln_final.w, model.ln_final.b]
    layer, _, rest = component.partition(".")
    if layer.startswith("L") and "H" in layer:
        l, h = (int(x) for x in layer[1:].split("H"))
        attn = model.blocks[l].attn
        return {"Q": [attn.W_Q[h], attn.b_Q[h]], "K": [attn.W_K[h], attn.b_K[h]], "V": [attn.W_V[h], attn.b_V[h]],
                "O": [attn.W_O[h]]}[rest]
    block = model.blocks[int(layer[1:])]
    if rest == "b_O":
        return [block.attn.b_O]
    if rest == "mlp":
        return [block.mlp.W_in, block.mlp.b_in, block.mlp.W_out, block.mlp.b_out]
    if rest in ("ln1", "ln2"):
        ln = getattr(block, rest)
        return [ln.w, ln.b]
    raise AssertionError(component)


def flat(model, component: str) -> torch.Tensor:
    return torch.cat([t.detach().double().reshape(-1) for t in members(model, component)])


# ---------------------------------------------------------------------------- trajectory
def test_trajectory_equals_explicit_state_dict_differences(hand_run):
    table = trajectory.across(hand_run)
    models = {s: hand_run.model(s) for s in STEPS}
    cfg = models[0].cfg
    expected = (["W_E", "W_pos"] + [f"L{l}.ln1" for l in range(cfg.n_layers)]
                + [f"{head_name(l, h)}.{p}" for l in range(cfg.n_layers) for h in range(cfg.n_heads) for p in "QKVO"]
                + [f"L{l}.{c}" for l in range(cfg.n_layers) for c in ("b_O", "ln2", "mlp")]
                + ["ln_final", "W_U", "all"])
    assert sorted(table.loc[table["step"] == 30, "component"]) == sorted(expected)
    assert list(table.columns) == list(trajectory.COLUMNS)
    for i, step in enumerate(STEPS):
        rows = table[table["step"] == step].set_index("component")
        assert (rows["prev_step"] == (STEPS[i - 1] if i else -1)).all()
        for comp in expected:
            now = flat(models[step], comp)
            row = rows.loc[comp]
            assert row["weight_norm"] == pytest.approx(float(torch.linalg.vector_norm(now)), rel=1e-10)
            if i == 0:
                assert math.isnan(row["displacement"]) and math.isnan(row["cosine"])
                continue
            d2 = now - flat(models[STEPS[i - 1]], comp)
            norm = float(torch.linalg.vector_norm(d2))
            assert row["displacement"] == pytest.approx(norm, rel=1e-10)
            assert row["displacement_per_step"] == pytest.approx(norm / (step - STEPS[i - 1]), rel=1e-10)
            if i == 1:
                assert math.isnan(row["cosine"])
                continue
            d1 = flat(models[STEPS[i - 1]], comp) - flat(models[STEPS[i - 2]], comp)
            cos = float(torch.dot(d1, d2) / (torch.linalg.vector_norm(d1) * torch.linalg.vector_norm(d2)))
            assert row["cosine"] == pytest.approx(cos, abs=1e-10)
    cos_all = table.loc[(table["component"] == "all") & (table["step"] >= 30), "cosine"]
    assert ((cos_all > 0.2) & (cos_all < 0.99)).all(), cos_all  # the drift shows, the noise too: not trivial
    kinds = table.drop_duplicates("component").set_index("component")["kind"]
    assert kinds["W_E"] == "embed" and kinds["L0H1.O"] == "head" and kinds["L1.b_O"] == "attn"
    assert kinds["L0.mlp"] == "mlp" and kinds["ln_final"] == "ln" and kinds["W_U"] == "unembed"
    head_rows = table[table["component"] == "L1H0.K"]
    assert (head_rows["layer"] == 1).all() and (head_rows["head"] == 0).all()
    assert (table.loc[table["component"] == "W_U", ["layer", "head"]] == -1).all().all()


def test_components_partition_the_parameters(hand_run):
    table = trajectory.across(hand_run, steps=[30, 60, 100])
    for column in ("displacement", "weight_norm"):
        parts = table[table["kind"] != "all"].groupby("step")[column].apply(lambda v: float((v ** 2).sum()))
        whole = table[table["kind"] == "all"].set_index("step")[column] ** 2
        np.testing.assert_allclose(parts.to_numpy(), whole.loc[parts.index].to_numpy(), rtol=1e-10)
    # and "all" is the norm of the whole state-dict difference
    a, b = hand_run.state_dict(60), hand_run.state_dict(30)
    diff = torch.cat([(a[n].double() - b[n].double()).reshape(-1) for n in a])
    row = table[(table["step"] == 60) & (table["component"] == "all")].iloc[0]
    assert row["displacement"] == pytest.approx(float(torch.linalg.vector_norm(diff)), rel=1e-10)


def test_results_never_depend_on_the_store(hand_run, tmp_path):
    fresh = {s: trajectory.at_step(hand_run, s) for s in STEPS}
    reader = Checkpoints(hand_run)  # what the suite and `across` pass: the checkpoints kept for one call
    for order in ([100, 30, 60, 10, 0, 100], [60, 60, 0, 30]):  # any order, repeated steps
        for s in order:
            pd.testing.assert_frame_equal(trajectory.at_step(hand_run, s), fresh[s])
            pd.testing.assert_frame_equal(trajectory.at_step(hand_run, s, previous=reader), fresh[s])
    with_model = trajectory.at_step(hand_run, 60, model=hand_run.model(60))
    pd.testing.assert_frame_equal(with_model, fresh[60], check_exact=False, rtol=1e-12)
    # a checkpoint replaced on disk is read again, never served stale
    copy = Run.create(tmp_path / "copy", hand_run.spec)
    models = {s: hand_run.model(s) for s in (0, 10, 30)}
    for s in (0, 10, 30):
        copy.save_checkpoint(s, models[s])
    before = trajectory.at_step(copy, 30)
    with torch.no_grad():
        models[10].embed.W_E.mul_(2.0)
    copy.save_checkpoint(10, models[10])
    after = trajectory.at_step(copy, 30).set_index("component")
    again = trajectory.at_step(copy, 30).set_index("component")
    pd.testing.assert_frame_equal(after, again)
    assert after.loc["W_E", "displacement"] != before.set_index("component").loc["W_E", "displacement"]
    copy.release()


def test_trajectory_refuses_unknown_parameters_and_options(hand_run):
    with pytest.raises(InterpError, match="belongs to no trajectory component"):
        trajectory.layout({"embed.W_E": (4, 3), "blocks.0.attn.W_gate": (2, 3)})
    with pytest.raises(InterpError, match="takes no parameters"):
        trajectory.at_step(hand_run, 10, n_groups=3)
    with pytest.raises(InterpError, match="not saved"):
        trajectory.at_step(hand_run, 11)


# ---------------------------------------------------------------------------- spectra
def test_spectra_equal_the_svd_of_the_explicit_circuits(hand_run):
    model = hand_run.model(60)
    tables = spectra.at_step(hand_run, 60, model=model)
    from_disk = spectra.at_step(hand_run, 60)
    for name in ("spectra", "spectra_values"):
        pd.testing.assert_frame_equal(tables[name], from_disk[name])
    table = tables["spectra"].set_index(["head_name", "circuit"])
    values = tables["spectra_values"]
    cfg = model.cfg
    assert len(table) == cfg.n_layers * cfg.n_heads * 2 and len(values) == len(table) * cfg.d_head
    for l in range(cfg.n_layers):
        for h in range(cfg.n_heads):
            attn = model.blocks[l].attn
            w = {n: getattr(attn, n)[h].detach().double() for n in ("W_Q", "W_K", "W_V", "W_O")}
            mats = {"OV": w["W_V"] @ w["W_O"], "QK": w["W_Q"] @ w["W_K"].T}
            for circuit, m in mats.items():
                assert m.shape == (cfg.d_model, cfg.d_model)
                s = torch.linalg.svd(m).S  # all d_model of them
                row = table.loc[(head_name(l, h), circuit)]
                p = s / s.sum()
                erank = math.exp(-sum(float(x * math.log(x)) for x in p if x > 0))
                assert row["sigma_1"] == pytest.approx(float(s[0]), rel=1e-9)
                assert row["sigma_2"] == pytest.approx(float(s[1]), rel=1e-9)
                assert row["sigma_ratio"] == pytest.approx(float(s[0] / s[1]), rel=1e-9)
                assert row["effective_rank"] == pytest.approx(erank, rel=1e-8)
                assert row["nuclear_norm"] == pytest.approx(float(torch.linalg.matrix_norm(m, "nuc")), rel=1e-9)
                assert row["frobenius"] == pytest.approx(float(torch.linalg.matrix_norm(m)), rel=1e-9)
                got = values[(values["layer"] == l) & (values["head"] == h) & (values["circuit"] == circuit)]
                assert list(got["index"]) == list(range(cfg.d_head))
                np.testing.assert_allclose(got["value"], s[: cfg.d_head].numpy(), rtol=1e-9, atol=1e-12)
    assert table["effective_rank"].std() > 0.01  # heads differ: the test can see a mix-up


def test_effective_rank_of_matrices_with_known_singular_values():
    gen = torch.Generator().manual_seed(0)
    d, r = 12, 5
    for s in ([4.0, 2.0, 1.0, 1.0, 0.5], [3.0, 3.0, 3.0, 3.0, 3.0], [2.0, 1e-3, 0.0, 0.0, 0.0]):
        u, _ = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=torch.float64))
        v, _ = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=torch.float64))
        sv = torch.tensor(s, dtype=torch.float64)
        a, b = u[:, :r] * sv, v[:, :r]  # a b^T = U diag(s) V^T
        got = spectra.low_rank_svdvals(a, b)
        np.testing.assert_allclose(got.numpy(), sorted(s, reverse=True), atol=1e-12)
        total = sum(s)
        hand = math.exp(-sum(x / total * math.log(x / total) for x in s if x > 0))
        assert float(spectra.effective_rank(got)) == pytest.approx(hand, rel=1e-9)
    assert float(spectra.effective_rank(torch.full((5,), 3.0, dtype=torch.float64))) == pytest.approx(5.0)
    assert math.isnan(float(spectra.effective_rank(torch.zeros(4, dtype=torch.float64))))
    # a head wider than the model: the product itself is decomposed
    a, b = torch.randn(3, 5, generator=gen), torch.randn(3, 5, generator=gen)
    np.testing.assert_allclose(spectra.low_rank_svdvals(a, b).numpy(),
                               torch.linalg.svdvals(a.double() @ b.double().T).numpy(), rtol=1e-10)
    zero = spectra.spectra_tables(0, torch.zeros(1, 1, 2, 3, dtype=torch.float64))["spectra"]
    assert zero["sigma_ratio"].isna().all() and zero["effective_rank"].isna().all()


def test_spectra_refuses_options(hand_run):
    with pytest.raises(InterpError, match="takes no parameters"):
        spectra.at_step(hand_run, 10, k=3)


# ---------------------------------------------------------------------------- figures
def test_figures_build_from_fresh_and_cached_tables(hand_run):
    from interp.plots import weights

    traj = trajectory.across(hand_run)
    spec_tables = spectra.across_tables(hand_run)
    assert set(spec_tables["spectra"]["step"]) == set(STEPS)
    for table in (traj, decode_table(encode_table(traj))):
        fig = weights.trajectory_curves(table, tau=40, onsets={"L0H1": 30, "none": None})
        names = {t.name for t in fig.data}
        assert {"all", "head", "mlp", "embed", "ln", "cosine (all)"} <= names
        cos = next(t for t in fig.data if t.name == "cosine (all)")
        assert list(cos.x) == [30, 60, 100]
        disp_all = next(t for t in fig.data if t.name == "all" and t.yaxis == "y")
        assert list(disp_all.x) == list(STEPS[1:])
        heads = next(t for t in fig.data if t.name == "head" and t.yaxis == "y")
        rows = traj[(traj["kind"] == "head") & (traj["step"] == 60)]
        assert heads.y[list(heads.x).index(60)] == pytest.approx(math.sqrt((rows["displacement_per_step"] ** 2).sum()))
    for table in (spec_tables["spectra"], decode_table(encode_table(spec_tables["spectra"]))):
        fig = weights.spectra_curves(table, tau=40, onsets={"L0H1": 30}, highlight="L0H1")
        assert len(fig.data) == 2 * 2 * 2 * 2  # heads x circuits x (rank, ratio)
        hot = [t for t in fig.data if t.name == "L0H1"]
        assert hot and all(t.line.color == "#d62728" and t.line.width == 4 for t in hot)
        assert all(len(t.x) == len(STEPS) for t in fig.data)
    for build, table in ((weights.trajectory_curves, traj), (weights.spectra_curves, spec_tables["spectra"])):
        with pytest.raises(InterpError, match="empty"):
            build(table.iloc[:0])
