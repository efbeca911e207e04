"""The run report's section of the `edges` analysis (docs/edges.md): the edge-onset raster and the circuit's size,
computed only when asked (`interp analyze RUN --only edges`); read from the cache like the other such analyses."""

from __future__ import annotations

from interp.report.sections import section


@section("edges", "edges", "Circuits by edges: the edge-onset raster",
         "Every edge (embeddings, heads and MLPs into later heads' q/k/v, later MLPs and the logits) scored at every "
         "checkpoint by edge attribution patching; rows: the first edges by onset (the rise onset of |score|), coloured "
         "by |score| as a share of the edge's largest; below, the smallest top-scored edge set keeping the target share "
         "of the logit difference. τ dotted, the routing head's events dashed.")
def edges(c):
    from interp.analysis.edges import circuits, onsets
    from interp.plots.edges import edge_raster

    table = c.need("edges")
    curve = c.tables.get("edges_curve")
    return edge_raster(table, onsets(table), circuits(curve) if curve is not None and not curve.empty else None,
                       tau=c.tau, marks=c.event_steps())


@section("edges", "edges_graph", "Circuits by edges: the circuit at chosen steps",
         "The circuit (the smallest top-scored edge set keeping the target share of the logit difference) at τ/4, τ, the "
         "snap and the last step: components by layer, each edge coloured by what it feeds and as wide as its |score|.")
def edges_graph(c):
    from interp.analysis.edges import chosen_steps
    from interp.plots.edges import circuit_graph
    from interp.transition import facts

    table = c.need("edges")  # one panel per step, its labels joined
    return circuit_graph(table, chosen_steps(table["step"], c.tau, facts(c.run).snap_step if c.tau else None))
