"""The reconciliation table's claims and the rules that give each its verdict (docs/reconciliation.md).

Written, with their margins, before any table was measured (SPEC 10). A published claim is compared
twice on the same runs: ours under the author's definition (where the toolkit can compute it and it
differs from ours) and ours under ours. Each comparison asks one question of a calibrated 90% interval
(`interp.mechanisms.intervals`): does it lie inside the claim's equivalence margin, wholly outside it, or
neither (`interp.mechanisms.equivalence.decide`)? Each claim fixes its margin (with the reason for it),
the value of no effect where the claim is an effect, the replicates it needs and its interval method.

The verdict, in this order:

1. **not measured**: nothing measures the claim on these paths, or too few replicates do ("1 run, needs
   3"), or the claim needs the author's definition and the runs lack its logged columns; with the one-line
   reason and the command that would measure it (one that adds what is missing, never one already run).
2. **differs: definition**: both definitions are measured on the same runs, one lies inside the margin and
   the other wholly outside it. The row names the definition.
3. **reproduced**: the deciding comparison (the author's definition where it is measured, else ours) lies
   inside the margin, and clear of the null for an effect.
4. **differs: setting**: it lies wholly outside the margin and the setting differs from the author's
   (model, K, n_bases, lr, batch size, the fork's state, escape criterion or Gamma window): the row names
   each difference. A setting named is a candidate cause, not a proof.
5. **not reproduced**: it lies wholly outside the margin in the author's own setting.
6. **inconclusive**: anything else (an interval that straddles an edge of the margin or reaches the
   null), with the replicates that would be expected to decide it if the spread stayed as observed.

Torch-free and pandas-free: reading the rules costs nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple

from interp.mechanisms import equivalence as Q
from interp.mechanisms import intervals as I
from interp.mechanisms.equivalence import Evidence, Margin
from interp.mechanisms.rules import FORK_RATIO_MAX, SADDLE_RELATIVE, SNR_SQRT_N_MAX, Measure

REPRODUCED = "reproduced"
DIFFERS_DEFINITION = "differs: definition"
DIFFERS_SETTING = "differs: setting"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
NOT_MEASURED = "not measured"
VERDICTS = (REPRODUCED, DIFFERS_DEFINITION, DIFFERS_SETTING, NOT_REPRODUCED, INCONCLUSIVE, NOT_MEASURED)

# ---------------------------------------------------------------------------- constants
# the lead share's published spread: 0.52 +- 0.14 (mean +- np.std over K)
LEAD_SHARE, LEAD_SD = 0.52, 0.14
# "flat" in K: tau changes by at most the default ratio 0.80-1.25x per doubling of K
FLAT_BOUND = math.log(Q.DEFAULT_RATIO[1]) / math.log(2)
# the cancellation exponent: beta = 0.02, told from cancellation's beta = 1 within a quarter of the way there
BETA_BAND = 0.25
# a published lower bound B on a slowdown (">= 20x", ">= 1.75x") is reproduced above 0.80 B (the default ratio)
BOUND_TOLERANCE = Q.DEFAULT_RATIO[0]
# replicates (SPEC 10: several seeds per arm, several x values for a fit)
RUNS = Evidence(3, "runs (seeds)")
FIT = Evidence(5, "runs", 3, "distinct x values")
FORKS_PER_ARM = Evidence(3, "forks per seeded arm")
GROUPS = Evidence(20, "groups")
PAIRS = Evidence(3, "seed pairs")

# the author's settings (SPEC 6, 9.1, 9.2): the fields compared with our runs' specs
PAPER_MODEL = {"n_layers": 4, "n_heads": 4, "d_model": 128, "d_mlp": 512}
PAPER = {**PAPER_MODEL, "n_bases": 1000, "lr": 1e-3, "batch_size": 128}
FORKS = {**PAPER_MODEL, "k": 10, "n_bases": 1000, "lr": 0.0125, "batch_size": 128}
FORK_STATE = "state: the first plateau (author: a relapsed, collapsed state)"
FORK_ESCAPE = "escape: without a hold (author: first-token CE < 3.0 held 500 steps)"
# the author's escape (SPEC 9.2): full-vocabulary first-token CE below 3.0 nats, held at least 500 steps
AUTHOR_ESCAPE, AUTHOR_HOLD = "loss_first < 3.0 held 500 steps", 500
# the author's Gamma: the ratio of sums over the first T = 2,000 steps after the fork (or the median over 100-500)
GAMMA_T = 2000


# ---------------------------------------------------------------------------- the claims
@dataclass(frozen=True)
class Claim:
    """One published claim: what the author found, where, the margin ours is judged by, the replicates it
    needs, its interval method and what measures it."""

    key: str
    claim: str
    author: str  # the author's number, as published
    source: str  # the paper's section or the author's file
    margin: Margin
    evidence: Evidence
    interval: str  # the interval method (interp.mechanisms.intervals)
    on: str  # what measures it: "run" (any run, a sweep's runs, a family's parent), "sweep" or "family"
    command: str  # what would measure it
    setting: dict  # the author's setting: field -> value (a tuple: a range of values)
    definition: str = ""  # how the author's definition differs from ours ("" the same: one comparison)
    needs_author: bool = False  # only the author's definition decides (runs without its columns: not measured)
    extra_setting: tuple[str, ...] = ()  # setting differences named whatever our runs are (the forks' state)


SWEEP = "interp sweep --preset {preset} --out sweeps/{preset} --workers 2"
ANALYZE = "interp analyze RUN --only {only}"
SEEDS = "0,1,2"
FAMILY = f"interp fork RUN --at mid --arm {{arms}} --seed {SEEDS} --steps 3000 --out forks/NAME"
LEAD_DEF = "t_loss = first step with the running-mean first-token loss < 0.9 log K, dz in-batch (SPEC 9.1)"


def _m(low, high, reason, null=None, log=False) -> Margin:
    return Margin(low, high, reason, null, log)


INF = math.inf
CLAIMS: tuple[Claim, ...] = (
    Claim("scaling", "tau ~ D^delta", "delta = 1.19 [1.14, 1.31] (D 3k-36k)", "paper, scaling (SPEC 5, 6)",
          Margin.around(1.19, "an exponent with a CI but no stated tolerance: 0.80-1.25x of 1.19", null=0.0), FIT,
          I.OLS_T + " (log tau on log D)", "sweep", SWEEP.format(preset="scaling-tiny"), {**PAPER, "k": (3, 36)}),
    Claim("fixed_d", "at fixed D, tau is flat in K", "tau 1600-1650 at D = 10,000 for K = 5..36",
          "paper, fixed-D control (SPEC 6)",
          _m(-FLAT_BOUND, FLAT_BOUND, f"flat: tau within 0.80-1.25x per doubling of K (|slope| <= {FLAT_BOUND:.3g})"),
          FIT, I.OLS_T + " (log tau on log K)", "sweep", SWEEP.format(preset="fixed-d-tiny"),
          {**PAPER_MODEL, "n_bases": (278, 2000), "lr": 1e-3, "batch_size": 128, "k": (5, 36)}),
    Claim("noise_lr", "a higher lr lengthens the plateau", "7x lr gives 3.6x tau (slope ~ +0.66; K = 20)",
          "paper, noise (SPEC 1.5, 6)", _m(0.0, INF, "a direction: the slope of log tau on log lr above 0", null=0.0),
          FIT, I.OLS_T + " (log tau on log lr)", "sweep", SWEEP.format(preset="noise-tiny"),
          {**PAPER, "k": 20, "lr": (3e-4, 2e-3)}, definition="tau_window (ours: tau_half)"),
    Claim("noise_batch", "a smaller batch lengthens the plateau", "slope of log tau against log batch < 0",
          "paper, noise (SPEC 1.5)", _m(-INF, 0.0, "a direction: the slope of log tau on log batch below 0", null=0.0),
          FIT, I.OLS_T + " (log tau on log batch)", "sweep", SWEEP.format(preset="noise-tiny"), {**PAPER, "k": 20},
          definition="tau_window (ours: tau_half)"),
    Claim("asymmetry", "the reverse direction (a_to_b) learns slower", "1.7-4.4x the steps of bz_to_a",
          "paper, direction asymmetry (SPEC 1.7)", _m(1.7, 4.4, "the author's own range over K", null=1.0, log=True),
          PAIRS, I.T_LOG_MEAN + " (per-seed ratios)", "sweep", SWEEP.format(preset="asymmetry-tiny"),
          {**PAPER, "k": 10}),
    Claim("lead_share", "the shuffle gap's lead, as a share of t_loss", f"{LEAD_SHARE} +- {LEAD_SD} over K = 3..36",
          "scripts/posthoc_synergy_proxy.py (SPEC 9.1)",
          _m(LEAD_SHARE - LEAD_SD, LEAD_SHARE + LEAD_SD, f"the author's own {LEAD_SHARE} +- {LEAD_SD}", null=0.0),
          RUNS, I.T_MEAN, "run", SWEEP.format(preset="landauer-dense-tiny"), {**PAPER, "k": (3, 36)},
          definition=LEAD_DEF, needs_author=True),
    Claim("lead_trend", "the lead share rises with K", "0.20 at K = 3, 0.47 at K = 10, 0.68 at K = 36",
          "scripts/posthoc_synergy_proxy.py (SPEC 9.1)",
          _m(0.0, INF, "a direction: the share's slope on log K above 0", null=0.0), FIT, I.OLS_T + " (share on log K)",
          "sweep", SWEEP.format(preset="landauer-dense-wide-tiny"), {**PAPER, "k": (3, 36)}, definition=LEAD_DEF,
          needs_author=True),
    Claim("lead_exponent", "the lead in steps grows as K^2.13", "exponent 2.13",
          "scripts/posthoc_synergy_proxy.py (SPEC 9.1)",
          Margin.around(2.13, "an exponent with no stated precision: 0.80-1.25x of 2.13", null=0.0), FIT,
          I.OLS_T + " (log lead in steps on log K)", "sweep", SWEEP.format(preset="landauer-dense-wide-tiny"),
          {**PAPER, "k": (3, 36)}, definition=LEAD_DEF, needs_author=True),
    Claim("attention_onset", "a head's attention to z starts far earlier than dz",
          "step 500 against t(dz > 0.1) = 2750 at K = 20: onset / t(dz) = 0.18", "paper, hidden progress (SPEC 6)",
          _m(0.0, 1.0, "a direction: the onset / t(dz > 0.1) ratio below 1", null=1.0, log=True), RUNS,
          I.T_LOG_MEAN, "run", ANALYZE.format(only="circuits"), {**PAPER, "k": 20},
          definition="t(dz > 0.1) with the in-batch dz (ours: unbiased dz)"),
    Claim("encoded_before_used", "z is encoded before it is used",
          "z decodable (0.86) before the model uses it", "the author's probes (SPEC 12: mech_interp_probe_causal)",
          _m(0.0, 1.0, "a direction: the decodable onset / the first used onset below 1", null=1.0, log=True), RUNS,
          I.T_LOG_MEAN, "run", ANALYZE.format(only="circuits"), PAPER,
          definition="decodable: a linear probe's held-out accuracy >= 0.9 of the way from chance, selectivity >= 0.5"),
    Claim("collective_snap", "all groups snap together", "0 of 200 groups >= 80% at tau/2 (K = 10)",
          "paper, collective transition (SPEC 5, 6)",
          _m(0.0, 0.10, "0 of 200: under the 10% the mechanism table calls a sizeable share"), GROUPS,
          I.EXACT_SHARE + " (groups pooled over runs)", "run", ANALYZE.format(only="groups"), {**PAPER, "k": 10}),
    Claim("saddle", "the plateau is a saddle (negative lambda_min)", "lambda_min < 0 on the plateau",
          "paper, Hessian (SPEC 1.6)",
          _m(-INF, -SADDLE_RELATIVE, f"a direction: lambda_min / lambda_max below -{SADDLE_RELATIVE:g} (beyond "
             f"Lanczos's error)", null=0.0), RUNS, I.T_MEAN, "run", ANALYZE.format(only="hessian"), {**PAPER, "k": 10}),
    Claim("anisotropy", "the escape direction is far flatter than the dominant curvature",
          "lambda_max / |lambda_min| 500-1000", "paper, Hessian (SPEC 8)",
          _m(500.0, 1000.0, "the author's own range", null=1.0, log=True), RUNS, I.T_LOG_MEAN, "run",
          ANALYZE.format(only="hessian"), {**PAPER, "k": 10}),
    Claim("noise_signal", "the gradient noise is about twice the signal on the plateau", "E||g_B - g|| / ||g|| ~ 2",
          "the author's later work (SPEC 8.2)", Margin.around(2.0, "about 2: 0.80-1.25x of 2"), RUNS, I.T_LOG_MEAN,
          "run", ANALYZE.format(only="gradients"), {**PAPER, "k": 10}),
    Claim("coherence", "per-example gradients barely agree", "n x coherence 1.2-1.6",
          "the author's later work (SPEC 8.2)", _m(1.2, 1.6, "the author's own range", log=True), RUNS, I.T_LOG_MEAN,
          "run", ANALYZE.format(only="gradients"), {**PAPER, "k": 10}),
    Claim("consistency_plateau", "the plateau drift is a random walk", "direction consistency 0.04-0.22",
          "the author (SPEC 6, 8.2)", _m(0.04, 0.22, "the author's own range"), RUNS, I.T_MEAN, "run",
          ANALYZE.format(only="trajectory"), {**PAPER, "k": 10, "checkpoint_every": 200}),
    Claim("consistency_transition", "the drift turns directed at the transition", "direction consistency 0.4-0.9",
          "the author (SPEC 6, 8.2)", _m(0.4, 0.9, "the author's own range", null=0.0), RUNS, I.T_MEAN, "run",
          ANALYZE.format(only="trajectory"), {**PAPER, "k": 10, "checkpoint_every": 200}),
    Claim("selector_snr", "the selector SNR probe rejects gradient cancellation",
          "SNR not ~ n_bases^-1/2 (ours: SNR x sqrt(n) > 3)", "paper, mechanisms (SPEC 8.2, 8.3)",
          _m(SNR_SQRT_N_MAX, INF, f"a direction: SNR x sqrt(n) above {SNR_SQRT_N_MAX:g} (cancellation gives about 1)",
             null=1.0, log=True), RUNS, I.T_LOG_MEAN, "run", ANALYZE.format(only="gradients"), {**PAPER, "k": 10}),
    Claim("cancellation_beta", "sharing the selectors barely changes tau", "beta = 0.02",
          "the author (SPEC 8.3)",
          _m(-BETA_BAND, BETA_BAND, f"beta near 0: within {BETA_BAND:g}, a quarter of the way to cancellation's 1"),
          FIT, I.OLS_T + " (log tau on log bases per selector set)", "sweep", SWEEP.format(preset="cancellation-tiny"),
          {**PAPER, "k": 10}),
    *(Claim(f"q_law_{lr:g}", f"the dissipation law Q = c log(K / K*) at lr {lr:g}", f"c = {c:g}",
            "eta_sweep/analysis/fit_per_eta.py (SPEC 13.4)",
            Margin.around(c, f"a slope with no stated precision: 0.80-1.25x of {c:g}", null=0.0), FIT,
            I.OLS_T + " (Q over the dz window on log K, the transitioned runs)", "sweep",
            SWEEP.format(preset="phase-tiny") + f" --grid train.lr={lr:g}", {**PAPER, "lr": lr, "k": (10, 36)},
            definition="Q summed with the held-out gradient every 50 steps (ours: every step's minibatch gradient)")
      for lr, c in ((3e-4, 9.91), (1e-3, 4.29), (3e-3, 110.2))),
    Claim("fork_full_batch", "the clean full gradient re-solves fast", "~800 steps, against >= 16,000 with noise",
          "the author's forks (SPEC 8.1, 9.2)",
          _m(0.0, FORK_RATIO_MAX, f"full batch at least {1 / FORK_RATIO_MAX:g}x sooner than minibatch (the mechanism "
             f"table's rule; the author's minibatch escape is not published)", null=1.0, log=True), FORKS_PER_ARM,
          I.WELCH_LOG, "family", FAMILY.format(arms="full_batch,minibatch"), FORKS,
          extra_setting=(FORK_STATE, FORK_ESCAPE)),
    Claim("fork_isotropic", "isotropic noise of the measured norm traps", ">= 20x the full-batch escape (censored)",
          "the author's forks (SPEC 8.1, 9.2)",
          _m(20 * BOUND_TOLERANCE, INF, "the author's lower bound 20x (censored at 16,000 against ~800), at 0.80 of it",
             null=1.0, log=True), FORKS_PER_ARM, I.WELCH_LOG, "family", FAMILY.format(arms="full_batch,isotropic_noise"),
          FORKS, extra_setting=(FORK_STATE, FORK_ESCAPE)),
    Claim("fork_measured", "measured minibatch noise traps", "still trapped at 1,400 of 3,500 steps (>= 1.75x)",
          "the author's forks (SPEC 8.1, 9.2)",
          _m(1.75 * BOUND_TOLERANCE, INF, "the author's lower bound 1.75x (trapped at 1,400 against ~800), at 0.80 of "
             "it", null=1.0, log=True), FORKS_PER_ARM, I.WELCH_LOG, "family",
          FAMILY.format(arms="full_batch,measured_noise"), FORKS, extra_setting=(FORK_STATE, FORK_ESCAPE)),
    Claim("fork_v_only", "noise in the second moment only slows the escape", "5.75x (800 to 4,600 steps)",
          "the author's forks (SPEC 8.1, 9.2)",
          Margin.around(5.75, "a ratio with no stated precision: 0.80-1.25x of 5.75", null=1.0), FORKS_PER_ARM,
          I.WELCH_LOG, "family", FAMILY.format(arms="full_batch,v_only_noise:xi=isotropic"), FORKS,
          extra_setting=(FORK_STATE, FORK_ESCAPE)),
    Claim("fork_gamma_v_only", "realised update power of v-only noise", "Gamma ~ 1 (0.98)",
          "the author's forks (SPEC 8.1, 9.2)", Margin.around(1.0, "about 1: 0.80-1.25x of 1", null=0.0),
          FORKS_PER_ARM, I.T_LOG_MEAN + " (per-fork Gamma)", "family",
          FAMILY.format(arms="v_only_noise:xi=isotropic") + " --gamma-every 1", FORKS, extra_setting=(FORK_STATE,)),
    Claim("fork_gamma_both", "realised update power of noise in both moments", "Gamma ~ 2 (1.89, 2.05)",
          "the author's forks (SPEC 8.1, 9.2)", Margin.around(2.0, "about 2: 0.80-1.25x of 2, for each arm", null=0.0),
          FORKS_PER_ARM, I.T_LOG_MEAN + " (per-fork Gamma, each arm)", "family",
          FAMILY.format(arms="measured_noise,isotropic_noise") + " --gamma-every 1", FORKS, extra_setting=(FORK_STATE,)),
)


def claim(key: str) -> Claim:
    return next(c for c in CLAIMS if c.key == key)


# ---------------------------------------------------------------------------- settings
def _show(v) -> str:
    if isinstance(v, tuple):
        return f"{_show(v[0])}..{_show(v[1])}"
    return f"{v:g}" if isinstance(v, float) else str(v)


def setting_differences(c: Claim, ours: dict[str, list]) -> list[str]:
    """Each field of the claim's setting where our runs (field -> the values they take) differ from
    the author's, named with both values; then the claim's fixed differences (the forks' state)."""
    out = []
    for name, theirs in c.setting.items():
        have = sorted(v for v in ours.get(name, []) if v is not None)
        if not have:
            continue
        if isinstance(theirs, tuple):
            same = min(have) >= theirs[0] and max(have) <= theirs[1]
        else:
            same = all(math.isclose(float(v), float(theirs), rel_tol=1e-9) for v in have)
        if not same:
            mine = _show(have[0]) if len(have) == 1 else f"{_show(have[0])}..{_show(have[-1])}"
            out.append(f"{name} {mine} (author {_show(theirs)})")
    return out + list(c.extra_setting)


def escape_difference(criterion: str | None) -> str:
    """The fork rows' escape difference for a family's criterion text: "" when it is the author's (loss_first < 3.0,
    not in log K, held >= AUTHOR_HOLD), FORK_ESCAPE when it is missing or unreadable, else ours and the author's."""
    from interp.errors import InterpError
    from interp.forks.escape import parse_escape

    try:
        c = parse_escape(criterion) if criterion else None
    except InterpError:
        c = None
    if c is None:
        return FORK_ESCAPE
    if (c.metric, c.op, c.in_log_k) == ("loss_first", "<", False) and c.threshold == 3.0 and c.hold >= AUTHOR_HOLD:
        return ""
    return f"escape {c.words} (author: {AUTHOR_ESCAPE})"


def gamma_window_difference(window: int | None, every: int | None) -> str:
    """The Gamma rows' window difference: our ratio of sums runs over the first `window` steps after the fork (sampled
    every `every` steps); "" when it is the author's T = GAMMA_T steps, or when the window is not known."""
    if not window or int(window) == GAMMA_T:
        return ""
    sampled = f", sampled every {int(every)} steps" if every and int(every) > 1 else ""
    return (f"Gamma window: ratio of sums over the first {int(window)} steps after the fork{sampled} (author: over "
            f"T = {GAMMA_T:,} steps, or the median over steps 100-500)")


# ---------------------------------------------------------------------------- the verdict
def _usable(m: Measure | None) -> bool:
    return m is not None and m.usable


def _said(m: Measure) -> str:
    arm = f"{m.extra['arm']} " if m.extra.get("arm") else ""
    e = m.as_estimate()
    bound = I.bound_prefix(e.bound)
    if math.isnan(m.low) and math.isnan(m.high):
        return f"{arm}{bound}{m.value:.3g}"
    return f"{arm}{bound}{m.value:.3g} [{m.lo:.3g}, {'inf' if math.isinf(m.hi) else f'{m.hi:.3g}'}]"


def each_arm(c: Claim, arms: dict[str, Measure]) -> Measure:
    """The one measure of a claim made of each of several fork arms (Gamma about 2 in both moments: the author's
    1.89 and 2.05, one per arm): the arm farthest from the margin (among ties the widest interval; an arm with too
    few forks first), so the claim holds only where it holds for every arm. A mean over arms whose values differ
    would agree by averaging."""
    low, high = c.margin.low, c.margin.high

    def far(a):
        m = a[1]
        return (bool(c.evidence.short(m.as_estimate())), max(low - m.hi, m.lo - high, 0.0), m.hi - m.lo)

    name, m = max(arms.items(), key=far)
    if len(arms) == 1:
        return m
    each = "; ".join(f"{a} {_said(x)} ({x.n_runs} forks)" for a, x in arms.items())
    return replace(m, detail=f"{m.detail}: the arm farthest from the author's (each arm: {each})",
                   extra={**m.extra, "arm": name})


def _side(c: Claim, m: Measure | None) -> tuple[str, str]:
    """One comparison: (NOT_ENOUGH / INSIDE / OUTSIDE / UNDECIDED, or "" when not measured, and its sentence)."""
    if not _usable(m):
        return "", ""
    e = m.as_estimate()
    state = Q.decide(c.margin, c.evidence, e)
    if state == Q.NOT_ENOUGH:
        return state, f"{_said(m)} rests on {c.evidence.short(e)}"
    words = {Q.INSIDE: "lies inside", Q.OUTSIDE: "lies wholly outside",
             Q.UNDECIDED: "neither lies inside nor wholly outside"}[state]
    null = "" if c.margin.null is None else f", null {c.margin.null:g}"
    return state, f"{_said(m)} ({c.evidence.count(e.n).split(' (')[0]}) {words} the margin {c.margin.text()}{null}"


def _more(c: Claim, m: Measure) -> str:
    """What would decide an undecided comparison, in words."""
    e = m.as_estimate()
    n = Q.replicates_to_decide(c.margin, c.evidence, e)
    unit = c.evidence.unit.split(" (")[0]
    if n is None:
        why = ("censored on both sides: a longer horizon, not more replicates, would time them" if e.bound == I.BOTH_CENSORED
               else "a bound, not a value" if e.bound else "its value lies on the margin's edge or no spread is measured")
        return f"more replicates are not expected to decide it ({why})"
    return f"about {n} {unit} ({n - e.n} more) would be expected to decide it if the spread stays as observed"


class Verdict(NamedTuple):
    verdict: str
    why: str
    command: str  # what would measure or decide it ("" when nothing the toolkit runs would change it)


def _shortfall(c: Claim, m: Measure | None) -> str:
    """"runs" when `m` has too few replicates, "x" when too few distinct x values, "" when it has enough."""
    if not _usable(m):
        return ""
    e = m.as_estimate()
    return "runs" if e.n < c.evidence.n else "x" if c.evidence.x and e.n_x < c.evidence.x else ""


def verdict(c: Claim, ours: Measure | None, author: Measure | None, differences: list[str],
            missing: str = "", replicate: str = "", final: bool = False) -> Verdict:
    """The verdict on claim `c` (see the module docstring), the sentence that says why, and the command that would
    measure or decide it. `author` is ours under the author's definition (None: not computable, or the same
    definition as ours); `missing` says why a measure is absent; `replicate` is the command that adds replicates of
    what was measured (`interp.mechanisms.commands`; "": the claim's own command); `final` says that no command
    would measure what is missing (e.g. a run that never reaches tau)."""
    sides = {"author": _side(c, author), "ours": _side(c, ours)}
    usable = {k: v for k, v in sides.items() if v[0] and v[0] != Q.NOT_ENOUGH}
    prefix = {"author": "under the author's definition ", "ours": ""}
    few = "; ".join(f"{prefix[k]}{v[1]}" for k, v in sides.items() if v[0] == Q.NOT_ENOUGH)
    why_missing = "; ".join(x for x in (missing, few) if x)
    short = _shortfall(c, author) or _shortfall(c, ours)
    command = (replicate or c.command) if short == "runs" else "" if final and not short else c.command

    def unmeasured(why: str) -> Verdict:
        tail = f"measure it with: {command}" if command else "no command measures it on these paths"
        return Verdict(NOT_MEASURED, (f"{why}; " if why else "") + tail, command)

    if c.needs_author and "author" not in usable:
        return unmeasured(sides["author"][1] if sides["author"][0] == Q.NOT_ENOUGH
                          else missing or "ours under the author's definition cannot be computed on these runs")
    if not usable:
        return unmeasured(why_missing)
    if len(usable) == 2 and {usable["author"][0], usable["ours"][0]} == {Q.INSIDE, Q.OUTSIDE}:
        return Verdict(DIFFERS_DEFINITION, f"under the author's definition ({c.definition}) {usable['author'][1]}; "
                                           f"under ours {usable['ours'][1]}", "")
    where = "author" if "author" in usable else "ours"
    state, text = usable[where]
    said = f"{prefix[where] or 'ours '}".rstrip() + f": {text}"
    if state == Q.INSIDE:
        return Verdict(REPRODUCED, said, "")
    if state == Q.OUTSIDE:
        if differences:
            return Verdict(DIFFERS_SETTING, f"{said}; the setting differs: {'; '.join(differences)}", "")
        return Verdict(NOT_REPRODUCED, f"{said}, in the author's setting", "")
    m = author if where == "author" else ours
    setting = f"; the setting differs: {'; '.join(differences)}" if differences else ""
    more = _more(c, m)
    decides = Q.replicates_to_decide(c.margin, c.evidence, m.as_estimate()) is not None
    command = (replicate or c.command) if decides else ""
    return Verdict(INCONCLUSIVE, f"{said}: {more}" + (f" ({command})" if command else "") + setting, command)
