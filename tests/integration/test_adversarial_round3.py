"""Issue 43's probe (round three) as tables, beside test_adversarial.py and in its style: nothing touched, nothing
silently wrong. Each row is one case the probe found; it failed before the fix.

- Data touched: the thinning helpers under a live writer (1), a resume of a finished run (2), and a held lock that
  every command reports alike, exit 1 (22);
- silent wrong results: a step named relative to tau far from any checkpoint (4, 14), a relapse or escape criterion
  read the wrong way round (5), the edges findings' "nearest tau" and onsets (6), `interp show` of a damaged log (7).

Fixtures: `run` is the session's 30-step tiny run (it never reaches tau); `planted` a copy whose metrics log is
planted to reach tau_half at step 20 and snap at 30 (the issue's `mini`, 600 steps with tau_half 380, shows the
same at ten times the cost); `thinned` a copy of `planted` thinned to its last checkpoint (`drop_checkpoints(run,
[])`, as the issue thinned `mini`). Each case works on its own copy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from interp.runs import Run
from tests.helpers import copy_run, run_main, snapshot

ROOT = Path(__file__).resolve().parents[2]
PLANTED = {0: 1.0, 1: 1.0, 2: 1.0, 4: 1.0, 5: 1.0, 8: 1.0, 10: 1.0, 15: 1.0, 20: 0.45, 25: 0.2, 30: 0.04}  # Lc / log K


def plant(run: Path, lc_over_logk: dict[int, float] = PLANTED) -> Path:
    """The run's metrics log with the candidate loss planted (by step, in units of log K): the tiny run, which
    never leaves its plateau, then reaches tau_half at step 20 and snaps at 30, as `mini` does at 380 and 580."""
    import math

    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    k = Run.open(run).spec.task.k
    text = "".join(json.dumps({**r, "loss_cand": lc_over_logk[r["step"]] * math.log(k)}) + "\n" for r in rows)
    (run / "metrics.jsonl").write_text(text)
    return run


@pytest.fixture(scope="module")
def sources(tmp_path_factory, tiny_run) -> dict[str, Path]:
    from interp.run_states import drop_checkpoints

    root = tmp_path_factory.mktemp("adversarial-round3")
    planted = plant(copy_run(tiny_run(), root / "planted", cache=False))
    thinned = copy_run(planted, root / "thinned")
    drop_checkpoints(Run.open(thinned), [])
    assert Run.open(thinned).steps == [30]
    return {"run": tiny_run(), "planted": planted, "thinned": thinned}


def _holder(folder: Path) -> subprocess.Popen:
    """Another process that takes the run folder's writer lock, says "held" and keeps it until killed."""
    code = ("import sys, time; from interp.runs import RunLock; RunLock(sys.argv[1]).acquire(); print('held', flush=True); "
            "time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONWARNINGS": "ignore"}, cwd=ROOT)
    assert proc.stdout.readline().strip() == "held"
    return proc


def _fill(argv: list[str], folder: Path, scratch: Path) -> list[str]:
    return [a.replace("{F}", str(folder)).replace("{T}", str(scratch)) for a in argv]


# ---------------------------------------------------------------------------- 1, 22: a folder another process writes
def _drop(how: str):
    def call(folder: Path) -> None:
        from interp.run_states import drop_checkpoints, drop_states

        run = Run.open(folder)
        {"checkpoints": lambda: drop_checkpoints(run, []), "checkpoints-some": lambda: drop_checkpoints(run, [0, 20]),
         "states": lambda: drop_states(run, [])}[how]()
    return call


HELD = [
    # (id, fixture, what is tried: a command line or a library call; {F} the held folder, {T} a scratch folder)
    # 22: exited 2 (the bad-input status) while `interp fork` exits 1 for the same held lock
    ("train-resume", "run", ["train", "--resume", "--out", "{F}", "--steps", "40", "--quiet"]),
    ("train-resume-finished", "run", ["train", "--resume", "--out", "{F}", "--quiet"]),
    # 1: deleted checkpoints and states under a live `interp train` (it then failed: "no checkpoint at step 200")
    ("drop-checkpoints", "run", _drop("checkpoints")),
    ("drop-checkpoints-some", "run", _drop("checkpoints-some")),
    ("drop-states", "run", _drop("states")),
]


@pytest.mark.parametrize("case", HELD, ids=lambda c: c[0])
def test_a_held_folder_is_refused_naming_its_holder(case, sources, tmp_path, capsys):
    from interp.files import LockHeld

    name, fixture, what = case
    folder = copy_run(sources[fixture], tmp_path / "f")
    saved = snapshot(folder, cache=False)
    holder = _holder(folder)
    try:
        if callable(what):
            with pytest.raises(LockHeld, match=rf"\(pid {holder.pid} on "):
                what(folder)
        else:
            code, out, err = run_main(_fill(what, folder, tmp_path), capsys)
            lines = (out + err).strip().splitlines()
            assert code == 1 and len(lines) == 1 and "Traceback" not in err, out + err
            assert f"(pid {holder.pid} on " in lines[0] and "another process" in lines[0], lines[0]
    finally:
        holder.kill()
        holder.wait()
    assert snapshot(folder, cache=False) == saved, "a folder another process holds was written"


def test_ls_does_not_list_a_half_made_fork(sources, tmp_path, capsys):
    """22: a `.NAME.making.tmp` left by a kill during a fork remake was listed as a run."""
    root = tmp_path / "root"
    copy_run(sources["run"], root / "kept")
    copy_run(sources["run"], root / ".at20-minibatch-s0.making.tmp")
    for argv in (["ls", str(root)], ["ls", str(root), "--json"]):
        code, out, err = run_main(argv, capsys)
        assert code == 0 and ".making.tmp" not in out + err and "kept" in out, out + err


# ---------------------------------------------------------------------------- 2: commands that must write nothing
UNTOUCHED = [
    # (id, fixture, argv, exit status, fragment); status.json was rewritten (its `updated` and `wall_seconds`)
    ("resume-finished", "run", ["train", "--resume", "--out", "{F}", "--quiet"], 0, "nothing to train"),
    ("resume-finished-same-steps", "run", ["train", "--resume", "--out", "{F}", "--steps", "30", "--quiet"], 0,
     "already finished at step 30"),
]


@pytest.mark.parametrize("case", UNTOUCHED, ids=lambda c: c[0])
def test_nothing_written(case, sources, tmp_path, capsys):
    name, fixture, argv, status, fragment = case
    folder = copy_run(sources[fixture], tmp_path / "f")
    saved = snapshot(folder)
    code, out, err = run_main(_fill(argv, folder, tmp_path), capsys)
    assert code == status and "Traceback" not in err and fragment in out + err, (out + err)[-2000:]
    assert snapshot(folder) == saved, "the command wrote to the folder"
