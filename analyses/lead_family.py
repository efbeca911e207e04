"""Finding: the shuffle gap leads the loss by about half the waiting time; does the share rise with K?

The author (SPEC 9.1): lead = (t_loss - t(dz > 0.1 nats)) / t_loss, 0.52 +- 0.14 over K = 3..36, rising
from 0.20 at K = 3 to 0.47 at K = 10 and 0.68 at K = 36, the lead in steps growing as K^2.13. His t_loss
is the first logged step whose running-mean first-token loss is below 0.9 log K, his dz the in-batch one;
ours are tau_half and the unbiased dz. Both definitions are applied to the same runs (the author's needs
runs that logged his columns: a family without them says so in one line), each with our bootstrap
intervals and the author's own statistic (positive leads only, mean +- np.std ddof 0, least squares of
log lead in steps on log K) beside them.

Does the share rise with K? The trend is the least-squares slope of the per-run share on log K, with the
interval of `interp.sweeps.bootstrap` (seeds resampled within K and studentized with 3 seeds per K,
leverage-corrected residuals with 2): "rises" when the whole interval is above 0, "falls" below, else
"flat". The author's published numbers rise by (0.68 - 0.20) / log 12 = +0.19 per unit of log K.

    interp sweep --preset landauer-dense-tiny --out sweeps/landauer-dense-tiny --workers 2
    interp analyze sweeps/landauer-dense-tiny --workers 2      (optional: the routing heads)
    python analyses/lead_family.py [SWEEP] [--out DIR]
"""

import math

from _common import parse_sweep, row, status_line

from interp import plots
from interp.sweeps import paper
from interp.sweeps.circuit_fits import circuit_fits, lead_definitions, lead_share

SIGN = {"+": "rises", "-": "falls", "flat": "flat"}

sweep, out, _ = parse_sweep(__doc__.splitlines()[0], "sweeps/landauer-dense-tiny", with_y=False)
print(status_line(sweep))
table = sweep.table(circuits=True)
fits = circuit_fits(table)
ours, author = lead_definitions(fits, table)
if ours["not_measured"]:
    raise SystemExit(f"no lead share: {ours['not_measured']}")
ends = sorted(paper.PAPER_LEAD_SHARE_K)
rise = (paper.PAPER_LEAD_SHARE_K[ends[-1]] - paper.PAPER_LEAD_SHARE_K[ends[0]]) / math.log(ends[-1] / ends[0])
for r in (ours, author):
    print(f"{r['text']}:")
    if r["not_measured"]:
        print(f"  not measured: {r['not_measured']}")
        continue
    lo, hi = r["mean_ci"]
    print(row("lead share, mean [95% CI]", f"{r['mean']:.3f} [{lo:.3f}, {hi:.3f}]",
              f"{paper.PAPER_LEAD_SHARE} +- {paper.PAPER_LEAD_SHARE_SD} (sd over K)"))
    for k, share in r["per_k"].items():
        theirs = paper.PAPER_LEAD_SHARE_K.get(k)
        print(row(f"lead share at K = {k}", f"{share:.3f}", "-" if theirs is None else f"{theirs:.2f}"))
    trend = (f"n/a ({r['trend_note']})" if r["slope"] is None else
             f"{r['slope']:+.3f} [{r['slope_ci'][0]:+.3f}, {r['slope_ci'][1]:+.3f}] ({SIGN[r['sign']]})")
    print(row("trend per unit of log K [95% CI]", trend, f"{rise:+.2f} (rises, K = {ends[0]} to {ends[-1]})"))
    print(row("lead in steps ~ K^e: e [95% CI]", "n/a" if r["exponent"] is None else
              f"{r['exponent']:.2f} [{r['exponent_ci'][0]:.2f}, {r['exponent_ci'][1]:.2f}]",
              f"{paper.PAPER_LEAD_EXPONENT}"))
    a = r["author_statistic"]
    print(row("the author's statistic (positive leads)", f"{a['mean']:.3f} +- {a['sd']:.3f}, K^{a['exponent']:.2f}",
              f"{paper.PAPER_LEAD_SHARE} +- {paper.PAPER_LEAD_SHARE_SD}, K^{paper.PAPER_LEAD_EXPONENT}"))
    print(row("runs (positive leads / with a lead)", f"{a['n_positive']} / {a['n']}", "10 runs, one seed per K"))
    if r["n_not_logged"]:
        print(f"  {r['n_not_logged']} finished run(s) without the logged columns left out")
snap = lead_share(table, t_loss="snap")
print(row("ours, lead share against the snap", f"{snap.mean:.3f} [{snap.mean_ci[0]:.3f}, {snap.mean_ci[1]:.3f}]", "-"))
heads = fits.results.get("routing_heads")
print(row("routing head (runs)", ", ".join(f"{r.head} {r.runs}" for r in heads.counts.itertuples()) if heads
          else "not analysed", f"{paper.PAPER_ROUTING} (layer 0)"))
ablation = fits.results.get("ablation_trend")
print(row("ablation at tau, mean (nats)", f"{ablation.mean:+.2f}" if ablation else "not analysed",
          f"+{paper.PAPER_ABLATION_AT_TAU} at K = {paper.PAPER_ABLATION_K}"))
for name in ("lead_share", "lead_share_author"):
    if name in fits.results:
        print(f"summary: {fits.results[name].summary()}")
        path = out / f"{name.replace('lead_share', 'lead_family')}.html"
        plots.k_trend_figure(fits.results[name]).write_html(path, include_plotlyjs=True)
        print(f"figure: {path}")
# the verdicts (docs/reconciliation.md): equivalence margins, 90% intervals (t over runs, OLS t for the slopes) and the
# replicates each claim needs; an inconclusive row says how many runs would be expected to decide it
from interp.mechanisms.reconcile import reconcile  # noqa: E402

for r in reconcile(sweep.path).rows:  # the caches only: nothing is computed
    if r["key"] in ("lead_share", "lead_trend", "lead_exponent"):
        print(f"verdict, {r['claim']}: {r['verdict'].upper()} (margin {r['margin']}): {r['why']}")
# each definition by the same rule, and how many runs would be expected to decide one that stays undecided
from interp.mechanisms import equivalence as Q  # noqa: E402
from interp.mechanisms.reconcile import Gathered, table_claims  # noqa: E402
from interp.mechanisms.reconcile_rules import claim  # noqa: E402

gathered = Gathered(str(sweep.path), "sweep")
table_claims(gathered, sweep.table(circuits=True))
for key in ("lead_share", "lead_trend", "lead_exponent"):
    c = claim(key)
    for side, measures in (("ours", gathered.ours), ("the author's definition", gathered.author)):
        m = measures.get(key)
        if m is None or not m.usable:
            print(row(f"{key}, {side}", "not measured", c.margin.text()))
            continue
        e = m.as_estimate()
        decision = Q.decide(c.margin, c.evidence, e)
        more = Q.replicates_to_decide(c.margin, c.evidence, e) if decision == Q.UNDECIDED else None
        print(row(f"{key}, {side}", f"{e.text()} ({e.n} runs): {decision}"
                  + (f"; about {more} runs would decide it at this spread" if more else ""), c.margin.text()))
