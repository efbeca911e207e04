"""The rules that turn measurements into verdicts on the plateau's candidate mechanisms.

They were written, with their thresholds, before any data was looked at (docs/mechanisms.md
gives the reasoning for each), and they are the only place where a verdict is decided: the
table (`interp.mechanisms.table`) only gathers the numbers. Each rule reads a `Measure` (a value
with its interval and the number of runs it rests on) and answers one of VERDICTS with the
sentence that says why. An interval that straddles a rule's threshold is "inconclusive", never
rounded to either side; no measurement is "not measured", with what would measure it.

Torch-free and plotly-free: reading the rules costs nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

CONSISTENT = "consistent"
CONTRADICTED = "contradicted"
INCONCLUSIVE = "inconclusive"
NOT_MEASURED = "not measured"
VERDICTS = (CONSISTENT, CONTRADICTED, INCONCLUSIVE, NOT_MEASURED)

# ---------------------------------------------------------------------------- thresholds
# gradient cancellation: tau ~ (bases sharing a selector set)^beta (task.selector_groups = G bases
# per set: the paper's (n_bases / number of supergroups)^beta). Cancellation predicts beta near 1,
# no cancellation beta near 0; the midpoint separates them.
BETA_MIDPOINT = 0.5
# selector SNR x sqrt(n groups): about 1 when group gradients cancel like independent noise
# (SNR ~ n^-1/2); a shared component makes it grow like sqrt(n). Above 3 the groups agree.
SNR_SQRT_N_MAX = 3.0
# barrier crossing: d log tau / d log(noise) < 0 (more noise escapes sooner); the sign decides.
NOISE_SLOPE_ZERO = 0.0
# incremental coverage: groups snapping one by one leave a sizeable share done at tau/2.
COVERAGE_SHARE = 0.10
# spinodal: lambda_min >= 0 on the plateau. A plateau lambda_min below -SADDLE_RELATIVE x
# lambda_max is negative curvature (a saddle), beyond Lanczos's error on these models.
SADDLE_RELATIVE = 1e-3
# geometric drowning: anisotropy grows with K as tau does. Its log-log slope against K must
# reach at least this share of tau's.
DROWNING_SHARE = 0.5
# hidden progress as a random walk: direction consistency near 0 on the plateau (below
# WALK_MAX), then a jump of at least WALK_JUMP through the transition.
WALK_MAX = 0.3
WALK_JUMP = 0.2
# entropic stabilisation, forks: the full-batch arm escapes at least 2x sooner than minibatch
# forks (ratio of geometric-mean escapes < 0.5); a ratio >= 1 (no sooner) contradicts it.
FORK_RATIO_MAX = 0.5
FORK_RATIO_NONE = 1.0
# entropic stabilisation, curvature: the minibatch noise loads the dominant curvature, not the
# escape direction: var along v_max over var along v_min >= 10; <= 1 contradicts it.
CURVATURE_RATIO_MIN = 10.0
CURVATURE_RATIO_NONE = 1.0


@dataclass(frozen=True)
class Measure:
    """A measured value with its interval (low, high: NaN when none) and what it rests on.

    `estimate` is the calibrated interval behind it (`interp.mechanisms.intervals.Estimate`: the method, the
    90% interval, the n it rests on); a measure without one is a single value or a spread that decides nothing
    (`Measure.of` makes one from an estimate, `as_estimate` reads any measure as one)."""

    value: float
    low: float = math.nan
    high: float = math.nan
    n_runs: int = 1
    detail: str = ""  # how it was measured (steps, sample, interval method)
    extra: dict = field(default_factory=dict)  # a second number a rule needs (e.g. the transition's)
    estimate: object = None  # the Estimate the interval comes from (None: no calibrated interval)

    @classmethod
    def of(cls, e, detail: str = "", extra: dict | None = None) -> Measure:
        """The measure of an `Estimate` (its value, interval and n), with `detail` naming its interval method."""
        how = f"{e.level:.0%} interval: {e.method}"
        return cls(e.value, e.low, e.high, e.n, f"{detail}; {how}" if detail else how, dict(extra or {}), e)

    def as_estimate(self):
        """The estimate behind this measure; for one without, an uncalibrated one (no se: it projects nothing)."""
        from interp.mechanisms.intervals import Estimate

        if self.estimate is not None:
            return self.estimate
        low, high = (self.low, self.high) if not (math.isnan(self.low) and math.isnan(self.high)) else (math.nan,) * 2
        return Estimate(self.value, low, high, self.n_runs, "no calibrated interval", n_x=int(self.extra.get("n_x", 0)))

    @property
    def lo(self) -> float:
        """The interval's lower end, or the value when there is no interval."""
        return self.value if math.isnan(self.low) else self.low

    @property
    def hi(self) -> float:
        return self.value if math.isnan(self.high) else self.high

    @property
    def usable(self) -> bool:
        return isinstance(self.value, (int, float)) and math.isfinite(self.value)


def _f(x: float) -> str:
    return f"{x:.3g}"


def _interval(m: Measure) -> str:
    return f"{_f(m.value)} [{_f(m.lo)}, {_f(m.hi)}]"


def above(m: Measure, threshold: float, what: str, high_means: str, low_means: str) -> tuple[str, str]:
    """Consistent when the whole interval lies above `threshold`, contradicted when it lies below,
    inconclusive when it straddles it (used by the rules whose prediction is "large")."""
    if m.lo > threshold:
        return CONSISTENT, f"{what} {_interval(m)} lies above {_f(threshold)}: {high_means}"
    if m.hi < threshold:
        return CONTRADICTED, f"{what} {_interval(m)} lies below {_f(threshold)}: {low_means}"
    return INCONCLUSIVE, f"{what} {_interval(m)} straddles {_f(threshold)}"


def below(m: Measure, threshold: float, what: str, low_means: str, high_means: str) -> tuple[str, str]:
    """Consistent when the whole interval lies below `threshold` (prediction: "small")."""
    if m.hi < threshold:
        return CONSISTENT, f"{what} {_interval(m)} lies below {_f(threshold)}: {low_means}"
    if m.lo > threshold:
        return CONTRADICTED, f"{what} {_interval(m)} lies above {_f(threshold)}: {high_means}"
    return INCONCLUSIVE, f"{what} {_interval(m)} straddles {_f(threshold)}"


# ---------------------------------------------------------------------------- one rule per row
def cancellation_beta(m: Measure) -> tuple[str, str]:
    return above(m, BETA_MIDPOINT, "beta", "tau grows with the bases sharing a selector set, as cancellation predicts",
                 "sharing the selectors barely changes tau")


def cancellation_snr(m: Measure) -> tuple[str, str]:
    return below(m, SNR_SQRT_N_MAX, "SNR x sqrt(n)", "the groups' selector gradients cancel like independent noise",
                 "the groups' selector gradients share a direction: they do not cancel")


def barrier(m: Measure) -> tuple[str, str]:
    return below(m, NOISE_SLOPE_ZERO, "slope of log tau against log noise", "more noise escapes sooner",
                 "more noise delays the escape, the opposite of thermal barrier crossing")


def coverage(m: Measure) -> tuple[str, str]:
    return above(m, COVERAGE_SHARE, "share of groups >= 80% at tau/2", "groups are covered one by one",
                 "the groups snap together, not one by one")


def spinodal(m: Measure) -> tuple[str, str]:
    return above(m, -SADDLE_RELATIVE, "lambda_min / lambda_max on the plateau",
                 "no negative curvature before tau, as a minimum losing stability would have",
                 "the plateau is a saddle (negative curvature), not a minimum")


def drowning(m: Measure) -> tuple[str, str]:
    tau_slope = m.extra.get("tau_slope", math.nan)
    if not math.isfinite(tau_slope) or tau_slope <= 0:
        return INCONCLUSIVE, f"tau does not grow with K here (slope {_f(tau_slope)}): nothing to drown in"
    return above(m, DROWNING_SHARE * tau_slope, "slope of log anisotropy against log K",
                 f"anisotropy grows with K at least half as fast as tau (slope {_f(tau_slope)})",
                 f"anisotropy grows with K far slower than tau (slope {_f(tau_slope)})")


def random_walk(m: Measure) -> tuple[str, str]:
    transition = m.extra.get("transition", math.nan)
    verdict, why = below(m, WALK_MAX, "plateau direction consistency", "the plateau drift is a random walk",
                         "the plateau drift is directed, not a random walk")
    if verdict == CONTRADICTED:
        return verdict, why
    if not math.isfinite(transition):
        return INCONCLUSIVE, why + "; no transition checkpoints to see it jump"
    jump = transition - m.value
    if jump < WALK_JUMP:
        return CONTRADICTED if verdict == CONSISTENT else INCONCLUSIVE, \
            why + f"; but it does not jump at the transition ({_f(transition)}, +{_f(jump)} < {_f(WALK_JUMP)})"
    return verdict, why + f"; then it jumps to {_f(transition)} through the transition"


def entropic_forks(m: Measure) -> tuple[str, str]:
    if m.lo >= FORK_RATIO_NONE:
        return CONTRADICTED, (f"full-batch / minibatch escape {_interval(m)} >= {_f(FORK_RATIO_NONE)}: removing the "
                              f"noise does not speed the escape")
    if m.hi < FORK_RATIO_MAX:
        return CONSISTENT, (f"full-batch / minibatch escape {_interval(m)} < {_f(FORK_RATIO_MAX)}: without the noise "
                            f"the state escapes much sooner")
    return INCONCLUSIVE, f"full-batch / minibatch escape {_interval(m)} lies between {_f(FORK_RATIO_MAX)} and " \
                         f"{_f(FORK_RATIO_NONE)} or straddles them"


def entropic_curvature(m: Measure) -> tuple[str, str]:
    if m.hi <= CURVATURE_RATIO_NONE:
        return CONTRADICTED, (f"noise var along v_max / v_min {_interval(m)} <= {_f(CURVATURE_RATIO_NONE)}: the noise "
                              f"loads the escape direction at least as much")
    if m.lo >= CURVATURE_RATIO_MIN:
        return CONSISTENT, (f"noise var along v_max / v_min {_interval(m)} >= {_f(CURVATURE_RATIO_MIN)}: the noise "
                            f"loads the dominant curvature, not the escape direction")
    return INCONCLUSIVE, f"noise var along v_max / v_min {_interval(m)} lies between {_f(CURVATURE_RATIO_NONE)} " \
                         f"and {_f(CURVATURE_RATIO_MIN)} or straddles them"


@dataclass(frozen=True)
class Row:
    """One row of the mechanism table: what it tests and how, and the replicates it needs (`evidence`:
    interp.mechanisms.equivalence.Evidence; fewer is "not measured", whatever the interval)."""

    key: str
    mechanism: str
    quantity: str
    prediction: str
    rule: object  # Measure -> (verdict, why)
    needs_run: str  # what measures it on a run ("{run}" is replaced by the run's path)
    needs_sweep: str  # what measures it across runs
    paper: str  # the paper's / the author's number
    evidence: object = None  # the replicates it needs (set below: RUNS, FIT, FORKS or GROUPS)
    consistent: tuple[float, float] = (-math.inf, math.inf)  # the region the rule calls consistent (for projections)


ROWS: tuple[Row, ...] = (
    Row("cancellation", "gradient cancellation",
        "beta in tau ~ (bases sharing a selector set)^beta (the selector-sharing control, task.selector_groups)",
        f"beta near 1 (consistent: interval above {BETA_MIDPOINT})", cancellation_beta,
        "needs a sweep over task.selector_groups (preset cancellation-tiny)",
        "needs a sweep over task.selector_groups (preset cancellation-tiny)",
        "author: beta = 0.02"),
    Row("cancellation_snr", "gradient cancellation (selector SNR)",
        "selector gradient SNR x sqrt(n groups) on the plateau",
        f"about 1: SNR ~ n_bases^-1/2 (consistent: interval below {SNR_SQRT_N_MAX:g})", cancellation_snr,
        "needs interp analyze {run} --only gradients",
        "needs the gradients analysis on the runs' plateau checkpoints (interp mechanisms SWEEP computes it)",
        "paper: the SNR probe rejects cancellation"),
    Row("barrier", "barrier crossing", "slope of log tau against log lr (or log 1/batch)",
        "negative: more noise escapes sooner", barrier,
        "needs a sweep over lr or batch size (preset noise-tiny)", "needs a sweep over lr or batch size",
        "paper: 7x lr gives a 3.6x longer plateau (the opposite)"),
    Row("coverage", "incremental group coverage", "share of groups >= 80% accurate at tau/2",
        f"a sizeable share (consistent: interval above {COVERAGE_SHARE:.0%})", coverage,
        "needs interp analyze {run} --only groups (and a snap)",
        "needs the groups analysis on runs that snap (interp mechanisms SWEEP computes it)",
        "paper: 0 of 200 groups"),
    Row("spinodal", "spinodal (a minimum losing stability)", "lambda_min / lambda_max on the plateau (tau/4..0.9 tau)",
        f"lambda_min >= 0 until tau (consistent: interval above -{SADDLE_RELATIVE:g})", spinodal,
        "needs interp analyze {run} --only hessian", "needs interp analyze on the runs with --only hessian",
        "paper: negative lambda_min on the plateau (a saddle)"),
    Row("drowning", "geometric drowning", "slope of log anisotropy (lambda_max / |lambda_min|) against log K",
        f"grows with K as tau does (consistent: at least {DROWNING_SHARE:g} x tau's slope)", drowning,
        "needs a sweep over K with the hessian analysis on each run",
        "needs a sweep over K with interp analyze --only hessian on each run",
        "paper: anisotropy 500-1000; ours 2-8"),
    Row("random_walk", "hidden progress as a random walk",
        "direction consistency (cosine of consecutive displacements) on the plateau, then through the transition",
        f"near 0 on the plateau (< {WALK_MAX:g}), then a jump (>= +{WALK_JUMP:g})", random_walk,
        "needs interp analyze {run} --only trajectory (and a snap)",
        "needs the trajectory analysis on runs that snap, with checkpoints on the plateau (interp mechanisms SWEEP "
        "computes it)",
        "author: 0.04-0.22 on the plateau, 0.4-0.9 at the transition"),
    Row("entropic_forks", "entropic stabilisation (forks)",
        "escape (steps after the fork to the family's escape criterion, by default tau_half) of full_batch over "
        "minibatch forks: the ratio of geometric means",
        f"well below 1 (consistent: interval below {FORK_RATIO_MAX:g}; >= {FORK_RATIO_NONE:g} contradicts)",
        entropic_forks, "needs forks (interp fork {run} --arm full_batch,minibatch ...)",
        "needs a fork family with full_batch and minibatch arms",
        "author: full batch re-solves in ~800 steps, minibatch noise stays >= 16,000 (>= 20x)"),
    Row("entropic_curvature", "entropic stabilisation (noise along curvature)",
        "minibatch noise variance along v_max over that along v_min, on the plateau",
        f">> 1: the noise loads the dominant curvature (consistent: >= {CURVATURE_RATIO_MIN:g}; <= 1 contradicts)",
        entropic_curvature, "needs interp analyze {run} --only gradients --curvature on",
        "needs interp analyze on the runs with --only gradients --curvature on",
        "paper: noise loads the dominant curvature"),
)


def _replicates() -> dict:
    """Each row's minimum of evidence and the region its rule calls consistent (SPEC 10)."""
    from interp.mechanisms.equivalence import Evidence

    runs, fit = Evidence(3, "runs (seeds)"), Evidence(5, "runs", 3, "distinct x values")
    return {"cancellation": (fit, (BETA_MIDPOINT, math.inf)), "cancellation_snr": (runs, (-math.inf, SNR_SQRT_N_MAX)),
            "barrier": (fit, (-math.inf, NOISE_SLOPE_ZERO)), "coverage": (Evidence(20, "groups"), (COVERAGE_SHARE, 1.0)),
            "spinodal": (runs, (-SADDLE_RELATIVE, math.inf)), "drowning": (fit, (-math.inf, math.inf)),
            "random_walk": (runs, (-math.inf, WALK_MAX)), "entropic_forks": (Evidence(3, "forks per seeded arm"),
                                                                            (0.0, FORK_RATIO_MAX)),
            "entropic_curvature": (runs, (CURVATURE_RATIO_MIN, math.inf))}


ROWS = tuple(Row(**{**r.__dict__, "evidence": _replicates()[r.key][0], "consistent": _replicates()[r.key][1]})
             for r in ROWS)


def row(key: str) -> Row:
    return next(r for r in ROWS if r.key == key)


def judge(key: str, measure: Measure | None, where: str = "") -> tuple[str, str]:
    """The verdict of row `key` on `measure` (None or not finite: not measured, with what would; fewer replicates
    than the row needs: not measured, with how many it has and needs; inconclusive: with the replicates that would
    be expected to decide it)."""
    from interp.mechanisms.equivalence import Margin, replicates_to_decide

    spec = row(key)
    if measure is None or not measure.usable:
        return NOT_MEASURED, spec.needs_run.replace("{run}", where or "RUN")
    e = measure.as_estimate()
    few = spec.evidence.short(e)
    if few:
        return NOT_MEASURED, f"{_interval(measure)} rests on {few}"
    verdict, why = spec.rule(measure)
    if verdict == INCONCLUSIVE:
        region = ((DROWNING_SHARE * measure.extra.get("tau_slope", math.nan), math.inf) if key == "drowning"
                  else spec.consistent)
        n = replicates_to_decide(Margin(*region, "the rule's consistent region"), spec.evidence, e)
        unit = spec.evidence.unit.split(" (")[0]
        why += (f"; about {n} {unit} ({n - e.n} more) would be expected to decide it if the spread stays as observed"
                if n else "; more replicates are not expected to decide it")
    return verdict, why
