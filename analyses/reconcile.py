"""Finding: which of the author's claims hold on our runs, and where they differ, is it a definition or a setting?

The paper and its author publish numbers for a dozen claims (tau ~ D^1.19, a flat fixed-D control, noise
lengthening the plateau, a 0.52 lead rising with K as K^2.13, a routing head's early attention, a collective
snap, a saddle with anisotropy 500-1000, noise twice the signal, direction consistency 0.04-0.22 on the
plateau, and the fork results: full batch re-solves, noise traps, v-only 5.75x, Gamma ~1 / ~2). Several of
our numbers disagree. Here: one reconciliation table over every path given, each claim with the author's
number and its source, ours under the author's definition where it can be computed, ours under ours with its
interval, the setting differences, and the verdict of the rules fixed in interp/mechanisms/reconcile_rules.py
(docs/reconciliation.md).

    python analyses/reconcile.py [PATH ...] [--cached] [--out DIR]

PATH: runs, sweeps or fork families, pooled into one table (default: the demo, the tiny sweeps and the
forks-tiny family where they exist). Make a sweep with `interp sweep --preset NAME --out sweeps/NAME
--workers 2` (the lead rows: `--preset landauer-dense-tiny`) and the family with `python analyses/forks.py
forks/forks-tiny`.
"""

import html

from _common import parse_paths

from interp.mechanisms.reconcile import reconcile
from interp.report.page import page, write_html

DEFAULTS = ("checkpoints/demo", "sweeps/scaling-tiny", "sweeps/fixed-d-tiny", "sweeps/noise-tiny",
            "sweeps/asymmetry-tiny", "sweeps/cancellation-tiny", "sweeps/landauer-dense-tiny",
            "forks/forks-tiny/family")

paths, missing, cached, out = parse_paths(__doc__.splitlines()[0], DEFAULTS)
table = reconcile(paths, compute=not cached)
counts: dict[str, int] = {}
for r in table.rows:
    counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    ours = "—" if r["value"] != r["value"] else f"{r['value']:.3g}" + (
        f" [{r['low']:.3g}, {r['high']:.3g}]" if r["low"] == r["low"] else "")
    where = f" on {r['measured_on']}" if r["measured_on"] else ""
    print(f"\n{r['claim']}{where}: {r['verdict'].upper()}")
    print(f"  author: {r['author']} ({r['source']})")
    print(f"  ours: {ours} ({r['n_runs']} runs); under the author's definition: {r['author_def']}")
    if r["setting"]:
        print(f"  setting: {r['setting']}")
    print(f"  {r['why']}")
for note in table.notes:
    print(f"note: {note}")
print("\n" + ", ".join(f"{n} {v}" for v, n in counts.items()))
for path in missing:
    print(f"(not found: {path}; see this script's docstring for the command that makes it)")
body = f"<h1>The author's claims beside ours</h1><p>{html.escape(', '.join(map(str, paths)))}</p>{table.html()}"
written = write_html(out / "reconcile.html", page("interp: the author's claims beside ours", body))
print(f"table: {written}")
