"""The learning-rate phase diagram of a sweep (lr x K x seeds): each run's outcome and transition window, the share
that transitions per cell with exact intervals, eta_c(K), critical slowing and the dissipated work Q.

Per run (`run_phase`), from its metrics log (an imported run's source history where denser):

- outcome and decided_at (interp.outcome, with `--rule` changes); an imported run's own recorded status beside it
  (source_outcome: the author's tracker's verdict);
- t1, the last evaluation on the plateau (candidate loss >= (1 - plateau_band) log K) before t2, the first
  evaluation below transition_below log K; the snap width t2 - t1 in steps, in sequences (x batch size, the author's
  "tokens") and in tokens (x batch size x sequence length);
- the author's dz window (eta_sweep/analysis/compute_Q.py): t1_dz, the first step with dz > 0.5 nats, t2_dz, the
  first with dz > 0.9 max dz (clamped to the maximum at or after t1_dz);
- Q = sum over steps of lr |g|^2 over [0, entry] (Q_prior, entry = the first evaluation with candidate loss within
  (1 + plateau_band) log K), [entry, t1] (Q_plateau), [t1, t2] (Q_transition), [0, t2] (Q_total) and the dz window
  (Q_dz). interp's own runs log Q(t) cumulatively from every step's minibatch gradient (`dissipation`), so each Q
  is exact between two evaluations; an imported eta-sweep run has the author's held-out gradient every 50 steps,
  integrated by the trapezoid rule as he does (`q_source` says which).

Per cell (`cells`): n, transitioned / stuck / diverged / other, the share transitioned with its Clopper-Pearson 95%
interval. eta_c per K: `interp.sweeps.phase_fit`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from interp.errors import InterpError

DZ_ONSET, DZ_TOP = 0.5, 0.9  # the author's dz window: dz > 0.5 nats, dz > 0.9 max dz
Q_COLUMNS = ("Q_prior", "Q_plateau", "Q_transition", "Q_total", "Q_dz")
RUN_COLUMNS = ("run", "k", "lr", "seed", "status", "batch_size", "outcome", "decided_at", "source_outcome", "t1", "t2", "plateau_entry",
               "t1_dz", "t2_dz", "width_steps", "width_sequences", "width_tokens", "q_source", "q_missing", *Q_COLUMNS)


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _q_reader(rows: list[dict]):
    """Q(a, b) over logged steps a <= b, and the name of its source; (None, reason) without gradient columns."""
    if any(_finite(r.get("dissipation")) for r in rows):
        at = {r["step"]: r["dissipation"] for r in rows if _finite(r.get("dissipation"))}

        def q(a, b):
            return at[b] - at[a] if a in at and b in at else math.nan
        return q, "per-step minibatch |g|^2 (exact between evaluations)"
    if any(_finite(r.get("grad_sq_heldout")) for r in rows):
        pts = [(r["step"], r["lr"] * r["grad_sq_heldout"]) for r in rows
               if _finite(r.get("grad_sq_heldout")) and _finite(r.get("lr"))]

        def q(a, b):
            xs = [(s, y) for s, y in pts if a <= s <= b]
            if len(xs) < 2:
                return math.nan
            return sum((s2 - s1) * (y1 + y2) / 2 for (s1, y1), (s2, y2) in zip(xs, xs[1:]))
        return q, "the author's held-out |g|^2, trapezoid on the log's grid"
    return None, "no gradient columns (interp's `dissipation` or the author's grad_norm_sq_held_out)"


def dz_window(rows: list[dict]) -> tuple[int | None, int | None]:
    """The author's window: first dz > 0.5 nats, first dz > 0.9 max dz (clamped as his compute_Q.py does)."""
    pts = [(r["step"], r["shuffle_gap"]) for r in rows if _finite(r.get("shuffle_gap"))]
    above = [i for i, (_, v) in enumerate(pts) if v > DZ_ONSET]
    if not above:
        return None, None
    top = max(v for _, v in pts)
    i1 = above[0]
    i2 = next(i for i, (_, v) in enumerate(pts) if v > DZ_TOP * top) if any(v > DZ_TOP * top for _, v in pts) \
        else max(range(len(pts)), key=lambda i: pts[i][1])
    if i2 < i1:
        i2 = max(range(i1, len(pts)), key=lambda i: pts[i][1])
    return pts[i1][0], pts[i2][0]


def run_phase(run, rules: dict | None = None) -> dict:
    """One run's outcome, transition window, snap width and Q (module docstring)."""
    from interp.outcome import Rules, judge_rows, trajectory_rows

    spec = run.spec
    logged = trajectory_rows(run)
    rows = [r for r in logged if _finite(r.get("loss_cand"))]
    log_k = math.log(spec.task.k)
    r = Rules.of(spec.train, **(rules or {}))
    judged = judge_rows(logged, log_k, r, run.status)
    source = ((run.imported or {}).get("status") or {})  # an imported run: the status its source recorded
    out = {"outcome": judged.outcome, "decided_at": judged.decided_at,
           "source_outcome": source.get("status") if isinstance(source, dict) else None}
    t2 = next((x["step"] for x in rows if x["loss_cand"] < r.transition_below * log_k), None)
    before = [x["step"] for x in rows if (t2 is None or x["step"] < t2) and x["loss_cand"] >= (1 - r.plateau_band) * log_k]
    t1 = before[-1] if before and t2 is not None else None
    entry = next((x["step"] for x in rows if x["loss_cand"] <= (1 + r.plateau_band) * log_k), None)
    t1_dz, t2_dz = dz_window(rows)
    width = None if t1 is None else t2 - t1
    out.update({"t1": t1, "t2": t2, "plateau_entry": entry, "t1_dz": t1_dz, "t2_dz": t2_dz, "width_steps": width,
                "width_sequences": None if width is None else width * spec.train.batch_size,
                "width_tokens": None if width is None else width * spec.train.batch_size * spec.task.sequence_length})
    q, source = _q_reader(logged)
    out["q_source"] = source if q is not None else None
    out["q_missing"] = None if q is not None else source
    first = rows[0]["step"] if rows else None

    def span(a, b):
        return math.nan if q is None or a is None or b is None or b < a else q(a, b)
    out.update({"Q_prior": span(first, entry), "Q_plateau": span(entry, t1), "Q_transition": span(t1, t2),
                "Q_total": span(first, t2), "Q_dz": span(t1_dz, t2_dz)})
    return out


def phase_table(sweep, rules: dict | None = None, table=None):
    """One row per run of `sweep` (pandas): run, k, lr, seed, status and `run_phase`'s columns (runs not started or
    damaged: outcome None)."""
    import pandas as pd

    table = sweep.table() if table is None else table
    rows = []
    for rec in table.to_dict("records"):
        row = {"run": rec["run"], "k": rec["k"], "lr": rec["lr"], "seed": rec["seed"], "status": rec["status"],
               "batch_size": rec["batch_size"]}
        if rec["status"] in ("damaged", "not started") or rec.get("outcome") is None:
            row.update({"outcome": None})
        else:
            row.update(run_phase(sweep.run(str(rec["run"])), rules))
        rows.append(row)
    frame = pd.DataFrame(rows)
    for name in RUN_COLUMNS:  # every column, even for a sweep with no run (or none judged)
        if name not in frame:
            frame[name] = None
    return frame


def cells(phase):
    """Per (k, lr): n runs with an outcome, how many transitioned / stuck / diverged / other, the share transitioned
    and its Clopper-Pearson 95% interval (pandas)."""
    import pandas as pd
    from statsmodels.stats.proportion import proportion_confint

    judged = phase[phase["outcome"].isin(("transitioned", "stuck", "diverged", "inconclusive", "crashed"))]
    out = []
    for (k, lr), g in judged.groupby(["k", "lr"], sort=True):
        n = len(g)
        y = int((g["outcome"] == "transitioned").sum())
        lo, hi = proportion_confint(y, n, alpha=0.05, method="beta")
        out.append({"k": int(k), "lr": float(lr), "n": n, "transitioned": y,
                    "stuck": int((g["outcome"] == "stuck").sum()), "diverged": int((g["outcome"] == "diverged").sum()),
                    "other": int(n - g["outcome"].isin(("transitioned", "stuck", "diverged")).sum()),
                    "share": y / n, "share_low": float(lo), "share_high": float(hi)})
    return pd.DataFrame(out, columns=["k", "lr", "n", "transitioned", "stuck", "diverged", "other", "share",
                                      "share_low", "share_high"])


@dataclass
class Phase:
    """A sweep's phase diagram: per-run rows, per-cell shares, eta_c per K, critical slowing, the cutoff used."""

    label: str
    runs: object  # pandas
    cells: object  # pandas
    fits: list = field(default_factory=list)  # phase_fit.EtaFit per K
    slowing: dict = field(default_factory=dict)
    cutoff: float = math.nan
    coverage: list = field(default_factory=list)  # the calibration's check at a fresh seed (phase_fit.coverage)
    rules: dict = field(default_factory=dict)

    def lines(self) -> list[str]:
        """The phase diagram as text: the cells, eta_c per K (three estimates), critical slowing."""
        out = [f"{self.label}: {len(self.runs)} runs; outcome rules"
               + (f" changed: {', '.join(f'{k}={v}' for k, v in self.rules.items())}" if self.rules else
                  " as each run was trained")]
        out.append("  K     lr        n  trans  stuck  diverged  other  share  95% (Clopper-Pearson)")
        for r in self.cells.to_dict("records"):
            out.append(f"  {r['k']:<4}  {r['lr']:<8.3g}  {r['n']:<2} {r['transitioned']:>5}  {r['stuck']:>5}  "
                       f"{r['diverged']:>8}  {r['other']:>5}  {r['share']:.2f}   [{r['share_low']:.2f}, {r['share_high']:.2f}]")
        cover = min((c["coverage"] for c in self.coverage), default=math.nan)
        out.append(f"eta_c(K): the lr at which half the seeds transition; ours = logistic GLM on log lr with a profile "
                   f"interval (cutoff {self.cutoff:.2f}, calibrated: its coverage of a known eta_c >= {cover:.3f} in "
                   f"every simulated scenario at this design)")
        out.extend(f"  {f.summary()}" for f in self.fits)
        names = {"width_steps": "snap width t2 - t1", "width_dz": "the author's snap width t2_dz - t1_dz",
                 "t2": "t2 (steps to the transition threshold)"}
        for name, s in self.slowing.items():
            what = names[name]
            out.append(f"critical slowing, {what} on 1 - lr/eta_c: " + (
                f"log-log slope {s['slope']:+.2f} [{s['low']:+.2f}, {s['high']:+.2f}] over {s['n']} runs (negative: "
                f"slower near eta_c)" if s["slope"] is not None else f"n/a ({s['why']})"))
        return out

    def markdown(self) -> list[str]:
        """The cells and eta_c per K as markdown tables (docs/phase.md's, checked against its CSV by a test)."""
        def g(v):
            return "open" if v is None else f"{v:.3g}"
        out = ["| K | lr | runs | transitioned | stuck | diverged | other | share [95% CP] |",
               "|---|---|---|---|---|---|---|---|"]
        for r in self.cells.to_dict("records"):
            out.append(f"| {r['k']} | {r['lr']:g} | {r['n']} | {r['transitioned']} | {r['stuck']} | {r['diverged']} | "
                       f"{r['other']} | {r['share']:.2f} [{r['share_low']:.2f}, {r['share_high']:.2f}] |")
        out += ["", "| K | eta_c, ours [calibrated interval] | method | the author's LS fit | bracket |",
                "|---|---|---|---|---|"]
        for f in self.fits:
            ours = f"n/a ({f.reason})" if f.eta_c is None else f"{f.eta_c:.3g} [{g(f.low)}, {g(f.high)}]"
            author = (f"{f.author_eta_c:.3g}" + ("" if f.author_se is None else f" +- {f.author_se:.2g}")
                      if f.author_eta_c is not None else f.author_reason)
            out.append(f"| {f.k} | {ours} | {f.method} | {author} | [{g(f.bracket_low)}, {g(f.bracket_high)}] |")
        return out

    def eta_c(self) -> dict:
        return {f.k: f for f in self.fits}

    def to_dict(self) -> dict:
        return {"label": self.label, "rules": self.rules, "cutoff": self.cutoff,
                "cells": self.cells.to_dict("records"), "eta_c": [f.to_dict() for f in self.fits],
                "critical_slowing": self.slowing, "coverage": self.coverage,
                "runs": self.runs.where(self.runs.notna(), None).to_dict("records")}


def check_phase_sweep(phase_runs, label: str) -> None:
    """One line on what makes a sweep unusable for the phase diagram: fewer than 2 learning rates, no run with an
    outcome, every run transitioned (no boundary in the grid)."""
    judged = phase_runs[phase_runs["outcome"].isin(("transitioned", "stuck", "diverged", "inconclusive", "crashed"))]
    if judged.empty:
        raise InterpError(f"{label}: no run has finished (nothing to judge); train it with interp sweep {label}")
    lrs = sorted(set(judged["lr"].astype(float)))
    if len(lrs) < 2:
        raise InterpError(f"{label} has one learning rate ({lrs[0]:g}): the phase diagram needs at least two "
                          f"(--grid train.lr=1e-3,3e-3,1e-2)")
    if (judged["outcome"] == "transitioned").all():
        raise InterpError(f"{label}: every one of its {len(judged)} finished runs transitioned, so the grid holds no "
                          f"boundary and eta_c lies above its largest lr ({lrs[-1]:g}); extend it with larger lrs")


def phase(sweep, rules: dict | None = None, sims: int = 1000, label: str | None = None, runs=None) -> Phase:
    """The phase diagram of `sweep` (module docstring): eta_c per K with the profile interval calibrated for this
    sweep's design (`sims` simulated grids per scenario), checked at a fresh seed. `runs`: its `phase_table`, when
    the caller has it."""
    label = label or str(sweep.path)
    runs = phase_table(sweep, rules) if runs is None else runs
    return phase_of_runs(runs, label, rules, sims)


def phase_of_runs(runs, label: str, rules: dict | None = None, sims: int = 1000, cutoff: float | None = None) -> Phase:
    """The phase diagram of a per-run table (`phase_table`, or its CSV from `interp phase --csv`); `cutoff` given:
    that profile cutoff, without calibrating one."""
    import numpy as np

    from interp.sweeps import phase_fit as F

    check_phase_sweep(runs, label)
    table = cells(runs)
    result = Phase(label, runs, table, rules=dict(rules or {}))
    designs = {}
    for k, g in table.groupby("k"):
        key = (tuple(np.log(g["lr"].to_numpy(float))), tuple(g["n"].to_numpy(int)))
        if key not in designs:
            x, n = np.array(key[0]), np.array(key[1])
            if cutoff is not None:
                designs[key] = cutoff
            else:
                designs[key] = F.calibrate_cutoff(x, n, sims=sims) if len(x) >= 2 else F.CHI2_95
                if not result.coverage:
                    result.coverage = F.coverage(x, n, designs[key], sims=sims, seed=1)
        result.fits.append(F.fit_eta_c(int(k), g["lr"], g["transitioned"], g["n"], designs[key]))
    result.cutoff = max(designs.values()) if designs else math.nan
    result.slowing = critical_slowing(runs, result.eta_c())
    return result


def critical_slowing(runs, fits: dict) -> dict:
    """The trend of the snap width (t2 - t1; the author's t2_dz - t1_dz) and of t2 as lr approaches eta_c: OLS of
    log width on log(1 - lr / eta_c(K)) with a per-K intercept, over transitioned runs below their K's eta_c; its
    slope with a 95% interval (negative: slower near eta_c). Runs at K without an eta_c are left out; widths that are
    all one value (the evaluation grid's spacing) give no slope, and say so."""
    import numpy as np
    import pandas as pd
    import statsmodels.formula.api as smf

    ok = runs[(runs["outcome"] == "transitioned")].copy()
    ok["eta_c"] = [fits[int(k)].eta_c if int(k) in fits and fits[int(k)].eta_c is not None else math.nan
                   for k in ok["k"]]
    ok = ok[np.isfinite(ok["eta_c"].astype(float)) & (ok["lr"].astype(float) < ok["eta_c"].astype(float))]
    out = {}
    ok["width_dz"] = pd.to_numeric(ok["t2_dz"], errors="coerce") - pd.to_numeric(ok["t1_dz"], errors="coerce")
    for y in ("width_steps", "width_dz", "t2"):
        d = ok[pd.to_numeric(ok[y], errors="coerce") > 0]
        if len(d) < 4 or d["lr"].nunique() < 2:
            out[y] = {"slope": None, "low": None, "high": None, "n": len(d),
                      "why": f"{len(d)} transitioned runs below eta_c at {d['lr'].nunique()} lr(s): needs 4 at 2"}
            continue
        if d[y].nunique() == 1:
            out[y] = {"slope": None, "low": None, "high": None, "n": len(d),
                      "why": f"every one of the {len(d)} is {int(d[y].iloc[0])} steps: the log's resolution (the "
                             f"change is sharper than the evaluation grid)"}
            continue
        frame = pd.DataFrame({"y": np.log(d[y].astype(float)),
                              "x": np.log(1 - d["lr"].astype(float) / d["eta_c"].astype(float)),
                              "k": d["k"].astype(int).astype(str)})
        formula = "y ~ x + C(k)" if frame["k"].nunique() > 1 else "y ~ x"
        fit = smf.ols(formula, frame).fit()
        lo, hi = fit.conf_int(0.05).loc["x"]
        out[y] = {"slope": float(fit.params["x"]), "low": float(lo), "high": float(hi), "n": len(d), "why": ""}
    return out
