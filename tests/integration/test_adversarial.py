"""The adversarial probe as tables: bad input, corruption, interruption, concurrency.

One parametrised test per area; each row is one case a demanding user tried (issue 15's probe
and the ones before it). A case passes when the command ends as the row says (exit status,
a fragment of its message naming what was wrong, no traceback), leaves what was saved
untouched where it refused, and never gives a silently wrong result. The next probe starts
from these tables: add a row, not a new test.

Fixtures: `run` is a 30-step run of a tiny model (checkpoints at 0, 1, 2, 4, 8, 10, 20, 30),
`run1` the same with seed 1, `sweep` two such runs (seeds 0 and 1), `demo` a copy of the
shipped demo run. Each case works on its own copy.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from interp.cli import main
from interp.runs import Run
from tests.helpers import DEMO, TINY_FLAGS, copy_run, edit_cached_table, garbage_line, interp_cli, snapshot

S0, S1 = "k4-nb24-s0", "k4-nb24-s1"  # the sweep's run folders
ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}


# ---------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def sources(tmp_path_factory, tiny_run) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("adversarial")
    made = {"run": tiny_run(), "run1": tiny_run(1), "sweep": root / "sweep", "demo": root / "demo"}
    assert main(["sweep", "--out", str(made["sweep"]), "--steps", "30", "--grid", "seed=0,1", *TINY_FLAGS]) == 0
    copy_run(DEMO, made["demo"])
    return made


def _cli(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


# ---------------------------------------------------------------------------- mutations
def _json_edit(relpath: str, edit: Callable[[dict], None]) -> Callable[[Path], None]:
    def mutate(folder: Path) -> None:
        path = folder / relpath
        blob = json.loads(path.read_text())
        edit(blob)
        path.write_text(json.dumps(blob, indent=2))
    return mutate


def _write(relpath: str, data: bytes) -> Callable[[Path], None]:
    def mutate(folder: Path) -> None:
        (folder / relpath).write_bytes(data)
    return mutate


def _flip_byte(relpath: str) -> Callable[[Path], None]:
    def mutate(folder: Path) -> None:
        path = folder / relpath
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    return mutate


def _remove(relpath: str) -> Callable[[Path], None]:
    return lambda folder: (folder / relpath).unlink()


def _cache_file(folder: Path, analysis: str, step: int) -> Path:
    (path,) = (folder / "cache" / analysis).glob(f"*/step_{step:07d}.json")
    return path


def _edit_cached_table(analysis: str, step: int, edit: Callable) -> Callable[[Path], None]:
    """Change values inside a cached table (as a hand edit or a bad disk would), keeping the file valid JSON."""
    return lambda folder: edit_cached_table(_cache_file(folder, analysis, step), edit)


def _flip_ablation_digit(df) -> None:
    i = ((df["method"] == "zero") & (df["component"] == "L0H3")).idxmax()
    text = f"{df.loc[i, 'delta_loss_cand']:.6f}"
    digit = text[0] if text[0] != "-" else text[1]
    df.loc[i, "delta_loss_cand"] = float(text.replace(digit, str((int(digit) + 8) % 10), 1))


def _raise_z_share(df) -> None:
    df.loc[df.index[0], "z_share"] = 0.999  # L0H0 would become the routing head


def _replace_cache_by_file(folder: Path) -> None:
    shutil.rmtree(folder / "cache", ignore_errors=True)
    (folder / "cache").write_text("not a folder")


def _copy_from(source: str, relpath: str) -> Callable[[Path, dict], None]:
    def mutate(folder: Path, sources: dict) -> None:
        shutil.copy2(sources[source] / relpath, folder / relpath)
    mutate.needs_sources = True
    return mutate


def _stale_tmp(folder: Path) -> None:
    (folder / ".resume.safetensors.k2j4x9.tmp").write_bytes(os.urandom(1 << 22))


# ---------------------------------------------------------------------------- checks on the result
def _json_out(out: str) -> dict:
    return json.loads(out)


def _same_ablation_as_before(folder: Path, out: str, before: dict) -> None:
    rows = _json_out(out)["tables"]["ablation"]
    row = next(r for r in rows if r["method"] == "zero" and r["component"] == "L0H3" and r["step"] == 900)
    assert row["delta_loss_cand"] == pytest.approx(before["delta_loss_cand"], rel=1e-9)


def _same_routing_head_as_before(folder: Path, out: str, before: dict) -> None:
    assert _json_out(out)["findings"]["routing_head"] == before["routing_head"]


def _all_steps_analysed(folder: Path, out: str, before: dict) -> None:
    steps = {r["step"] for r in _json_out(out)["tables"]["sensitivity"]}
    assert steps == set(Run.open(folder).steps)


def _all_but_the_last_step(folder: Path, out: str, before: dict) -> None:
    found = _json_out(out)
    steps = {r["step"] for r in found["tables"]["sensitivity"]}
    assert steps == set(Run.open(folder).steps) - {30}
    assert {r["step"] for r in found["tables"]["usage"]} <= steps
    assert found["findings"].get("routing_head"), "the routing head comes from the last readable step"


def _no_tmp_left(folder: Path, out: str, before: dict) -> None:
    assert not list(folder.glob(".*.tmp")) and not list((folder / "checkpoints").glob(".*.tmp"))
    assert Run.open(folder).status["state"] == "done"


def _rows_say(folder: Path, out: str, before: dict) -> None:
    rows = {r["run"]: r for r in json.loads(out)}
    assert rows[S0]["status"] == "damaged" and rows[S1]["status"] == "done"


def _lr_is_not_the_edited_one(folder: Path, out: str, before: dict) -> None:
    rows = json.loads(out)
    assert all(r["status"] == "damaged" for r in rows)
    assert not any(r.get("lr") == 0.005 for r in rows), "a damaged run shows what sweep.json claims"


def _sweep_others_done(folder: Path, out: str, before: dict) -> None:
    assert (Run.open(folder / S1).status or {}).get("state") == "done"


@dataclass
class Case:
    id: str
    fixture: str  # run, sweep, demo
    argv: list[str]  # "{F}": the case's copy of the fixture; "{T}": a scratch folder
    code: int
    says: str  # a fragment of stderr + stdout, matched case-insensitively ("" for none)
    mutate: Callable | None = None
    prepare: list[str] | None = None  # a command run before the mutation (e.g. to fill the cache)
    remember: Callable[[str], dict] | None = None  # what `prepare` printed that the check compares with
    untouched: bool = True  # the folder is byte-for-byte as before (cache and lock aside)
    check: Callable[[Path, str, dict], None] | None = None
    refuses: list[str] = field(default_factory=list)  # fragments that must NOT appear


def _ablation_before(out: str) -> dict:
    rows = _json_out(out)["tables"]["ablation"]
    return next(r for r in rows if r["method"] == "zero" and r["component"] == "L0H3" and r["step"] == 900)


def _routing_before(out: str) -> dict:
    return {"routing_head": _json_out(out)["findings"]["routing_head"]}


DEMO_LAST = 1625
CORRUPTION = [
    # 1: a damaged cache entry is recomputed and named, never used
    Case("cache-digit-flip", "demo", ["analyze", "{F}", "--only", "ablation", "--steps", "900", "--json"], 0,
         "step_0000900.json", prepare=["analyze", "{F}", "--only", "ablation", "--steps", "900", "--json"],
         remember=_ablation_before, mutate=_edit_cached_table("ablation", 900, _flip_ablation_digit),
         check=_same_ablation_as_before),
    Case("cache-zshare-edit", "demo", ["analyze", "{F}", "--only", "sensitivity", "--steps", str(DEMO_LAST), "--json"],
         0, f"step_{DEMO_LAST:07d}.json",
         prepare=["analyze", "{F}", "--only", "sensitivity", "--steps", str(DEMO_LAST), "--json"],
         remember=_routing_before, mutate=_edit_cached_table("sensitivity", DEMO_LAST, _raise_z_share),
         check=_same_routing_head_as_before),
    Case("cache-file-truncated", "run", ["analyze", "{F}", "--only", "sensitivity", "--json"], 0, "step_0000020.json",
         prepare=["analyze", "{F}", "--only", "sensitivity", "--quiet"],
         mutate=lambda f: _cache_file(f, "sensitivity", 20).write_text('{"analysis": "sensi'),
         check=_all_steps_analysed),
    Case("cache-folder-is-file", "run", ["analyze", "{F}", "--only", "sensitivity", "--json"], 0, "cache",
         mutate=_replace_cache_by_file, check=_all_steps_analysed),
    # 2: another run's resume state
    Case("resume-other-run", "run", ["train", "--resume", "--out", "{F}", "--steps", "33", "--quiet"], 2,
         "resume.safetensors", mutate=_copy_from("run1", "resume.safetensors")),
    # 3: edited run.json / sweep.json
    Case("runjson-edited-k", "run", ["show", "{F}"], 2, "run.json",
         mutate=_json_edit("run.json", lambda b: b["spec"]["task"].update(k=5))),
    Case("runjson-edited-seed-resume", "run", ["train", "--resume", "--out", "{F}", "--steps", "33", "--quiet"], 2,
         "run.json", mutate=_json_edit("run.json", lambda b: b.update(spec={**b["spec"], "seed": 1})),
         refuses=["task generator changed"]),
    Case("runjson-edited-lr-analyze", "run", ["analyze", "{F}", "--only", "sensitivity", "--quiet"], 2, "run.json",
         mutate=_json_edit("run.json", lambda b: b["spec"]["train"].update(lr=0.5))),
    Case("sweepjson-edited-lr", "sweep", ["sweep", "{F}", "--quiet"], 1, "train.lr",
         mutate=_json_edit("sweep.json", lambda b: b["base"]["train"].update(lr=0.005)),
         refuses=["2 of 2 runs done"]),
    Case("sweepjson-edited-lr-status", "sweep", ["sweep", "status", "{F}", "--json"], 1, "",
         mutate=_json_edit("sweep.json", lambda b: b["base"]["train"].update(lr=0.005)),
         check=_lr_is_not_the_edited_one),
    # 4: a bad last checkpoint spares the others; the routing head comes from the last readable step
    Case("last-checkpoint-flipped", "run", ["analyze", "{F}", "--only", "sensitivity,usage", "--json"], 1,
         "step_0000030.safetensors", mutate=_flip_byte("checkpoints/step_0000030.safetensors"),
         check=_all_but_the_last_step),
    # 5: one damaged run of a sweep is a row, the others go on
    Case("sweep-damaged-runjson", "sweep", ["sweep", "status", "{F}", "--json"], 1, "",
         mutate=_write(f"{S0}/run.json", b"{garbage"), check=_rows_say),
    Case("sweep-damaged-status", "sweep", ["sweep", "{F}", "--quiet"], 1, "damaged",
         mutate=_write(f"{S0}/status.json", b"\x00\x01garbage"), check=_sweep_others_done),
    Case("sweep-damaged-manifest", "sweep", ["scaling", "{F}"], 1, "damaged",
         mutate=_write(f"{S0}/manifest.json", b'{"format": 1, "checkpoints": {"0": {}}}')),
    Case("sweep-damaged-metrics", "sweep", ["sweep", "status", "{F}", "--json"], 1, "",
         mutate=lambda f: garbage_line(f / S0 / "metrics.jsonl", 3), check=_rows_say),
    Case("sweep-damaged-report", "sweep", ["report", "{F}", "-o", "{T}/s.html", "--quiet"], 1, "damaged",
         mutate=_write(f"{S0}/run.json", b"{garbage"), untouched=True),
    # 8 and the smaller ones: a failed resume touches nothing
    Case("resume-bad-metrics", "run", ["train", "--resume", "--out", "{F}", "--steps", "50", "--quiet"], 2,
         "metrics.jsonl", mutate=lambda f: garbage_line(f / "metrics.jsonl", 3)),
    Case("resume-missing", "run", ["train", "--resume", "--out", "{F}", "--steps", "50", "--quiet"], 2,
         "resume.safetensors", mutate=_remove("resume.safetensors")),
    Case("metrics-missing", "run", ["train", "--resume", "--out", "{F}", "--steps", "50", "--quiet"], 2,
         "metrics.jsonl", mutate=_remove("metrics.jsonl")),
    Case("resume-checkpoint-missing", "run", ["train", "--resume", "--out", "{F}", "--steps", "50", "--quiet"], 2,
         "step_0000030", mutate=_remove("checkpoints/step_0000030.safetensors")),
    Case("resume-damaged-manifest", "run", ["train", "--resume", "--out", "{F}", "--steps", "50", "--quiet"], 2,
         "manifest.json", mutate=_write("manifest.json", b"[1, 2")),
    Case("stale-resume-tmp", "run", ["train", "--resume", "--out", "{F}", "--steps", "33", "--quiet"], 0, "",
         mutate=_stale_tmp, untouched=False, check=_no_tmp_left),
]


def _prepare(case: Case, sources: dict, tmp_path: Path, capsys) -> tuple[Path, Path, dict]:
    folder = tmp_path / "f"
    copy_run(sources[case.fixture], folder)
    scratch = tmp_path / "t"
    scratch.mkdir()
    fill = lambda argv: [a.replace("{F}", str(folder)).replace("{T}", str(scratch)) for a in argv]  # noqa: E731
    before: dict = {}
    if case.prepare:
        code, out, _ = _cli(capsys, fill(case.prepare))
        assert code == 0
        if case.remember:
            before = case.remember(out)
    if case.mutate is not None:
        if getattr(case.mutate, "needs_sources", False):
            case.mutate(folder, sources)
        else:
            case.mutate(folder)
    return folder, scratch, before


def _expect(case: Case, code: int, out: str, err: str) -> None:
    text = (out + err).lower()
    assert code == case.code, f"exit {code}, expected {case.code}: {err[-1500:]}"
    assert "traceback" not in text, err[-3000:]
    assert case.says.lower() in text, f"{case.says!r} not said: {err[-1500:]}"
    for fragment in case.refuses:
        assert fragment.lower() not in text, f"{fragment!r} was said: {(out + err)[-1500:]}"


def _slow(cases: list, slow: set[str], name=lambda c: c[0]) -> list:
    """`cases` with the named ones marked slow (out of the default run; `pytest -m slow`)."""
    return [pytest.param(c, marks=pytest.mark.slow) if name(c) in slow else c for c in cases]


@pytest.mark.parametrize("case", _slow(CORRUPTION, {"cache-digit-flip"}, lambda c: c.id), ids=lambda c: c.id)
def test_corruption(case, sources, tmp_path, capsys):
    folder, scratch, before = _prepare(case, sources, tmp_path, capsys)
    saved = snapshot(folder, cache=False)
    argv = [a.replace("{F}", str(folder)).replace("{T}", str(scratch)) for a in case.argv]
    code, out, err = _cli(capsys, argv)
    _expect(case, code, out, err)
    if case.untouched:
        assert snapshot(folder, cache=False) == saved, "a refused command changed the saved files"
    if case.check:
        case.check(folder, out, before)


# ---------------------------------------------------------------------------- bad input
BAD_INPUT = [
    # (id, argv, exit status, fragment[, what it may leave]); "{R}" is a copy of the run, "{T}" a scratch folder
    ("lr-negative", ["train", "--out", "{T}/x", "--lr", "-1e-3", *TINY_FLAGS], 2, "lr"),
    ("lr-nan", ["train", "--out", "{T}/x", "--lr", "nan", *TINY_FLAGS], 2, "lr must be a finite number"),
    ("k-zero", ["train", "--out", "{T}/x", "--k", "0", "--steps", "3"], 2, "k"),
    ("out-empty", ["train", "--out", "", *TINY_FLAGS], 2, "non-empty"),
    ("out-is-a-run", ["train", "--out", "{R}", *TINY_FLAGS], 2, "already holds a run"),
    ("resume-steps-back", ["train", "--resume", "--out", "{R}", "--steps", "20", "--quiet"], 2, "already reached"),
    ("resume-other-lr", ["train", "--resume", "--out", "{R}", "--lr", "0.1", "--quiet"], 2, "only --steps"),
    ("ls-empty", ["ls", ""], 2, "non-empty"),
    ("ls-missing", ["ls", "{T}/nothing"], 2, "no folder"),
    ("show-missing", ["show", "{T}/nothing"], 2, "no run folder"),
    ("heads-unknown", ["analyze", "{R}", "--only", "llc", "--heads", "L7H9"], 2, "L7H9"),
    ("heads-garbage", ["analyze", "{R}", "--heads", "head3"], 2, "heads"),
    ("only-unknown", ["analyze", "{R}", "--only", "bogus"], 2, "bogus"),
    ("n-groups-zero", ["analyze", "{R}", "--n-groups", "0"], 2, "positive integer"),
    ("steps-not-saved", ["analyze", "{R}", "--only", "sensitivity", "--steps", "25"], 2, "nearest saved"),
    ("steps-relative-no-tau", ["analyze", "{R}", "--only", "sensitivity", "--steps", "mid"], 2, "tau"),
    ("device-bogus", ["analyze", "{R}", "--device", "bogus"], 2, "unknown device"),
    ("report-output-folder", ["report", "{R}", "-o", "{T}"], 2, "is a folder"),
    ("ray-cpus-negative", ["sweep", "--out", "{T}/s", "--backend", "ray", "--cpus-per-run=-1", *TINY_FLAGS], 2, "cpus"),
    ("ray-cpus-nan", ["sweep", "--out", "{T}/s", "--backend", "ray", "--cpus-per-run", "nan", *TINY_FLAGS], 2, "cpus"),
    ("ray-gpus-inf", ["sweep", "--out", "{T}/s", "--backend", "ray", "--gpus-per-run", "inf", *TINY_FLAGS], 2, "gpus"),
    ("sweep-axis-unknown", ["sweep", "--out", "{T}/s", "--grid", "task.q=1,2", *TINY_FLAGS], 2, "unknown field"),
    ("sweep-workers-zero", ["sweep", "--out", "{T}/s", "--workers", "0", *TINY_FLAGS], 2, "positive integer"),
    ("scaling-not-a-sweep", ["scaling", "{R}"], 2, "not a sweep folder"),
    # a run whose every evaluation is NaN stops, as a NaN training loss does (its folder says "failed")
    ("nan-eval", ["train", "--out", "{T}/x", "--init-std", "1e30", "--steps", "20", *TINY_FLAGS], 2, "nan", "{T}/x"),
]


@pytest.mark.parametrize("case", BAD_INPUT, ids=lambda c: c[0])
def test_bad_input(case, sources, tmp_path, capsys):
    name, argv, status, fragment, *leaves = case
    run = tmp_path / "r"
    copy_run(sources["run"], run)
    scratch = tmp_path / "t"
    scratch.mkdir()
    saved = snapshot(run, cache=False)
    argv = [a.replace("{R}", str(run)).replace("{T}", str(scratch)) for a in argv]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == status, text[-2000:]
    assert "Traceback" not in text and fragment.lower() in text.lower(), text[-2000:]
    assert "expected one argument" not in text
    assert snapshot(run, cache=False) == saved, "a refused command changed the run"
    left = {str(p).replace(str(scratch), "{T}") for p in scratch.iterdir()}
    assert left <= set(leaves), f"a refused command left {left}"
    if leaves and left:
        assert (Run.open(scratch / "x").status or {}).get("state") == "failed"


# ---------------------------------------------------------------------------- interruption
def _popen(*args, cwd=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "interp.cli", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV, cwd=cwd)


def _wait_for(predicate: Callable[[], bool], seconds: float = 120) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def _ctrl_c_at_startup(delay: float):
    def scenario(sources: dict, tmp_path: Path) -> None:
        out = tmp_path / "x"
        proc = _popen("train", "--out", out, "--steps", "200", *TINY_FLAGS)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert "Traceback" not in err, err[-3000:]
        assert proc.returncode in (0, 130), (proc.returncode, err[-2000:])
        if out.exists():  # whatever is left can be resumed: a run with a checkpoint, never an empty folder
            assert Run.is_run(out) and Run.open(out).steps, sorted(p.name for p in out.iterdir())
    return scenario


def _ctrl_c_mid_analysis(sources: dict, tmp_path: Path) -> None:
    run = tmp_path / "r"
    copy_run(sources["demo"], run)
    steps = ",".join(map(str, Run.open(run).steps[:12]))
    analyze = [sys.executable, "-m", "interp.cli", "analyze", run, "--only", "sensitivity", "--steps", steps]
    proc = subprocess.Popen([*analyze, "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    _wait_for(lambda: len(list(run.glob("cache/sensitivity/*/step_*.json"))) >= 2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err, err[-3000:]
    again = subprocess.run([*analyze, "--json"], capture_output=True, text=True, env=ENV, timeout=600)
    fresh = subprocess.run([*analyze, "--json", "--no-cache"], capture_output=True, text=True, env=ENV, timeout=600)
    assert again.returncode == 0 and fresh.returncode == 0, again.stderr[-2000:]
    assert json.loads(again.stdout)["tables"] == json.loads(fresh.stdout)["tables"]  # the cache is exact


def _kill_9_mid_training_resumes_bit_exact(sources: dict, tmp_path: Path) -> None:
    flags = [*TINY_FLAGS, "--steps", "150", "--checkpoint-every", "25"]
    whole = tmp_path / "whole"
    assert interp_cli("train", "--out", whole, *flags, timeout=600).returncode == 0
    cut = tmp_path / "cut"
    proc = _popen("train", "--out", cut, *flags)
    _wait_for(lambda: (cut / "checkpoints" / "step_0000050.safetensors").exists())
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    resumed = interp_cli("train", "--resume", "--out", cut, "--quiet", timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert Run.open(cut).checkpoint_hashes() == Run.open(whole).checkpoint_hashes()


def _pool_worker_killed(sources: dict, tmp_path: Path) -> None:
    """The pool is rebuilt and the killed worker's run resumes, to the weights of an uninterrupted run."""
    args = ["sweep", "--out", str(tmp_path / "w"), "--steps", "120", "--grid", "seed=0,1,2", "--threads-per-run", "1",
            *TINY_FLAGS]
    out = tmp_path / "w"
    proc = _popen(*args, "--workers", "2")
    try:
        _wait_for(lambda: len(list(out.glob("*/checkpoints/step_0000010.safetensors"))) >= 1)
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        workers = [int(pid) for pid in children
                   if "spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")]
        assert workers, children
        os.kill(workers[0], signal.SIGKILL)
        _, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "Traceback" not in err, err[-3000:]
    assert "worker process died" in err and "3 of 3 runs done, 0 failed" in err, err[-2000:]
    reference = tmp_path / "reference"  # the same runs, uninterrupted, one at a time, same threads per run
    assert interp_cli("sweep", *args[1:2], reference, *args[3:], timeout=600).returncode == 0
    names = sorted(p.name for p in out.iterdir() if Run.is_run(p))
    assert names == sorted(p.name for p in reference.iterdir() if Run.is_run(p)) and len(names) == 3
    for name in names:
        assert Run.open(out / name).checkpoint_hashes() == Run.open(reference / name).checkpoint_hashes(), name


INTERRUPTION = [
    ("ctrl-c-startup-early", _ctrl_c_at_startup(0.3)),
    ("ctrl-c-startup-late", _ctrl_c_at_startup(2.5)),
    ("ctrl-c-mid-analysis", _ctrl_c_mid_analysis),
    ("kill-9-mid-training", _kill_9_mid_training_resumes_bit_exact),
    ("pool-worker-killed", _pool_worker_killed),
]


@pytest.mark.parametrize("case", _slow(INTERRUPTION, {"ctrl-c-mid-analysis", "kill-9-mid-training", "pool-worker-killed"}),
                         ids=lambda c: c[0])
def test_interruption(case, sources, tmp_path):
    case[1](sources, tmp_path)


# ---------------------------------------------------------------------------- concurrency
def _two_sweeps_one_folder(sources: dict, tmp_path: Path) -> None:
    out = tmp_path / "c"
    args = ("sweep", "--out", out, "--steps", "60", "--grid", "seed=0,1", *TINY_FLAGS)
    procs = [_popen(*args), _popen(*args)]
    results = [p.communicate(timeout=600) for p in procs]
    for proc, (_, err) in zip(procs, results):
        assert proc.returncode == 0, err[-2000:]
        assert "Traceback" not in err and "run failed" not in err, err[-2000:]
    status = interp_cli("sweep", "status", out, "--json", timeout=120)
    assert {r["status"] for r in json.loads(status.stdout)} == {"done"}


def _sweep_skips_a_run_being_written(sources: dict, tmp_path: Path) -> None:
    """A run held by another live writer is skipped and reported as running, never failed or waited on."""
    from interp.sweeps.sweep import Sweep

    out = tmp_path / "s"
    copy_run(sources["sweep"], out)
    shutil.rmtree(out / S0)
    spec = next(spec for name, spec, _ in Sweep.open(out).points() if name == S0)
    held = Run.create(out / S0, spec)  # this process is the other writer
    try:
        result = interp_cli("sweep", out, "--quiet", timeout=180)
    finally:
        held.release()
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "another process" in result.stderr and "run failed" not in result.stderr, result.stderr[-2000:]
    assert not (out / S0 / "status.json").exists()


def _two_analyses_one_run(sources: dict, tmp_path: Path) -> None:
    run = tmp_path / "r"
    copy_run(sources["run"], run)
    args = ("analyze", run, "--only", "sensitivity,attention", "--json")
    procs = [_popen(*args), _popen(*args)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-1000:] for _, e in outs]
    assert json.loads(outs[0][0])["tables"] == json.loads(outs[1][0])["tables"]


def _second_writer_refused(sources: dict, tmp_path: Path) -> None:
    run = tmp_path / "r"
    copy_run(sources["run"], run)
    first = _popen("train", "--resume", "--out", run, "--steps", "100000")
    try:
        _wait_for(lambda: (run / "checkpoints" / "step_0000040.safetensors").exists())
        second = interp_cli("train", "--resume", "--out", run, "--quiet", timeout=120)
        assert second.returncode == 1 and re.search(rf"pid {first.pid}\b", second.stderr), second.stderr
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=60)


def _report_while_training(sources: dict, tmp_path: Path) -> None:
    run = tmp_path / "r"
    copy_run(sources["run"], run)
    writer = _popen("train", "--resume", "--out", run, "--steps", "400")
    try:
        shown = interp_cli("analyze", run, "--only", "sensitivity", "--json", timeout=300)
        assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr[-2000:]
    finally:
        writer.communicate(timeout=600)
    assert writer.returncode == 0 and Run.open(run).status["state"] == "done"


CONCURRENCY = [
    ("two-sweeps-one-folder", _two_sweeps_one_folder),
    ("sweep-skips-a-run-being-written", _sweep_skips_a_run_being_written),
    ("two-analyses-one-run", _two_analyses_one_run),
    ("second-writer-refused", _second_writer_refused),
    ("analyze-while-training", _report_while_training),
]


@pytest.mark.parametrize("case", _slow(CONCURRENCY, {"two-sweeps-one-folder", "two-analyses-one-run", "second-writer-refused",
                                                   "analyze-while-training"}), ids=lambda c: c[0])
def test_concurrency(case, sources, tmp_path):
    case[1](sources, tmp_path)
