"""The task's information structure, uniqueness rules, seeding and token layouts (docs/definitions.md)."""

import math
from collections import Counter, defaultdict

import pytest
import torch

from interp.errors import InterpError
from interp.task import BOS, DIRECTIONS, EOS, FIRST_CHAR_ID, SEP, Task, TaskSpec


def _strings(tokens: torch.Tensor) -> list[tuple]:
    return [tuple(row) for row in tokens.tolist()]


def conditional_entropy(pairs: list[tuple]) -> float:
    """H(Y | X) in nats for equally weighted (x, y) examples, by counting."""
    by_x = defaultdict(Counter)
    for x, y in pairs:
        by_x[x][y] += 1
    n = len(pairs)
    h = 0.0
    for counts in by_x.values():
        total = sum(counts.values())
        h -= sum(c / n * math.log(c / total) for c in counts.values())
    return h


def mutual_information(pairs: list[tuple]) -> float:
    ys = Counter(y for _, y in pairs)
    n = len(pairs)
    h_y = -sum(c / n * math.log(c / n) for c in ys.values())
    return h_y - conditional_entropy(pairs)


@pytest.mark.parametrize("k,n_bases", [(3, 50), (10, 100), (36, 20)])
def test_entropies_are_log_k_and_zero(k, n_bases):
    task = Task.generate(TaskSpec(k=k, n_bases=n_bases), seed=1)
    lay = task.layout
    b = _strings(task.tokens[:, slice(*lay.segments["B"])])
    z = _strings(task.tokens[:, slice(*lay.segments["z"])])
    a = _strings(task.tokens[:, slice(*lay.segments["A"])])
    assert conditional_entropy(list(zip(b, a))) == pytest.approx(math.log(k), abs=1e-12)
    assert conditional_entropy(list(zip(zip(b, z), a))) == pytest.approx(0.0, abs=1e-12)
    # the first target token alone already has H(a1 | B) = log K (unique first characters)
    a1 = task.tokens[:, lay.decision_pos + 1].tolist()
    assert conditional_entropy(list(zip(b, a1))) == pytest.approx(math.log(k), abs=1e-12)


def test_selector_alone_carries_no_information():
    task = Task.generate(TaskSpec(k=10, n_bases=2000), seed=0)
    lay = task.layout
    z = _strings(task.tokens[:, slice(*lay.segments["z"])])
    b = _strings(task.tokens[:, slice(*lay.segments["B"])])
    # every selector string occurs exactly once in every group: z is independent of B
    assert len(set(z)) == task.k
    assert Counter(zip(b, z)) == Counter({key: 1 for key in zip(b, z)})
    assert len(set(zip(b, z))) == task.size
    # and z says nothing about the first target character beyond the finite-sample bias
    a1 = task.tokens[:, lay.decision_pos + 1].tolist()
    mi = mutual_information(list(zip(z, a1)))
    bias = (task.k - 1) * (36 - 1) / (2 * task.size)  # Miller-Madow bias of the plug-in estimate
    assert mi < 3 * bias, (mi, bias)


def test_a_selector_bound_to_a_first_character_would_be_detected():
    """The MI check above can fail: a generator that sorted first characters by selector would."""
    task = Task.generate(TaskSpec(k=10, n_bases=2000), seed=0)
    a1 = task.tokens[:, task.layout.decision_pos + 1].view(task.n_groups, task.k).sort(dim=1).values
    z = task.selector_id.view(task.n_groups, task.k)
    mi = mutual_information(list(zip(z.flatten().tolist(), a1.flatten().tolist())))
    assert mi > 0.3


def test_uniqueness_rules():
    task = Task.generate(TaskSpec(k=36, n_bases=200), seed=2)
    assert len(set(_strings(task.selectors))) == task.k
    assert len(set(_strings(task.bases))) == task.n_groups
    flat = task.targets.reshape(-1, task.spec.len_a)
    assert len(set(_strings(flat))) == task.size
    first = task.targets[:, :, 0]
    assert all(len(set(row)) == task.k for row in first.tolist())
    assert int(task.tokens.min()) >= 0 and int(task.tokens.max()) < 40


def test_without_unique_first_characters_repeats_are_allowed():
    task = Task.generate(TaskSpec(k=10, n_bases=300, unique_first=False), seed=0)
    first = task.targets[:, :, 0]
    assert any(len(set(row)) < task.k for row in first.tolist())
    flat = task.targets.reshape(-1, task.spec.len_a)
    assert len(set(_strings(flat))) == task.size  # targets still unique across the dataset


def test_same_seed_same_tensors_other_seed_differs():
    spec = TaskSpec(k=5, n_bases=40)
    a, b, c = Task.generate(spec, 7), Task.generate(spec, 7), Task.generate(spec, 8)
    for name in ("tokens", "selectors", "bases", "targets", "group_id", "selector_id"):
        assert torch.equal(getattr(a, name), getattr(b, name))
    assert a.sha256() == b.sha256() != c.sha256()
    assert not torch.equal(a.selectors, c.selectors)
    assert not torch.equal(a.bases, c.bases)
    assert not torch.equal(a.targets, c.targets)


@pytest.mark.parametrize("direction", list(DIRECTIONS))
def test_layout_puts_named_positions_on_their_tokens(direction):
    spec = TaskSpec(k=4, n_bases=10, len_b=5, len_z=3, len_a=2, direction=direction)
    task = Task.generate(spec, 0)
    lay, tok = task.layout, task.tokens
    inputs, output = DIRECTIONS[direction]
    assert tok.shape == (task.size, lay.length)
    assert (tok[:, 0] == BOS).all() and (tok[:, -1] == EOS).all()
    assert (tok[:, lay.decision_pos] == SEP).all()
    assert lay.output_pos == tuple(range(lay.decision_pos + 1, lay.length))
    assert (tok[:, slice(*lay.segments["SEP"])] == SEP).all()
    expected = {
        "B": task.bases[task.group_id],
        "A": task.targets[task.group_id, task.selector_id],
        "z": task.selectors[task.selector_id],
    }
    for name in inputs + (output,):
        assert torch.equal(tok[:, slice(*lay.segments[name])], expected[name]), name
    if "z" in inputs:
        assert lay.z_pos == tuple(range(*lay.segments["z"]))
        assert (tok[:, slice(*lay.segments["SEP2"])] == SEP).all()
        assert lay.decision_pos == lay.segments["SEP2"][0]
    else:
        assert lay.z_pos == () and not task.has_selector
        assert lay.decision_pos == lay.segments["SEP"][0]
    assert torch.equal(tok[:, list(lay.output_pos)[:-1]], expected[output])
    assert (tok[:, 1:-1] >= FIRST_CHAR_ID).sum() == task.size * (lay.length - 2 - len(inputs))


def test_main_direction_layout_matches_the_spec():
    lay = Task.generate(TaskSpec(k=3, n_bases=5), 0).layout
    assert lay.length == 16 and lay.decision_pos == 10
    assert lay.z_pos == (8, 9) and lay.output_pos == (11, 12, 13, 14, 15)
    assert lay.loss_pos == (10, 11, 12, 13, 14)


def test_with_selector_replaces_only_z(small_task):
    idx = torch.arange(small_task.size)
    alt = small_task.other_selectors(idx, torch.Generator().manual_seed(0))
    swapped = small_task.with_selector(idx, alt)
    zs = slice(*small_task.layout.segments["z"])
    assert torch.equal(swapped[:, zs], small_task.selectors[alt])
    keep = torch.ones(small_task.layout.length, dtype=torch.bool)
    keep[zs] = False
    assert torch.equal(swapped[:, keep], small_task.tokens[:, keep])


def test_other_selectors_are_never_the_own_and_cover_all_others(small_task):
    idx = torch.arange(small_task.size).repeat(200)
    alt = small_task.other_selectors(idx, torch.Generator().manual_seed(0))
    own = small_task.selector_id[idx]
    assert not (alt == own).any()
    for i in range(small_task.k):
        assert set(alt[own == i].tolist()) == set(range(small_task.k)) - {i}


def test_candidates_hold_the_group_outputs_with_the_correct_one_at_the_selector(small_task):
    idx = torch.arange(small_task.size)
    cands = small_task.candidates(idx)
    own = cands[idx, small_task.selector_id[idx]]
    assert torch.equal(own, small_task.tokens[:, list(small_task.layout.output_pos)])
    seqs = small_task.with_candidates(idx)
    assert torch.equal(seqs[idx, small_task.selector_id], small_task.tokens)


@pytest.mark.parametrize(
    "spec,fragment",
    [
        (TaskSpec(k=0), "k must be >= 1"),
        (TaskSpec(k=37), "distinct first characters"),
        (TaskSpec(k=37, unique_first=False, len_z=1), "selectors do not fit"),
        (TaskSpec(k=10, n_bases=200, len_a=2), "exceed the 1296 distinct A strings"),
        (TaskSpec(n_bases=50, len_b=1), "exceeds the 36 distinct B strings"),
        (TaskSpec(k=2, n_bases=40, len_a=1), "targets exceed"),
        (TaskSpec(direction="sideways"), "unknown direction"),
    ],
)
def test_impossible_specs_are_refused_with_a_reason(spec, fragment):
    with pytest.raises(InterpError, match=fragment):
        Task.generate(spec, 0)
