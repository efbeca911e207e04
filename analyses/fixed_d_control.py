"""Finding: at a fixed dataset size D, the plateau does not depend on K.

Paper: at D = 10,000, tau = 1600, 1650, 1600, 1600 for K = 5, 10, 20, 36: flat (max/min
1.03), so the plateau is set by D, not by the number of targets per base. Here: the slope
of log tau against log K with its CI (flat when the CI contains 0) and the max/min ratio.

    interp sweep --preset fixed-d-tiny --out sweeps/fixed-d-tiny --workers 2
    python analyses/fixed_d_control.py [SWEEP] [--out DIR] [--y tau_window]
"""

from _common import parse_sweep, row, status_line

from interp import plots
from interp.sweeps import scaling

sweep, out, y = parse_sweep(__doc__.splitlines()[0], "sweeps/fixed-d-tiny")
print(status_line(sweep))
res = scaling.fixed_d(sweep.table(), y=y)
paper = scaling.PAPER_FIXED_D_TAU
print(row("D", f"{res.d:g}", f"{scaling.PAPER_FIXED_D:,}"))
print(row("slope of log tau vs log K [95% CI]", f"{res.slope:+.3f} [{res.ci[0]:+.3f}, {res.ci[1]:+.3f}]", "flat"))
print(row("flat (CI contains 0)", str(res.flat), "yes"))
print(row("max/min of per-K mean tau", f"{res.ratio_max_min:.3f}", f"{max(paper.values()) / min(paper.values()):.3f}"))
print(row("runs used / censored", f"{res.n_used} / {res.n_censored}", f"{len(paper)} points"))
print(f"summary: {res.summary()}")
path = out / "fixed_d_control.html"
plots.tau_vs_k_fixed_d(res).write_html(path, include_plotlyjs=True)
print(f"figure: {path}")
