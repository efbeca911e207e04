"""Named sweeps: the paper's families of runs, and small ones calibrated for 2 CPU cores.

The `-tiny` sweeps finish on this project's 2-core CPU with 2 workers in at most 30 minutes
each (`landauer-dense-tiny`, the author's lead family, is sized for under about 90; measured in
docs/reconciliation.md); the `paper-` sweeps and `landauer-dense` are the paper's and the author's own
designs, for a GPU or a cluster. Their wall times and expected compute are in docs/scaling.md.
"""

from __future__ import annotations

from dataclasses import replace

from interp.presets import preset
from interp.spec import RunSpec
from interp.sweeps.sweep import SweepSpec


def _train(spec: RunSpec, **values) -> RunSpec:
    return replace(spec, train=replace(spec.train, **values))


_PAPER = preset("paper")
# the paper's runs stop once the plateau is over: no need for its full 10,000 steps each. They
# train compiled: on this CPU a compiled paper step takes 70 ms against 104-129 ms eager, so the
# compile (30 s the first time) pays back after about 500 of a run's thousands of steps; the
# tiny sweeps stay eager (37 against 46 ms a step: 13 s of compile is most of a short run's gain)
_PAPER_SWEEP = _train(_PAPER, steps=50_000, stop_after_snap=500, checkpoint_every=1000, early_checkpoints=False,
                      compile=True)

# the tiny preset, evaluated every 25 steps, with few checkpoints (the fits read the metrics log)
_TINY = _train(preset("tiny"), steps=4000, checkpoint_every=500, early_checkpoints=False, densify=False)

def _task(spec: RunSpec, **values) -> RunSpec:
    return replace(spec, task=replace(spec.task, **values))


SWEEP_PRESETS: dict[str, SweepSpec] = {
    # K = 3..13 at n_bases = 200: D = 600..2600 (4.3x), three seeds per D
    "scaling-tiny": SweepSpec(base=_task(_TINY, n_bases=200),
                              grid=(("task.k", (3, 5, 7, 10, 13)), ("seed", (0, 1, 2))), name="scaling-tiny"),
    # D = 1800 with K = 3..20 (n_bases = 600..90)
    "fixed-d-tiny": SweepSpec(base=_TINY, grid=(("task.k", (3, 5, 10, 20)), ("seed", (0, 1))), fixed_d=1800,
                              name="fixed-d-tiny"),
    # K = 10 at n_bases = 150 (D = 1500): learning rate at batch 128, and batch size at lr 3e-3
    "noise-tiny": SweepSpec(base=_task(_TINY, n_bases=150), grid=(("seed", (0, 1)),),
                            points=tuple({"train.lr": lr, "train.batch_size": 128} for lr in (1e-3, 2e-3, 3e-3, 6e-3))
                            + tuple({"train.lr": 3e-3, "train.batch_size": b} for b in (64, 256)),
                            name="noise-tiny"),
    # K = 5 at n_bases = 200 (D = 1000), the same mapping in both directions: steps to exact
    # match >= 0.99
    "asymmetry-tiny": SweepSpec(base=_task(_train(_TINY, steps=5000, stop_after_snap=None, stop_after_exact=50),
                                           k=5, n_bases=200),
                                grid=(("task.direction", ("bz_to_a", "a_to_b")), ("seed", (0, 1, 2))),
                                name="asymmetry-tiny"),
    # the selector-sharing control of gradient cancellation (docs/scaling.md): K = 10 at n_bases = 200
    # (D = 2000), each selector set shared by G = 1 (z private to its base) .. 200 (the paper's task)
    # bases; len_z = 3, since G = 1 needs 200 * 10 distinct selectors (36^2 = 1296 would not hold them).
    # Measured: a run lasts 96-117 s here at either extreme (tau_half 350-475, stopped 100 steps after
    # the snap), so the 18 runs take about 16 minutes with 2 workers
    "cancellation-tiny": SweepSpec(base=_task(_TINY, n_bases=200, len_z=3),
                                   grid=(("task.selector_groups", (1, 4, 10, 25, 50, 200)), ("seed", (0, 1, 2))),
                                   name="cancellation-tiny"),
    # the author's lead family, a CPU-sized analog of landauer-dense (docs/scaling.md, "The lead under
    # both definitions"): the tiny model at n_bases = 200 (D = 600..2600), K = 3..13, three seeds; the
    # author's t_loss (first-token loss < 0.9 log K) comes after tau_half, so runs stop 300 steps after
    # the snap; K = 3 and 5 are evaluated every 10 steps (their tau_half is a few hundred steps)
    "landauer-dense-tiny": SweepSpec(base=_task(_train(_TINY, stop_after_snap=300), n_bases=200),
                                     grid=(("seed", (0, 1, 2)),),
                                     points=tuple({"task.k": k, "train.eval_every": 10 if k <= 5 else 25}
                                                  for k in (3, 5, 7, 10, 13)),
                                     name="landauer-dense-tiny"),
    # issue 46: the lead family made wider and denser: K = 3..20 at n_bases = 200 (D = 600..4000), six seeds; the
    # same per-K settings as landauer-dense-tiny (whose 15 runs are its K <= 13, seeds 0-2 runs), at most 6000
    # steps (K = 20's snap comes near step 2,900 with 300 more steps for the author's t_loss)
    "landauer-dense-wide-tiny": SweepSpec(base=_task(_train(_TINY, stop_after_snap=300, steps=6000), n_bases=200),
                                          grid=(("seed", (0, 1, 2, 3, 4, 5)),),
                                          points=tuple({"task.k": k, "train.eval_every": 10 if k <= 5 else 25}
                                                       for k in (3, 5, 7, 10, 13, 17, 20)),
                                          name="landauer-dense-wide-tiny"),
    # --- the author's program beyond the paper (issue 51; docs/variants.md), each at n_bases = 200 on the tiny model
    # K = 1 (nothing to disambiguate) beside K = 10: steps to exact match against tau; runs stop 50 steps after
    # exact match >= 0.99
    "k1-control-tiny": SweepSpec(base=_task(_train(_TINY, stop_after_snap=None, stop_after_exact=50), n_bases=200),
                                 grid=(("task.k", (1, 10)), ("seed", (0, 1, 2))), name="k1-control-tiny"),
    # label noise P = 0, 0.05, 0.2 at K = 10 (the author's K = 20 numbers: tau 12,450 clean, ~10,400 at 0.05,
    # ~11,700 at 0.2)
    "label-noise-tiny": SweepSpec(base=_task(_TINY, n_bases=200),
                                  grid=(("task.label_noise", (0.0, 0.05, 0.2)), ("seed", (0, 1, 2))),
                                  name="label-noise-tiny"),
    # the staircase: K = 10 as 5 clusters x 2 (z1, z2), five seeds (a share judged over seeds needs five to decide);
    # evaluated every 10 steps so that the middle plateau is seen
    "hierarchy-tiny": SweepSpec(base=_task(_train(_TINY, eval_every=10), n_bases=200, hierarchy="5x2"),
                                grid=(("seed", (0, 1, 2, 3, 4)),), name="hierarchy-tiny"),
    # 10% of the pairs (or of the bases) never trained on: is the held-out target predicted?
    "holdout-tiny": SweepSpec(base=_task(_TINY, n_bases=200, holdout_fraction=0.1),
                              grid=(("task.holdout_by", ("pair", "base")), ("seed", (0, 1, 2))), name="holdout-tiny"),
    # the learning-rate phase diagram (issue 52, docs/phase.md): lr x K x 3 seeds on the tiny model at n_bases = 150,
    # each run stopped once its outcome is decided by the author's rules (interp.outcome: transitioned after 500 steps
    # below 0.3 log K, stuck after 2,000 on the plateau, diverged after 500 above 1.5 log K); evaluated every 50 steps
    # (the author's cadence, on which the rules' windows are exact), at most 3,000 steps
    "phase-tiny": SweepSpec(base=_task(_train(_TINY, steps=3000, eval_every=50, stop_after_snap=None,
                                              stop_when_decided=True), n_bases=150),
                            grid=(("task.k", (5, 10, 20)), ("train.lr", (1e-3, 3e-3, 1e-2, 3e-2)), ("seed", (0, 1, 2))),
                            name="phase-tiny"),
    # the author's eta-sweep (SPEC 13.4): the paper's model at n_bases = 1000, constant lr, no warmup, no clipping, lr
    # 1e-4 .. 3e-2 x K 10, 15, 20, 25, 36 x 3 seeds, with the author's step budgets (100,000 at lr 1e-4, 50,000 at
    # 3e-4, 30,000 at 1e-3 and 3e-3, 10,000 at 1e-2 and 3e-2) and his 2,000 steps after a decided transition
    "phase-paper": SweepSpec(base=_train(_PAPER, stop_after_snap=None, stop_when_decided=True, decided_tail=2000,
                                         schedule="constant", warmup_steps=0, grad_clip=None, eval_every=50,
                                         checkpoint_every=1000, early_checkpoints=False, densify=False, compile=True),
                             grid=(("task.k", (10, 15, 20, 25, 36)), ("seed", (0, 1, 2))),
                             points=tuple({"train.lr": lr, "train.steps": steps} for lr, steps in
                                          ((1e-4, 100_000), (3e-4, 50_000), (1e-3, 30_000), (3e-3, 30_000),
                                           (1e-2, 10_000), (3e-2, 10_000))),
                             name="phase-paper"),
    # the author's ten runs exactly (SPEC: scripts/posthoc_synergy_proxy.py's landauer_dense_k*): the
    # paper's model, n_bases 1000, AdamW lr 1e-3, weight decay 0.01, batch 128, constant lr, 50,000
    # steps, seed 42, one seed per K, evaluated every 50 steps, checkpoints every 100
    "landauer-dense": SweepSpec(base=_train(replace(_PAPER, seed=42), steps=50_000, lr=1e-3, weight_decay=0.01,
                                            batch_size=128, schedule="constant", warmup_steps=0, grad_clip=None,
                                            eval_every=50, checkpoint_every=100, early_checkpoints=False,
                                            densify=False, stop_after_snap=None, compile=True),
                                grid=(("task.k", (3, 5, 7, 10, 13, 17, 20, 25, 30, 36)),), name="landauer-dense"),
    # K = 3..36 at n_bases = 1000 (D = 3k..36k), one seed per point as in the paper, plus replicates
    "paper-scaling": SweepSpec(base=_PAPER_SWEEP, grid=(("task.k", (3, 5, 7, 10, 13, 15, 17, 20, 25, 30, 36)),
                                                        ("seed", (0, 1, 2))), name="paper-scaling"),
    "paper-fixed-d": SweepSpec(base=_PAPER_SWEEP, grid=(("task.k", (5, 10, 20, 36)), ("seed", (0, 1, 2))),
                               fixed_d=10_080, name="paper-fixed-d"),
    "paper-lr": SweepSpec(base=replace(_PAPER_SWEEP, task=replace(_PAPER_SWEEP.task, k=20)),
                          grid=(("train.lr", (3e-4, 5e-4, 1e-3, 2e-3, 5e-3)), ("seed", (0, 1))), name="paper-lr"),
    "paper-batch": SweepSpec(base=replace(_PAPER_SWEEP, task=replace(_PAPER_SWEEP.task, k=20)),
                             grid=(("train.batch_size", (32, 64, 128, 256, 512)), ("seed", (0, 1))),
                             name="paper-batch"),
    "paper-asymmetry": SweepSpec(base=_train(_PAPER_SWEEP, stop_after_snap=None, stop_after_exact=500, steps=50_000),
                                 grid=(("task.direction", ("bz_to_a", "a_to_b")), ("seed", (0, 1, 2))),
                                 name="paper-asymmetry"),
}


def sweep_spec(name: str, fields: dict[str, str] | None = None, grid: list[str] | None = None,
               points: list[str] | None = None, fixed_d: int | None = None) -> SweepSpec:
    """The SweepSpec of a run or sweep preset changed as on the command line: `fields` maps a
    dotted field to one value (sets the base) or a comma list (a grid axis); `grid` are
    "FIELD=V1,V2" axes and `points` "FIELD=V,FIELD=V" explicit points."""
    from interp.errors import InterpError
    from interp.presets import PRESETS
    from interp.sweeps.sweep import parse_axis, parse_point, parse_value

    if name in SWEEP_PRESETS:
        spec = SWEEP_PRESETS[name]
    elif name in PRESETS:
        spec = SweepSpec(base=preset(name))
    else:
        raise InterpError(f"unknown preset {name!r}; runs: {', '.join(PRESETS)}; sweeps: {', '.join(SWEEP_PRESETS)}")
    base, axes = spec.base, dict(spec.grid)
    for dotted, text in (fields or {}).items():
        values = [parse_value(dotted, v) for v in text.split(",") if v.strip()]
        if not values:
            raise InterpError(f"--{dotted.rpartition('.')[2].replace('_', '-')} has no value")
        if len(values) == 1 and "," not in text:
            base = base.replace(dotted, values[0])
        else:
            axes[dotted] = tuple(values)
    for text in grid or []:
        field, values = parse_axis(text)
        axes[field] = tuple(values)
    extra = [parse_point(text) for text in points or []]
    return SweepSpec(base=base, grid=tuple(axes.items()), points=tuple(spec.points) + tuple(extra),
                     fixed_d=fixed_d if fixed_d is not None else spec.fixed_d, name=spec.name)
