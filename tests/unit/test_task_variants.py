"""The author's task variants (issue 51: 1; docs/runs.md, "Task variants"), each checked on a small case by hand:
a default task and spec are what they were; label noise flips a share of targets within its binomial interval, to
another candidate of the same base, and evaluation stays clean; the held-out pairs are never in the training set;
candidates with unique 2-character prefixes are scored on both characters; a hierarchy's z1 gap and z2 gap
separate a model that reads the cluster only; K = 1, a constant selector and the reversed layout are the controls
they claim to be; bad settings are one line each."""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats

from interp.errors import InterpError
from interp.metrics import evaluate_examples, summarize
from interp.runs import Run
from interp.spec import RunSpec, TaskSpec
from interp.steps import MinibatchStep
from interp.task import EOS, SEP, VOCAB_SIZE, Task
from interp.transition import derive
from tests.helpers import DEMO, LookupModel

NEG = -1e4


def _task(**kw) -> Task:
    spec = TaskSpec(**{"k": 4, "n_bases": 30, **kw})
    spec.validate()
    return Task.generate(spec, seed=3)


def test_the_default_task_and_spec_are_as_before():
    """The shipped demo's task regenerates to the hash it was written with, and no variant field enters a spec
    at its default (so every earlier run's spec hash holds)."""
    run = Run.open(DEMO)
    assert Task.generate(run.spec.task, run.spec.seed).sha256() == run.info["task_sha256"]
    task_keys = set(RunSpec().to_dict()["task"])
    assert not task_keys & {"unique_prefix", "label_noise", "holdout_fraction", "holdout_by", "hierarchy", "selector",
                            "reverse"}
    plain = _task()
    assert plain.train_tokens is plain.tokens and plain.n_train == plain.size and plain.noisy is None


def test_label_noise_rate_is_within_its_binomial_interval_and_picks_another_candidate():
    p = 0.2
    task = _task(n_bases=400, k=5, label_noise=p)
    own = task.selector_id
    flipped = task.noisy != own
    n, count = len(own), int(flipped.sum())
    lo, hi = stats.binom.interval(0.999, n, p)
    assert lo <= count <= hi, (count, lo, hi)
    # the replacement is another candidate of the same base, each of the K - 1 others about equally often
    offsets = ((task.noisy - own) % task.k)[flipped]
    assert int((offsets == 0).sum()) == 0
    chi = stats.chisquare(torch.bincount(offsets, minlength=task.k)[1:].numpy())
    assert chi.pvalue > 1e-3
    # training reads the flipped targets, evaluation the clean ones
    out = list(task.layout.output_pos)
    assert torch.equal(task.train_tokens[~flipped], task.tokens[~flipped])
    assert torch.equal(task.train_tokens[flipped][:, out], task.outputs()[task.group_id[flipped], task.noisy[flipped]])
    assert not torch.equal(task.train_tokens, task.tokens)
    assert task.sha256() != _task(n_bases=400, k=5).sha256()
    # one seed fixes the noise; another seed draws another
    again = Task.generate(task.spec, seed=3)
    assert torch.equal(again.noisy, task.noisy)
    assert not torch.equal(Task.generate(task.spec, seed=4).noisy, task.noisy)


@pytest.mark.parametrize("by", ["pair", "base"])
def test_held_out_pairs_are_never_in_the_training_set(by):
    task = _task(n_bases=40, holdout_fraction=0.25, holdout_by=by)
    held = task.heldout
    assert int(held.sum()) == (40 if by == "pair" else 10 * task.k)
    if by == "base":
        assert bool((held.all(1) | ~held.any(1)).all())  # whole bases
    trained = {tuple(r) for r in task.train_tokens.tolist()}
    assert len(task.train_tokens) == task.n_train == task.size - int(held.sum())
    assert not trained & {tuple(task.tokens[i].tolist()) for i in task.heldout_idx.tolist()}
    # the minibatch step draws only from them: every row it reads is a training row
    seen = []

    class Spy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(VOCAB_SIZE))

        def forward(self, tokens):
            seen.extend(tuple(r) for r in tokens.tolist())
            return self.w.expand(*tokens.shape, VOCAB_SIZE)

    model = Spy()
    spec = RunSpec(task=task.spec).train
    step = MinibatchStep(model, model, torch.optim.SGD(model.parameters(), lr=0.1), task.train_tokens,
                         task.layout.loss_pos, task.n_train, torch.Generator().manual_seed(0), spec, "cpu",
                         log_gradients=False)
    for t in range(1, 40):
        step(t)
    width = len(seen[0])  # the step reads each row up to its last scored position
    assert seen and set(seen) <= {r[:width] for r in trained}
    assert not set(seen) & {tuple(task.tokens[i, :width].tolist()) for i in task.heldout_idx.tolist()}


def _prefix(rows: torch.Tensor, p: int) -> list[tuple]:
    return [tuple(r[:p]) for r in rows.tolist()]


def test_unique_prefixes_of_two_characters_score_both():
    task = _task(k=40, n_bases=6, unique_prefix=2)
    targets = task.targets  # [n, K, len_a]
    for g in range(task.n_groups):
        assert len(set(_prefix(targets[g], 2))) == 40  # K > 36: only the 2-character prefixes can all differ
        assert len(set(_prefix(targets[g], 1))) < 40
    # the marginal model: candidate loss log K on the whole targets and on the first two characters alike (the
    # first character alone would not separate them, so its candidate softmax would be another number)
    model = LookupModel(task, see_z=False)
    idx = torch.arange(0, task.size, 7)
    alt = task.other_selectors(idx, torch.Generator().manual_seed(0))
    row = summarize(evaluate_examples(model, task, idx, alt))
    assert row["loss_cand"] == pytest.approx(math.log(40), abs=1e-9)
    assert row["loss_cand_first"] == pytest.approx(math.log(40), abs=1e-9)


class ClusterReader(LookupModel):
    """The Bayes-optimal predictor that reads z1 (the cluster) and not z2: the middle step of the staircase."""

    def _key(self, row: list[int], p: int) -> tuple:
        hidden = {self.task.layout.z_pos[1]}
        return tuple(t for i, t in enumerate(row[: p + 1]) if i not in hidden)


def test_a_hierarchy_separates_the_cluster_from_the_candidate():
    task = _task(k=6, n_bases=20, hierarchy="3x2")
    sets = task.selector_sets[0]
    assert len({tuple(z) for z in sets.tolist()}) == 6 and len(set(sets[:, 0].tolist())) == 3
    assert all(sets[i, 0] == sets[(i // 2) * 2, 0] for i in range(6))  # selector c*K2 + t: z1 is the cluster's
    model = ClusterReader(task, see_z=True)
    idx = torch.arange(task.size)
    alt = task.other_selectors(idx, torch.Generator().manual_seed(0))
    row = summarize(evaluate_examples(model, task, idx, alt))
    assert row["loss_cand"] == pytest.approx(math.log(2), abs=1e-9)  # log K2: the cluster known, not the candidate
    assert row["shuffle_gap_z2"] == pytest.approx(0.0, abs=1e-9)  # z2 is not read
    assert row["shuffle_gap_z1"] > 100  # another cluster: the target's first character gets no probability
    full = LookupModel(task, see_z=True)  # reads both: solved, and each swap costs
    solved = summarize(evaluate_examples(full, task, idx, alt))
    assert solved["loss_cand"] == pytest.approx(0.0, abs=1e-9) and solved["shuffle_gap_z2"] > 100


def test_k1_the_constant_selector_and_the_reversed_layout_are_controls():
    one = _task(k=1)
    idx, alt = one.sample(10, 0)
    assert alt is None
    with pytest.raises(InterpError, match="K = 1: a base has no other selector"):
        one.other_selectors(idx, torch.Generator())
    row = summarize(evaluate_examples(LookupModel(one, see_z=True), one, idx, None))
    assert row["loss_cand"] == 0.0 and math.isnan(row["shuffle_gap"])
    facts = derive([0, 10], [0.0, 0.0], [math.nan, math.nan], math.log(1))
    assert facts.tau_half is None and facts.plateau_height is None

    constant = _task(selector="constant")
    assert bool((constant.selector_sets == constant.selector_sets[:, :1]).all())
    idx = torch.arange(constant.size)
    alt = constant.other_selectors(idx, torch.Generator().manual_seed(0))
    best = summarize(evaluate_examples(LookupModel(constant, see_z=True), constant, idx, alt))
    assert best["loss_cand"] == pytest.approx(math.log(4), abs=1e-9)  # reading z cannot help
    assert best["shuffle_gap"] == pytest.approx(0.0, abs=1e-9)

    rev = _task(reverse=True)
    lay = rev.layout
    row0 = rev.tokens[0]
    assert lay.decision_pos == 0 and lay.output_pos == tuple(range(1, 2 + rev.spec.len_a))
    assert torch.equal(row0[1:5], rev.targets[0, 0]) and int(row0[5]) == SEP and int(row0[-1]) == EOS
    assert torch.equal(row0[list(lay.z_pos)], rev.selector_sets[0, 0])
    best = summarize(evaluate_examples(LookupModel(rev, see_z=True), rev, idx, alt))
    assert best["loss_cand"] == pytest.approx(math.log(4), abs=1e-9)  # A comes before B and z: the marginal
    assert best["shuffle_gap"] == pytest.approx(0.0, abs=1e-9)


BAD = [
    (dict(k=6, hierarchy="4x2"), "hierarchy 4x2 does not factor k = 6: K1 x K2 = 8; give factors of 6 (e.g. 2x3, 3x2)"),
    (dict(k=6, hierarchy="6"), "give K1xK2"),
    (dict(k=6, hierarchy="6x1"), "K1 and K2 must both be >= 2"),
    (dict(k=6, hierarchy="2x3", len_z=3), "give len_z = 2"),
    (dict(label_noise=1.0), "label_noise must be < 1"),
    (dict(label_noise=-0.1), "label_noise must be >= 0"),
    (dict(k=1, label_noise=0.1), "k = 1 has none"),
    (dict(holdout_fraction=1.0), "would hold out every pair and leave none to train on"),
    (dict(holdout_fraction=0.001), "holds out none"),
    (dict(holdout_by="group"), "unknown holdout_by 'group'; allowed: pair, base"),
    (dict(k=40), "--unique-prefix 2 (K up to 1296)"),
    (dict(unique_prefix=2, unique_first=False), "it needs unique first characters"),
    (dict(unique_prefix=3), "unique_prefix must be an integer <= 2"),
    (dict(direction="a_to_b", reverse=True), "it applies to bz_to_a"),
    (dict(direction="b_to_a", selector="constant"), "needs a direction with a selector z"),
    (dict(k=0), "k must be >= 1"),
]


@pytest.mark.parametrize("settings,message", BAD)
def test_bad_variants_are_refused_in_one_line(settings, message):
    with pytest.raises(InterpError) as caught:
        TaskSpec(**{"k": 4, "n_bases": 30, **settings}).validate()
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_each_variant_is_said_in_words():
    """The words `interp show` adds for each variant."""
    from interp.spec import describe_task_variants

    spec = TaskSpec(k=6, n_bases=40, label_noise=0.05, holdout_fraction=0.1, holdout_by="base", hierarchy="3x2")
    assert describe_task_variants(spec) == ["label noise 0.05", "4 bases held out (0.1)", "hierarchy 3x2"]
    assert describe_task_variants(TaskSpec()) == []
