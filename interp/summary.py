"""A run's headline numbers from its metrics log alone (no model is loaded)."""

from __future__ import annotations

import math

from interp.runs import Run
from interp.transition import plateau_height, plateau_span, snap_step, tau_half, window_bounds


def run_summary(run: Run) -> dict:
    """Spec, saved steps, plateau height / log K, tau (both kinds) and the final metrics."""
    spec = run.spec
    steps = run.steps
    df = run.metrics
    out: dict = {
        "path": str(run.path),
        "direction": spec.task.direction,
        "k": spec.task.k,
        "n_bases": spec.task.n_bases,
        "dataset_size": spec.task.dataset_size,
        "seed": spec.seed,
        "planned_steps": spec.train.steps,
        "n_checkpoints": len(steps),
        "first_step": steps[0] if steps else None,
        "last_step": steps[-1] if steps else None,
        "last_evaluated": int(df["step"].max()) if not df.empty else None,
        "log_k": run.log_k,
    }
    keys = ("plateau_height", "plateau_start", "plateau_end", "tau_half", "tau_window",
            "window_start", "window_end", "snap_step")
    out.update(dict.fromkeys(keys))
    if df.empty:
        return out
    last = df.iloc[-1]
    for name in ("loss", "loss_first", "loss_cand", "shuffle_gap", "acc_first", "acc_cand", "acc_exact"):
        value = last.get(name)
        out[f"final_{name}"] = None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
    cand = df.dropna(subset=["loss_cand"]) if "loss_cand" in df else df.iloc[0:0]
    if cand.empty:
        return out
    s, lc, lk = cand["step"], cand["loss_cand"], run.log_k
    out["plateau_height"] = plateau_height(s, lc, lk)
    if "shuffle_gap" in cand and cand["shuffle_gap"].notna().all():
        span = plateau_span(s, lc, cand["shuffle_gap"], lk)
        if span is not None:
            out["plateau_start"], out["plateau_end"] = span
    out["tau_half"] = tau_half(s, lc, lk)
    bounds = window_bounds(s, lc, lk)
    if bounds is not None:
        out["window_start"], out["window_end"] = bounds
        out["tau_window"] = bounds[1] - bounds[0]
    out["snap_step"] = snap_step(s, lc, lk)
    return out
