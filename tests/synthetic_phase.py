"""Synthetic phase sweeps: real sweep folders (lr x K x seeds) whose runs did not train, each with a hand-built
metrics log of a known outcome, transition window and dissipated work Q, so that `interp phase` and
`interp scaling --q` are checked against a known truth through their real code paths.

A run's log, every 50 steps: step 0 at 1.3 log K (the prior), then the plateau at log K with dz = 0; a transitioned
run leaves it at tau (0.6 log K, dz 0.6: t1 = tau - 50, t1_dz = tau), reaches 0.2 log K at tau + 50 (dz 1.0, its
maximum: t2 = t2_dz = tau + 50) and stays at 0.1 log K; a stuck run stays on the plateau; a diverged one sits at 2 log
K from step 200. The cumulative `dissipation` column grows by 0.002 a step before the plateau, 0.0005 on it, and by
exactly Q_dz = c log(K / K*) (times a lognormal factor of spread `q_noise`) over (tau, tau + 50]. Each log ends where a
run trained with stop_when_decided would (the author's rules at their defaults).
"""

from __future__ import annotations

import json
import math

import numpy as np

TAU = 500


def _rows(outcome: str, k: int, q_dz: float, gradients: bool) -> tuple[list[dict], int]:
    log_k = math.log(k)
    rows, q = [], 0.0
    end = {"transitioned": TAU + 50 + 500, "stuck": 2050, "diverged": 700}[outcome]
    for step in range(0, end + 1, 50):
        if step == 0:
            cand, dz, rate = 1.3 * log_k, 0.0, 0.0
        elif outcome == "diverged" and step >= 200:
            cand, dz, rate = 2.0 * log_k, 0.0, 0.01
        elif outcome != "transitioned" or step < TAU:
            cand, dz, rate = log_k, 0.0, 0.002 if step <= 50 else 0.0005
        elif step == TAU:
            cand, dz, rate = 0.6 * log_k, 0.6, 0.0005
        elif step == TAU + 50:
            cand, dz, rate = 0.2 * log_k, 1.0, q_dz / 50
        else:
            cand, dz, rate = 0.1 * log_k, 1.0, 0.0001
        q += rate * (50 if step else 0)
        row = {"step": step, "lr": 1e-3, "train_loss": 1.0 if step else None, "loss_cand": cand, "shuffle_gap": dz,
               "acc_exact": 0.0, "loss": cand}
        if gradients:
            row["dissipation"] = q
        rows.append(row)
    return rows, end


def write_phase_sweep(path, lrs, ks, seeds, outcome_of, c: float = 3.0, k_star: float = 2.0, q_noise: float = 0.0,
                      gradients: bool = True, seed: int = 0):
    """A sweep folder of the small test model over lr x K x seeds; `outcome_of(k, lr, seed, rng)` gives each run's
    outcome ("transitioned", "stuck" or "diverged")."""
    from interp.files import atomic_write_bytes
    from interp.runs import METRICS_FILE, Run
    from interp.sweeps.sweep import Sweep, SweepSpec
    from tests.helpers import small_spec

    spec = SweepSpec(base=small_spec(steps=3000, eval_every=50, stop_when_decided=True),
                     grid=(("task.k", tuple(ks)), ("train.lr", tuple(lrs)), ("seed", tuple(seeds))), name="phase")
    sweep = Sweep.create(path, spec)
    rng = np.random.default_rng([seed, 52])
    for name, run_spec, _ in sweep.points():
        k, lr = run_spec.task.k, run_spec.train.lr
        outcome = outcome_of(k, lr, run_spec.seed, rng)
        q_dz = c * math.log(k / k_star) * math.exp(q_noise * rng.standard_normal())
        rows, end = _rows(outcome, k, q_dz, gradients)
        run = Run.create(sweep.path / name, run_spec)
        for row in rows:
            row["lr"] = lr
        atomic_write_bytes(run.path / METRICS_FILE, "".join(json.dumps(r) + "\n" for r in rows).encode())
        run.write_status("done", last_step=end, stopped_early=True, wall_seconds=1.0, decided=True)
        run.release()
    return Sweep.open(path)


def logistic_outcomes(eta_c_of, slope: float = -4.0):
    """outcome_of drawing transitioned with p = sigma(slope (log lr - log eta_c(K))), else stuck."""
    def outcome_of(k, lr, seed, rng):
        p = 1.0 / (1.0 + math.exp(-slope * (math.log(lr) - math.log(eta_c_of(k)))))
        return "transitioned" if rng.random() < p else "stuck"
    return outcome_of


def threshold_outcomes(eta_c_of):
    """outcome_of: transitioned below eta_c(K), stuck up to 3 eta_c, diverged beyond."""
    def outcome_of(k, lr, seed, rng):
        e = eta_c_of(k)
        return "transitioned" if lr < e else "stuck" if lr < 3 * e else "diverged"
    return outcome_of
