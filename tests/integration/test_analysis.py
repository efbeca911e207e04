"""Analyses against independent computations: brute-force loops, hand-written hooks and
TransformerLens's own `patching` functions."""

import math

import pandas as pd
import pytest
import torch
from transformer_lens import patching as tl_patching
from transformer_lens.utilities import get_act_name

from interp.analysis import ablation, attention, groups, patching, registry, sensitivity
from interp.analysis.cache import ResultCache
from interp.analysis.common import group_examples, select_steps
from interp.analysis.suite import run_suite
from interp.errors import InterpError
from interp.fastpath import base_cache, resume_from_resid, resume_from_z, resume_from_z_at, resume_tree, run_tree, usable
from interp.metrics import evaluate_examples, summarize
from interp.model import ModelSpec
from interp.runs import Run
from interp.seeding import torch_generator
from interp.task import Task, TaskSpec
from interp.train import train
from tests.helpers import random_model, small_spec


@pytest.fixture(scope="module")
def task() -> Task:
    return Task.generate(TaskSpec(k=4, n_bases=10), seed=5)


@pytest.fixture(scope="module")
def model(task):
    spec = ModelSpec(n_layers=3, n_heads=3, d_model=24, d_head=8, d_mlp=48, init_std=0.4)
    return random_model(task, spec, seed=2, dtype=torch.float64)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory) -> Run:
    run = Run.create(tmp_path_factory.mktemp("analysis") / "run", small_spec())
    train(run, progress=False)
    return run


@torch.no_grad()
def test_attention_to_z_and_z_share_equal_a_per_example_loop(task, model):
    grp = torch.tensor([1, 4, 7])
    fast = sensitivity.head_sensitivity(model, task, grp, chunk_groups=2)
    dec, z_pos = task.layout.decision_pos, list(task.layout.z_pos)
    L, H = model.cfg.n_layers, model.cfg.n_heads
    attn = torch.zeros(L, H, dtype=torch.float64)
    outs = {(l, h): [] for l in range(L) for h in range(H)}
    examples = group_examples(task, grp).tolist()
    for n in examples:
        _, cache = model.run_with_cache(task.tokens[n : n + 1])
        for l in range(L):
            for h in range(H):
                attn[l, h] += sum(float(cache[get_act_name("pattern", l)][0, h, dec, p]) for p in z_pos)
                z = cache[get_act_name("z", l)][0, dec, h]
                outs[(l, h)].append(z @ model.blocks[l].attn.W_O[h])
    attn /= len(examples)
    torch.testing.assert_close(fast["attn_to_z"].double(), attn, atol=1e-5, rtol=0)
    for (l, h), vectors in outs.items():
        v = torch.stack(vectors)  # [G*K, d]
        total = ((v - v.mean(0)) ** 2).sum()
        within = sum(((g - g.mean(0)) ** 2).sum() for g in v.view(len(grp), task.k, -1))
        assert float(fast["z_share"][l, h]) == pytest.approx(float(within / total), abs=1e-5)
    assert fast["attn_to_z"].max() > 0.05 and fast["z_share"].std() > 0.01  # not a constant


def test_head_outputs_sum_to_attn_out(task, model):
    tokens = task.tokens[:6]
    _, cache = model.run_with_cache(tokens)
    for l in range(model.cfg.n_layers):
        z = cache[get_act_name("z", l)]
        per_head = torch.einsum("bphe,hed->bphd", z, model.blocks[l].attn.W_O)
        torch.testing.assert_close(per_head.sum(2) + model.blocks[l].attn.b_O,
                                   cache[get_act_name("attn_out", l)], atol=1e-10, rtol=0)


def _pairs(task):
    pairs = patching.make_pairs(task, 12, seed=0)
    pos = task.layout.decision_pos
    metric = lambda logits: patching.logit_diff(logits[:, pos], pairs["good"], pairs["bad"]).mean()  # noqa: E731
    return pairs, pos, metric


def test_patching_equals_transformer_lens(task, model):
    pairs, pos, metric = _pairs(task)
    args = (pairs["clean"], pairs["corrupt"], pairs["good"], pairs["bad"], pos)
    ours_heads = patching.patch_heads(model, *args)
    ours_resid = patching.patch_residual(model, *args)
    _, clean_cache = model.run_with_cache(pairs["clean"])
    tl_resid = tl_patching.get_act_patch_resid_pre(model, pairs["corrupt"], clean_cache, metric)
    tl_all = tl_patching.get_act_patch_attn_head_out_all_pos(model, pairs["corrupt"], clean_cache, metric)
    tl_by = tl_patching.get_act_patch_attn_head_out_by_pos(model, pairs["corrupt"], clean_cache, metric)
    torch.testing.assert_close(ours_resid["table"], tl_resid.double(), atol=1e-5, rtol=0)
    torch.testing.assert_close(ours_heads["all_pos"], tl_all.double(), atol=1e-5, rtol=0)
    torch.testing.assert_close(ours_heads["by_pos"], tl_by.double(), atol=1e-5, rtol=0)
    assert float((tl_by - tl_by.mean()).abs().max()) > 1e-3  # the comparison is not between constants


def test_patching_every_position_with_clean_recovers_clean(task, model):
    pairs, pos, _ = _pairs(task)
    clean = base_cache(model, pairs["clean"][:, : pos + 1])
    corrupt = base_cache(model, pairs["corrupt"][:, : pos + 1])
    rows = torch.arange(len(pairs["clean"]))
    for layer in range(model.cfg.n_layers):
        logits = resume_from_resid(model, corrupt, layer, clean.resid_pre[layer], 0, rows)
        torch.testing.assert_close(logits, clean.logits, atol=1e-9, rtol=0)


def test_base_cache_by_the_block_equals_transformer_lens_run_with_cache(task, model):
    """Without hooks the base run is the fast path's own; with a hook attached it is
    TransformerLens's run_with_cache (so the hook acts): both record the same activations."""
    pairs, pos, _ = _pairs(task)
    tokens = pairs["corrupt"][:, : pos + 1]
    ours = base_cache(model, tokens)
    seen = []
    with model.hooks(fwd_hooks=[("blocks.0.hook_resid_pre", lambda x, hook: seen.append(1))]):
        tl = base_cache(model, tokens)
    assert seen  # the hooked path ran TransformerLens's forward
    for kind in ("resid_pre", "k", "v", "z"):
        for a, b in zip(getattr(ours, kind), getattr(tl, kind)):
            torch.testing.assert_close(a, b, atol=1e-9, rtol=0)
    torch.testing.assert_close(ours.logits, tl.logits, atol=1e-9, rtol=0)


def test_zero_ablating_every_head_equals_a_hand_written_hook(task, model):
    idx = torch.arange(task.size)
    alt = task.other_selectors(idx, torch.Generator().manual_seed(0))
    targets = {l: tuple(range(model.cfg.n_heads)) for l in range(model.cfg.n_layers)}
    ours = evaluate_examples(ablation.Ablated(model, targets, "zero"), task, idx, alt)

    def attn_out_is_bias(act, hook):
        layer = int(hook.name.split(".")[1])
        return torch.zeros_like(act) + model.blocks[layer].attn.b_O

    hooks = [(get_act_name("attn_out", l), attn_out_is_bias) for l in range(model.cfg.n_layers)]
    with model.hooks(fwd_hooks=hooks):
        hand = evaluate_examples(model, task, idx, alt)
    for name in ours:
        torch.testing.assert_close(ours[name], hand[name], atol=1e-9, rtol=0, msg=name)
    clean = summarize(evaluate_examples(model, task, idx, alt))
    assert abs(summarize(ours)["loss_cand"] - clean["loss_cand"]) > 1e-3


def test_mean_ablation_uses_per_position_means(task, model):
    mean_z = ablation.reference_mean_z(model, task, seed=0, size=25)
    gen = torch_generator(0, "reference")
    ref = torch.randperm(task.size, generator=gen)[:25]
    _, cache = model.run_with_cache(task.tokens[ref])
    for l in range(model.cfg.n_layers):
        expected = cache[get_act_name("z", l)].mean(0)  # [pos, head, d_head]
        torch.testing.assert_close(mean_z[l], expected)
        assert (expected[1:] - expected[:-1]).abs().max() > 1e-3  # positions really differ
    ablated = ablation.Ablated(model, {1: (2,)}, "mean", mean_z=mean_z)
    tokens = task.tokens[:5]

    def hand(act, hook):
        act = act.clone()
        act[:, :, 2] = mean_z[1][:, 2]
        return act

    with model.hooks(fwd_hooks=[(get_act_name("z", 1), hand)]):
        expected_logits = model(tokens)
    torch.testing.assert_close(ablated(tokens), expected_logits)


def test_resample_ablation_never_uses_the_own_selector(task):
    table = ablation.resample_table(task, seed=3)
    assert not (table == torch.arange(task.k).view(1, -1)).any()
    tokens = torch.cat([task.tokens, task.with_selector(torch.arange(task.size), (task.selector_id + 1) % task.k)])
    source = ablation.resample_tokens(task, tokens, table)
    z = slice(*task.layout.segments["z"])
    assert not (source[:, z] == tokens[:, z]).all(-1).any()
    keep = torch.ones(tokens.shape[1], dtype=torch.bool)
    keep[z] = False
    assert torch.equal(source[:, keep], tokens[:, keep])
    # truncated inputs (the shuffle gap's decision-position forward) work the same way
    short = ablation.resample_tokens(task, tokens[:, : task.layout.decision_pos + 1], table)
    assert torch.equal(short, source[:, : task.layout.decision_pos + 1])


@torch.no_grad()
def test_per_group_accuracy_equals_a_loop(task, model):
    grp = torch.tensor([0, 3, 9])
    fast = groups.group_accuracy(model, task, grp)
    for g, acc in zip(fast["group_id"], fast["acc_cand"]):
        hits = []
        for i in range(task.k):
            n = g * task.k + i
            scores = []
            for j in range(task.k):
                seq = task.tokens[n].clone()
                seq[list(task.layout.output_pos)] = task.outputs()[g, j]
                logp = model(seq.unsqueeze(0))[0].log_softmax(-1)
                scores.append(sum(float(logp[p, seq[p + 1]]) for p in task.layout.loss_pos))
            hits.append(max(range(task.k), key=lambda j: scores[j]) == i)
        assert acc == pytest.approx(sum(hits) / task.k)


def test_group_statistics():
    acc = pd.DataFrame({
        "step": [0, 0, 10, 10, 20, 20],
        "group_id": [0, 1, 0, 1, 0, 1],
        "acc_cand": [0.1, 0.2, 0.9, 0.5, 1.0, 0.85],
    })
    snaps = groups.snap_steps(acc)
    assert snaps.set_index("group_id")["snap_step"].to_dict() == {0: 10, 1: 20}
    share = groups.share_above(acc, tau=20, fractions=(0.5, 1.0))
    assert share["step"].tolist() == [10, 20] and share["share"].tolist() == [0.5, 1.0]


def test_attention_segments_sum_to_one(small_run):
    ev = attention.evolution(small_run, steps=[0, 40], n_groups=4)
    assert set(ev["step"]) == {0, 40}
    seg = attention.segments(ev, small_run.task)
    totals = seg.groupby(["step", "layer", "head"])["mass"].sum()
    assert ((totals - 1).abs() < 1e-5).all()
    assert list(seg["segment"].unique()) == ["BOS", "B", "SEP", "z", "SEP2", "A", "EOS"]
    assert (seg[seg["segment"].isin(["A", "EOS"])]["mass"] == 0).all()  # causal: nothing after the decision
    assert (seg[seg["segment"] == "z"]["mass"] > 0).all()


def test_analysis_tables_are_tidy(small_run):
    s = sensitivity.across(small_run, steps=[0, 20], n_groups=4)
    assert len(s) == 2 * 2 * 2 and set(s["head_name"]) == {"L0H0", "L0H1", "L1H0", "L1H1"}
    h = patching.heads(small_run, step=40, n_pairs=8)
    assert h["position"].isna().sum() == 4 and len(h) == 4 * (1 + small_run.task.layout.length)
    r = patching.residual(small_run, step=40, n_pairs=8)
    assert len(r) == 2 * small_run.task.layout.length
    a = ablation.at(small_run, steps=[40], method="resample", n_examples=16)
    assert len(a) == 4 + 2 and {"delta_loss_cand", "clean_loss_cand", "shuffle_gap"} <= set(a)


def test_bad_input_is_refused_clearly(small_run, tmp_path):
    with pytest.raises(InterpError, match="step 13 is not saved"):
        patching.heads(small_run, step=13)
    with pytest.raises(InterpError, match="unknown ablation method 'erase'"):
        ablation.at(small_run, steps=[40], method="erase")
    with pytest.raises(InterpError, match="unknown step 'middle'"):
        select_steps(small_run, "middle")
    empty = Run.create(tmp_path / "empty", small_spec())
    with pytest.raises(InterpError, match="no saved checkpoints"):
        sensitivity.across(empty)


def test_cache_computes_only_what_is_missing(small_run):
    first = run_suite(small_run, only="sensitivity,groups", steps=[0, 20], progress=False)
    assert first.cache_misses == 4
    again = run_suite(small_run, only="sensitivity,groups", steps=[0, 20, 40], progress=False)
    assert again.cache_hits == 4 and again.cache_misses == 2
    pd.testing.assert_frame_equal(
        again.tables["sensitivity"][again.tables["sensitivity"]["step"] < 40].reset_index(drop=True),
        first.tables["sensitivity"], check_dtype=False)
    other = ResultCache(small_run)
    key = registry.get("sensitivity").cache_key({"n_groups": 99})
    assert other.load(key, 0) is None  # parameters are part of the key
    assert other.load(registry.get("sensitivity").cache_key({"n_groups": 64}), 0) is not None


def test_ablation_at_relative_steps_needs_a_snap(small_run):
    if small_run.metrics["loss_cand"].min() < 0.5 * math.log(small_run.spec.task.k):
        pytest.fail("the small run was not expected to snap")
    with pytest.raises(InterpError, match="relative to tau"):
        ablation.at(small_run, steps="mid")


def test_patching_in_chunks_equals_one_batch(small_run, monkeypatch):
    whole = patching.heads(small_run, step=40, n_pairs=20)
    monkeypatch.setattr(patching, "CHUNK_PAIRS", 6)
    chunked = patching.heads(small_run, step=40, n_pairs=20)
    pd.testing.assert_series_equal(whole["patched_ld"], chunked["patched_ld"], atol=1e-6, check_exact=False)


# ---------------------------------------------------------------------------- fast ablation
def _hook_effects(model, task, idx, alt, comps, method, **extra):
    """The reference: TransformerLens hooks (Ablated) through the generic metrics."""
    out = {"clean": evaluate_examples(model, task, idx, alt)}
    for name, layer, heads in comps:
        out[name] = evaluate_examples(ablation.Ablated(model, {layer: heads}, method, task=task, **extra),
                                      task, idx, alt)
    return out


def _extra(method, model, task):
    if method == "mean":
        return {"mean_z": ablation.reference_mean_z(model, task, seed=0, size=30)}
    if method == "resample":
        return {"table": ablation.resample_table(task, seed=0)}
    return {}


@pytest.mark.parametrize("method", ablation.METHODS)
def test_fast_ablation_equals_the_hook_path_exactly(task, model, method):
    # float64 model with 3 layers: every layer is the first, a middle or the last ablated one
    idx, alt = task.sample(17, 0)
    comps = ablation.components(model.cfg.n_layers, model.cfg.n_heads)
    extra = _extra(method, model, task)
    fast = ablation.effects_by_method(model, task, idx, alt, comps, (method,), **extra)[method]
    slow = _hook_effects(model, task, idx, alt, comps, method, **extra)
    assert set(fast) == set(slow)
    for name in slow:
        for metric in slow[name]:
            torch.testing.assert_close(fast[name][metric], slow[name][metric], atol=1e-9, rtol=0,
                                       msg=f"{method} {name} {metric}")
    moved = [abs(float(fast[c[0]]["loss_cand"].mean() - fast["clean"]["loss_cand"].mean())) for c in comps]
    assert max(moved) > 1e-3  # ablating changes something: the comparison is not between constants


@pytest.mark.parametrize("method", ablation.METHODS)
def test_fast_ablation_table_equals_the_hook_path_on_a_small_run(small_run, method):
    fast = ablation.at_step(small_run, 40, methods=method, n_examples=24)
    model = small_run.model(40)
    task = small_run.task
    idx, alt = task.sample(24, small_run.spec.seed, "probe")
    extra = {}
    if method == "mean":
        extra["mean_z"] = ablation.reference_mean_z(model, task, small_run.spec.seed)
    if method == "resample":
        extra["table"] = ablation.resample_table(task, small_run.spec.seed)
    slow = _hook_effects(model, task, idx, alt, ablation.components(2, 2), method, **extra)
    for row in fast.itertuples():
        values = summarize(slow[row.component])
        for metric, value in values.items():
            assert getattr(row, metric) == pytest.approx(value, abs=1e-5, nan_ok=True), (row.component, metric)


def test_prefix_tree_equals_the_transformer_lens_forward(task, model):
    idx = torch.arange(7)
    cands = task.candidates(idx)
    dec = task.layout.decision_pos
    tree = run_tree(model, task.tokens[idx, : dec + 1], cands[:, :, :-1], record=True)
    full = task.with_candidates(idx)[:, :, : task.layout.loss_pos[-1] + 1]
    logits = model(full.reshape(-1, full.shape[-1])).view(*full.shape, -1)
    torch.testing.assert_close(tree.first_logits, logits[:, 0, dec], atol=1e-10, rtol=0)
    torch.testing.assert_close(tree.cont_logits, logits[:, :, dec + 1 :], atol=1e-10, rtol=0)
    _, cache = model.run_with_cache(full[:, 0])
    for layer in range(model.cfg.n_layers):  # the record holds TransformerLens's activations
        torch.testing.assert_close(tree.prefix_z[layer], cache[get_act_name("z", layer)][:, : dec + 1],
                                   atol=1e-10, rtol=0)
        torch.testing.assert_close(tree.cont_resid[layer][:, 0], cache[get_act_name("resid_pre", layer)][:, dec + 1 :],
                                   atol=1e-10, rtol=0)


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float32, 1e-5), (torch.float64, 1e-9)])
def test_fastpath_resumes_equal_start_at_layer(task, model, dtype, tol):
    # each resume against TransformerLens's own forward from the same layer (start_at_layer),
    # with the same patch made through a hook
    import copy

    model = copy.deepcopy(model).to(dtype)
    dec = task.layout.decision_pos
    idx = torch.arange(9)
    cache = base_cache(model, task.tokens[idx, : dec + 1])
    rows = torch.arange(len(idx))
    gen = torch.Generator().manual_seed(0)
    last = model.cfg.n_layers - 1
    with torch.no_grad():
        for layer in range(model.cfg.n_layers):
            z_name = get_act_name("z", layer)
            for p in (0, 4, dec):
                resid = cache.resid_pre[layer].clone()
                resid[:, p:] += torch.randn(resid[:, p:].shape, generator=gen).to(dtype)
                torch.testing.assert_close(resume_from_resid(model, cache, layer, resid[:, p:], p, rows),
                                           model(resid, start_at_layer=layer)[:, -1], atol=tol, rtol=0)
                z = cache.z[layer].clone()
                z[:, p:] *= -0.5
                hook = (z_name, lambda act, hook, z=z: z)
                theirs = model.run_with_hooks(cache.resid_pre[layer], start_at_layer=layer, fwd_hooks=[hook])[:, -1]
                torch.testing.assert_close(resume_from_z(model, cache, layer, z[:, p:], p, rows), theirs, atol=tol, rtol=0)
                if layer == last and p != dec:
                    continue  # at the last layer only the decision position reaches the output
                z = cache.z[layer].clone()
                z[:, p] *= -0.5
                hook = (z_name, lambda act, hook, z=z: z)
                theirs = model.run_with_hooks(cache.resid_pre[layer], start_at_layer=layer, fwd_hooks=[hook])[:, -1]
                torch.testing.assert_close(resume_from_z_at(model, cache, layer, z[:, p], p, rows), theirs,
                                           atol=tol, rtol=0)
            assert float((theirs - cache.logits).abs().max()) > 1e-3  # the patches change the output

        cands = task.candidates(idx)
        tree = run_tree(model, task.tokens[idx, : dec + 1], cands[:, :, :-1], record=True)
        n, k, c = cands[:, :, :-1].shape
        for layer in range(model.cfg.n_layers):
            zp, zc = tree.prefix_z[layer] * 0.3, tree.cont_z[layer] * -0.7
            first, cont = resume_tree(model, tree, layer, zp, zc, rows)
            per_seq = lambda pre, post: torch.cat([pre.unsqueeze(1).expand(n, k, *pre.shape[1:]), post], 2)  # noqa: E731
            resid = per_seq(tree.prefix_resid[layer], tree.cont_resid[layer]).flatten(0, 1)
            z = per_seq(zp, zc).flatten(0, 1)
            hook = (get_act_name("z", layer), lambda act, hook, z=z: z)
            theirs = model.run_with_hooks(resid, start_at_layer=layer, fwd_hooks=[hook]).view(n, k, dec + 1 + c, -1)
            torch.testing.assert_close(first, theirs[:, 0, dec], atol=tol, rtol=0)
            torch.testing.assert_close(cont, theirs[:, :, dec + 1 :], atol=tol, rtol=0)


def test_fastpath_is_usable_only_without_hooks(model):
    assert usable(model)
    with model.hooks(fwd_hooks=[(get_act_name("z", 0), lambda act, hook: act)]):
        assert not usable(model)
    assert usable(model)
    assert not usable(torch.nn.Linear(2, 2))
