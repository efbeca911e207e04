"""The analysis suite behind `interp analyze`: the analyses of the registry over a run's
checkpoints, cached, plus the headline findings.

Steps are the outer loop, so each checkpoint is loaded once and shared by every analysis
that needs it at that step (analyses that change the weights load their own). A checkpoint
that cannot be read (missing or corrupt) is named in `SuiteResult.problems` and the analyses
that needed it are skipped (results already cached at that step are still used); the other
steps are still analysed. What an analysis's entry says it needs is provided: the routing head
(read at the last step whose sensitivity can be had, walking back past unreadable checkpoints),
a reader of the previous checkpoints, no shared checkpoint where it starts from the optimizer state.
Findings that read the routing head (`FINDINGS_READ_ROUTING`: the edges') get it the same way when no chosen
analysis gives it: its sensitivity at one checkpoint computed and cached (`findings_routing_head`).
Results are cached in the run folder per analysis, parameters and step, so a second call
computes only what is new; cache entries that could not be used, and a cache that could not
be, are named in `SuiteResult.notes` (and `cache_notes`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pandas as pd
from tqdm.auto import tqdm

from interp.analysis import registry
from interp.analysis.cache import ResultCache
from interp.analysis.common import provided, select_steps
from interp.errors import InterpError
from interp.runs import Run
from interp.transition import tau_or_none


@dataclass
class SuiteResult:
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    findings: dict = field(default_factory=dict)
    params: dict[str, dict] = field(default_factory=dict)  # the parameters each analysis ran with
    labels: dict[str, dict[int, str]] = field(default_factory=dict)  # analysis -> step -> "pre"/"mid"/...
    notes: list[str] = field(default_factory=list)  # e.g. a relative step beyond the run
    problems: list[str] = field(default_factory=list)  # steps that could not be analysed, and why
    unreadable: dict[int, str] = field(default_factory=dict)  # step -> why its checkpoint could not be read
    routing_step: int | None = None  # the step the routing head was read at, when an analysis needed it
    cache_notes: list[str] = field(default_factory=list)  # cache entries not used, a cache not usable (also in notes)
    cache_hits: int = 0
    cache_misses: int = 0
    missing: dict[str, list[int]] = field(default_factory=dict)  # compute=False: analysis -> steps not cached
    damaged: dict[str, dict[int, str]] = field(default_factory=dict)  # analysis -> step -> its cache entry not used


def memo_key(key: dict, step: int) -> tuple[str, int]:
    """A cache key and step as a dict key (`routing_head_of`'s `seen`)."""
    return json.dumps(key, sort_keys=True), step


def routing_head_of(run: Run, store: ResultCache, device: str = "cpu", unreadable: dict[int, str] | None = None,
                    compute: bool = True, seen: dict | None = None) -> tuple[str, int] | None:
    """The routing head and the step it was read at: the largest z-share at the last saved step
    whose sensitivity can be had (cached like any other analysis). Steps whose checkpoint cannot
    be read are skipped, from the last backwards, and recorded in `unreadable` (step -> why);
    InterpError only when no step can be read. With `compute=False` only the cache is read: the
    last step whose sensitivity is cached, or None when none is. The sensitivity tables it read or
    computed go in `seen` (by `memo_key`), so the suite does not compute them again (with --no-cache)."""
    from interp.analysis import sensitivity

    entry = registry.get("sensitivity")
    params = entry.params()
    key = entry.cache_key(params)
    unreadable = {} if unreadable is None else unreadable
    seen = {} if seen is None else seen
    for step in reversed(run.steps):
        if step in unreadable:
            continue
        if not compute:
            tables = store.load(key, step, action="left out")
            if tables is not None:
                seen[memo_key(key, step)] = tables
                return sensitivity.routing_head(tables["sensitivity"]), step
            continue
        try:
            tables = store.per_step(key, [step], lambda s: {"sensitivity": entry.at_step()(run, s, device=device, **params)})
        except InterpError as exc:
            unreadable[step] = str(exc)
            continue
        seen[memo_key(key, step)] = tables
        return sensitivity.routing_head(tables["sensitivity"]), step
    if not compute:
        return None
    last = run.steps[-1] if run.steps else None
    raise InterpError(f"the routing head cannot be found: no checkpoint of {run.path} can be read"
                      + (f" (the last, step {last}: {unreadable.get(last)})" if last is not None else ""))


# analyses whose findings read the routing head without needing it to run (edges: whether the first edge to form is
# the routing head's); when no chosen analysis gives it, it is read as `interp analyze SWEEP` reads it for the edges
FINDINGS_READ_ROUTING = ("edges",)


def findings_routing_head(run: Run, device: str = "cpu", unreadable: dict[int, str] | None = None, cache: bool = True,
                          compute: bool = True, notes: list[str] | None = None) -> tuple[tuple[str, int] | None, int]:
    """(routing head and its step, or None; results computed) for findings that read it: its sensitivity at the
    last readable checkpoint computed and cached (read back when cached; with `compute=False` only read) in a
    store of its own, so a head read back is no result asked for. Why there is none goes in `notes`, with the
    cache entries not used. Shared by `run_suite` and so by `interp analyze SWEEP` (each run's edges)."""
    store = ResultCache(run, enabled=cache)
    found = None
    try:
        found = routing_head_of(run, store, device, dict(unreadable or {}), compute)
    except InterpError as exc:
        if notes is not None:
            notes.append(f"no routing head for the edges' routing-first share: {exc}")
    if notes is not None:
        notes.extend(n for n in store.notes if n not in notes)
    return found, store.misses


def check_options(run: Run, entries, options: dict) -> None:
    """The options that need the run (e.g. --heads against its model), before any work."""
    for entry in entries:
        for option in entry.options:
            value = options.get(option.dest, options.get(option.param))
            if value is not None and option.check is not None:
                option.check(value, run.spec)


def check_fits(run: Run, entries, options: dict, device: str) -> None:
    """Each analysis whose module says what its work needs (a `check_fits(run, params, device)`: the edges' EAP-IG
    memory) refuses, before any work, what `device` cannot hold."""
    for entry in entries:
        fits = entry.hook("check_fits")
        if fits is not None:
            fits(run, entry.params(options), device)


def run_suite(
    run: Run,
    only=None,
    steps=None,
    options: dict | None = None,
    device: str = "cpu",
    progress: bool = True,
    cache: bool = True,
    compute: bool = True,
) -> SuiteResult:
    """Run the chosen analyses (every default one when `only` is None) and derive the findings.

    `steps` overrides the default steps of every chosen analysis (see
    `interp.analysis.common.select_steps`); `options` sets parameters by option or parameter
    name (`n_groups`, `method`, `heads`, ...) for the analyses that have them. With
    `compute=False` nothing is computed and no checkpoint is loaded: only cached results are
    read, and an analysis missing at some of its steps is left out whole (its tables empty, the
    steps in `missing`), so the findings never rest on part of a series. Raises
    InterpError only for bad input; a step that fails is reported in `problems` and the rest
    goes on.
    """
    options = dict(options or {})
    names = registry.parse_only(only)
    if run.spec.task.k < 2:
        raise InterpError(f"{run.path} has K = 1, the control with nothing to disambiguate: the analyses read the "
                          f"shuffle gap, the routing head and swaps of z for another selector of the base, and K = 1 "
                          f"has none; its numbers are the training log's (interp show: the full loss, exact match)")
    if compute:  # an analysis whose pip extra is missing would fail at every step
        registry.require_extras(names)
    entries = [registry.get(n) for n in names]
    for entry in entries:  # option values given as text (e.g. from a script) are parsed as the CLI does
        for option in entry.options:
            for key in (option.dest, option.param):
                if isinstance(options.get(key), str):
                    options[key] = option.read(options[key])
    check_options(run, entries, options)
    if compute:
        check_fits(run, entries, options, device)
    store = ResultCache(run, enabled=cache)
    result = SuiteResult()
    plans: dict[str, list[tuple[int, str]]] = {}
    dropped: list[str] = []
    for entry in list(entries):
        try:
            plans[entry.name] = select_steps(run, steps if steps is not None else entry.steps, notes=result.notes,
                                             defaults=steps is None)
        except InterpError as exc:  # its own default steps (e.g. pre, mid) none near a checkpoint: the others go on
            if steps is not None or len(dropped) + 1 == len(names):
                raise
            named = str(exc).startswith("no requested step can be read")  # each step's reason is in the notes
            result.notes.append(f"{entry.name} left out: " + (f"none of its steps ({entry.steps}) can be read (each "
                                                              f"named above)" if named else str(exc)))
            dropped.append(entry.name)
            entries.remove(entry)
            continue
        result.labels[entry.name] = {s: lab for s, lab in plans[entry.name] if lab}
    unreadable = result.unreadable
    routing: str | None = None
    seen: dict = {}  # the sensitivity the routing head was read from: not computed (or read) twice
    for entry in list(entries):
        params = entry.params(options)
        need = entry.need("routing_head")
        if need is not None and params.get(need.param) == registry.ROUTING:  # read from the sensitivity analysis
            if routing is None:
                found = routing_head_of(run, store, device, unreadable, compute, seen)
                if found is None:  # compute=False and no sensitivity cached: nothing to read it from
                    result.missing[entry.name] = [s for s, _ in plans[entry.name]]
                    entries.remove(entry)
                    continue
                routing, result.routing_step = found
                result.problems.extend(f"step {s}: {why}" for s, why in sorted(unreadable.items()))
            params[need.param] = routing
        result.params[entry.name] = params
    extras = {entry.name: provided(entry, run, cache) for entry in entries}  # e.g. a reader of the previous checkpoints

    all_steps = sorted({s for plan in plans.values() for s, _ in plan})
    bar = tqdm(total=sum(len(plan) for plan in plans.values()), desc="analyze", unit="step",
               disable=not progress, leave=False)
    frames: dict[str, list[pd.DataFrame]] = {}
    for step in all_steps:
        todo = [e for e in entries if any(s == step for s, _ in plans[e.name])]
        hits = {}
        for e in todo:
            key = e.cache_key(result.params[e.name])
            hits[e.name] = seen.pop(memo_key(key, step)) if memo_key(key, step) in seen else store.load(key, step)
        model = None
        if not compute:
            for entry in todo:
                if hits[entry.name] is None:
                    result.missing.setdefault(entry.name, []).append(step)
                else:
                    for name, df in hits[entry.name].items():
                        frames.setdefault(name, []).append(df)
            bar.update(len(todo))
            continue
        if any(hits[e.name] is None and e.takes_model for e in todo) and step not in unreadable:
            try:
                model = run.model(step, device=device)
            except InterpError as exc:
                unreadable[step] = str(exc)
                result.problems.append(f"step {step}: {exc}")
        for entry in todo:
            bar.set_description(entry.name)
            tables = hits[entry.name]
            if tables is None and entry.takes_model and step in unreadable:
                bar.update(1)  # its checkpoint cannot be read: named in problems once, above
                continue
            if tables is None:
                params = result.params[entry.name]
                try:
                    out = entry.at_step()(run, step, device=device, **({"model": model} if entry.takes_model else {}),
                                          **params, **extras[entry.name])
                except InterpError as exc:
                    result.problems.append(f"step {step}, {entry.name}: {exc}")
                    bar.update(1)
                    continue
                tables = out if isinstance(out, dict) else {entry.name: out}
                store.store(entry.cache_key(params), step, tables)
            for name, df in tables.items():
                frames.setdefault(name, []).append(df)
            bar.update(1)
    bar.close()
    for entry in entries:
        for name in entry.table_names:
            parts = [] if entry.name in result.missing else frames.get(name, [])
            df = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
            labels = result.labels.get(entry.name)
            if labels and not df.empty:
                df["label"] = df["step"].map(labels).fillna("")
            result.tables[name] = df
    for name in [*result.missing, *dropped]:  # analyses left out whole (compute=False, no step): no partial tables
        for table in registry.get(name).table_names:
            result.tables.setdefault(table, pd.DataFrame())
    for entry in entries:  # tables an analysis derives from its own (e.g. attention mass per segment)
        derive = entry.hook("derive")
        if derive is not None and all(not result.tables[name].empty for name in entry.table_names):
            result.tables.update(derive(run, result.tables))
    result.cache_hits, result.cache_misses = store.hits, store.misses
    result.cache_notes = store.notes
    result.damaged = store.damaged
    result.notes.extend(store.notes)
    from interp.analysis.findings import findings

    result.findings = findings(run, result.tables, tau_or_none(run), unreadable=unreadable)
    reading = [e for e in entries if e.name in FINDINGS_READ_ROUTING and e.name not in result.missing
               and all(not result.tables[name].empty for name in e.table_names)]
    if reading and "routing_head" not in result.findings:  # no chosen analysis gave it (e.g. --only edges)
        found, computed = findings_routing_head(run, device, unreadable, cache, compute, result.notes)
        result.cache_misses += computed
        if found is not None:
            result.routing_step = found[1]
            seeded = {**result.findings, "routing_head": found[0]}
            for entry in reading:
                result.findings.update(entry.hook("findings")(run, result.tables, tau_or_none(run), seeded))
    return result
