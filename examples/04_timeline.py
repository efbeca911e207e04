"""Step 4: the circuit-formation timeline: losses, shuffle gap and per-head z-sensitivity.

    python examples/04_timeline.py [RUN] [OUT.html]
"""

import sys
from pathlib import Path

import interp
from interp import plots

run = interp.Run.open(sys.argv[1] if len(sys.argv) > 1 else "checkpoints/demo")
out = Path(sys.argv[2] if len(sys.argv) > 2 else "timeline.html")

tl = interp.timeline(run)
print(f"tau = {tl.tau}, routing head = {tl.routing_head}, lead = {tl.lead:.2f}")
print(tl.onsets.to_string(index=False))
plots.timeline_figure(tl).write_html(out, include_plotlyjs=True)
print(f"wrote {out}")
