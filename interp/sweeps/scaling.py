"""The family-level fits of the paper's claims, in one namespace (`from interp import scaling`).

    power_law   tau = C * D^delta (claim 1), bootstrap CI, R^2, sensitivity to the D range
    fixed_d     at one D, the slope of log tau against log K (claim 2: flat)
    noise       tau against lr and batch size (claim 3: more gradient noise, longer plateau)
    asymmetry   steps to exact match, a_to_b over bz_to_a, paired by seed (claim 4)
    sweep_fits  every fit a sweep's design allows (`interp scaling`, the sweep report)
    coverage    the measured coverage of the bootstrap schemes (docs/scaling.md)
    forks       escape per fork step and arm of a fork family, censored runs as lower bounds (ForkComparison)
    cancellation  tau against bases per selector set (the selector-sharing control of gradient cancellation)

Each takes a sweep table (`Sweep.table()`, one row per run) and returns a result with
`.summary()`, `.to_dict()` and the paper's value; the figures of `interp.plots.sweep` take
the results (`plots.tau_vs_d(fit)`). This module only gathers names; they live by concern:

    interp.sweeps.fits        run selection and censoring, slope fits, power law, fixed D
    interp.sweeps.conditions  gradient noise and direction asymmetry
    interp.sweeps.bootstrap   the bootstrap intervals and the coverage study
    interp.sweeps.paper       the paper's numbers (PAPER_*)
    interp.sweeps.family      sweep_fits and Fits
    interp.sweeps.forks       the comparison of fork arms
    interp.sweeps.cancellation  the selector-sharing control

numpy, pandas and scipy only: importing it never loads torch or plotly.
"""

from interp.sweeps.bootstrap import N_BOOT, NOISES, SCHEMES, coverage
from interp.sweeps.cancellation import AUTHOR_BETA, PREDICTED_BETA, CancellationFit, cancellation
from interp.sweeps.conditions import PAIR_KEYS, AsymmetryResult, NoiseResult, asymmetry, noise
from interp.sweeps.family import Fits, sweep_fits
from interp.sweeps.fits import (
    D_TOL,
    DIRECTIONS,
    CensoredRunsWarning,
    FixedDResult,
    PowerLawFit,
    SlopeFit,
    fixed_d,
    one_dataset_size,
    power_law,
)
from interp.sweeps.forks import ForkComparison, forks
from interp.sweeps.paper import PAPER_ASYMMETRY, PAPER_DELTA, PAPER_DELTA_CI, PAPER_DELTA_RANGE, PAPER_FIXED_D
from interp.sweeps.paper import PAPER_FIXED_D_TAU, PAPER_LR_K, PAPER_LR_MEASURE, PAPER_LR_NEVER, PAPER_LR_NEVER_STEPS
from interp.sweeps.paper import PAPER_LR_RATIO, PAPER_LR_TAU
from interp.sweeps.sweep import MEASURES

__all__ = [
    "power_law", "fixed_d", "noise", "asymmetry", "sweep_fits", "coverage", "one_dataset_size",
    "PowerLawFit", "FixedDResult", "NoiseResult", "AsymmetryResult", "SlopeFit", "Fits", "CensoredRunsWarning",
    "MEASURES", "DIRECTIONS", "SCHEMES", "NOISES", "N_BOOT", "D_TOL", "PAIR_KEYS",
    "PAPER_ASYMMETRY", "PAPER_DELTA", "PAPER_DELTA_CI", "PAPER_DELTA_RANGE", "PAPER_FIXED_D", "PAPER_FIXED_D_TAU",
    "PAPER_LR_K", "PAPER_LR_MEASURE", "PAPER_LR_NEVER", "PAPER_LR_NEVER_STEPS", "PAPER_LR_RATIO", "PAPER_LR_TAU",
    "forks", "ForkComparison", "cancellation", "CancellationFit", "PREDICTED_BETA", "AUTHOR_BETA",
]
