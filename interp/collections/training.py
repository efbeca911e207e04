"""Training a collection's points: the training job and `train_points`.

`train_points` picks the points to train (not done, not damaged, not held by another process)
and hands them to an executor (`interp.collections.executors`) as jobs of `train_point`. Every
point is an ordinary run folder, trained by `interp.train.train`, which resumes from the last
checkpoint and holds the run's OS file lock. So training a sweep or a fork family again skips
finished runs and resumes interrupted ones, and no two workers ever write one run: a run
another live process holds is skipped ("running"), never failed, and `held_note` names it at the end.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

from interp.collections import executors
from interp.collections.executors import Job, check_options, result_of
from interp.errors import InterpError

WAIT_SECONDS = 2.0  # poll interval while another process holds a run's lock
REBUILD_WAIT = 30.0  # seconds a job resubmitted after its worker died waits for its run's lock to be free


class _Skip(Exception):
    """A point that is not this process's to train: damaged, or held by another live process."""

    def __init__(self, state: str, message: str):
        super().__init__(message)
        self.state = state


def _claim(path: Path, spec, wait: bool | float, create: bool = True):
    """The point's Run with its writer lock held: created, or opened when it matches the point.
    Raises _Skip("damaged") for a folder holding another (or an unreadable) run, and
    _Skip("running") when another live process holds the lock past `wait`."""
    from interp.collections.states import busy_message, mismatch
    from interp.runs import RUN_FILE, Run, RunLock

    deadline = math.inf if wait is True else time.monotonic() + float(wait or 0)
    looked_again = False
    while True:
        try:
            if not Run.is_run(path):
                if not create:  # a fork family's folders are made before training (interp.forks.family)
                    raise _Skip("damaged", f"{path} is missing: it must be made before it is trained")
                return Run.create(path, spec)
            try:
                run = Run.open(path)
            except InterpError as exc:
                raise _Skip("damaged", str(exc)) from None
            if run.spec != spec:
                raise _Skip("damaged", mismatch(path / RUN_FILE, run.spec, spec))
            run.acquire()
            return run
        except InterpError:
            if not RunLock(path).is_locked():
                if Run.is_run(path) and not looked_again:
                    looked_again = True
                    continue  # created by another process, which has finished with it since
                raise
            if time.monotonic() >= deadline:
                raise _Skip("running", busy_message(path)) from None
            time.sleep(min(WAIT_SECONDS, max(0.05, deadline - time.monotonic())))


def train_point(folder: str, job: dict, device: str = "cpu", threads: int | None = None,
                resubmitted: bool = False) -> dict:
    """Train one point to its end: create its run folder, or resume it, or skip it when it is
    done. `job`: {"spec": the point's RunSpec as a dict, "create": whether a missing run folder
    may be made (default True; a fork family's are made before), "wait": how long to wait for
    another process holding the run (True until it ends, a number of seconds at most; default
    not at all, and REBUILD_WAIT seconds when `resubmitted` after a worker died), "stepper": the
    stepper factory `interp.train.train` drives (a fork family's; default the minibatch step), "sink": the sink
    factory it is handed (`interp.sinks`: e.g. TensorBoard or W&B; default none)}. Never raises:
    returns {"name", "state", "seconds", "error", "steps", "trained"}, the state one of done,
    interrupted, failed, damaged (the folder holds an unreadable run, or one whose run.json is
    not this point: the error names the fields) or running (another live process holds the
    run's lock: another sweep on the same folder, or `interp train`). A worker that died needs
    no waiting for: the operating system released its lock with the process. In the caller's own process (a
    pool of one) the caller's torch thread count is given back afterwards (`interp.devices.torch_threads`)."""
    from interp.devices import torch_threads

    with torch_threads(job.get("threads") or threads):  # a resumed run's own, as recorded (`resume_threads`)
        return _train_point(folder, job, device, resubmitted)


def _train_point(folder: str, job: dict, device: str, resubmitted: bool) -> dict:
    """`train_point`'s work, at the thread count it set."""
    from interp.runs import Run
    from interp.spec import RunSpec
    from interp.train import train

    path = Path(folder)
    began = time.perf_counter()
    result = result_of(path.name, "done")
    run = None
    wait = REBUILD_WAIT if resubmitted else job.get("wait", False)
    try:
        run = _claim(path, RunSpec.from_dict(job["spec"]), wait, job.get("create", True))
        if (run.status or {}).get("state") != "done":
            outcome = train(run, device=device, progress=False, stepper=job.get("stepper"), sink=job.get("sink"))
            result["trained"] = True
            result["steps"] = outcome.last_step
            if not (Run.open(path).status or {}).get("state") == "done":
                result["state"] = "interrupted"
    except _Skip as exc:
        result.update(state=exc.state, error=str(exc))
    except Exception as exc:  # noqa: BLE001 - a failed run is a result, the others go on
        result["state"] = "failed"
        result["error"] = str(exc) if isinstance(exc, InterpError) else f"{type(exc).__name__}: {exc}"
        if run is not None and run.is_writer and (run.status or {}).get("state") != "failed":
            run.write_status("failed", error=result["error"])
    finally:
        if run is not None:
            run.release()
    result["seconds"] = round(time.perf_counter() - began, 3)
    return result


def resume_threads(folder: Path) -> int | None:
    """The torch threads the run at `folder` was last trained with, as its run.json records them (None: no run there,
    never trained, or not recorded). Read without torch."""
    import json

    from interp.run_segments import recorded_threads
    from interp.runs import RUN_FILE

    try:
        info = json.loads((Path(folder) / RUN_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not (info.get("segments") or info.get("training")):
        return None
    return recorded_threads(info)


def resume_workers(collection) -> tuple[int | None, int | None]:
    """(workers, threads) a re-run of `collection` resumes its unfinished runs with when none is given: the threads
    their runs were trained with (the fewest recorded) and as many workers as the cores hold at that many threads
    each, e.g. 2 workers of 1 thread on 2 cores, as the sweep ran; (None, None) when no unfinished run recorded any."""
    import os

    states = collection.states()
    recorded = [t for name, _, _ in collection.points() if states[name].state not in ("done", "damaged")
                for t in [resume_threads(collection.path / name)] if t]
    if not recorded:
        return None, None
    threads = min(recorded)
    return max(1, (os.cpu_count() or 1) // threads), threads


def train_points(
    collection,
    backend: str = "local",
    workers: int = 1,
    threads: int | None = None,
    device: str = "cpu",
    address: str | None = None,
    cpus_per_run: int | float = 1,
    gpus_per_run: int | float = 0,
    progress: bool = True,
    create: bool = True,
    stepper=None,
    sink=None,
    keep_threads: bool = False,
):
    """Train every point of `collection` (a Sweep or a ForkFamily) that is not done yet, on
    `backend` ("local": a pool of `workers` processes with `threads` torch threads each; "ray":
    Ray tasks). Finished runs are skipped, interrupted ones resumed; a failed run is recorded
    and the others go on. A damaged run (`interp.collections.states`) is skipped and named, and
    so is a run another live process is training (another sweep on the same folder, or
    `interp train`): its result's state is "running". Returns the Outcome: one result per
    point not done before, the skipped ones first. The local pool's workers import the
    calling script again: call this under `if __name__ == "__main__":`. `create=False` (a fork
    family) never makes a missing run folder: its point is reported damaged. `stepper`: the
    stepper factory every point trains with (`interp.train.train`; a fork family's arms); `sink`: the sink
    factory each is handed (`interp.sinks`; it travels to the workers, so it pickles). With `keep_threads`, each run
    that was trained before resumes with the torch threads it was trained with, as recorded in its run.json (a re-run
    of the folder: bit-exact), whatever `threads` says for the new ones."""
    from tqdm.auto import tqdm

    from interp.collections.states import busy_message

    check_options(backend, workers, threads, cpus_per_run, gpus_per_run)
    points = collection.points()
    states = collection.states()
    skipped, todo = [], []
    for name, spec, _ in points:
        state = states[name]
        if state.state == "damaged":
            skipped.append(result_of(name, "damaged", state.error))
        elif state.state == "running":
            skipped.append(result_of(name, "running", busy_message(collection.path / name)))
        elif state.state != "done":
            own = resume_threads(collection.path / name) if keep_threads else None
            todo.append(Job(train_point, str(collection.path / name),
                            {"spec": spec.to_dict(), "create": create, "stepper": stepper, "sink": sink,
                             "threads": own}))
    bar = tqdm(total=len(points), initial=len(points) - len(todo) - len(skipped), desc=f"sweep {collection.name}",
               unit="run", disable=not progress, dynamic_ncols=True)
    failures = []

    def on_result(result: dict) -> None:
        if result["state"] == "failed":
            failures.append(result["name"])
            bar.write(f"interp: run failed: {result['name']}: {result['error']}", file=sys.stderr)
        elif result["state"] == "damaged":
            bar.write(f"interp: run damaged, skipped: {result['name']}: {result['error']}", file=sys.stderr)
        elif result["state"] == "running":
            bar.write(f"interp: run skipped: {result['error']}", file=sys.stderr)
        bar.update(1)
        bar.set_postfix_str(f"{len(failures)} failed" if failures else "")

    try:
        for result in skipped:
            on_result(result)
        if backend == "ray":
            outcome = executors.run_ray(todo, address=address, cpus_per_run=cpus_per_run, gpus_per_run=gpus_per_run,
                                        device=device, on_result=on_result)
        else:
            outcome = executors.run_local(todo, workers=workers, threads=threads, device=device, on_result=on_result,
                                          on_note=lambda line: bar.write(line, file=sys.stderr))
    finally:
        bar.close()
    outcome.results[:0] = skipped
    return outcome


def held_note(collection, final: dict, what: str, status: str) -> str | None:
    """The closing line of a training command that left points to another live process (their final state
    "running", `Collection.final_states`): which, who holds each, and what to do; None when there are none.
    Such points are not this command's failure: `interp sweep` and a fork family exit 0 for them."""
    from interp.collections.states import holder

    held = [name for name, (state, _) in final.items() if state == "running"]
    if not held:
        return None
    who = ", ".join(f"{name} ({holder(collection.path / name)})" for name in held)
    return (f"interp: {len(held)} {what}(s) skipped, being trained by another process: {who}; that process finishes "
            f"them (see {status} {collection.path}); if it stops first, run this command again to resume them")
