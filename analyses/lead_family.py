"""Finding: the shuffle gap leads the loss by about half the waiting time, and the lead in steps grows as a power of K.

The author: lead = (t_loss - t(dz > 0.1 nats)) / t_loss with t_loss the loss transition, 0.52 +- 0.14
over K = 3..36 (0.20 at K = 3, 0.47 at K = 10, 0.68 at K = 36), and the lead in steps grows as
K^2.13. Here t_loss is tau_half (the lead against the snap, the end of tau_window, is printed too),
each run is a point, seeds are replicates, and runs that never reached tau_half are censored and
left out. The lead needs only each run's metrics log; with the runs analysed (interp analyze
SWEEP) the routing-head counts and the ablation effect at tau are printed as well.

    interp sweep --preset scaling-tiny --out sweeps/scaling-tiny --workers 2
    interp analyze sweeps/scaling-tiny --workers 2      (optional: the routing heads)
    python analyses/lead_family.py [SWEEP] [--out DIR]
"""

from _common import parse_sweep, row, status_line

from interp import plots
from interp.sweeps import paper
from interp.sweeps.circuit_fits import circuit_fits, lead_share

sweep, out, _ = parse_sweep(__doc__.splitlines()[0], "sweeps/scaling-tiny")
print(status_line(sweep))
table = sweep.table(circuits=True)
fits = circuit_fits(table)
share = fits.results.get("lead_share")
if share is None:
    raise SystemExit(f"no lead share: {fits.problems['lead_share']}")
lo, hi = share.mean_ci
print(row("lead share, mean [95% CI]", f"{share.mean:.3f} [{lo:.3f}, {hi:.3f}]",
          f"{paper.PAPER_LEAD_SHARE} +- {paper.PAPER_LEAD_SHARE_SD} (sd over K)"))
for r in share.per_k.itertuples():
    theirs = paper.PAPER_LEAD_SHARE_K.get(int(r.k))
    print(row(f"lead share at K = {int(r.k)} ({r.n} runs)", f"{r.mean:.3f}", "-" if theirs is None else f"{theirs}"))
trend = "n/a" if share.slope != share.slope else f"{share.slope:+.3f} [{share.ci[0]:+.3f}, {share.ci[1]:+.3f}]"
print(row("trend per unit of log K", trend, "+0.19 (0.20 at K = 3 to 0.68 at K = 36)"))
snap = lead_share(table, t_loss="snap")
print(row("lead share against the snap", f"{snap.mean:.3f} [{snap.mean_ci[0]:.3f}, {snap.mean_ci[1]:.3f}]", "-"))
exponent = fits.results.get("lead_exponent")
print(row("lead in steps ~ K^e: e [95% CI]",
          f"{exponent.delta:.2f} [{exponent.ci[0]:.2f}, {exponent.ci[1]:.2f}]" if exponent else "n/a",
          f"{paper.PAPER_LEAD_EXPONENT}"))
heads = fits.results.get("routing_heads")
print(row("routing head (runs)", ", ".join(f"{r.head} {r.runs}" for r in heads.counts.itertuples()) if heads
          else "not analysed", f"{paper.PAPER_ROUTING} (layer 0)"))
ablation = fits.results.get("ablation_trend")
print(row("ablation at tau, mean (nats)", f"{ablation.mean:+.2f}" if ablation else "not analysed",
          f"+{paper.PAPER_ABLATION_AT_TAU} at K = {paper.PAPER_ABLATION_K}"))
print(f"summary: {share.summary()}")
path = out / "lead_family.html"
plots.k_trend_figure(share).write_html(path, include_plotlyjs=True)
print(f"figure: {path}")
