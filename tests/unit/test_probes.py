"""The residual stream's probes, LEACE erasure, direct logit attribution and the unembedding's geometry (issue 50),
each against an independent computation: scikit-learn's LogisticRegression on the same activations, a probe on the
LEACE-erased stream, TransformerLens's own `stack_head_results(apply_ln=True)`, a hand-built model whose z is
readable after layer 0 and not at the embeddings, and a W_U built with known cosines."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from interp.analysis import attribution, erasure, probes, unembed_geometry
from interp.analysis.common import group_examples, probe_groups
from interp.analysis.representations import decision_residuals
from interp.model import build_model
from interp.runs import Run
from interp.spec import FIRST_CHAR_ID, VOCAB_SIZE, ModelSpec, RunSpec, TaskSpec, TrainSpec
from tests.helpers import DEMO


@pytest.fixture(scope="module")
def demo_probe():
    """The demo at step 900: the probe's residuals, labels, groups and held-out bases."""
    run = Run.open(DEMO)
    task = run.task
    groups = probe_groups(task, 64, run.spec.seed)
    resid = decision_residuals(run.model(900), task, groups).cpu()
    labels = task.selector_id[group_examples(task, groups)]
    group = torch.arange(len(groups)).repeat_interleave(task.k)
    return run, resid, labels, group, probes.base_split(len(groups), run.spec.seed)


def test_the_probe_is_scikit_learns_logistic_regression(demo_probe):
    from sklearn.linear_model import LogisticRegression

    run, resid, labels, group, held = demo_probe
    test = held[group]
    x_train, x_test = probes.standardise(resid[:, ~test], resid[:, test])
    for c in (0.1, 1.0):
        w, b = probes.fit_logistic(x_train, labels[~test], run.task.k, c, max_iter=500)
        ours, _ = probes.score(w, b, x_test, labels[test])
        for site in (1, 2):  # L0, L1 (the embeddings are constant here)
            clf = LogisticRegression(C=c, max_iter=5000).fit(x_train[site].numpy(), labels[~test].numpy())
            theirs = clf.score(x_test[site].numpy(), labels[test].numpy())
            assert abs(float(ours[site]) - theirs) <= 0.01, (c, site, float(ours[site]), theirs)
    # the default fit (fewer iterations) decides the same
    found = probes.probe_sites(resid, labels, group, held, run.task.k, run.spec.seed)
    w, b = probes.fit_logistic(x_train, labels[~test], run.task.k, 0.1, max_iter=500)
    assert np.allclose(found["accuracy"].numpy(), probes.score(w, b, x_test, labels[test])[0].numpy(), atol=0.01)


def test_leace_leaves_a_probe_at_chance(demo_probe):
    run, resid, labels, group, held = demo_probe
    test = held[group]
    k, site = run.task.k, 1
    x = resid[site].double()
    before = probes.probe_sites(resid[site:site + 1], labels, group, held, k, 0)["accuracy"]
    erase = erasure.eraser(x[~test], labels[~test], k)
    erased = erase(x).unsqueeze(0)
    after = probes.probe_sites(erased, labels, group, held, k, 0)
    assert float(before[0]) > 0.8
    # linearly, nothing of z is left: the probe on the erased stream scores chance (1/K) on the held-out bases
    assert abs(float(after["accuracy"][0]) - 1 / k) <= 0.06 and float(after["train_accuracy"][0]) <= 1 / k + 0.06


@pytest.mark.parametrize("step", [0, 500, 1625])
def test_the_attribution_is_transformerlens_decomposition(step):
    """Per head, the mean over every example equals stack_head_results(apply_ln=True) projected on w_ln * d, to
    float32 precision; the components and bias terms add up to the logit difference."""
    run = Run.open(DEMO)
    task, model = run.task, run.model(step)
    idx = torch.arange(0, task.size, 7)  # a third of the task, every example TransformerLens's way too
    dec = task.layout.decision_pos
    values = attribution.per_example(model, task, idx)
    _, cache = model.run_with_cache(task.tokens[idx, : dec + 1])
    stack = cache.stack_head_results(layer=-1, pos_slice=dec, apply_ln=True)  # [heads, n, d_model]
    d, _ = attribution.directions(model, task, idx)
    theirs = torch.einsum("hnd,nd->hn", stack.double(), (d * model.ln_final.w.detach()).double())
    ours = values["heads"].reshape(len(idx), -1).T
    assert torch.allclose(ours, theirs, atol=2e-4, rtol=1e-4), (ours - theirs).abs().max()
    assert float(attribution.check(values).abs().max()) < 1e-3  # float32 forward, float64 sums
    table = attribution.at_step(run, step, n_examples=300)
    heads = table[table["kind"] == "head"]
    assert len(heads) == run.spec.model.n_layers * run.spec.model.n_heads
    total = table.loc[table["kind"] == "total", "attribution"].iloc[0]
    assert total == pytest.approx(table.loc[table["kind"] == "logit_diff", "attribution"].iloc[0], abs=1e-4)


def test_the_geometry_of_a_w_u_with_known_cosines():
    """Two bases of K = 3 candidates whose columns have pairwise cosine rho, each at distance sqrt(1 - rho) along
    its own selector's embedding; W_U's singular values are known."""
    rho, k, d = 0.36, 3, 12
    eye = torch.eye(d, dtype=torch.float64)
    w_u = torch.zeros(d, VOCAB_SIZE, dtype=torch.float64)
    w_e = torch.zeros(VOCAB_SIZE, d, dtype=torch.float64)
    firsts = torch.tensor([[FIRST_CHAR_ID + 0, FIRST_CHAR_ID + 1, FIRST_CHAR_ID + 2],
                           [FIRST_CHAR_ID + 3, FIRST_CHAR_ID + 4, FIRST_CHAR_ID + 5]])
    selectors = torch.tensor([[[30, 30], [31, 31], [32, 32]]] * 2)
    for base in range(2):
        c = eye[6 + base]  # the base's common direction
        for i in range(k):
            w_u[:, firsts[base, i]] = math.sqrt(rho) * c + math.sqrt(1 - rho) * eye[i]
    for i in range(k):
        w_e[30 + i] = eye[i]
    got = unembed_geometry.geometry(w_u, w_e, firsts, selectors)
    assert got["within_cos"] == pytest.approx(rho)
    assert got["cos_to_centroid"] == pytest.approx(math.sqrt(rho + (1 - rho) / k))
    assert got["selector_alignment"] == pytest.approx(math.sqrt(1 - rho))
    s = torch.linalg.svdvals(w_u)
    p = s / s.sum()
    assert got["effective_rank"] == pytest.approx(float(torch.exp(-(p[p > 0] * p[p > 0].log()).sum())))
    # the mean of every character's column: the six columns (and 30 zeros) average to the bases' mean direction
    mean = w_u[:, FIRST_CHAR_ID:].mean(1)
    want = np.mean([float(torch.nn.functional.cosine_similarity(w_u[:, firsts[b]].mean(1), mean, dim=0))
                    for b in range(2)])
    assert got["centroid_to_mean_cos"] == pytest.approx(want)


# ---------------------------------------------------------------------------- a hand-built model
SPEC = RunSpec(seed=4, task=TaskSpec(k=4, n_bases=50),
               model=ModelSpec(n_layers=1, n_heads=1, d_model=64, d_head=64, d_mlp=4), train=TrainSpec(steps=40))


def routing_model(copies_z: bool):
    """One layer, one head: tokens one-hot in dims 0..39, positions in 40..55; the head's query at the decision
    position (10) matches the keys at the z positions (8, 9), and (when `copies_z`) its value and output copy the
    token dims there: the residual after layer 0 holds z's tokens, the embeddings at the decision position never
    vary. The MLP writes nothing."""
    model = build_model(SPEC.model, SPEC.task.sequence_length, VOCAB_SIZE)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.W_E[:, :VOCAB_SIZE] = torch.eye(VOCAB_SIZE)
        model.W_pos[:, VOCAB_SIZE:VOCAB_SIZE + 16] = torch.eye(16)
        for ln in (model.blocks[0].ln1, model.blocks[0].ln2, model.ln_final):
            ln.w.fill_(1.0)
        attn = model.blocks[0].attn
        attn.W_Q[0, VOCAB_SIZE + 10, 0] = 10.0
        attn.W_K[0, VOCAB_SIZE + 8, 0] = attn.W_K[0, VOCAB_SIZE + 9, 0] = 1.0
        if copies_z:
            attn.W_V[0, :VOCAB_SIZE, :VOCAB_SIZE] = torch.eye(VOCAB_SIZE)
            attn.W_O[0, :VOCAB_SIZE, :VOCAB_SIZE] = torch.eye(VOCAB_SIZE)
        model.W_U.copy_(torch.randn(64, VOCAB_SIZE, generator=torch.Generator().manual_seed(0)))
    return model


def test_a_hand_built_model_gives_a_decodable_onset_at_layer_0_only(tmp_path):
    run = Run.create(tmp_path / "hand", SPEC)
    for step in (0, 10, 20, 30, 40):  # the head starts copying z at step 20
        run.save_checkpoint(step, routing_model(copies_z=step >= 20))
    run.release()
    run = Run.open(run.path)
    table = probes.across(run, steps="all", n_groups=None)
    assert not table.loc[table["site"] == "embed", "decodable"].any()
    l0 = table[table["site"] == "L0"].set_index("step")
    assert list(l0["decodable"]) == [False, False, True, True, True]
    assert (l0.loc[[20, 30, 40], "accuracy"] == 1.0).all() and (l0.loc[[20, 30, 40], "selectivity"] >= 0.5).all()
    assert probes.decodable_onsets(table) == {"embed": None, "L0": 20}
    found = probes.findings(run, {"probes": table}, 40, {})
    assert found["decodable_onset"] == 20 and found["decodable_site"] == "L0" and found["decodable_lead"] == 0.5
