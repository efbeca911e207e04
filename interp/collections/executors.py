"""Where a collection's jobs run: a local process pool (the default) or Ray tasks.

A job is one point's work: a task (a module-level function) with the point's run folder and a
payload, called as `task(folder, payload, device, threads, resubmitted)`. An executor only
decides *where* a job runs, never *what* it does: training (`interp.collections.training`) and
the analysis suite (`interp.sweeps.analyze`) are jobs, and what is particular to one of them
(the spec, whether a missing run folder may be made) travels in its payload. A job never raises:
it returns a result (`result_of`'s keys and its own). A worker that dies is replaced and its
job started again (the local pool is started again, `MAX_REBUILDS` times at most, and the job
is told it was `resubmitted`; Ray retries the task). Ray is imported only by `require_ray`
(an optional extra: pip install -e '.[ray]').

Bit-exactness: on the CPU a run's weights depend on the torch thread count (matrix products
are blocked differently), so each job gets `threads` torch threads whatever the executor:
`cores // workers` by default. The same sweep with the same threads per run gives the same
weights sequentially, in a pool or on Ray.
"""

from __future__ import annotations

import math
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interp.errors import InterpError

BACKENDS = ("local", "ray")
MAX_REBUILDS = 3  # a local pool whose worker died is started again this many times (as Ray's max_retries)
RAY_MISSING = "the ray backend needs Ray, an optional extra: pip install -e '.[ray]'"


def default_threads(workers: int) -> int:
    return max(1, (os.cpu_count() or 1) // max(1, workers))


def check_options(backend: str, workers: int | None = 1, threads: int | None = None, cpus_per_run: int | float = 1,
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


def require_ray():
    """The ray module; where the optional extra is not installed, one line that says how to install it."""
    try:
        import ray
    except ImportError:
        raise InterpError(RAY_MISSING) from None
    return ray


def result_of(name: str, state: str, error: str | None = None) -> dict:
    """An executor's result for one point."""
    return {"name": name, "state": state, "seconds": 0.0, "error": error, "steps": None, "trained": False}


@dataclass(frozen=True)
class Job:
    """One point's work: `task(folder, payload, device, threads, resubmitted)` (module docstring)."""

    task: Callable[..., dict]
    folder: str
    payload: Any = None

    @property
    def name(self) -> str:
        return Path(self.folder).name


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
    """One result per job an executor was given (`result_of`'s keys), in the order they ended."""

    results: list[dict] = field(default_factory=list)

    def having(self, state: str) -> list[dict]:
        return [r for r in self.results if r["state"] == state]

    @property
    def failed(self) -> list[dict]:
        return self.having("failed")


def run_local(jobs: list[Job], workers: int = 1, threads: int | None = None, device: str = "cpu",
              on_result: Callable[[dict], None] | None = None, on_note: Callable[[str], None] | None = None,
              max_rebuilds: int = MAX_REBUILDS) -> Outcome:
    """Run `jobs` in a pool of `workers` processes (in this process when workers == 1).

    A worker that dies (kill -9, the out-of-memory killer) breaks a process pool: every
    unfinished job then fails with BrokenProcessPool, the ones that never started included.
    So the pool is started again for the unfinished jobs, `max_rebuilds` times at most, each
    job `resubmitted` (a training job resumes from its run's last checkpoint: the dead worker's
    run lock went with it). Only jobs still unfinished after that are failed, with a message
    that says the workers died."""
    threads = threads or default_threads(workers)
    outcome = Outcome()

    def done(result: dict) -> None:
        outcome.results.append(result)
        if on_result is not None:
            on_result(result)

    if workers <= 1:
        for job in jobs:
            done(job.task(job.folder, job.payload, device, threads, False))
        return outcome
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    order = {job.folder: i for i, job in enumerate(jobs)}
    pending, resubmitted, deaths = list(jobs), False, 0
    while pending:
        lost: list[Job] = []
        with ProcessPoolExecutor(max_workers=min(workers, len(pending)), mp_context=mp.get_context("spawn"),
                                 initializer=_worker_init, initargs=(threads,)) as pool:
            futures = {}
            for job in pending:
                try:
                    futures[pool.submit(job.task, job.folder, job.payload, device, threads, resubmitted)] = job
                except BrokenProcessPool:
                    lost.append(job)
            for future in as_completed(futures):
                try:
                    done(future.result())
                except BrokenProcessPool:
                    lost.append(futures[future])
                except Exception as exc:  # noqa: BLE001 - the job could not reach a worker or come back
                    done(result_of(futures[future].name, "failed",
                                   f"the worker could not run it ({type(exc).__name__}: {exc})"))
        # leaving the `with` joined the broken pool's processes: their run locks are free
        if not lost:
            break
        deaths += 1
        pending = sorted(lost, key=lambda job: order[job.folder])
        names = ", ".join(job.name for job in pending)
        if deaths > max_rebuilds:
            for job in pending:
                done(result_of(job.name, "failed",
                               f"the pool's worker processes died {deaths} times (killed, or out of memory) "
                               f"before this run finished; run the sweep again to resume it from its last "
                               f"checkpoint"))
            break
        if on_note is not None:
            on_note(f"interp: a worker process died (killed, or out of memory); starting the pool again for "
                    f"{len(pending)} unfinished run(s), resumed from their last checkpoints: {names}")
        resubmitted = True
    return outcome


def run_ray(jobs: list[Job], address: str | None = None, cpus_per_run: int | float = 1, gpus_per_run: int | float = 0,
            device: str = "cpu", max_retries: int = 3, on_result: Callable[[dict], None] | None = None) -> Outcome:
    """Run `jobs` as Ray tasks: on the cluster at `address`, else on a local Ray instance.
    A task whose worker dies is retried (`max_retries`): a training job resumes from its
    checkpoint (the dead worker's run lock went with its process)."""
    ray = require_ray()
    started_here = not ray.is_initialized()
    if started_here:
        kwargs = {"address": address} if address else {"num_cpus": os.cpu_count() or 1}
        try:
            ray.init(include_dashboard=False, log_to_driver=False, logging_level="ERROR", **kwargs)
        except Exception as exc:  # noqa: BLE001 - Ray's own errors, for a bad --address among others
            raise InterpError(f"could not start or reach Ray ({address or 'a local instance'}): {exc}") from None
    outcome = Outcome()
    try:
        remotes = {}
        for job in jobs:
            if job.task not in remotes:
                remotes[job.task] = ray.remote(num_cpus=cpus_per_run, num_gpus=gpus_per_run,
                                               max_retries=max_retries)(job.task)
        threads = max(1, int(cpus_per_run))
        pending = {remotes[job.task].remote(job.folder, job.payload, device, threads, False): job for job in jobs}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            job = pending.pop(ready[0])
            try:
                result = ray.get(ready[0])
            except Exception as exc:  # noqa: BLE001 - retries exhausted
                result = result_of(job.name, "failed",
                                   f"the Ray task failed after its retries ({type(exc).__name__}: {exc})")
            outcome.results.append(result)
            if on_result is not None:
                on_result(result)
    finally:
        if started_here:
            ray.shutdown()
    return outcome
