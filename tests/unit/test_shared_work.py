"""No work done twice at one checkpoint (`interp.analysis.common.shared`): the suite's analyses at a step share
the forwards they have in common (the decision-position record of sensitivity, representations and lens; the
base runs and the head patching of patching and usage), do fewer FLOPs than the same analyses called one by one,
and give exactly their tables. The memo itself: one computation per model, key and state of the weights."""

import pytest
import torch
from pandas.testing import assert_frame_equal
from torch.utils.flop_counter import FlopCounterMode

from interp.analysis import registry, representations
from interp.analysis.common import shared
from interp.analysis.suite import run_suite
from interp.model import ModelSpec
from interp.runs import Run
from tests.helpers import random_model

SHARING = ["sensitivity", "patching", "usage", "representations", "lens"]
HEAD = "L0H1"  # usage's head, given: the routing head would be read at another step


def _counting(monkeypatch, module, name: str) -> list:
    calls = []
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(name)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_the_suite_at_one_step_shares_forwards_and_gives_the_standalone_tables(tiny_run, monkeypatch):
    import interp.fastpath

    run = Run.open(tiny_run())
    step = run.steps[-1]
    records = _counting(monkeypatch, representations, "_record")  # one forward per chunk of the probe
    bases = _counting(monkeypatch, interp.fastpath, "base_cache")  # patching's clean and corrupted runs
    with FlopCounterMode(display=False) as flops:
        suite = run_suite(run, only=SHARING, steps=[step], options={"head": HEAD}, cache=False, progress=False)
    together, shared_records, shared_bases = flops.get_total_flops(), len(records), len(bases)
    assert not suite.problems
    alone: dict = {}
    with FlopCounterMode(display=False) as flops:
        for name in SHARING:  # each with its own model, as before anything was shared
            entry = registry.get(name)
            out = entry.at_step()(run, step, **entry.params({"head": HEAD}))
            alone.update(out if isinstance(out, dict) else {name: out})
    apart = flops.get_total_flops()
    assert (shared_records, shared_bases) == (1, 2)  # one record for three analyses; one clean and one corrupted run
    assert (len(records) - shared_records, len(bases) - shared_bases) == (3, 4)  # alone: patching's two kinds share
    assert together < apart
    for name, df in alone.items():
        assert_frame_equal(suite.tables[name], df, check_exact=True)


def test_shared_computes_once_per_model_key_and_weights():
    from interp.task import Task, TaskSpec

    task = Task.generate(TaskSpec(k=4, n_bases=12), seed=3)
    model = random_model(task, ModelSpec(n_layers=1, n_heads=2, d_model=16, d_head=8, d_mlp=32), seed=1)
    other = random_model(task, ModelSpec(n_layers=1, n_heads=2, d_model=16, d_head=8, d_mlp=32), seed=1)
    calls = []

    def compute():
        calls.append(1)
        return len(calls)

    assert shared(model, "k", compute) == 1 and shared(model, "k", compute) == 1  # once per key
    assert shared(model, "k2", compute) == 2 and shared(other, "k", compute) == 3  # another key, another model
    with torch.no_grad():
        next(model.parameters()).add_(0.0)  # weights changed in place (the same values: the version moved)
    assert shared(model, "k", compute) == 4 and shared(model, "k", compute) == 4
    handle = model.blocks[0].attn.hook_z.register_forward_hook(lambda module, inp, out: None)
    try:  # a hook could change what the model computes: nothing is shared while one is attached
        assert shared(model, "k", compute) == 5 and shared(model, "k", compute) == 6
    finally:
        handle.remove()
    assert shared(model, "k", compute) == 4


def test_a_probe_record_changes_with_the_weights(tiny_run):
    run = Run.open(tiny_run())
    model, task = run.model(run.steps[-1]), run.task
    groups = torch.arange(3)
    before = representations.decision_residuals(model, task, groups).clone()
    assert torch.equal(representations.decision_residuals(model, task, groups), before)
    with torch.no_grad():
        next(model.parameters()).mul_(2.0)
    after = representations.decision_residuals(model, task, groups)
    assert not torch.equal(after, before)  # recomputed, not the stale record
    fresh = run.model(run.steps[-1])
    with torch.no_grad():
        next(fresh.parameters()).mul_(2.0)
    assert torch.equal(after, representations.decision_residuals(fresh, task, groups))


@pytest.mark.parametrize("n_groups", [2, None])
def test_sensitivity_reads_the_shared_record_chunk_by_chunk(tiny_run, n_groups):
    from interp.analysis import sensitivity

    run = Run.open(tiny_run())
    step = run.steps[-1]
    model = run.model(step)
    first = sensitivity.head_sensitivity(model, run.task, torch.arange(5), chunk_groups=2)  # three chunks
    fresh = sensitivity.head_sensitivity(run.model(step), run.task, torch.arange(5), chunk_groups=2)
    assert all(torch.equal(first[k], fresh[k]) for k in first)
    assert_frame_equal(sensitivity.at_step(run, step, model=model, n_groups=n_groups),
                       sensitivity.at_step(run, step, n_groups=n_groups), check_exact=True)


# ---------------------------------------------------------------------------- replayed optimizer states
def _reserialised(run: Run, step: int) -> None:
    """The checkpoint at `step` written again with the same weights and another header: another SHA-256, listed."""
    import json

    from interp.checkpoints import read, serialize
    from interp.files import sha256_bytes

    manifest_path = run.path / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    entry = manifest["checkpoints"][str(step)]
    tensors, meta = read(run.path / entry["file"])
    data = serialize(tensors, {**meta, "note": "written again"})
    (run.path / entry["file"]).write_bytes(data)
    entry.update(sha256=sha256_bytes(data), bytes=len(data))
    manifest_path.write_text(json.dumps(manifest))


def test_a_replayed_state_is_kept_in_the_run_cache_and_read_back_until_its_checkpoint_changes(tiny_run, tmp_path,
                                                                                              monkeypatch):
    from interp import replay
    from interp.analysis import updates
    from interp.checkpoints import read_resume
    from tests.helpers import copy_run

    run = Run.open(copy_run(tiny_run(), tmp_path / "run", cache=False))
    step = 20  # no state kept there: replayed from the initialisation
    replays = _counting(monkeypatch, replay, "replay")
    first = updates.at_step(run, step, n_draws=2)
    path = replay.cached_path(run, step)
    assert len(replays) == 1 and path.is_file() and path.parent == run.path / "cache" / "replayed"
    assert not path.read_bytes().startswith(b"\x80") and not list(path.parent.glob(".*.tmp"))  # safetensors, atomic
    kept = read_resume(path)  # its own content hash verified
    assert kept.identity["checkpoint_sha256"] == run.checkpoint_hashes()[step]

    again = updates.at_step(Run.open(run.path), step, n_draws=2)  # a second call, a new process's view
    assert len(replays) == 1 and first["source"].iloc[0] == "replayed"
    assert_frame_equal(again, first, check_exact=True)
    fresh, how = replay.state_at(run, step)  # without the cache: replayed, the same state bit for bit
    cached, cached_how = replay.state_at(run, step, cache=True)
    assert len(replays) == 2 and cached_how == how == "replayed from step 0 (initialisation)"
    assert cached.extra == fresh.extra and cached.step == fresh.step
    assert all(torch.equal(cached.params[n], t) for n, t in fresh.params.items())
    for idx, entries in fresh.optimizer["state"].items():
        assert all(torch.equal(cached.optimizer["state"][idx][k], v) for k, v in entries.items())
    assert torch.equal(cached.generators["batches"], fresh.generators["batches"])

    before = path.read_bytes()
    assert_frame_equal(updates.at_step(run, step, n_draws=2, state_cache=False), first, check_exact=True)
    assert len(replays) == 3 and path.read_bytes() == before  # --no-cache: not read, not written
    suite = run_suite(run, only=["updates"], steps=[step], options={"n_draws": 2}, cache=False, progress=False)
    assert_frame_equal(suite.tables["updates"], first, check_exact=True)
    assert len(replays) == 4 and path.read_bytes() == before  # the suite's --no-cache reaches the state too

    _reserialised(run, step)  # the same weights under another hash: the kept state is not used
    changed = Run.open(run.path)
    assert_frame_equal(updates.at_step(changed, step, n_draws=2), first, check_exact=True)
    assert len(replays) == 5 and read_resume(path).identity["checkpoint_sha256"] == changed.checkpoint_hashes()[step]
    data = path.read_bytes()
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))  # damaged: replayed again and rewritten
    assert_frame_equal(updates.at_step(changed, step, n_draws=2), first, check_exact=True)
    assert len(replays) == 6
    updates.at_step(changed, step, n_draws=2)
    assert len(replays) == 6


def test_group_findings_leave_out_a_half_tau_beyond_the_analysed_steps(demo_run):
    """Found while counting the suite at one step (`--steps 350` on the demo): tau/2 lies beyond the analysed
    steps, and the findings named no share instead of failing on the missing step."""
    import pandas as pd

    from interp.analysis import groups

    acc = pd.DataFrame({"step": [100, 100], "group_id": [0, 1], "acc_cand": [0.9, 0.1], "loss_cand": [0.1, 1.0]})
    found = groups.findings(demo_run, {"groups": acc}, 1000, {})
    assert "groups_share_above_80_at_half_tau" not in found and found["groups_spread"]["n_groups"] == 2
    assert groups.rows(found, {"groups": acc}) == []
    assert groups.findings(demo_run, {"groups": acc}, 200, {})["groups_share_above_80_at_half_tau"] == 0.5
    # issue 43: tau/2 = 75 read at step 100, 0.17 tau away (more than STEP_SLACK): no share either
    assert "groups_share_above_80_at_half_tau" not in groups.findings(demo_run, {"groups": acc}, 150, {})
