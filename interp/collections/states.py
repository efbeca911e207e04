"""The state of one point of a collection (a sweep or a fork family), read from its run folder alone.

A point is `done`, `running` (some process holds its run's writer lock), `failed` (its
status.json says so, with the error), `interrupted` (checkpoints, unfinished, nobody
writing), `not started`, or `damaged`: its folder cannot be trusted as this point's run,
and the reason names the file. Damaged is a run.json that cannot be read or whose spec is
not the point's spec in sweep.json (the fields are named), a status.json, manifest.json or
metrics.jsonl that cannot be read, a metrics.jsonl gone from a run that trained (it has checkpoints
and a status or a resume state) or that lost its tail (it ends before the step manifest.json or
status.json says the run reached: `interp.metrics_log.check_complete`), a checkpoint the manifest lists that is missing or of
another size, or a folder without run.json that holds files. A damaged run is never
trained, resumed or fitted; the table shows what its run.json says (or NaN), never what
sweep.json claims. Reading never takes a lock and never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from interp import metrics_log
from interp.errors import InterpError
from interp.runs import (LOCK_FILE, METRICS_FILE, RESUME_FILE, RUN_FILE, STATES as RUN_STATES, STATUS_FILE, Run,
                         RunLock)
from interp.spec import RunSpec, dotted_names

STATES = ("done", "running", "failed", "damaged", "interrupted", "not started")


@dataclass
class PointState:
    """What a point's run folder says: its state, the error or the reason it is damaged, the
    opened Run (None when its run.json is unreadable or not the point's), and the spec its
    run.json holds (the point's own spec before the run exists; None when unreadable)."""

    state: str
    error: str | None = None
    run: Run | None = None
    spec: RunSpec | None = None


def spec_differences(have: RunSpec, want: RunSpec) -> list[str]:
    """The dotted fields where two specs differ, in the spec's field order."""
    return [name for name in dotted_names() if have.get(name) != want.get(name)]


def _shown(value) -> str:
    return "none" if value is None else str(value)


def mismatch(run_file: Path, have: RunSpec, want: RunSpec) -> str:
    """"S/k4-nb24-s0/run.json says train.lr=0.003, sweep.json's point says train.lr=0.005"."""
    names = spec_differences(have, want)
    if not names:
        return f"{run_file} holds another spec than sweep.json's point"
    ours = ", ".join(f"{n}={_shown(have.get(n))}" for n in names)
    theirs = ", ".join(f"{n}={_shown(want.get(n))}" for n in names)
    return (f"{run_file} says {ours}, sweep.json's point says {theirs} "
            f"(one of them was edited; move the run folder away to train the point again)")


def holder(path: Path) -> str:
    """Who holds a run folder's writer lock ("pid 123 on host"), as far as it says."""
    return RunLock(Path(path)).holder() or "unknown pid"


def busy_message(path: Path) -> str:
    return f"{path} is being trained by another process ({holder(path)})"


def _check_files(run: Run) -> dict | None:
    """Read what a finished or interrupted run's state rests on; an InterpError names the file."""
    status = run.status
    if (run.path / STATUS_FILE).exists():
        if not isinstance(status, dict) or status.get("state") not in RUN_STATES:
            raise InterpError(f"{run.path / STATUS_FILE} is not a run status (a JSON object whose state is one "
                              f"of {', '.join(RUN_STATES)})")
    for step, entry in run.manifest().items():
        file = run.path / entry["file"]
        if not file.is_file():
            raise InterpError(f"{run.path / 'manifest.json'} lists {entry['file']} (step {step}), which is missing")
        size = entry.get("bytes")
        if isinstance(size, int) and file.stat().st_size != size:
            raise InterpError(f"{file} has {file.stat().st_size} bytes; manifest.json says {size}")
    _check_log(run, status)
    return status


def _check_log(run: Run, status: dict | None) -> None:
    """Refuse a metrics log gone from a run that trained, unreadable, or cut short (an InterpError naming it)."""
    if not (run.path / METRICS_FILE).exists() and run.steps and (status is not None or (run.path / RESUME_FILE).exists()):
        raise InterpError(f"{run.path / METRICS_FILE} is missing, but the run has checkpoints up to step "
                          f"{run.steps[-1]}: its history is lost")
    run.metric_rows()
    metrics_log.check_complete(run)  # a log that lost its tail: damaged, never censored


def log_damage(run: Run) -> str | None:
    """Why `run`'s metrics log cannot be trusted (gone, unreadable, lost its tail: everything read from it, tau
    first, would be wrong), or None; a run another process is writing is not judged (its log is growing)."""
    if run.writing:
        return None
    try:
        _check_log(run, run.status)
    except InterpError as exc:
        return str(exc)
    return None


def examine(path: str | Path, want: RunSpec | None) -> PointState:
    """The state of the point whose spec is `want` and whose run folder is `path` (`want` None: a folder
    read without its point's spec, which it is given only when it holds no run.json)."""
    path = Path(path)
    if not Run.is_run(path):
        if not path.exists():
            return PointState("not started", spec=want)
        if not path.is_dir():
            return PointState("damaged", f"{path} is a file, not a run folder")
        if RunLock(path).is_locked():  # being created by another process right now
            return PointState("running", None, spec=want)
        extra = sorted(p.name for p in path.iterdir() if p.name != LOCK_FILE)
        if extra:
            return PointState("damaged", f"{path} has no {RUN_FILE} but holds {', '.join(extra[:3])}"
                                         f"{' ...' if len(extra) > 3 else ''}: not a run folder "
                                         f"(move it away to train the point again)")
        return PointState("not started", spec=want)
    try:
        run = Run.open(path)
    except InterpError as exc:
        return PointState("damaged", str(exc))
    if run.spec != want:
        return PointState("damaged", mismatch(path / RUN_FILE, run.spec, want), spec=run.spec)
    if run.writing:
        return PointState("running", None, run, run.spec)
    try:
        status = _check_files(run)
    except InterpError as exc:
        return PointState("damaged", str(exc), spec=run.spec)
    state = (status or {}).get("state")
    if state == "done":
        return PointState("done", None, run, run.spec)
    if state == "failed":
        return PointState("failed", status.get("error"), run, run.spec)
    return PointState("interrupted" if run.steps else "not started", None, run, run.spec)
