"""Finding: more gradient noise (a larger learning rate, a smaller batch) lengthens the plateau.

Paper (K = 20, tau_window): lr 3e-4, 5e-4, 1e-3, 2e-3 give 2100, 2200, 3400, 7550 steps and
5e-3 never snaps in 50,000: 7x the learning rate gives 3.6x tau. Here: the slopes of log tau
against log lr (at one batch size) and against log batch size (at one lr), each with its CI
and sign, and the slope in examples seen (tau x batch), which normalises for throughput.

    interp sweep --preset noise-tiny --out sweeps/noise-tiny --workers 2
    python analyses/noise.py [SWEEP] [--out DIR] [--y tau_window]
"""

from _common import parse_sweep, row, status_line

from interp import plots
from interp.sweeps import scaling

sweep, out, y = parse_sweep(__doc__.splitlines()[0], "sweeps/noise-tiny")
print(status_line(sweep))
res = scaling.noise(sweep.table(), y=y)
if res.lr:
    print(row("slope of log tau vs log lr [95% CI]", f"{res.lr.slope:+.3f} [{res.lr.ci[0]:+.3f}, {res.lr.ci[1]:+.3f}]",
              "positive (7x lr gives 3.6x tau)"))
if res.ratio:
    print(row("tau ratio, largest / smallest lr",
              f"{res.ratio['tau_ratio']:.2f}x at {res.ratio['lr_ratio']:.2g}x lr",
              f"{scaling.PAPER_LR_RATIO[1]}x at {scaling.PAPER_LR_RATIO[0]:g}x lr"))
if res.batch:
    print(row("slope of log tau vs log batch [95% CI]",
              f"{res.batch.slope:+.3f} [{res.batch.ci[0]:+.3f}, {res.batch.ci[1]:+.3f}]", "negative (less noise)"))
if res.examples:
    print(row("slope of log (tau x batch) vs log batch",
              f"{res.examples.slope:+.3f} [{res.examples.ci[0]:+.3f}, {res.examples.ci[1]:+.3f}]", "-"))
if len(res.censored):
    print(row("censored (never snapped within the run)", ", ".join(res.censored["run"]), "lr 5e-3: tau > 50,000"))
print(f"summary: {res.summary()}")
path = out / "noise.html"
plots.tau_vs_noise(res).write_html(path, include_plotlyjs=True)
print(f"figure: {path}")
