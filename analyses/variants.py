"""Finding: the author's program beyond the paper, at tiny scale (docs/variants.md), one preset at a time.

    python analyses/variants.py PRESET [FOLDER] [--csv FILE] [--workers N] [--steps N --seeds N]

PRESET is one of k1-control-tiny, label-noise-tiny, hierarchy-tiny, holdout-tiny (sweeps), optimizer-branch-tiny,
reversal-transfer-tiny (fork designs). FOLDER (default variants/PRESET) holding the preset's sweep or family is read
as it is; otherwise the preset is trained there (2 workers; running it again trains nothing that is finished). The
per-run table (with the columns the verdicts read) goes to --csv; the verdicts (SPEC 10's rules against the
author's numbers, `interp.mechanisms.variants`) are printed. `--steps N --seeds N` cut the design down (each
sweep run's steps, a fork's horizon and the scratch reference's steps at N; the first N seeds): the slow tier's
end-to-end check, whose verdicts are mostly "inconclusive" for want of runs.
"""

import sys
from pathlib import Path

import pandas as pd
from _common import one_line_errors, parser_of

from interp.cli import main as interp_main
from interp.errors import InterpError
from interp.mechanisms import variants as V
from interp.runs import Run

SWEEPS = V.SWEEP_VERDICTS
FAMILIES = V.FAMILY_VERDICTS


def cut_sweep(spec, steps: int | None, seeds: int | None):
    """The preset's SweepSpec cut down: each run's steps, the seed axis's first `seeds` values."""
    from dataclasses import replace

    base = spec.base if steps is None else spec.base.override(steps=steps)
    grid = tuple((f, v[:seeds] if f == "seed" and seeds is not None else v) for f, v in spec.grid)
    return replace(spec, base=base, grid=grid)


def sweep_table(name: str, folder: Path, workers: int, steps: int | None = None,
                seeds: int | None = None) -> pd.DataFrame:
    from interp.sweeps.presets import SWEEP_PRESETS
    from interp.sweeps.sweep import Sweep, train_sweep

    if steps is not None or seeds is not None:  # cut down: made through the API (the CLI trains the preset whole)
        sweep = Sweep.open(folder) if Sweep.is_sweep(folder) else \
            Sweep.create(folder, cut_sweep(SWEEP_PRESETS[name], steps, seeds))
        train_sweep(sweep, workers=workers, progress=False)
    elif not Sweep.is_sweep(folder) or any(s != "done" for s in Sweep.open(folder).table()["status"]):
        code = interp_main(["sweep", "--preset", name, "--out", str(folder), "--workers", str(workers), "--quiet"])
        if code:
            raise InterpError(f"interp sweep --preset {name} --out {folder} ended with status {code}")
    sweep = Sweep.open(folder)
    table = sweep.table()
    extra = []
    for run_name in table["run"]:
        extra.append(per_run(Run.open(folder / run_name)))
    return pd.concat([table, pd.DataFrame(extra)], axis=1)


def per_run(run: Run) -> dict:
    """The columns the verdicts read beyond the sweep table's: the label-noise runs' time (tau_acc_half), the held-out
    split's last metrics, the hierarchy's staircase (the author's two-plateau rule, the z1 and z2 onsets)."""
    import math

    from interp.summary import run_summary

    s = run_summary(run)
    acc = run.metric_series("acc_cand")
    t, censored = V.acc_half(acc["step"], acc["acc_cand"], run.spec.task.k, run.spec.task.label_noise)
    out = {"tau_acc_half": t, "censored_tau_acc_half": censored}
    held = s.get("heldout")
    if held:
        out.update({f"heldout_{k}": held[k] for k in ("loss_cand", "acc_cand", "acc_exact")})
    stair = s.get("hierarchy")
    if stair:
        series = run.metric_series("loss_cand")
        out.update(z1_onset=stair["z1_onset"], z2_onset=stair["z2_onset"], reached_log_k2=stair["reached_log_k2"],
                   evaluations_at_log_k2=stair["evaluations_at_log_k2"],
                   two_plateaus=V.two_plateaus(series["step"], series["loss_cand"], math.log(stair["k2"])))
    return out


def family_table(name: str, folder: Path, workers: int, steps: int | None = None,
                 seeds: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    from dataclasses import replace

    from interp.forks.arms import parse_arms
    from interp.forks.family import ForkFamily
    from interp.forks.presets import fork_preset
    from interp.train import train

    design = fork_preset(name)
    design = replace(design, horizon=design.horizon if steps is None else steps,
                     seeds=design.seeds if seeds is None else design.seeds[:seeds])
    parent_path = folder / "parent"
    family_path = folder / "family"
    if not ForkFamily.is_family(family_path):
        parent = Run.open(parent_path) if Run.is_run(parent_path) else Run.create(parent_path, design.parent)
        if (parent.status or {}).get("state") != "done":
            print(f"training the parent {parent_path}", file=sys.stderr)
            train(parent, progress=False)
        ForkFamily.create(Run.open(parent_path), design.at, parse_arms(design.arms), list(design.seeds),
                          design.horizon, family_path, gamma_every=design.gamma_every,
                          gamma_window=design.gamma_window, settings=dict(design.settings))
    family = ForkFamily.open(family_path)
    family.train(workers=workers, progress=False)
    scratch = None
    if name == "reversal-transfer-tiny":  # the new direction trained from scratch: the reference
        from interp.sweeps.sweep import Sweep, SweepSpec, train_sweep

        spec = cut_sweep(SweepSpec(base=design.parent.override(direction="bz_to_a"), grid=(("seed", (0, 1, 2)),),
                                   name="reversal-scratch-tiny"), steps, seeds)
        where = folder / "scratch"
        sweep = Sweep.open(where) if Sweep.is_sweep(where) else Sweep.create(where, spec)
        train_sweep(sweep, workers=workers, progress=False)
        scratch = Sweep.open(where).table()
    return family.table(), scratch


def main() -> None:
    from interp.analysis.registry import positive_int

    one_line_errors(Path(sys.argv[0]).name)
    parser = parser_of(__doc__.splitlines()[0])
    parser.add_argument("preset", choices=[*SWEEPS, *FAMILIES])
    parser.add_argument("folder", nargs="?", help="the preset's folder (default: variants/PRESET)")
    parser.add_argument("--csv", help="write the per-run table here (e.g. docs/data/variants/PRESET.csv)")
    parser.add_argument("--workers", type=positive_int, default=2)
    parser.add_argument("--steps", type=positive_int, help="cut down: each run's steps and a fork's horizon")
    parser.add_argument("--seeds", type=positive_int, help="cut down: the first N seeds")
    args = parser.parse_args()
    folder = Path(args.folder or Path("variants") / args.preset)
    if args.csv is not None and Path(args.csv).is_dir():
        raise InterpError(f"--csv {args.csv} is a folder; give a file")
    if args.preset in SWEEPS:
        table = sweep_table(args.preset, folder, args.workers, args.steps, args.seeds)
    else:
        table, scratch = family_table(args.preset, folder, args.workers, args.steps, args.seeds)
        if scratch is not None:
            table = pd.concat([table, scratch.assign(kind="scratch")], ignore_index=True)
    claims = V.judge_table(args.preset, table)  # as a kept CSV is judged (tests/unit/test_variants_kept.py)
    counts = table["status"].value_counts().to_dict()
    print(f"{folder}: {len(table)} runs: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    for claim in claims:
        print(f"  {claim.line()}")
    if args.csv:
        table.to_csv(args.csv, index=False)
        print(f"table: {args.csv}")


if __name__ == "__main__":
    main()
