"""Issue 43's probe (round three), its messages and exit statuses, as tables beside test_adversarial.py and in its
style: a damaged run is damaged wherever it is read (named once, exit 1: `show`, `analyze`, `reconcile`,
`mechanisms`, `analyze SWEEP`, `ls`; cases 7, 9, 13, 19, 20), a folder of runs opened as a run points to the command
that shows it (16), and a warning is never a raw Python line (19). Each row failed before the fix.

Fixtures: `planted` is a copy of the session's 30-step tiny run whose metrics log is planted to reach tau_half at step
20 (as in test_adversarial_round3.py); `cut`, `emptied` and `deleted` copies of it whose metrics.jsonl lost its tail
(3 rows left), was emptied or deleted; `sweep` the tiny runs of seeds 0 and 1 as a sweep (their logs planted as `planted`'s);
`family` forks minibatch and full_batch of the tiny run at step 20 (5 steps: censored); `steps` minibatch forks of it
at steps 10 and 20 (one seed), their logs planted to reach tau_half at their last step. Each case works on a copy.
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


def _plant(run: Path, lc_over_logk: dict[int, float] = PLANTED) -> Path:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    log_k = math.log(Run.open(run).spec.task.k)
    (run / "metrics.jsonl").write_text("".join(json.dumps({**r, "loss_cand": lc_over_logk[r["step"]] * log_k}) + "\n"
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
    steps = ForkFamily.create(Run.open(tiny_run()), [10, 20], parse_arms("minibatch"), [0], 5, root / "steps")
    steps.train(workers=1, progress=False)
    for fork, first in (("at10-minibatch-s0", 10), ("at20-minibatch-s0", 20)):  # tau_half at the fork's last step
        _plant(steps.path / fork, {first: 1.0, first + 5: 0.45})
    made["steps"] = steps.path
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
         ["every full_batch and minibatch fork at fork step 20 is censored at its horizon"],
         ["CensoredRunsWarning", ".py:"]),
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


EDGES = ["analyze", "{F}", "--only", "edges", "--edge-method", "eap", "--n-pairs", "8"]
MESSAGES += [
    # 8: a raw allocator error (memory grows with ig-steps x n-pairs): now checked before any work
    Case("ig-steps-beyond-memory", "planted", ["analyze", "{F}", "--only", "edges", "--ig-steps", "100000000",
                                               "--n-pairs", "4", "--steps", "last"], 2,
         ["the edges analysis (eap-ig, 4 pairs x 100000000 interpolation steps) needs about", "lower --ig-steps"],
         one_line=True),
    Case("ig-steps-beyond-memory-sweep", "sweep", ["analyze", "{F}", "--only", "edges", "--ig-steps", "100000000",
                                                   "--quiet"], 2, ["needs about", "GiB"], one_line=True),
    # 10: the help said "one or more of" (refused): now "one of", and the refusal says why
    Case("edge-method-two", "planted", [*EDGES[:4], "--edge-method", "eap,eap-ig"], 2, ["takes one method"],
         one_line=True),
    # 11: options of analyses not asked for were ignored silently
    Case("option-not-asked-for", "planted", ["analyze", "{F}", "--only", "trajectory", "--steps", "last", "--ig-steps",
                                             "3", "--quiet"], 0, ["--ig-steps (of edges) ignored: not among --only "
                                                                  "trajectory"], once="ignored"),
    # 12: "(run: interp analyze SWEEP)", a placeholder never filled
    Case("sweep-edges-placeholder", "sweep", [*EDGES, "--steps", "last", "--quiet"], 0, ["(run: interp analyze {F})"],
         ["interp analyze SWEEP"]),
    Case("family-edges-placeholder", "steps", [*EDGES, "--steps", "last", "--quiet"], 0, ["(run: interp analyze {F})"],
         ["interp analyze SWEEP"]),
    # 15: argparse's "expected one argument", though negative numbers are read as values
    Case("gamma-window-negative", "planted", ["fork", "{F}", "--at", "20", "--arm", "minibatch,full_batch", "--steps",
                                              "5", "--gamma-every", "1", "--gamma-window", "-5:100", "--out", "{T}/f"], 2,
         ["--gamma-window '-5:100'", "0 <= A <= B"], ["expected one argument"], one_line=True),
    Case("gamma-window-negative-single", "planted", ["fork", "{F}", "--at", "20", "--steps", "5", "--gamma-every", "1",
                                                     "--gamma-window", "-5", "--out", "{T}/f"], 2,
         ["--gamma-window '-5'"], ["expected one argument"], one_line=True),
]


@pytest.mark.parametrize("case", MESSAGES, ids=lambda c: c.id)
def test_messages(case, sources, tmp_path, capsys):
    folder = copy_run(sources[case.fixture], tmp_path / "f")
    if case.mutate is not None:
        case.mutate(folder)
    scratch = tmp_path / "t"
    scratch.mkdir()
    saved, saved_all = snapshot(folder, cache=False), snapshot(folder)
    argv = [a.replace("{F}", str(folder)).replace("{P}", str(sources["planted"])).replace("{T}", str(scratch))
            for a in case.argv]
    code, out, err = run_main(argv, capsys)
    text = out + err
    assert code == case.code, f"exit {code}, expected {case.code}: {text[-3000:]}"
    assert "Traceback" not in text, text[-3000:]
    for fragment in case.says:
        assert fragment.replace("{F}", str(folder)) in text, (fragment, text[-3000:])
    for fragment in case.refuses:
        assert fragment not in text, (fragment, text[-3000:])
    if case.once is not None:
        lines = [line for line in text.splitlines() if case.once in line]
        assert len(lines) == 1, lines
    if case.one_line:
        assert len(err.strip().splitlines()) == 1 and (not out.strip() or "--json" in argv), text[-3000:]
    if case.untouched:  # a refusal (exit 2) writes nothing at all, not even a cache entry
        assert snapshot(folder, cache=code == 2) == (saved_all if code == 2 else saved), "the command changed the folder"
    assert not list(scratch.iterdir())


# ---------------------------------------------------------------------------- 18: what pairs at one K differ in
def _record(name: str, point: dict | None, seed: int = 0, k: int = 4) -> dict:
    """A run's overlap record (`edge_overlap.run_record`'s keys) with a circuit at tau."""
    out = {"run": name, "k": k, "seed": seed, "method": "eap", "tau": 20.0, "tau_step": 20, "size": 2, "faithfulness": 0.9,
           "circuit": frozenset({"embed->L0H0.v", "L0H0->logits"}), "steps_cached": 2, "n_checkpoints": 2,
           "routing_head": None, "routing_first": None, "strictly_first": None, "why": "no routing head",
           "why_undefined": None}
    return {**out, **({"point": point} if point is not None else {})}


OVERLAP_LABELS = [
    # (id, records, the label of the pairs at the same K); two forks of one seed at different fork steps were
    # "same K, across seeds"
    ("family-fork-steps", [_record("at10", {"step": 10, "arm": "minibatch", "seed": 0}),
                           _record("at20", {"step": 20, "arm": "minibatch", "seed": 0})], "same K, across fork steps"),
    ("family-arms", [_record("a", {"step": 10, "arm": "minibatch", "seed": 0}),
                     _record("b", {"step": 10, "arm": "full_batch", "seed": 0})], "same K, across arms"),
    ("sweep-seeds", [_record("s0", {"seed": 0}, 0), _record("s1", {"seed": 1}, 1)], "same K, across seeds"),
    ("sweep-lr-and-seeds", [_record("a", {"train.lr": 0.001, "seed": 0}), _record("b", {"train.lr": 0.003, "seed": 1})],
     "same K, across train.lr, seeds"),
    ("no-points", [_record("s0", None, 0), _record("s1", None, 1)], "same K, across seeds"),  # made without the sweep
]


@pytest.mark.parametrize("case", OVERLAP_LABELS, ids=lambda c: c[0])
def test_the_overlap_names_what_pairs_at_one_k_differ_in(case):
    from interp.sweeps.edge_overlap import summarise

    name, records, label = case
    lines = summarise(records).lines()
    (line,) = [ln for ln in lines if ln.startswith("circuit overlap at tau")]
    assert f"; {label} 1 [" in line and "across seeds" not in line.replace(label, ""), line


def test_a_familys_overlap_records_its_forks_points(sources, tmp_path, capsys):
    """The records `interp analyze FAMILY --only edges` summarises carry each fork's step, arm and seed."""
    from interp.forks.family import ForkFamily
    from interp.sweeps.edge_overlap import edge_overlap

    folder = copy_run(sources["steps"], tmp_path / "f")
    argv = [a.replace("{F}", str(folder)) for a in EDGES]
    assert run_main([*argv, "--steps", "last", "--quiet"], capsys)[0] == 0
    runs = edge_overlap(ForkFamily.open(folder)).runs.set_index("run")
    assert runs.loc["at10-minibatch-s0", "point"] == {"step": 10, "arm": "minibatch", "seed": 0}
    assert runs.loc["at20-minibatch-s0", "point"]["step"] == 20


# ---------------------------------------------------------------------------- 21: a folder marked as two kinds
def _both(sources: dict, root: Path, kinds: tuple[str, str]) -> Path:
    """A copy of the family or the sweep (or the planted run) with the other kind's file copied in beside its own."""
    files = {"family": "forks.json", "sweep": "sweep.json", "planted": "run.json"}
    folder = copy_run(sources[kinds[0]], root / "both")
    (folder / files[kinds[1]]).write_bytes((sources[kinds[1]] / files[kinds[1]]).read_bytes())
    return folder


@pytest.mark.parametrize("kinds", [("family", "sweep"), ("sweep", "family"), ("planted", "sweep"), ("family", "planted")],
                         ids=lambda k: "+".join(k))
def test_a_folder_of_two_kinds_is_refused_as_ambiguous(kinds, sources, tmp_path, capsys):
    """It opened silently as a ForkFamily (forks.json won over sweep.json, either over run.json)."""
    import interp
    from interp.errors import InterpError

    folder = _both(sources, tmp_path, kinds)
    saved = snapshot(folder)
    with pytest.raises(InterpError, match=r"holds both .*\.json and .*\.json: it is ambiguous"):
        interp.open(folder)
    for argv in (["analyze", str(folder), "--only", "sensitivity", "--quiet"], ["mechanisms", str(folder), "--cached"],
                 ["report", str(folder), "-o", str(tmp_path / "r.html")]):
        code, out, err = run_main(argv, capsys)
        assert code == 2 and "ambiguous" in err and len((out + err).strip().splitlines()) == 1, out + err
    assert snapshot(folder) == saved and not (tmp_path / "r.html").exists()


# ---------------------------------------------------------------------------- 10: --help
def test_the_help_says_one_of_where_one_is_taken(capsys):
    """--edge-method and --exact-edges said "one or more of" and refused two; --method takes several."""
    code, out, _ = run_main(["analyze", "--help"], capsys)
    text = " ".join(out.split())
    assert code == 0
    for flag, choices in (("--edge-method eap|eap-ig", "eap, eap-ig"), ("--exact-edges on|off", "on, off")):
        part = text[text.index(f"{flag} "):]
        assert f"; one of {choices}" in part[:200] and "one or more" not in part[:200], part[:200]
    part = text[text.index("--method M[,M...] "):]
    assert "; one or more of zero, mean, resample" in part[:200], part[:200]
