"""When does the loss leave the plateau? tau definitions, onsets and plateau height
(docs/definitions.md, "Transition times").

All functions take evaluated steps and values as 1-D sequences (sorted by step) and return
a step, or None when the event never happens in the series.

- tau_half (the default tau): first evaluated step with candidate loss < 0.5 log K.
- tau_window: t_end - t_start, t_end = first step < 0.05 log K, t_start = last step before
  t_end that is > 0.95 log K.
- onset: first step at which a series crosses a threshold and stays across it for m
  consecutive evaluations (the crossing one included).
- plateau height: median of candidate loss / log K from the first evaluation at or below
  1.05 log K (the marginal is reached) to t_start (the last one above 0.95 log K before the snap).
"""

from __future__ import annotations

from numpy.typing import ArrayLike

import numpy as np

from interp.errors import InterpError

TAU_KINDS = ("half", "window")
# Steps relative to tau (docs/definitions.md, "Ablation"): pre = tau/4, mid = tau, post = 2 tau.
RELATIVE_STEPS = {"pre": 0.25, "mid": 1.0, "post": 2.0}
SNAP_FRACTION = 0.05  # candidate loss below this multiple of log K: snapped
LEAVE_FRACTION = 0.95  # below this multiple of log K: left the plateau


def _arrays(steps: ArrayLike, values: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    s, v = np.asarray(steps, dtype=np.int64), np.asarray(values, dtype=np.float64)
    if s.shape != v.shape or s.ndim != 1:
        raise ValueError(f"steps and values must be 1-D of one length, got {s.shape} and {v.shape}")
    if len(s) > 1 and not (np.diff(s) > 0).all():
        raise ValueError("steps must be strictly increasing")
    return s, v


def first_below(steps: ArrayLike, values: ArrayLike, threshold: float) -> int | None:
    s, v = _arrays(steps, values)
    hits = np.flatnonzero(v < threshold)
    return int(s[hits[0]]) if len(hits) else None


def tau_half(steps: ArrayLike, loss_cand: ArrayLike, log_k: float) -> int | None:
    return first_below(steps, loss_cand, 0.5 * log_k)


def snap_step(steps: ArrayLike, loss_cand: ArrayLike, log_k: float) -> int | None:
    """First evaluated step with candidate loss below 0.05 log K."""
    return first_below(steps, loss_cand, SNAP_FRACTION * log_k)


def window_bounds(steps: ArrayLike, loss_cand: ArrayLike, log_k: float) -> tuple[int, int] | None:
    """(t_start, t_end) of the transition window, or None if the loss never snaps."""
    s, v = _arrays(steps, loss_cand)
    end_hits = np.flatnonzero(v < SNAP_FRACTION * log_k)
    if not len(end_hits):
        return None
    end = end_hits[0]
    before = np.flatnonzero(v[:end] > LEAVE_FRACTION * log_k)
    if not len(before):
        return None
    return int(s[before[-1]]), int(s[end])


def tau_window(steps: ArrayLike, loss_cand: ArrayLike, log_k: float) -> int | None:
    bounds = window_bounds(steps, loss_cand, log_k)
    return None if bounds is None else bounds[1] - bounds[0]


def onset(
    steps: ArrayLike, values: ArrayLike, threshold: float, m: int = 3, above: bool = True
) -> int | None:
    """First step where `values` crosses `threshold` and stays across it for m evaluations."""
    if m < 1:
        raise ValueError(f"m must be >= 1, got {m}")
    s, v = _arrays(steps, values)
    across = v > threshold if above else v < threshold
    if len(across) < m:
        return None
    # windows[i] is True when evaluations i .. i+m-1 are all across the threshold
    counts = np.convolve(across.astype(np.int64), np.ones(m, dtype=np.int64), mode="valid")
    hits = np.flatnonzero(counts == m)
    return int(s[hits[0]]) if len(hits) else None


def plateau_height(steps: ArrayLike, loss_cand: ArrayLike, log_k: float) -> float | None:
    """Median candidate loss / log K over the plateau (see the module docstring)."""
    s, v = _arrays(steps, loss_cand)
    ratio = v / log_k
    reached = np.flatnonzero(ratio <= 1.0 + (1.0 - LEAVE_FRACTION))
    if not len(reached):
        return None
    start = reached[0]
    bounds = window_bounds(s, v, log_k)
    stop = int(np.searchsorted(s, bounds[0], side="right")) if bounds else len(s)
    if stop <= start:
        return None
    return float(np.median(ratio[start:stop]))


def plateau_span(
    steps: ArrayLike, loss_cand: ArrayLike, shuffle_gap: ArrayLike, log_k: float,
    tol: float = 0.05, max_gap: float = 0.05,
) -> tuple[int, int] | None:
    """Longest stretch of consecutive evaluations with |Lc / log K - 1| <= tol and dz < max_gap.

    Returns (first step, last step) of that stretch, or None if no evaluation qualifies.
    """
    s, v = _arrays(steps, loss_cand)
    _, dz = _arrays(steps, shuffle_gap)
    ok = (np.abs(v / log_k - 1.0) <= tol) & (dz < max_gap)
    best, best_len, start = None, -1, None
    for i, flag in enumerate(np.append(ok, False)):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            if s[i - 1] - s[start] > best_len:
                best, best_len = (int(s[start]), int(s[i - 1])), int(s[i - 1] - s[start])
            start = None
    return best


def tau(run, kind: str = "half") -> int | None:
    """tau of a run from its metrics log: 'half' (default) or 'window'. None if it never snaps."""
    if kind not in TAU_KINDS:
        raise InterpError(f"unknown tau kind {kind!r}; allowed: {', '.join(TAU_KINDS)}")
    series = run.metric_series("loss_cand")
    pairs = [(s, v) for s, v in zip(series["step"], series["loss_cand"]) if not np.isnan(v)]
    if not pairs:
        raise InterpError(
            f"tau needs the candidate loss, which {run.path} does not have "
            f"(direction {run.spec.task.direction!r} or no evaluations yet)"
        )
    steps, values = [s for s, _ in pairs], [v for _, v in pairs]
    fn = tau_half if kind == "half" else tau_window
    return fn(steps, values, run.log_k)


def tau_or_none(run, kind: str = "half") -> int | None:
    """`tau`, or None also when the run has no candidate loss (a direction without one, or no
    evaluation yet): for summaries and figures that show tau when there is one."""
    try:
        return tau(run, kind=kind)
    except InterpError:
        return None


ONSET_FRACTION = 0.2  # default: onset when a series has made 20% of its rise
ONSET_M = 2  # default: ... and stays there for 2 consecutive evaluations


def rise_threshold(values: ArrayLike, fraction: float = ONSET_FRACTION) -> float:
    """v_first + fraction * (v_max - v_first): a threshold relative to the series' own rise."""
    v = np.asarray(values, dtype=np.float64)
    return float(v[0] + fraction * (np.nanmax(v) - v[0]))


def rise_onset(
    steps: ArrayLike, values: ArrayLike, fraction: float = ONSET_FRACTION, m: int = ONSET_M
) -> int | None:
    """Onset of a rising series: first step above `rise_threshold` for m evaluations."""
    return onset(steps, values, rise_threshold(values, fraction), m=m, above=True)


# The author's "50% lead" (docs/definitions.md, "Transition times"): the shuffle gap's, not a head's.
GAP_LEAD_NATS = 0.1  # t(dz > 0.1 nats): the first evaluated step whose shuffle gap exceeds this
T_LOSS_KINDS = ("half", "snap")  # t_loss: tau_half (default), or the snap (tau_window's end)


def first_above(steps: ArrayLike, values: ArrayLike, threshold: float) -> int | None:
    """First evaluated step whose value exceeds `threshold` (NaN never does)."""
    s, v = _arrays(steps, values)
    hits = np.flatnonzero(v > threshold)
    return int(s[hits[0]]) if len(hits) else None


def gap_lead(steps: ArrayLike, loss_cand: ArrayLike, shuffle_gap: ArrayLike, log_k: float, t_loss: str | int = "half",
             threshold: float = GAP_LEAD_NATS) -> dict:
    """The shuffle gap's lead by the author's definition: (t_loss - t(dz > threshold)) / t_loss.

    `t_loss` is "half" (tau_half, the default), "snap" (the first step below 0.05 log K, the end of
    tau_window) or a step. Returns {"gap_onset", "t_loss", "gap_lead"}; a value that cannot be had
    (dz never exceeds the threshold, the loss never moves) is None. No hold is asked of the crossing:
    the definition is the first step above the threshold."""
    s, lc = _arrays(steps, loss_cand)
    _, dz = _arrays(steps, shuffle_gap)
    if isinstance(t_loss, str):
        if t_loss not in T_LOSS_KINDS:
            raise InterpError(f"unknown t_loss {t_loss!r}; allowed: {', '.join(T_LOSS_KINDS)} or a step")
        t = tau_half(s, lc, log_k) if t_loss == "half" else snap_step(s, lc, log_k)
    elif isinstance(t_loss, (int, np.integer)) and not isinstance(t_loss, bool) and t_loss > 0:
        t = int(t_loss)
    else:
        raise InterpError(f"t_loss must be 'half', 'snap' or a positive step, got {t_loss!r}")
    gap = first_above(s, dz, threshold)
    return {"gap_onset": gap, "t_loss": t, "gap_lead": None if (gap is None or not t) else (t - gap) / t}
