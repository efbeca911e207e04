"""Issue 30's damage cases as tables, beside test_adversarial.py and in its style: a run or fork whose
metrics.jsonl lost its tail is damaged (named, left out of fits and verdicts, exit status 1), never
censored; a damaged analysis-cache entry is named as damaged wherever it is read (the notebook card,
`interp mechanisms`, the sweep's circuit columns), never passed off as "not analysed" or "save
checkpoints more densely", and a recomputed one is warned about.

Fixtures: `sweep` is two runs of a small model that snaps (seeds 0 and 1, tau_half near 100, the
optimizer states kept), `run` its first run with the circuit analyses cached (groups among them),
`family` two forks of that run at step 50 (minibatch and full_batch, 30 steps). Each case works on
its own copy; training and analysis take under a minute of CPU once per module.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from interp.cli import main
from tests.helpers import copy_run, edit_cached_table, snapshot

pytestmark = pytest.mark.slow  # a sweep, its analysis and a family (8 s) under every case: the slow tier's

S0, S1 = "k3-nb24-s0", "k3-nb24-s1"  # the sweep's runs
FULL, MINI = "at50-full_batch-s0", "at50-minibatch-s0"  # the family's forks
# the small, fast-snapping model of tests/integration/test_analyze_sweep.py, its optimizer states kept
SNAPS = ["--preset", "tiny", "--k", "3", "--n-bases", "24", "--n-layers", "2", "--n-heads", "2", "--d-model", "32",
         "--d-head", "16", "--d-mlp", "64", "--batch-size", "16", "--lr", "0.003", "--eval-every", "10",
         "--eval-size", "64", "--checkpoint-every", "50", "--steps", "400", "--stop-after-snap", "30",
         "--save-optimizer", "true", "--quiet"]


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("adversarial-damage")
    sweep, family = root / "sweep", root / "family"
    assert main(["sweep", *SNAPS, "--grid", "seed=0,1", "--out", str(sweep), "--workers", "1",
                 "--threads-per-run", "1"]) == 0
    assert main(["analyze", str(sweep / S0), "--only", "circuits", "--quiet"]) == 0
    assert main(["fork", str(sweep / S0), "--at", "50", "--arm", "minibatch,full_batch", "--steps", "30",
                 "--out", str(family), "--quiet"]) == 0
    return {"sweep": sweep, "run": sweep / S0, "family": family}


def _cli(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


# ---------------------------------------------------------------------------- mutations
def _lose_tail(relpath: str, keep: int = 2) -> Callable[[Path], None]:
    """The log cut after its first `keep` rows (the issue's reproduction), status.json and manifest.json intact."""
    def mutate(folder: Path) -> None:
        path = folder / relpath / "metrics.jsonl"
        lines = path.read_text().splitlines()
        path.write_text("\n".join(lines[:keep]) + "\n")
    return mutate


def _write(relpath: str, data: bytes) -> Callable[[Path], None]:
    return lambda folder: (folder / relpath).write_bytes(data)


def _cache_file(folder: Path, analysis: str, step: int) -> Path:
    (path,) = (folder / "cache" / analysis).glob(f"*/step_{step:07d}.json")
    return path


def _damage_entry(relpath: str, analysis: str, step: int) -> Callable[[Path], None]:
    """A value inside a cached table changed (the file stays valid JSON, its content hash does not match)."""
    def edit(df) -> None:
        column = next(c for c in df.columns if df[c].dtype.kind == "f")
        df.loc[df.index[0], column] = 0.999 if df.loc[df.index[0], column] != 0.999 else 0.5
    return lambda folder: edit_cached_table(_cache_file(folder / relpath, analysis, step), edit)


# ---------------------------------------------------------------------------- checks on the result
def _sweep_rows_say_damaged(folder: Path, out: str, err: str) -> None:
    rows = {r["run"]: r for r in json.loads(out)}
    assert rows[S0]["status"] == "damaged" and "metrics.jsonl" in rows[S0]["error"]
    assert rows[S0]["tau_half"] is None and not rows[S0]["censored_tau_half"]
    assert rows[S1]["status"] == "done"


def _family_rows_say_damaged(folder: Path, out: str, err: str) -> None:
    rows = {r["run"]: r for r in json.loads(out)["table"]}
    assert rows[FULL]["status"] == "damaged" and "metrics.jsonl" in rows[FULL]["error"]
    assert not rows[FULL]["censored_escape_half"] and rows[FULL]["escape_half"] is None
    assert rows[MINI]["status"] == "done"


def _status_line_of(name: str) -> Callable[[Path, str, str], None]:
    def check(folder: Path, out: str, err: str) -> None:
        (line,) = [ln for ln in out.splitlines() if ln.startswith(name)]
        assert "damaged" in line and ">" not in line.split("damaged")[1].split("error")[0], line
    return check


def _no_verdict_from(name: str) -> Callable[[Path, str, str], None]:
    def check(folder: Path, out: str, err: str) -> None:
        table = json.loads(out)
        assert any(name in n and "damaged" in n for n in table["notes"]), table["notes"]
        for row in table["rows"]:
            assert name not in row["detail"], row
    return check


@dataclass
class Case:
    id: str
    fixture: str  # sweep, run, family
    argv: list[str]  # "{F}": the case's copy of the fixture; "{P}": the family's parent (read only)
    code: int
    says: list[str]  # fragments of stderr + stdout, matched case-insensitively
    mutate: Callable[[Path], None]
    check: Callable[[Path, str, str], None] | None = None
    refuses: list[str] = field(default_factory=list)  # fragments that must NOT appear
    untouched: bool = True  # the folder byte-for-byte as before (caches aside)


DAMAGE = [
    # 1: a log that lost its tail is damage, not censoring (status.json and the manifest say step 190 or 80)
    Case("sweep-status-lost-tail", "sweep", ["sweep", "status", "{F}"], 1, [S0, "metrics.jsonl", "damaged"],
         _lose_tail(S0), check=_status_line_of(S0)),
    Case("sweep-status-json-lost-tail", "sweep", ["sweep", "status", "{F}", "--json"], 1, [S0, "metrics.jsonl"],
         _lose_tail(S0), check=_sweep_rows_say_damaged),
    Case("fork-status-lost-tail", "family", ["fork", "status", "{F}"], 1, [FULL, "damaged"],
         _lose_tail(FULL), check=_status_line_of(FULL)),
    Case("fork-status-json-lost-tail", "family", ["fork", "status", "{F}", "--json"], 1, [FULL, "metrics.jsonl"],
         _lose_tail(FULL), check=_family_rows_say_damaged),
    # the one fork's command again (a finished fork is kept): its status line
    Case("fork-single-lost-tail", "family", ["fork", "{P}", "--at", "50", "--arm", "full_batch", "--steps", "30",
                                             "--out", f"{{F}}/{FULL}", "--quiet"], 1,
         ["metrics.jsonl", "damaged"], _lose_tail(FULL), refuses=["censored"]),
    Case("mechanisms-family-lost-tail", "family", ["mechanisms", "{F}", "--cached", "--json"], 1,
         [FULL, "metrics.jsonl"], _lose_tail(FULL), check=_no_verdict_from(FULL)),
    Case("mechanisms-sweep-lost-tail", "sweep", ["mechanisms", "{F}", "--cached", "--json"], 1,
         [S0, "metrics.jsonl"], _lose_tail(S0), check=_no_verdict_from(S0), refuses=["not done"]),
    # a lone damaged run: named in one line, exit 1 as a sweep's damaged run (issue 43, 9: it was exit 2, bad input)
    Case("mechanisms-run-lost-tail", "run", ["mechanisms", "{F}", "--cached"], 1, ["metrics.jsonl", "step 190"],
         _lose_tail("."), refuses=["consistent", "inconclusive"]),
    # 17: a damaged run of a sweep, a damaged fork of a family: named, left out, exit status 1
    Case("mechanisms-sweep-damaged-runjson", "sweep", ["mechanisms", "{F}", "--cached", "--json"], 1,
         [S0, "run.json"], _write(f"{S0}/run.json", b"{garbage"), check=_no_verdict_from(S0),
         refuses=["not done"]),
    Case("mechanisms-sweep-damaged-text", "sweep", ["mechanisms", "{F}", "--cached"], 1,
         [f"damaged run: {S0}", "run.json"], _write(f"{S0}/run.json", b"{garbage"), refuses=["not done"]),
    Case("mechanisms-family-damaged-runjson", "family", ["mechanisms", "{F}", "--cached", "--json"], 1,
         [FULL, "run.json"], _write(f"{FULL}/run.json", b"{garbage"), check=_no_verdict_from(FULL)),
    # 15: a damaged cache entry at tau/2 (step 50, saved) is named, never "save checkpoints more densely"
    Case("mechanisms-run-cached-damaged-entry", "run", ["mechanisms", "{F}", "--cached"], 0,
         ["step_0000050.json", "damaged", "interp mechanisms"], _damage_entry(".", "groups", 50),
         refuses=["more densely"]),
]


def _prepare(case: Case, sources: dict, tmp_path: Path) -> Path:
    folder = tmp_path / "f"
    copy_run(sources[case.fixture], folder)
    case.mutate(folder)
    return folder


@pytest.mark.parametrize("case", DAMAGE, ids=lambda c: c.id)
def test_damage(case, sources, tmp_path, capsys):
    folder = _prepare(case, sources, tmp_path)
    saved = snapshot(folder, cache=False)
    code, out, err = _cli(capsys, [a.replace("{F}", str(folder)).replace("{P}", str(sources["run"])) for a in case.argv])
    text = (out + err).lower()
    assert code == case.code, f"exit {code}, expected {case.code}: {(out + err)[-3000:]}"
    assert "traceback" not in text, err[-3000:]
    for fragment in case.says:
        assert fragment.lower() in text, f"{fragment!r} not said: {(out + err)[-3000:]}"
    for fragment in case.refuses:
        assert fragment.lower() not in text, f"{fragment!r} was said: {(out + err)[-3000:]}"
    if case.untouched:
        assert snapshot(folder, cache=False) == saved, "the command changed the saved files"
    if case.check:
        case.check(folder, out, err)


# ---------------------------------------------------------------------------- the tables and the card
def test_a_lost_tail_is_damaged_in_the_circuit_columns_never_censored(sources, tmp_path):
    """1: the sweep's table (circuits too) says damaged and names the log; no censoring, no measure from it."""
    from interp.sweeps.sweep import Sweep

    folder = _prepare(Case("", "sweep", [], 0, [], _lose_tail(S0)), sources, tmp_path)
    row = Sweep.open(folder).table(circuits=True).set_index("run").loc[S0]
    assert row["status"] == "damaged" and "metrics.jsonl" in row["error"]
    assert not row["censored"] and not row["censored_tau_half"]
    assert "censored" not in str(row["circuits_reason"]) and "damaged" in str(row["circuits_reason"])


@pytest.mark.parametrize("analysis,step", [("sensitivity", 190), ("usage", 100)])
def test_the_circuit_columns_call_a_damaged_entry_damaged(analysis, step, sources, tmp_path):
    """16: a damaged entry is named as damaged (with its file), not "not analysed"."""
    from interp.sweeps.sweep import Sweep

    folder = _prepare(Case("", "sweep", [], 0, [], _damage_entry(S0, analysis, step)), sources, tmp_path)
    row = Sweep.open(folder).table(circuits=True).set_index("run").loc[S0]
    reason = str(row["circuits_reason"])
    assert "damaged" in reason and f"step_{step:07d}.json" in reason, reason
    assert "not analysed" not in reason, reason
    assert "interp analyze" in reason, reason  # how to recompute it


def test_the_card_names_a_damaged_last_sensitivity_entry(sources, tmp_path):
    """3: the card never shows the routing head of another step as if it were the last one's."""
    folder = _prepare(Case("", "run", [], 0, [], _damage_entry(".", "sensitivity", 190)), sources, tmp_path)
    from interp.runs import Run

    page = html.unescape(Run.open(folder)._repr_html_())
    assert "step_0000190.json" in page and "damaged" in page, page
    assert "z-share" not in page, page  # was "L1H0 (z-share ... at step 160, from the cached sensitivity analysis)"
    assert "Traceback" not in page


def test_mechanisms_warns_once_when_it_recomputes_a_damaged_entry(sources, tmp_path, capsys):
    """15: without --cached the damaged entry is recomputed, and stderr says so in one line."""
    folder = _prepare(Case("", "run", [], 0, [], lambda f: None), sources, tmp_path)
    code, before, _ = _cli(capsys, ["mechanisms", str(folder), "--json", "--cached"])
    assert code == 0
    _damage_entry(".", "groups", 50)(folder)
    code, out, err = _cli(capsys, ["mechanisms", str(folder), "--json", "--quiet"])
    assert code == 0 and "traceback" not in err.lower()
    lines = [ln for ln in err.splitlines() if "step_0000050.json" in ln]
    assert len(lines) == 1 and "recomputed" in lines[0] and lines[0].startswith("interp: warning:"), err
    coverage = lambda text: next(r for r in json.loads(text)["rows"] if r["key"] == "coverage")  # noqa: E731
    assert coverage(out)["value"] == coverage(before)["value"] and coverage(out)["verdict"] != "not measured"
