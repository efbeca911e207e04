"""Issue 43's probe (round three), its messages and exit statuses, as tables beside test_adversarial.py and in its
style: a damaged run is damaged wherever it is read (named once, exit 1: `show`, `analyze`, `reconcile`,
`mechanisms`, `analyze SWEEP`, `ls`; cases 7, 9, 13, 19, 20), a folder of runs opened as a run points to the command
that shows it (16), and a warning is never a raw Python line (19). Each row failed before the fix.

Fixtures: `planted` is a copy of the session's 30-step tiny run whose metrics log is planted to reach tau_half at step
20 (as in test_adversarial_round3.py); `cut`, `emptied` and `deleted` copies of it whose metrics.jsonl lost its tail
(3 rows left), was emptied or deleted; `sweep` the tiny runs of seeds 0 and 1 as a sweep (their logs planted as `planted`'s);
`family` forks minibatch and full_batch of the tiny run at step 20 (5 steps: censored). Each case works on a copy.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from interp.runs import Run
from tests.helpers import copy_run, run_main, snapshot

PLANTED = {0: 1.0, 1: 1.0, 2: 1.0, 4: 1.0, 5: 1.0, 8: 1.0, 10: 1.0, 15: 1.0, 20: 0.45, 25: 0.2, 30: 0.04}  # Lc / log K
FULL, MINI = "at20-full_batch-s0", "at20-minibatch-s0"  # the family's forks


def _plant(run: Path) -> Path:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    log_k = math.log(Run.open(run).spec.task.k)
    (run / "metrics.jsonl").write_text("".join(json.dumps({**r, "loss_cand": PLANTED[r["step"]] * log_k}) + "\n"
                                               for r in rows))
    return run


def _cut(keep: int | None) -> Callable[[Path], None]:
    """The metrics log cut to its first `keep` rows (0: emptied; None: deleted); status.json and the manifest intact."""
    def mutate(run: Path) -> None:
        path = run / "metrics.jsonl"
        if keep is None:
            path.unlink()
            return
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(lines[:keep]))
    return mutate


@pytest.fixture(scope="module")
def sources(tmp_path_factory, tiny_run) -> dict[str, Path]:
    from interp.forks.arms import parse_arms
    from interp.forks.family import ForkFamily
    from interp.sweeps.sweep import Sweep, SweepSpec

    root = tmp_path_factory.mktemp("adversarial-messages")
    made = {"run": tiny_run(), "planted": _plant(copy_run(tiny_run(), root / "planted", cache=False))}
    for name, keep in (("cut", 3), ("emptied", 0), ("deleted", None)):
        made[name] = copy_run(made["planted"], root / name)
        _cut(keep)(made[name])
    sweep = Sweep.create(root / "sweep", SweepSpec(base=Run.open(tiny_run()).spec, grid=(("seed", (0, 1)),)))
    for (name, _, _), seed in zip(sweep.points(), (0, 1)):
        _plant(copy_run(tiny_run(seed), sweep.path / name, cache=False))
    assert set(sweep.table()["status"]) == {"done"}
    made["sweep"] = sweep.path
    family = ForkFamily.create(Run.open(tiny_run()), [20], parse_arms("minibatch,full_batch"), [0], 5, root / "family")
    family.train(workers=1, progress=False)
    assert set(family.table()["status"]) == {"done"}
    made["family"] = family.path
    return made


def _sweep_run(folder: Path, seed: int) -> Path:
    return next(p for p in sorted(folder.iterdir()) if p.is_dir() and p.name.endswith(f"-s{seed}"))


def _damage_sweep_run(folder: Path) -> None:
    _cut(3)(_sweep_run(folder, 0))


def _garbage_run_json(relpath: str) -> Callable[[Path], None]:
    return lambda folder: (folder / relpath / "run.json").write_text("{garbage")


@dataclass
class Case:
    id: str
    fixture: str
    argv: list[str]  # "{F}": the case's copy of the fixture; "{P}": the planted run (read only); "{T}": a scratch folder
    code: int
    says: list[str]  # fragments of stdout + stderr
    refuses: list[str] = field(default_factory=list)  # fragments that must not appear
    mutate: Callable[[Path], None] | None = None
    once: str | None = None  # a name that must appear in exactly one line of stdout + stderr
    one_line: bool = False  # stdout empty (or the JSON object alone) and one line on stderr
    untouched: bool = True


MESSAGES = [
    # 7: `interp show` of a damaged log exited 0 with tau_half = -
    Case("show-cut", "cut", ["show", "{F}"], 1, ["damaged run", "metrics.jsonl ends at step 2"], ["tau_half"],
         one_line=True),
    Case("show-emptied", "emptied", ["show", "{F}"], 1, ["metrics.jsonl has no rows"], ["tau_half"], one_line=True),
    Case("show-deleted", "deleted", ["show", "{F}"], 1, ["metrics.jsonl is missing"], ["tau_half"], one_line=True),
    Case("show-cut-json", "cut", ["show", "{F}", "--json"], 1, ['"status": "damaged"', "ends at step 2"], ["tau_half"]),
    Case("show-sound", "planted", ["show", "{F}"], 0, ["tau_half = 20"], ["damaged"]),
    # 20: "tau needs the candidate loss ... (direction 'bz_to_a' or no evaluations yet)" of a done, damaged run
    Case("analyze-emptied", "emptied", ["analyze", "{F}", "--only", "groups", "--quiet"], 1,
         ["damaged run", "metrics.jsonl has no rows"], ["no evaluations yet"], one_line=True),
    Case("analyze-cut", "cut", ["analyze", "{F}", "--only", "sensitivity", "--quiet", "--json"], 1,
         ["ends at step 2"], ["tables"], one_line=True),
    # 9: reconcile and mechanisms aborted with exit 2 and judged nothing; a deleted log "has no rows"
    Case("reconcile-run-and-damaged", "cut", ["reconcile", "{P}", "{F}", "--cached", "--quiet"], 1,
         ["reconciliation of", "damaged run or fork", "ends at step 2", "1 damaged run or fork(s) left out"],
         once="ends at step 2"),
    Case("reconcile-deleted", "deleted", ["reconcile", "{P}", "{F}", "--cached", "--quiet"], 1,
         ["metrics.jsonl is missing"], ["has no rows"]),
    Case("reconcile-damaged-alone", "cut", ["reconcile", "{F}", "--cached", "--quiet"], 1, ["ends at step 2"],
         one_line=True),
    Case("reconcile-damaged-json", "cut", ["reconcile", "{P}", "{F}", "--cached", "--json"], 1, ['"damaged": {"']),
    Case("mechanisms-damaged", "cut", ["mechanisms", "{F}", "--cached", "--quiet"], 1, ["damaged run", "ends at step 2"],
         ["consistent", "inconclusive"], one_line=True),
    # 13: a damaged run of a sweep left `interp analyze SWEEP` at exit 0
    Case("analyze-sweep-damaged", "sweep", ["analyze", "{F}", "--only", "sensitivity", "--quiet"], 1,
         ["damaged", "1 of 2 run(s) damaged"], mutate=_damage_sweep_run, once="metrics.jsonl ends at step 2"),
    Case("analyze-sweep-damaged-json", "sweep", ["analyze", "{F}", "--only", "sensitivity", "--json"], 1,
         ["damaged run"], mutate=_damage_sweep_run),
    # 19: each damaged fork named twice (a note on stdout, a line on stderr); a raw UserWarning with its file path
    Case("mechanisms-family-damaged", "family", ["mechanisms", "{F}", "--cached", "--quiet"], 1, [f"damaged fork: {FULL}"],
         ["UserWarning", ".py:"], mutate=lambda f: _cut(1)(f / FULL), once=f"{FULL}"),
    Case("mechanisms-family-censored", "family", ["mechanisms", "{F}", "--cached", "--quiet"], 0,
         ["note: fork comparison: 2 censored run(s)"], ["CensoredRunsWarning", ".py:"]),
    Case("reconcile-family-damaged", "family", ["reconcile", "{F}", "--cached", "--quiet"], 1,
         [f"damaged run or fork: {FULL}"], ["UserWarning"], mutate=lambda f: _cut(1)(f / FULL), once=f"{FULL}"),
    Case("ls-family-unreadable-fork", "family", ["ls", "{F}"], 1, [f"damaged run: {FULL}", "run.json is not valid JSON"],
         mutate=_garbage_run_json(FULL), once="run.json is not valid JSON"),
    # 16: "not a run folder (it has no run.json)", without a word of what it is
    Case("show-family", "family", ["show", "{F}"], 2, ["is a fork family, not a run folder", "interp fork status"],
         one_line=True),
    Case("show-sweep", "sweep", ["show", "{F}"], 2, ["is a sweep, not a run folder", "interp sweep status"],
         one_line=True),
    Case("timeline-family", "family", ["timeline", "{F}", "-o", "{T}/t.html", "--quiet"], 2, ["interp fork status"],
         one_line=True),
]


@pytest.mark.parametrize("case", MESSAGES, ids=lambda c: c.id)
def test_messages(case, sources, tmp_path, capsys):
    folder = copy_run(sources[case.fixture], tmp_path / "f")
    if case.mutate is not None:
        case.mutate(folder)
    scratch = tmp_path / "t"
    scratch.mkdir()
    saved = snapshot(folder, cache=False)
    argv = [a.replace("{F}", str(folder)).replace("{P}", str(sources["planted"])).replace("{T}", str(scratch))
            for a in case.argv]
    code, out, err = run_main(argv, capsys)
    text = out + err
    assert code == case.code, f"exit {code}, expected {case.code}: {text[-3000:]}"
    assert "Traceback" not in text, text[-3000:]
    for fragment in case.says:
        assert fragment in text, (fragment, text[-3000:])
    for fragment in case.refuses:
        assert fragment not in text, (fragment, text[-3000:])
    if case.once is not None:
        lines = [line for line in text.splitlines() if case.once in line]
        assert len(lines) == 1, lines
    if case.one_line:
        assert len(err.strip().splitlines()) == 1 and (not out.strip() or "--json" in argv), text[-3000:]
    if case.untouched:
        assert snapshot(folder, cache=False) == saved, "the command changed the saved files"
    assert not list(scratch.iterdir())
