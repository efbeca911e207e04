"""Finding: the routing head's attention from the decision position moves onto z before the snap.

Paper: L0H3 attends to z during the plateau, before the loss leaves log K.

    python analyses/attention_evolution.py [RUN] [--out DIR]
"""

from _common import parse, row

import interp
from interp import plots
from interp.analysis import sensitivity
from interp.analysis.common import segment_names
from interp.analysis.suite import run_suite

run, out = parse(__doc__.splitlines()[0])
tau = interp.tau(run)
suite = run_suite(run, only="sensitivity,attention", progress=False)
head = sensitivity.routing_head(suite.tables["sensitivity"])
seg = suite.tables["attention_segments"]
to_z = seg[(seg["head_name"] == head) & (seg["segment"] == "z")].set_index("step")["mass"]
before = to_z[to_z.index < tau]
print(f"{run.path}: decision-position attention of {head} to z (tau = {tau})")
print(row("at step 0", f"{to_z.iloc[0]:.2f}", "-"))
print(row(f"last checkpoint before tau (step {before.index[-1]})", f"{before.iloc[-1]:.2f}", "already on z"))
print(row(f"last checkpoint (step {to_z.index[-1]})", f"{to_z.iloc[-1]:.2f}", "on z"))
path = out / "attention_evolution.html"
plots.attention_evolution(suite.tables["attention"], labels=segment_names(run.task)).write_html(
    path, include_plotlyjs=True, auto_play=False)
plots.attention_segments(seg, tau=tau).write_html(out / "attention_segments.html", include_plotlyjs=True)
print(f"figures: {path}, {out / 'attention_segments.html'}")
