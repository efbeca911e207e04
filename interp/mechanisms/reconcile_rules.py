"""The reconciliation table's claims and the rules that give each its verdict (docs/reconciliation.md).

Written, with their constants, before any table was measured. A published claim is compared
twice on the same runs: ours under the author's definition (where the toolkit can compute it
and it differs from ours) and ours under ours. Each comparison asks one question, the claim's
`check`: does our interval overlap the author's published range (a number), or does the
claim's direction hold (a sign, a bound)? A check answers True, False, or None when the interval
straddles the bound (the direction is then not shown: it counts as not holding, never rounded).

The verdict, in this order:

1. **not measured**: nothing measures the claim on these paths (or the claim needs the
   author's definition and the runs lack its logged columns, or a number's interval is too wide or
   unbounded to compare: WIDE), with the one-line reason and the command that would measure it.
2. **differs because of a definition**: both definitions are measured on the same runs and
   they disagree: one agrees with the author, the other does not. The row names the definition.
3. **reproduced**: the deciding comparison agrees (the author's definition where it is
   measured, else ours).
4. **differs because of a setting**: it does not agree and the setting differs from the
   author's (model, K, n_bases, lr, batch size, the fork's state or escape criterion): the row
   names each difference. A setting named is a candidate cause, not a proof.
5. **not reproduced**: it does not agree in the author's own setting.

Torch-free and pandas-free: reading the rules costs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

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
# a number is only compared with an informative interval: both ends finite (a censored fork ratio "> x" is
# a bound, not a number), and at most WIDE times the author's scale (the larger of the range's width and
# its ends, at least SCALE_FLOOR) wide. A wider interval overlaps anything: the number is not measured.
WIDE = 10.0
SCALE_FLOOR = 0.1

# the author's settings (SPEC 6, 9.1, 9.2): the fields compared with our runs' specs
PAPER_MODEL = {"n_layers": 4, "n_heads": 4, "d_model": 128, "d_mlp": 512}
PAPER = {**PAPER_MODEL, "n_bases": 1000, "lr": 1e-3, "batch_size": 128}
FORKS = {**PAPER_MODEL, "k": 10, "n_bases": 1000, "lr": 0.0125, "batch_size": 128}
FORK_STATE = "state: the first plateau (author: a relapsed, collapsed state)"
FORK_ESCAPE = "escape: without a hold (author: first-token CE < 3.0 held 500 steps)"


# ---------------------------------------------------------------------------- checks
def overlaps(low: float, high: float) -> Callable[[Measure], bool]:
    """Our interval (the value alone without one) overlaps the author's [low, high]; `check.informative(m)` says
    whether the interval can be compared at all (WIDE)."""
    scale = max(high - low, abs(low), abs(high), SCALE_FLOOR)

    def check(m: Measure) -> bool:
        return m.lo <= high and m.hi >= low

    def informative(m: Measure) -> bool:
        return math.isfinite(m.lo) and math.isfinite(m.hi) and m.hi - m.lo <= WIDE * scale
    check.informative = informative
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
    """Flat: the interval of a slope contains 0."""
    return m.lo <= 0 <= m.hi


holds_zero.text = "the slope's interval contains 0 (flat)"


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
          overlaps(1.14, 1.31), "sweep", SWEEP.format(preset="scaling-tiny"), {**PAPER, "k": (3, 36)}),
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
          "paper, direction asymmetry (SPEC 1.7)", overlaps(1.7, 4.4), "sweep",
          SWEEP.format(preset="asymmetry-tiny"), {**PAPER, "k": 10}),
    Claim("lead_share", "the shuffle gap's lead, as a share of t_loss", f"{LEAD_SHARE} +- {LEAD_SD} over K = 3..36",
          "scripts/posthoc_synergy_proxy.py (SPEC 9.1)", overlaps(LEAD_SHARE - LEAD_SD, LEAD_SHARE + LEAD_SD), "run",
          SWEEP.format(preset="landauer-dense-tiny"), {**PAPER, "k": (3, 36)}, definition=LEAD_DEF, needs_author=True),
    Claim("lead_trend", "the lead share rises with K", "0.20 at K = 3, 0.47 at K = 10, 0.68 at K = 36",
          "scripts/posthoc_synergy_proxy.py (SPEC 9.1)", above(0.0), "sweep",
          SWEEP.format(preset="landauer-dense-tiny"), {**PAPER, "k": (3, 36)}, definition=LEAD_DEF, needs_author=True),
    Claim("lead_exponent", "the lead in steps grows as K^2.13", "exponent 2.13",
          "scripts/posthoc_synergy_proxy.py (SPEC 9.1)", overlaps(2.13, 2.13), "sweep",
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
          "lambda_max / |lambda_min| 500-1000", "paper, Hessian (SPEC 8)", overlaps(500.0, 1000.0), "run",
          ANALYZE.format(only="hessian"), {**PAPER, "k": 10}),
    Claim("noise_signal", "the gradient noise is about twice the signal on the plateau", "E||g_B - g|| / ||g|| ~ 2",
          "the author's later work (SPEC 8.2)", overlaps(1.5, 2.5), "run", ANALYZE.format(only="gradients"),
          {**PAPER, "k": 10}),
    Claim("coherence", "per-example gradients barely agree", "n x coherence 1.2-1.6",
          "the author's later work (SPEC 8.2)", overlaps(1.2, 1.6), "run", ANALYZE.format(only="gradients"),
          {**PAPER, "k": 10}),
    Claim("consistency_plateau", "the plateau drift is a random walk", "direction consistency 0.04-0.22",
          "the author (SPEC 6, 8.2)", overlaps(0.04, 0.22), "run", ANALYZE.format(only="trajectory"),
          {**PAPER, "k": 10, "checkpoint_every": 200}),
    Claim("consistency_transition", "the drift turns directed at the transition", "direction consistency 0.4-0.9",
          "the author (SPEC 6, 8.2)", overlaps(0.4, 0.9), "run", ANALYZE.format(only="trajectory"),
          {**PAPER, "k": 10, "checkpoint_every": 200}),
    Claim("selector_snr", "the selector SNR probe rejects gradient cancellation",
          "SNR not ~ n_bases^-1/2 (ours: SNR x sqrt(n) > 3)", "paper, mechanisms (SPEC 8.2, 8.3)",
          above(SNR_SQRT_N_MAX), "run", ANALYZE.format(only="gradients"), {**PAPER, "k": 10}),
    Claim("cancellation_beta", "sharing the selectors barely changes tau", "beta = 0.02",
          "the author (SPEC 8.3)", overlaps(0.02, 0.02), "sweep", SWEEP.format(preset="cancellation-tiny"),
          {**PAPER, "k": 10}),
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
          "the author's forks (SPEC 8.1, 9.2)", overlaps(5.75, 5.75), "family",
          FAMILY.format(arms="full_batch,v_only_noise"), FORKS, extra_setting=(FORK_STATE, FORK_ESCAPE)),
    Claim("fork_gamma_v_only", "realised update power of v-only noise", "Gamma ~ 1 (0.98)",
          "the author's forks (SPEC 8.1, 9.2)", overlaps(1 - GAMMA_BAND, 1 + GAMMA_BAND), "family",
          FAMILY.format(arms="v_only_noise") + " --gamma-every 1", FORKS, extra_setting=(FORK_STATE,)),
    Claim("fork_gamma_both", "realised update power of noise in both moments", "Gamma ~ 2 (1.89, 2.05)",
          "the author's forks (SPEC 8.1, 9.2)", overlaps(2 * (1 - GAMMA_BAND), 2 * (1 + GAMMA_BAND)), "family",
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


# ---------------------------------------------------------------------------- the verdict
def _usable(m: Measure | None) -> bool:
    return m is not None and m.usable


def _said(m: Measure) -> str:
    if math.isnan(m.low) and math.isnan(m.high):
        return f"{m.value:.3g}"
    return f"{m.value:.3g} [{m.lo:.3g}, {m.hi:.3g}]"


def _result(c: Claim, m: Measure) -> tuple[bool, str]:
    ok = c.check(m)
    words = "agrees" if ok else ("does not show it (it straddles the bound)" if ok is None else "does not agree")
    return bool(ok), f"{_said(m)} {words} (the check: {c.check.text})"


def verdict(c: Claim, ours: Measure | None, author: Measure | None, differences: list[str],
            missing: str = "") -> tuple[str, str]:
    """The verdict on claim `c` (see the module docstring) and the sentence that says why. `author`
    is ours under the author's definition (None: not computable, or the same definition as ours);
    `missing` says why a measure is absent."""
    informative = getattr(c.check, "informative", lambda m: True)
    wide = [f"{name} {_said(m)} is too wide or unbounded to compare with a number" for name, m in
            (("ours", ours), ("ours under the author's definition", author)) if _usable(m) and not informative(m)]
    ours, author = (m if _usable(m) and informative(m) else None for m in (ours, author))
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
