"""Where a sweep's runs are trained: a local process pool (the default) or Ray tasks.

An executor only decides *where* `train_point` is called, never *what* it does: every point
is an ordinary run folder, trained by `interp.train.train`, which resumes from the last
checkpoint and holds the run's OS file lock. So running a sweep again skips finished runs
and resumes interrupted ones, and no two workers ever write one run. Ray is imported only
by `run_ray` (an optional extra: pip install -e '.[ray]').

Bit-exactness: on the CPU a run's weights depend on the torch thread count (matrix products
are blocked differently), so each run gets `threads` torch threads whatever the executor:
`cores // workers` by default. The same sweep with the same threads per run gives the same
weights sequentially, in a pool or on Ray.
"""

from __future__ import annotations

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


def default_threads(workers: int) -> int:
    return max(1, (os.cpu_count() or 1) // max(1, workers))


def train_point(folder: str, spec: dict, device: str = "cpu", threads: int | None = None,
                wait: bool = True) -> dict:
    """Train one point of a sweep to its end: create its run folder, or resume it, or skip it
    when it is done. Never raises: returns {"name", "state", "seconds", "error", "steps"}."""
    import torch

    from interp.runs import Run
    from interp.spec import RunSpec
    from interp.train import train

    if threads:
        torch.set_num_threads(threads)
    path = Path(folder)
    began = time.perf_counter()
    result = {"name": path.name, "state": "done", "seconds": 0.0, "error": None, "steps": None, "trained": False}
    run = None
    try:
        spec = RunSpec.from_dict(spec)
        if Run.is_run(path):
            run = Run.open(path)
            if run.spec != spec:
                raise InterpError(f"{path} holds a run with another spec than the sweep's point")
        else:
            run = Run.create(path, spec)
        while True:  # one writer per run: wait while another process (a lost worker) holds it
            try:
                run.acquire()
                break
            except InterpError:
                if not wait:
                    raise
                time.sleep(WAIT_SECONDS)
        if (run.status or {}).get("state") != "done":
            outcome = train(run, device=device, progress=False)
            result["trained"] = True
            result["steps"] = outcome.last_step
            if not (Run.open(path).status or {}).get("state") == "done":
                result["state"] = "interrupted"
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
    results: list[dict] = field(default_factory=list)

    @property
    def failed(self) -> list[dict]:
        return [r for r in self.results if r["state"] == "failed"]


Job = tuple[str, dict]  # (run folder, spec as a dict)


def run_local(jobs: list[Job], workers: int = 1, threads: int | None = None, device: str = "cpu",
              on_result: Callable[[dict], None] | None = None) -> Outcome:
    """Train `jobs` in a pool of `workers` processes (in this process when workers == 1)."""
    threads = threads or default_threads(workers)
    outcome = Outcome()

    def done(result: dict) -> None:
        outcome.results.append(result)
        if on_result is not None:
            on_result(result)

    if workers <= 1:
        for folder, spec in jobs:
            done(train_point(folder, spec, device, threads))
        return outcome
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"),
                             initializer=_worker_init, initargs=(threads,)) as pool:
        futures = {pool.submit(train_point, folder, spec, device, threads): folder for folder, spec in jobs}
        for future in as_completed(futures):
            try:
                done(future.result())
            except Exception as exc:  # noqa: BLE001 - a worker that died
                done({"name": Path(futures[future]).name, "state": "failed", "seconds": 0.0, "steps": None,
                      "error": f"the worker process died ({type(exc).__name__}: {exc}); run the sweep again "
                               f"to resume it", "trained": False})
    return outcome


def run_ray(jobs: list[Job], address: str | None = None, cpus_per_run: int | float = 1, gpus_per_run: int | float = 0,
            device: str = "cpu", max_retries: int = 3, on_result: Callable[[dict], None] | None = None) -> Outcome:
    """Train `jobs` as Ray tasks: on the cluster at `address`, else on a local Ray instance.
    A task whose worker dies is retried (`max_retries`) and resumes from its checkpoint."""
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
        task = ray.remote(num_cpus=cpus_per_run, num_gpus=gpus_per_run, max_retries=max_retries)(train_point)
        threads = max(1, int(cpus_per_run))
        pending = {task.remote(folder, spec, device, threads): folder for folder, spec in jobs}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            folder = pending.pop(ready[0])
            try:
                result = ray.get(ready[0])
            except Exception as exc:  # noqa: BLE001 - retries exhausted
                result = {"name": Path(folder).name, "state": "failed", "seconds": 0.0, "steps": None,
                          "error": f"the Ray task failed after its retries ({type(exc).__name__}: {exc})",
                          "trained": False}
            outcome.results.append(result)
            if on_result is not None:
                on_result(result)
    finally:
        if started_here:
            ray.shutdown()
    return outcome
