"""`interp analyze SWEEP` (or FAMILY): the analysis suite over every finished run of a sweep or a
fork family, on the local process pool (the default) or Ray.

Each run is analysed by `interp.analysis.suite.run_suite`, exactly as `interp analyze RUN`
does, and cached in its own folder, so a second call computes only what is new, a run added
to the family costs one run's analysis, and a call killed mid-way loses at most the results
being computed (each cache entry is written atomically). Runs that are not finished (failed,
running, interrupted, not started, damaged) or censored (they never reached tau_half, so the
analyses have no tau to place their steps) are named and skipped. The executors are the
ones that train the runs (`interp.collections.executors`): they decide only where `analyze_point`
runs. Then the table's circuit columns are read back from the caches and fitted.

Two calls on one sweep at once never compute a result twice: a run is analysed holding its
analysis lock (`ANALYSIS_LOCK`, `RUN/cache/.lock`, an OS file lock that a killed process leaves
free), and a call finding it held analyses the other runs first, then waits for it and reads
what the other call computed from the cache.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interp.collections.executors import Job, check_options, require_ray, result_of, run_local, run_ray
from interp.errors import InterpError
from interp.run_layout import CACHE_DIR

ANALYSIS_LOCK = f"{CACHE_DIR}/.lock"  # in a run folder: held (an OS file lock) by the one process analysing the run
WAIT_SECONDS = 0.5  # poll interval while another process analyses a run


def claim_analysis(folder: Path, wait: bool):
    """The run's analysis lock (`ANALYSIS_LOCK`, an OS file lock: a killed holder leaves none), held, and
    None; or, when another process holds it and `wait` is False, None and a line naming the holder. A
    cache that cannot hold the lock (a file, a read-only folder) shares nothing: no lock, and no wait."""
    from interp.files import WriterLock

    path = Path(folder) / ANALYSIS_LOCK
    try:
        path.parent.mkdir(exist_ok=True)
        lock = WriterLock(path)
        while True:
            try:
                lock.acquire(retries=0)
                return lock, None
            except InterpError:
                if not wait:
                    return None, f"being analysed by another process ({lock.holder() or 'unknown pid'})"
                time.sleep(WAIT_SECONDS)
    except OSError:
        return None, None


def analyze_point(folder: str, request: dict, device: str = "cpu", threads: int | None = None,
                  resubmitted: bool = False) -> dict:
    """Run the suite on one run folder (`request`: only, steps, options, cache, wait; with the edges the suite
    caches the routing head's sensitivity too: `interp.analysis.suite.findings_routing_head`) holding its analysis
    lock (`claim_analysis`). Never raises: returns {"name", "state" (done, failed, or busy: another process holds
    the lock and `wait` is False; nothing was computed), "seconds", "error",
    "computed", "cached", "problems", "notes", "findings"}. Resubmitted after a worker died, it simply
    runs again: what the dead worker cached is read back. In the caller's own process the caller's torch thread
    count is given back afterwards (`interp.devices.torch_threads`)."""
    from interp.devices import torch_threads

    with torch_threads(threads):
        return _analyze_point(folder, request, device)


def _analyze_point(folder: str, request: dict, device: str) -> dict:
    """`analyze_point`'s work, at the thread count it set."""
    from interp.analysis.suite import run_suite
    from interp.runs import Run

    began = time.perf_counter()
    result = {**result_of(Path(folder).name, "done"), "computed": 0, "cached": 0, "problems": [], "notes": [],
              "findings": {}}
    lock = None
    try:
        if request.get("cache", True):
            lock, busy = claim_analysis(Path(folder), request.get("wait", True))
            if busy:
                result.update(state="busy", error=busy)
                return result
        run = Run.open(folder)
        suite = run_suite(run, only=request.get("only"), steps=request.get("steps"),
                          options=request.get("options"), device=device, progress=False,
                          cache=request.get("cache", True))
        result.update(computed=suite.cache_misses, cached=suite.cache_hits, problems=list(suite.problems),
                      notes=list(suite.notes), findings=dict(suite.findings))
    except Exception as exc:  # noqa: BLE001 - a failed run is a result, the others go on
        result.update(state="failed", error=str(exc) if isinstance(exc, InterpError) else f"{type(exc).__name__}: {exc}")
    finally:
        if lock is not None:
            lock.release()
        result["seconds"] = round(time.perf_counter() - began, 3)
    return result


@dataclass
class SweepAnalysis:
    """What `analyze_sweep` did: one result per analysed run (`analyze_point`'s keys, in the
    sweep's order), the runs it skipped, with why, and then the table with its circuit columns
    (`Sweep.table(circuits=True)`) and their fits (`interp.sweeps.circuit_fits.circuit_fits`)."""

    results: list[dict] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    table: Any = None  # pandas DataFrame
    fits: Any = None  # interp.sweeps.family.Fits
    edges: Any = None  # interp.sweeps.edge_overlap.EdgeOverlap, when the edges analysis was asked for

    @property
    def computed(self) -> int:
        return sum(r.get("computed", 0) for r in self.results)

    @property
    def cached(self) -> int:
        return sum(r.get("cached", 0) for r in self.results)

    @property
    def failed(self) -> list[dict]:
        return [r for r in self.results if r["state"] != "done"]

    @property
    def with_problems(self) -> list[dict]:
        return [r for r in self.results if r.get("problems")]

    @property
    def run_notes(self) -> dict[str, list[str]]:
        """Each run's problems (steps not analysed) then notes (a step beyond the run, cache entries not used), each
        said once; runs with none are left out."""
        out = {r["name"]: list(dict.fromkeys([*(r.get("problems") or ()), *(r.get("notes") or ())])) for r in self.results}
        return {name: lines for name, lines in out.items() if lines}


def finished_runs(sweep, table=None) -> tuple[list[str], dict[str, str]]:
    """The runs to analyse (done and not censored, in the sweep's order) and the others with why."""
    table = sweep.table() if table is None else table
    todo, skipped = [], {}
    for r in table.to_dict("records"):
        name, status = r["run"], r["status"]
        if status != "done":
            why = status + (f": {r['error']}" if isinstance(r.get("error"), str) and r["error"] else "")
            skipped[name] = why
        elif r.get("censored_tau_half"):
            skipped[name] = (f"censored: it never reached tau_half within its {r['steps_run']} steps, so the "
                             f"analyses have no tau to place their steps")
        else:
            todo.append(name)
    return todo, skipped


def analyze_sweep(sweep, only=None, steps=None, options: dict | None = None, backend: str = "local",
                  workers: int = 1, threads: int | None = None, device: str = "cpu", address: str | None = None,
                  cpus_per_run: int | float = 1, gpus_per_run: int | float = 0, cache: bool = True,
                  progress: bool = True, table=None, wait: bool = True, warn: bool = True) -> SweepAnalysis:
    """Run the analysis suite (`only`, `steps` and `options` as for `run_suite`) over every
    finished run of `sweep` (a Sweep or a ForkFamily), on `backend` ("local": `workers` processes with `threads` torch
    threads each; "ray": Ray tasks of `cpus_per_run` CPUs). Bad input (an unknown analysis or
    option, no finished run, Ray not installed) raises InterpError before anything runs; a run
    whose analysis fails is a result, and the others go on. The local pool's workers import
    the calling script again: call this under `if __name__ == "__main__":`. A run another process
    is analysing (its `ANALYSIS_LOCK` held: another `interp analyze` of the same sweep) is left
    until the others are done, then waited for and read from its cache, so no result is computed
    twice; with `wait=False` it is named in `skipped` instead. The table with the
    circuit columns and their fits are built at the end, from the caches (and, when `only` has the
    edges analysis, `edges`: `interp.sweeps.edge_overlap.edge_overlap`, whose routing-first share needs each
    run's routing head: its sensitivity at the last readable checkpoint is then computed and cached too). Each
    run's problems are written on stderr as it finishes; with `warn=False` they are left to the caller, who has
    them in the results (`interp analyze SWEEP` prints them once, with each run's notes: `run_notes`)."""
    from tqdm.auto import tqdm

    from interp.analysis import registry
    from interp.analysis.suite import check_fits, check_options as check_analysis_options
    from interp.sweeps.circuit_fits import circuit_fits

    check_options(backend, workers, threads, cpus_per_run, gpus_per_run)
    names = registry.parse_only(only)
    registry.require_extras(names)
    if backend == "ray":
        require_ray()
    todo, skipped = finished_runs(sweep, table)
    if not todo:
        counts = ", ".join(f"{n} {s}" for s, n in sweep.counts().items() if n)
        censored = sum(why.startswith("censored") for why in skipped.values())
        raise InterpError(f"{sweep.path} has no finished run to analyse ({counts or 'no runs'}"
                          + (f"; {censored} of the done censored, never reaching tau_half" if censored else "") + ")")
    entries = [registry.get(n) for n in names]
    options = dict(options or {})
    for entry in entries:  # values given as text are parsed as the CLI does, then checked against each run
        for option in entry.options:
            for key in (option.dest, option.param):
                if isinstance(options.get(key), str):
                    options[key] = option.read(options[key])
    for name in todo:
        check_analysis_options(sweep.run(name), entries, options)
        check_fits(sweep.run(name), entries, options, device)  # each run's memory, before any is analysed
    request = {"only": list(names), "steps": steps, "options": options, "cache": cache, "wait": False}
    jobs = [Job(analyze_point, str(sweep.path / name), request) for name in todo]
    out = SweepAnalysis(skipped=skipped)
    bar = tqdm(total=len(jobs), desc=f"analyze {sweep.name}", unit="run", disable=not progress, dynamic_ncols=True)
    for name, why in skipped.items():
        bar.write(f"interp: skipped {name}: {why}", file=sys.stderr)
    began = time.perf_counter()

    busy: list[dict] = []  # runs another process is analysing: waited for after the others, or named

    def on_result(result: dict) -> None:
        if result["state"] == "busy":
            busy.append(result)
            return
        out.results.append(result)
        if result["state"] != "done":
            bar.write(f"interp: run failed: {result['name']}: {result.get('error')}", file=sys.stderr)
        elif progress:
            bar.write(f"{result['name']}: {result.get('computed', 0)} computed, {result.get('cached', 0)} from "
                      f"cache, {result['seconds']:.1f} s", file=sys.stderr)
        for line in (result.get("problems") or ()) if warn else ():
            bar.write(f"interp: warning: {result['name']}: {line}", file=sys.stderr)
        bar.update(1)

    def execute(jobs: list[Job]) -> None:
        if backend == "ray":
            run_ray(jobs, address=address, cpus_per_run=cpus_per_run, gpus_per_run=gpus_per_run, device=device,
                    on_result=on_result)
        else:
            run_local(jobs, workers=workers, threads=threads, device=device, on_result=on_result,
                      on_note=lambda line: bar.write(line, file=sys.stderr))

    try:
        execute(jobs)
        held = [Job(analyze_point, str(sweep.path / r["name"]), {**request, "wait": True}) for r in busy]
        if held and wait:
            bar.write(f"interp: waiting for another process analysing {', '.join(j.name for j in held)}; what it "
                      f"computes is then read from the cache", file=sys.stderr)
            busy.clear()
            execute(held)
        for result in busy:
            out.skipped[result["name"]] = result["error"]
            bar.write(f"interp: skipped {result['name']}: {result['error']}", file=sys.stderr)
            bar.update(1)
    finally:
        bar.close()
    order = {name: i for i, name in enumerate(todo)}
    out.results.sort(key=lambda r: order.get(r["name"], len(order)))
    out.seconds = time.perf_counter() - began
    out.table = sweep.table(circuits=True)  # the circuit columns read each run's analysis cache
    out.fits = circuit_fits(out.table)
    if "edges" in names:  # the circuits' overlap at tau and the routing-first share, read from the caches
        from interp.sweeps.edge_overlap import edge_overlap

        out.edges = edge_overlap(sweep, out.table, options)
    return out
