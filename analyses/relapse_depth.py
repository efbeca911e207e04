"""Finding: does noise trap a relapsed state once Adam's second moment has forgotten the solved state?

The author's forks (SPEC 9.2) start from a state that sat relapsed for 16,000 steps; forks-relapse-tiny's started 25
steps into its relapse. AdamW's second moment forgets on a scale of 1 / (1 - beta2) = 1,000 steps, so a state
forked that early still carries the solved state's v. Here the relapse's depth is an axis: the family forks the
relapsed state held H = 0, 1,000 and 4,000 steps (`interp fork --at relapse+H`; the relapse at 0.04, 13.3x the
parent's lr, holds past 5,000 steps: docs/forks.md), under the author's arms (full_batch,
minibatch, isotropic noise, v-only noise with isotropic xi), 3 fork seeds each and the author's held escape
(loss_first < 3.0 held 500 steps). Printed per depth: the second moment's state (v_mean.all of the relapsed run at
the fork step over the solved parent's at the step the relapse forked, with the attention and MLP modules), then
each arm's escape and its ratio to full_batch (geometric means, Welch's t on the log escapes, 90%:
interp.mechanisms.fork_measures), and the reconciliation rows the family gives (interp reconcile).

    python analyses/relapse_depth.py [FOLDER] [--calibrate LR,LR,...] [--probe-steps N] [--arms A,B]
                                     [--seeds 0,1] [--depths 0,1000] [--horizon N] [--escape C] [--gamma-window A:B]
                                     [--relapse-steps N]
                                     [--workers N]
                                     [--out DIR]

FOLDER holding forks.json is read as it is; otherwise the `forks-relapse-depth-tiny` design (interp/forks/presets.py)
is made and trained there (FOLDER/parent, FOLDER/relapse, FOLDER/family: each stage that is done is kept, and a
family there with forks not done, interrupted say, is finished first). The
options cut the design down (the slow tier's check). --calibrate LRS trains the parent and one lr fork per LR
(FOLDER/calibrate/lr-LR), prints how long each stays relapsed (and its candidate loss there), and forks
full_batch from each that holds 1,000 steps at relapse+1000 (relapse+4000 where it holds 4,000) for
--probe-steps (default 800) to show whether the clean gradient still re-solves there; an lr whose fork
diverges is a row of its own.
The figure (escape steps per arm and fork step, the family's criterion) goes to DIR/relapse_depth.html.
"""

import dataclasses
import math
import sys
from pathlib import Path

from _common import row

DESIGN = "forks-relapse-depth-tiny"
MODULES = ("all", "L0.attn", "L0.mlp", "embed", "unembed")
PROBE_DEPTHS = (1000, 4000)  # --calibrate probes the clean gradient at the deepest of these a relapse holds


def v_ratios(relapsed, step: int) -> dict[str, float]:
    """v_mean.<module> of the relapsed run at `step` over the solved state's: its parent's at the step the lr fork
    started from (the relapsed run's own first logged value where the parent is gone or logged none there)."""
    from interp.runs import Run

    names = [f"v_mean.{m}" for m in MODULES]
    series = relapsed.metric_series(*names)
    steps = series["step"]
    if not steps:
        return {}
    solved = {}
    origin = relapsed.fork or {}
    try:
        parent = Run.open(origin["parent"])
        ps = parent.metric_series(*names)
        at_parent = max((i for i, s in enumerate(ps["step"]) if s <= int(origin["parent_step"])), default=None)
        if at_parent is not None:
            solved = {n: ps[n][at_parent] for n in names}
    except Exception:  # noqa: BLE001 - no parent to read: the relapsed run's first value stands in
        solved = {}
    at = max((i for i, s in enumerate(steps) if s <= step), default=0)
    out = {}
    for name in names:
        values = series[name]
        first = solved.get(name)
        if first is None or first != first:
            first = next((v for v in values if v is not None and v == v), None)
        now = values[at]
        out[name.removeprefix("v_mean.")] = (now / first if first and now is not None and now == now else math.nan)
    return out


def calibrate(folder: Path, lrs: list[float], steps: int, probe_steps: int, criterion: str) -> None:
    from interp.forks.fork import fork
    from interp.forks.presets import fork_preset
    from interp.forks.relapse import detect, parse_relapse, relapse_at, relapsed_until
    from interp.forks.staged import trained_parent
    from interp.train import Diverged

    design = fork_preset(DESIGN)
    parent = trained_parent(design, folder)
    crit = parse_relapse(criterion)
    for lr in lrs:
        out = folder / "calibrate" / f"lr-{lr:g}"
        try:
            run = fork(parent, "last", f"lr:value={lr:g}", steps, out, settings=dict(design.relapse.settings),
                       progress=False)
        except Diverged as exc:  # too large an lr: a row of the table, not the end of the calibration
            print(row(f"lr {lr:g}: relapse ({crit.words})", f"never: diverged at step {exc.step}",
                      "held 16,000 steps at 0.0125"))
            continue
        s = run.metric_series("loss_cand", crit.metric)
        found = detect(s["step"], s["loss_cand"], s[crit.metric], run.log_k, crit)[1]
        ended = relapsed_until(s["step"], s[crit.metric], found, crit, run.log_k) if found is not None else None
        held = None if found is None else ((ended or s["step"][-1]) - found)
        stretch = [v / run.log_k for t, v in zip(s["step"], s["loss_cand"]) if found is not None and found <= t
                   and (ended is None or t < ended) and v == v]
        span = f"; Lc {min(stretch):.2f}-{max(stretch):.2f} log K" if stretch else ""
        print(row(f"lr {lr:g}: relapse ({crit.words})", "never" if found is None else
                  f"at {found}, held {held} steps" + (" (to the end)" if ended is None else f" (re-solved at {ended})")
                  + span, "held 16,000 steps at 0.0125"))
        if found is None or held < 1000:
            continue
        depth = max(h for h in PROBE_DEPTHS if h < held)  # the deepest state of the design's depths this relapse holds
        probe = fork(run, str(relapse_at(run, crit, depth)), "full_batch", probe_steps,  # the kept state at or after it
                     folder / "calibrate" / f"probe-lr-{lr:g}", settings={"eval_every": 25, "save_optimizer": False},
                     progress=False)
        from interp.forks.escape import parse_escape

        esc = parse_escape(design.escape)
        series = probe.metric_series(esc.metric)
        at = probe.fork["parent_step"]
        t = esc.judge(series["step"], series[esc.metric], at, probe.log_k)
        print(row(f"    full_batch from step {at} (relapse+{depth})", "no escape in " + str(probe_steps) if t is None else
                  f"escapes after {t - at} steps ({esc.words})", "re-solves in ~800 steps"))
        print(row("    v_mean.all there / at the solved state", f"{v_ratios(run, at).get('all', math.nan):.3g}", "-"))


def family_in(folder: Path, args):
    from interp.forks.family import ForkFamily
    from interp.forks.presets import fork_preset
    from interp.forks.staged import build

    if ForkFamily.is_family(folder):
        return ForkFamily.open(folder)
    if ForkFamily.is_family(folder / "family"):  # made here stage by stage: its unfinished forks are trained first
        family = ForkFamily.open(folder / "family")
        if (family.table()["status"] != "done").any():
            print(f"finishing {family.path} (trains only the forks not done)", file=sys.stderr)
            family.train(workers=args.workers or fork_preset(DESIGN).workers, progress=False)
            family = ForkFamily.open(folder / "family")
        return family
    design = fork_preset(DESIGN)
    changes = {k: v for k, v in (("arms", args.arms), ("horizon", args.horizon), ("escape", args.escape),
                                                 ("gamma_window", args.gamma_window)) if v}
    if args.seeds:
        changes["seeds"] = tuple(int(s) for s in args.seeds.split(","))
    if args.depths:
        changes["at"] = ",".join("relapse" if int(h) == 0 else f"relapse+{int(h)}" for h in args.depths.split(","))
    if args.relapse_steps:
        changes["relapse"] = dataclasses.replace(design.relapse, steps=args.relapse_steps)
    design = dataclasses.replace(design, **changes)
    print(f"making {DESIGN} in {folder} (parent, relapse, family; trains only what is not finished)", file=sys.stderr)
    return build(design, folder, workers=args.workers)


def _whole_numbers(text: str, flag: str, example: str, least: int = 0) -> list[int]:
    from interp.errors import InterpError

    items = [x.strip() for x in str(text).split(",")]
    if not items or any(not x for x in items) or not all(x.lstrip("-").isdigit() for x in items):
        raise InterpError(f"{flag} {text!r}: give comma-separated whole numbers, e.g. {flag} {example}")
    values = [int(x) for x in items]
    if any(v < least for v in values):
        raise InterpError(f"{flag} {text!r}: each must be >= {least}")
    return values


def check(args, folder: Path) -> list[float]:
    """Refuse bad options in one line before anything is made (the lrs of --calibrate as numbers, else [])."""
    import math

    from interp.errors import InterpError
    from interp.forks.escape import parse_escape, parse_gamma_window
    from interp.forks.family import ForkFamily
    from interp.runs import Run

    if Run.is_run(folder):
        raise InterpError(f"{folder} is a run folder: give a fork family, or a new folder to make the "
                          f"{DESIGN} design in (never a run's own folder)")
    for name in ("probe_steps", "horizon", "relapse_steps", "workers"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise InterpError(f"--{name.replace('_', '-')} {value}: must be a whole number >= 1")
    lrs = []
    if args.calibrate is not None:
        for x in [x.strip() for x in args.calibrate.split(",")]:
            try:
                lr = float(x)
            except ValueError:
                lr = math.nan
            if not (math.isfinite(lr) and lr > 0):
                raise InterpError(f"--calibrate {args.calibrate!r}: give comma-separated learning rates > 0, e.g. "
                                  f"--calibrate 0.045,0.06")
            lrs.append(lr)
    if args.seeds is not None:
        _whole_numbers(args.seeds, "--seeds", "0,1,2")
    if args.depths is not None:
        _whole_numbers(args.depths, "--depths", "0,1000")
    cuts = [f"--{n.replace('_', '-')}" for n in ("arms", "seeds", "depths", "horizon", "escape", "gamma_window",
                                                  "relapse_steps") if getattr(args, n) is not None]
    if cuts and (ForkFamily.is_family(folder) or ForkFamily.is_family(folder / "family")):
        raise InterpError(f"{folder} holds the family already; {', '.join(cuts)} cut a design down as it is made, "
                          f"and a made family keeps its own: run without them, or give another folder")
    if args.escape is not None:
        criterion = parse_escape(args.escape)
        if args.horizon is not None:
            criterion.check_horizon(args.horizon)
    if args.gamma_window is not None:
        parse_gamma_window(args.gamma_window)
    if args.arms is not None:
        from interp.forks.arms import parse_arms

        parse_arms(args.arms)
    return lrs


def main() -> None:
    from interp.mechanisms.fork_measures import escape_ratio
    from interp.mechanisms.reconcile import reconcile
    from interp.runs import Run

    from _common import out_folder, parser_of

    parser = parser_of(__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=f"forks/{DESIGN}", help="a fork family, or where to make one")
    parser.add_argument("--calibrate", help="lr forks at these lrs (comma-separated) and a full_batch probe each")
    parser.add_argument("--probe-steps", type=int, default=800, help="the full_batch probe's horizon (--calibrate)")
    parser.add_argument("--arms", help="cut down: these arms only")
    parser.add_argument("--seeds", help="cut down: these fork seeds (comma-separated)")
    parser.add_argument("--depths", help="cut down: these relapse depths H (comma-separated)")
    parser.add_argument("--horizon", type=int, help="cut down: this horizon")
    parser.add_argument("--escape", help="cut down: this escape criterion (a hold no longer than the horizon)")
    parser.add_argument("--gamma-window", help="cut down: this Gamma window FROM:TO (within the horizon)")
    parser.add_argument("--relapse-steps", type=int, help="cut down: the lr fork's horizon")
    parser.add_argument("--workers", type=int, help="fork workers (default: the design's)")
    parser.add_argument("--out", default="out", help="folder for the figure (default: out/)")
    args = parser.parse_args()
    folder = Path(args.folder)
    lrs = check(args, folder)  # every option, before anything is made or trained
    out_folder(args.out) if Path(args.out).exists() else None  # a file there is refused before any work
    if args.calibrate:
        from interp.forks.presets import fork_preset

        stage = fork_preset(DESIGN).relapse
        calibrate(folder, lrs, args.relapse_steps or stage.steps, args.probe_steps, stage.criterion)
        return
    family = family_in(folder, args)
    table = family.table()
    relapsed = Run.open(family.design["parent"])
    counts = table["status"].value_counts().to_dict()
    print(f"{family.path}: {len(table)} forks of {relapsed.path} at steps {family.design['steps']}, horizon "
          f"{family.design['horizon']}, escape {family.escape.words}: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    labels = sorted(set(table["arm"].astype(str) + ":" + table["arm_params"].astype(str)))
    for step in family.design["steps"]:
        at = table[table["fork_step"] == step]
        v = v_ratios(relapsed, int(step))
        print(f"at step {step}: v_mean / the solved state's: " + ", ".join(f"{k} {x:.3g}" for k, x in v.items()))
        for label in labels:
            name = label.rstrip(":")
            forks = at[(at["arm"].astype(str) + ":" + at["arm_params"].astype(str)) == label]
            from interp.mechanisms.fork_measures import censored_at

            seen = [(f">= {censored_at(r):.0f}" if bool(r.get("censored_escape")) else
                     str(int(r["escape"])) if r.get("escape") == r.get("escape") else r["status"])
                    for r in forks.to_dict("records")]
            print(row(f"    {name}: escape after the fork (steps, each fork)", ", ".join(seen) or "-",
                      "full batch ~800; isotropic censored at 16,000"))
            if name.startswith("full_batch"):
                continue
            m, why = escape_ratio(at, name, "full_batch")
            bound = f"{m.extra.get('bound')} " if m is not None and m.extra.get("bound") else ""
            value = "" if m is None else (f"{bound}{m.value:.3g} (one fork: no interval)" if m.low != m.low
                                          else m.as_estimate().text())  # the estimate writes its own bound
            print(row(f"    {name} / full_batch escape", why if m is None else f"{value} ({m.n_runs} forks)",
                      "traps: >= 20x (isotropic), 5.75x (v-only)"))
    print(reconcile(family.path).summary())
    import warnings

    from interp.plots.forks import fork_escapes
    from interp.sweeps.forks import forks

    out = out_folder(args.out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = "full_batch" if "full_batch" in set(table["arm"]) else "minibatch"
        fork_escapes(forks(table, reference=reference)).write_html(out / "relapse_depth.html", include_plotlyjs=True)
    print(f"figure: {out / 'relapse_depth.html'}")


if __name__ == "__main__":
    from interp.errors import InterpError

    try:
        main()
    except InterpError as e:  # bad input: one line, exit status 2, as the CLI
        print(f"relapse_depth.py: error: {e}", file=sys.stderr)
        sys.exit(2)
