"""What a folder holds, and `interp.open(path)`: a Run, a Sweep or a ForkFamily.

The one rule, by the file that marks each kind: forks.json is a fork family, sweep.json a
sweep (a folder holding two of forks.json, sweep.json and run.json is refused as ambiguous),
anything else is taken for a run folder, so a folder that is none of them gets the
run's own one-line error ("... is not a run folder (it has no run.json)", "no run folder at
..."). `discover(root)` is what `interp ls` lists: the runs, sweeps and fork families in a
folder, each read without torch, and the ones that cannot be read or are damaged (a lone run, a
sweep's run, a family's fork: `interp.collections.states`), with why; a writer's temporary folder
(".NAME.making.tmp", a fork being made or left by a kill) is none of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from interp.errors import InterpError

RUN, SWEEP, FAMILY = "run", "sweep", "fork family"


def kind_of(path) -> str:
    """"fork family", "sweep" or "run" (anything else: opening it as a run says what is wrong). A folder marked as
    two kinds at once (forks.json, sweep.json, run.json: two of them) is refused as ambiguous, never read as one."""
    from interp.forks.design import FAMILY_FILE, is_family
    from interp.runs import RUN_FILE, Run
    from interp.sweeps.sweep import SWEEP_FILE, Sweep

    marks = [(FAMILY_FILE, FAMILY), (SWEEP_FILE, SWEEP), (RUN_FILE, RUN)]
    found = [(file, kind) for (file, kind), held in zip(marks, (is_family(path), Sweep.is_sweep(path), Run.is_run(path)))
             if held]
    if len(found) > 1:
        files = " and ".join(file for file, _ in found)
        raise InterpError(f"{path} holds both {files}: it is ambiguous ({' or '.join(kind for _, kind in found)}), so it "
                          f"is not read as either; move one of them away (a run, a sweep and a fork family each need "
                          f"their own folder)")
    if is_family(path):
        return FAMILY
    if Sweep.is_sweep(path):
        return SWEEP
    return RUN


def open(path):  # noqa: A001 - `interp.open`, as `Run.open`
    """The Run, Sweep or ForkFamily at `path` (`kind_of`); an InterpError in one line when it is
    none of them or cannot be read."""
    kind = kind_of(path)
    if kind == FAMILY:
        from interp.forks.family import ForkFamily

        return ForkFamily.open(path)
    if kind == SWEEP:
        from interp.sweeps.sweep import Sweep

        return Sweep.open(path)
    from interp.runs import Run

    return Run.open(path)


@dataclass
class Listing:
    """What `discover` found in a folder: each run's summary (`interp.summary.run_summary`), a
    row per sweep and fork family, and the folders that could not be read, with why."""

    root: Path
    runs: list[dict] = field(default_factory=list)
    collections: list[dict] = field(default_factory=list)
    broken: list[tuple[Path, str]] = field(default_factory=list)
    damaged: list[tuple[Path, str]] = field(default_factory=list)  # runs read but damaged (a lone run, a point)


def sweep_row(path) -> dict:
    """A sweep's `interp ls` row: its runs counted per state, its axes, and each damaged run with why."""
    from interp.collections.states import STATES
    from interp.sweeps.sweep import Sweep

    sweep = Sweep.open(path)
    states = sweep.states()
    counts = {state: sum(st.state == state for st in states.values()) for state in STATES}
    return {"path": str(path), "kind": SWEEP, "runs": sum(counts.values()), **counts, "axes": sweep.spec.fields,
            "damaged_runs": {name: st.error for name, st in states.items() if st.state == "damaged"}}


def leftover(path: Path) -> bool:
    """Whether `path` is a writer's temporary (".NAME....tmp": a fork being made beside its folder, ".NAME.making.tmp",
    or one a kill left behind), never a run, sweep or family of its own."""
    return path.name.startswith(".") and path.name.endswith(".tmp")


def discover(root) -> Listing:
    """The runs, sweeps and fork families in `root` (or `root` itself when it is one): inside a
    sweep, its runs; inside a fork family, the family. Never loads torch."""
    from interp.collections.collection import own_state
    from interp.forks.design import is_family, listing
    from interp.runs import Run
    from interp.summary import run_summary
    from interp.sweeps.sweep import Sweep

    root = Path(root)
    if not root.is_dir():
        raise InterpError(f"no folder at {root}")
    points = {}  # inside a sweep, its runs' states against its design (a run whose spec is not its point's is damaged)
    inside = sorted(p for p in root.iterdir() if not leftover(p))
    if Sweep.is_sweep(root):
        paths = [p for p in inside if Run.is_run(p)]
        sweeps = []
        try:
            points = Sweep.open(root).states()
        except InterpError:
            pass
    else:
        paths = [root] if Run.is_run(root) else [p for p in inside if Run.is_run(p)]
        sweeps = [p for p in inside if Sweep.is_sweep(p)]
    families = [root] if is_family(root) else [p for p in inside if is_family(p)]
    out = Listing(root)
    for path in paths:
        try:
            summary = run_summary(Run.open(path))
        except InterpError as exc:
            out.broken.append((path, str(exc)))
            continue
        st = points.get(path.name) or own_state(path)
        summary["damaged"] = st.error if st.state == "damaged" else None
        out.runs.append(summary)
        out.damaged += [(path, st.error)] if st.state == "damaged" else []
    for path, row in [*((p, sweep_row) for p in sweeps), *((p, listing) for p in families)]:
        try:
            out.collections.append(row(path))
        except InterpError as exc:
            out.broken.append((path, str(exc)))
            continue
        out.damaged += [(path / name, error) for name, error in out.collections[-1]["damaged_runs"].items()]
    out.damaged = list(dict(out.damaged).items())  # a family's fork listed as a run too is named once
    return out
