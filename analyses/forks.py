"""Finding: what holds the plateau? Forks of one plateau state under the author's arms.

The author (docs/forks.md; their model and lr): from one collapsed state, the clean full gradient
re-solves in about 800 steps; full gradient plus measured minibatch noise stays trapped
(censored at 16,000: >= 20x); isotropic noise of matched norm also traps, less tightly; noise
only in the second moment slows escape about 5.75x; realised Gamma about 1 for v-only noise and
about 2 for noise in both moments. Our model and lr differ: compare directions and ratios.
Here: escape (steps after the fork to tau_half) per arm, median over fork seeds with its
interval, its ratio to full_batch (the author's reference) and to minibatch, and Gamma.

    python analyses/forks.py [FOLDER] [--out DIR]

FOLDER holding forks.json is read as it is. Otherwise the `forks-tiny` design is trained there
(FOLDER/parent, then the family FOLDER/family on 2 workers; 17 minutes on 2 cores):
running it again trains nothing that is finished.
"""

import argparse
import sys
import warnings
from pathlib import Path

from _common import row

from interp.forks.arms import parse_arms
from interp.forks.family import ForkFamily
from interp.plots.forks import fork_escapes
from interp.sweeps.forks import forks

AUTHOR = {
    "full_batch": ("re-solves in ~800 steps (the reference of the ratios)", "0"),
    "measured_noise": (">= 20x full_batch (censored at 16,000)", "~2"),
    "isotropic_noise": ("traps, less tightly than measured noise", "~2"),
    "v_only_noise": ("5.75x full_batch (800 -> 4,600)", "~1"),
    "minibatch": ("-", "-"),
    "reset_optimizer": ("-", "-"),
}


def family_in(folder: Path) -> ForkFamily:
    """The family at `folder`, or the forks-tiny design trained there."""
    if ForkFamily.is_family(folder):
        return ForkFamily.open(folder)
    from interp.forks.presets import fork_preset
    from interp.runs import Run
    from interp.train import train

    design = fork_preset("forks-tiny")
    parent_path = folder / "parent"
    parent = Run.open(parent_path) if Run.is_run(parent_path) else Run.create(parent_path, design.parent)
    if (parent.status or {}).get("state") != "done":
        print(f"training the parent {parent_path}", file=sys.stderr)
        train(parent, progress=False)
    family = ForkFamily.create(Run.open(parent_path), design.at, parse_arms(design.arms), list(design.seeds),
                               design.horizon, folder / "family", gamma_every=design.gamma_every,
                               gamma_window=design.gamma_window, settings=dict(design.settings))
    family.train(workers=design.workers, progress=False)
    return family


def ratio_text(r) -> str:
    if r["ratio"] != r["ratio"]:
        return "-"
    bound = {">=": ">= ", "<=": "<= "}.get(r["ratio_bound"], "")
    return f"{bound}{r['ratio']:.2f}x [{r['ratio_low']:.2f}, {r['ratio_high']:.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default="forks/forks-tiny", help="a fork family, or where to make one")
    parser.add_argument("--out", default="out", help="folder for the figure (default: out/)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    family = family_in(Path(args.folder))
    table = family.table()
    counts = table["status"].value_counts().to_dict()
    print(f"{family.path}: {len(table)} forks of {family.design['parent']} at steps {family.design['steps']}, "
          f"horizon {family.design['horizon']}: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        to_minibatch = forks(table)
        arms = set(table["arm"])
        to_full = forks(table, reference="full_batch") if "full_batch" in arms else None
    for r in to_minibatch.rows.to_dict("records"):
        median = (f">= {r['median']:.0f}" if r["median_censored"] else f"{r['median']:.0f}")
        high = "inf" if r["ci_high"] == float("inf") else f"{r['ci_high']:.0f}"
        ours = f"{median} [{r['ci_low']:.0f}, {high}] (n {r['n']}, {r['n_censored']} censored)"
        paper, gamma_paper = AUTHOR.get(r["arm"], ("-", "-"))
        print(row(f"at {r['fork_step']}: {r['label']}: escape_half", ours, paper))
        if to_full is not None:
            full = to_full.rows[(to_full.rows["fork_step"] == r["fork_step"]) & (to_full.rows["label"] == r["label"])]
            if len(full) and r["arm"] != "full_batch":
                print(row("    ratio to full_batch", ratio_text(full.iloc[0]), paper))
        if r["arm"] != "minibatch":
            print(row("    ratio to minibatch", ratio_text(r), "-"))
        if r["gamma"] == r["gamma"]:
            print(row("    realised update power Gamma", f"{r['gamma']:.3g} (n {r['gamma_n']})", gamma_paper))
    print(f"summary:\n{to_minibatch.summary()}")
    path = out / "forks.html"
    fork_escapes(to_minibatch).write_html(path, include_plotlyjs=True)
    print(f"figure: {path}")


if __name__ == "__main__":
    main()
