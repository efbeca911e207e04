"""Issue 30's cases 2, 8 and 9 as tables, beside test_adversarial.py and in its style.

2. `drop_states(run, keep)` keeps what it is told: `keep` is one saved step or an iterable of them
   (whole numbers); anything else (a string, None, a fraction, a bool, a word) is refused in one line
   naming what was wrong and what is allowed, before anything is touched.
8. A notebook card never raises and never hides damage: a Run, a Sweep, a fork family and a sweep's
   fits, each against a garbage or missing status.json, manifest.json, metrics.jsonl and run.json,
   show a `problem` row (or the damaged run, named) instead.
9. A fork family whose parent was moved or deleted is read from its forks' own folders: `interp fork
   status` shows the forks and names the missing parent (exit 0 when every fork is done, 1 when the
   family is incomplete), the card shows a problem row, `interp mechanisms` names the parent and judges
   the forks' row; no traceback anywhere.

Fixtures: the session's 30-step tiny run (copied, never changed), a 20-step tiny run that keeps its
optimizer states, and a two-fork family of a copy of the tiny run (5 steps after step 20).
"""

from __future__ import annotations

import html
import json
import os
import shutil
from pathlib import Path

import pytest

from interp.cli import main
from interp.errors import InterpError
from tests.helpers import TINY_FLAGS, copy_run, run_main, snapshot




# ---------------------------------------------------------------------------- 2: drop_states keeps what it is told
@pytest.fixture(scope="module")
def kept(tmp_path_factory) -> Path:
    """A 20-step tiny run with --save-optimizer: states at steps 0, 1, 2, 4, 8, 10 and 20."""
    out = tmp_path_factory.mktemp("kept-states") / "run"
    assert main(["train", "--out", str(out), "--steps", "20", "--save-optimizer", *TINY_FLAGS]) == 0
    return out


KEEP_REFUSED = [
    # (id, keep, fragment of the one-line error)
    ("string", "20", "'20' is a string"),  # iterated: kept steps 2 and 0, deleted the state at 20
    ("string-in-list", ["20"], "'20' is a string"),
    ("none", None, "None"),  # TypeError: 'NoneType' object is not iterable
    ("word", ["abc"], "'abc'"),  # ValueError: invalid literal for int()
    ("fraction", [20.7], "20.7"),  # silently truncated to 20
    ("bool", [True], "True"),  # would keep step 1
    ("nan", [float("nan")], "nan"),
    ("not-kept", [30], "keeps no state at step 30"),
    ("negative", [-20], "keeps no state at step -20"),
]
KEEP_ACCEPTED = [
    # (id, keep, the steps that keep a state afterwards)
    ("int", 20, [20]),  # TypeError: 'int' object is not iterable
    ("list", [20], [20]),
    ("tuple", (10, 20), [10, 20]),
    ("whole-float", [20.0], [20]),
    ("generator", (s for s in (0, 20)), [0, 20]),
    ("empty", [], []),
]


@pytest.mark.parametrize("case", KEEP_REFUSED, ids=lambda c: c[0])
def test_drop_states_refuses(case, kept, tmp_path):
    from interp.run_states import drop_states
    from interp.runs import Run

    name, keep, fragment = case
    run = Run.open(copy_run(kept, tmp_path / "run"))
    saved = snapshot(run.path)
    with pytest.raises(InterpError) as info:
        drop_states(run, keep)
    text = str(info.value)
    assert fragment.lower() in text.lower() and len(text.splitlines()) == 1, text
    assert snapshot(run.path) == saved, "a refused drop_states changed the run"


@pytest.mark.parametrize("case", KEEP_ACCEPTED, ids=lambda c: c[0])
def test_drop_states_keeps_what_it_is_told(case, kept, tmp_path):
    from interp.run_states import drop_states, kept_steps
    from interp.runs import Run

    name, keep, after = case
    run = Run.open(copy_run(kept, tmp_path / "run"))
    before = kept_steps(run)
    assert drop_states(run, keep) == [s for s in before if s not in after]
    assert kept_steps(run) == after
    assert sorted(p.name for p in (run.path / "states").iterdir()) == [f"step_{s:07d}.safetensors" for s in after]


def test_drop_states_with_numpy_steps(kept, tmp_path):
    import numpy as np

    from interp.run_states import drop_states, kept_steps
    from interp.runs import Run

    run = Run.open(copy_run(kept, tmp_path / "run"))
    drop_states(run, np.array([10, 20]))
    assert kept_steps(run) == [10, 20]


@pytest.mark.parametrize("keep, fragment", [("10", "'10' is a string"), ([3], "saved no checkpoint at step 3")])
def test_drop_checkpoints_refuses_before_touching_anything(keep, fragment, kept, tmp_path):
    from interp.run_states import drop_checkpoints
    from interp.runs import Run

    run = Run.open(copy_run(kept, tmp_path / "run"))
    saved = snapshot(run.path)
    with pytest.raises(InterpError, match=fragment):
        drop_checkpoints(run, keep)
    assert snapshot(run.path) == saved


def test_drop_checkpoints_keeps_the_last_and_the_states_and_drops_the_cache(kept, tmp_path):
    """How the demo is thinned: the checkpoints asked for, the last one and those with a state stay (verified on
    load); the cache goes, since trajectory's entries read the checkpoint saved before theirs."""
    from interp.run_states import drop_checkpoints, drop_states, kept_steps
    from interp.runs import Run

    run = Run.open(copy_run(kept, tmp_path / "run"))
    drop_states(run, [4])
    (run.path / "cache" / "trajectory").mkdir(parents=True)
    assert drop_checkpoints(run, [0, 8]) == [1, 2, 10]
    run = Run.open(run.path)
    assert run.steps == [0, 4, 8, 20] and kept_steps(run) == [4]
    assert sorted(p.name for p in (run.path / "checkpoints").iterdir()) == [f"step_{s:07d}.safetensors" for s in run.steps]
    assert not (run.path / "cache").exists()
    for step in run.steps:
        run.state_dict(step)  # hash-checked


# ---------------------------------------------------------------------------- 8: a card never raises, never hides
def _garbage(path: Path) -> None:
    path.write_text("{garbage\n{garbage\n")


def _missing(path: Path) -> None:
    path.unlink()


DAMAGE = [
    # (id, file, how, fragment the run card's problem row names)
    ("status-garbage", "status.json", _garbage, "status.json is not"),  # InterpError from the card
    ("status-not-a-status", "status.json", lambda p: p.write_text("[1, 2]"), "status.json is not a run status"),
    ("status-unknown-state", "status.json", lambda p: p.write_text('{"state": "weird"}'), "status.json is not a run status"),
    ("manifest-garbage", "manifest.json", _garbage, "manifest.json is not valid JSON"),
    ("manifest-missing", "manifest.json", _missing, "manifest.json is missing"),
    ("metrics-garbage", "metrics.jsonl", _garbage, "metrics.jsonl line 1 is not valid JSON"),
    ("metrics-missing", "metrics.jsonl", _missing, "metrics.jsonl is missing"),  # shown as "done", no problem
    ("run-garbage", "run.json", _garbage, "run.json is not valid JSON"),
    ("run-missing", "run.json", _missing, "run.json"),
]


def _card(obj) -> str:
    page = html.unescape(obj._repr_html_())
    assert "Traceback" not in page
    return page


def _problem(page: str) -> str:
    """The text of the card's problem row."""
    assert "<th>problem</th>" in page, page[-3000:]
    cell = page[page.index("<th>problem</th>"):]
    return cell[:cell.index("</tr>")]


@pytest.mark.parametrize("case", DAMAGE, ids=lambda c: c[0])
def test_run_card_shows_the_damage(case, tiny_run, tmp_path):
    from interp.runs import Run

    name, file, how, fragment = case
    run = Run.open(copy_run(tiny_run(), tmp_path / "run"))  # opened before the damage, as in a notebook
    how(run.path / file)
    assert fragment in _problem(_card(run))


def test_run_card_of_a_sound_run_has_no_problem_row(tiny_run, tmp_path):
    from interp.runs import Run

    page = _card(Run.open(copy_run(tiny_run(), tmp_path / "run")))
    assert "<th>problem</th>" not in page and "done" in page


@pytest.fixture(scope="module")
def one_point_sweep(tmp_path_factory, tiny_run) -> Path:
    """A sweep of one point (seed 0) whose run is a copy of the session's tiny run."""
    from interp.runs import Run
    from interp.sweeps.sweep import Sweep, SweepSpec

    base = Run.open(tiny_run()).spec
    sweep = Sweep.create(tmp_path_factory.mktemp("card-sweep") / "sweep", SweepSpec(base=base, grid=(("seed", (0,)),)))
    ((name, _, _),) = sweep.points()
    copy_run(tiny_run(), sweep.path / name)
    assert list(sweep.table()["status"]) == ["done"]
    return sweep.path


@pytest.mark.parametrize("case", DAMAGE, ids=lambda c: c[0])
def test_sweep_and_fits_cards_name_the_damaged_run(case, one_point_sweep, tmp_path):
    from interp.sweeps.family import sweep_fits
    from interp.sweeps.sweep import Sweep

    name, file, how, fragment = case
    sweep = Sweep.open(copy_run(one_point_sweep, tmp_path / "sweep"))
    ((point, _, _),) = sweep.points()
    how(sweep.path / point / file)
    page = _card(sweep)
    assert "1 damaged" in page and point in _problem(page), page[-3000:]
    fits = _card(sweep_fits(sweep.table()))
    assert f"run {point} is damaged" in fits, fits[-3000:]


# ---------------------------------------------------------------------------- 9: a family whose parent is gone
@pytest.fixture(scope="module")
def family(tmp_path_factory, tiny_run) -> Path:
    """Forks minibatch and full_batch of a copy of the tiny run at step 20, 5 steps each (all done)."""
    from interp.forks.arms import parse_arms
    from interp.forks.family import ForkFamily

    root = tmp_path_factory.mktemp("orphan")
    parent = copy_run(tiny_run(), root / "parent")
    fam = ForkFamily.create(parent, [20], parse_arms("minibatch,full_batch"), [0], 5, root / "fam")
    fam.train(workers=1, progress=False)
    assert set(fam.table()["status"]) == {"done"}
    return fam.path


def _orphan(family: Path, tmp_path: Path, gone: str) -> tuple[Path, Path]:
    """A copy of the family and its parent, the parent then moved away or deleted."""
    parent = copy_run(Path(json.loads((family / "forks.json").read_text())["parent"]), tmp_path / "parent")
    folder = copy_run(family, tmp_path / "fam")
    for file in [folder / "forks.json", *folder.glob("*/run.json")]:  # point at the copy of the parent
        file.write_text(file.read_text().replace(str(family.parent / "parent"), str(parent)))
    _rehash(folder)
    if gone == "moved":
        os.rename(parent, tmp_path / "parent-moved")
    else:
        shutil.rmtree(parent)
    return folder, parent


def _rehash(folder: Path) -> None:
    """The copies' fork blocks name the new parent: their stored hash is made again, as a fork made there has."""
    from interp.runs import fork_sha256

    for file in folder.glob("*/run.json"):
        info = json.loads(file.read_text())
        info["fork_sha256"] = fork_sha256(info["fork"])
        file.write_text(json.dumps(info))


ORPHAN = [
    # (id, how the parent went, fork folders removed, exit status of `fork status`)
    ("moved", "moved", [], 0),  # exit 2: "no run folder at ..."
    ("deleted", "deleted", [], 0),
    ("moved-incomplete", "moved", ["at20-full_batch-s0"], 1),
]


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("case", ORPHAN, ids=lambda c: c[0])
def test_fork_status_without_the_parent(case, as_json, family, tmp_path, capsys):
    name, gone, removed, status = case
    folder, parent = _orphan(family, tmp_path, gone)
    for fork in removed:
        shutil.rmtree(folder / fork)
    saved = snapshot(folder)
    code, out, err = run_main(["fork", "status", str(folder), *(["--json"] if as_json else [])], capsys)
    assert code == status, out + err
    assert "Traceback" not in out + err
    if as_json:
        blob = json.loads(out)
        assert f"{parent}" in blob["parent_problem"]
        states = {r["run"]: r["status"] for r in blob["table"]}
    else:
        assert f"parent {parent}: missing" in out, out
        states = {line.split()[0]: " ".join(line.split()[6:8]) for line in out.splitlines() if line.startswith("at20-")}
        states = {k: v.replace(" escape_half", "") for k, v in states.items()}
    assert states == {"at20-minibatch-s0": "done", "at20-full_batch-s0": "not started" if removed else "done"}
    assert snapshot(folder) == saved


@pytest.mark.parametrize("gone", ["moved", "deleted"])
def test_family_card_without_the_parent(gone, family, tmp_path):
    import interp
    from interp.forks.family import ForkFamily

    folder, parent = _orphan(family, tmp_path, gone)
    for fam in (ForkFamily.open(folder), interp.open(folder)):
        page = _card(fam)
        assert str(parent) in _problem(page) and "2 done" in page and "at20-full_batch-s0" in page, page[-3000:]


@pytest.mark.parametrize("cached", [True, False], ids=["cached", "compute"])
def test_mechanisms_without_the_parent(cached, family, tmp_path, capsys):
    folder, parent = _orphan(family, tmp_path, "moved")
    saved = snapshot(folder, cache=False)
    code, out, err = run_main(["mechanisms", str(folder), *(["--cached"] if cached else []), "--quiet"], capsys)
    assert code in (0, 1) and "Traceback" not in out + err, out + err
    assert f"{parent}" in out and "missing" in out, out
    assert "entropic_forks" in out or "entropic" in out.lower()
    assert snapshot(folder, cache=False) == saved


@pytest.mark.parametrize("case", DAMAGE, ids=lambda c: c[0])
def test_family_card_names_the_damaged_fork(case, family, tmp_path):
    from interp.forks.family import ForkFamily

    name, file, how, fragment = case
    fam = ForkFamily.open(copy_run(family, tmp_path / "fam"))  # the parent stays where it is
    how(fam.path / "at20-full_batch-s0" / file)
    page = _card(fam)
    assert "1 done, 1 damaged" in page and "at20-full_batch-s0" in _problem(page), page[-3000:]
