"""Verdicts of the author's program at tiny scale (issue 51; docs/variants.md): each preset's table judged by
SPEC 10's rules (`interp.mechanisms.equivalence`: the 90% interval inside the margin reproduces, wholly outside it
does not, else inconclusive; too few replicates decide nothing) against the author's number where one is
published, and measured only where none is.

    k1-control-tiny         K = 1 reaches exact match before K = 10's tau_half (README: "K = 1 learns quickly")
    label-noise-tiny        tau_acc_half(P) / tau_acc_half(0) at P = 0.05, 0.2 against the author's K = 20 tau ratios
                            0.835, 0.940
    hierarchy-tiny          the share of seeds with two plateaus by the author's rule (exp_hierarchical.py)
    holdout-tiny            held-out exact match below 0.2: a lookup table (the author's rule and finding, 3%)
    optimizer-branch-tiny   escapes within the horizon: the decoupled-weight-decay arms transition, the L2 ones stay
    reversal-transfer-tiny  the escape after a direction switch against the same direction from scratch (measured)

Each takes the preset's table (`Sweep.table()`, `ForkFamily.table()`; the kept CSVs of docs/data/variants/ read the
same through `judge_table`) and returns `Claim`s. numpy, pandas and scipy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from interp.mechanisms import equivalence as Q
from interp.mechanisms import intervals as I
from interp.mechanisms.equivalence import Evidence, Margin
from interp.mechanisms.reconcile_rules import INCONCLUSIVE, NOT_MEASURED, NOT_REPRODUCED, REPRODUCED

RUNS = Evidence(3, "runs (seeds)")
SHARE = Evidence(5, "runs (seeds)")  # a share over seeds: five are the fewest whose 90% interval can clear 0.5
WORDS = {Q.INSIDE: REPRODUCED, Q.OUTSIDE: NOT_REPRODUCED, Q.UNDECIDED: INCONCLUSIVE, Q.NOT_ENOUGH: INCONCLUSIVE}
MEASURED = "measured (no published number)"

# the author's numbers (docs/variants.md cites each)
LABEL_NOISE = {0.05: 10_400 / 12_450, 0.2: 11_700 / 12_450}  # results_section.tex, K = 20: tau 12,450 clean
HELDOUT_LOOKUP = 0.2  # exp_generalization_test.py: held-out accuracy < 0.2 is a lookup table (the author: 3%)
TWO_PLATEAUS = {"evaluations": 5, "span": 200, "band": 0.3, "final": 0.1}  # exp_hierarchical.py's rule


@dataclass(frozen=True)
class Claim:
    name: str
    author: str
    margin: str
    ours: str
    verdict: str
    why: str = ""

    def line(self) -> str:
        return f"{self.name}: {self.verdict} (ours {self.ours}; the author {self.author}; margin {self.margin})" + (
            f"; {self.why}" if self.why else "")


def judge(name: str, author: str, margin: Margin | None, evidence: Evidence, e: I.Estimate | None) -> Claim:
    """A claim from an estimate: the verdict SPEC 10's rules give it (MEASURED without a margin)."""
    if e is None:
        return Claim(name, author, "-" if margin is None else margin.text(), "-", NOT_MEASURED, "no estimate")
    if margin is None:
        return Claim(name, author, "-", e.text(), MEASURED)
    decision = Q.decide(margin, evidence, e)
    why = evidence.short(e) if decision == Q.NOT_ENOUGH else ""
    return Claim(name, author, margin.text(), e.text(), WORDS[decision], why)


def _done(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["status"] == "done"]


def _seen(values: pd.Series, censored: pd.Series, steps_run: pd.Series, resolution: float) -> list[tuple]:
    """Each run's time as the interval the evaluations allow: (t - resolution, t] seen, (steps run, inf) censored."""
    out = []
    for v, c, s in zip(values, censored, steps_run):
        if bool(c):
            out.append((float(s), math.inf))
        elif v == v:
            out.append((max(float(v) - resolution, 0.0), float(v)))
    return out


def _labels(table: pd.DataFrame) -> pd.Series:
    """Each fork's arm as its label ("optimizer:name=sgd,lr=0.03,momentum=0.9"), from the table's arm and params."""
    params = table["arm_params"].fillna("").astype(str) if "arm_params" in table else ""
    return table["arm"].astype(str) + np.where(params != "", ":" + params, "")


def _resolution(table: pd.DataFrame) -> float:
    return float(table["eval_every"].max()) if "eval_every" in table and table["eval_every"].notna().any() else 25.0


# ---------------------------------------------------------------------------- the presets
def k1_control(table: pd.DataFrame) -> list[Claim]:
    done, res = _done(table), _resolution(table)
    one, ten = done[done["k"] == 1], done[done["k"] == 10]
    num = _seen(one["steps_to_exact_99"], one["censored_steps_to_exact_99"], one["steps_run"], res)
    den = _seen(ten["tau_half"], ten["censored_tau_half"], ten["steps_run"], res)
    e = I.log_ratio_t(num, den)
    margin = Margin(0.0, 1.0, "a claim of direction: K = 1 solves before K = 10 leaves its plateau", log=True)
    return [judge("K = 1 exact match 0.99 / K = 10 tau_half", "K = 1 learns quickly (no plateau; README)", margin,
                  RUNS, e)]


def acc_half(steps, acc_cand, k: int, noise: float) -> tuple[float, bool]:
    """The label-noise runs' time: the first evaluation at which the candidate accuracy on the clean targets reaches
    half-way from chance (1/K) to what a model that fits its noisy targets can score on them (1 - P); (steps run,
    True) when it never does. tau_half cannot time these runs: a pair trained on another candidate of its base is
    scored on its clean one at tens of nats once learned, and at P = 0.05 the mean candidate loss already sits above
    log K on the plateau (docs/variants.md)."""
    s = np.asarray(steps, dtype=float)
    acc = np.asarray(acc_cand, dtype=float)
    level = 0.5 * (1.0 / k + 1.0 - noise)
    hit = np.flatnonzero(acc >= level - 1e-9)  # an accuracy is a fraction: exactly half-way counts
    if len(hit):
        return float(s[hit[0]]), False
    return (float(s.max()) if len(s) else math.nan), True


def label_noise(table: pd.DataFrame) -> list[Claim]:
    """tau_acc_half (`acc_half`, a column `analyses/variants.py` adds from each run's log) at each P over P = 0."""
    done, res = _done(table), _resolution(table)
    col = "task.label_noise" if "task.label_noise" in done else "label_noise"
    clean = done[done[col] == 0]
    den = _seen(clean["tau_acc_half"], clean["censored_tau_acc_half"], clean["steps_run"], res)
    out = []
    for p, ratio in LABEL_NOISE.items():
        noisy = done[np.isclose(done[col].astype(float), p)]
        num = _seen(noisy["tau_acc_half"], noisy["censored_tau_acc_half"], noisy["steps_run"], res)
        margin = Margin.around(ratio, "the author's ratio, default 0.80-1.25x")
        out.append(judge(f"tau_acc_half at P = {p:g} / clean", f"{ratio:.3f} (K = 20, tau)", margin, RUNS,
                         I.log_ratio_t(num, den)))
    return out


def two_plateaus(steps, loss_cand, log_k2: float) -> bool:
    """The author's rule (exp_hierarchical.py): at least 5 evaluations with |Lc - log K2| < 0.3 spanning at least
    200 steps, and a final Lc below 0.1."""
    s = np.asarray(steps, dtype=float)
    lc = np.asarray(loss_cand, dtype=float)
    near = s[np.abs(lc - log_k2) < TWO_PLATEAUS["band"]]
    return bool(len(near) >= TWO_PLATEAUS["evaluations"] and near.max() - near.min() >= TWO_PLATEAUS["span"]
                and len(lc) and lc[-1] < TWO_PLATEAUS["final"])


def hierarchy(table: pd.DataFrame) -> list[Claim]:
    """`table` with a `two_plateaus` column (True/False per run, from its log: `two_plateaus`) and z1/z2 onsets."""
    done = _done(table)
    n, hits = len(done), int(done["two_plateaus"].astype(bool).sum())
    claims = [judge("share of seeds with two plateaus (log K -> log K2 -> 0)", "two plateaus observed (v1, 5 x 4)",
                    Margin(0.5, 1.0, "most seeds show the staircase"), SHARE, I.share_exact(hits, n))]
    both = done.dropna(subset=["z1_onset", "z2_onset"])
    first = int((both["z1_onset"] < both["z2_onset"]).sum())
    claims.append(judge("share of seeds whose z1 gap opens before z2's", "z1 (the cluster) first",
                        Margin(0.5, 1.0, "the cluster is read first"), SHARE, I.share_exact(first, len(both))))
    return claims


def holdout(table: pd.DataFrame) -> list[Claim]:
    done = _done(table)
    col = "task.holdout_by" if "task.holdout_by" in done else "holdout_by"
    out = []
    for by in ("pair", "base"):
        part = done[done[col] == by]
        if part.empty:
            continue
        e = I.mean_t(part["heldout_acc_exact"])
        out.append(judge(f"held-out exact match (held out by {by})", "3%: a lookup table, not a program",
                         Margin(-math.inf, HELDOUT_LOOKUP, "the author's rule: below 0.2 is a lookup table"), RUNS, e))
    return out


DECOUPLED = ("optimizer:name=adamw,beta1=0", "optimizer:name=adamw,beta1=0,bias_correction=false")
COUPLED = ("optimizer:name=adam-l2,beta1=0", "optimizer:name=rmsprop", "optimizer:name=sgd,lr=0.03,momentum=0.9")


def optimizer_branch(table: pd.DataFrame) -> list[Claim]:
    """Per arm the share of forks that escape (tau_half after the fork) within the horizon: decoupled weight decay
    transitions (the author: 4/4 configurations), L2 stays (5/5); then the author's rule over both."""
    done = _done(table)
    label = _labels(done)
    out = []
    verdicts = {}
    for arm in (*DECOUPLED, *COUPLED, "minibatch", "reset_optimizer"):
        part = done[label == arm]
        if part.empty:
            continue
        escaped = int((~part["censored_escape"].astype(bool)).sum()) if "censored_escape" in part else \
            int(part["escape"].notna().sum())
        e = I.share_exact(escaped, len(part))
        if arm in DECOUPLED:
            c = judge(f"{arm}: share escaped", "transitions (decoupled weight decay)",
                      Margin(0.5, 1.0, "most forks escape"), SHARE, e)
        elif arm in COUPLED:
            c = judge(f"{arm}: share escaped", "stays on the plateau (L2 weight decay)",
                      Margin(0.0, 0.5, "most forks stay"), SHARE, e)
        else:
            c = judge(f"{arm}: share escaped", "(reference)", None, SHARE, e)
        verdicts[arm] = c.verdict
        out.append(c)
    cells = [verdicts.get(a) for a in (*DECOUPLED, *COUPLED)]
    rule = REPRODUCED if all(v == REPRODUCED for v in cells) else \
        NOT_REPRODUCED if any(v == NOT_REPRODUCED for v in cells) else INCONCLUSIVE
    out.append(Claim("decoupled weight decay is necessary and sufficient", "yes (9 cells, 3 seeds, K = 10)",
                     "every decoupled arm escapes and every L2 arm stays", ", ".join(str(v) for v in cells), rule))
    return out


def reversal_transfer(table: pd.DataFrame, scratch: pd.DataFrame) -> list[Claim]:
    """The escape after the direction switch (fresh and carried optimizer) against bz_to_a trained from scratch
    (`scratch`: its sweep table): measured only (the author published no number)."""
    res = _resolution(table)
    done = _done(table)
    label = _labels(done)
    base = _done(scratch)
    den = _seen(base["tau_half"], base["censored_tau_half"], base["steps_run"], res)
    out = []
    for state in ("fresh", "carried"):
        part = done[label.str.contains(f"optimizer={state}")]
        num = _seen(part["escape"], part["censored_escape"], part["steps_run"], res)
        out.append(judge(f"escape after the switch ({state} optimizer) / tau_half from scratch", "-", None, RUNS,
                         I.log_ratio_t(num, den)))
    return out


SWEEP_VERDICTS = {"k1-control-tiny": k1_control, "label-noise-tiny": label_noise, "hierarchy-tiny": hierarchy,
                  "holdout-tiny": holdout}
FAMILY_VERDICTS = {"optimizer-branch-tiny": optimizer_branch, "reversal-transfer-tiny": reversal_transfer}


def judge_table(preset: str, table: pd.DataFrame) -> list[Claim]:
    """A preset's claims from its per-run table as `analyses/variants.py --csv` keeps it (docs/data/variants/): the
    reversal's rows of kind "scratch" are its reference, the rest its forks."""
    if preset in SWEEP_VERDICTS:
        return SWEEP_VERDICTS[preset](table)
    if preset == "reversal-transfer-tiny":
        scratch = table["kind"].eq("scratch") if "kind" in table else pd.Series(False, index=table.index)
        return reversal_transfer(table[~scratch], table[scratch])
    if preset in FAMILY_VERDICTS:
        return FAMILY_VERDICTS[preset](table)
    raise ValueError(f"unknown preset {preset!r}; known: {', '.join([*SWEEP_VERDICTS, *FAMILY_VERDICTS])}")
