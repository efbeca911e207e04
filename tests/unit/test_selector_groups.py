"""The selector-sharing control (`TaskSpec.selector_groups`, docs/definitions.md "The task"):
today's task reproduced bit for bit, private and shared selector sets read back from the
tokens alone, substitutions within a supergroup, refusals, serialization and the sweep axis."""

import json
from collections import defaultdict

import pytest
import torch

from interp.errors import InterpError
from interp.runs import Run
from interp.spec import RunSpec, spec_sha256
from interp.sweeps.presets import SWEEP_PRESETS, sweep_spec
from interp.sweeps.sweep import SweepSpec, parse_axis
from interp.task import Task, TaskSpec
from tests.helpers import DEMO, small_spec


def _z_by_base(task: Task) -> dict[int, list[tuple]]:
    """base -> its z strings in selector order, read from the token rows by an explicit loop."""
    z0, z1 = task.layout.segments["z"]
    b0, b1 = task.layout.segments["B"]
    base_index = {tuple(b): g for g, b in enumerate(task.bases.tolist())}
    out: dict[int, list[tuple]] = defaultdict(list)
    for row in task.tokens.tolist():  # group-major: a base's K rows come in selector order
        out[base_index[tuple(row[b0:b1])]].append(tuple(row[z0:z1]))
    return dict(out)


# ---------------------------------------------------------------------------- today's task
@pytest.mark.parametrize("k,n_bases,len_z,seed", [(10, 300, 2, 0), (4, 12, 2, 3), (3, 50, 1, 7), (36, 20, 2, 1),
                                                  (5, 40, 5, 2)])
def test_one_set_for_all_bases_is_todays_task_bit_for_bit(k, n_bases, len_z, seed):
    today = Task.generate(TaskSpec(k=k, n_bases=n_bases, len_z=len_z), seed)
    shared = Task.generate(TaskSpec(k=k, n_bases=n_bases, len_z=len_z, selector_groups=n_bases), seed)
    for name in ("tokens", "selector_sets", "bases", "targets", "group_id", "selector_id"):
        assert torch.equal(getattr(today, name), getattr(shared, name)), name
    assert torch.equal(today.selectors, shared.selectors)
    assert today.selectors.shape == (k, len_z)
    assert today.sha256() == shared.sha256()


def test_the_demo_opens_and_its_task_is_what_the_old_generator_made():
    """run.json's task_sha256 and spec_sha256 were written before selector_groups existed."""
    run = Run.open(DEMO)  # checks run.json's spec hash
    info = json.loads((DEMO / "run.json").read_text())
    assert "selector_groups" not in info["spec"]["task"]
    assert run.task.sha256() == info["task_sha256"]  # run.task checks it too; explicit here
    assert spec_sha256(run.spec) == info["spec_sha256"]  # the full spec's hash: no new key when unset
    assert run.spec.to_dict() == info["spec"]
    spec = run.spec.task
    again = Task.generate(TaskSpec(**{**spec.to_dict(), "selector_groups": spec.n_bases}), run.spec.seed)
    assert again.sha256() == info["task_sha256"]


# ---------------------------------------------------------------------------- private and shared sets
def test_private_selectors_are_used_by_no_other_base():
    task = Task.generate(TaskSpec(k=5, n_bases=40, selector_groups=1), seed=4)
    z = _z_by_base(task)
    users = defaultdict(set)
    for g, strings in z.items():
        assert len(set(strings)) == task.k  # K distinct selectors per base
        for s in strings:
            users[s].add(g)
    assert all(len(bases) == 1 for bases in users.values())
    assert len(users) == task.n_groups * task.k  # unique across the whole task
    assert task.n_selector_sets == 40 and task.selector_sets.shape == (40, 5, 2)


@pytest.mark.parametrize("g", [2, 3, 4, 6])
def test_supergroups_share_exactly_their_own_selectors(g):
    task = Task.generate(TaskSpec(k=4, n_bases=12, selector_groups=g), seed=1)
    z = _z_by_base(task)
    for a in range(12):
        for b in range(12):
            if a // g == b // g:
                assert z[a] == z[b]  # the same K strings, in the same selector order
            else:
                assert not set(z[a]) & set(z[b])
    assert task.supergroup.tolist() == [b // g for b in range(12)]
    # the lookup the tokens are built from, checked against them
    assert torch.equal(task.selector_tokens(task.group_id, task.selector_id),
                       task.tokens[:, slice(*task.layout.segments["z"])])


def test_several_sets_refuse_the_one_table_of_selectors():
    task = Task.generate(TaskSpec(k=4, n_bases=12, selector_groups=4), seed=1)
    with pytest.raises(InterpError, match=r"3 selector sets .*selector_sets"):
        task.selectors
    assert "selector_groups=4" in repr(task)


@pytest.mark.parametrize("g", [1, 3, 12])
def test_substitutions_stay_in_the_examples_own_supergroup(g):
    task = Task.generate(TaskSpec(k=4, n_bases=12, selector_groups=g), seed=2)
    z = _z_by_base(task)
    z0, z1 = task.layout.segments["z"]
    idx = torch.arange(task.size)
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        alt = task.other_selectors(idx, gen)
        assert bool((alt != task.selector_id).all()) and int(alt.min()) >= 0 and int(alt.max()) < task.k
        swapped = task.with_selector(idx, alt)
        for i, row in enumerate(swapped.tolist()):
            base = int(task.group_id[i])
            new, own = tuple(row[z0:z1]), z[base][int(task.selector_id[i])]
            assert new != own and new in z[base]  # another selector of its own set
            assert new == z[base][int(alt[i])]
        keep = [p for p in range(task.layout.length) if not z0 <= p < z1]
        assert torch.equal(swapped[:, keep], task.tokens[:, keep])
    assert torch.equal(task.with_selector(idx, task.selector_id), task.tokens)
    # the candidates are still the group's K outputs, the correct one at selector_id
    cand = task.candidates(idx)
    out = task.tokens[:, list(task.layout.output_pos)]
    assert torch.equal(cand[idx, task.selector_id], out)


# ---------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("spec,match", [
    (TaskSpec(n_bases=12, k=4, selector_groups=0), r"selector_groups must be an integer >= 1"),
    (TaskSpec(n_bases=12, k=4, selector_groups=-3), r"selector_groups must be an integer >= 1"),
    (TaskSpec(n_bases=12, k=4, selector_groups=13), r"selector_groups must be an integer <= 12"),
    (TaskSpec(n_bases=12, k=4, selector_groups=True), r"selector_groups must be an integer"),
    (TaskSpec(n_bases=12, k=4, selector_groups=5), r"does not divide n_bases = 12.*nearest allowed: 4, 6"),
    (TaskSpec(n_bases=12, k=4, selector_groups=3, direction="a_to_b"), r"needs a direction with a selector"),
    (TaskSpec(n_bases=12, k=4, selector_groups=3, direction="b_to_a"), r"'b_to_a' has none"),
    (TaskSpec(n_bases=12, k=4, len_z=1, selector_groups=1), r"48 distinct z strings, more than the 36"),
    (TaskSpec(n_bases=200, k=10, selector_groups=1), r"2000 distinct z strings, more than the 1296 .*len_z"),
])
def test_bad_selector_groups_are_refused(spec, match):
    with pytest.raises(InterpError, match=match):
        spec.validate()
    with pytest.raises(InterpError, match=match):
        Task.generate(spec, 0)


def test_capacity_edge_is_allowed():
    # 9 sets of K = 4 are exactly the 36 strings of length 1
    task = Task.generate(TaskSpec(n_bases=18, k=4, len_z=1, selector_groups=2), seed=0)
    assert len(set(map(tuple, task.selector_sets.reshape(-1, 1).tolist()))) == 36
    # and directions with a redundant z take the option too
    Task.generate(TaskSpec(n_bases=12, k=4, selector_groups=3, direction="az_to_b"), seed=0)


# ---------------------------------------------------------------------------- serialization
def test_spec_serialization_omits_an_unset_option():
    plain = small_spec()
    d = plain.to_dict()
    assert "selector_groups" not in d["task"]
    assert RunSpec.from_dict(d) == plain
    # the hash of an unset option is the hash of the spec written before the option existed
    legacy = json.loads(json.dumps(d))
    assert spec_sha256(plain) == spec_sha256(legacy)
    with_null = json.loads(json.dumps(d))
    with_null["task"]["selector_groups"] = None  # an explicit null reads back as unset
    assert RunSpec.from_dict(with_null) == plain
    set_ = plain.override(selector_groups=6)
    d6 = set_.to_dict()
    assert d6["task"]["selector_groups"] == 6
    assert RunSpec.from_dict(json.loads(json.dumps(d6))) == set_
    assert spec_sha256(set_) != spec_sha256(plain)


def test_a_run_with_selector_groups_opens_and_regenerates_its_task(tmp_path):
    spec = small_spec(selector_groups=6)  # 24 bases: 4 sets of K = 4
    run = Run.create(tmp_path / "r", spec)
    run.release()
    info = json.loads((tmp_path / "r" / "run.json").read_text())
    assert info["spec"]["task"]["selector_groups"] == 6
    again = Run.open(tmp_path / "r")
    assert again.spec == spec and again.spec.task.n_selector_sets == 4
    assert again.task.sha256() == info["task_sha256"]


# ---------------------------------------------------------------------------- the sweep axis
def test_the_sweep_axis_parses_as_integers():
    name, values = parse_axis("task.selector_groups=1,10,50,300")
    assert name == "task.selector_groups" and values == [1, 10, 50, 300]
    assert all(type(v) is int for v in values)
    assert parse_axis("task.selector_groups=none,2")[1] == [None, 2]
    spec = sweep_spec("tiny", grid=["task.selector_groups=1,10,50,300"], fields={"task.len_z": "3"})
    runs = spec.runs()
    assert [s.task.selector_groups for _, s, _ in runs] == [1, 10, 50, 300]
    assert [n for n, _, _ in runs] == ["k10-nb300-s0-sg1", "k10-nb300-s0-sg10", "k10-nb300-s0-sg50",
                                       "k10-nb300-s0-sg300"]
    # the same axis as a --selector-groups flag with a comma list
    flag = sweep_spec("tiny", fields={"task.selector_groups": "1,10,50,300", "task.len_z": "3"})
    assert dict(flag.grid)["task.selector_groups"] == (1, 10, 50, 300)
    # sweep.json round trip keeps the values integers
    back = SweepSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert back == spec


def test_a_bad_axis_value_names_the_point():
    with pytest.raises(InterpError, match=r"task.selector_groups: 'x' is not a valid int"):
        parse_axis("task.selector_groups=1,x")
    with pytest.raises(InterpError, match=r"sweep point task.selector_groups=1.*1296"):
        sweep_spec("tiny", grid=["task.selector_groups=1,300"]).runs()  # len_z = 2 cannot hold 3000


def test_the_preset_is_valid_and_spans_private_to_shared():
    spec = SWEEP_PRESETS["cancellation-tiny"]
    runs = spec.runs()
    groups = sorted({s.task.selector_groups for _, s, _ in runs})
    assert groups[0] == 1 and groups[-1] == spec.base.task.n_bases
    assert len(groups) >= 3 and len({s.seed for _, s, _ in runs}) >= 2
