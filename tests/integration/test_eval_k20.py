"""The logged metrics of a short K = 20 run equal the reference computation (issue 53).

Training evaluates on the fast paths (the K candidates' shared-prefix tree, `interp.fastpath.tree`; the shuffle
gap's scored-positions forward, `interp.fastpath.objective.scored_logits`). The reference is TransformerLens's own
forward on the K full candidate sequences and on the shuffled sequences, which `interp.metrics` takes for a model
with a hook attached. At every evaluation of the run (each one kept as a checkpoint), every logged metric equals the
reference to float32 rounding."""

from __future__ import annotations

import math

import torch

from interp.checkpoints import load_params
from interp.fastpath import usable
from interp.metrics import PER_EXAMPLE, evaluate_examples, summarize
from interp.model import build_model
from interp.runs import Run
from interp.task import VOCAB_SIZE
from interp.train import eval_subset, train
from tests.helpers import small_spec


def test_a_k20_runs_logged_metrics_equal_the_hooked_reference(tmp_path):
    spec = small_spec(k=20, n_bases=12, steps=30, lr=3e-3, eval_every=10, checkpoint_every=10, eval_size=96,
                      early_checkpoints=False)
    run = Run.create(tmp_path / "k20", spec)
    train(run, progress=False)
    rows = {row["step"]: row for row in run.metric_rows()}
    task = run.task
    idx, alt = eval_subset(task, spec.train, spec.seed)
    assert sorted(rows) == [0, 10, 20, 30] and set(run.steps) >= set(rows)
    moved = []
    for step, row in rows.items():
        model = build_model(spec.model, task.layout.length, VOCAB_SIZE)
        load_params(model, run.state_dict(step))
        model.eval()
        assert usable(model)  # what training evaluated with: the fast paths
        model.blocks[0].hook_resid_pre.add_hook(lambda x, hook: x)  # the reference: TL's hooked forward
        assert not usable(model)
        with torch.no_grad():
            reference = summarize(evaluate_examples(model, task, idx, alt))
        for name in PER_EXAMPLE:
            assert math.isclose(row[name], reference[name], rel_tol=2e-5, abs_tol=2e-6), (step, name, row[name],
                                                                                           reference[name])
        moved.append(reference["loss_cand"])
    # the comparison is between different models, not one constant: the candidate loss moves over the run
    assert max(moved) - min(moved) > 1e-3
