"""Finding: which mechanism holds the plateau? The mechanism table, with the author's numbers.

The paper keeps one of seven candidates: entropic stabilisation (noise holds the model). It
rejects gradient cancellation (the author measured beta = 0.02 against a predicted ~1), barrier
crossing (7x lr gives a 3.6x longer plateau: the opposite) and incremental coverage (0 of 200
groups at tau/2). The author's forks find full batch re-solving in ~800 steps while minibatch
noise stays trapped (>= 20x), and measure direction consistency of 0.04-0.22 on the plateau and
0.4-0.9 at the transition. Here: one table per folder, each row with our value, its interval,
the runs it rests on, the verdict of the rule fixed in interp/mechanisms/rules.py, and the
paper's or the author's number (docs/mechanisms.md).

    python analyses/mechanisms.py [PATH ...] [--cached] [--out DIR]

PATH: runs, sweeps or fork families (default: the demo and the tiny sweeps where they exist:
sweeps/scaling-tiny, sweeps/noise-tiny, sweeps/cancellation-tiny, forks/forks-tiny/family). Make
the sweeps with `interp sweep --preset NAME --out sweeps/NAME --workers 2` and the family with
`python analyses/forks.py forks/forks-tiny`.
"""

import html

from _common import parse_paths

from interp.mechanisms import mechanisms
from interp.report.page import page, write_html

DEFAULTS = ("checkpoints/demo", "sweeps/scaling-tiny", "sweeps/noise-tiny", "sweeps/cancellation-tiny",
            "forks/forks-tiny/family")

paths, missing, cached, out = parse_paths(__doc__.splitlines()[0], DEFAULTS)
body = []
for path in paths:
    table = mechanisms(path, compute=not cached)
    print(f"\n== {path} ({table.kind})")
    for r in table.rows:
        value = "not measured" if r["verdict"] == "not measured" else \
            f"{r['value']:.3g} [{r['low']:.3g}, {r['high']:.3g}] ({r['n_runs']} run{'s' if r['n_runs'] != 1 else ''})"
        print(f"  {r['mechanism']:<46} {r['verdict']:<13} ours: {value:<34} paper: {r['paper']}")
    for note in table.notes:
        print(f"  note: {note}")
    body.append(f"<h2>{html.escape(str(path))} ({table.kind})</h2>{table.html()}")
for path in missing:
    print(f"\n(not found: {path}; see this script's docstring for the command that makes it)")
written = write_html(out / "mechanisms.html", page("interp: which mechanism holds the plateau", "\n".join(body)))
print(f"table: {written}")
