"""Finding: a layer-0 routing head starts carrying z well before the loss moves, and z is
used later still.

Paper (K = 10): L0H3's z-sensitivity rises about half of the waiting time before the snap,
so its lead (tau - onset) / tau is about 0.5. We report four events of the routing head,
each with its lead: when it carries z (the onsets of its attention to z and of its z-share)
and when z is used (resample-ablating it costs > 0.1 nats of candidate loss; patching it
restores > 20% of the logit difference).

    python analyses/routing_head_lead.py [RUN] [--out DIR]
"""

from _common import parse, row

import interp
from interp import plots

run, out = parse(__doc__.splitlines()[0])
tl = interp.timeline(run)  # sensitivity and usage through the suite's cache
print(f"{run.path}: routing head, when it carries z and when z is used")
print(row("routing head", tl.routing_head, "L0H3 (a layer-0 head)"))
print(row("tau_half (steps)", str(tl.tau), "1850 at D = 10,000"))
for r in tl.events.itertuples():
    step = "never" if str(r.step) == "<NA>" else str(r.step)
    lead = "-" if r.lead is None or r.lead != r.lead else f"{r.lead:.2f}"
    print(row(f"{r.label}: step, lead", f"{step}, {lead}", "lead about 0.5" if r.kind == "carried" else "(no paper value)"))
print(row("lead (tau - onset) / tau, z-share onset", "-" if tl.lead is None else f"{tl.lead:.2f}", "about 0.5"))
path = out / "routing_head_lead.html"
plots.timeline_figure(tl).write_html(path, include_plotlyjs=True)
print(f"figure: {path}")
