"""Every figure of interp: the only package that imports plotly.

Each function maps tidy tables (analysis results, a run's metrics, a sweep's table) to a
`plotly.graph_objects.Figure` and computes nothing heavier than a pivot, so figures are
redrawn from cached tables in milliseconds. Conventions shared by all figures: steps are
optimizer steps on a real (unevenly sampled) step axis, losses are in nats, heads are named
`L{layer}H{head}` with L0H0 first, log K is a dashed horizontal line on loss plots and tau
a dotted vertical line wherever time is on the x axis.

    interp.plots.run       figures of one run (losses, heatmaps, patching, groups, timeline)
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
    timeline_figure,
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
    "timeline_figure",
]
