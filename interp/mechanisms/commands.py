"""The command that adds replicates to what a verdict rests on: more seeds of a run's own setting, a sweep's design
or a fork family's (SPEC 10: a row never recommends a command already run, or one that cannot change its result).

- a run: a seed sweep of its own spec (`interp sweep --preset P --FIELD VALUE ... --seed S..S+n-1`), the preset
  the one that needs the fewest flags;
- a sweep: the same sweep with more seeds (`--out` the sweep itself: a sweep folder is extended);
- a fork family: the same design with more fork seeds, in a folder beside it (a family keeps its design).

Torch-free: specs and designs are read as data.
"""

from __future__ import annotations

import shlex

from interp.spec import RunSpec

WORKERS = "--workers 2"


def _flat(spec: RunSpec) -> dict[str, object]:
    d = spec.to_dict()
    return {f"{section}.{k}": v for section in ("task", "model", "train") for k, v in d[section].items()}


def _value(v) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    return f"{v:g}" if isinstance(v, float) else str(v)


def spec_flags(spec: RunSpec) -> tuple[str, list[str]]:
    """The run preset closest to `spec` and the `interp sweep` flags that turn it into `spec` (seed aside)."""
    from interp.presets import PRESETS

    mine = _flat(spec)
    best = None
    for name, preset in PRESETS.items():
        theirs = _flat(preset)
        flags = [f"--{dotted.partition('.')[2].replace('_', '-')} {shlex.quote(_value(v))}"
                 for dotted, v in mine.items() if theirs.get(dotted) != v]
        if best is None or len(flags) < len(best[1]):
            best = (name, flags)
    return best


def run_seeds(spec: RunSpec, path: str, n: int) -> str:
    """`n` seeds of a run's own setting (its seed first), as one sweep, then its reconciliation."""
    preset, flags = spec_flags(spec)
    seeds = ",".join(str(spec.seed + i) for i in range(n))
    name = f"sweeps/seeds-{str(path).rstrip('/').rpartition('/')[2] or 'run'}"
    return " ".join(["interp sweep --preset", preset, *flags, "--seed", seeds, "--out", name, WORKERS])


def sweep_seeds(sweep, n_runs_needed: int) -> str:
    """More seeds of a sweep's design, in the sweep's own folder (a sweep is extended by new axis values)."""
    grid = dict(sweep.spec.grid)
    have = list(grid.get("seed", (sweep.spec.base.seed,)))
    points = max(len(sweep.spec.runs()) // max(len(have), 1), 1)
    per_point = -(-n_runs_needed // points)  # ceil
    seeds = sorted(set(have) | set(range(max(per_point, len(have) + 1))))
    if sweep.spec.name:
        return f"interp sweep --preset {sweep.spec.name} --seed {','.join(map(str, seeds))} --out {sweep.path} {WORKERS}"
    return (f"interp sweep {sweep.path} with the seed axis extended to {','.join(map(str, seeds))} "
            f"(interp sweep --grid seed={','.join(map(str, seeds))} ... --out {sweep.path})")


def family_seeds(family, n_per_arm: int) -> str:
    """The family's design with fork seeds 0..n_per_arm-1 (at least its own), in a folder beside it."""
    from interp.forks.arms import arm_of

    d = family.design
    seeds = sorted(set(d["seeds"]) | set(range(n_per_arm)))
    arms = ",".join(arm_of(a).label for a in d["arms"])
    parts = ["interp fork", shlex.quote(str(d["parent"])), "--at", ",".join(map(str, d["steps"])), "--arm",
             shlex.quote(arms), "--seed", ",".join(map(str, seeds)), "--steps", str(d["horizon"])]
    if d.get("escape"):
        parts += ["--escape", shlex.quote(d["escape"])]
    if d.get("relapse"):
        parts += ["--relapse", shlex.quote(d["relapse"])]
    if d.get("gamma_every"):
        window = f"{d['gamma_from']}:{d['gamma_window']}" if d.get("gamma_from") else str(d["gamma_window"])
        parts += ["--gamma-every", str(d["gamma_every"]), "--gamma-window", window]
    for key, value in (d.get("settings") or {}).items():
        flag = f"--{key.replace('_', '-')}"
        parts += ([flag if value else f"--no-{key.replace('_', '-')}"] if isinstance(value, bool)
                  else [flag, shlex.quote(_value(value))])
    return " ".join(parts + ["--out", f"{str(family.path).rstrip('/')}-seeds", WORKERS])
