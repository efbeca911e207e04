"""Synthetic sweep tables with exactly the columns of `Sweep.table()` (one row per run).

The fits and figures of `interp.sweeps.scaling` / `interp.plots.sweep` are tested on these,
with a known truth (exponent, slope, ratio), so a test can check what a fit recovers
without training anything. Every value is derived from a run's "true" tau_half:

    t_start = 0.7 tau, t_end = snap_step = 1.2 tau, tau_window = t_end - t_start,
    steps_to_acc_cand_99 = 1.3 tau, steps_to_exact_99 = 1.4 tau (or `exact` when given)

and a run that would reach a threshold only after its planned steps is censored for it
(value NaN, `censored_<measure>` True, steps_run = planned_steps), as a real run would be.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

MEASURES = ("tau_half", "tau_window", "t_start", "t_end", "plateau_height", "snap_step",
            "steps_to_acc_cand_99", "steps_to_exact_99")
CENSORABLE = ("tau_half", "tau_window", "snap_step", "steps_to_acc_cand_99", "steps_to_exact_99")
AXIS_COLUMNS = {"task.k": "k", "task.n_bases": "n_bases", "task.direction": "direction", "seed": "seed",
                "train.lr": "lr", "train.batch_size": "batch_size"}
SHORT = {"k": "k", "n_bases": "nb", "direction": "", "seed": "s", "lr": "lr", "batch_size": "bs"}
CANDIDATE_DIRECTIONS = ("bz_to_a", "az_to_b")  # directions with a candidate loss (tau is defined)
COLUMNS = (["run", "status", "error", "k", "n_bases", "D", "direction", "seed", "lr", "batch_size"],
           ["steps_run", "planned_steps", *MEASURES, *(f"censored_{m}" for m in CENSORABLE), "censored",
            "wall_seconds"])


def _quantise(v: float, eval_every: int) -> float:
    """Measures are first *evaluated* steps: a multiple of eval_every."""
    return float(math.ceil(v / eval_every) * eval_every)


def run_row(k: int, tau: float | None, seed: int = 0, n_bases: int = 1000, direction: str = "bz_to_a",
            lr: float = 1e-3, batch_size: int = 64, planned_steps: int = 100_000, eval_every: int = 10,
            exact: float | None = None, status: str = "done", name: str | None = None) -> dict:
    """One run's row: its measures from its true tau (None or NaN: no candidate loss, tau undefined)."""
    has_cand = direction in CANDIDATE_DIRECTIONS and tau is not None and math.isfinite(tau)
    true = {m: math.nan for m in MEASURES}
    if has_cand:
        true.update(tau_half=tau, t_start=0.7 * tau, t_end=1.2 * tau, snap_step=1.2 * tau,
                    steps_to_acc_cand_99=1.3 * tau, steps_to_exact_99=1.4 * tau)
    if exact is not None:
        true["steps_to_exact_99"] = exact
    row = dict(run=name or f"k{k}-s{seed}", status=status, error=None, k=int(k), n_bases=int(n_bases),
               D=int(k) * int(n_bases), direction=direction, seed=int(seed), lr=float(lr),
               batch_size=int(batch_size), planned_steps=int(planned_steps))
    done = status == "done"
    steps_run = planned_steps if done else (0 if status == "not started" else planned_steps // 3)
    row["steps_run"] = int(steps_run)
    for m in ("t_start", "t_end", "tau_half", "snap_step", "steps_to_acc_cand_99", "steps_to_exact_99"):
        v = true[m]
        reached = math.isfinite(v) and _quantise(v, eval_every) <= steps_run
        row[m] = _quantise(v, eval_every) if reached else math.nan
        if m in CENSORABLE:
            row[f"censored_{m}"] = bool(done and math.isfinite(v) and not reached)
    if math.isfinite(row["t_end"]) and math.isfinite(row["t_start"]):
        row["tau_window"] = row["t_end"] - row["t_start"]
    else:
        row["tau_window"] = math.nan
    row["censored_tau_window"] = bool(done and has_cand and not math.isfinite(row["t_end"]))
    row["plateau_height"] = 1.0 + 0.01 * ((seed % 5) - 2) if has_cand and steps_run > 0 else math.nan
    row["censored"] = row["censored_tau_half"]
    row["error"] = "RuntimeError: synthetic failure" if status == "failed" else None
    row["wall_seconds"] = float(steps_run) * 0.01
    return row


def make_table(rows: list[dict], axes: tuple[str, ...] = ("task.k", "seed")) -> pd.DataFrame:
    """A sweep table from run rows, with one column per sweep axis and unique run names."""
    df = pd.DataFrame(rows)
    for axis in axes:
        df[axis] = df[AXIS_COLUMNS[axis]]
    names = []
    for r in df.itertuples(index=False):
        d = r._asdict()
        parts = [f"{SHORT[AXIS_COLUMNS[a]]}{d[AXIS_COLUMNS[a]]:g}" if AXIS_COLUMNS[a] != "direction"
                 else str(d["direction"]) for a in axes]
        names.append("-".join(parts))
    df["run"] = names if len(set(names)) == len(names) else df["run"]
    front, back = COLUMNS
    extra = [a for a in axes if a not in front]  # an axis named like a column ("seed") is that column
    return df[front + extra + back].reset_index(drop=True)


def set_status(table: pd.DataFrame, runs: list[str], status: str) -> pd.DataFrame:
    """The same table with `runs` marked running / failed / not started: nothing reached, nothing censored."""
    out = table.copy()
    pick = out["run"].isin(runs)
    out.loc[pick, "status"] = status
    out.loc[pick, "error"] = "RuntimeError: synthetic failure" if status == "failed" else None
    out.loc[pick, "steps_run"] = 0 if status == "not started" else (out.loc[pick, "planned_steps"] // 3)
    out.loc[pick, list(MEASURES)] = np.nan
    for m in CENSORABLE:
        out.loc[pick, f"censored_{m}"] = False
    out.loc[pick, "censored"] = False
    return out


def power_law_sweep(k_values: tuple[int, ...] = (3, 6, 12, 24, 36), n_bases: int = 1000, seeds: int = 3,
                    delta: float = 1.2, c: float = 3.0, sigma: float = 0.15, seed: int = 0,
                    planned_steps: int | None = None, eval_every: int = 1) -> pd.DataFrame:
    """tau = c * D^delta * lognormal(sigma), D = k * n_bases: claim 1 with a known exponent."""
    rng = np.random.default_rng([seed, 11])
    rows = []
    for k in k_values:
        for s in range(seeds):
            d = k * n_bases
            tau = c * d ** delta * math.exp(sigma * rng.standard_normal())
            plan = planned_steps if planned_steps is not None else int(10 * c * (max(k_values) * n_bases) ** delta)
            rows.append(run_row(k, tau, seed=s, n_bases=n_bases, planned_steps=plan, eval_every=eval_every))
    return make_table(rows, ("task.k", "seed"))


def fixed_d_sweep(d: int = 10_000, k_values: tuple[int, ...] = (5, 10, 20, 36), seeds: int = 3,
                  slope: float = 0.0, tau0: float = 1600.0, sigma: float = 0.1, seed: int = 0,
                  planned_steps: int = 50_000) -> pd.DataFrame:
    """tau = tau0 * (k / k0)^slope at D ~ d (n_bases = round(d / k), so D is within 1% of d)."""
    rng = np.random.default_rng([seed, 12])
    k0 = k_values[0]
    rows = []
    for k in k_values:
        nb = int(round(d / k))
        for s in range(seeds):
            tau = tau0 * (k / k0) ** slope * math.exp(sigma * rng.standard_normal())
            rows.append(run_row(k, tau, seed=s, n_bases=nb, planned_steps=planned_steps))
    return make_table(rows, ("task.k", "seed"))


def noise_sweep(lrs: tuple[float, ...] = (3e-4, 5e-4, 1e-3, 2e-3), batch_sizes: tuple[int, ...] = (32, 64, 128, 256),
                base_lr: float = 1e-3, base_batch: int = 64, lr_exponent: float = 0.6, batch_exponent: float = -0.5,
                tau0: float = 3400.0, seeds: int = 3, sigma: float = 0.1, k: int = 20, seed: int = 0,
                planned_steps: int = 50_000, never: tuple[float, ...] = ()) -> pd.DataFrame:
    """lr axis at base_batch and batch axis at base_lr: tau = tau0 (lr/base_lr)^a (batch/base_batch)^b.

    `never`: learning rates whose runs never snap within planned_steps (censored, like the
    paper's lr 5e-3)."""
    rng = np.random.default_rng([seed, 13])
    cells = sorted({(lr, base_batch) for lr in (*lrs, *never)} | {(base_lr, b) for b in batch_sizes})
    rows = []
    for lr, b in cells:
        for s in range(seeds):
            tau = (tau0 * (lr / base_lr) ** lr_exponent * (b / base_batch) ** batch_exponent
                   * math.exp(sigma * rng.standard_normal()))
            if lr in never:
                tau = 10.0 * planned_steps
            rows.append(run_row(k, tau, seed=s, lr=lr, batch_size=b, planned_steps=planned_steps))
    return make_table(rows, ("train.lr", "train.batch_size", "seed"))


def asymmetry_sweep(seeds: int = 6, ratio: float = 2.5, steps0: float = 3000.0, sigma: float = 0.05,
                    spread: float = 0.3, k: int = 20, n_bases: int = 1000, seed: int = 0,
                    planned_steps: int = 100_000) -> pd.DataFrame:
    """bz_to_a and a_to_b on the same mapping per seed: a_to_b takes `ratio` times the steps to exact match.

    `spread` varies the mapping's difficulty across seeds (shared by both directions),
    `sigma` is each run's own noise, so the per-seed ratio scatters by about sigma * sqrt(2)."""
    rng = np.random.default_rng([seed, 14])
    rows = []
    for s in range(seeds):
        base = steps0 * math.exp(spread * rng.standard_normal())
        exact_bz = base * math.exp(sigma * rng.standard_normal())
        exact_ab = ratio * base * math.exp(sigma * rng.standard_normal())
        rows.append(run_row(k, exact_bz / 1.4, seed=s, n_bases=n_bases, direction="bz_to_a",
                            planned_steps=planned_steps, exact=exact_bz))
        rows.append(run_row(k, None, seed=s, n_bases=n_bases, direction="a_to_b", planned_steps=planned_steps,
                            exact=exact_ab))
    return make_table(rows, ("task.direction", "seed"))


def metrics_for(table: pd.DataFrame, n_points: int = 40) -> dict[str, pd.DataFrame]:
    """A candidate-loss curve per done run: log K on the plateau, a sigmoid drop at its tau."""
    out = {}
    for r in table.itertuples(index=False):
        if r.status != "done":
            continue
        steps = np.linspace(0, r.steps_run, n_points).round().astype(int)
        log_k = math.log(r.k)
        tau = r.tau_half if math.isfinite(r.tau_half) else 2.0 * r.steps_run
        loss = log_k / (1.0 + np.exp(np.clip((steps - tau) / (0.05 * tau), -50, 50)))
        out[str(r.run)] = pd.DataFrame({"step": steps, "loss_cand": loss})
    return out
