"""Finding: zero-ablating the routing head hurts little before the transition, a lot at and after it.

Paper (K = 10): zero-ablating L0H3 raises the loss by +0.02 nats before the transition,
+1.41 mid-transition and +3.65 after it.

    python analyses/ablation_mid_transition.py [RUN] [--out DIR]
"""

from _common import parse, row

from interp import plots
from interp.analysis import sensitivity
from interp.analysis.suite import run_suite

run, out = parse(__doc__.splitlines()[0])
suite = run_suite(run, only="sensitivity,ablation", progress=False)
head = sensitivity.routing_head(suite.tables["sensitivity"])
abl = suite.tables["ablation"]
mine = abl[(abl["component"] == head) & (abl["method"] == "zero")].set_index("label")
paper = {"pre": "+0.02", "mid": "+1.41", "post": "+3.65"}
print(f"{run.path}: zero-ablating the routing head {head} (change in candidate loss, nats)")
for label, when in (("pre", "tau/4"), ("mid", "tau"), ("post", "2 tau")):
    if label not in mine.index:
        note = next((n for n in suite.notes if n.startswith(label)), "not analysed")
        print(row(f"{label} ({when})", note, paper[label]))
        continue
    r = mine.loc[label]
    print(row(f"{label} ({when}, step {r['step']})", f"{r['delta_loss_cand']:+.2f}", paper[label]))
path = out / "ablation_mid_transition.html"
plots.ablation_heatmaps(abl).write_html(path, include_plotlyjs=True)
print(f"figure: {path}")
