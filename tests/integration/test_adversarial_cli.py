"""Issue 30's command-line cases 18 and 22 as tables, beside test_adversarial.py and in its style:

- 18: an empty or blank path is refused by every command that takes one (one line, exit 2, no
  traceback), before anything is read or written; `interp mechanisms ""` read the current folder;
- 22a: what `interp report` and `interp timeline` put in the page's notes (cache entries not used,
  steps that could not be analysed) is said on stderr too, one line each, as `interp analyze` does;
- 22b: a cache folder of an older format, which is never read, is named once on stderr (with how to
  clear it) by analyze, report and timeline, rather than ignored silently;
- 22c: `interp ls` exits 1 when something it lists is damaged (a run, a sweep's run, a family's fork),
  naming it on stderr, as the status commands do.

Fixtures: `run` is the session's 30-step tiny run (it never reaches tau), `analysed` a copy of it whose
cache a report has filled (so each report below only redraws: a second or two).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from interp.cli import build_parser, main
from tests.helpers import TINY_FLAGS, copy_run, run_main, snapshot




@pytest.fixture(scope="module")
def analysed(tmp_path_factory, tiny_run) -> Path:
    """A copy of the tiny run whose cache holds every default analysis (a report was written)."""
    run = copy_run(tiny_run(), tmp_path_factory.mktemp("adversarial-cli") / "run")
    assert main(["report", str(run), "-o", str(run.parent / "first.html"), "--quiet"]) == 0
    return run


# ---------------------------------------------------------------------------- 18: empty and blank paths
PATH_COMMANDS = [
    # (id, argv); "{X}" is the empty or blank path, "{R}" a run, "{T}" a scratch folder
    ("train-out", ["train", "--out", "{X}", *TINY_FLAGS]),
    ("train-resume-out", ["train", "--resume", "--out", "{X}", "--quiet"]),
    ("show", ["show", "{X}"]),
    ("show-json", ["show", "{X}", "--json"]),
    ("analyze", ["analyze", "{X}", "--only", "trajectory", "--quiet"]),
    ("report", ["report", "{X}", "-o", "{T}/report.html", "--quiet"]),
    ("report-output", ["report", "{R}", "-o", "{X}", "--quiet"]),
    ("timeline", ["timeline", "{X}", "-o", "{T}/timeline.html", "--quiet"]),
    ("timeline-output", ["timeline", "{R}", "-o", "{X}", "--quiet"]),
    ("mechanisms", ["mechanisms", "{X}", "--quiet"]),  # read the current folder
    ("mechanisms-cached", ["mechanisms", "{X}", "--cached", "--quiet"]),
    ("reconcile", ["reconcile", "{X}", "--cached", "--quiet"]),
    ("reconcile-second", ["reconcile", "{R}", "{X}", "--cached", "--quiet"]),
    ("ls", ["ls", "{X}"]),
    ("ls-json", ["ls", "{X}", "--json"]),
    ("fork-parent", ["fork", "{X}", "--at", "20", "--steps", "5", "--out", "{T}/f", "--quiet"]),
    ("fork-out", ["fork", "{R}", "--at", "20", "--steps", "5", "--out", "{X}", "--quiet"]),
    ("fork-family-out", ["fork", "{R}", "--at", "10,20", "--steps", "5", "--out", "{X}", "--quiet"]),
    ("fork-status", ["fork", "status", "{X}"]),
    ("sweep", ["sweep", "{X}", "--quiet"]),
    ("sweep-out", ["sweep", "--out", "{X}", "--steps", "5", *TINY_FLAGS]),
    ("sweep-status", ["sweep", "status", "{X}"]),
    ("scaling", ["scaling", "{X}"]),
    ("export", ["export", "{X}", "--to", "tensorboard"]),
    ("export-out", ["export", "{R}", "--to", "tensorboard", "--out", "{X}"]),
    ("export-report", ["export", "{R}", "--to", "wandb", "--report", "{X}"]),
    ("export-synass", ["export", "{R}", "--to", "synass", "{X}"]),
    ("import", ["import", "{X}", "--out", "{T}/imported", "--quiet"]),
    ("import-out", ["import", "{R}", "--out", "{X}", "--quiet"]),
    ("import-spec", ["import", "{R}", "--out", "{T}/imported", "--spec", "{X}", "--quiet"]),
    ("evaluate", ["evaluate", "{X}", "--quiet"]),
    ("phase", ["phase", "{X}"]),
    ("phase-csv", ["phase", "{R}", "--csv", "{X}"]),
    ("phase-figure", ["phase", "{R}", "--figure", "{X}"]),
]
PATHLESS = {"doctor"}  # subcommands that take no path


def test_every_command_is_in_the_table():
    """Each subcommand that takes a path: a new one must get its rows here (or be named as taking none)."""
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    assert set(sub.choices) - PATHLESS == {argv[0] for _, argv in PATH_COMMANDS}


@pytest.mark.parametrize("blank", ["", "  "], ids=["empty", "blank"])
@pytest.mark.parametrize("case", PATH_COMMANDS, ids=lambda c: c[0])
def test_an_empty_path_is_refused(case, blank, tiny_run, tmp_path, capsys, monkeypatch):
    """Run from inside a run folder, where "" would read (and a cache would be written into) that run."""
    name, argv = case
    here = copy_run(tiny_run(), tmp_path / "here")
    other = copy_run(tiny_run(), tmp_path / "other")
    scratch = tmp_path / "t"
    scratch.mkdir()
    monkeypatch.chdir(here)
    saved, saved_other = snapshot(here), snapshot(other)
    code, out, err = run_main([a.replace("{X}", blank).replace("{R}", str(other)).replace("{T}", str(scratch))
                           for a in argv], capsys)
    text = out + err
    assert code == 2, text[-2000:]
    assert "Traceback" not in text and "non-empty path" in text, text[-2000:]
    assert len(text.strip().splitlines()) == 1, text[-2000:]
    assert snapshot(here) == saved and snapshot(other) == saved_other, "a refused command changed a run"
    assert not list(scratch.iterdir()), "a refused command wrote something"


# ---------------------------------------------------------------------------- 22a: the page's notes on stderr too
def _damaged_cache_and_step(run: Path) -> tuple[str, str]:
    """A sensitivity cache entry that is not JSON, and a checkpoint (step 10, not cached) that cannot be
    read: what the page names, as (cache entry path, step)."""
    entry = next((run / "cache" / "sensitivity").glob("*/step_0000020.json"))
    entry.write_text("{garbage")
    for cached in (run / "cache").glob("*/*/step_0000010.json"):
        cached.unlink()
    (run / "checkpoints" / "step_0000010.safetensors").write_bytes(b"not a checkpoint")
    return str(entry), "step 10"


NOTED = [
    # (id, argv, exit status); "{R}" is the damaged run, "{T}" a scratch folder
    ("report", ["report", "{R}", "-o", "{T}/page.html", "--quiet"], 0),
    ("timeline", ["timeline", "{R}", "-o", "{T}/page.html", "--quiet"], 0),
]


def _warnings(err: str) -> list[str]:
    return [line.removeprefix("interp: warning: ") for line in err.splitlines() if line.startswith("interp: warning: ")]


@pytest.mark.parametrize("case", NOTED, ids=lambda c: c[0])
def test_the_page_notes_are_said_on_stderr(case, analysed, tmp_path, capsys):
    name, argv, status = case
    run = copy_run(analysed, tmp_path / "run")
    entry, step = _damaged_cache_and_step(run)
    code, out, err = run_main([a.replace("{R}", str(run)).replace("{T}", str(tmp_path)) for a in argv], capsys)
    assert code == status and "Traceback" not in out + err, err[-3000:]
    page = (tmp_path / "page.html").read_text()
    boxes = re.findall(r'<div class="missing" id="(?:missing|cache-notes)">(.*?)</div>', page, re.S)
    noted = [html.unescape(n) for box in boxes for n in re.findall(r"<li>(.*?)</li>", box) if not n.startswith("<b>")]
    said = _warnings(err)
    assert any(entry in n for n in noted) and any(step in n for n in noted), noted  # in the page, as before
    assert sorted(said) == sorted(set(noted)), (said, noted)  # and each on stderr, once, with the same text


# ---------------------------------------------------------------------------- 22b: an older cache format
def _old_format(run: Path, fmt: int) -> Path:
    """A cache folder as interp wrote it before format 3 (no content hash, no "format" field): format 2
    kept every table of an analysis in `tables`, format 1 one table in `table`."""
    folder = run / "cache" / "sensitivity" / ("0123456789abcdef" if fmt == 2 else "fedcba9876543210")
    folder.mkdir(parents=True)
    entry = {"analysis": "sensitivity", "params": {"n_groups": 8}, "step": 20, "checkpoint_sha256": "0" * 64}
    if fmt == 2:
        entry.update(version=1, tables={"sensitivity": '{"schema": {}, "data": []}'})
    else:
        entry.update(table='{"schema": {}, "data": []}')
    (folder / "step_0000020.json").write_text(json.dumps(entry))
    return folder


OLD_FORMAT = [
    # (id, argv, cache format); "{R}" is the run, "{T}" a scratch folder
    ("analyze-format-2", ["analyze", "{R}", "--only", "trajectory", "--quiet"], 2),
    ("analyze-format-1", ["analyze", "{R}", "--only", "trajectory", "--quiet"], 1),
    ("analyze-json", ["analyze", "{R}", "--only", "trajectory", "--json"], 2),
    ("report", ["report", "{R}", "-o", "{T}/page.html", "--quiet"], 2),
    ("timeline", ["timeline", "{R}", "-o", "{T}/page.html", "--quiet"], 2),
]


@pytest.mark.parametrize("case", OLD_FORMAT, ids=lambda c: c[0])
def test_an_old_cache_format_is_named_once(case, analysed, tmp_path, capsys):
    name, argv, fmt = case
    run = copy_run(analysed, tmp_path / "run")
    folder = _old_format(run, fmt)
    saved = snapshot(run)
    code, out, err = run_main([a.replace("{R}", str(run)).replace("{T}", str(tmp_path)) for a in argv], capsys)
    assert code == 0 and "Traceback" not in out + err, err[-3000:]
    said = [line for line in err.splitlines() if str(folder) in line]
    assert len(said) == 1, err[-3000:]  # once, naming the folder
    assert "older cache format" in said[0] and "not read" in said[0] and "delete" in said[0], said[0]
    assert snapshot(run) == saved, "the old folder (or something else) was changed"  # reported, never removed


def test_a_current_cache_is_not_called_old(analysed, tmp_path, capsys):
    run = copy_run(analysed, tmp_path / "run")
    code, out, err = run_main(["analyze", str(run), "--only", "trajectory", "--quiet"], capsys)
    assert code == 0 and "format" not in err, err


# ---------------------------------------------------------------------------- 22c: interp ls and damage
def _sweep(root: Path) -> Path:
    """A two-run sweep (runs not trained: synthetic metrics and a done status)."""
    from interp.sweeps.sweep import SweepSpec
    from tests.helpers import small_spec
    from tests.synthetic_sweeps import write_sweep_folder

    spec = SweepSpec(base=small_spec(steps=100), grid=(("seed", (0, 1)),), name="s")
    write_sweep_folder(root / "sweep", spec, lambda s, rng: 50.0)
    return root / "sweep"


def _family(root: Path, parent: Path) -> Path:
    """A fork family of two forks whose fork folders are copies of a finished run."""
    from interp.forks.arms import parse_arms
    from interp.forks.design import design_points, read_design
    from interp.forks.family import ForkFamily
    from interp.runs import Run

    ForkFamily.create(Run.open(parent), [20], parse_arms("minibatch,full_batch"), [0], 5, root / "family")
    for name, *_ in design_points(read_design(root / "family")):
        copy_run(parent, root / "family" / name)
    return root / "family"


def _lone(root: Path, parent: Path) -> Path:
    return copy_run(parent, root / "lone")


def _missing_checkpoint(run: Path) -> str:
    (run / "checkpoints" / "step_0000020.safetensors").unlink()
    return "step_0000020.safetensors"


def _garbage_status(run: Path) -> str:
    (run / "status.json").write_bytes(b"\x00\x01garbage")
    return "status.json"


def _bogus_status(run: Path) -> str:
    (run / "status.json").write_text(json.dumps({"state": "finished"}))
    return "status.json"


def _edited_spec(run: Path) -> str:
    info = json.loads((run / "run.json").read_text())
    info["spec"]["train"]["lr"] *= 2
    (run / "run.json").write_text(json.dumps(info))
    return "run.json"


def _garbage_metrics(run: Path) -> str:
    from tests.helpers import garbage_line

    garbage_line(run / "metrics.jsonl", 3)
    return "metrics.jsonl"


LS_DAMAGE = [
    # (id, what is made, which of its runs is damaged (None: nothing), the damage, the listed folder: root or it)
    ("clean", "lone", None, None, "root"),
    ("lone-run-missing-checkpoint", "lone", ".", _missing_checkpoint, "root"),
    ("lone-run-bogus-status", "lone", ".", _bogus_status, "root"),
    ("lone-run-listed-itself", "lone", ".", _missing_checkpoint, "it"),
    ("sweep-clean", "sweep", None, None, "root"),
    ("sweep-run-garbage-status", "sweep", "-s0", _garbage_status, "root"),  # exited 0
    ("sweep-run-garbage-metrics", "sweep", "-s1", _garbage_metrics, "root"),
    ("sweep-run-edited-spec", "sweep", "-s1", _edited_spec, "root"),
    ("sweep-listed-itself", "sweep", "-s0", _bogus_status, "it"),
    ("family-clean", "family", None, None, "root"),
    ("family-fork-garbage-status", "family", "at20-full_batch-s0", _garbage_status, "root"),
    ("family-fork-missing-checkpoint", "family", "at20-minibatch-s0", _missing_checkpoint, "it"),
]
MAKERS = {"lone": lambda root, parent: _lone(root, parent), "sweep": lambda root, parent: _sweep(root),
          "family": _family}


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("case", LS_DAMAGE, ids=lambda c: c[0])
def test_ls_names_what_is_damaged(case, as_json, tiny_run, tmp_path, capsys):
    name, kind, which, damage, listed = case
    root = tmp_path / "root"
    root.mkdir()
    made = MAKERS[kind](root, tiny_run())
    if kind == "sweep" and which is not None:  # its runs are named by their values: the one of this seed
        which = next(p.name for p in sorted(made.iterdir()) if p.is_dir() and p.name.endswith(which))
    fragment = damage(made / which) if damage else None
    saved = snapshot(root)
    argv = ["ls", str(root if listed == "root" else made)] + (["--json"] if as_json else [])
    code, out, err = run_main(argv, capsys)
    assert "Traceback" not in out + err and snapshot(root) == saved
    if damage is None:
        assert code == 0 and "damaged" not in err, out + err
        return
    assert code == 1, out + err
    named = [line for line in err.splitlines() if "damaged" in line and fragment in line]
    assert len(named) == 1, err  # named once on stderr, with the file that is wrong
    if which != ".":
        assert which in named[0], named[0]
    if as_json:
        assert fragment in out  # the JSON says it too
