"""The run report's figure functions: each takes the report's context and returns a plotly
figure, or raises InterpError saying why it cannot be drawn.

Each registers its section (`interp.report.sections`: analysis, key, title, caption): first the
report's own (`RUN`: the timeline and the metrics log), drawn before the analyses, in this order.
"""

from __future__ import annotations

from interp import plots
from interp.analysis.common import segment_names
from interp.errors import InterpError
from interp.report.sections import RUN, section


# ---------------------------------------------------------------------------- the run's own
@section(RUN, "timeline", "Circuit-formation timeline",
         "Losses, shuffle gaps, per-head z-share and the routing head's usage on one step axis. Dashed vertical lines: each "
         "head's onset (first checkpoint at 20% of its own rise, held for 2 checkpoints; the routing head in red); green "
         "dash-dot: when the routing head starts carrying z (attention to z, z-share); purple: when z is used "
         "(resample-ablating the head costs > 0.1 nats of candidate loss; patching it restores > 20% of the logit difference); "
         "dotted black line: τ. A positive lead means the routing head forms while the loss still sits near log K. The paper's "
         "50% lead is another one, the shuffle gap's: (t_loss − t(dz > 0.1 nats)) / t_loss, in the summary above (\"gap "
         "lead\"); a head's attention to z starts far earlier than dz moves (the author, at K = 20: step 500 against 2,750, "
         "the loss at 8,700), as the carried events here do.")
def timeline(c):
    if c.timeline is None:
        raise InterpError(c.timeline_problem)
    return plots.timeline_figure(c.timeline)


@section(RUN, "loss", "Losses",
         "Full loss (a1..a4 and EOS), first-token loss and candidate loss (over the K candidates of the group), in nats. The "
         "candidate loss first drops to log K (z ignored: the K candidates of a group score alike), waits on the plateau, then "
         "snaps to 0 once z is used. The first-token loss shows whether the marginal over the K first characters was learned "
         "(it would sit at log K too).")
def losses(c):
    return plots.loss_curves(c.need_metrics(), c.run.log_k, c.tau)


@section(RUN, "shuffle", "Shuffle gaps",
         "Loss with z replaced by another selector of the group, minus the clean loss: on the first token and on the full "
         "target (a1..a4 and EOS, which also sees z read at the later positions). ~0 while the model ignores z, large once it "
         "depends on it.")
def shuffle_gaps(c):
    return plots.shuffle_gap(c.need_metrics(), c.tau)


@section(RUN, "dissipation", "Dissipation and the minibatch gradient",
         "Q(t) = Σ_{s ≤ t} lr_s ‖g_B,s‖², the sum of lr times the squared minibatch gradient norm over every step (logged at "
         "every step, read at the evaluations), and the minibatch gradient norm at each evaluation.")
def dissipation(c):
    from interp.plots.updates import dissipation_curve

    metrics = c.need_metrics()
    imported = c.run.imported
    if "dissipation" not in metrics.columns and imported is not None:
        raise InterpError(f"not recorded: this run was imported ({imported.get('format')}), and the dissipation needs "
                          f"the gradient norm of every training step, which only interp's training logs")
    if "dissipation" not in metrics.columns:
        raise InterpError("this run was trained before interp logged the gradient norm at every step "
                          "(metrics.jsonl has no dissipation column); retrain it to see the dissipation")
    return dissipation_curve(metrics, tau=c.tau)


# ---------------------------------------------------------------------------- analyses
def _onsets(c):
    return c.timeline.onsets if c.timeline is not None else None


@section("sensitivity", "sensitivity", "Head z-sensitivity",
         "Share of each head's output variance at the decision position explained by z (within-group variance over total), at "
         "every checkpoint; diamonds mark onsets.")
def z_share(c):
    return plots.sensitivity_heatmap(c.need("sensitivity"), "z_share", c.tau, _onsets(c), c.findings.get("routing_head"))


@section("sensitivity", "attn_to_z", "Head attention to z",
         "Attention mass from the decision position to the z positions, per head and checkpoint.")
def attn_to_z(c):
    return plots.sensitivity_heatmap(c.need("sensitivity"), "attn_to_z", c.tau, _onsets(c),
                                     c.findings.get("routing_head"))


@section("attention", "segments", "Attention by segment",
         "Where each head's decision-position attention goes (mass per segment of the input), across checkpoints.")
def attention_segments(c):
    return plots.attention_segments(c.need("attention_segments", "attention"), c.tau)


@section("attention", "attention", "Attention-pattern evolution",
         "Mean attention pattern of each head (query x key; positions labelled with their segment), averaged over a fixed "
         "probe; it opens at the checkpoint nearest τ: drag the slider or press play to move through the checkpoints.")
def attention_evolution(c):
    patterns = c.need("attention")
    steps = sorted(int(s) for s in patterns["step"].unique())
    first = min(steps, key=lambda s: (abs(s - c.tau), s)) if c.tau else steps[0]  # open on the step nearest tau
    return plots.attention_evolution(patterns, labels=segment_names(c.run.layout), step=first)


@section("ablation", "ablation", "Head ablation before, at and after τ",
         "Change in candidate loss (nats) when one head's output is zero-ablated at every position, at τ/4, τ and 2τ (snapped "
         "to saved checkpoints; where 2τ lies beyond the run, its last step instead, labelled last). A routing head costs little "
         "before the transition and a lot after. Mean and resample ablation are in the same table (`interp analyze --only "
         "ablation --json`).")
def ablation(c):
    notes = [n for n in c.notes if n.split(" ")[0] in ("pre", "mid", "post")]  # steps beyond the run
    return plots.ablation_heatmaps(c.need("ablation"), "delta_loss_cand", notes=notes)


@section("patching", "patching", "Activation patching at τ",
         "Clean (B, z1) activations patched into the corrupted run (B, z2), measured by the logit difference a1(A1) − a1(A2) "
         "at the decision position: residual stream per layer and position, heads per position and at all positions.")
def patching(c):
    return plots.patching_heatmaps(c.need("patching_residual", "patching"), c.need("patching_heads", "patching"))


@section("groups", "group_hist", "Per-group accuracy at fractions of τ",
         "Histogram of each group's candidate accuracy (over its K examples) at the checkpoints nearest to fractions of τ "
         "(fractions that land on one checkpoint share its panel; those beyond the run are named, not drawn); the dashed line "
         "is the 80% threshold. A collective snap moves all groups together.")
def group_histograms(c):
    """Fractions of τ past the groups' steps are named with the run's last step as the summary calls it."""
    metrics = c.run.metrics
    evaluated = int(metrics["step"].max()) if not metrics.empty else None
    return plots.group_histograms(c.need("groups"), c.need_tau(), last_step=c.run.steps[-1], last_evaluated=evaluated)


@section("groups", "group_share", "Share of groups ≥ 80% accurate",
         "Share of probe groups whose candidate accuracy is at least 80%, at every analysed checkpoint.")
def groups_share(c):
    return plots.groups_share(c.need("groups"), c.tau)


@section("usage", "usage", "When the routing head's z is used",
         "At every checkpoint: the candidate-loss cost of resample-ablating the routing head (its hook_z taken from the same "
         "input with another selector of the group) and the share of the logit difference that patching its clean output "
         "restores (undefined on the plateau, where clean and corrupted runs agree). Vertical lines: when z is carried and "
         "when it is used.")
def usage(c):
    return plots.usage_curves(c.need("usage"), c.tau, c.timeline.events if c.timeline is not None else None)


@section("hessian", "hessian", "Geometry: Hessian extremes",
         "The largest and smallest eigenvalues of the training loss's Hessian (Lanczos, on a fixed sample), with τ and the "
         "routing head's onsets marked. A negative smallest eigenvalue on the plateau is a saddle.")
def hessian_extremes(c):
    return plots.eigenvalue_curves(c.need("hessian"), tau=c.tau, onsets=c.event_steps())


@section("hessian", "anisotropy", "Geometry: anisotropy",
         "λ_max / |λ_min|: how much flatter the escape direction is than the dominant curvature.")
def anisotropy(c):
    return plots.anisotropy_curve(c.need("hessian"), tau=c.tau, onsets=c.event_steps())


@section("hessian", "escape", "Geometry: where the escape direction lives",
         "Share of the bottom eigenvector's squared mass in each component (heads' slices, MLPs, embeddings).")
def escape(c):
    return plots.escape_heatmap(c.need("hessian_escape", "hessian"), tau=c.tau, highlight=c.findings.get("routing_head"))


@section("llc", "llc", "Geometry: local learning coefficient",
         "LLC of the whole model and refined per head (devinterp SGLD), across checkpoints.")
def llc(c):
    return plots.llc_curves(c.need("llc"), tau=c.tau, onsets=c.event_steps(), highlight=c.findings.get("routing_head"))
