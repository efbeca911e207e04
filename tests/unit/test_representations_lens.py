"""Representations and the logit lens against independent computations: per-example loops over a
full TransformerLens cache, the model's own metrics (interp.metrics) and a weight-processed copy."""

import copy
import math
import pandas as pd
import pytest
import torch
from transformer_lens.utilities import get_act_name

from interp.analysis import lens, representations
from interp.analysis.common import group_examples, probe_groups
from interp.errors import InterpError
from interp.metrics import evaluate_examples
from interp.model import ModelSpec
from interp.plots.activations import lens_curves, representation_curves
from interp.runs import Run
from interp.task import Task
from tests.helpers import random_model, small_spec

SEED = 7  # the run's seed: it draws the task and picks the probe groups


def make_run(path, **overrides) -> Run:
    """An untrained run folder: at_step reads its task and seed; the models are given."""
    return Run.create(path, small_spec(seed=SEED, k=4, n_bases=12, **overrides))


SHAPE = ModelSpec(n_layers=3, n_heads=2, d_model=24, d_head=8, d_mlp=48, init_std=0.4)  # the random models' shape


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Run:
    return make_run(tmp_path_factory.mktemp("activations") / "run")


@pytest.fixture(scope="module")
def task(run) -> Task:
    return run.task


@pytest.fixture(scope="module")
def model(task):
    return random_model(task, SHAPE, seed=2)


def probe_rows(task: Task, groups: list[int]) -> list[list[int]]:
    """Example indices of each group, selector by selector, found by scanning the task (not group_examples)."""
    return [[next(n for n in range(task.size) if int(task.group_id[n]) == g and int(task.selector_id[n]) == k)
             for k in range(task.k)] for g in groups]


@torch.no_grad()
def site_vectors(model, task: Task, n: int) -> list[torch.Tensor]:
    """The decision-position residual of example n at each site (embed, L0, ...), from a full cache."""
    _, cache = model.run_with_cache(task.tokens[n : n + 1])
    dec = task.layout.decision_pos
    acts = [cache[get_act_name("resid_pre", 0)]] + [cache[get_act_name("resid_post", l)]
                                                    for l in range(model.cfg.n_layers)]
    return [a[0, dec].double() for a in acts]


# ---------------------------------------------------------------------------- representations
def test_representations_equal_a_per_group_loop(run, task, model):
    df = representations.at_step(run, 100, model=model, n_groups=5)
    groups = probe_groups(task, 5, SEED).tolist()
    assert len(groups) == 5 and df["n_groups"].eq(5).all()
    assert list(df["site"]) == ["embed", "L0", "L1", "L2"] and list(df["layer"]) == [-1, 0, 1, 2]
    assert df["step"].eq(100).all()
    vectors = [[site_vectors(model, task, n) for n in row] for row in probe_rows(task, groups)]
    for s in range(len(df)):
        x = [[vectors[g][k][s] for k in range(task.k)] for g in range(len(groups))]
        means = [sum(row) / task.k for row in x]
        grand = sum(means) / len(groups)
        within = sum(sum(float((v - m) @ (v - m)) for v in row) / task.k for row, m in zip(x, means)) / len(groups)
        between = sum(float((m - grand) @ (m - grand)) for m in means) / len(groups)
        total = sum(float((v - grand) @ (v - grand)) for row in x for v in row) / (len(groups) * task.k)
        row = df.iloc[s]
        assert row["within"] == pytest.approx(within, rel=1e-5, abs=1e-9)
        assert row["between"] == pytest.approx(between, rel=1e-5, abs=1e-9)
        assert row["total"] == pytest.approx(total, rel=1e-5, abs=1e-9)
        assert row["total"] == pytest.approx(row["within"] + row["between"], rel=1e-12, abs=1e-15)
        if between > 0:
            assert row["ratio"] == pytest.approx(within / between, rel=1e-4)
    # the embeddings at the decision position are one SEP token for every example: no variance at all
    assert df.iloc[0][["within", "between", "total"]].tolist() == [0.0, 0.0, 0.0] and math.isnan(df.iloc[0]["ratio"])
    assert (df.iloc[1:]["within"] > 1e-3).all() and (df.iloc[1:]["between"] > 1e-3).all()  # not a constant


def test_variance_split_is_exact_and_chunking_changes_nothing(task, model):
    x = torch.randn(2, 6, 5, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 3 + 10
    split = representations.variance_split(x)
    flat = x.reshape(2, 30, 7)
    torch.testing.assert_close(split["total"], flat.var(1, correction=0).sum(-1))  # torch's own variance
    torch.testing.assert_close(split["within"], x.var(2, correction=0).sum(-1).mean(1))
    torch.testing.assert_close(split["between"], x.mean(2).var(1, correction=0).sum(-1))
    torch.testing.assert_close(split["within"] + split["between"], split["total"], rtol=1e-13, atol=0)
    groups = torch.arange(task.n_groups)
    whole = representations.decision_residuals(model, task, groups)
    chunked = representations.decision_residuals(model, task, groups, chunk_groups=5)
    assert whole.shape == (4, task.size, 24)
    torch.testing.assert_close(chunked, whole, rtol=1e-6, atol=1e-6)


def test_bad_probe_is_refused(run, task, model):
    with pytest.raises(InterpError, match="at least one group"):
        representations.at_step(run, 0, model=model, n_groups=0)
    with pytest.raises(InterpError, match="HookedTransformer"):
        representations.decision_residuals(torch.nn.Linear(2, 2), task, torch.arange(2))


# ---------------------------------------------------------------------------- lens
@torch.no_grad()
def test_lens_equals_tl_cache_readout_and_a_per_example_loop(run, task):
    model = random_model(task, SHAPE, seed=2, dtype=torch.float64)
    df = lens.at_step(run, 5, model=model, n_groups=4)
    groups = probe_groups(task, 4, SEED).tolist()
    rows = [n for row in probe_rows(task, groups) for n in row]
    dec = task.layout.decision_pos
    _, cache = model.run_with_cache(task.tokens[rows])
    resid = [cache["resid_pre", 0]] + [cache["resid_post", l] for l in range(model.cfg.n_layers)]
    assert list(df["site"]) == ["embed", "L0", "L1", "L2"] and df["n_examples"].eq(16).all()
    for s, r in enumerate(resid):
        logits = model.unembed(model.ln_final(r))[:, dec]  # [n, vocab]
        first, cand, hits = [], [], []
        for i, n in enumerate(rows):
            logp = logits[i].log_softmax(-1)
            first.append(-float(logp[task.tokens[n, dec + 1]]))
            g, k = int(task.group_id[n]), int(task.selector_id[n])
            others = [next(m for m in range(task.size) if task.group_id[m] == g and task.selector_id[m] == j)
                      for j in range(task.k)]
            firsts = [float(logits[i, task.tokens[m, dec + 1]]) for m in others]
            top = max(firsts)
            cand.append(top + math.log(sum(math.exp(f - top) for f in firsts)) - firsts[k])
            hits.append(float(max(range(task.k), key=lambda j: firsts[j]) == k))
        row = df.iloc[s]
        assert row["loss_first"] == pytest.approx(sum(first) / len(first), rel=1e-9)
        assert row["loss_cand"] == pytest.approx(sum(cand) / len(cand), rel=1e-9)
        assert row["acc_cand"] == pytest.approx(sum(hits) / len(hits))
        assert row["loss_cand_over_log_k"] == pytest.approx(row["loss_cand"] / math.log(task.k))
    assert df["loss_cand"].std() > 1e-3  # the sites differ


def test_last_layer_of_the_lens_is_the_models_own_first_token_loss(run, task, model):
    df = lens.at_step(run, 0, model=model, n_groups=6)
    idx = group_examples(task, probe_groups(task, 6, SEED))
    own = evaluate_examples(model, task, idx)
    last = df.iloc[-1]
    assert last["site"] == "L2"
    assert last["loss_first"] == pytest.approx(float(own["loss_first"].mean()), rel=1e-5)
    assert last["loss_cand"] == pytest.approx(float(own["loss_cand_first"].mean()), rel=1e-5)


def test_folded_model_reads_out_the_same_lens(run, task, model):
    """fold_ln turns ln_final into LNPre (on TL 4: an LN of unit weight and zero bias) and moves its weights into
    W_U; centring shifts the stream and the logits by per-example constants: the lens must not change."""
    from interp.checkpoints import load_params
    from interp.model import is_bridge, process_weights, tl_params

    model = copy.deepcopy(model)  # LayerNorms that are not the identity, so that folding moves something
    gen = torch.Generator().manual_seed(4)
    load_params(model, {n: p.detach() + (0.3 * torch.randn(p.shape, generator=gen) if ".ln" in n else 0)
                        for n, p in tl_params(model).items()})
    folded = process_weights(copy.deepcopy(model), fold_ln=True, center_writing_weights=True, center_unembed=True)
    assert folded.cfg.normalization_type == ("LN" if is_bridge(folded) else "LNPre")
    if is_bridge(folded):
        assert torch.equal(tl_params(folded)["ln_final.w"], torch.ones(SHAPE.d_model))
    plain = lens.at_step(run, 0, model=model, n_groups=None)
    again = lens.at_step(run, 0, model=folded, n_groups=None)
    cols = ["loss_first", "loss_cand", "acc_cand"]
    pd.testing.assert_frame_equal(again[cols], plain[cols], rtol=1e-4, atol=1e-5)
    odd = copy.deepcopy(model)
    odd.cfg.normalization_type = "LNSomething"
    with pytest.raises(InterpError, match="normalization_type 'LNSomething' is not supported"):
        lens.at_step(run, 0, model=odd, n_groups=2)


def test_direction_without_candidates_has_nan_candidate_lens(tmp_path):
    run = make_run(tmp_path / "run", direction="a_to_b")
    task = run.task
    assert not task.has_candidates
    df = lens.at_step(run, 0, model=random_model(task, SHAPE, seed=2), n_groups=3)
    assert df["loss_cand"].isna().all() and df["acc_cand"].isna().all()
    assert df["loss_first"].notna().all() and (df["loss_first"] > 0).all()


# ---------------------------------------------------------------------------- the demo run
def test_demo_run_at_its_last_step(demo_run):
    step = demo_run.steps[-1]
    model = demo_run.model(step)
    rep = representations.at_step(demo_run, step, model=model)
    lensed = lens.at_step(demo_run, step, model=model)
    assert rep["n_groups"].eq(64).all() and lensed["n_examples"].eq(640).all()
    assert list(rep["site"]) == ["embed", "L0", "L1"] == list(lensed["site"])
    idx = group_examples(demo_run.task, probe_groups(demo_run.task, 64, demo_run.spec.seed))
    own = evaluate_examples(model, demo_run.task, idx)
    assert lensed.iloc[-1]["loss_cand"] == pytest.approx(float(own["loss_cand_first"].mean()), rel=1e-4, abs=1e-6)
    assert lensed.iloc[-1]["loss_cand_over_log_k"] < 0.5  # past tau the model resolves z
    assert rep.iloc[-1]["within"] > 0


# ---------------------------------------------------------------------------- figures
def test_figures_build_from_the_tables_and_refuse_empty_ones(run, task):
    rep, lensed = [], []
    for step, seed in ((0, 1), (50, 2), (200, 3)):
        m = random_model(task, SHAPE, seed=seed)
        rep.append(representations.at_step(run, step, model=m, n_groups=6))
        lensed.append(lens.at_step(run, step, model=m, n_groups=6))
    rep, lensed = pd.concat(rep, ignore_index=True), pd.concat(lensed, ignore_index=True)
    fig = representation_curves(rep, tau=50, onsets={"L0H1": 120, "never": None})
    names = [t.name for t in fig.data]
    assert "L0 within" in names and "L2 between" in names and "L1 ratio" in names
    assert not any(n.startswith("embed") for n in names)  # zero variance has no place on a log axis
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis2.type == "log"
    assert list(fig.data[names.index("L1 within")].x) == [0, 50, 200]
    shapes = [s.name for s in fig.layout.shapes]
    assert "tau" in shapes and "onset L0H1" in shapes and "onset never" not in shapes
    fig = lens_curves(lensed, math.log(task.k), tau=50)
    assert [t.name for t in fig.data if t.yaxis == "y"] == ["embed", "L0", "L1", "L2"]
    assert len([t for t in fig.data if t.yaxis == "y2"]) == 4
    assert any(s.name == "log K" and s.y0 == pytest.approx(math.log(4)) for s in fig.layout.shapes)
    with pytest.raises(InterpError, match="empty"):
        representation_curves(rep.iloc[:0])
    with pytest.raises(InterpError, match="empty"):
        lens_curves(lensed.iloc[:0], 1.0)
    with pytest.raises(InterpError, match="lacks the column"):
        lens_curves(rep, 1.0)
