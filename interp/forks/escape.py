"""When a fork has escaped: the escape criterion, and the Gamma range its per-step median is taken over.

A criterion is `METRIC<THRESHOLD[,hold=STEPS]` for a loss (it falls as a run learns), `METRIC>THRESHOLD`
for an accuracy or a shuffle gap (they rise); the other way round is refused, as are log K units on a
metric that is no loss and an accuracy threshold outside 0..1 (`check_sense`; a relapse criterion,
`interp.forks.relapse`, goes the other way). METRIC is an evaluated column of metrics.jsonl
(`interp.names.METRICS`); THRESHOLD is absolute ("loss_first<3.0", nats) or, for a loss, in units of
log K ("loss_cand<0.5logK"). A fork escapes at
the first evaluation at or after the fork step that starts a held stretch: every evaluation from
it through it + hold steps is past the threshold (hold 0: that evaluation alone). A stretch
whose hold runs past the last evaluation is not known to hold: a finished fork without a held
stretch is censored, never counted: its lower bound is where a trailing stretch past the threshold began (it may
have escaped there, the hold not yet seen through), else its last evaluation. The default is today's, tau_half:
`loss_cand<0.5logK` with no hold; the author's (SPEC 9.2) is `loss_first<3.0,hold=500`.

A family stores a criterion that is not the default in its forks.json (`"escape"`, absent =
the default), so families made before keep theirs; `interp fork status FAMILY --escape ...`
re-judges the same forks' logs under another one without training.

The Gamma range `A:B` (`--gamma-window`) says the shadow runs over the first B steps after the
fork and the per-step ratio ||u - s||^2 / ||s||^2 is summarised by its median over the samples
at steps A..B after the fork (inclusive); a plain `B` is `0:B`. Torch-free.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from interp.errors import InterpError
from interp.names import METRICS

LOG_K = "logK"
# Each metric's direction as a run learns: the losses fall (and are read in nats or in units of log K, the marginal's
# loss), the accuracies (in 0..1) and the shuffle gaps rise. An escape is written the way the metric moves as the run
# learns, a relapse the other way; a criterion written the wrong way round, or log K units on a metric that is no
# loss, would be met at once or never, and is refused.
LOSSES = ("loss", "loss_first", "loss_cand", "loss_cand_first")
ACCURACIES = ("acc_first", "acc_cand", "acc_exact")
_FORM = "METRIC<THRESHOLD[,hold=STEPS]"
_PATTERN = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*([<>])\s*([^,]*?)\s*(?:,\s*(.*?)\s*)?$")
_NUMBER = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*(\*?\s*logK)?$", re.IGNORECASE)


@dataclass(frozen=True)
class EscapeCriterion:
    """`metric` below (`op` "<") or above (">") `threshold` (times log K when `in_log_k`), held `hold` steps."""

    metric: str = "loss_cand"
    op: str = "<"
    threshold: float = 0.5
    in_log_k: bool = True
    hold: int = 0

    @property
    def text(self) -> str:
        """The criterion as it is written and stored ("loss_first<3,hold=500")."""
        value = f"{self.threshold:g}" + (LOG_K if self.in_log_k else "")
        return f"{self.metric}{self.op}{value}" + (f",hold={self.hold}" if self.hold else "")

    @property
    def words(self) -> str:
        """The criterion in words, for tables and reports ("loss_first < 3 held 500 steps")."""
        value = f"{self.threshold:g}" + (" log K" if self.in_log_k else "")
        return f"{self.metric} {self.op} {value}" + (f" held {self.hold} steps" if self.hold else ", no hold")

    @property
    def is_default(self) -> bool:
        return self == DEFAULT

    def limit(self, log_k: float) -> float:
        """The threshold in the metric's own units for a run of this log K."""
        return self.threshold * log_k if self.in_log_k else self.threshold

    def check_horizon(self, horizon: int) -> None:
        """A hold must leave room to escape: an escape is held only where an evaluation lies hold steps after it, so
        a hold of the whole horizon or more censors every fork (issue 54)."""
        if self.hold and self.hold >= horizon:
            raise InterpError(f"--escape {self.text}: the hold ({self.hold} steps) is as long as or longer than the "
                              f"horizon ({horizon} steps after the fork): it leaves no room to escape, so every fork "
                              f"would be censored; give a hold shorter than {horizon}")

    def judge(self, steps: Sequence[int], values: Sequence[float | int | None], fork_step: int, log_k: float) -> int | None:
        """The first evaluated step >= `fork_step` that starts a held stretch, or None (see the module docstring)."""
        return held_escape(steps, values, fork_step, self.limit(log_k), self.hold, self.op)

    def bound(self, steps: Sequence[int], values: Sequence[float | int | None], fork_step: int, log_k: float) -> int | None:
        """The earliest step a fork without a held escape may still have escaped at (`censored_bound`)."""
        return censored_bound(steps, values, fork_step, self.limit(log_k), self.op)


DEFAULT = EscapeCriterion()
AUTHOR = EscapeCriterion("loss_first", "<", 3.0, False, 500)


def learning_op(metric: str) -> str:
    """The way `metric` moves as a run learns: "<" for a loss, ">" for an accuracy or a shuffle gap."""
    return "<" if metric in LOSSES else ">"


def check_sense(c: EscapeCriterion, flag: str = "--escape") -> None:
    """Refuse a criterion read the wrong way for `flag` (an escape: the way the metric moves as a run learns;
    --relapse: the other way), log K units on a metric that is no loss, an accuracy threshold outside 0..1."""
    where = f"{flag} {c.text!r}"
    want = learning_op(c.metric) if flag == "--escape" else {"<": ">", ">": "<"}[learning_op(c.metric)]
    if c.op != want:
        moves = "falls" if c.metric in LOSSES else "rises"
        what = "an escape" if flag == "--escape" else "a relapse"
        raise InterpError(f"{where}: {c.metric} {moves} as a run learns, so {what} is {c.metric}{want}THRESHOLD; "
                          f"{c.metric}{c.op}... reads it the wrong way round (met at once, or never)")
    if c.in_log_k and c.metric not in LOSSES:
        raise InterpError(f"{where}: log K units are for the losses ({', '.join(LOSSES)}); give {c.metric}'s "
                          f"threshold as a plain number" + (" in 0..1" if c.metric in ACCURACIES else " (nats)"))
    if c.metric in ACCURACIES and not 0 < c.threshold < 1:
        raise InterpError(f"{where}: {c.metric} is a fraction in 0..1; a threshold of {c.threshold:g} is met at once "
                          f"or never: give one strictly between 0 and 1")


def parse_escape(text: str | EscapeCriterion | None, flag: str = "--escape") -> EscapeCriterion:
    """A criterion from its text (None: the default); one clear error naming what is wrong and what is allowed,
    the way the metric moves and its units checked for `flag` (`check_sense`)."""
    if text is None:
        return DEFAULT
    if isinstance(text, EscapeCriterion):
        check_sense(text, flag)
        return text
    where = f"{flag} {text!r}"
    match = _PATTERN.match(str(text))
    if not match:
        raise InterpError(f"{where} is not a criterion: write {_FORM}, e.g. loss_cand<0.5logK or "
                          f"loss_first<3.0,hold=500")
    metric, op, value, rest = match.groups()
    if metric not in METRICS:
        raise InterpError(f"{where}: unknown metric {metric!r}; allowed (the evaluated columns of metrics.jsonl): "
                          f"{', '.join(METRICS)}")
    number = _NUMBER.match(value)
    threshold = float(number.group(1)) if number else math.nan
    if not number or not math.isfinite(threshold):
        raise InterpError(f"{where}: the threshold must be a finite number, in nats or in units of log K "
                          f"(e.g. 3.0 or 0.5logK), got {value!r}")
    hold = 0
    if rest is not None:
        key, eq, steps = rest.partition("=")
        if key.strip() != "hold" or not eq or not re.fullmatch(r"\s*\d+\s*", steps):
            raise InterpError(f"{where}: after the threshold only hold=STEPS (a whole number >= 0) may follow, "
                              f"got {rest!r}")
        hold = int(steps)
    criterion = EscapeCriterion(metric, op, threshold, bool(number.group(2)), hold)
    check_sense(criterion, flag)
    return criterion


def criterion_of(design: dict) -> EscapeCriterion:
    """The criterion a family's design stores (absent: the default, as for families made before it could)."""
    return parse_escape(design.get("escape"))


def held_escape(steps: Sequence[int], values: Sequence[float | int | None], fork_step: int, limit: float, hold: int,
                op: str = "<") -> int | None:
    """The first evaluated step s >= fork_step such that every evaluation in [s, s + hold] is past `limit`
    (NaN never is) and one was made at or after s + hold (the stretch is known to hold); None if none."""
    after = [(int(s), math.nan if v is None else float(v)) for s, v in zip(steps, values) if s >= fork_step]
    past = [(v < limit) if op == "<" else (v > limit) for _, v in after]  # NaN compares False: never past
    last = after[-1][0] if after else None
    broken = len(after)  # index of the first evaluation at or after i that is not past the threshold
    firsts = [0] * len(after)
    for i in range(len(after) - 1, -1, -1):
        if not past[i]:
            broken = i
        firsts[i] = broken
    for i, (s, _) in enumerate(after):
        if not past[i] or s + hold > last:
            continue
        end = firsts[i]
        if end == len(after) or after[end][0] > s + hold:
            return s
    return None


def censored_bound(steps: Sequence[int], values: Sequence[float | int | None], fork_step: int, limit: float,
                   op: str = "<") -> int | None:
    """A censored fork's lower bound on its escape (an evaluated step >= fork_step; None: no evaluation): where the
    last evaluation is past `limit`, the first step of that trailing stretch past it (the escape may have begun there,
    its hold not yet seen through); otherwise the last evaluation (it cannot have begun before a later one)."""
    after = [(int(s), math.nan if v is None else float(v)) for s, v in zip(steps, values) if s >= fork_step]
    if not after:
        return None
    start = None
    for s, v in reversed(after):
        if not ((v < limit) if op == "<" else (v > limit)):
            break
        start = s
    return start if start is not None else after[-1][0]


# ---------------------------------------------------------------------------- the Gamma range
def parse_gamma_window(text) -> tuple[int, int]:
    """(A, B) from "A:B" or "B" (A = 0): steps after the fork, 0 <= A <= B, B >= 1."""
    raw = str(text).strip()
    match = re.fullmatch(r"(?:(\d+)\s*:\s*)?(\d+)", raw)
    if not match:
        raise InterpError(f"--gamma-window {text!r}: give the window's length B or a range A:B of steps after the "
                          f"fork (whole numbers, 0 <= A <= B, B >= 1), e.g. 200 or 100:500")
    lo, hi = int(match.group(1) or 0), int(match.group(2))
    if hi < 1 or lo > hi:
        raise InterpError(f"--gamma-window {text!r}: the range A:B needs 0 <= A <= B and B >= 1")
    return lo, hi


def check_gamma_window(window: tuple[int, int], horizon: int) -> None:
    lo, hi = window
    if hi > horizon:
        raise InterpError(f"--gamma-window {lo}:{hi} lies outside the horizon ({horizon} steps after the fork); give "
                          f"a window within 1..{horizon}")


def gamma_median(steps: Sequence[int], ratios: Sequence[float | int | None], fork_step: int, window: tuple[int, int]) -> float:
    """The median of the finite per-step ratios sampled at steps fork_step + A .. fork_step + B (NaN when none)."""
    lo, hi = fork_step + window[0], fork_step + window[1]
    picked = sorted(float(r) for s, r in zip(steps, ratios)
                    if lo <= s <= hi and r is not None and math.isfinite(float(r)))
    if not picked:
        return math.nan
    mid = len(picked) // 2
    return picked[mid] if len(picked) % 2 else (picked[mid - 1] + picked[mid]) / 2
