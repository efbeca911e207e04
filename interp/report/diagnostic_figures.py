"""The run report's figures of the mechanism diagnostics (docs/diagnostics.md): each takes the
report's context and returns a plotly figure, or raises InterpError (NotComputed for an analysis
that runs only when asked) saying why it cannot be drawn. The registry names them
(`ReportSection.figure`)."""

from __future__ import annotations

from interp.errors import InterpError


def _marks(c) -> dict[str, int]:
    """The routing head's carried / used events, as vertical lines."""
    return c.event_steps()


def trajectory(c):
    from interp.plots.weights import trajectory_curves

    return trajectory_curves(c.need("trajectory"), tau=c.tau, onsets=_marks(c))


def spectra(c):
    from interp.plots.weights import spectra_curves

    return spectra_curves(c.need("spectra", "spectra"), tau=c.tau, onsets=_marks(c),
                          highlight=c.findings.get("routing_head"))


def representations(c):
    from interp.plots.activations import representation_curves

    return representation_curves(c.need("representations"), tau=c.tau, onsets=_marks(c))


def lens(c):
    from interp.plots.activations import lens_curves

    return lens_curves(c.need("lens"), c.run.log_k, tau=c.tau, onsets=_marks(c))


def gradients(c):
    from interp.plots.gradients import gradient_curves

    return gradient_curves(c.need("gradients"), tau=c.tau, onsets=_marks(c))


def updates(c):
    from interp.plots.updates import update_bars

    return update_bars(c.need("updates"), tau=c.tau)


def dissipation(c):
    from interp.plots.updates import dissipation_curve

    metrics = c.need_metrics()
    if "dissipation" not in metrics.columns:
        raise InterpError("this run was trained before interp logged the gradient norm at every step "
                          "(metrics.jsonl has no dissipation column); retrain it to see the dissipation")
    return dissipation_curve(metrics, tau=c.tau)
