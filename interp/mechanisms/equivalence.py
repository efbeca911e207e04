"""Equivalence margins, a minimum of evidence, and the decision they give an interval (SPEC 10).

Both verdict tables decide here. A claim carries a `Margin`, fixed in the code and in docs before any
data: the band of values that count as the author's (the author's own stated precision or range where
given, else a stated default: DEFAULT_RATIO, the bioequivalence convention of 0.80-1.25 on a ratio, on the
log scale for ratios and exponents), or a half-line for a claim of direction; and the value of no effect
(`null`) where the claim is an effect. It carries an `Evidence`: the replicates it needs. Then, for an
`Estimate` (`interp.mechanisms.intervals`, the 1 - 2 alpha = 90% interval):

- too few replicates: NOT_ENOUGH ("N runs, needs M"), whatever the interval;
- the interval inside the margin (and clear of the null): INSIDE. This is the two one-sided tests at
  alpha = 0.05 (Westlake; Schuirmann 1987);
- the interval wholly outside the margin: OUTSIDE;
- anything else: UNDECIDED, with the replicates that would be expected to decide it if the spread
  stayed as observed (`replicates_to_decide`).

numpy and scipy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from interp.mechanisms.intervals import Estimate, exact_share

INSIDE, OUTSIDE, UNDECIDED, NOT_ENOUGH = "inside", "outside", "undecided", "not enough"
DEFAULT_RATIO = (0.80, 1.25)  # a ratio (or exponent) with no stated precision: within 0.80-1.25x of the author's
MAX_PROJECTED = 10_000  # replicates beyond this are "more than 10,000": the spread would never decide it


@dataclass(frozen=True)
class Margin:
    """The values that count as the author's claim: [low, high] (an end may be +-inf: a claim of direction)."""

    low: float
    high: float
    reason: str  # one line: where the margin comes from
    null: float | None = None  # the value of no effect: an effect is reproduced only by an interval clear of it
    log: bool = False  # a ratio or an exponent: projected on the log scale

    @classmethod
    def around(cls, value: float, reason: str, null: float | None = None, ratio=DEFAULT_RATIO) -> Margin:
        """The default margin of a single published value: value x 0.80 .. value x 1.25 (on the log scale)."""
        lo, hi = sorted((value * ratio[0], value * ratio[1]))
        return cls(lo, hi, reason, null, log=True)

    def text(self) -> str:
        if math.isinf(self.high):
            return f"> {self.low:.3g}"
        if math.isinf(self.low):
            return f"< {self.high:.3g}"
        return f"[{self.low:.3g}, {self.high:.3g}]"


@dataclass(frozen=True)
class Evidence:
    """The replicates a claim needs: `n` of `unit` (runs, forks per seeded arm, groups), and for a fit `x`
    distinct values of `x_unit`."""

    n: int
    unit: str = "runs"
    x: int = 0
    x_unit: str = ""

    def count(self, n: int, x: bool = False) -> str:
        """"1 run (seeds)", "3 runs (seeds)", "2 x values": n of the unit (of `x_unit` with `x`)."""
        unit = self.x_unit if x else self.unit
        if n == 1:
            first, _, rest = unit.partition(" ")
            unit = (first[:-1] if first.endswith("s") else first) + (f" {rest}" if rest else "")
        return f"{n} {unit}"

    def text(self) -> str:
        return self.count(self.n) + (f" over {self.count(self.x, x=True)}" if self.x else "")

    def short(self, e: Estimate) -> str:
        """Why `e` is too little evidence ("" when it is enough)."""
        if e.n < self.n:
            return f"{self.count(e.n)}, needs {self.n}"
        if self.x and e.n_x < self.x:
            return f"{self.count(e.n_x, x=True)}, needs {self.x}"
        return ""


def decide(margin: Margin, evidence: Evidence, e: Estimate) -> str:
    """NOT_ENOUGH, INSIDE, OUTSIDE or UNDECIDED (see the module docstring)."""
    if evidence.short(e):
        return NOT_ENOUGH
    lo, hi = e.low, e.high
    if math.isnan(lo) or math.isnan(hi):
        return UNDECIDED
    clear = margin.null is None or not (lo <= margin.null <= hi)
    if margin.low <= lo and hi <= margin.high and clear:
        return INSIDE
    if hi < margin.low or lo > margin.high:
        return OUTSIDE
    return UNDECIDED


def _distance(margin: Margin, e: Estimate) -> float:
    """How far the value lies from the nearest edge that would decide it, on the interval's own scale (0: on the
    edge; NaN: nothing would decide it)."""
    f = math.log if e.scale == "log" else (lambda v: v)

    def at(v: float) -> float:
        if math.isinf(v):
            return v
        return f(v) if v > 0 or e.scale != "log" else -math.inf

    x = at(e.value) if e.value > 0 or e.scale != "log" else math.nan
    if math.isnan(x):
        return math.nan
    low, high = at(margin.low), at(margin.high)
    if low <= x <= high:  # reproduced needs the whole interval inside, and clear of the null
        d = min(x - low, high - x)
        if margin.null is not None:
            d = min(d, abs(x - at(margin.null)))
        return d
    return low - x if x < low else x - high  # not reproduced needs the whole interval outside


def replicates_to_decide(margin: Margin, evidence: Evidence, e: Estimate) -> int | None:
    """The replicates (of the estimate's unit, in all) that would be expected to decide `e` against `margin` if
    the values kept their observed spread: the smallest n whose interval half-width falls below the distance
    from the value to the deciding edge. None when nothing would (the value on an edge, no spread measured, a
    bound, or more than MAX_PROJECTED)."""
    if e.bound or not math.isfinite(e.value):
        return None
    d = _distance(margin, e)
    if not math.isfinite(d) or d <= 0:
        return None
    if e.successes >= 0:  # a share: the exact interval at the observed share
        p = e.successes / e.n
        n = max(e.n, evidence.n)
        while n <= MAX_PROJECTED:
            lo, hi = (float(v) for v in exact_share(round(p * n), n, e.level))
            if decide(margin, Evidence(0), Estimate(p, lo, hi, n, e.method)) in (INSIDE, OUTSIDE):
                return n
            n = max(n + 1, int(n * 1.1))
        return None
    if not (math.isfinite(e.se) and e.se > 0 and math.isfinite(e.df)):
        return None
    from scipy import stats

    extra = e.n - e.df  # parameters (or the Welch adjustment): df grows one per replicate
    n = max(e.n + 1, evidence.n)
    while n <= MAX_PROJECTED:
        half = float(stats.t.ppf(0.5 + e.level / 2, max(n - extra, 1))) * e.se * math.sqrt(e.n / n)
        if half < d:
            return n
        n = n + 1 if n < 100 else int(n * 1.05)
    return None
