"""A fork family's design from its forks.json alone: no parent, no torch.

`ForkFamily` needs the parent to make each fork's spec; `interp ls` (which must stay light) and
a report whose parent has gone missing need only what the design says: the fork folders'
names and which arms have one fork per step (an arm class's `seedless`). Both read it here, so the naming rule is written
once; `listing` is the family's line of `interp ls`.
"""

from __future__ import annotations

from pathlib import Path

from interp.collections.collection import read_description
from interp.errors import InterpError
from interp.forks.arms import Arm, make_arm

FAMILY_FILE = "forks.json"
FORMAT = 1


def is_family(path) -> bool:
    return (Path(path) / FAMILY_FILE).is_file()


def read_design(path) -> dict:
    """The design stored in `path`/forks.json; InterpError when it is missing or not a family's."""
    return read_description(path, FAMILY_FILE, FORMAT, "a fork family", "a fork family")


def design_arms(design: dict) -> list[Arm]:
    try:
        return [make_arm(a["arm"], **a.get("params", {})) for a in design["arms"]]
    except (KeyError, TypeError, AttributeError) as exc:
        raise InterpError(f"{FAMILY_FILE} lacks part of a fork family ({exc})") from None


def fork_name(step: int, arm: Arm, seed: int) -> str:
    return f"at{step}-{arm.slug}-s{seed}"


def check_design(design: dict) -> None:
    """Refuse a design whose fork steps or seeds are not a non-empty list of whole numbers >= 0 (a
    hand edit, or the `"steps": []` an empty --at once left behind), naming the bad value."""
    for key, what in (("steps", "fork steps"), ("seeds", "fork seeds")):
        values = design.get(key)
        if (not isinstance(values, list) or not values
                or any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for v in values)):
            raise InterpError(f"{FAMILY_FILE}: {key} must be a non-empty list of {what} (whole numbers >= 0), "
                              f"got {values!r}")


def design_points(design: dict, arms: list[Arm] | None = None) -> list[tuple[str, int, Arm, int]]:
    """(folder name, fork step, arm, fork seed) of every fork, in design order."""
    arms = design_arms(design) if arms is None else arms
    check_design(design)
    try:
        return [(fork_name(step, arm, seed), step, arm, seed)
                for step in design["steps"] for arm in arms
                for seed in (design["seeds"][:1] if arm.seedless else design["seeds"])]
    except (KeyError, TypeError) as exc:
        raise InterpError(f"{FAMILY_FILE} lacks part of a fork family ({exc})") from None


def listing(path) -> dict:
    """A family's `interp ls` row: how many of its forks are done, and which are damaged, read from
    their own folders (`own_state`: without the parent, so without torch)."""
    from interp.collections.collection import own_state

    path = Path(path)
    design = read_design(path)
    states = {name: own_state(path / name) for name, *_ in design_points(design)}
    return {"path": str(path), "kind": "fork family", "forks": len(states),
            "done": sum(st.state == "done" for st in states.values()), "parent": design.get("parent"),
            "damaged": sum(st.state == "damaged" for st in states.values()),
            "damaged_runs": {name: st.error for name, st in states.items() if st.state == "damaged"}}
