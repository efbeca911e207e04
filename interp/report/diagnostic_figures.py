"""The run report's figures of the mechanism diagnostics (docs/diagnostics.md): each takes the
report's context and returns a plotly figure, or raises InterpError (NotComputed for an analysis
that runs only when asked) saying why it cannot be drawn. Each registers its analysis's section
(`interp.report.sections`)."""

from __future__ import annotations

import importlib

from interp.report.sections import section


def _marks(c) -> dict[str, int]:
    """The routing head's carried / used events, as vertical lines."""
    return c.event_steps()


def _over_steps(name: str, title: str, caption: str, plot: str) -> None:
    """Register the section of the analysis `name` whose figure is its table over steps, drawn by
    `plot` ("module:function", imported only when drawn) with tau and the routing head's events."""

    def figure(c):
        module, function = plot.split(":")
        return getattr(importlib.import_module(module), function)(c.need(name), tau=c.tau, onsets=_marks(c))

    section(name, name, title, caption)(figure)


_over_steps(
    "trajectory", "Diagnostics: the weight trajectory",
    "Between consecutive saved checkpoints, per component: the displacement per step, the cosine between consecutive "
    "displacements of the whole parameter vector (direction consistency: near 0 for a random walk, near 1 for a directed "
    "drift) and the weight norms.", "interp.plots.weights:trajectory_curves")


@section("spectra", "spectra", "Diagnostics: head spectra",
         "Per head, the effective rank (exp of the entropy of the normalised singular values) and σ1/σ2 of the OV circuit W_V "
         "W_O and the QK circuit W_Q W_Kᵀ, across checkpoints; the routing head is drawn thick.")
def spectra(c):
    from interp.plots.weights import spectra_curves

    return spectra_curves(c.need("spectra", "spectra"), tau=c.tau, onsets=_marks(c),
                          highlight=c.findings.get("routing_head"))


_over_steps(
    "representations", "Diagnostics: representations at the decision position",
    "Residual stream at the decision position after each layer: the variance within groups (z varies, B fixed), between "
    "groups, and their ratio, over a fixed probe.", "interp.plots.activations:representation_curves")


@section("lens", "lens", "Diagnostics: logit lens",
         "The logits read out from the residual stream after each layer through the final LayerNorm and the unembedding, at "
         "the decision position: the candidate loss over the K first characters of the group (log K dashed) shows which layer "
         "resolves z, and when.")
def lens(c):
    from interp.plots.activations import lens_curves

    return lens_curves(c.need("lens"), c.run.log_k, tau=c.tau, onsets=_marks(c))


_over_steps(
    "gradients", "Diagnostics: gradient signal and noise",
    "The full-training-set gradient norm against the minibatch noise at the training batch size, their ratio, n x the "
    "per-example coherence (1 for orthogonal gradients), the selector gradient SNR x sqrt(n groups) (about 1 when group "
    "gradients cancel) and, when computed, the minibatch noise variance along the Hessian's extreme directions and random "
    "ones.", "interp.plots.gradients:gradient_curves")


@section("updates", "updates", "Diagnostics: drift against diffusion in one step",
         "From the optimizer-complete state at τ/4, τ and 2τ: the mean one-step AdamW update along the clean full-batch "
         "update's direction (μ∥, with its spread over minibatches) against the transverse spread √V⊥.")
def updates(c):
    from interp.plots.updates import update_bars

    return update_bars(c.need("updates"), tau=c.tau)
