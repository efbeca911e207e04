"""A Run in a notebook: its spec, steps saved, plateau height, tau, the routing head when the
sensitivity analysis is cached, and its status. Reads run.json, manifest.json, metrics.jsonl,
status.json and the cache: never a checkpoint, never torch."""

from __future__ import annotations

from interp.display.html import card
from interp.errors import InterpError
from interp.presentable import renders
from interp.runs import Run
from interp.summary import run_rows, run_summary


def status_text(run: Run) -> str:
    """done / failed (with the error) / running (the writer's lock is held) / not finished."""
    if run.writing:
        return "running (a process holds its lock)"
    status = run.status or {}
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
    has not been computed (nothing is computed here)."""
    from interp.analysis import registry
    from interp.analysis.cache import ResultCache
    from interp.analysis.findings import routing_head

    entry = registry.REGISTRY["sensitivity"]
    # any parameters: entry.params() would import the analysis module, and with it torch
    key = {"analysis": entry.name, "version": entry.version, "params": None}
    sens = ResultCache(run).cached_any(key).get("sensitivity")
    if sens is None or sens.empty:
        return None
    head = routing_head(sens)
    step = int(sens["step"].max())
    share = sens[(sens["step"] == step) & (sens["head_name"] == head)]["z_share"].iloc[0]
    return f"{head} (z-share {share:.3f} at step {step}, from the cached sensitivity analysis)"


@renders("interp.runs:Run")
def run_html(run: Run) -> str:
    try:
        rows = run_rows(run_summary(run))
    except InterpError as exc:  # an unreadable manifest or metrics log: say so, show what is known
        rows = [("run", str(run.path)), ("problem", str(exc))]
    routing = cached_routing(run)
    rows.append(("routing head", routing or "not computed yet (interp analyze RUN, or interp.timeline(run))"))
    rows.append(("status", status_text(run)))
    if run.fork:
        rows.append(("fork of", f"{run.fork.get('parent', '?')} at step {run.fork.get('parent_step', '?')}, "
                                f"arm {run.fork.get('arm', '?')}"))
    return card(f"Run {run.name}", rows)
