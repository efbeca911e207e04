"""Issue 30's cases 12-14 as tables, in the style of test_adversarial_forks.py: a fork or family run
again with other settings (refused, naming the setting and both values, as a sweep refuses a changed
base spec), and two identical commands started at the same moment (a fork family, `interp analyze
SWEEP`): the second behaves as it does when started later, and no work is done twice.

Simultaneous starts are made deterministic with a gate: every process imports what it needs, says
it is ready and waits on a file lock the test holds; the test lets them all go at once. What is
asserted holds for every interleaving (which process makes, trains or analyses what is not fixed).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from interp.cli import main
from tests.helpers import cli_json, copy_run, run_main, snapshot

ROOT = Path(__file__).resolve().parents[2]


def _run_cli(argv: list[str], capsys) -> tuple[int, str]:
    code, out, err = run_main(argv, capsys)
    return code, out + err


# ---------------------------------------------------------------------------- 12: run again with other settings
@pytest.fixture(scope="module")
def made(tmp_path_factory, tiny_run) -> dict[str, Path]:
    """A finished fork, an unfinished one (made, never trained) and a finished family of the tiny run
    (eval_every 5, checkpoint_every 10), each a few steps."""
    from interp.forks.arms import parse_arms
    from interp.forks.fork import create_fork
    from interp.runs import Run

    root = tmp_path_factory.mktemp("concurrency-settings")
    parent = tiny_run()
    assert main(["fork", str(parent), "--at", "20", "--arm", "minibatch", "--steps", "4", "--out",
                 str(root / "fork"), "--quiet"]) == 0
    create_fork(Run.open(parent), 20, parse_arms("minibatch")[0], 4, root / "unfinished")
    assert main(["fork", str(parent), "--at", "20", "--arm", "minibatch,full_batch", "--steps", "4", "--out",
                 str(root / "family"), "--quiet"]) == 0
    return {"parent": parent, "fork": root / "fork", "unfinished": root / "unfinished", "family": root / "family"}


AGAIN = ["fork", "{P}", "--at", "20", "--steps", "4", "--out", "{O}", "--quiet"]
SETTINGS = [
    # (id, folder, extra argv, exit status, fragments); it exited 0 and returned the old fork without a word
    ("fork-eval-every", "fork", ["--arm", "minibatch", "--eval-every", "2"], 2,
     ["train.eval_every=5", "train.eval_every=2"]),
    ("fork-checkpoint-every", "fork", ["--arm", "minibatch", "--checkpoint-every", "1"], 2,
     ["train.checkpoint_every=10", "train.checkpoint_every=1"]),
    ("fork-save-optimizer", "fork", ["--arm", "minibatch", "--save-optimizer"], 2,
     ["train.save_optimizer=False", "train.save_optimizer=True"]),
    ("fork-checkpoint-dtype", "fork", ["--arm", "minibatch", "--checkpoint-dtype", "float16"], 2,
     ["train.checkpoint_dtype=float32", "train.checkpoint_dtype=float16"]),
    # not finished: resuming it would as silently keep its own settings
    ("unfinished-eval-every", "unfinished", ["--arm", "minibatch", "--eval-every", "2"], 2,
     ["train.eval_every=5", "train.eval_every=2"]),
    # a family refused with "its forks.json differs", naming nothing
    ("family-eval-every", "family", ["--arm", "minibatch,full_batch", "--eval-every", "2"], 2,
     ["eval_every", "2"]),
    # the same settings (the parent's own, given explicitly): the same fork, kept as it is
    ("fork-same-settings", "fork", ["--arm", "minibatch", "--eval-every", "5"], 0, ["done"]),
    ("family-same-settings", "family", ["--arm", "minibatch,full_batch"], 0, ["done"]),
    ("family-parent-value", "family", ["--arm", "minibatch,full_batch", "--eval-every", "5"], 0, ["done"]),
]


@pytest.mark.parametrize("case", SETTINGS, ids=lambda c: c[0])
def test_run_again_with_other_settings(case, made, capsys):
    name, folder, extra, status, fragments = case
    out = made[folder]
    saved = snapshot(out, cache=False)
    argv = [a.replace("{P}", str(made["parent"])).replace("{O}", str(out)) for a in AGAIN + extra]
    code, text = _run_cli(argv, capsys)
    assert code == status, text[-2000:]
    assert "Traceback" not in text and all(f.lower() in text.lower() for f in fragments), text[-2000:]
    if status == 2:
        assert len(text.strip().splitlines()) == 1, text[-2000:]
    assert snapshot(out, cache=False) == saved, "a fork run again was changed"


# ---------------------------------------------------------------------------- two processes started at once
GATE = """
import fcntl, pathlib, sys
import torch  # noqa: F401 - imported before the gate: every process starts its command at the same moment
import interp.forks.family, interp.sweeps.analyze  # noqa: F401
from interp.cli import main
pathlib.Path(sys.argv[2]).touch()
with open(sys.argv[1]) as gate:
    fcntl.flock(gate, fcntl.LOCK_SH)  # waits while the test holds the gate
sys.exit(main(sys.argv[3:]))
"""


def _at_once(argv: list[str], n: int, tmp_path: Path, timeout: float = 120) -> list[subprocess.CompletedProcess]:
    """`interp ARGV` in `n` processes let go at the same moment (module docstring)."""
    gate = tmp_path / "gate"
    gate.touch()
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    with open(gate) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        procs = [subprocess.Popen([sys.executable, "-c", GATE, str(gate), str(tmp_path / f"ready{i}"), *argv],
                                  cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for i in range(n)]
        deadline = time.monotonic() + timeout
        while not all((tmp_path / f"ready{i}").exists() for i in range(n)):
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "a process never got ready"
            time.sleep(0.05)
    out = []
    for p in procs:  # leaving the `with` opened the gate
        stdout, stderr = p.communicate(timeout=timeout)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return out


def _steps(path: Path) -> list[int]:
    return [json.loads(line)["step"] for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow  # 5-9 s of concurrent processes: the slow tier's
def test_two_identical_family_commands_at_once_share_the_forks(tiny_run, tmp_path, capsys):
    """The second exited 2 ("already holds a run"): both made the same fork folders. Now they share the
    family as a later start does: each fork is made once and trained by one process, a fork the
    other holds is skipped and named, and together they finish the family."""
    family = tmp_path / "fam"
    argv = ["fork", str(tiny_run()), "--at", "20", "--arm", "minibatch,full_batch", "--steps", "5", "--out",
            str(family), "--quiet"]
    results = _at_once(argv, 2, tmp_path)
    for r in results:
        text = r.stdout + r.stderr
        assert r.returncode == 0, text[-3000:]  # a fork the other process was still training is its to finish
        assert "Traceback" not in text and "already holds a run" not in text, text[-3000:]
        assert "interp: error" not in text and "failed" not in text, text[-3000:]
        for line in r.stderr.splitlines():
            if "skipped" in line:  # a busy fork is named, with who holds it
                assert "being trained by another process" in line and "at20-" in line and "(pid " in line, line
    table = cli_json(capsys, ["fork", "status", str(family), "--json"])["table"]  # exit 0: every fork done
    assert [r["status"] for r in table] == ["done"] * 2, table
    for row in table:  # trained once: the log never goes back
        steps = _steps(family / row["run"] / "metrics.jsonl")
        assert steps == sorted(set(steps)) and steps[-1] == row["fork_step"] + 5, (row["run"], steps)



def test_a_family_trains_the_forks_not_held_and_names_the_held_one(tiny_run, tmp_path, capsys):
    """It exited 1 with only the table's "running" row: now it trains every fork no other process holds,
    ends with one line naming the held fork, its holder and what to do, and exits 0 (as `interp sweep`)."""
    from interp.forks.arms import parse_arms
    from interp.forks.family import ForkFamily
    from interp.runs import Run

    parent, family = tiny_run(), tmp_path / "fam"
    ForkFamily.create(Run.open(parent), ["20"], parse_arms("minibatch,full_batch"), [0], 4, family).prepare()
    held = family / "at20-minibatch-s0"
    saved = snapshot(held, cache=False)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from interp.runs import RunLock; RunLock(sys.argv[1]).acquire(); "
                               "print('held', flush=True); time.sleep(600)", str(held)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"}, cwd=ROOT)
    argv = ["fork", str(parent), "--at", "20", "--arm", "minibatch,full_batch", "--steps", "4", "--out", str(family),
            "--quiet"]
    try:
        assert holder.stdout.readline().strip() == "held"
        code, out, err = run_main(argv, capsys)
        assert code == 0, (out + err)[-3000:]
        assert "Traceback" not in out + err and "failed" not in err
        last = err.strip().splitlines()[-1]
        for fragment in ("1 fork(s) skipped, being trained by another process: at20-minibatch-s0",
                         f"(pid {holder.pid} ", f"interp fork status {family}", "run this command again"):
            assert fragment in last, last
        assert (Run.open(family / "at20-full_batch-s0").status or {}).get("state") == "done"
        assert snapshot(held, cache=False) == saved, "a held fork was written"
        assert run_main(["fork", "status", str(family)], capsys)[0] == 1  # the family is not complete yet
    finally:
        holder.kill()
        holder.wait()
    code, out, err = run_main(argv, capsys)  # run again once the holder is gone: the held fork is trained
    assert code == 0 and "another process" not in err, (out + err)[-3000:]
    assert [r["status"] for r in cli_json(capsys, ["fork", "status", str(family), "--json"])["table"]] == ["done"] * 2


def _holder(folder: Path, gated: bool = False) -> subprocess.Popen:
    """Another process that takes the run folder's writer lock (after a line on its stdin when `gated`), says
    "held" and keeps it until killed."""
    code = ("import sys, time; from interp.runs import RunLock; " + ("sys.stdin.readline(); " if gated else "")
            + "RunLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(600)")
    return subprocess.Popen([sys.executable, "-c", code, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"}, cwd=ROOT)


def test_a_half_made_fork_taken_while_the_forks_are_made_is_left_to_its_holder(tiny_run, tmp_path, monkeypatch):
    """prepare looked (not started, not held), then deleted the folder: a process that took the fork's lock in
    between lost what it was writing. Now each fork is remade holding its folder's lock (its lock file kept): a
    fork another process took meanwhile is left untouched and reads running; once free, it is made again."""
    import interp.replay
    from interp.forks.arms import parse_arms
    from interp.forks.family import ForkFamily
    from interp.runs import RESUME_FILE, Run

    parent, out = tiny_run(), tmp_path / "fam"
    family = ForkFamily.create(Run.open(parent), ["20"], parse_arms("minibatch,full_batch"), [0], 4, out)
    assert family.prepare() == 2
    held, free = out / "at20-minibatch-s0", out / "at20-full_batch-s0"
    for folder in (held, free):  # both half-made: killed before the state at the fork step was written
        (folder / RESUME_FILE).unlink()
    assert {st.state for st in family.states().values()} == {"not started"}
    saved, lock_file = snapshot(held, cache=False), (held / ".lock").stat().st_ino
    holder = _holder(held, gated=True)
    real = interp.replay.state_at

    def state_at(*args, **kwargs):  # after prepare looked at the forks, before it touches one: the lock is taken
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "held"
        return real(*args, **kwargs)

    monkeypatch.setattr(interp.replay, "state_at", state_at)
    try:
        assert family.prepare() == 1  # only the free one
        assert snapshot(held, cache=False) == saved, "a fork another process holds was deleted or rewritten"
        assert (held / ".lock").stat().st_ino == lock_file and f"pid {holder.pid} " in (held / ".lock").read_text()
        states = family.states()
        assert states[held.name].state == "running" and states[free.name].state == "interrupted", states
        assert (free / RESUME_FILE).exists() and not list(out.glob(".*.making.tmp"))
    finally:
        holder.kill()
        holder.wait()
    monkeypatch.setattr(interp.replay, "state_at", real)
    assert family.prepare() == 1  # nobody holds it now: made again, in its folder and under its kept lock file
    assert (held / RESUME_FILE).exists() and (held / ".lock").stat().st_ino == lock_file
    assert (held / ".lock").read_text() == "" and not list(out.glob(".*.making.tmp"))
    outcome = family.train(workers=1, threads=1, progress=False)  # the remade folder's lock is taken as any run's
    assert sorted((r["name"], r["state"]) for r in outcome.results) == [(free.name, "done"), (held.name, "done")]


@pytest.mark.parametrize("what", ["made, not trained", "being made", "being made, --json"])
def test_a_single_fork_another_process_writes_is_named_and_exits_1(tiny_run, tmp_path, capsys, what):
    """It was refused with exit 2, the bad-input status, though the input is fine: now one line names the holder
    and what to do, nothing is written, and it exits 1 (the fork is not done), as an unfinished fork does."""
    from interp.forks.arms import parse_arms
    from interp.forks.fork import create_fork
    from interp.runs import Run

    parent, out = tiny_run(), tmp_path / "fork"
    if what == "made, not trained":
        create_fork(Run.open(parent), 20, parse_arms("minibatch")[0], 4, out)
    else:
        out.mkdir()  # another process has taken the lock and not yet written run.json
    saved = snapshot(out, cache=False)
    holder = _holder(out)
    argv = ["fork", str(parent), "--at", "20", "--arm", "minibatch", "--steps", "4", "--out", str(out), "--quiet",
            *(["--json"] if "json" in what else [])]
    try:
        assert holder.stdout.readline().strip() == "held"
        code, shown, err = run_main(argv, capsys)
        assert code == 1, (shown + err)[-3000:]
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err, err
        for fragment in (f"fork {out} not trained here, being written by another process (pid {holder.pid} ",
                         f"interp show {out}", "run this command again"):
            assert fragment in lines[0], lines[0]
        if "json" in what:
            assert json.loads(shown) == {"run": str(out), "status": "running", "holder": (out / ".lock").read_text().strip()}
        else:
            assert shown == ""
        assert snapshot(out, cache=False) == saved, "a fork another process holds was written"
    finally:
        holder.kill()
        holder.wait()


# ---------------------------------------------------------------------------- 14: analyze SWEEP twice at once
SMALL = ["--preset", "tiny", "--n-bases", "24", "--n-layers", "1", "--n-heads", "2", "--d-model", "32",
         "--d-head", "16", "--d-mlp", "64", "--batch-size", "16", "--lr", "0.003", "--eval-every", "10",
         "--eval-size", "64", "--checkpoint-every", "50", "--steps", "400", "--stop-after-snap", "30",
         "--threads-per-run", "1", "--quiet"]
ANALYZE = ["--only", "sensitivity", "--steps", "pre,mid,post", "--json", "--quiet", "--threads-per-run", "1"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """Two small runs that snap within 400 steps (about 10 s of training)."""
    out = tmp_path_factory.mktemp("concurrency-sweep") / "sweep"
    assert main(["sweep", *SMALL, "--grid", "task.k=3,4", "--out", str(out)]) == 0
    return out


def _computed(text: str) -> dict[str, int]:
    return {r["name"]: r["computed"] for r in json.loads(text)["runs"]}


@pytest.mark.slow  # 5-9 s of concurrent processes: the slow tier's
def test_a_run_another_process_analyses_is_skipped_then_analysed(sweep, tmp_path):
    """`analyze_sweep(wait=False)` names a run whose analysis lock another process holds and analyses the
    others; its cache is untouched. Once the lock is free, it is analysed."""
    from interp.files import WriterLock
    from interp.sweeps.analyze import ANALYSIS_LOCK, analyze_sweep
    from interp.sweeps.sweep import Sweep

    folder = copy_run(sweep, tmp_path / "sweep")
    held, other = (folder / "k3-nb24-s0"), (folder / "k4-nb24-s0")
    (held / ANALYSIS_LOCK).parent.mkdir(exist_ok=True)
    lock = WriterLock(held / ANALYSIS_LOCK)
    lock.acquire()  # its own open file: the suite's claim on another one is refused, as another process's is
    try:
        saved = snapshot(held)
        first = analyze_sweep(Sweep.open(folder), only=["sensitivity"], steps="pre,mid,post", progress=False,
                              wait=False)
        assert [r["name"] for r in first.results] == [other.name] and first.computed > 0
        assert "being analysed by another process" in first.skipped[held.name], first.skipped
        assert snapshot(held) == saved
    finally:
        lock.release()
    again = analyze_sweep(Sweep.open(folder), only=["sensitivity"], steps="pre,mid,post", progress=False, wait=False)
    got = {r["name"]: (r["computed"], r["cached"]) for r in again.results}
    assert got[held.name][0] > 0 and got[other.name][0] == 0, got


@pytest.mark.slow  # 5-9 s of concurrent processes: the slow tier's
def test_two_analyze_sweep_at_once_compute_each_result_once(sweep, tmp_path, capsys):
    """Both computed everything (twice the work, the same results). Now a run the other process is
    analysing is waited for and read from its cache: the cache misses of both add up to one analysis."""
    folder = copy_run(sweep, tmp_path / "sweep")
    results = _at_once(["analyze", str(folder), *ANALYZE], 2, tmp_path)
    for r in results:
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    third = cli_json(capsys, ["analyze", str(folder), *ANALYZE])  # a third, alone: everything from the cache
    assert sum(r["computed"] for r in third["runs"]) == 0
    entries = {r["name"]: r["cached"] for r in third["runs"]}  # every entry, read back
    both = [_computed(r.stdout) for r in results]
    assert {name: both[0][name] + both[1][name] for name in entries} == entries, (both, entries)
    for r in results:
        got = json.loads(r.stdout)
        assert {x["name"]: x["findings"] for x in got["runs"]} == {x["name"]: x["findings"] for x in third["runs"]}
