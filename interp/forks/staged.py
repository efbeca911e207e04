"""A fork design made stage by stage: parent -> lr fork -> relapse -> family (`interp.forks.presets.RelapseStage`).

The author forked a collapsed state (SPEC 9.2, docs/forks.md "Relapse"); `build` makes one from a
design's parent and forks it. Each stage that is done is kept (the parent and the lr fork are ordinary
run and fork folders, the family a fork family), so it can be run again and trains only what is left.
"""

from __future__ import annotations

from pathlib import Path

from interp.errors import InterpError
from interp.forks.relapse import parse_relapse, relapse_at


def depths(at: str) -> list[int]:
    """The relapse depths H of a design's `at` ("relapse", or "relapse,relapse+1000,...": H = 0, 1000, ...)."""
    import re

    out = []
    for item in (a.strip().replace(" ", "") for a in str(at).split(",") if a.strip()):
        match = re.fullmatch(r"relapse(?:\+(\d+))?", item)
        if match is None:
            raise InterpError(f"a staged design forks at relapse or relapse+H, got {item!r}")
        out.append(int(match.group(1) or 0))
    return out


def trained_parent(design, folder, progress: bool = False):
    """The design's parent run in `folder`/parent, trained to its end (a finished one is only opened)."""
    from interp.runs import Run
    from interp.train import train

    path = Path(folder) / "parent"
    parent = Run.open(path) if Run.is_run(path) else Run.create(path, design.parent)
    if (parent.status or {}).get("state") != "done":
        train(parent, progress=progress)
        parent = Run.open(path)
    return parent


def build(design, folder, *, workers: int | None = None, progress: bool = False):
    """Make and train a design with a relapse stage (`interp.forks.presets.RelapseStage`) under `folder`:
    `parent/` trained to solved, `relapse/` the lr fork of its last checkpoint (kept states), and
    `family/` the design's forks at its relapse, or at each depth relapse+H its `at` names (`relapse_at`).
    Each stage that is done is kept, so
    running it again trains nothing that is finished. Returns the ForkFamily."""
    from interp.forks.arms import parse_arms
    from interp.forks.family import ForkFamily
    from interp.forks.fork import fork

    stage = design.relapse
    if stage is None:
        raise InterpError("this design has no relapse stage (ForkDesign.relapse)")
    criterion = parse_relapse(stage.criterion)  # bad input first
    folder = Path(folder)
    parent = trained_parent(design, folder, progress)
    relapsed = fork(parent, "last", f"lr:value={stage.lr:g}", stage.steps, folder / "relapse",
                    settings=dict(stage.settings), progress=progress)  # a finished one trains nothing
    steps = [relapse_at(relapsed, criterion, h) for h in depths(design.at)]
    family = ForkFamily.create(relapsed, steps, parse_arms(design.arms), list(design.seeds), design.horizon,
                               folder / "family", gamma_every=design.gamma_every, gamma_window=design.gamma_window,
                               settings=dict(design.settings), escape=design.escape,  # another design: refused
                               relapse=criterion)
    family.train(workers=design.workers if workers is None else workers, progress=progress)
    return family
