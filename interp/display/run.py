"""A Run in a notebook: its spec, steps saved, plateau height, tau, the routing head when the
sensitivity analysis is cached, and its status. Reads run.json, manifest.json, metrics.jsonl,
status.json and the cache: never a checkpoint, never torch."""

from __future__ import annotations

from interp.display.html import card
from interp.errors import InterpError
from interp.presentable import renders
from interp.runs import STATES, STATUS_FILE, Run
from interp.summary import run_rows, run_summary


def status_text(run: Run) -> str:
    """done / failed (with the error) / running (the writer's lock is held) / not finished."""
    if run.writing:
        return "running (a process holds its lock)"
    try:
        status = run.status
    except InterpError:
        status = "unreadable"
    if (run.path / STATUS_FILE).exists() and not (isinstance(status, dict) and status.get("state") in STATES):
        return f"unknown: {STATUS_FILE} is not a run status (see the problem row)"
    status = status or {}
    state = status.get("state")
    if state is None:
        return "not finished (no status.json: interrupted, or still being created)"
    text = str(state)
    if status.get("wall_seconds") is not None:
        text += f" after {status['wall_seconds']:.0f} s"
    if status.get("stopped_early"):
        text += " (stopped early: snapped)"
    if status.get("error"):
        text += f": {status['error']}"
    return text


def cached_routing(run: Run) -> str | None:
    """"L0H3 (z-share 0.41 at step 1600)" from the cached sensitivity analysis, or None when it
    has not been computed (nothing is computed here); a damaged entry is named, and one at a later
    step than the last readable leaves the head unknown."""
    from interp.analysis import registry
    from interp.analysis.cache import ResultCache
    from interp.analysis.findings import routing_head

    entry = registry.REGISTRY["sensitivity"]
    # any parameters: the head from whichever sensitivity was cached, whatever options it was computed with
    key = {"analysis": entry.name, "version": entry.version, "params": None}
    store = ResultCache(run)
    sens = store.cached_any(key).get("sensitivity")
    damaged = store.damaged.get(entry.name, {})  # entries left out: named, as `interp analyze` names them
    redo = f"interp analyze {run.path} --only sensitivity recomputes it"
    if sens is None or sens.empty:
        return f"unknown: {'; '.join(damaged.values())} ({redo})" if damaged else None
    step = int(sens["step"].max())
    later = {s: note for s, note in damaged.items() if s > step}
    if later:  # the head is read at the last step: never shown from an earlier one as if it were the last
        return f"unknown: the cached sensitivity at step {max(later)} is damaged: {later[max(later)]} ({redo})"
    head = routing_head(sens)
    share = sens[(sens["step"] == step) & (sens["head_name"] == head)]["z_share"].iloc[0]
    text = f"{head} (z-share {share:.3f} at step {step}, from the cached sensitivity analysis)"
    return text + (f"; damaged, left out: {'; '.join(damaged.values())}" if damaged else "")


def folder_problem(run: Run) -> str | None:
    """Why the run's folder cannot be trusted now (`interp.collections.states.examine`: run.json, status.json,
    manifest.json, metrics.jsonl, the checkpoints listed), or None: a card shows damage, never hides it."""
    from interp.collections.states import examine

    try:
        st = examine(run.path, Run.open(run.path).spec)  # run.json as it is now, not as it was opened
    except InterpError as exc:
        return str(exc)
    return st.error if st.state == "damaged" else None


@renders("interp.runs:Run")
def run_html(run: Run) -> str:
    problem = folder_problem(run)
    try:
        rows = run_rows(run_summary(run))
    except InterpError as exc:  # an unreadable manifest or metrics log: say so, show what is known
        rows, problem = [("run", str(run.path))], problem or str(exc)
    if problem:
        rows.append(("problem", problem))
    routing = cached_routing(run)
    rows.append(("routing head", routing or "not computed yet (interp analyze RUN, or interp.timeline(run))"))
    rows.append(("status", status_text(run)))
    if run.fork:
        rows.append(("fork of", f"{run.fork.get('parent', '?')} at step {run.fork.get('parent_step', '?')}, "
                                f"arm {run.fork.get('arm', '?')}"))
    return card(f"Run {run.name}", rows)
