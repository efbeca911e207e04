"""What a sweep and a fork family have in common: a folder of ordinary run folders, one per point.

A collection says what its points are (`points()`: folder name, RunSpec, the point's own
values) and makes its table; everything else is read from the run folders alone, the same
way for both: each point's state (`interp.collections.states`), its Run, the counts per state,
and the state of every point after training (`interp.collections.training.train_points`).
"""

from __future__ import annotations

import json
from pathlib import Path

from interp.collections.states import STATES, PointState, examine
from interp.errors import InterpError
from interp.runs import Run


def read_description(path, file_name: str, fmt: int, folder: str, described: str) -> dict:
    """The JSON object in `path`/`file_name` that makes a folder a collection (sweep.json, forks.json);
    InterpError when it is missing ("`path` is not `folder`"), not JSON, or not `described` of format `fmt`."""
    file = Path(path) / file_name
    if not file.is_file():
        raise InterpError(f"{path} is not {folder} (it has no {file_name})")
    try:
        data = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InterpError(f"{file} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != fmt:
        raise InterpError(f"{file} is not {described} of format {fmt}")
    return data


def own_state(path) -> PointState:
    """The state of a run folder read without its collection's design (a lone run, or a fork listed by
    `interp ls` without its parent): `examine` against the spec its own run.json holds, so that only
    its files (unreadable, missing, truncated) can make it damaged."""
    path = Path(path)
    if not Run.is_run(path):
        return examine(path, None)
    try:
        run = Run.open(path)
    except InterpError as exc:
        return PointState("damaged", str(exc))
    return examine(path, run.spec)


class Collection:
    """The base of `interp.sweeps.sweep.Sweep` and `interp.forks.family.ForkFamily`."""

    KIND = "collection"  # "sweep" or "fork family": what error messages and `interp ls` call it
    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    def points(self) -> list[tuple[str, object, dict]]:
        """(folder name, RunSpec, the point's values) of every point, in the collection's order."""
        raise NotImplementedError

    def states(self) -> dict[str, PointState]:
        """Every point's state, by folder name, in the collection's order."""
        return {name: examine(self.path / name, spec) for name, spec, _ in self.points()}

    def examine(self, name: str) -> PointState:
        """The state of one point."""
        states = self.states()
        if name not in states:
            raise InterpError(f"{name!r} is not a point of the {self.KIND} {self.path}")
        return states[name]

    def state_of(self, name: str) -> tuple[str, str | None]:
        """(status, error) of one point: done, running (its writer's lock is held), failed,
        damaged (the error says which file and why), interrupted (checkpoints, not finished,
        nobody writing) or not started."""
        st = self.examine(name)
        return st.state, st.error

    @property
    def runs(self) -> list[Run]:
        """The Run of each point that has a usable run folder: not started points have none,
        and damaged ones are left out (the table names them, with the reason)."""
        return [st.run for st in self.states().values() if st.run is not None]

    def run(self, name: str) -> Run:
        return Run.open(self.path / name)

    def counts(self) -> dict[str, int]:
        """How many points are in each state (every state of STATES, damaged included)."""
        states = [st.state for st in self.states().values()]
        return {state: states.count(state) for state in STATES}

    def final_states(self, outcome) -> dict[str, tuple[str, str | None]]:
        """(status, error) of every point after training returned `outcome`: what the run
        folders say now, except that a run the executor reports failed without its folder
        saying so (a worker that died before writing its status) is failed."""
        failed = {r["name"]: r["error"] for r in outcome.results if r["state"] == "failed"}
        out = {}
        for name, st in self.states().items():
            out[name] = (st.state, st.error)
            if name in failed and st.state in ("interrupted", "not started"):
                out[name] = ("failed", failed[name])
        return out

    def table(self):
        """One row per point (pandas)."""
        raise NotImplementedError
