"""Finding: the author's fork experiment on a relapsed state (SPEC 9.2), under the author's criterion and ours.

The author forked a *collapsed* state: a solved model trained on at a high lr until it fell back to
the marginal. From there (their model and lr): the clean full gradient re-solves in about 800 steps;
full gradient plus measured minibatch noise was still trapped at step 1,400 of 3,500; isotropic noise
of that norm was censored at 16,000 (>= 20x); noise only in the second moment (isotropic xi) slowed
the escape 5.75x (800 -> 4,600); Gamma (median of the per-step ratio over steps 100-500, or the ratio
of sums over 2,000 steps) about 2 for noise in both moments (1.89, 2.05) and about 1 for v-only (0.98).
Escape was the first-token full-vocabulary loss below 3.0 held 500 steps. Our `forks-tiny` forks the
first plateau instead; `forks-relapse-tiny` (interp/forks/presets.py) forks the relapsed state:
parent trained to solved -> an lr fork of its last checkpoint at 5x its lr, keeping its states ->
the relapse (`--at relapse`) -> the family. Printed: per arm, the escape median [95% CI] over fork
seeds, its ratio to full_batch, and Gamma (median over steps 100:500, ratio of sums), under the
author's criterion and under today's (tau_half: Lc < 0.5 log K, no hold), beside the author's numbers.

    python analyses/forks_relapse.py [FOLDER] [--arms A,B] [--seeds 0,1] [--horizon N] [--escape C]
                                     [--gamma-window A:B] [--relapse-steps N] [--workers N] [--out DIR]

FOLDER holding forks.json is read as it is. Otherwise the design is made and trained there
(FOLDER/parent, FOLDER/relapse, FOLDER/family); running it again trains nothing that is finished.
The options cut the design down (a check that it works); the design itself is the lead's to run. The figure
(escape steps per arm under the first criterion printed, the family's own) goes to DIR/forks_relapse.html.
"""

import argparse
import dataclasses
import sys
import warnings
from pathlib import Path

from _common import row

from interp.forks.escape import AUTHOR as AUTHOR_ESCAPE
from interp.forks.escape import DEFAULT as TODAY_ESCAPE
from interp.forks.family import ForkFamily
from interp.plots.forks import fork_escapes
from interp.sweeps.forks import forks

DESIGN = "forks-relapse-tiny"
# label -> (escape, ratio to full_batch, Gamma): SPEC 8.1 and 9.2, the author's model and lr
AUTHOR = {
    "full_batch": ("~800 steps", "1 (the reference)", "0"),
    "minibatch": ("-", "-", "-"),
    "measured_noise": ("trapped at 1,400 of a 3,500 horizon", ">= 1.75x", "1.89 / 2.05 (sums, T = 2,000)"),
    "isotropic_noise": ("censored at 16,000 (2 streams)", ">= 20x", "~2"),
    "v_only_noise:s=1,xi=isotropic": ("~4,600 steps", "5.75x", "0.98 (sums); ~1"),
    "v_only_noise:s=1,xi=measured": ("- (the author's xi is isotropic)", "-", "-"),
}


def family_in(folder: Path, args) -> ForkFamily:
    """The family at `folder`, else the design (cut down by `args`) made and trained there: each stage
    that is done is kept, and a family made with another design is refused, naming what differs."""
    if ForkFamily.is_family(folder):
        return ForkFamily.open(folder)
    return _build(folder, args)


def _build(folder: Path, args) -> ForkFamily:
    from interp.forks.presets import fork_preset
    from interp.forks.staged import build

    design = fork_preset(DESIGN)
    changes = {k: v for k, v in (("arms", args.arms), ("horizon", args.horizon), ("escape", args.escape),
                                 ("gamma_window", args.gamma_window)) if v}
    if args.seeds:
        changes["seeds"] = tuple(int(s) for s in args.seeds.split(","))
    if args.relapse_steps:
        changes["relapse"] = dataclasses.replace(design.relapse, steps=args.relapse_steps)
    design = dataclasses.replace(design, **changes)
    print(f"making {DESIGN} in {folder} (parent, relapse, family; trains only what is not finished)", file=sys.stderr)
    return build(design, folder, workers=args.workers)


def escape_text(r) -> str:
    median = f">= {r['median']:.0f}" if r["median_censored"] else f"{r['median']:.0f}"
    high = "inf" if r["ci_high"] == float("inf") else f"{r['ci_high']:.0f}"
    return f"{median} [{r['ci_low']:.0f}, {high}] (n {r['n']}, {r['n_censored']} cens.)"


def ratio_text(r) -> str:
    if r["ratio"] != r["ratio"]:
        return "-"
    bound = {">=": ">= ", "<=": "<= "}.get(r["ratio_bound"], "")
    high = "inf" if r["ratio_high"] == float("inf") else f"{r['ratio_high']:.2f}"
    return f"{bound}{r['ratio']:.2f}x [{r['ratio_low']:.2f}, {high}]"


def gamma_text(r) -> str:
    med = "-" if r["gamma_median"] != r["gamma_median"] else f"{r['gamma_median']:.3g}"
    sums = "-" if r["gamma"] != r["gamma"] else f"{r['gamma']:.3g}"
    return f"median {med}, sums {sums}"


def comparison(family: ForkFamily, criterion, window):
    table = family.table(escape=criterion, gamma_window=window)
    reference = "full_batch" if "full_batch" in set(table["arm"]) else "minibatch"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return forks(table, reference=reference)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=f"forks/{DESIGN}", help="a fork family, or where to make one")
    parser.add_argument("--arms", help="cut down: these arms only")
    parser.add_argument("--seeds", help="cut down: these fork seeds (comma-separated)")
    parser.add_argument("--horizon", type=int, help="cut down: this horizon")
    parser.add_argument("--escape", help="cut down: this escape criterion (default: the author's)")
    parser.add_argument("--gamma-window", help="cut down: the Gamma range A:B (default: the author's 100:500)")
    parser.add_argument("--relapse-steps", type=int, help="cut down: the lr fork's horizon")
    parser.add_argument("--workers", type=int, help="fork workers (default: the design's)")
    parser.add_argument("--out", default="out", help="folder for the figure (default: out/)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    family = family_in(Path(args.folder), args)
    table = family.table()
    counts = table["status"].value_counts().to_dict()
    d = family.design
    print(f"{family.path}: {len(table)} forks of {d['parent']} at steps {d['steps']}, horizon {d['horizon']}: "
          + ", ".join(f"{n} {s}" for s, n in counts.items()))
    window = family.gamma_range
    own = family.escape
    figure = None
    for criterion in dict.fromkeys([own, AUTHOR_ESCAPE, TODAY_ESCAPE]):
        if criterion.hold > int(d["horizon"]):
            print(f"escape under {criterion.words}: not judged (the hold is longer than the horizon {d['horizon']})")
            continue
        comp = comparison(family, criterion, window)
        whose = ("the author's" if criterion == AUTHOR_ESCAPE else "today's (tau_half)" if criterion == TODAY_ESCAPE
                 else "the family's")
        print(f"escape under {whose} criterion [{criterion.words}]; ratio to {comp.reference}; "
              f"Gamma over steps {window[0]}:{window[1]} after the fork")
        for r in comp.rows.to_dict("records"):
            paper = AUTHOR.get(r["label"], AUTHOR.get(r["arm"], ("-", "-", "-")))
            print(row(f"at {r['fork_step']}: {r['label']}: escape", escape_text(r), paper[0]))
            if r["arm"] != comp.reference:
                print(row(f"    ratio to {comp.reference}", ratio_text(r), paper[1]))
            print(row("    Gamma", gamma_text(r), paper[2]))
        print(comp.summary())
        figure = figure or comp
    if figure is not None:
        path = out / "forks_relapse.html"
        fork_escapes(figure).write_html(path, include_plotlyjs=True)
        print(f"figure: {path}")


if __name__ == "__main__":
    main()
