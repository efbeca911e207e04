"""Synthetic sweep tables with exactly the columns of `Sweep.table()` (one row per run).

The fits and figures of `interp.sweeps.scaling` / `interp.plots.sweep` are tested on these,
with a known truth (exponent, slope, ratio), so a test can check what a fit recovers
without training anything. Every value is derived from a run's "true" tau_half:

    t_start = 0.7 tau, t_end = snap_step = 1.2 tau, tau_window = t_end - t_start,
    steps_to_acc_cand_99 = 1.3 tau, steps_to_exact_99 = 1.4 tau (or `exact` when given),
    gap_onset = (1 - lead) tau when a lead share is given (else NaN), gap_lead and
    gap_lead_snap its lead over tau_half and the snap, gap_lead_steps = tau_half - gap_onset

and a run that would reach a threshold only after its planned steps is censored for it
(value NaN, `censored_<measure>` True, steps_run = planned_steps), as a real run would be.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from interp.sweeps.sweep import CENSORABLE, MEASURES
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
            exact: float | None = None, status: str = "done", name: str | None = None,
            lead: float | None = None) -> dict:
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
    gap = _quantise(max(0.0, (1.0 - lead) * tau), eval_every) if has_cand and lead is not None else math.nan
    reached = math.isfinite(gap) and gap <= steps_run and math.isfinite(row["tau_half"])
    row["gap_onset"] = gap if reached else math.nan
    row["gap_lead"] = (row["tau_half"] - gap) / row["tau_half"] if reached else math.nan
    row["gap_lead_snap"] = (row["snap_step"] - gap) / row["snap_step"] if reached else math.nan
    row["gap_lead_steps"] = row["tau_half"] - gap if reached else math.nan
    row["censored"] = row["censored_tau_half"]
    row["error"] = "RuntimeError: synthetic failure" if status == "failed" else None
    row["wall_seconds"] = float(steps_run) * 0.01
    for m in MEASURES:  # the author's lead columns: not measured (runs without the author's logged columns)
        row.setdefault(m, math.nan)
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


# ---------------------------------------------------------------------------- sweep folders
def write_sweep_folder(path, spec, tau_of, exact_of=None, every: int = 10, seed: int = 0, gap_of=None):
    """A real sweep folder (`Sweep.create`, one `Run.create` folder per point) whose runs did not
    train: each gets a synthetic metrics log and a "done" status, so that `Sweep.table()`,
    `interp scaling`, the report and the finding scripts read it through their real code paths.

    `tau_of(run_spec, rng)` gives a run's true tau (candidate loss log K until about tau, a
    sigmoid drop centred on it); `exact_of(run_spec, rng)` its steps to exact match >= 0.99
    (default 1.4 tau); `gap_of(run_spec, rng, tau)` the step from which its shuffle gap exceeds
    0.1 nats (it is 0.2 nats from there; without it the gap only follows the loss, 0.5 (1 - drop)
    nats, crossing 0.1 near 0.89 tau). A run whose thresholds lie past its planned steps stays
    censored."""
    import json

    from interp.files import atomic_write_bytes
    from interp.names import METRICS
    from interp.runs import METRICS_FILE, Run
    from interp.sweeps.sweep import Sweep
    from interp.task import DIRECTIONS

    sweep = Sweep.create(path, spec)
    rng = np.random.default_rng([seed, 23])
    for name, run_spec, _ in sweep.points():
        run = Run.create(sweep.path / name, run_spec)
        has_cand = DIRECTIONS[run_spec.task.direction][1] == "A"
        tau = tau_of(run_spec, rng) if has_cand else None
        exact = exact_of(run_spec, rng) if exact_of is not None else 1.4 * tau
        gap = gap_of(run_spec, rng, tau) if gap_of is not None and has_cand else math.inf
        log_k = math.log(run_spec.task.k)
        lines = []
        for step in range(0, run_spec.train.steps + 1, every):
            row = {"step": step, **dict.fromkeys(METRICS)}  # every metric, null where undefined, as training logs
            if has_cand:
                drop = 1.0 / (1.0 + math.exp(min(50.0, max(-50.0, (step - tau) / (0.08 * tau)))))
                row.update(loss_cand=log_k * drop + 1e-3, shuffle_gap=max(0.5 * (1 - drop), 0.2 if step >= gap else 0.0),
                           acc_cand=1.0 / run_spec.task.k + (1 - 1.0 / run_spec.task.k) * (1 - drop) ** 0.5
                           if step < 1.3 * tau else 1.0)
            row["acc_exact"] = min(1.0, step / exact) ** 3 if step < exact else 1.0
            lines.append(json.dumps(row, sort_keys=True) + "\n")
        # the log as Run.append_metrics writes it, row by row, in one write (fsync per row is slow)
        atomic_write_bytes(run.path / METRICS_FILE, "".join(lines).encode())
        run.write_status("done", last_step=run_spec.train.steps, wall_seconds=float(run_spec.train.steps) / 100)
        run.release()
    return Sweep.open(path)


def sweep_folders(root) -> dict:
    """The four family-level designs as real sweep folders of the small test model, each with a
    known truth: tau = 3 D^1.2 (scaling), tau flat in K at D = 240 (fixed D), tau rising with the
    learning rate and falling with the batch size (noise), a_to_b 2.5x slower (asymmetry)."""
    from pathlib import Path

    from interp.sweeps.sweep import SweepSpec
    from tests.helpers import small_spec

    root = Path(root)
    base = small_spec(steps=6000, n_bases=24)
    noise = lambda rng, sd=0.08: math.exp(sd * rng.standard_normal())  # noqa: E731
    designs = {
        "scaling": (SweepSpec(base=base, grid=(("task.k", (3, 4, 6, 8, 12)), ("seed", (0, 1, 2))), name="scaling"),
                    lambda s, rng: 3.0 * s.task.dataset_size ** 1.2 * noise(rng), None),
        "fixed-d": (SweepSpec(base=base, grid=(("task.k", (3, 4, 6, 8, 12)), ("seed", (0, 1))), fixed_d=240,
                              name="fixed-d"),
                    lambda s, rng: 1000.0 * noise(rng), None),
        "noise": (SweepSpec(base=base, grid=(("seed", (0, 1)),),
                            points=tuple({"train.lr": lr, "train.batch_size": 16} for lr in (1e-3, 2e-3, 4e-3))
                            + tuple({"train.lr": 2e-3, "train.batch_size": b} for b in (8, 32)), name="noise"),
                  lambda s, rng: 800.0 * (s.train.lr / 1e-3) ** 0.6 * (16 / s.train.batch_size) ** 0.5 * noise(rng),
                  None),
        "asymmetry": (SweepSpec(base=base, grid=(("task.direction", ("bz_to_a", "a_to_b")), ("seed", (0, 1, 2))),
                                name="asymmetry"),
                      lambda s, rng: 1000.0,
                      lambda s, rng: (1400.0 if s.task.direction == "bz_to_a" else 3500.0) * noise(rng, 0.05)),
    }
    return {name: write_sweep_folder(root / name, spec, tau, exact, seed=i)
            for i, (name, (spec, tau, exact)) in enumerate(designs.items())}
