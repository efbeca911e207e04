"""Keep-only ablation (is one head sufficient?; interp.analysis.sufficiency.keep_only_effects, issue 51: 4): zeroing
every other head's output through hooks equals the model with those heads' W_O zeroed (an independent edit of the
weights), for each kept head and for no head at all; `recovered` is the share of the candidate loss's gain."""

from __future__ import annotations

import torch

from interp.analysis.sufficiency import NO_HEAD, keep_only_effects, keep_only_targets
from interp.metrics import evaluate_examples, summarize
from interp.spec import ModelSpec, TaskSpec
from interp.task import Task
from tests.helpers import random_model


def _edited(model, kept):
    """A copy of `model` with every head's W_O zeroed but `kept`'s: its output z @ W_O is then 0 (b_O stays)."""
    import copy

    other = copy.deepcopy(model)
    with torch.no_grad():
        for layer, block in enumerate(other.blocks):
            for head in range(other.cfg.n_heads):
                if (layer, head) != kept:
                    block.attn.W_O[head] = 0.0
    return other


def test_keep_only_equals_zeroed_output_weights():
    task = Task.generate(TaskSpec(k=3, n_bases=12), seed=0)
    model = random_model(task, ModelSpec(n_layers=2, n_heads=2, d_model=16, d_head=8, d_mlp=32), seed=1,
                         dtype=torch.float64)
    idx = torch.arange(0, task.size, 2)
    alt = task.other_selectors(idx, torch.Generator().manual_seed(0))
    got = keep_only_effects(model, task, idx, alt, ("zero",))["zero"]
    assert set(got) == {"clean", NO_HEAD, "L0H0", "L0H1", "L1H0", "L1H1"}
    for name, kept in ((NO_HEAD, None), ("L0H1", (0, 1)), ("L1H0", (1, 0))):
        want = summarize(evaluate_examples(_edited(model, kept), task, idx, alt))
        have = summarize(got[name])
        for metric, value in want.items():
            assert abs(have[metric] - value) < 1e-9, (name, metric, have[metric], value)
    clean = summarize(got["clean"])
    assert abs(clean["loss_cand"] - summarize(got["L0H1"])["loss_cand"]) > 1e-6  # the ablation changes something


def test_targets_leave_one_head():
    assert keep_only_targets(2, 3, (1, 2)) == {0: (0, 1, 2), 1: (0, 1)}
    assert keep_only_targets(1, 1, (0, 0)) == {}
    assert keep_only_targets(2, 2, None) == {0: (0, 1), 1: (0, 1)}


def test_the_table_says_what_each_head_recovers():
    from interp.analysis.sufficiency import keep_only_at_step
    from interp.runs import Run
    from tests.helpers import DEMO

    df = keep_only_at_step(Run.open(DEMO), 900, methods=("zero",), n_examples=32)
    assert len(df) == 1 + 8 and set(df["kept"]) == {NO_HEAD} | {f"L{l}H{h}" for l in range(2) for h in range(4)}
    none = df[df["kept"] == NO_HEAD].iloc[0]
    assert abs(none["recovered"]) < 1e-12
    clean = float(df["clean_loss_cand"].iloc[0])
    for _, row in df.iterrows():
        want = (none["loss_cand"] - row["loss_cand"]) / (none["loss_cand"] - clean)
        assert abs(row["recovered"] - want) < 1e-12
        assert abs(row["delta_loss_cand"] - (row["loss_cand"] - clean)) < 1e-12
