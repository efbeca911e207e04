"""Issue 30's fork cases as tables, beside test_adversarial.py and in its style: bad input to
`interp fork` (refused before anything is written: a one-line error, exit 2, no traceback, the
parent untouched and the output folder never made), and a family folder whose forks.json holds
a design no command can use (every command refuses it in one line; the notebook card shows it).

Fixtures: `run` is the session's 30-step tiny run (it never reaches tau), `demo` a copy of the
shipped demo run (it does). Refused cases need no training: each takes a second or two.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from interp.cli import main
from tests.helpers import DEMO, copy_run, run_main, snapshot


@pytest.fixture(scope="module")
def parents(tmp_path_factory, tiny_run) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("adversarial-forks")
    return {"run": tiny_run(), "demo": copy_run(DEMO, root / "demo", cache=False)}


def _run_cli(argv: list[str], capsys) -> tuple[int, str]:
    code, out, err = run_main(argv, capsys)
    return code, out + err


# ---------------------------------------------------------------------------- bad input to interp fork
FORK = ["fork", "{P}", "--steps", "5", "--out", "{T}/f", "--quiet"]
FORK_INPUT = [
    # (id, parent, extra argv, exit status, fragment); "{P}" is the parent, "{T}" a scratch folder
    ("at-tau-over-zero", "demo", ["--at", "tau/0"], 2, "tau/0"),  # was ZeroDivisionError
    ("at-tau-over-zero-float", "demo", ["--at", "tau/0.0"], 2, "tau/0.0"),
    ("at-empty", "run", ["--at", ""], 2, "--at"),  # wrote forks.json with "steps": [], then KeyError
    ("at-only-commas", "run", ["--at", " , "], 2, "--at"),
    ("arm-duplicate-key", "run", ["--at", "20", "--arm", "measured_noise:c=1,c=2"], 2, "c is given twice"),  # ran with c=2
    ("flag-lr", "run", ["--at", "20", "--lr", "0.1"], 2, "--arm lr:value=0.1"),  # only "unrecognized arguments"
    ("flag-lr-equals", "run", ["--at", "20", "--lr=0.1"], 2, "--arm lr:value=0.1"),
    ("flag-batch-size", "run", ["--at", "20", "--batch-size", "4"], 2, "--arm batch_size:value=4"),
    ("flag-weight-decay", "run", ["--at", "20", "--weight-decay", "0.5"], 2, "--arm weight_decay:value=0.5"),
    ("arm-lr-overflow", "run", ["--at", "20", "--arm", "lr:value=1e308"], 2, "float32"),  # trained, then "lr inf"
    ("arm-weight-decay-overflow", "run", ["--at", "20", "--arm", "weight_decay:value=1e39"], 2, "float32"),
    ("arm-lr-inf", "run", ["--at", "20", "--arm", "lr:value=inf"], 2, "finite"),
]


def _refused(parent: Path, argv: list[str], status: int, fragment: str, tmp_path: Path, capsys) -> None:
    scratch = tmp_path / "t"
    scratch.mkdir()
    saved = snapshot(parent, cache=False)
    code, text = _run_cli([a.replace("{P}", str(parent)).replace("{T}", str(scratch)) for a in argv], capsys)
    assert code == status, text[-2000:]
    assert "Traceback" not in text and fragment.lower() in text.lower(), text[-2000:]
    assert len(text.strip().splitlines()) == 1, text[-2000:]
    assert snapshot(parent, cache=False) == saved, "a refused fork changed its parent"
    assert not list(scratch.iterdir()), "a refused fork left a folder behind"


@pytest.mark.parametrize("case", FORK_INPUT, ids=lambda c: c[0])
def test_fork_input(case, parents, tmp_path, capsys):
    name, parent, extra, status, fragment = case
    _refused(parents[parent], FORK + extra, status, fragment, tmp_path, capsys)


# ---------------------------------------------------------------------------- forks that cannot run here
FAMILY = ["--arm", "minibatch,full_batch"]  # two arms: the family path (forks.json, then the fork folders)
CANNOT_RUN = [
    # (id, parent, extra argv, exit status, fragment, what the machine is made to lack)
    # far above D = 3000: the OOM killer ended it at 23.6 GB, leaving a folder with a .lock and no status
    ("batch-above-d", "demo", ["--at", "500", "--arm", "batch_size:value=999999"], 2, "D = 3000", None),
    ("batch-above-d-family", "demo", ["--at", "500", "--arm", "minibatch,batch_size:value=3001"], 2, "D = 3000", None),
    ("batch-beyond-memory", "demo", ["--at", "500", "--arm", "batch_size:value=3000"], 2, "GiB", "memory"),
    ("batch-beyond-memory-family", "demo", ["--at", "500", *FAMILY], 2, "GiB", "memory"),
    # refused (exit 2) only after writing the fork folder with a checkpoint and a resume state
    ("bf16-without-units", "bf16", ["--at", "10"], 2, "bfloat16", "bf16"),
    ("bf16-without-units-family", "bf16", ["--at", "10", *FAMILY], 2, "bfloat16", "bf16"),
]


@pytest.fixture(scope="module")
def bf16_parent(tmp_path_factory) -> Path:
    """A 20-step tiny run in bf16, trained where emulation is allowed."""
    from interp.precision import EMULATION_ENV
    from tests.helpers import TINY_FLAGS

    out = tmp_path_factory.mktemp("bf16-parent") / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(EMULATION_ENV, "1")
        assert main(["train", "--out", str(out), "--steps", "20", "--precision", "bf16", *TINY_FLAGS]) == 0
    return out


@pytest.mark.parametrize("case", CANNOT_RUN, ids=lambda c: c[0])
def test_fork_cannot_run_here(case, parents, bf16_parent, tmp_path, capsys, monkeypatch):
    """Every check first (the batch against D, the memory as `interp train` checks it, bfloat16 units), then writing."""
    name, parent, extra, status, fragment, lack = case
    if lack == "memory":
        monkeypatch.setattr("interp.devices.available_bytes", lambda device: 1 << 20)
    if lack == "bf16":
        from interp.precision import EMULATION_ENV

        monkeypatch.delenv(EMULATION_ENV, raising=False)
        monkeypatch.setattr("interp.precision.bf16_hardware", lambda device: (False, "no bfloat16 units (test)"))
    _refused(bf16_parent if parent == "bf16" else parents[parent], FORK + extra, status, fragment, tmp_path, capsys)


# ---------------------------------------------------------------------------- a family whose design is unusable
DESIGNS = [
    # (id, the "steps" forks.json is edited to hold, fragment naming what is wrong)
    ("steps-empty", [], "steps"),  # what `--at ""` left behind before it was refused
    ("steps-not-a-number", ["abc"], "'abc'"),  # TypeError in status, report and the card
    ("steps-not-a-list", "20", "steps"),
    ("steps-negative", [-20], "-20"),
]
COMMANDS = [
    ("fork-status", ["fork", "status", "{F}"]),
    ("fork-status-json", ["fork", "status", "{F}", "--json"]),
    ("report", ["report", "{F}", "-o", "{T}/report.html"]),
    ("mechanisms-cached", ["mechanisms", "{F}", "--cached"]),
]


def _family(parent: Path, folder: Path, steps) -> Path:
    """A family folder as a refused command (or a hand edit) left it: forks.json alone, its steps `steps`."""
    from interp.forks.arms import parse_arms
    from interp.forks.family import FAMILY_FILE, ForkFamily

    ForkFamily.create(parent, [20], parse_arms("minibatch"), [0], 5, folder)
    design = json.loads((folder / FAMILY_FILE).read_text())
    design["steps"] = steps
    (folder / FAMILY_FILE).write_text(json.dumps(design, indent=2))
    return folder


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("case", DESIGNS, ids=lambda c: c[0])
def test_family_design(case, command, parents, tmp_path, capsys):
    name, steps, fragment = case
    folder = _family(parents["run"], tmp_path / "fam", steps)
    scratch = tmp_path / "t"
    scratch.mkdir()
    saved = snapshot(folder)
    code, text = _run_cli([a.replace("{F}", str(folder)).replace("{T}", str(scratch)) for a in command[1]], capsys)
    assert code == 2, text[-2000:]
    assert "Traceback" not in text and fragment.lower() in text.lower() and "forks.json" in text, text[-2000:]
    assert len(text.strip().splitlines()) == 1, text[-2000:]
    assert snapshot(folder) == saved and not list(scratch.iterdir())


@pytest.mark.parametrize("case", DESIGNS, ids=lambda c: c[0])
def test_family_design_card(case, parents, tmp_path):
    """The notebook card never raises: it shows what is wrong with the design."""
    import interp
    from interp.forks.family import ForkFamily

    name, steps, fragment = case
    folder = _family(parents["run"], tmp_path / "fam", steps)
    for family in (ForkFamily.open(folder), interp.open(folder)):
        page = html.unescape(family._repr_html_())
        assert "problem" in page and fragment.lower() in page.lower() and "forks.json" in page, page
        assert "Traceback" not in page
