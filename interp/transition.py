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

A run's facts (`facts(run)`: a `TransitionFacts` with all of the above and the shuffle gap's onset and
lead) are derived once per version of its metrics log and kept for the process: every consumer reads
them there instead of parsing the log and deriving them again.
"""

from __future__ import annotations

import math
import os
from collections import OrderedDict
from dataclasses import dataclass, field

from numpy.typing import ArrayLike

import numpy as np

from interp import metrics_log
from interp.errors import InterpError
from interp.run_layout import METRICS_FILE

TAU_KINDS = ("half", "window")
# Steps relative to tau (docs/definitions.md, "Ablation"): pre = tau/4, mid = tau, post = 2 tau.
RELATIVE_STEPS = {"pre": 0.25, "mid": 1.0, "post": 2.0}
# A step named relative to tau (pre, tau/2, a transition fraction) is read at the saved (or analysed) step nearest its
# target only when that step lies within STEP_SLACK tau of it; farther, it is left out and named (docs/definitions.md).
STEP_SLACK = 0.15
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
    f = facts(run)
    if not f.has_cand:
        raise InterpError(
            f"tau needs the candidate loss, which {run.path} does not have "
            f"(direction {run.spec.task.direction!r} or no evaluations yet)"
        )
    return f.tau_half if kind == "half" else f.tau_window


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
# t_loss (docs/definitions.md, "The shuffle gap's lead"): tau_half (default); the snap (tau_window's end); the
# author's, the first logged step whose running mean of the training batches' first-token loss (the
# `train_loss_first` column) is below 0.9 log K; or the same threshold on the evaluated first-token loss.
T_LOSS_KINDS = ("half", "snap", "l1_0.9", "l1_0.9_eval")
L1_FRACTION = 0.9
# dz: ours (`shuffle_gap`: fixed evaluation subset, z' never the own z) or the author's in-batch one
# (`batch_shuffled_loss_first - train_loss_first`: biased low by about 1/K), SPEC 9.1
DZ_ESTIMATORS = ("unbiased", "inbatch")
LEAD_DEFINITIONS = {"ours": ("half", "unbiased"), "author": ("l1_0.9", "inbatch")}
NEEDS_COLUMN = {"l1_0.9": "train_loss_first", "inbatch": "batch_shuffled_loss_first"}


def parse_lead_definition(text: str) -> tuple[str, str]:
    """(t_loss, dz estimator) of a lead definition: "ours" (half/unbiased), "author" (l1_0.9/inbatch) or
    "T_LOSS/DZ" (e.g. "l1_0.9_eval/unbiased")."""
    if text in LEAD_DEFINITIONS:
        return LEAD_DEFINITIONS[text]
    t_loss, _, dz = str(text).partition("/")
    if t_loss not in T_LOSS_KINDS or dz not in DZ_ESTIMATORS:
        raise InterpError(f"unknown lead definition {text!r}; allowed: {', '.join(LEAD_DEFINITIONS)} or T_LOSS/DZ with "
                          f"T_LOSS one of {', '.join(T_LOSS_KINDS)} and DZ one of {', '.join(DZ_ESTIMATORS)}")
    return t_loss, dz


def lead_suffix(t_loss: str, dz: str) -> str:
    """The column suffix of a definition: "" for ours, "_author" for the author's, else "_T_LOSS_DZ"."""
    name = next((k for k, v in LEAD_DEFINITIONS.items() if v == (t_loss, dz)), None)
    return "" if name == "ours" else f"_{name}" if name else f"_{t_loss}_{dz}"


def first_above(steps: ArrayLike, values: ArrayLike, threshold: float) -> int | None:
    """First evaluated step whose value exceeds `threshold` (NaN never does)."""
    s, v = _arrays(steps, values)
    hits = np.flatnonzero(v > threshold)
    return int(s[hits[0]]) if len(hits) else None


def gap_lead(steps: ArrayLike, loss_cand: ArrayLike, shuffle_gap: ArrayLike, log_k: float, t_loss: str | int = "half",
             threshold: float = GAP_LEAD_NATS) -> dict:
    """The shuffle gap's lead by the author's definition: (t_loss - t(dz > threshold)) / t_loss.

    `t_loss` is "half" (tau_half, the default), "snap" (the first step below 0.05 log K, the end of
    tau_window) or a step (the l1_0.9 kinds need the first-token series: `TransitionFacts.gap_lead_at`).
    Returns {"gap_onset", "t_loss", "gap_lead"}; a value that cannot be had
    (dz never exceeds the threshold, the loss never moves) is None. No hold is asked of the crossing:
    the definition is the first step above the threshold."""
    s, lc = _arrays(steps, loss_cand)
    _, dz = _arrays(steps, shuffle_gap)
    if t_loss in ("l1_0.9", "l1_0.9_eval"):
        raise InterpError(f"t_loss {t_loss!r} needs the first-token loss: use facts(run).gap_lead_at")
    t = _t_loss(t_loss, {"half": lambda: tau_half(s, lc, log_k), "snap": lambda: snap_step(s, lc, log_k)})
    gap = first_above(s, dz, threshold)
    return _lead(gap, t, left_censored(gap, int(s[0]) if len(s) else None))


def _t_loss(t_loss: str | int, kinds: dict) -> int | None:
    """The step t_loss names: a kind (`kinds[t_loss]()`) or a positive step."""
    if isinstance(t_loss, str):
        if t_loss not in T_LOSS_KINDS:
            raise InterpError(f"unknown t_loss {t_loss!r}; allowed: {', '.join(T_LOSS_KINDS)} or a step")
        return kinds[t_loss]()
    if isinstance(t_loss, (int, np.integer)) and not isinstance(t_loss, bool) and t_loss > 0:
        return int(t_loss)
    raise InterpError(f"t_loss must be 'half', 'snap' or a positive step, got {t_loss!r}")


def _lead(gap: int | None, t: int | None, censored: bool = False) -> dict:
    """The lead of onset `gap` against t_loss `t`; a `censored` onset (at or before the first evaluation: only
    a bound) gives no lead."""
    lead = None if (gap is None or not t or censored) else (t - gap) / t
    return {"gap_onset": gap, "t_loss": t, "gap_lead": lead, "censored": bool(censored and gap is not None)}


def left_censored(onset: int | None, first_step: int | None) -> bool:
    """Whether an onset is only a bound: it falls on the first evaluation of a series that starts after step 0
    (a fork, or analyses from a later step), so it happened at or before that step (SPEC 10, censoring)."""
    return onset is not None and first_step is not None and first_step > 0 and onset <= first_step


def finite(value) -> float | None:
    """A logged number as a float, or None for a missing, NaN or non-numeric value."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


@dataclass(frozen=True)
class TransitionFacts:
    """A run's transition facts, derived once per version of its metrics log (`facts`) and read by
    every consumer: tau (both kinds), the window, the snap, the plateau and the shuffle gap's onset
    and lead. None: the event never happens (or the log has no candidate loss: not `has_cand`).
    `steps` and `loss_cand` are the evaluations with a candidate loss they were derived from."""

    log_k: float
    tau_half: int | None = None
    tau_window: int | None = None
    window_start: int | None = None
    window_end: int | None = None
    snap_step: int | None = None
    plateau_height: float | None = None
    plateau_start: int | None = None
    plateau_end: int | None = None
    gap_onset: int | None = None
    gap_lead: float | None = None
    gap_lead_snap: float | None = None
    l1_step: int | None = None  # the author's t_loss: train_loss_first < 0.9 log K (None: never, or not logged)
    l1_eval_step: int | None = None  # the same on the evaluated loss_first
    gap_onset_inbatch: int | None = None  # the author's in-batch dz > 0.1 nats
    gap_onset_censored: bool = False  # the onset is the first evaluation of a log starting after 0 (a fork): a bound
    gap_onset_inbatch_censored: bool = False
    logged: frozenset = frozenset()  # which of the author's columns (NEEDS_COLUMN) the log has
    steps: tuple[int, ...] = field(default=(), repr=False)
    loss_cand: tuple[float, ...] = field(default=(), repr=False)

    @property
    def has_cand(self) -> bool:
        return bool(self.steps)

    def tau_at(self, fraction: float) -> int | None:
        """The first evaluation with the candidate loss below `fraction` log K (tau_half at 0.5; the author's
        threshold study reads 0.3 to 0.7: `interp scaling --threshold`). None: never, or no candidate loss."""
        if not self.has_cand or not self.log_k > 0:
            return None
        return first_below(np.asarray(self.steps), np.asarray(self.loss_cand), fraction * self.log_k)

    @property
    def window(self) -> tuple[int, int] | None:
        """(t_start, t_end) of the transition window (`window_bounds`), or None."""
        return None if self.window_start is None else (self.window_start, self.window_end)

    def gap_lead_at(self, t_loss: str | int = "half", dz: str = "unbiased") -> dict:
        """`gap_lead` of these evaluations against t_loss (a T_LOSS_KINDS name or a step) with the dz
        estimator `dz`, with no log read. A definition whose column this log lacks (a run trained before
        it was logged) raises an InterpError saying so; one the run never reaches gives None."""
        if dz not in DZ_ESTIMATORS:
            raise InterpError(f"unknown dz estimator {dz!r}; allowed: {', '.join(DZ_ESTIMATORS)}")
        for need in (t_loss, dz):
            if need in NEEDS_COLUMN and NEEDS_COLUMN[need] not in self.logged and self.has_cand:
                raise InterpError(f"the author's {'in-batch dz' if need == 'inbatch' else 'running-mean t_loss'} cannot "
                                  f"be computed for this run: its metrics log has no {NEEDS_COLUMN[need]} column "
                                  f"(logged by runs trained since it was added)")
        kinds = {"half": lambda: self.tau_half, "snap": lambda: self.snap_step,
                 "l1_0.9": lambda: self.l1_step, "l1_0.9_eval": lambda: self.l1_eval_step}
        onset, censored = ((self.gap_onset, self.gap_onset_censored) if dz == "unbiased"
                           else (self.gap_onset_inbatch, self.gap_onset_inbatch_censored))
        return _lead(onset, _t_loss(t_loss, kinds), censored)

    def not_measured(self, t_loss: str, dz: str) -> str | None:
        """Why the lead cannot be had under (t_loss, dz): the one line `gap_lead_at` raises, or None."""
        try:
            self.gap_lead_at(t_loss, dz)
        except InterpError as exc:
            return str(exc)
        return None

    def reached_from(self, step: int) -> tuple[int | None, int | None, int | None]:
        """From `step` on (a fork's escape): the first evaluation below 0.5 log K, the first below
        the snap (0.05 log K), and the last evaluation; None where there is none."""
        after = [(s, v) for s, v in zip(self.steps, self.loss_cand) if s >= step]
        half = next((s for s, v in after if v < 0.5 * self.log_k), None)
        snap = next((s for s, v in after if v < SNAP_FRACTION * self.log_k), None)
        return half, snap, (after[-1][0] if after else None)


def derive(steps: ArrayLike, loss_cand: ArrayLike, shuffle_gap: ArrayLike, log_k: float,
           first: dict | None = None) -> TransitionFacts:
    """The facts of logged evaluations (sorted steps; missing values NaN or None): every one is
    computed on the evaluations with a finite candidate loss; the plateau's span only when each of
    those has a shuffle gap. `first` holds the first-token series of the author's lead, by column
    name (loss_first, train_loss_first, batch_shuffled_loss_first), each aligned with `steps`."""
    rows = [(s, lc, dz) for s, lc, dz in zip(steps, loss_cand, shuffle_gap) if finite(lc) is not None]
    if not rows or not log_k > 0:  # K = 1: no plateau at log K = 0, so nothing to time (the control)
        return TransitionFacts(log_k)
    author = _author_facts(steps, first or {}, log_k)
    s = [r[0] for r in rows]
    lc = [r[1] for r in rows]
    dz = [r[2] for r in rows]
    span = plateau_span(s, lc, dz, log_k) if all(finite(v) is not None for v in dz) else None
    dz_nan = [float("nan") if finite(v) is None else v for v in dz]
    half, snap = tau_half(s, lc, log_k), snap_step(s, lc, log_k)
    gap = first_above(s, dz_nan, GAP_LEAD_NATS)
    censored = left_censored(gap, s[0])
    author["gap_onset_inbatch_censored"] = left_censored(author["gap_onset_inbatch"], int(steps[0]) if len(steps) else None)
    bounds = window_bounds(s, lc, log_k)
    return TransitionFacts(
        log_k=log_k, tau_half=half, tau_window=None if bounds is None else bounds[1] - bounds[0],
        window_start=None if bounds is None else bounds[0], window_end=None if bounds is None else bounds[1],
        snap_step=snap, plateau_height=plateau_height(s, lc, log_k),
        plateau_start=None if span is None else span[0], plateau_end=None if span is None else span[1],
        gap_onset=gap, gap_onset_censored=censored, gap_lead=_lead(gap, half, censored)["gap_lead"],
        gap_lead_snap=_lead(gap, snap, censored)["gap_lead"],
        steps=tuple(s), loss_cand=tuple(lc), **author,
    )


def _author_facts(steps, first: dict, log_k: float) -> dict:
    """The author's t_loss steps and in-batch dz onset (SPEC 9.1) from the first-token series."""
    col = {name: np.array([math.nan if finite(v) is None else v for v in first.get(name, [None] * len(steps))])
           for name in ("loss_first", "train_loss_first", "batch_shuffled_loss_first")}
    s = np.asarray(steps, dtype=np.int64)
    logged = frozenset(c for c in NEEDS_COLUMN.values() if np.isfinite(col[c]).any())
    return {"l1_step": first_below(s, col["train_loss_first"], L1_FRACTION * log_k),
            "l1_eval_step": first_below(s, col["loss_first"], L1_FRACTION * log_k),
            "gap_onset_inbatch": first_above(s, col["batch_shuffled_loss_first"] - col["train_loss_first"], GAP_LEAD_NATS),
            "logged": logged}


KEPT = metrics_log.KEPT
_FACTS: OrderedDict[str, tuple[tuple, float, TransitionFacts]] = OrderedDict()


def facts(run) -> TransitionFacts:
    """The run's `TransitionFacts`, derived once per version of its metrics log in this process
    (the log's parsed rows are kept by `interp.metrics_log`; a log that grows or is rewritten is
    parsed and derived again)."""
    rows = metrics_log.rows(run.path / METRICS_FILE)
    key, log_k = os.path.abspath(run.path), run.log_k
    kept = _FACTS.get(key)
    if kept is not None and kept[0] is rows and kept[1] == log_k:
        _FACTS.move_to_end(key)
        return kept[2]
    by_step = {row["step"]: row for row in rows}  # as `Run.metric_series`: sorted, the last of a repeated step wins
    steps = sorted(by_step)
    first = {c: [by_step[s].get(c) for s in steps] for c in ("loss_first", "train_loss_first", "batch_shuffled_loss_first")}
    made = derive(steps, [by_step[s].get("loss_cand") for s in steps], [by_step[s].get("shuffle_gap") for s in steps],
                  log_k, first)
    _FACTS[key] = (rows, log_k, made)
    _FACTS.move_to_end(key)
    while len(_FACTS) > KEPT:
        _FACTS.popitem(last=False)
    return made


def hierarchy_facts(steps: ArrayLike, loss_cand: ArrayLike, gap_z1: ArrayLike, gap_z2: ArrayLike, k1: int,
                    k2: int) -> dict:
    """The staircase of a hierarchical task (`TaskSpec.hierarchy` K1xK2): the onset of each selector character's
    shuffle gap (first evaluation > GAP_LEAD_NATS), the first evaluation below log K2 (1 + 5%: the cluster read,
    the plateau's second step) and below 0.05 log K2 (solved), and the evaluations spent within 5% of log K2 (the
    middle plateau; 0 when the candidate loss fell through it between two evaluations)."""
    s = np.asarray(steps, dtype=float)
    lc = np.asarray([np.nan if finite(v) is None else v for v in loss_cand], dtype=float)
    z1 = np.asarray([np.nan if finite(v) is None else v for v in gap_z1], dtype=float)
    z2 = np.asarray([np.nan if finite(v) is None else v for v in gap_z2], dtype=float)
    log_k2 = math.log(k2)
    near = np.abs(lc - log_k2) <= 0.05 * log_k2
    return {"k1": k1, "k2": k2, "z1_onset": first_above(s, z1, GAP_LEAD_NATS),
            "z2_onset": first_above(s, z2, GAP_LEAD_NATS),
            "reached_log_k2": first_below(s, lc, (1 + 0.05) * log_k2),
            "solved": first_below(s, lc, SNAP_FRACTION * log_k2),
            "evaluations_at_log_k2": int(near.sum()),
            "steps_at_log_k2": None if not near.any() else [int(s[near][0]), int(s[near][-1])]}
