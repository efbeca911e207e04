"""Finding: the plateau grows as a power of the dataset size, tau = C * D^delta.

Paper: delta = 1.19, 95% CI [1.14, 1.31] (K = 3..36 at n_bases = 1000, one seed per point,
bootstrap over points); other tables of the paper give 1.31 and 1.70. Here seeds are
replicates (the bootstrap resamples seeds within each D), censored runs are counted and left
out, and the fit with the smallest and largest D left out shows how much the range matters.

    interp sweep --preset scaling-tiny --out sweeps/scaling-tiny --workers 2
    python analyses/scaling_law.py [SWEEP] [--out DIR] [--y tau_window]
"""

from _common import parse_sweep, row, status_line

from interp import plots
from interp.sweeps import scaling

sweep, out, y = parse_sweep(__doc__.splitlines()[0], "sweeps/scaling-tiny")
print(status_line(sweep))
fit = scaling.power_law(sweep.table(), x="D", y=y)
lo, hi = scaling.PAPER_DELTA_CI
print(row("delta [95% CI]", f"{fit.delta:.3f} [{fit.ci[0]:.3f}, {fit.ci[1]:.3f}]", f"{scaling.PAPER_DELTA} [{lo}, {hi}]"))
print(row("C, R^2", f"{fit.c:.3g}, {fit.r2:.3f}", "-"))
print(row("D range", f"{fit.points['D'].min():g}..{fit.points['D'].max():g}",
          f"{scaling.PAPER_DELTA_RANGE[0]:,}..{scaling.PAPER_DELTA_RANGE[1]:,}"))
print(row("runs used / censored", f"{fit.n_used} / {fit.n_censored}", "11 points, one seed each"))
for key, value in fit.range_sensitivity.items():
    print(row(f"delta, {key.replace('_', ' ')} D ({value['x']:g})", f"{value['delta']:.3f}", "-"))
print(f"summary: {fit.summary()}")
path = out / "scaling_law.html"
plots.tau_vs_d(fit).write_html(path, include_plotlyjs=True)
print(f"figure: {path}")
