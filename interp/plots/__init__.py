"""Every figure of interp: the only package that imports plotly.

Each function maps tidy tables (analysis results, a run's metrics, a sweep's table) to a
`plotly.graph_objects.Figure` and computes nothing heavier than a pivot, so figures are
redrawn from cached tables in milliseconds. Conventions shared by all figures: steps are
optimizer steps on a real (unevenly sampled) step axis, losses are in nats, heads are named
`L{layer}H{head}` with L0H0 first, log K is a dashed horizontal line on loss plots and tau
a dotted vertical line wherever time is on the x axis.

    interp.plots.run       figures of one run (losses, heatmaps, attention, ablation, patching, groups)
    interp.plots.timeline  the circuit-formation timeline (`timeline_figure(tl)`) and the usage curves
    interp.plots.sweep     figures of a sweep (scaling law, fixed D, noise, asymmetry, overlays)
    interp.plots.circuits  the circuits across a sweep (lead share, routing heads, timeline grid)
    interp.plots.geometry  loss-landscape geometry (Hessian extremes, escape direction, LLC)
    interp.plots.weights   the weight trajectory and the heads' OV / QK spectra
    interp.plots.activations  representations at the decision position and the logit lens
    interp.plots.gradients the gradient signal, noise, coherence and selector SNR
    interp.plots.updates   drift against diffusion in one step, and the dissipation log
    interp.plots.inline    figures inline in a notebook, offline (plotly.js embedded once)

Imported inside a Jupyter kernel, this package makes `interp.plots.inline`'s renderer plotly's
default, so figures show with no network; outside a kernel plotly's settings are left alone.
"""

from interp.plots.run import (
    ablation_heatmaps,
    attention_evolution,
    attention_segments,
    group_histograms,
    groups_share,
    loss_curves,
    patching_heatmaps,
    sensitivity_heatmap,
    shuffle_gap,
    table_over_steps,
)
from interp.plots.timeline import timeline_figure, usage_curves
from interp.plots.geometry import anisotropy_curve, eigenvalue_curves, escape_heatmap, llc_curves
from interp.plots.weights import spectra_curves, trajectory_curves
from interp.plots.activations import lens_curves, representation_curves
from interp.plots.gradients import gradient_curves
from interp.plots.updates import dissipation_curve, update_bars
from interp.plots import inline
from interp.plots.circuits import k_trend_figure, routing_bars, timeline_grid
from interp.plots.sweep import (
    asymmetry_bars,
    candidate_loss_overlay,
    tau_vs_d,
    tau_vs_k_fixed_d,
    tau_vs_noise,
)

__all__ = [
    "ablation_heatmaps",
    "attention_evolution",
    "attention_segments",
    "group_histograms",
    "groups_share",
    "loss_curves",
    "patching_heatmaps",
    "sensitivity_heatmap",
    "shuffle_gap",
    "table_over_steps",
    "timeline_figure",
    "usage_curves",
    "anisotropy_curve",
    "eigenvalue_curves",
    "escape_heatmap",
    "llc_curves",
    "spectra_curves",
    "trajectory_curves",
    "lens_curves",
    "representation_curves",
    "gradient_curves",
    "dissipation_curve",
    "update_bars",
    "asymmetry_bars",
    "candidate_loss_overlay",
    "tau_vs_d",
    "tau_vs_k_fixed_d",
    "tau_vs_noise",
    "k_trend_figure",
    "routing_bars",
    "timeline_grid",
]

if inline.in_kernel():  # outside a kernel plotly's settings are left alone (and IPython is not imported)
    inline.install()

