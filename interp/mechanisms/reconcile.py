"""The reconciliation table: each published claim beside ours, with a verdict (docs/reconciliation.md).

One row per claim (`interp.mechanisms.reconcile_rules.CLAIMS`) and per path that measures it:
the author's number and its source, ours under the author's definition where the toolkit can
compute it and it differs from ours, ours under ours with its interval and the runs it rests on,
the differences in setting (our runs' specs against the author's), and the verdict of the rules
written down before any table was measured. `reconcile(paths)` pools runs, sweeps and fork
families: each gives the rows it can measure; a claim none measures is one row, not measured,
with the command that would measure it.

Nothing is recomputed: the per-run numbers are the mechanism table's evidence
(`interp.mechanisms.table`, which computes the cheap analyses unless compute=False and caches
them), the family-level numbers the sweep fits (`sweep_fits`, `circuit_fits`) and the fork
comparison (`interp.sweeps.forks`), the leads the transition facts of each metrics log.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from dataclasses import dataclass, field, replace

from interp.errors import InterpError
from interp.mechanisms.reconcile_rules import CLAIMS, FORK_ESCAPE, FORK_STATE, Claim, verdict
from interp.mechanisms.reconcile_rules import claim, each_arm, escape_difference, gamma_window_difference, setting_differences
from interp.mechanisms.fork_measures import deepest_relapse, family_relapsed as _relapsed
from interp.mechanisms.reconcile_table import ReconcileTable, value_text
from interp.mechanisms.dissipation_claims import q_claims
from interp.mechanisms.rules import Measure

FIELDS = ("n_layers", "n_heads", "d_model", "d_mlp", "k", "n_bases", "lr", "batch_size", "checkpoint_every")
# claim -> the mechanism evidence's per-run measure it reads (interp.mechanisms.evidence)
FROM_EVIDENCE = {"collective_snap": "coverage", "saddle": "spinodal", "consistency_plateau": "random_walk",
                 "selector_snr": "cancellation_snr", "noise_signal": "noise_signal", "coherence": "coherence",
                 "anisotropy": "anisotropy"}


@dataclass
class Gathered:
    """What one path measures: per claim key, ours and ours under the author's definition, and why not."""

    path: str
    kind: str
    settings: dict[str, list] = field(default_factory=dict)
    ours: dict[str, Measure] = field(default_factory=dict)
    author: dict[str, Measure] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)  # why ours is not measured
    missing_author: dict[str, str] = field(default_factory=dict)  # why ours under the author's definition is not
    same: set = field(default_factory=set)  # fixed setting differences that do not apply (a relapsed fork state)
    more: dict[str, list[str]] = field(default_factory=dict)  # claim -> setting differences found in the data
    run_path: str = ""  # the run an analysis command names (a family's parent)
    replicate: str = ""  # the command that adds replicates of what this path measured (interp.mechanisms.commands)
    final: set = field(default_factory=set)  # claims no command would measure here (e.g. no tau to place a plateau)
    pending: set = field(default_factory=set)  # claims whose forks are in the design but not finished: `replicate` does


# ---------------------------------------------------------------------------- gathering
def _point(value, detail: str, n: int = 1) -> Measure | None:
    return None if value is None or not math.isfinite(float(value)) else Measure(float(value), n_runs=n, detail=detail)


def _mean(values: list[float], detail: str, log: bool = False) -> Measure | None:
    """One value: itself (it decides nothing alone); several: their mean (geometric with `log`) with its t interval
    (`interp.mechanisms.intervals.mean_t`)."""
    from interp.mechanisms.intervals import mean_t

    e = mean_t(values, log=log)
    if e is None:
        return None
    if e.n < 2:
        return _point(e.value, detail)
    return Measure.of(e, f"{'geometric ' if log else ''}mean over {e.n} runs of {detail}")


def _settings(specs) -> dict[str, list]:
    out: dict[str, set] = {f: set() for f in FIELDS}
    for spec in specs:
        for f in ("n_layers", "n_heads", "d_model", "d_mlp"):
            out[f].add(getattr(spec.model, f))
        out["k"].add(spec.task.k)
        out["n_bases"].add(spec.task.n_bases)
        out["lr"].add(spec.train.lr)
        out["batch_size"].add(spec.train.batch_size)
        out["checkpoint_every"].add(spec.train.checkpoint_every)
    return {f: sorted(v) for f, v in out.items()}


def _from_evidence(g: Gathered, evidence: list) -> None:
    """The per-run claims from the mechanism table's evidence (pooled over runs as it pools them)."""
    from interp.mechanisms.evidence import pooled

    no_tau = bool(evidence) and all(e.tau is None for e in evidence)
    why = ("no run reaches tau_half: no plateau to place (no analysis would measure it)" if no_tau
           else "not in the analysis cache of " + ("the run" if len(evidence) == 1 else "any run"))
    for key, ev_key in FROM_EVIDENCE.items():  # one run: its own measure (pooling imports scipy.stats: seconds)
        m = evidence[0].measures.get(ev_key) if len(evidence) == 1 else pooled(evidence, ev_key)
        cached = [e.missing[ev_key] for e in evidence if ev_key in e.missing]  # computed, and gave nothing
        if m is not None:
            g.ours[key] = m
        elif cached and len(cached) == len(evidence):
            g.missing[key] = cached[0] + ("" if len(cached) == 1 else f" (and in {len(cached) - 1} more runs)")
            g.final.add(key)
        else:
            g.missing[key] = why
            if no_tau:
                g.final.add(key)
    trans = [e.values.get("random_walk_transition", math.nan) for e in evidence]
    m = _mean(trans, "the transition's median direction consistency")
    if m is not None:
        g.ours["consistency_transition"] = m
    else:
        g.missing["consistency_transition"] = "no transition checkpoints with a cached trajectory"


def _lead_values(run) -> dict:
    """share, steps, onset under each definition (None when the run never reaches it), and why not."""
    from interp.transition import LEAD_DEFINITIONS, facts

    f = facts(run)
    out = {}
    for name, (t_loss, dz) in LEAD_DEFINITIONS.items():
        why = f.not_measured(t_loss, dz)
        lead = f.gap_lead_at(t_loss, dz) if why is None else {"gap_onset": None, "t_loss": None, "gap_lead": None}
        out[name] = {**lead, "why": why}
    return out


def _run_claims(g: Gathered, run, evidence: list) -> None:
    """The claims one run measures: the mechanism evidence's, the lead and the attention onset."""
    from interp.sweeps.circuits import circuit_row

    _from_evidence(g, evidence)
    leads = _lead_values(run)
    for name, target in (("ours", g.ours), ("author", g.author)):
        lead = leads[name]
        m = _point(lead["gap_lead"], f"t_loss {lead['t_loss']}, t(dz > 0.1) {lead['gap_onset']}")
        if m is not None:
            target["lead_share"] = m
        else:
            missing = g.missing_author if name == "author" else g.missing
            missing["lead_share"] = lead["why"] or f"the run never reaches t_loss or the dz onset ({name})"
    row = circuit_row(run, "done", censored=evidence[0].tau is None if evidence else True)
    attn = row.get("carried_attn_onset", math.nan)
    for name, target in (("ours", g.ours), ("author", g.author)):
        onset = leads[name]["gap_onset"]
        m = _point(attn / onset if onset and math.isfinite(attn) else None,
                   f"attention onset {attn:.0f} / t(dz > 0.1) {onset}")
        if m is not None:
            target["attention_onset"] = m
        elif name == "author" and leads[name]["why"]:
            g.missing_author["attention_onset"] = leads[name]["why"]
    if "attention_onset" not in g.ours:
        why = row.get("circuits_reason") or "no attention onset or no dz onset in the run"
        g.missing["attention_onset"] = why.replace("interp analyze SWEEP", f"interp analyze {run.path}")
    ratio = encoded_ratio(row)
    m = _point(ratio, f"decodable onset {row.get('decodable_onset')} / first used onset {_used(row)}")
    if m is not None:
        g.ours["encoded_before_used"] = m
    else:
        why = row.get("circuits_reason") or "no decodable onset or no used onset in the run"
        g.missing["encoded_before_used"] = why.replace("interp analyze SWEEP", f"interp analyze {run.path}")


def _used(row) -> float:
    """The first of a circuit row's used onsets (ablation, patching); NaN when neither happened."""
    values = [float(row.get(c, math.nan)) for c in ("used_ablation_onset", "used_patching_onset")]
    values = [v for v in values if math.isfinite(v)]
    return min(values) if values else math.nan


def encoded_ratio(row) -> float | None:
    """decodable onset / first used onset of one run's circuit row (None where either is missing or the used
    onset is 0, which no ratio can hold)."""
    decodable, used = float(row.get("decodable_onset", math.nan)), _used(row)
    if not (math.isfinite(decodable) and math.isfinite(used)) or used <= 0:
        return None
    return decodable / used


def _gather_run(run, compute: bool, progress: bool, mech=None) -> tuple[Gathered, object]:
    from interp.mechanisms.table import for_run

    mech = mech or for_run(run, compute=compute, progress=progress)
    from interp.mechanisms.commands import run_seeds
    from interp.mechanisms.reconcile_rules import RUNS

    g = Gathered(str(run.path), "run", _settings([run.spec]), run_path=str(run.path),
                 replicate=run_seeds(run.spec, str(run.path), RUNS.n))
    _run_claims(g, run, mech.evidence)
    return g, mech


def _fit(g: Gathered, key: str, fits, name: str, make, author: bool = False) -> None:
    """Claim `key` from the fit `name` of `fits` (made by `make`), or why it is not measured."""
    target, missing = (g.author, g.missing_author) if author else (g.ours, g.missing)
    if name in fits.results:
        m = make(fits.results[name])
        if m is not None and m.usable:
            target[key] = m
            return
        missing.setdefault(key, f"{name}: {m.detail if m is not None and m.detail else 'the fit gives no value'}")
    missing.setdefault(key, fits.problems.get(name, f"{name}: the fit gives no value"))


def _slope(points, x: str, y: str, detail: str, fixed: dict | None = None, log_y: bool = True) -> Measure | None:
    """The OLS t slope of (log) y on log x over a fit's used points (held at `fixed`), as a Measure."""
    import numpy as np

    from interp.mechanisms.intervals import slope_t

    if points is None or x not in points or y not in points:
        return None
    used = points[points["used"].astype(bool)] if "used" in points else points
    for col, value in (fixed or {}).items():
        used = used[np.isclose(used[col].to_numpy(float), float(value), rtol=1e-9, atol=0)]
    xv, yv = used[x].to_numpy(float), used[y].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = slope_t(np.log(xv), np.log(yv) if log_y else yv)
    return None if e is None else Measure.of(e, detail, {"n_x": e.n_x})


def _gather_sweep(sweep, compute: bool, progress: bool, mech=None) -> tuple[Gathered, object]:
    from interp.mechanisms.table import for_sweep

    mech = mech or for_sweep(sweep, compute=compute, progress=progress)
    table = sweep.table(circuits=True)
    done = table[table["status"] == "done"]
    from interp.mechanisms.commands import sweep_seeds
    from interp.mechanisms.reconcile_rules import FIT

    g = Gathered(str(sweep.path), "sweep", _settings([sweep.run(str(n)).spec for n in done["run"]]),
                 run_path=str(sweep.path), replicate=sweep_seeds(sweep, FIT.n))
    _from_evidence(g, mech.evidence)
    table_claims(g, table)
    q_claims(g, sweep, table)
    beta = next(r for r in mech.rows if r["key"] == "cancellation")
    if "cancellation" in mech.measures:
        g.ours["cancellation_beta"] = mech.measures["cancellation"]
    else:
        g.missing["cancellation_beta"] = beta["why"]
    return g, mech


def table_claims(g: Gathered, table) -> None:
    """The family-level claims of a sweep table (`Sweep.table(circuits=True)`): the sweep fits, the circuit
    fits under both definitions, and the attention onset against the dz onset of each run."""
    from interp.sweeps.circuit_fits import circuit_fits
    from interp.sweeps.conditions import noise
    from interp.sweeps.family import Fits, attempt, sweep_fits

    done = table[table["status"] == "done"]
    fits, circ = sweep_fits(table), circuit_fits(table)
    _fit(g, "scaling", fits, "scaling", lambda f: _slope(f.points, f.x, f.y, "log tau_half on log D"))
    _fit(g, "fixed_d", fits, "fixed_d", lambda f: _slope(f.points, "k", f.y, f"log tau on log K at D = {f.d}"))
    _fit(g, "noise_lr", fits, "noise", lambda f: f.lr and _slope(f.points, "lr", f.y, "log tau_half on log lr",
                                                                 f.lr.fixed))
    _fit(g, "noise_batch", fits, "noise",
         lambda f: f.batch and _slope(f.points, "batch_size", f.y, "log tau_half on log batch", f.batch.fixed))
    window = attempt(Fits(), {"noise": (True, "", lambda: noise(table, y="tau_window", direction="bz_to_a"))})
    _fit(g, "noise_lr", window, "noise",
         lambda f: f.lr and _slope(f.points, "lr", f.y, "log tau_window on log lr", f.lr.fixed), author=True)
    _fit(g, "noise_batch", window, "noise",
         lambda f: f.batch and _slope(f.points, "batch_size", f.y, "log tau_window on log batch", f.batch.fixed),
         author=True)
    _fit(g, "asymmetry", fits, "asymmetry", lambda f: _mean(f.ratios, f"the a_to_b / bz_to_a {f.measure} ratio of "
                                                                      f"each seed pair", log=True))
    for suffix, author in (("", False), ("_author", True)):
        _fit(g, "lead_share", circ, "lead_share" + suffix,
             lambda f: _mean(f.points[f.points["used"].astype(bool)][f.y].tolist(), f.label), author)
        _fit(g, "lead_trend", circ, "lead_share" + suffix,
             lambda f: _slope(f.points, "k", f.y, "the share on log K", log_y=False), author)
        _fit(g, "lead_exponent", circ, "lead_exponent" + suffix,
             lambda f: _slope(f.points, f.x, f.y, "log lead in steps on log K"), author)
    for name, onset in (("ours", "gap_onset"), ("author", "gap_onset_author")):
        if "carried_attn_onset" in done and onset in done:
            ratio = (done["carried_attn_onset"].astype(float) / done[onset].astype(float)).tolist()
            m = _mean(ratio, "attention onset / t(dz > 0.1)", log=True)
            if m is not None:
                (g.ours if name == "ours" else g.author)["attention_onset"] = m
    if "attention_onset" not in g.ours:
        g.missing["attention_onset"] = "no run has a cached attention onset (the circuits analyses) and a dz onset"
    ratios = [r for r in (encoded_ratio(row) for row in done.to_dict("records")) if r is not None]
    m = _mean(ratios, "decodable onset / first used onset", log=True)
    if m is not None:
        g.ours["encoded_before_used"] = m
    else:
        g.missing["encoded_before_used"] = "no run has a cached decodable onset (the probes) and a used onset"


def _gather_family(family, compute: bool, progress: bool, mech=None) -> tuple[Gathered, object]:
    from interp.mechanisms.table import for_family

    mech = mech or for_family(family, compute=compute, progress=progress)
    gone = family.parent_problem()
    from interp.mechanisms.commands import family_seeds
    from interp.mechanisms.reconcile_rules import FORKS_PER_ARM

    g = Gathered(str(family.path), "fork family", run_path=family.design["parent"],
                 replicate=family_seeds(family, FORKS_PER_ARM.n))
    if not gone:
        g.settings = _settings([family.parent.spec])
        _run_claims(g, family.parent, mech.evidence)
    if not gone and _relapsed(family):
        g.same.add(FORK_STATE)
    row = next(r for r in mech.rows if r["key"] == "entropic_forks")
    if "entropic_forks" in mech.measures:
        g.ours["fork_full_batch"] = mech.measures["entropic_forks"]
    else:
        g.missing["fork_full_batch"] = row["why"]
    _fork_arms(g, family.table(), family.design, deepest=deepest_relapse(family))
    return g, mech


def _fork_arms(g: Gathered, table, design: dict | None = None, deepest: bool = False) -> None:
    """The trap ratios (each noise arm's escapes over the full-batch arm's, `interp.mechanisms.fork_measures`) and
    the realised Gamma, each at the arm's earliest fork step (`deepest`: its latest, `deepest_relapse`); an escape
    criterion or a Gamma window (`design`'s) not the author's is named."""
    import pandas as pd

    from interp.mechanisms.fork_measures import done_forks, escape_ratio, gamma

    named = table["escape_criterion"].dropna() if "escape_criterion" in table else pd.Series(dtype=str)
    criterion = str(named.iloc[0]) if len(named) else "tau_half after the fork"
    escape = escape_difference(criterion if len(named) else None)  # "": the author's; FORK_ESCAPE: not known
    g.same.update({FORK_ESCAPE} if escape != FORK_ESCAPE else set())
    for c in (c for c in CLAIMS if escape and escape != FORK_ESCAPE and FORK_ESCAPE in c.extra_setting):
        g.more.setdefault(c.key, []).append(escape)
    arms = {"fork_isotropic": "isotropic_noise", "fork_measured": "measured_noise", "fork_v_only": "v_only_noise"}
    labels = set(done_forks(table)["label"].astype(str))
    for key, arm in arms.items():
        pick = arm
        if arm == "v_only_noise":  # the author's v-only noise is isotropic
            author = sorted(lb for lb in labels if lb.startswith(arm) and "xi=isotropic" in lb)
            pick = author[0] if author else arm
        m, why = escape_ratio(table, pick, "full_batch", deepest=deepest)
        if m is None:
            g.missing[key] = why
            if "not finished" in why:
                g.pending.add(key)
            continue
        if "xi=measured" in m.extra.get("label", ""):
            g.more.setdefault(key, []).append("v-only noise xi = measured minibatch noise (author: isotropic)")
        g.ours[key] = replace(m, detail=m.detail + f" ({criterion})")
    design = design or {}
    window = f" over the first {design['gamma_window']} steps after the fork" if design.get("gamma_window") else ""
    differs = [d for d in [gamma_window_difference(design.get("gamma_window"), design.get("gamma_every"))] if d]
    for key, names in (("fork_gamma_v_only", ("v_only_noise",)), ("fork_gamma_both", ("measured_noise", "isotropic_noise"))):
        found = {}
        for arm in names:
            label_filter = ""
            if arm == "v_only_noise":
                iso = gamma(table, arm, "xi=isotropic", deepest)[0]
                label_filter = "xi=isotropic" if iso is not None else ""
                if iso is None and gamma(table, arm, "xi=measured", deepest)[0] is not None:
                    g.more.setdefault(key, []).append("v-only noise xi = measured minibatch noise (author: isotropic)")
            m, _ = gamma(table, arm, label_filter, deepest)
            if m is not None:
                found[arm] = replace(m, detail=m.detail + window)
        if found:  # each arm at its earliest fork step, never a mean over arms that differ
            g.ours[key] = each_arm(claim(key), found)
            g.more.setdefault(key, []).extend(differs)
        else:
            from interp.mechanisms.fork_measures import unfinished

            left = "".join(unfinished(table, arm) for arm in names)
            g.missing[key] = f"no {' or '.join(names)} fork with a measured Gamma (gamma_every > 0)" + left
            if left:
                g.pending.add(key)


# ---------------------------------------------------------------------------- the rows
def _why(g: Gathered, c: Claim) -> str:
    """Why `g` does not measure claim `c` (the author's definition first where only it decides)."""
    if c.needs_author and c.key in g.missing_author:
        return g.missing_author[c.key]
    return g.missing.get(c.key) or g.missing_author.get(c.key, "")


def _row(c: Claim, g: Gathered | None, missing: str, final: bool = False) -> dict:
    ours = g.ours.get(c.key) if g else None
    author = g.author.get(c.key) if g else None
    diffs = [] if g is None else [d for d in setting_differences(c, g.settings) if d not in g.same] + g.more.get(c.key, [])
    v = verdict(c, ours, author, diffs, missing, g.replicate if g else "", final or bool(g and c.key in g.final))
    where = g.run_path if g else "RUN"
    if not c.definition:
        author_def = "the same definition as ours"
    elif author is not None:
        author_def = value_text({"value": author.value, "low": author.low, "high": author.high}, "")
    else:
        author_def = "not measured" + (f": {g.missing_author[c.key]}" if g and c.key in g.missing_author else "")
    deciding = author if author is not None and author.usable else ours  # the deciding side's n is shown
    shown = deciding if deciding is not None and deciding.usable else (ours or author)
    return {
        "key": c.key, "claim": c.claim, "author": c.author, "source": c.source, "author_def": author_def,
        "author_value": author.value if author else math.nan, "author_low": author.low if author else math.nan,
        "author_high": author.high if author else math.nan,
        "value": ours.value if ours else math.nan, "bound": (ours.extra or {}).get("bound", "") if ours else "",
        "low": ours.low if ours else math.nan,
        "high": ours.high if ours else math.nan, "n_runs": shown.n_runs if shown else 0,
        "n_unit": c.evidence.unit.split(" (")[0] if shown else "",
        "margin": c.margin.text(), "interval": c.interval,
        "detail": ours.detail if ours else "", "measured_on": g.path if g and (ours or author) else "",
        "setting": "; ".join(diffs), "definition": c.definition, "verdict": v.verdict,
        "why": v.why.replace("RUN", where), "command": v.command.replace("RUN", where),
    }


def rows_of(gathered: list[Gathered]) -> list[dict]:
    """One row per claim and per path that measures it; one not-measured row for a claim none measures."""
    rows = []
    for c in CLAIMS:
        measured = [g for g in gathered if c.key in g.ours or c.key in g.author]
        for g in measured:
            rows.append(_row(c, g, _why(g, c)))
        if not measured:
            reasons = [f"{g.path}: {_why(g, c)}" for g in gathered if _why(g, c)]
            kinds = {"run": "run", "sweep": "sweep", "family": "fork family"}
            missing = "; ".join(reasons) or f"no {kinds[c.on]} among the paths measures it"
            able = [g for g in gathered if c.on != "family" or g.kind != "sweep"]  # a sweep is no run to fork
            owner = next((g for g in able if _why(g, c)), able[0] if able else None)
            why = [g for g in gathered if _why(g, c)]
            row = _row(c, None, missing, final=bool(why) and all(c.key in g.final for g in why))
            if owner is not None and c.key in owner.pending and owner.replicate:  # the family's own design trains them
                row["why"] = f"{missing}; measure it with: {owner.replicate}"
                row["command"] = owner.replicate
            elif owner is not None and c.on == "family" and owner.kind == "fork family" and owner.replicate:
                command = _design_with_arms(owner.replicate, row["command"])  # its fork state, escape, horizon
                if "censored at its horizon" in missing:  # the same horizon would censor them again
                    command = re.sub(r"--steps (\d+)", lambda m: f"--steps {4 * int(m.group(1))}", command, count=1)
                row["why"] = f"{missing}; measure it with: {command}"
                row["command"] = command
            elif owner is not None:
                row["why"] = row["why"].replace("RUN", owner.run_path)
                row["command"] = row["command"].replace("RUN", owner.run_path)
            rows.append(row)
    return rows


def _design_with_arms(design: str, claim_command: str) -> str:
    """A family's own command (`commands.family_seeds`: its fork steps, relapse, escape, horizon) with the arms a
    fork claim needs (from the claim's own command) in place of its arms, into a folder of its own: a family that
    lacks an arm gets it at its own fork state, never at a first-plateau `--at mid` that a relapse family is not."""
    import shlex

    arms = re.search(r"--arm (\S+)", claim_command)
    if arms is None:
        return design
    out = re.sub(r"--arm ('[^']*'|\S+)", lambda _: f"--arm {shlex.quote(arms.group(1))}", design, count=1)
    out = re.sub(r"--out (\S+)-seeds", lambda m: f"--out {m.group(1)}-arms", out, count=1)
    if "--gamma-every" in claim_command and "--gamma-every" not in out:
        out = out.replace(" --out ", " --gamma-every 1 --out ", 1)
    return out


def reconcile(paths, compute: bool = False, progress: bool = False, tables: dict | None = None) -> ReconcileTable:
    """The reconciliation table of runs, sweeps and fork families (a path or a list of them).

    Every path is opened (and refused in one line when it is none of them) before anything is
    read. compute=True lets the mechanism table compute and cache its cheap analyses (as
    `interp mechanisms`); compute=False (the default) reads the caches only. `tables` (path -> MechanismTable)
    are mechanism tables already built (a report's), whose evidence is used as it is."""
    from interp.collections.folders import FAMILY, RUN, SWEEP, kind_of, open as open_folder

    paths = [paths] if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__") else list(paths)
    if not paths:
        raise InterpError("reconcile: give at least one run, sweep or fork family folder")
    from pathlib import Path

    opened, seen, repeated = [], {}, []
    for p in paths:
        if not Path(p).is_dir():
            raise InterpError(f"{p} is not a folder: give runs, sweeps or fork family folders")
        real = os.path.realpath(p)
        if real in seen:  # one run counts once however often it is named
            repeated.append(f"{p} names the same folder as {seen[real]}: counted once")
            continue
        seen[real] = p
        opened.append((kind_of(p), open_folder(p)))
    gatherers = {RUN: _gather_run, SWEEP: _gather_sweep, FAMILY: _gather_family}
    gathered, notes, told, damaged = [], list(repeated), [], {}
    for kind, obj in opened:
        with warnings.catch_warnings(record=True) as caught:  # e.g. censored forks: a note, not a stderr line
            warnings.simplefilter("always")
            g, mech = gatherers[kind](obj, compute, progress, (tables or {}).get(str(obj.path)))
        notes += list(dict.fromkeys(f"{obj.path}: {w.message}" for w in caught))
        gathered.append(g)
        notes += [f"{obj.path}: {n}" for n in mech.notes]
        told += mech.warnings
        damaged.update(mech.damaged)
    runs = {os.path.realpath(g.path) for g in gathered if g.kind == "run"}
    for g in gathered:  # a family whose parent is among the paths: the parent's rows are the run's own
        if g.kind == "fork family" and os.path.realpath(g.run_path) in runs:
            per_run = {c.key for c in CLAIMS if c.on == "run"}
            for d in (g.ours, g.author, g.missing, g.missing_author):
                for key in per_run & set(d):
                    del d[key]
    return ReconcileTable([{"path": g.path, "kind": g.kind} for g in gathered], rows_of(gathered), notes, told,
                          damaged)
