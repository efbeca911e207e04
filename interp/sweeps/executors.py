"""Where a sweep's runs are trained: a local process pool (the default) or Ray tasks.

`train_sweep` picks the points to train (not done, not damaged, not held by another process)
and hands them to an executor. An executor only decides *where* `train_point` is called,
never *what* it does: every point is an ordinary run folder, trained by `interp.train.train`,
which resumes from the last checkpoint and holds the run's OS file lock. So running a sweep
again skips finished runs and resumes interrupted ones, and no two workers ever write one
run: a run another live process holds is skipped ("running"), never failed. A worker that
dies is replaced and its run resumed (the local pool is started again, `MAX_REBUILDS` times
at most; Ray retries the task). Ray is imported only by `run_ray` (an optional extra:
pip install -e '.[ray]').

Bit-exactness: on the CPU a run's weights depend on the torch thread count (matrix products
are blocked differently), so each run gets `threads` torch threads whatever the executor:
`cores // workers` by default. The same sweep with the same threads per run gives the same
weights sequentially, in a pool or on Ray.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from interp.errors import InterpError

BACKENDS = ("local", "ray")
WAIT_SECONDS = 2.0  # poll interval while another process holds a run's lock
MAX_REBUILDS = 3  # a local pool whose worker died is started again this many times (as Ray's max_retries)
REBUILD_WAIT = 30.0  # seconds a job resubmitted after that waits for its run's lock to be free


def default_threads(workers: int) -> int:
    return max(1, (os.cpu_count() or 1) // max(1, workers))


def check_options(backend: str, workers: int = 1, threads: int | None = None, cpus_per_run: int | float = 1,
                  gpus_per_run: int | float = 0) -> None:
    """Refuse bad executor settings in one line, before anything is written or started."""
    if backend not in BACKENDS:
        raise InterpError(f"unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}")
    for name, value in (("workers", workers), ("threads per run", threads)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InterpError(f"{name} must be a positive integer, got {value!r}")
    for name, value, least in (("cpus per run", cpus_per_run, "> 0"), ("gpus per run", gpus_per_run, ">= 0")):
        number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
        if not math.isfinite(number) or number < 0 or (least == "> 0" and number == 0):
            raise InterpError(f"{name} must be a finite number {least}, got {value!r}")


def result_of(name: str, state: str, error: str | None = None) -> dict:
    """An executor's result for one point."""
    return {"name": name, "state": state, "seconds": 0.0, "error": error, "steps": None, "trained": False}


class _Skip(Exception):
    """A point that is not this process's to train: damaged, or held by another live process."""

    def __init__(self, state: str, message: str):
        super().__init__(message)
        self.state = state


def _claim(path: Path, spec, wait: bool | float, create: bool = True):
    """The point's Run with its writer lock held: created, or opened when it matches the point.
    Raises _Skip("damaged") for a folder holding another (or an unreadable) run, and
    _Skip("running") when another live process holds the lock past `wait`."""
    from interp.runs import RUN_FILE, Run, RunLock
    from interp.sweeps.state import busy_message, mismatch

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


def train_point(folder: str, spec: dict, device: str = "cpu", threads: int | None = None,
                wait: bool | float = False, create: bool = True) -> dict:
    """Train one point of a sweep to its end: create its run folder, or resume it, or skip it
    when it is done. Never raises: returns {"name", "state", "seconds", "error", "steps",
    "trained"}, the state one of done, interrupted, failed, damaged (the folder holds an
    unreadable run, or one whose run.json is not this point: the error names the fields) or
    running (another live process holds the run's lock: another sweep on the same folder, or
    `interp train`). `wait` waits for such a process: True until it ends, a number of
    seconds at most; by default not at all. A worker that died needs no waiting for: the
    operating system released its lock with the process."""
    import torch

    from interp.runs import Run
    from interp.spec import RunSpec
    from interp.train import train

    if threads:
        torch.set_num_threads(threads)
    path = Path(folder)
    began = time.perf_counter()
    result = result_of(path.name, "done")
    run = None
    try:
        run = _claim(path, RunSpec.from_dict(spec), wait, create)
        if (run.status or {}).get("state") != "done":
            outcome = train(run, device=device, progress=False)
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


def _die_with_parent() -> None:
    """Linux: a pool worker gets SIGKILL when the sweep's process dies, so a killed sweep
    leaves no orphan training a run (its lock would block the next sweep)."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass


def _worker_init(threads: int) -> None:
    _die_with_parent()
    import torch

    torch.set_num_threads(threads)


@dataclass
class Outcome:
    """One result per point an executor was given (`result_of`'s keys), in the order they ended."""

    results: list[dict] = field(default_factory=list)

    def having(self, state: str) -> list[dict]:
        return [r for r in self.results if r["state"] == state]

    @property
    def failed(self) -> list[dict]:
        return self.having("failed")


Job = tuple[str, dict]  # (run folder, spec as a dict)


def run_local(jobs: list[Job], workers: int = 1, threads: int | None = None, device: str = "cpu",
              on_result: Callable[[dict], None] | None = None, on_note: Callable[[str], None] | None = None,
              max_rebuilds: int = MAX_REBUILDS, create: bool = True, task: Callable[..., dict] = train_point
              ) -> Outcome:
    """Train `jobs` in a pool of `workers` processes (in this process when workers == 1).
    `task(folder, payload, device, threads, wait, create)` is what each job runs: `train_point`,
    or another module-level function of that form that never raises (`interp.sweeps.analyze`).

    A worker that dies (kill -9, the out-of-memory killer) breaks a process pool: every
    unfinished job then fails with BrokenProcessPool, the ones that never started included.
    So the pool is started again for the unfinished jobs, `max_rebuilds` times at most: each
    resumes from its run's last checkpoint (the dead worker's run lock went with it). Only
    jobs still unfinished after that are failed, with a message that says the workers died."""
    threads = threads or default_threads(workers)
    outcome = Outcome()

    def done(result: dict) -> None:
        outcome.results.append(result)
        if on_result is not None:
            on_result(result)

    if workers <= 1:
        for folder, spec in jobs:
            done(task(folder, spec, device, threads, False, create))
        return outcome
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    order = {folder: i for i, (folder, _) in enumerate(jobs)}
    pending, wait, deaths = list(jobs), 0.0, 0
    while pending:
        lost: list[Job] = []
        with ProcessPoolExecutor(max_workers=min(workers, len(pending)), mp_context=mp.get_context("spawn"),
                                 initializer=_worker_init, initargs=(threads,)) as pool:
            futures = {}
            for job in pending:
                try:
                    futures[pool.submit(task, job[0], job[1], device, threads, wait, create)] = job
                except BrokenProcessPool:
                    lost.append(job)
            for future in as_completed(futures):
                try:
                    done(future.result())
                except BrokenProcessPool:
                    lost.append(futures[future])
                except Exception as exc:  # noqa: BLE001 - the job could not reach a worker or come back
                    done(result_of(Path(futures[future][0]).name, "failed",
                                   f"the worker could not run it ({type(exc).__name__}: {exc})"))
        # leaving the `with` joined the broken pool's processes: their run locks are free
        if not lost:
            break
        deaths += 1
        pending = sorted(lost, key=lambda job: order[job[0]])
        names = ", ".join(Path(folder).name for folder, _ in pending)
        if deaths > max_rebuilds:
            for folder, _ in pending:
                done(result_of(Path(folder).name, "failed",
                               f"the pool's worker processes died {deaths} times (killed, or out of memory) "
                               f"before this run finished; run the sweep again to resume it from its last "
                               f"checkpoint"))
            break
        if on_note is not None:
            on_note(f"interp: a worker process died (killed, or out of memory); starting the pool again for "
                    f"{len(pending)} unfinished run(s), resumed from their last checkpoints: {names}")
        wait = REBUILD_WAIT
    return outcome


def run_ray(jobs: list[Job], address: str | None = None, cpus_per_run: int | float = 1, gpus_per_run: int | float = 0,
            device: str = "cpu", max_retries: int = 3, on_result: Callable[[dict], None] | None = None,
            create: bool = True, task: Callable[..., dict] = train_point) -> Outcome:
    """Train `jobs` as Ray tasks: on the cluster at `address`, else on a local Ray instance
    (`task` as for `run_local`).
    A task whose worker dies is retried (`max_retries`) and resumes from its checkpoint (the
    dead worker's run lock went with its process)."""
    try:
        import ray
    except ImportError:
        raise InterpError("the ray backend needs Ray, an optional extra: pip install -e '.[ray]'") from None
    started_here = not ray.is_initialized()
    if started_here:
        kwargs = {"address": address} if address else {"num_cpus": os.cpu_count() or 1}
        try:
            ray.init(include_dashboard=False, log_to_driver=False, logging_level="ERROR", **kwargs)
        except Exception as exc:  # noqa: BLE001 - Ray's own errors, for a bad --address among others
            raise InterpError(f"could not start or reach Ray ({address or 'a local instance'}): {exc}") from None
    outcome = Outcome()
    try:
        remote = ray.remote(num_cpus=cpus_per_run, num_gpus=gpus_per_run, max_retries=max_retries)(task)
        threads = max(1, int(cpus_per_run))
        pending = {remote.remote(folder, spec, device, threads, False, create): folder for folder, spec in jobs}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            folder = pending.pop(ready[0])
            try:
                result = ray.get(ready[0])
            except Exception as exc:  # noqa: BLE001 - retries exhausted
                result = result_of(Path(folder).name, "failed",
                                   f"the Ray task failed after its retries ({type(exc).__name__}: {exc})")
            outcome.results.append(result)
            if on_result is not None:
                on_result(result)
    finally:
        if started_here:
            ray.shutdown()
    return outcome


# ---------------------------------------------------------------------------- training a sweep
def train_sweep(
    sweep,
    backend: str = "local",
    workers: int = 1,
    threads: int | None = None,
    device: str = "cpu",
    address: str | None = None,
    cpus_per_run: int | float = 1,
    gpus_per_run: int | float = 0,
    progress: bool = True,
    create: bool = True,
):
    """Train every point of `sweep` (an `interp.sweeps.sweep.Sweep`) that is not done yet, on
    `backend` ("local": a pool of `workers` processes with `threads` torch threads each; "ray":
    Ray tasks). Finished runs are skipped, interrupted ones resumed; a failed run is recorded
    and the others go on. A damaged run (`interp.sweeps.state`) is skipped and named, and so
    is a run another live process is training (another sweep on the same folder, or
    `interp train`): its result's state is "running". Returns the Outcome: one result per
    point not done before, the skipped ones first. The local pool's workers import the
    calling script again: call this under `if __name__ == "__main__":`. `create=False` (a fork
    family) never makes a missing run folder: its point is reported damaged."""
    from tqdm.auto import tqdm

    from interp.sweeps.state import busy_message

    check_options(backend, workers, threads, cpus_per_run, gpus_per_run)
    points = sweep.points()
    states = sweep.states()
    skipped, todo = [], []
    for name, spec, _ in points:
        state = states[name]
        if state.state == "damaged":
            skipped.append(result_of(name, "damaged", state.error))
        elif state.state == "running":
            skipped.append(result_of(name, "running", busy_message(sweep.path / name)))
        elif state.state != "done":
            todo.append((str(sweep.path / name), spec.to_dict()))
    bar = tqdm(total=len(points), initial=len(points) - len(todo) - len(skipped), desc=f"sweep {sweep.name}",
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
            outcome = run_ray(todo, address=address, cpus_per_run=cpus_per_run, gpus_per_run=gpus_per_run,
                              device=device, on_result=on_result, create=create)
        else:
            outcome = run_local(todo, workers=workers, threads=threads, device=device, on_result=on_result,
                                on_note=lambda line: bar.write(line, file=sys.stderr), create=create)
    finally:
        bar.close()
    outcome.results[:0] = skipped
    return outcome
