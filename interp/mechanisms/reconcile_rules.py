"""The reconciliation table's claims and the rules that give each its verdict (docs/reconciliation.md).

Written, with their constants, before any table was measured. A published claim is compared
twice on the same runs: ours under the author's definition (where the toolkit can compute it
and it differs from ours) and ours under ours. Each comparison asks one question, the claim's
`check`: does our interval overlap the author's published range (a number), or does the
claim's direction hold (a sign, a bound)? A check answers True, False, or None when the interval
straddles the bound (the direction is then not shown: it counts as not holding, never rounded).

The verdict, in this order:

1. **not measured**: nothing measures the claim on these paths (or the claim needs the
   author's definition and the runs lack its logged columns, or a number's interval overlaps the
   author's range without showing the number: inconclusive, see WIDE), with the one-line reason and the
   command that would measure it.
2. **differs because of a definition**: both definitions are measured on the same runs and
   they disagree: one agrees with the author, the other does not. The row names the definition.
3. **reproduced**: the deciding comparison agrees (the author's definition where it is
   measured, else ours).
4. **differs because of a setting**: it does not agree and the setting differs from the
   author's (model, K, n_bases, lr, batch size, the fork's state, escape criterion or Gamma window): the row
   names each difference. A setting named is a candidate cause, not a proof.
5. **not reproduced**: it does not agree in the author's own setting.

Torch-free and pandas-free: reading the rules costs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from interp.mechanisms.rules import FORK_RATIO_MAX, SADDLE_RELATIVE, SNR_SQRT_N_MAX, Measure

REPRODUCED = "reproduced"
DIFFERS_DEFINITION = "differs: definition"
DIFFERS_SETTING = "differs: setting"
NOT_REPRODUCED = "not reproduced"
NOT_MEASURED = "not measured"
VERDICTS = (REPRODUCED, DIFFERS_DEFINITION, DIFFERS_SETTING, NOT_REPRODUCED, NOT_MEASURED)

# ---------------------------------------------------------------------------- constants
# a fork arm "traps" when it escapes at least this many times slower than the full-batch arm
# (the mirror of the mechanism table's FORK_RATIO_MAX: the author saw >= 20x)
TRAP_RATIO = 1 / FORK_RATIO_MAX
# "Gamma about 1 / about 2": the author's 0.98 and 1.89-2.05; a band of +-25% around the round number
GAMMA_BAND = 0.25
# the lead share's published spread: 0.52 +- 0.14 (mean +- np.std over K)
LEAD_SHARE, LEAD_SD = 0.52, 0.14
# an interval that overlaps the author's range shows the number only when it is informative: both ends finite
# (a censored fork ratio "> x" is a bound, not a number), at most WIDE times the author's scale wide (the larger
# of the range's width and its ends, at least SCALE_FLOOR; a claim may name its own), and clear of the claim's
# null value (no effect: 0, or 1 for a ratio) where the author's range is clear of it. Otherwise it would
# overlap nearly anything: the number is not measured (inconclusive). An interval that misses the author's range
# disagrees, however wide.
WIDE = 1.0
SCALE_FLOOR = 0.1
# "flat" is only shown by a slope's interval that excludes growth as fast as tau's in D (delta's lower end, 1.14)
FLAT_BOUND = 1.14
# the cancellation exponent is told from cancellation's beta = 1, not from 0: an interval at most half as wide as
# the gap between the two readings (the author's 0.02 alone would ask for SCALE_FLOOR)
BETA_SCALE = 0.5

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


# ---------------------------------------------------------------------------- checks
def overlaps(low: float, high: float, null: float | None = None,
             scale: float | None = None) -> Callable[[Measure], bool]:
    """Our interval (the value alone without one) overlaps the author's [low, high]; `check.vague(m)` says why an
    interval shows no number ("" when it does: WIDE). `null` is the value of no effect (ignored where the author's
    range holds it), `scale` the precision the claim needs (by default the author's own size)."""
    scale = WIDE * (max(high - low, abs(low), abs(high), SCALE_FLOOR) if scale is None else scale)
    null = None if null is None or low <= null <= high else null

    def check(m: Measure) -> bool:
        return m.lo <= high and m.hi >= low

    def vague(m: Measure) -> str:
        if not (math.isfinite(m.lo) and math.isfinite(m.hi)):
            return "has an unbounded end (a bound, not a number)"
        if m.hi - m.lo > scale:
            return f"is {m.hi - m.lo:.3g} wide, more than the author's scale {scale:.3g}"
        return f"reaches {null:g}, the value of no effect" if null is not None and m.lo <= null <= m.hi else ""
    check.vague, check.band = vague, (low, high)
    check.text = f"our interval overlaps the author's [{low:.3g}, {high:.3g}]"
    return check


def above(bound: float) -> Callable[[Measure], bool | None]:
    """The whole interval lies above `bound` (None: it straddles it)."""
    def check(m: Measure) -> bool | None:
        return True if m.lo > bound else False if m.hi < bound else None
    check.text = f"our interval lies above {bound:.3g}"
    return check


def below(bound: float) -> Callable[[Measure], bool | None]:
    def check(m: Measure) -> bool | None:
        return True if m.hi < bound else False if m.lo > bound else None
    check.text = f"our interval lies below {bound:.3g}"
    return check


def holds_zero(m: Measure) -> bool:
    """Flat: the interval of a slope contains 0 (`holds_zero.vague(m)`: it does not tell 0 from FLAT_BOUND)."""
    return m.lo <= 0 <= m.hi


def _not_flat_enough(m: Measure) -> str:
    if -FLAT_BOUND < m.lo and m.hi < FLAT_BOUND:
        return ""
    return f"reaches |slope| {FLAT_BOUND:g}, the author's lower exponent of D: it does not tell flat from that growth"


holds_zero.text = "the slope's interval contains 0 (flat)"
holds_zero.vague = _not_flat_enough


# ---------------------------------------------------------------------------- the claims
@dataclass(frozen=True)
class Claim:
    """One published claim: what the author found, where, how ours is compared, and what measures it."""

    key: str
    claim: str
    author: str  # the author's number, as published
    source: str  # the paper's section or the author's file
    check: Callable[[Measure], bool | None]
    on: str  # what measures it: "run" (any run, a sweep's runs, a family's parent), "sweep" or "family"
    command: str  # what would measure it
    setting: dict  # the author's setting: field -> value (a tuple: a range of values)
    definition: str = ""  # how the author's definition differs from ours ("" the same: one comparison)
    needs_author: bool = False  # only the author's definition decides (runs without its columns: not measured)
    extra_setting: tuple[str, ...] = ()  # setting differences named whatever our runs are (the forks' state)


SWEEP = "interp sweep --preset {preset} --out sweeps/{preset} --workers 2"
ANALYZE = "interp analyze RUN --only {only}"
FAMILY = "interp fork RUN --at mid --arm {arms} --seed 0,1 --steps 3000 --out forks/NAME"
LEAD_DEF = "t_loss = first step with the running-mean first-token loss < 0.9 log K, dz in-batch (SPEC 9.1)"

CLAIMS: tuple[Claim, ...] = (
    Claim("scaling", "tau ~ D^delta", "delta = 1.19 [1.14, 1.31] (D 3k-36k)", "paper, scaling (SPEC 5, 6)",
          overlaps(1.14, 1.31, null=0.0), "sweep", SWEEP.format(preset="scaling-tiny"), {**PAPER, "k": (3, 36)}),
    Claim("fixed_d", "at fixed D, tau is flat in K", "tau 1600-1650 at D = 10,000 for K = 5..36",
          "paper, fixed-D control (SPEC 6)", holds_zero, "sweep", SWEEP.format(preset="fixed-d-tiny"),
          {**PAPER_MODEL, "n_bases": (278, 2000), "lr": 1e-3, "batch_size": 128, "k": (5, 36)}),
    Claim("noise_lr", "a higher lr lengthens the plateau", "7x lr gives 3.6x tau (slope ~ +0.66; K = 20)",
          "paper, noise (SPEC 1.5, 6)", above(0.0), "sweep", SWEEP.format(preset="noise-tiny"),
          {**PAPER, "k": 20, "lr": (3e-4, 2e-3)}, definition="tau_window (ours: tau_half)"),
    Claim("noise_batch", "a smaller batch lengthens the plateau", "slope of log tau against log batch < 0",
          "paper, noise (SPEC 1.5)", below(0.0), "sweep", SWEEP.format(preset="noise-tiny"), {**PAPER, "k": 20},
          definition="tau_window (ours: tau_half)"),
    Claim("asymmetry", "the reverse direction (a_to_b) learns slower", "1.7-4.4x the steps of bz_to_a",
          "paper, direction asymmetry (SPEC 1.7)", overlaps(1.7, 4.4, null=1.0), "sweep",
          SWEEP.format(preset="asymmetry-tiny"), {**PAPER, "k": 10}),
    Claim("lead_share", "the shuffle gap's lead, as a share of t_loss", f"{LEAD_SHARE} +- {LEAD_SD} over K = 3..36",
          "scripts/posthoc_synergy_proxy.py (SPEC 9.1)",
          overlaps(LEAD_SHARE - LEAD_SD, LEAD_SHARE + LEAD_SD, null=0.0), "run",
          SWEEP.format(preset="landauer-dense-tiny"), {**PAPER, "k": (3, 36)}, definition=LEAD_DEF, needs_author=True),
    Claim("lead_trend", "the lead share rises with K", "0.20 at K = 3, 0.47 at K = 10, 0.68 at K = 36",
          "scripts/posthoc_synergy_proxy.py (SPEC 9.1)", above(0.0), "sweep",
          SWEEP.format(preset="landauer-dense-tiny"), {**PAPER, "k": (3, 36)}, definition=LEAD_DEF, needs_author=True),
    Claim("lead_exponent", "the lead in steps grows as K^2.13", "exponent 2.13",
          "scripts/posthoc_synergy_proxy.py (SPEC 9.1)", overlaps(2.13, 2.13, null=0.0), "sweep",
          SWEEP.format(preset="landauer-dense-tiny"), {**PAPER, "k": (3, 36)}, definition=LEAD_DEF, needs_author=True),
    Claim("attention_onset", "a head's attention to z starts far earlier than dz",
          "step 500 against t(dz > 0.1) = 2750 at K = 20: onset / t(dz) = 0.18", "paper, hidden progress (SPEC 6)",
          below(1.0), "run", ANALYZE.format(only="circuits"), {**PAPER, "k": 20},
          definition="t(dz > 0.1) with the in-batch dz (ours: unbiased dz)"),
    Claim("collective_snap", "all groups snap together", "0 of 200 groups >= 80% at tau/2 (K = 10)",
          "paper, collective transition (SPEC 5, 6)", overlaps(0.0, 0.0), "run", ANALYZE.format(only="groups"),
          {**PAPER, "k": 10}),
    Claim("saddle", "the plateau is a saddle (negative lambda_min)", "lambda_min < 0 on the plateau",
          "paper, Hessian (SPEC 1.6)", below(-SADDLE_RELATIVE), "run", ANALYZE.format(only="hessian"),
          {**PAPER, "k": 10}),
    Claim("anisotropy", "the escape direction is far flatter than the dominant curvature",
          "lambda_max / |lambda_min| 500-1000", "paper, Hessian (SPEC 8)", overlaps(500.0, 1000.0, null=1.0), "run",
          ANALYZE.format(only="hessian"), {**PAPER, "k": 10}),
    Claim("noise_signal", "the gradient noise is about twice the signal on the plateau", "E||g_B - g|| / ||g|| ~ 2",
          "the author's later work (SPEC 8.2)", overlaps(1.5, 2.5, null=0.0), "run", ANALYZE.format(only="gradients"),
          {**PAPER, "k": 10}),
    Claim("coherence", "per-example gradients barely agree", "n x coherence 1.2-1.6",
          "the author's later work (SPEC 8.2)", overlaps(1.2, 1.6), "run", ANALYZE.format(only="gradients"),
          {**PAPER, "k": 10}),
    Claim("consistency_plateau", "the plateau drift is a random walk", "direction consistency 0.04-0.22",
          "the author (SPEC 6, 8.2)", overlaps(0.04, 0.22), "run", ANALYZE.format(only="trajectory"),
          {**PAPER, "k": 10, "checkpoint_every": 200}),
    Claim("consistency_transition", "the drift turns directed at the transition", "direction consistency 0.4-0.9",
          "the author (SPEC 6, 8.2)", overlaps(0.4, 0.9, null=0.0), "run", ANALYZE.format(only="trajectory"),
          {**PAPER, "k": 10, "checkpoint_every": 200}),
    Claim("selector_snr", "the selector SNR probe rejects gradient cancellation",
          "SNR not ~ n_bases^-1/2 (ours: SNR x sqrt(n) > 3)", "paper, mechanisms (SPEC 8.2, 8.3)",
          above(SNR_SQRT_N_MAX), "run", ANALYZE.format(only="gradients"), {**PAPER, "k": 10}),
    Claim("cancellation_beta", "sharing the selectors barely changes tau", "beta = 0.02",
          "the author (SPEC 8.3)", overlaps(0.02, 0.02, scale=BETA_SCALE), "sweep",
          SWEEP.format(preset="cancellation-tiny"), {**PAPER, "k": 10}),
    Claim("fork_full_batch", "the clean full gradient re-solves fast", "~800 steps, against >= 16,000 with noise",
          "the author's forks (SPEC 8.1, 9.2)", below(FORK_RATIO_MAX), "family",
          FAMILY.format(arms="full_batch,minibatch"), FORKS, extra_setting=(FORK_STATE, FORK_ESCAPE)),
    Claim("fork_isotropic", "isotropic noise of the measured norm traps", ">= 20x the full-batch escape (censored)",
          "the author's forks (SPEC 8.1, 9.2)", above(TRAP_RATIO), "family",
          FAMILY.format(arms="full_batch,isotropic_noise"), FORKS, extra_setting=(FORK_STATE, FORK_ESCAPE)),
    Claim("fork_measured", "measured minibatch noise traps", "still trapped at 1,400 of 3,500 steps (>= 1.75x)",
          "the author's forks (SPEC 8.1, 9.2)", above(TRAP_RATIO), "family",
          FAMILY.format(arms="full_batch,measured_noise"), FORKS, extra_setting=(FORK_STATE, FORK_ESCAPE)),
    Claim("fork_v_only", "noise in the second moment only slows the escape", "5.75x (800 to 4,600 steps)",
          "the author's forks (SPEC 8.1, 9.2)", overlaps(5.75, 5.75, null=1.0), "family",
          FAMILY.format(arms="full_batch,v_only_noise"), FORKS, extra_setting=(FORK_STATE, FORK_ESCAPE)),
    Claim("fork_gamma_v_only", "realised update power of v-only noise", "Gamma ~ 1 (0.98)",
          "the author's forks (SPEC 8.1, 9.2)", overlaps(1 - GAMMA_BAND, 1 + GAMMA_BAND, null=0.0), "family",
          FAMILY.format(arms="v_only_noise") + " --gamma-every 1", FORKS, extra_setting=(FORK_STATE,)),
    Claim("fork_gamma_both", "realised update power of noise in both moments", "Gamma ~ 2 (1.89, 2.05)",
          "the author's forks (SPEC 8.1, 9.2)", overlaps(2 * (1 - GAMMA_BAND), 2 * (1 + GAMMA_BAND), null=0.0), "family",
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
    if math.isnan(m.low) and math.isnan(m.high):
        return f"{arm}{m.value:.3g}"
    return f"{arm}{m.value:.3g} [{m.lo:.3g}, {m.hi:.3g}]"


def each_arm(c: Claim, arms: dict[str, Measure]) -> Measure:
    """The one measure of a claim made of each of several fork arms (Gamma about 2 in both moments: the author's
    1.89 and 2.05, one per arm): the arm farthest from the author's range (among ties the widest interval), so the
    claim holds only where it holds for every arm. A mean over arms whose values differ would agree by averaging."""
    low, high = c.check.band
    name, m = max(arms.items(), key=lambda a: (max(low - a[1].hi, a[1].lo - high, 0.0), a[1].hi - a[1].lo))
    if len(arms) == 1:
        return m
    each = "; ".join(f"{a} {_said(x)}" for a, x in arms.items())
    return replace(m, detail=f"{m.detail}: the arm farthest from the author's (each arm: {each})",
                   extra={**m.extra, "arm": name})


def _result(c: Claim, m: Measure) -> tuple[bool, str]:
    ok = c.check(m)
    words = "agrees" if ok else ("does not show it (it straddles the bound)" if ok is None else "does not agree")
    return bool(ok), f"{_said(m)} {words} (the check: {c.check.text})"


def verdict(c: Claim, ours: Measure | None, author: Measure | None, differences: list[str],
            missing: str = "") -> tuple[str, str]:
    """The verdict on claim `c` (see the module docstring) and the sentence that says why. `author`
    is ours under the author's definition (None: not computable, or the same definition as ours);
    `missing` says why a measure is absent."""
    def vague(m: Measure | None) -> str:  # why an interval that passes the check shows nothing ("": it shows it)
        return getattr(c.check, "vague", lambda m: "")(m) if _usable(m) and c.check(m) else ""

    wide = [f"{name} {_said(m)} passes the check ({c.check.text}) but {vague(m)}: inconclusive" for name, m in
            (("ours", ours), ("ours under the author's definition", author)) if vague(m)]
    ours, author = (m if _usable(m) and not vague(m) else None for m in (ours, author))
    missing = "; ".join(([missing] if missing else []) + wide)
    if c.needs_author and not _usable(author):
        why = missing or "ours under the author's definition cannot be computed on these runs"
        return NOT_MEASURED, f"{why}; measure it with: {c.command}"
    if not _usable(ours) and not _usable(author):
        return NOT_MEASURED, (f"{missing}; " if missing else "") + f"measure it with: {c.command}"
    said = {}
    if _usable(author):
        said["author"] = _result(c, author)
    if _usable(ours):
        said["ours"] = _result(c, ours)
    if len(said) == 2 and said["author"][0] != said["ours"][0]:
        return DIFFERS_DEFINITION, (f"under the author's definition ({c.definition}) {said['author'][1]}; "
                                    f"under ours {said['ours'][1]}")
    ok, text = said.get("author", said.get("ours"))
    where = "under the author's definition" if "author" in said else "ours"
    if ok:
        return REPRODUCED, f"{where}: {text}"
    if differences:
        return DIFFERS_SETTING, f"{where}: {text}; the setting differs: {'; '.join(differences)}"
    return NOT_REPRODUCED, f"{where}: {text}, in the author's setting"
