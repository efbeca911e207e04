"""The author's generator in interp's words (`interp.imports.synass_data`) against the author's own code: the
fingerprints below were computed by running mihirs-0/synass-lens's src/data/dataset.py (each version, CPython 3.11,
torch stubbed out) and hashing its example list, `sha256(json.dumps(examples))[:16]`; the held-out splits by the
same code's DisambiguationDataset. A task given by its tables hashes as a generated task does, and the new spec
fields leave every old spec (and its hash) unchanged."""

from __future__ import annotations

import hashlib
import json
import random

import pytest
import torch

from interp.errors import InterpError
from interp.imports.synass_data import SynassData, examples, token_tables
from interp.spec import ModelSpec, RunSpec, TaskSpec, spec_sha256
from interp.task import Task
from interp.task_tables import task_from_tables


def fingerprint(rows) -> str:
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]


def test_the_config_defaults_draw_the_authors_examples():
    """seed 42, K = 10, 1,000 bases, no distinct first characters (versions 1 to 4 agree)."""
    for version in (1, 2, 4):
        strings = SynassData(seed=42, version=version).generate()
        rows = examples(strings)
        assert rows[:2] == [{"b": "3zmf8m", "z": "xa", "a": "dd4v"}, {"b": "3zmf8m", "z": "ji", "a": "30t9"}]
        assert strings["selector_sets"][0] == ["xa", "ji", "0y", "6d", "pb", "hs", "ah", "xt", "hv", "3a"]
        assert fingerprint(rows) == "951d1a2708d2fb96"


@pytest.mark.parametrize("data_seed,k,first,want", [
    (10, 10, "yxe198", "c2f34a18e36b12ca"),  # an eta-sweep cell: seed 0, K = 10 (data seed 1,000,003 x 0 + K)
    (20, 20, "xkexvq", "fb99316a092cd21f"),
    (36, 36, "jkaku6", "e685165c6a994742"),
    (1_000_013, 10, "8hyux9", "d8a27d8d9d60f9d9"),  # seed 1, K = 10
])
def test_distinct_first_characters_draw_the_authors_examples(data_seed, k, first, want):
    strings = SynassData(seed=data_seed, k=k, enforce_unique_a_first_char_per_b=True, split_by_base=True,
                         version=5).generate()
    assert strings["bases"][0] == first and fingerprint(examples(strings)) == want
    assert all(len({a[0] for a in row}) == k for row in strings["targets"])  # K distinct first characters per base


def _train_order(data: SynassData, rows: list[dict]) -> list[dict]:
    """The author's DisambiguationDataset train split, in its order (a fresh Random(seed) shuffles)."""
    rng, n, k = random.Random(data.seed), data.n_unique_b, data.k
    if data.split_by_base and data.version >= 4:
        bases = list(range(n))
        rng.shuffle(bases)
        return [rows[g * k + i] for g in bases[int(n * data.probe_fraction):] for i in range(k)]
    order = list(range(n * k))
    rng.shuffle(order)
    return [rows[e] for e in order[int(n * k * data.probe_fraction):]]


@pytest.mark.parametrize("version,fraction,by_base,first,want", [
    (1, 0.1, False, "5015oo/pb/yrsv", "5f4c3d22d44253de"),
    (4, 0.0, True, "1q9rvs/xa/f0s6", "2618b32f5898fbcf"),
    (4, 0.1, True, "m242yh/xa/fe5w", "eafdb9d394f81169"),
])
def test_the_held_out_split_is_the_authors(version, fraction, by_base, first, want):
    data = SynassData(seed=42, version=version, probe_fraction=fraction, split_by_base=by_base)
    strings = data.generate()
    rows = examples(strings)
    train = _train_order(data, rows)
    assert fingerprint(train) == want and "/".join(train[0].values()) == first
    held = {(g, i) for g, row in enumerate(strings["heldout"]) for i, h in enumerate(row) if h}
    assert len(held) == len(rows) - len(train) == round(len(rows) * fraction)
    trained = {(r["b"], r["z"]) for r in train}
    assert all((rows[g * 10 + i]["b"], rows[g * 10 + i]["z"]) not in trained for g, i in held)


def test_version_5_options_private_selectors_grow_and_prefixes_of_two():
    d = SynassData(seed=3, n_unique_b=50, k=20, z_length=2, z_sharing="private", version=5)
    assert d.selector_length == 3  # 36 ** 2 = 1296 < 2 x 50 x 20
    s = d.generate()
    zs = [z for zset in s["selector_sets"] for z in zset]
    assert len(zs) == len(set(zs)) == 1000 and all(len(z) == 3 for z in zs) and s["supergroup"] == list(range(50))
    p = SynassData(seed=3, n_unique_b=10, k=40, enforce_unique_a_first_char_per_b=True,
                   disambiguation_prefix_length=2, version=5).generate()
    assert all(len({a[:2] for a in row}) == 40 for row in p["targets"])
    with pytest.raises(InterpError, match="from version 5"):
        SynassData(seed=0, z_sharing="private", version=4).validate()
    with pytest.raises(InterpError, match="another alphabet cannot be expressed"):
        SynassData(seed=0, vocab_chars="abc").validate()


def test_a_task_given_by_its_tables_is_the_generated_task_bit_for_bit():
    """Tables made from a generated task give the same tokens and hash; a held-out split changes the hash; an old
    spec's dict (and hash) is unchanged by the new fields left at their defaults."""
    spec = TaskSpec(k=4, n_bases=24)
    task = Task.generate(spec, 3)
    tables = {"selector_sets": task.selector_sets, "bases": task.bases, "targets": task.targets,
              "supergroup": task.supergroup, "heldout": torch.zeros(24, 4, dtype=torch.bool)}
    again = task_from_tables(TaskSpec(k=4, n_bases=24, source="tables"), 3, tables)
    assert torch.equal(again.tokens, task.tokens) and again.sha256() == task.sha256()
    held = task_from_tables(TaskSpec(k=4, n_bases=24, source="tables"), 3, {**tables, "heldout": tables["heldout"] | (
        torch.arange(24) < 2).unsqueeze(1)})
    assert held.sha256() != task.sha256() and len(held.train_idx) == 88
    old = RunSpec()
    assert "source" not in old.task.to_dict() and "n_ctx" not in old.model.to_dict()
    assert spec_sha256(old) == spec_sha256(RunSpec.from_dict(json.loads(json.dumps(old.to_dict()))))
    with pytest.raises(InterpError, match="n_ctx = 8 is shorter"):
        RunSpec(model=ModelSpec(n_ctx=8)).validate()
    with pytest.raises(InterpError, match="not drawn from a seed"):
        Task.generate(TaskSpec(source="tables"), 0)


def test_the_tables_of_the_authors_data_are_its_strings():
    strings = SynassData(seed=5, n_unique_b=6, k=3, version=4).generate()
    t = token_tables(strings)
    assert t["bases"].shape == (6, 6) and t["targets"].shape == (6, 3, 4) and t["selector_sets"].shape == (1, 3, 2)
    from interp.spec import ALPHABET, FIRST_CHAR_ID

    assert "".join(ALPHABET[i - FIRST_CHAR_ID] for i in t["bases"][0].tolist()) == strings["bases"][0]
