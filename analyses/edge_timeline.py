"""Finding: which edges form first, against tau, and the circuit at tau.

Every edge of the model (embeddings, heads and MLPs into later heads' q/k/v, later MLPs and the logits) gets an
attribution score at every checkpoint (EAP-IG by default, on the patching analysis's pairs and metric); its carried
onset is the rise onset of |score| (the heads' rule), its used onset the first checkpoint from which it is in the
circuit (the smallest top-scored edge set keeping 80% of the logit difference). We print the first 10 edges by
onset among those that are in the circuit at some step, with their lead (tau - onset) / tau, whether the first
of them leaves the routing head, and the circuit at tau.

    python analyses/edge_timeline.py [RUN] [--out DIR]
"""

from _common import parse, row

from interp.analysis.suite import run_suite

run, out = parse(__doc__.splitlines()[0])
result = run_suite(run, only="sensitivity,edges", progress=True)  # through the suite's cache
for line in result.problems:
    print(f"  problem: {line}")
f = result.findings
t = f.get("tau")
onsets = result.tables["edges_onsets"]
print(f"{run.path}: edges by onset ({f['edges_method']}), tau = {t}, routing head {f.get('routing_head')} "
      f"(z-share onset {f.get('carried_share_onset')})")
circuit = onsets[onsets["ever_in_circuit"]]  # edges that enter the circuit at some step; the others carry little
print(f"  the first 10 of the {len(circuit)} edges that are in the circuit at some step ({len(onsets)} edges in all)")
print(f"  {'edge':<18} {'carried onset':>13} {'lead':>6} {'used onset':>11} {'|score| last':>13}")
for r in circuit.head(10).itertuples():
    onset = None if str(r.carried_onset) == "<NA>" else int(r.carried_onset)
    lead = "-" if onset is None or not t else f"{(t - onset) / t:.2f}"
    used = "never" if str(r.used_onset) == "<NA>" else str(r.used_onset)
    print(f"  {r.edge:<18} {onset if onset is not None else 'never':>13} {lead:>6} {used:>11} {r.last_abs_score:>13.3f}")
if "edges_routing_first" in f:
    print(row("the routing head's edge forms first", "yes" if f["edges_routing_first"] else "no", "(no paper value)"))
if "edges_tau_step" in f:
    size, faith = f["edges_tau_size"], f["edges_tau_faithfulness"]
    total = int(result.tables["edges_circuit"]["n_edges_total"].max())
    print(row(f"circuit at step {f['edges_tau_step']} (nearest tau)",
              f"{size if size is not None else '-'} of {total} edges, faithfulness "
              f"{'-' if faith is None else f'{faith:.2f}'}", "(no paper value)"))
circuits = result.tables["edges_circuit"]
print("  circuit size by step: " + ", ".join(f"{int(r.step)}: {'-' if r.size != r.size else int(r.size)}"
                                             for r in circuits.itertuples()))
from interp.plots.edges import edge_raster  # noqa: E402

marks = {"z-share onset": f.get("carried_share_onset")}
path = out / "edge_timeline.html"
edge_raster(result.tables["edges"], onsets, circuits, tau=t, marks=marks).write_html(path, include_plotlyjs=True)
print(f"figure: {path}")
