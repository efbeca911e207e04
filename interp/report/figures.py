"""The run report's figure functions: each takes the report's context and returns a plotly
figure, or raises InterpError saying why it cannot be drawn.

The registry names the ones of each analysis (`ReportSection.figure`); `RUN_SECTIONS` are
the report's own (the metrics log and the timeline), drawn before the analyses.
"""

from __future__ import annotations

from interp import plots
from interp.analysis.common import segment_names
from interp.analysis.registry import ReportSection
from interp.errors import InterpError

_M = "interp.report.figures:"

RUN_SECTIONS = (
    ReportSection(
        "timeline", "Circuit-formation timeline",
        "Losses, shuffle gaps, per-head z-share and the routing head's usage on one step axis. Dashed vertical lines: "
        "each head's onset (first checkpoint at 20% of its own rise, held for 2 checkpoints; the routing head in "
        "red); green dash-dot: when the routing head starts carrying z (attention to z, z-share); purple: when z is "
        "used (resample-ablating the head costs > 0.1 nats of candidate loss; patching it restores > 20% of the "
        "logit difference); dotted black line: τ. A positive lead means the routing head forms while the loss "
        "still sits near log K. The paper's 50% lead is another one, the shuffle gap's: (t_loss − t(dz > 0.1 "
        "nats)) / t_loss, in the summary above (\"gap lead\"); a head's attention to z starts far earlier than dz "
        "moves (the author, at K = 20: step 500 against 2,750, the loss at 8,700), as the carried events here "
        "do.", _M + "timeline"),
    ReportSection(
        "loss", "Losses",
        "Full loss (a1..a4 and EOS), first-token loss and candidate loss (over the K candidates of the group), in "
        "nats. The candidate loss first drops to log K (z ignored: the K candidates of a group score alike), waits "
        "on the plateau, then snaps to 0 once z is used. The first-token loss shows whether the marginal over the K "
        "first characters was learned (it would sit at log K too).", _M + "losses"),
    ReportSection(
        "shuffle", "Shuffle gaps",
        "Loss with z replaced by another selector of the group, minus the clean loss: on the first token and on the "
        "full target (a1..a4 and EOS, which also sees z read at the later positions). ~0 while the model ignores z, "
        "large once it depends on it.", _M + "shuffle_gaps"),
    ReportSection(
        "dissipation", "Dissipation and the minibatch gradient",
        "Q(t) = Σ_{s ≤ t} lr_s ‖g_B,s‖², the sum of lr times the squared minibatch gradient norm over every step "
        "(logged at every step, read at the evaluations), and the minibatch gradient norm at each evaluation.",
        "interp.report.diagnostic_figures:dissipation"),
)


# ---------------------------------------------------------------------------- the run's own
def timeline(c):
    if c.timeline is None:
        raise InterpError(c.timeline_problem)
    return plots.timeline_figure(c.timeline)


def losses(c):
    return plots.loss_curves(c.need_metrics(), c.run.log_k, c.tau)


def shuffle_gaps(c):
    return plots.shuffle_gap(c.need_metrics(), c.tau)


# ---------------------------------------------------------------------------- analyses
def _onsets(c):
    return c.timeline.onsets if c.timeline is not None else None


def z_share(c):
    return plots.sensitivity_heatmap(c.need("sensitivity"), "z_share", c.tau, _onsets(c), c.findings.get("routing_head"))


def attn_to_z(c):
    return plots.sensitivity_heatmap(c.need("sensitivity"), "attn_to_z", c.tau, _onsets(c),
                                     c.findings.get("routing_head"))


def attention_segments(c):
    return plots.attention_segments(c.need("attention_segments", "attention"), c.tau)


def attention_evolution(c):
    patterns = c.need("attention")
    steps = sorted(int(s) for s in patterns["step"].unique())
    first = min(steps, key=lambda s: (abs(s - c.tau), s)) if c.tau else steps[0]  # open on the step nearest tau
    return plots.attention_evolution(patterns, labels=segment_names(c.run.task), step=first)


def ablation(c):
    notes = [n for n in c.notes if n.split(" ")[0] in ("pre", "mid", "post")]  # steps beyond the run
    return plots.ablation_heatmaps(c.need("ablation"), "delta_loss_cand", notes=notes)


def patching(c):
    return plots.patching_heatmaps(c.need("patching_residual", "patching"), c.need("patching_heads", "patching"))


def group_histograms(c):
    """Fractions of τ past the groups' steps are named with the run's last step as the summary calls it."""
    metrics = c.run.metrics
    evaluated = int(metrics["step"].max()) if not metrics.empty else None
    return plots.group_histograms(c.need("groups"), c.need_tau(), last_step=c.run.steps[-1], last_evaluated=evaluated)


def groups_share(c):
    return plots.groups_share(c.need("groups"), c.tau)


def usage(c):
    return plots.usage_curves(c.need("usage"), c.tau, c.timeline.events if c.timeline is not None else None)


def hessian_extremes(c):
    return plots.eigenvalue_curves(c.need("hessian"), tau=c.tau, onsets=c.event_steps())


def anisotropy(c):
    return plots.anisotropy_curve(c.need("hessian"), tau=c.tau, onsets=c.event_steps())


def escape(c):
    return plots.escape_heatmap(c.need("hessian_escape", "hessian"), tau=c.tau, highlight=c.findings.get("routing_head"))


def llc(c):
    return plots.llc_curves(c.need("llc"), tau=c.tau, onsets=c.event_steps(), highlight=c.findings.get("routing_head"))
