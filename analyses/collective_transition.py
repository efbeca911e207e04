"""Finding: the groups snap together, not one by one.

Paper (K = 10): 0 of 200 groups are >= 80% accurate at tau/2, 31.5% at 0.97 tau, 99% at
1.5 tau.

    python analyses/collective_transition.py [RUN] [--out DIR]
"""

from _common import parse, row

import interp
from interp import plots
from interp.analysis import groups
from interp.analysis.suite import run_suite

run, out = parse(__doc__.splitlines()[0])
tau = interp.tau(run)
acc = run_suite(run, only="groups", progress=False).tables["groups"]
share = groups.share_above(acc, tau, fractions=(0.5, 0.97, 1.5)).set_index("fraction")
paper = {0.5: "0 of 200", 0.97: "31.5%", 1.5: "99%"}
print(f"{run.path}: share of groups >= 80% candidate accuracy (tau = {tau})")
last = int(acc["step"].max())
for f in (0.5, 0.97, 1.5):
    r = share.loc[f]
    if r["beyond"]:
        print(row(f"at {f} tau = {f * tau:.0f}", f"beyond the run (last step {last})", paper[f]))
        continue
    print(row(f"at {f} tau (nearest checkpoint {int(r['step'])})",
              f"{int(r['n_above'])} of {int(r['n_groups'])} ({100 * r['share']:.1f}%)", paper[f]))
spread = groups.spread(groups.snap_steps(acc), tau)
if "iqr_over_tau" in spread:
    print(row("group snap steps: interquartile range / tau", f"{spread['iqr_over_tau']:.2f}", "small (collective)"))
path = out / "collective_transition.html"
plots.group_histograms(acc, tau).write_html(path, include_plotlyjs=True)
print(f"figure: {path}")
