"""Nothing silently wrong from the analysis cache or a bad last checkpoint (issue 15).

A cache entry carries the SHA-256 of its own content: one that was edited, damaged or written
without that hash is recomputed (to what it was) and named, never used. A cache folder that
is a file, or that cannot be written, switches the cache off with a note and everything is
still computed. A damaged last checkpoint spares the other steps, and the routing head is
read at the last readable step, which the findings, the report and the timeline name.
"""

import json

import pandas as pd
import pytest

from interp.analysis import cache as cache_module, registry, sensitivity
from interp.analysis.cache import ResultCache
from interp.analysis.suite import run_suite
from interp.cli import main
from interp.report import write_report
from interp.runs import Run
from interp.timelines import timeline
from interp.train import train
from tests.helpers import copy_run, edit_cached_table, small_spec

LAST = 30  # checkpoints at 0, 1, 2, 4, 8, 10, 20, 30


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Run:
    run = Run.create(tmp_path_factory.mktemp("cache-integrity") / "run", small_spec(steps=LAST, checkpoint_every=10))
    train(run, progress=False)
    assert run.steps[-2:] == [20, LAST]
    return run


@pytest.fixture
def run(source, tmp_path) -> Run:
    """A fresh copy of the source run, without its cache."""
    return Run.open(copy_run(source.path, tmp_path / "run", cache=False))


def _entry(run: Run, step: int, analysis: str = "sensitivity"):
    (path,) = (run.path / "cache" / analysis).glob(f"*/step_{step:07d}.json")
    return path


def _flip_first_digit(column: str):
    """Change the first decimal of one value of `column` (the first row whose value has one)."""
    def edit(df: pd.DataFrame) -> None:
        i = next(i for i, v in enumerate(df[column]) if 0.1 <= abs(v) < 1)
        text = f"{df[column].iloc[i]:.6f}"
        k = text.index(".") + 1
        df.loc[df.index[i], column] = float(text[:k] + str((int(text[k]) + 5) % 10) + text[k + 1:])
    return edit


def _sens_json(out: str) -> pd.DataFrame:
    return pd.DataFrame(json.loads(out)["tables"]["sensitivity"])


def test_an_edited_cache_entry_is_recomputed_to_the_original_and_named(run, capsys):
    assert main(["analyze", str(run.path), "--only", "sensitivity", "--json"]) == 0
    out = capsys.readouterr().out
    original, routing = _sens_json(out), json.loads(out)["findings"]["routing_head"]
    flipped = _entry(run, 20)
    edit_cached_table(flipped, _flip_first_digit("z_share"))  # one digit of one z-share

    def crown_another(df: pd.DataFrame) -> None:  # another head's z-share at the last step becomes the largest
        df.loc[(df["head_name"] != routing).idxmax(), "z_share"] = 0.999
    edit_cached_table(_entry(run, LAST), crown_another)

    assert main(["analyze", str(run.path), "--only", "sensitivity", "--json"]) == 0
    captured = capsys.readouterr()
    again = _sens_json(captured.out)
    pd.testing.assert_frame_equal(again, original, check_dtype=False)  # the edits were not used: recomputed to what it was
    assert json.loads(captured.out)["findings"]["routing_head"] == routing
    warnings = [line for line in captured.err.splitlines() if line.startswith("interp: warning: cache entry")]
    assert len(warnings) == 2 and any(str(flipped) in w for w in warnings), captured.err
    assert all("does not match its content hash" in w and w.endswith("recomputed") for w in warnings)
    third = run_suite(run, only="sensitivity", progress=False)  # rewritten, with a valid hash
    assert third.cache_misses == 0 and third.notes == []


def test_cached_leaves_out_a_damaged_entry_and_names_it(run):
    run_suite(run, only="sensitivity", progress=False)
    bad = _entry(run, 20)
    edit_cached_table(bad, _flip_first_digit("attn_to_z"))
    store = ResultCache(run)
    table = store.cached(registry.get("sensitivity").cache_key(registry.get("sensitivity").params()))["sensitivity"]
    assert sorted(table["step"].unique()) == [s for s in run.steps if s != 20]  # never computes, never trusts
    assert len(store.rejected) == 1 and str(bad) in store.rejected[0] and store.rejected[0].endswith("left out")


def test_an_entry_without_a_content_hash_is_recomputed_and_named(run):
    first = run_suite(run, only="sensitivity", progress=False)
    path = _entry(run, 4)
    blob = json.loads(path.read_text())
    assert len(blob.pop("sha256")) == 64
    path.write_text(json.dumps(blob))  # as an older interp wrote it
    again = run_suite(run, only="sensitivity", progress=False)
    assert again.cache_misses == 1 and again.cache_hits == len(run.steps) - 1
    assert [n for n in again.notes if str(path) in n and "no content hash" in n]
    assert again.cache_notes == [n for n in again.notes if n.startswith("cache entry")]
    assert "sha256" in json.loads(path.read_text())  # stored again, in the current format
    pd.testing.assert_frame_equal(again.tables["sensitivity"], first.tables["sensitivity"], check_dtype=False)


def test_a_cache_folder_that_is_a_file_is_bypassed_with_a_note(run, capsys):
    (run.path / "cache").write_text("not a folder")
    assert main(["analyze", str(run.path), "--only", "sensitivity", "--json"]) == 0
    captured = capsys.readouterr()
    assert set(_sens_json(captured.out)["step"]) == set(run.steps)
    notes = [line for line in captured.err.splitlines() if "cache disabled" in line]
    assert len(notes) == 1 and "is a file" in notes[0] and notes[0].startswith("interp: warning:")
    assert (run.path / "cache").read_text() == "not a folder"
    key = registry.get("sensitivity").cache_key({"n_groups": 64})
    assert ResultCache(run).cached_any(key) == {}  # reads answer, without a crash


def test_a_cache_that_cannot_be_written_is_noted_once(run, monkeypatch):
    def refuse(path, data):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(cache_module, "atomic_write_bytes", refuse)
    result = run_suite(run, only="sensitivity,attention", progress=False)
    assert set(result.tables["sensitivity"]["step"]) == set(run.steps)
    notes = [n for n in result.notes if n.startswith("cache not written")]
    assert len(notes) == 1 and "Permission denied" in notes[0]
    assert result.cache_misses == 2 * len(run.steps) and not (run.path / "cache").exists()


def test_a_damaged_last_checkpoint_spares_the_other_steps(run, capsys, tmp_path):
    checkpoint = run.path / "checkpoints" / f"step_{LAST:07d}.safetensors"
    data = bytearray(checkpoint.read_bytes())
    data[len(data) // 2] ^= 0xFF
    checkpoint.write_bytes(bytes(data))
    assert main(["analyze", str(run.path), "--only", "sensitivity,usage", "--json"]) == 1
    captured = capsys.readouterr()
    found = json.loads(captured.out)
    readable = [s for s in run.steps if s != LAST]
    assert sorted({r["step"] for r in found["tables"]["sensitivity"]}) == readable
    assert sorted({r["step"] for r in found["tables"]["usage"]}) == readable
    expected = sensitivity.routing_head(sensitivity.at_step(run, 20))
    assert found["findings"]["routing_head"] == expected and found["findings"]["routing_step"] == 20
    assert found["findings"]["routing_unreadable_after"] == [LAST]
    assert {r["head_name"] for r in found["tables"]["usage"]} == {expected}
    assert [p for p in found["problems"] if checkpoint.name in p] == found["problems"]  # named once
    assert len(found["problems"]) == 1 and checkpoint.name in captured.err

    tl = timeline(run)
    assert tl.routing_head == expected and tl.routing_step == 20 and any(checkpoint.name in n for n in tl.notes)
    page = write_report(run, tmp_path / "report.html").read_text()
    for key in ("sensitivity", "attn_to_z", "segments", "attention", "usage"):
        assert f'data-section="{key}"' in page and f'class="missing" data-section="{key}"' not in page, key
    assert f"at step 20 (step {LAST} is unreadable)" in page and checkpoint.name in page
