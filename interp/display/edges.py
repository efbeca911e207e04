"""The edges analysis in a notebook (`interp.analysis.edges.view(run)`, an EdgeCircuits): the circuit at the chosen
steps (tau/4, tau, the snap, the last: its size, faithfulness and top edges), the first edges by onset, and the
edge-onset raster (`interp.plots.edges`), drawn offline. Plotting is imported only when one is shown."""

from __future__ import annotations

import math

import pandas as pd

from interp.display.html import card, frame_table
from interp.presentable import renders

TOP_EDGES = 5  # of each chosen step's circuit, by rank
FIRST_EDGES = 10  # by carried onset, as the findings list them


def circuit_rows(ec) -> pd.DataFrame:
    """One row per chosen step: its label, step, the circuit's size (of all edges), faithfulness and top edges."""
    rows = []
    for label, step in ec.steps.items():
        hit = ec.circuits[ec.circuits["step"] == step] if not ec.circuits.empty else ec.circuits
        size = float(hit["size"].iloc[0]) if len(hit) else math.nan
        faith = float(hit["faithfulness"].iloc[0]) if len(hit) else math.nan
        total = int(hit["n_edges_total"].iloc[0]) if len(hit) else ec.edges["edge"].nunique()
        top = ec.at(step).head(TOP_EDGES)
        rows.append({"at": label, "step": int(step),
                     "circuit": "undefined" if math.isnan(size) else f"{int(size)} of {total} edges",
                     "faithfulness": "-" if math.isnan(faith) else f"{faith:.2f}",
                     "top edges (score, nats)": ", ".join(f"{r.edge} ({r.score:+.3g})" for r in top.itertuples()) or "-"})
    return pd.DataFrame(rows)


@renders("interp.analysis.edges:EdgeCircuits")
def edge_circuits_html(ec) -> str:
    """A card: the method and steps, the circuit at the chosen steps, the first edges by onset, the raster."""
    from interp.analysis.edges import first_edges
    from interp.plots.edges import edge_raster
    from interp.plots.inline import figure_html

    edges = ec.edges
    row0 = edges.iloc[0]
    rows = [("method", f"{row0['method']}" + (f" ({int(row0['ig_steps'])} steps)" if row0["method"] == "eap-ig" else "")
             + f", {int(row0['n_pairs'])} pairs"),
            ("steps", f"{edges['step'].nunique()} ({int(edges['step'].min())} to {int(edges['step'].max())}), "
                      f"{edges['edge'].nunique()} edges each"),
            ("tau", str(ec.tau) if ec.tau is not None else "n/a (the candidate loss never falls below 0.5 log K)")]
    first = first_edges(ec.onsets, FIRST_EDGES)[["edge", "carried_onset", "used_onset"]].astype(object)
    first = first.where(first.notna(), "never")
    body = ("<p><b>The circuit at the chosen steps</b> (the smallest top-|score| edge set keeping the faithfulness "
            "target)</p>" + frame_table(circuit_rows(ec), max_rows=len(ec.steps))
            + "<p><b>The first edges by onset</b> (carried: the rise of |score|; used: in the circuit)</p>"
            + frame_table(first, max_rows=FIRST_EDGES)
            + figure_html(edge_raster(edges, ec.onsets, ec.circuits if not ec.circuits.empty else None, tau=ec.tau)))
    return card(f"Edges of {ec.name}", rows, body, notes=list(ec.notes))
