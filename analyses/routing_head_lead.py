"""Finding: a layer-0 routing head starts carrying z well before the loss moves.

Paper (K = 10): L0H3's z-sensitivity rises about half of the waiting time before the snap,
so its lead (tau - onset) / tau is about 0.5.

    python analyses/routing_head_lead.py [RUN] [--out DIR]
"""

from _common import parse, row

import interp
from interp.analysis.suite import run_suite

run, out = parse(__doc__.splitlines()[0])
suite = run_suite(run, only="sensitivity", progress=False)  # cached in the run folder
tl = interp.timeline(run, sens=suite.tables["sensitivity"])
onset = tl.onsets.set_index("head_name").loc[tl.routing_head, "onset"]
print(f"{run.path}: routing head and its lead over tau")
print(row("routing head", tl.routing_head, "L0H3 (a layer-0 head)"))
print(row("tau_half (steps)", str(tl.tau), "1850 at D = 10,000"))
print(row("onset of its z-share (steps)", str(onset), "about tau / 2"))
print(row("lead (tau - onset) / tau", "-" if tl.lead is None else f"{tl.lead:.2f}", "about 0.5"))
path = out / "routing_head_lead.html"
tl.figure().write_html(path, include_plotlyjs=True)
print(f"figure: {path}")
