"""The edge graph, exact edge patching against a plain TransformerLens loop, EAP / EAP-IG, the circuit's
faithfulness and the `edges` analysis's bad input (interp.analysis.edge_graph, interp.analysis.edges)."""

import pytest
import torch
from scipy.stats import spearmanr

from interp.analysis import edge_graph as eg
from interp.analysis import edges
from interp.analysis.patching import make_pairs
from interp.errors import InterpError
from interp.model import is_bridge
from interp.runs import Run
from tests.helpers import DEMO, copy_run, run_main, snapshot

STEP = 1625  # the demo after the snap: every kind of edge carries something


@pytest.fixture(scope="module")
def demo():
    run = Run.open(DEMO)
    model = run.model(STEP)
    pos = run.task.layout.decision_pos
    pairs = make_pairs(run.task, 16, run.spec.seed)
    tokens = {k: pairs[k][:, : pos + 1] for k in ("clean", "corrupt")}
    return run, model, tokens, pairs["good"], pairs["bad"]


def _batch(model, tokens, good, bad):
    return eg.prepare(model, tokens["clean"], tokens["corrupt"], good, bad)


def test_the_graph_of_a_two_layer_model():
    g = eg.EdgeGraph(2, 4)
    assert len(g.senders) == 11 and len(g.receivers) == 27 and len(g.edges) == 110
    names = g.edge_names()
    assert "embed->L0H0.q" in names and "L0H3->L1H0.k" in names and "MLP1->logits" in names
    assert "L0H0->L0H1.q" not in names and "MLP0->L0H1.v" not in names and "L1H0->L1H1.q" not in names
    assert "L1H2->MLP1" in names and "MLP1->MLP1" not in names
    assert int(g.mask().sum()) == len(g.edges)


def test_the_edge_forward_without_patches_is_the_model(demo):
    _, model, tokens, good, bad = demo
    g = eg.EdgeGraph.of(model)
    batch = _batch(model, tokens, good, bad)
    for which in ("clean", "corrupt"):
        outs, ld = eg.recorded(model, g, batch, which)
        expect = eg.logit_diff(model(tokens[which])[:, -1], good, bad)
        torch.testing.assert_close(ld, expect, atol=1e-5, rtol=1e-5)  # per example, up to ~10 nats
        assert outs.shape == (len(g.senders), 16, tokens[which].shape[1] - batch.start, model.cfg.d_model)


def _plain_sender(model, cache, name):
    if name == "embed":
        return cache["hook_embed"] + cache["hook_pos_embed"]
    if name.startswith("MLP"):
        return cache[f"blocks.{name[3:]}.hook_mlp_out"]
    layer, head = int(name[1]), int(name[3])
    return cache[f"blocks.{layer}.attn.hook_z"][:, :, head] @ model.blocks[layer].attn.W_O[head]


def _plain_path_patch(model, tokens, good, bad, caches, sender, receiver):
    """One edge patched by hand: the corrupted run with the receiver's input shifted by the sender's clean -
    corrupted output (TransformerLens's split q/k/v inputs and MLP input hooks; the logits read resid_post)."""
    diff = _plain_sender(model, caches["clean"], sender) - _plain_sender(model, caches["corrupt"], sender)
    if receiver == "logits":
        hook, head = f"blocks.{model.cfg.n_layers - 1}.hook_resid_post", None
    elif receiver.startswith("MLP"):
        hook, head = f"blocks.{receiver[3:]}.hook_mlp_in", None
    else:
        hook, head = f"blocks.{receiver[1]}.hook_{receiver[-1]}_input", int(receiver[3])

    def shift(act, hook):
        if head is None:
            return act + diff
        act = act.clone()
        act[:, :, head] += diff
        return act

    logits = model.run_with_hooks(tokens["corrupt"], fwd_hooks=[(hook, shift)])[:, -1]
    return float(eg.logit_diff(logits, good, bad).mean())


EDGES = ["embed->L0H3.v", "embed->L0H1.q", "embed->L1H2.k", "L0H3->MLP0", "L0H3->L1H0.q", "L0H2->L1H1.v",
         "MLP0->L1H3.k", "MLP0->MLP1", "L1H1->MLP1", "embed->logits", "L0H0->logits", "MLP0->logits", "L1H2->logits",
         "MLP1->logits"]


def test_exact_edge_patching_is_a_plain_transformer_lens_path_patching_loop(demo):
    _, model, tokens, good, bad = demo
    if is_bridge(model):
        pytest.skip("the plain loop uses HookedTransformer's split q/k/v input hooks (TransformerLens 3)")
    g = eg.EdgeGraph.of(model)
    chosen = [g.index(name) for name in EDGES]
    fast = eg.exact_patching(model, g, _batch(model, tokens, good, bad), edges=chosen)
    model.set_use_split_qkv_input(True)
    model.set_use_hook_mlp_in(True)
    try:
        with torch.no_grad():
            caches = {which: model.run_with_cache(tokens[which])[1] for which in ("clean", "corrupt")}
            plain = [_plain_path_patch(model, tokens, good, bad, caches, *name.split("->")) for name in EDGES]
    finally:
        model.set_use_split_qkv_input(False)
        model.set_use_hook_mlp_in(False)
    torch.testing.assert_close(fast, torch.tensor(plain), atol=1e-5, rtol=0)
    with torch.no_grad():
        corrupt = float(eg.logit_diff(model(tokens["corrupt"])[:, -1], good, bad).mean())
    assert max(abs(p - corrupt) for p in plain) > 1.0  # the edges chosen do move the metric


def test_eap_is_the_derivative_of_edge_patching(demo):
    """EAP's score of an edge is d LD / d eps of the corrupted run with eps (clean - corrupted sender output) in
    the receiver's input: central differences of the patched forward, in float64."""
    run, _, tokens, good, bad = demo
    model = run.model(STEP).to(torch.float64)
    g = eg.EdgeGraph.of(model)
    batch = _batch(model, tokens, good, bad)
    clean_outs, _ = eg.recorded(model, g, batch, "clean")
    scores = eg.attribution(model, g, batch, 1, clean_outs)
    chosen = [g.index(name) for name in EDGES]
    eps = 1e-4
    w = eg.one_edge_weights(g, chosen).double()
    up = eg.patched_lds(model, g, batch, "corrupt", clean_outs, eps * w)
    down = eg.patched_lds(model, g, batch, "corrupt", clean_outs, -eps * w)
    expect = torch.stack([scores[g.edges[e]] for e in chosen])
    torch.testing.assert_close((up - down) / (2 * eps), expect, atol=1e-6, rtol=1e-5)
    off = scores.masked_fill(g.mask(), 0.0)
    assert bool((off == 0).all())  # nothing off the edges


def test_eap_ig_of_one_step_is_eap_and_more_steps_rank_nearer_to_exact_patching(demo):
    _, model, tokens, good, bad = demo
    g = eg.EdgeGraph.of(model)
    batch = _batch(model, tokens, good, bad)
    eap, ig1, ig5 = (eg.attribution(model, g, batch, m) for m in (1, 1, 5))
    torch.testing.assert_close(eap, ig1, atol=0, rtol=0)
    exact = eg.exact_patching(model, g, batch)
    pick = lambda s: torch.stack([s[e] for e in g.edges])  # noqa: E731
    rho_eap, rho_ig = spearmanr(pick(eap), exact)[0], spearmanr(pick(ig5), exact)[0]
    assert rho_ig > rho_eap and rho_ig > 0.7, (rho_eap, rho_ig)


def test_the_faithfulness_curve_runs_from_the_corrupted_to_the_clean_run(demo):
    _, model, tokens, good, bad = demo
    g = eg.EdgeGraph.of(model)
    batch = _batch(model, tokens, good, bad)
    _, clean = eg.recorded(model, g, batch, "clean")
    _, corrupt = eg.recorded(model, g, batch, "corrupt")
    order = torch.randperm(len(g.edges), generator=torch.Generator().manual_seed(0))
    curve = eg.faithfulness_curve(model, g, batch, order, sizes=[0, 10, len(g.edges)])
    torch.testing.assert_close(curve[[0, 2]], torch.stack([corrupt.mean(), clean.mean()]), atol=1e-5, rtol=0)
    # keeping only the edges into the logits from every sender but the embeddings patched: by hand, the same
    w = eg.circuit_weights(g, order, [10])
    kept = [e for e in range(len(g.edges)) if w[0][g.edges[e]] == 0]
    assert sorted(kept) == sorted(order[:10].tolist())


def test_the_edges_analysis_at_one_step(demo):
    run = demo[0]
    out = edges.at_step(run, STEP, n_pairs=16, method="eap", target=0.8, exact=True)
    table, curve = out["edges"], out["edges_curve"]
    assert len(table) == 110 and len(curve) == 111 and sorted(table["rank"]) == list(range(1, 111))
    size = int(curve.loc[curve["circuit"], "n_edges"].iloc[0])
    assert curve.loc[curve["n_edges"] == size, "faithfulness"].iloc[0] >= 0.8
    assert (curve.loc[curve["n_edges"] < size, "faithfulness"] < 0.8).all()
    assert int(table["in_circuit"].sum()) == size and (table.loc[table["in_circuit"], "rank"] <= size).all()
    assert curve["faithfulness"].iloc[0] == pytest.approx(0, abs=1e-5)
    assert curve["faithfulness"].iloc[-1] == pytest.approx(1, abs=1e-5)
    assert table["exact"].notna().all()
    onsets = edges.onsets(pd_concat([table, table.assign(step=STEP + 1)]))
    assert list(onsets.columns[:5]) == ["edge", "sender", "receiver", "carried_onset", "used_onset"]


def pd_concat(parts):
    import pandas as pd

    return pd.concat(parts, ignore_index=True)


@pytest.mark.parametrize("params, says", [
    ({"method": "acdc"}, "unknown edge attribution method 'acdc'; allowed: eap, eap-ig"),
    ({"ig_steps": 0}, "must be a positive integer"),
    ({"target": 0}, "takes a number in (0, 1]"),
    ({"target": 1.5}, "takes a number in (0, 1]"),
])
def test_bad_parameters_are_refused_before_any_work(demo, params, says):
    with pytest.raises(InterpError, match=None) as err:
        edges.across(demo[0], steps=[STEP], **params)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_a_model_outside_the_family_is_refused(demo):
    with pytest.raises(InterpError, match="the edge graph supports the interp model family only"):
        edges.at_step(demo[0], STEP, model=torch.nn.Linear(2, 2))


@pytest.mark.parametrize("flags, says", [
    (["--edge-method", "acdc"], "unknown edge attribution method"),
    (["--ig-steps", "0"], "must be a positive integer"),
    (["--faithfulness", "0"], "takes a number in (0, 1]"),
    (["--faithfulness", "1.01"], "takes a number in (0, 1]"),
])
def test_the_cli_refuses_bad_edge_options_with_exit_2_and_writes_nothing(tmp_path, capsys, flags, says):
    run = copy_run(DEMO, tmp_path / "run", cache=False)
    before = snapshot(run)
    code, out, err = run_main(["analyze", str(run), "--only", "edges", *flags], capsys)
    assert code == 2 and says in err and "Traceback" not in err
    assert snapshot(run) == before


def test_the_suite_runs_caches_and_summarises_the_edges(tiny_run, tmp_path):
    from interp.analysis.findings import summary_rows
    from interp.analysis.suite import run_suite

    run = Run.open(copy_run(tiny_run(), tmp_path / "run"))
    result = run_suite(run, only="edges", steps="10,20,30", options={"n_pairs": 8, "edge_method": "eap"}, progress=False)
    assert {"edges", "edges_curve", "edges_onsets", "edges_circuit"} <= set(result.tables)
    table = result.tables["edges"]
    assert sorted(table["step"].unique()) == [10, 20, 30] and (table["method"] == "eap").all()
    assert len(result.tables["edges_onsets"]) == table["edge"].nunique()
    assert result.findings["edges_method"] == "eap" and 1 <= len(result.findings["edges_first"]) <= 10
    assert any(label == "edges" for label, _ in summary_rows(result.findings, result.tables))
    from interp.plots.edges import circuit_graph, edge_raster

    fig = edge_raster(table, result.tables["edges_onsets"], result.tables["edges_circuit"], tau=20, marks={"x": 10})
    assert fig.data[0].type == "heatmap" and list(fig.data[0].y) == list(result.tables["edges_onsets"]["edge"][:25])
    graph = circuit_graph(table, {"early": 10, "late": 30, "unsaved": 25})
    drawn = int(table.loc[table["step"].isin([10, 30]), "in_circuit"].sum())
    assert len(graph.data) == drawn + 2 and len(graph.layout.annotations) == 2  # an edge each, the nodes twice
    again = run_suite(run, only="edges", steps="10,20,30", options={"n_pairs": 8, "edge_method": "eap"}, progress=False)
    assert again.cache_hits == 3 and again.cache_misses == 0
