"""Every command the README, the docs and the report advertise runs as shown.

Each command block marked `<!-- commands -->` (the README's tour, docs/cli.md's reference, docs/tracking.md's)
runs top to bottom in a scratch folder of its own holding a copy of the demo, each command as written plus only
the budget flags that keep it short (fewer steps, a smaller probe, fewer SGLD draws): the flags a user would
change, never the command's shape.
The report's "compute it with" hints run the same way, after which the report draws those
sections. Every registry entry runs through `interp analyze --only NAME` at its default steps
(those the report does not start through its hint, the others in a test of their own).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from interp.analysis import registry
from interp.cli import main
from tests.helpers import DEMO, copy_run

ROOT = Path(__file__).resolve().parents[2]
# analysis options that shrink the work; every one is accepted by `interp analyze` whatever --only says
UPDATES_AT = 500  # the shipped demo keeps its optimizer state at this step (tau/2)
SMALL_ANALYSIS = ["--n-groups", "4", "--n-examples", "16", "--n-pairs", "8", "--chains", "1", "--draws", "4",
                  "--n-draws", "2"]


MARKER = "<!-- commands -->"


def command_files() -> list[str]:
    """The README and the docs files holding command blocks, relative to the repository."""
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [str(p.relative_to(ROOT)) for p in paths if MARKER in p.read_text()]


def commands_of(name: str) -> list[str]:
    """The `interp` lines of every command block of `name`, in order (comments cut)."""
    out = []
    for part in (ROOT / name).read_text().split(MARKER)[1:]:
        block = part.split("```", 2)[1]
        out += [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.startswith("interp ")]
    return out


def readme_commands() -> list[str]:
    return commands_of("README.md")


def budget(argv: list[str]) -> list[str]:
    """The command with the flags that keep it short on 2 cores (and without progress bars)."""
    command = argv[0]
    if command == "train":
        return argv + (["--quiet"] if "--resume" in argv else ["--steps", "20", "--quiet"])
    if command == "analyze":
        # `updates` at the demo's kept state only: its default steps (pre, mid, post) are replayed
        # from it or from step 0, which reproduces the checkpoints only on a CPU that rounds like
        # the one that trained the demo (tests/integration/test_forks.py tests replays)
        only = argv[argv.index("--only") + 1] if "--only" in argv[:-1] else None
        steps = ["--steps", str(UPDATES_AT)] if only == "updates" else []
        return argv + ["--quiet"] + SMALL_ANALYSIS + steps
    if command in ("report", "timeline"):
        return argv + ["--quiet"]
    if command == "sweep" and argv[1:2] != ["status"]:
        return argv + (["--steps", "20"] if "--preset" in argv else []) + ["--quiet"]
    if command == "fork" and argv[1:2] != ["status"]:
        return argv + ["--steps", "5", "--quiet"]  # the horizon (a full-batch step is 20 minibatch steps)
    return argv


def run_cli(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's usage errors
        return int(exc.code)


@pytest.fixture
def scratch(tmp_path, monkeypatch) -> Path:
    (tmp_path / "checkpoints").mkdir()
    copy_run(DEMO, tmp_path / "checkpoints" / "demo")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_readme_and_docs_list_the_commands_they_show():
    assert set(command_files()) >= {"README.md", "docs/cli.md", "docs/tracking.md"}
    tour = {c.split()[1] for c in readme_commands()}
    assert tour >= {"train", "analyze", "timeline", "report", "sweep", "fork", "reconcile", "export", "doctor"}
    assert any("--track" in c for c in readme_commands())
    reference = commands_of("docs/cli.md")
    assert len(reference) >= 15
    assert {c.split()[1] for c in reference} >= {"train", "show", "ls", "analyze", "report", "timeline", "sweep",
                                                 "scaling", "fork", "mechanisms", "reconcile", "export", "doctor"}


WRITES = {"README.md": ("report.html", "timeline.html", "sweep.html", "checkpoints/imported/run.json"),
          "docs/import.md": ("outputs/demo/config.yaml", "checkpoints/demo-again/metrics.jsonl"),
          "docs/cli.md": ("report.html", "timeline.html", "scaling.html"),
          "docs/tracking.md": ("checkpoints/demo/exports/tensorboard/demo", "exports/demo-wandb/wandb",
                               "checkpoints/tb-run/tensorboard", "checkpoints/wb-run/wandb")}


@pytest.mark.parametrize("name", command_files())
def test_every_command_runs_as_shown(name, scratch, capsys):
    failures = []
    for command in commands_of(name):
        argv = budget(command.split()[1:])
        code = run_cli(argv)
        out = capsys.readouterr()
        if code != 0:
            failures.append(f"{command}: exit {code}: {out.err.strip()[-300:]}")
    assert not failures, "\n".join(failures)
    for path in WRITES.get(name, ()):
        assert (scratch / path).exists(), path


def test_every_report_hint_runs_and_fills_its_section(scratch):
    from interp.report import write_report
    from interp.runs import Run

    run = Run.open("checkpoints/demo")
    text = write_report(run, scratch / "before.html").read_text()
    hints = sorted(set(html.unescape(h) for h in re.findall(r"compute it with: (interp [^<]+?)</p>", text)))
    pending = set(re.findall(r'class="pending" data-section="(\w+)"', text))
    assert hints and pending >= {"hessian", "anisotropy", "escape", "llc"}
    # the hints run every analysis the report does not start (at its default steps): the
    # parametrised test below covers the default ones
    asked = {h.split("--only ")[1].split()[0] for h in hints}
    assert asked == {name for name, e in registry.REGISTRY.items() if not e.default}
    for hint in hints:
        assert run_cli(budget(hint.split()[1:])) == 0, hint
    from interp.analysis.cache import ResultCache
    from interp.analysis.common import select_steps

    for name in asked:  # each ran at its default steps (updates: see budget)
        entry = registry.get(name)
        table = ResultCache(run).cached_any(entry.cache_key(entry.params()))[entry.table_names[0]]
        steps = [UPDATES_AT] if name == "updates" else entry.steps
        assert set(table["step"]) == {s for s, _ in select_steps(run, steps)}, name
    after = write_report(run, scratch / "after.html").read_text()
    assert not re.findall(r'class="pending"', after)
    for key in pending:
        assert f'id="fig-{key}"' in after, key


@pytest.mark.parametrize("name", registry.default_names())
def test_every_default_analysis_runs_at_its_default_steps(name, scratch, capsys):
    assert run_cli(["analyze", "checkpoints/demo", "--only", name, "--quiet", "--json"] + SMALL_ANALYSIS) == 0
    import json

    blob = json.loads(capsys.readouterr().out)
    entry = registry.get(name)
    for table in entry.table_names:
        assert blob["tables"][table], f"{name} produced no {table} rows"
    from interp.analysis.common import select_steps
    from interp.runs import Run

    expected = {s for s, _ in select_steps(Run.open("checkpoints/demo"), entry.steps, defaults=True)}
    assert {row["step"] for row in blob["tables"][entry.table_names[0]]} == expected
