"""Named fork designs: a parent run and the forks made from it (`analyses/forks.py`).

`forks-tiny` is the author's design (docs/forks.md) on a small run, calibrated to
finish on 2 CPU cores with 2 workers within 20 minutes, parent included: fork at tau/2; arms
minibatch, full_batch, measured_noise, isotropic_noise, v_only_noise and reset_optimizer;
3 fork seeds; the realised update power sampled over the first steps. The full-gradient arms
cost about D / batch_size minibatch steps a step, hence the small D.

`forks-relapse-tiny` is the author's own protocol (SPEC 9.2) on the same parent: the parent
trained to solved, an lr fork of its last checkpoint at 5x its lr keeping its states, the
relapse found in that fork's log, and the family at the state kept there (`RelapseStage`,
`interp.forks.staged.build`); the author's arms (v-only with both xi), escape criterion
(first-token loss < 3.0 held 500 steps) and Gamma range (100:500). docs/forks.md, "Relapse".
"""

from __future__ import annotations

from dataclasses import dataclass

from interp.errors import InterpError
from interp.presets import preset
from interp.spec import RunSpec


@dataclass(frozen=True)
class RelapseStage:
    """parent -> `lr` fork of its last checkpoint (kept states) -> its relapse, where the family forks
    (`interp.forks.staged.build`; docs/forks.md, "Relapse")."""

    lr: float  # the lr fork's learning rate
    steps: int  # its horizon
    criterion: str  # the relapse criterion (interp.forks.relapse.parse_relapse)
    settings: tuple[tuple[str, object], ...] = (("save_optimizer", True), ("checkpoint_every", 50),
                                                ("eval_every", 25), ("densify", False), ("early_checkpoints", False),
                                                ("stop_after_snap", None))


@dataclass(frozen=True)
class ForkDesign:
    parent: RunSpec
    at: str
    arms: str
    seeds: tuple[int, ...]
    horizon: int
    gamma_every: int
    gamma_window: int | str  # B, or "A:B" (the per-step Gamma median over steps A..B after the fork)
    settings: tuple[tuple[str, object], ...] = ()  # how the forks are recorded (interp.forks.fork.STORAGE)
    workers: int = 2
    escape: str | None = None  # the escape criterion (interp.forks.escape; None: tau_half)
    relapse: RelapseStage | None = None  # fork a relapsed state of the parent, not the parent (`at` is then "relapse")


FORK_PRESETS: dict[str, ForkDesign] = {
    "forks-tiny": ForkDesign(
        parent=preset("tiny").override(n_bases=100, d_model=64, d_head=16, d_mlp=256, steps=3000,
                                       checkpoint_every=25, early_checkpoints=False, densify=False,
                                       stop_after_snap=100),
        at="tau/2",
        arms="minibatch,full_batch,measured_noise,isotropic_noise,v_only_noise,reset_optimizer",
        seeds=(0, 1, 2),
        horizon=500,
        gamma_every=10,
        gamma_window=100,
        settings=(("eval_every", 5),),  # escapes timed to 5 steps
    ),
}


FORK_PRESETS["forks-relapse-tiny"] = ForkDesign(  # the author's fork experiment (SPEC 9.2) on forks-tiny's parent
    parent=FORK_PRESETS["forks-tiny"].parent,
    at="relapse",
    arms="full_batch,minibatch,measured_noise,isotropic_noise,v_only_noise,v_only_noise:xi=isotropic",
    seeds=(0, 1),
    horizon=1500,  # the clean arm escapes ~75 steps after the fork (calibrated): up to ~13x it is timed
    gamma_every=10,
    gamma_window="100:500",  # the author's per-step median range; the ratio of sums is over the first 500 steps
    # a fork stops 600 steps after it snaps: past its escape (loss_first < 3 comes at or before the snap) + the hold
    settings=(("eval_every", 25), ("checkpoint_every", 500), ("save_optimizer", False), ("stop_after_snap", 600)),
    escape="loss_first<3.0,hold=500",  # the author's: full-vocabulary first-token CE below 3.0, held 500 steps
    # 5x the parent's lr: Lc back to 1.2-1.5 log K 25 steps after the fork, held ~150 steps (at 10x the state
    # never re-solves, at 3x it is below 0.9 log K again 75 steps after the fork); the family forks the kept state
    relapse=RelapseStage(lr=0.015, steps=200, criterion="loss_cand>0.9logK,hold=100"),
)


# issues 46 and 53: the relapse's depth as an axis. The author's state sat relapsed 16,000 steps; AdamW's second
# moment forgets on 1 / (1 - beta2) = 1,000 steps, so the family forks the relapsed state at its relapse and held
# H = 1,000 and 4,000 steps (`--at relapse+H`) under the author's arms, 3 seeds, his held escape. D = 500 (n_bases
# 50): a full gradient costs about 4 minibatch steps. Calibrated with `python analyses/relapse_depth.py --calibrate`
# (docs/forks.md, "The relapse's depth"): at 10x the parent's lr (0.03) the relapse re-solves by itself after 1,425
# steps, at 12.5x (0.0375, the author's own ratio) after 4,550; at 13.3x (0.04) it holds to the end of 6,000 steps
# and the full gradient from relapse+4000 escapes in 800 (the author's ~800); at 15x and 20x it holds too, but the
# full gradient from relapse+4000 does not escape in 1,500 steps (nor at 12.5x). So the relapse is 0.04's, 5,000
# steps (kept states every 100). The horizon, 1,500, is about 2x the clean arm's escape at the deepest step: a longer trap reads
# as a lower bound, all this CPU budget allows.
FORK_PRESETS["forks-relapse-depth-tiny"] = ForkDesign(
    parent=FORK_PRESETS["forks-tiny"].parent.override(n_bases=50),
    at="relapse,relapse+1000,relapse+4000",
    arms="full_batch,minibatch,isotropic_noise,v_only_noise:xi=isotropic",
    seeds=(0, 1, 2),
    horizon=1500,
    gamma_every=10,
    gamma_window="100:500",
    settings=(("eval_every", 25), ("checkpoint_every", 500), ("save_optimizer", False), ("stop_after_snap", 600)),
    escape="loss_first<3.0,hold=500",
    relapse=RelapseStage(lr=0.04, steps=5000, criterion="loss_cand>0.9logK,hold=100",
                         settings=(("save_optimizer", True), ("checkpoint_every", 100), ("eval_every", 25),
                                   ("densify", False), ("early_checkpoints", False), ("stop_after_snap", None))),
)


# issue 51: the author's optimizer branch (eta_sweep/run_optimizer_branch.py: AdamW to step 1,500 of a plateau, then
# a new optimizer with a fresh state) from one plateau state of forks-tiny's parent: the no-branch reference
# (minibatch, AdamW carried), AdamW restarted (reset_optimizer: the branch protocol's own control), and the cells of
# the author's decomposition that torch.optim expresses: AdamW at beta1 = 0 with and without bias correction
# (decoupled weight decay), Adam with L2 weight decay at beta1 = 0, RMSProp (alpha 0.999, L2) and SGD with
# momentum 0.9 at 10x the lr (L2). Five fork seeds: a share of escapes judged over seeds needs five to decide.
FORK_PRESETS["optimizer-branch-tiny"] = ForkDesign(
    parent=FORK_PRESETS["forks-tiny"].parent,
    at="tau/2",
    arms=("minibatch,reset_optimizer,optimizer:name=adamw,beta1=0,optimizer:name=adamw,beta1=0,bias_correction=false,"
          "optimizer:name=adam-l2,beta1=0,optimizer:name=rmsprop,optimizer:name=sgd,momentum=0.9,lr=0.03"),
    seeds=(0, 1, 2, 3, 4),
    horizon=1500,
    gamma_every=0,
    gamma_window=100,
    settings=(("eval_every", 25), ("checkpoint_every", 500), ("save_optimizer", False), ("stop_after_snap", 100)),
)

# issue 51: the reversal transfer (scripts/reversal_experiment.py): a parent trained on az_to_b (A, z -> B) until it
# solves continues on bz_to_a (B, z -> A) over the same strings, its optimizer fresh (the author's) or carried; the
# parent's own direction from scratch is the reference (analyses/variants.py trains it beside).
FORK_PRESETS["reversal-transfer-tiny"] = ForkDesign(
    parent=FORK_PRESETS["forks-tiny"].parent.override(direction="az_to_b"),
    at="last",
    arms="switch_task:direction=bz_to_a,switch_task:direction=bz_to_a,optimizer=carried",
    seeds=(0, 1, 2),
    horizon=3000,
    gamma_every=0,
    gamma_window=100,
    settings=(("eval_every", 25), ("checkpoint_every", 500), ("save_optimizer", False), ("stop_after_snap", 100)),
)


def fork_preset(name: str) -> ForkDesign:
    try:
        return FORK_PRESETS[name]
    except KeyError:
        raise InterpError(f"unknown fork preset {name!r}; available: {', '.join(FORK_PRESETS)}") from None
