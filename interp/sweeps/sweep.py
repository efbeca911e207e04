"""SweepSpec and Sweep: a family of runs as one object, on disk as ordinary run folders.

A sweep folder holds `sweep.json` (the base RunSpec and the axes) and one run folder per
point, so every run analysis works on a sweep's runs unchanged:

    sweeps/k/sweep.json
    sweeps/k/k5-nb300-s0/     an ordinary run folder (run.json, checkpoints/, ...)
    sweeps/k/k10-nb300-s0/

An axis is any RunSpec field by dotted name (`task.k`, `train.lr`, `seed`, ...). Axes combine
as a grid (their product) and/or as explicit points (each a dict of fields); the fixed-D form
sets `task.n_bases = D / K` for each K. Folder names are built from the point's values, so
they are readable and stable. Running a sweep again skips finished runs and resumes
interrupted ones (`interp.collections.training`); adding values to an axis extends it, and a
changed base spec is refused. The table (`Sweep.table()`) is computed from the run folders
alone: one row per point with its axes, status, transition times and censoring flags. A run
folder that cannot be trusted (unreadable, or its run.json not the point's spec in sweep.json)
is `damaged`, with the reason (`interp.collections.states`): never trained, resumed or fitted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import fcntl
import itertools
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from interp.collections.collection import Collection, read_description
from interp.collections.rows import CENSORABLE, MEASURES, identity, measures, table_of
from interp.collections.states import STATES, PointState, examine
from interp.collections.training import train_points
from interp.errors import InterpError
from interp.files import atomic_write_json
from interp.presentable import html
from interp.spec import SECTIONS, RunSpec, dotted_names

# CENSORABLE and MEASURES live in interp.collections.rows, STATES in interp.collections.states
__all__ = ["CENSORABLE", "MEASURES", "STATES", "Sweep", "SweepSpec", "train_sweep"]
train_sweep = train_points  # train every unfinished point of a sweep (`interp.collections.training`)

SWEEP_FILE = "sweep.json"
SWEEP_LOCK = ".lock"  # held while sweep.json is read, extended and written
FORMAT = 1
# short names for folder names; other fields use their own name
SHORT = {"task.k": "k", "task.n_bases": "nb", "seed": "s", "train.lr": "lr", "train.batch_size": "bs",
         "task.direction": "dir", "model.n_layers": "nl", "model.d_model": "dm", "train.weight_decay": "wd",
         "train.steps": "st", "task.len_a": "la", "task.len_b": "lb", "task.len_z": "lz",
         "task.selector_groups": "sg"}
ALWAYS = ("task.k", "task.n_bases", "seed")  # always in the folder name


# ---------------------------------------------------------------------------- values
def field_type(dotted: str) -> str:
    """The declared type of a RunSpec field ("int", "float | None", "bool", "str")."""
    if dotted == "seed":
        return "int"
    section, _, name = dotted.partition(".")
    kind = SECTIONS.get(section)
    for f in dataclasses.fields(kind) if kind else ():
        if f.name == name:
            return str(f.type)
    raise InterpError(f"unknown field {dotted!r}; known: {', '.join(dotted_names())}")


def parse_value(dotted: str, text) -> object:
    """A command-line value of a field, as its declared type ("none" for optional fields)."""
    if not isinstance(text, str):
        return text
    kind = field_type(dotted)
    raw = text.strip()
    if "None" in kind and raw.lower() == "none":
        return None
    base = kind.replace(" | None", "")
    try:
        if base == "int":
            return int(raw)
        if base == "float":
            return float(raw)
        if base == "bool":
            if raw.lower() in ("true", "yes", "1", "on"):
                return True
            if raw.lower() in ("false", "no", "0", "off"):
                return False
            raise ValueError(raw)
    except ValueError:
        raise InterpError(f"{dotted}: {raw!r} is not a valid {base}") from None
    return raw


def parse_point(text: str) -> dict:
    """An explicit point from "FIELD=V,FIELD=V" (e.g. "task.k=10,seed=1")."""
    point = {}
    for item in text.split(","):
        field, sep, value = item.partition("=")
        if not sep:
            raise InterpError(f"a point is FIELD=V,FIELD=V (e.g. task.k=10,seed=1), got {text!r}")
        point[field.strip()] = parse_value(field.strip(), value)
    return point


def parse_axis(text: str) -> tuple[str, list]:
    """"task.k=5,10,20" -> ("task.k", [5, 10, 20])."""
    name, sep, values = text.partition("=")
    name = name.strip()
    if not sep:
        raise InterpError(f"an axis is FIELD=V1,V2,... (e.g. task.k=5,10,20), got {text!r}")
    field_type(name)
    items = [v for v in values.split(",") if v.strip()]
    if not items:
        raise InterpError(f"axis {name} has no values (give FIELD=V1,V2,...)")
    return name, [parse_value(name, v) for v in items]


def _token(value) -> str:
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, float):
        text = f"{value:g}"
    else:
        text = str(value)
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", text)


# ---------------------------------------------------------------------------- the spec
@dataclass(frozen=True)
class SweepSpec:
    """A base RunSpec and how its points vary: grid axes (product), explicit points, fixed D."""

    base: RunSpec
    grid: tuple[tuple[str, tuple], ...] = ()  # (dotted field, values), combined as a product
    points: tuple[dict, ...] = ()  # explicit points, each {dotted field: value}, times the grid
    fixed_d: int | None = None  # with task.k among the axes: task.n_bases = fixed_d / k
    name: str = ""  # a preset's name, for reports

    def __post_init__(self):
        object.__setattr__(self, "grid", tuple((f, tuple(v)) for f, v in self.grid))
        object.__setattr__(self, "points", tuple(dict(p) for p in self.points))

    @property
    def fields(self) -> list[str]:
        """Every field that varies: the grid axes in their order, then the points' fields in the
        RunSpec's field order (never a dict's order, which does not survive sweep.json), then
        n_bases for fixed D. Folder names follow this order."""
        out = [f for f, _ in self.grid]
        order = {name: i for i, name in enumerate(dotted_names())}
        extra = {f for point in self.points for f in point if f not in out}
        out += sorted(extra, key=lambda f: (order.get(f, len(order)), f))
        if self.fixed_d is not None and "task.n_bases" not in out:
            out.append("task.n_bases")
        return out

    def validate(self) -> None:
        self.base.validate()
        seen = set()
        for name, values in self.grid:
            field_type(name)
            if name in seen:
                raise InterpError(f"axis {name} is given twice")
            seen.add(name)
            if not values:
                raise InterpError(f"axis {name} is empty")
            if len(set(map(repr, values))) != len(values):
                raise InterpError(f"axis {name} repeats a value: {list(values)}")
        for point in self.points:
            for name in point:
                field_type(name)
        if self.fixed_d is not None:
            if not isinstance(self.fixed_d, int) or self.fixed_d < 2:
                raise InterpError(f"fixed D must be an integer >= 2, got {self.fixed_d!r}")
            ks = self._ks()
            if not ks:
                raise InterpError("a fixed-D sweep needs task.k as an axis (e.g. --k 3,5,10,20)")
            bad = [k for k in ks if self.fixed_d % k]
            if bad:
                raise InterpError(f"D = {self.fixed_d} is not divisible by K = {', '.join(map(str, bad))}: "
                                  f"n_bases = D / K must be a whole number")
        if not self.combos():
            raise InterpError("the sweep has no points")

    def _ks(self) -> list[int]:
        ks = [v for f, values in self.grid if f == "task.k" for v in values]
        ks += [p["task.k"] for p in self.points if "task.k" in p]
        return ks

    def combos(self) -> list[dict]:
        """Every point as {dotted field: value}, in a stable order."""
        names = [f for f, _ in self.grid]
        grid = [dict(zip(names, values)) for values in itertools.product(*(v for _, v in self.grid))]
        out = []
        for point in self.points or ({},):
            for g in grid:
                combo = {**point, **g}
                if self.fixed_d is not None and "task.k" in combo:
                    combo["task.n_bases"] = self.fixed_d // combo["task.k"]
                out.append(combo)
        return out

    def spec_of(self, combo: dict) -> RunSpec:
        spec = self.base
        for name, value in combo.items():
            spec = spec.replace(name, value)
        return spec

    def name_of(self, spec: RunSpec) -> str:
        """The point's folder name: k, n_bases and seed always, then every other varying field."""
        parts = [f"{SHORT[f]}{_token(spec.get(f))}" for f in ALWAYS]
        for name in self.fields:
            if name in ALWAYS:
                continue
            short = SHORT.get(name, name.rpartition(".")[2])
            parts.append(f"{short}{_token(spec.get(name))}")
        return "-".join(parts)

    def runs(self) -> list[tuple[str, RunSpec, dict]]:
        """(folder name, RunSpec, axis values) of every point; each spec validated, errors name the point."""
        out, names = [], set()
        for combo in self.combos():
            try:
                spec = self.spec_of(combo)
                spec.validate()
            except InterpError as exc:
                where = ", ".join(f"{k}={v}" for k, v in combo.items())
                raise InterpError(f"sweep point {where}: {exc}") from None
            name = self.name_of(spec)
            if name in names:
                raise InterpError(f"two points of the sweep give the same run ({name})")
            names.add(name)
            out.append((name, spec, combo))
        return out

    def to_dict(self) -> dict:
        return {"base": self.base.to_dict(), "grid": [{"field": f, "values": list(v)} for f, v in self.grid],
                "points": [dict(p) for p in self.points], "fixed_d": self.fixed_d, "name": self.name}

    @classmethod
    def from_dict(cls, data: dict) -> SweepSpec:
        try:
            return cls(base=RunSpec.from_dict(data["base"]),
                       grid=tuple((a["field"], tuple(a["values"])) for a in data.get("grid", [])),
                       points=tuple(data.get("points", [])), fixed_d=data.get("fixed_d"), name=data.get("name", ""))
        except (KeyError, TypeError) as exc:
            raise InterpError(f"not a sweep spec: {exc}") from None

    def extended_by(self, new: SweepSpec) -> SweepSpec:
        """This sweep with the values `new` adds; refuses a changed base spec or other axes."""
        if new.base != self.base:
            changed = [n for n in dotted_names() if new.base.get(n) != self.base.get(n)]
            raise InterpError(f"the sweep's base spec differs from the stored one ({', '.join(changed)}); "
                              f"a sweep's base cannot change: use another folder")
        if [f for f, _ in new.grid] != [f for f, _ in self.grid] or new.fixed_d != self.fixed_d:
            raise InterpError("the sweep's axes differ from the stored ones; only values can be added to an axis")
        grid = tuple((f, tuple(dict.fromkeys([*old, *added])))
                     for (f, old), (_, added) in zip(self.grid, new.grid))
        points = list(self.points) + [p for p in new.points if p not in self.points]
        return dataclasses.replace(self, grid=grid, points=tuple(points))


# ---------------------------------------------------------------------------- the folder
class Sweep(Collection):
    """A sweep folder: its spec, its points' run folders and their table."""

    KIND = "sweep"

    def __init__(self, path: Path, spec: SweepSpec):
        self.path = Path(path)
        self.spec = spec

    @classmethod
    def open(cls, path: str | Path) -> Sweep:
        path = Path(path)
        spec = SweepSpec.from_dict(read_description(path, SWEEP_FILE, FORMAT, "a sweep folder", "a sweep description"))
        spec.validate()
        return cls(path, spec)

    @classmethod
    def create(cls, path: str | Path, spec: SweepSpec) -> Sweep:
        """Make (or extend) the sweep folder at `path`; every point is validated before writing.
        Reading, extending and writing sweep.json happen under a lock on the sweep folder, so
        two processes creating or extending one sweep at once both land in its sweep.json."""
        spec.validate()
        spec.runs()
        path = Path(path)
        if str(path).strip() in ("", "."):
            raise InterpError("the sweep folder must be a non-empty path")
        if path.exists() and not path.is_dir():
            raise InterpError(f"{path} is a file; a sweep needs a folder")
        if (path / SWEEP_FILE).exists():
            cls.open(path).spec.extended_by(spec).runs()  # refuse before writing anything (the lock file)
        else:  # another process may write sweep.json meanwhile: checked again under the lock
            _check_empty(path, sweep_ok=True)
        path.mkdir(parents=True, exist_ok=True)
        with _locked(path):
            if (path / SWEEP_FILE).exists():  # perhaps written by another process since the checks above
                spec = cls.open(path).spec.extended_by(spec)
                spec.runs()
            else:
                _check_empty(path)
            atomic_write_json(path / SWEEP_FILE, {"format": FORMAT, **spec.to_dict(),
                                                  "updated": _dt.datetime.now(_dt.timezone.utc).isoformat(
                                                      timespec="seconds")})
        return cls(path, spec)

    def __repr__(self) -> str:
        return f"Sweep({str(self.path)!r}, {len(self.points())} points over {', '.join(self.spec.fields) or 'no axis'})"

    def _repr_html_(self) -> str:
        """A notebook card (`interp.display.family`, found by type): axes, counts per status, the table's head."""
        return html(self)

    @staticmethod
    def is_sweep(path: str | Path) -> bool:
        return (Path(path) / SWEEP_FILE).is_file()

    def points(self) -> list[tuple[str, RunSpec, dict]]:
        return self.spec.runs()

    def examine(self, name: str) -> PointState:
        """The state of one point (`interp.collections.states.examine`), without examining the others."""
        spec = next((spec for n, spec, _ in self.points() if n == name), None)
        if spec is None:
            raise InterpError(f"{name!r} is not a point of the sweep {self.path}")
        return examine(self.path / name, spec)

    def table(self, circuits: bool = False):
        """One row per point (pandas): axis values, K, D, direction, seed, lr, batch size, status,
        error, bases per selector set (n_bases, or task.selector_groups when set), steps run,
        tau_half, tau_window, t_start, t_end, plateau height, snap step, steps to candidate
        accuracy >= 0.99 and to exact match >= 0.99, the shuffle gap's onset and lead (gap_onset,
        gap_lead, gap_lead_snap, gap_lead_steps), wall seconds, the run's `outcome` and `decided_at`
        (interp.outcome: transitioned, stuck, diverged, ...), and a `censored_<measure>` flag
        for every measure a finished run never reached (NaN value). With `circuits`, also each
        run's circuit columns, read from its analysis cache (`interp.sweeps.circuits`: the
        routing head, its onsets and leads, its ablation effect at tau, the groups above 80% at
        tau/2, and `circuits_reason` for what cannot be had); this loads torch, the plain table
        does not."""
        if circuits:
            from interp.sweeps.circuits import circuit_row

        rows = []
        combos = {name: combo for name, _, combo in self.points()}
        for name, st in self.states().items():
            spec = st.spec  # what the run's run.json says (None when unreadable), never sweep.json's claim
            row = {"run": name, "status": st.state, "error": st.error,
                   **{f: (math.nan if spec is None else spec.get(f)) for f in combos[name]}}
            row.update(identity(spec))
            row["bases_per_selector_set"] = math.nan if spec is None else spec.task.bases_per_selector_set
            try:
                row.update(measures(st.run if st.state != "damaged" else None, spec, st.state))
                row.update(outcome_columns(st.run if st.state != "damaged" else None))
            except InterpError as exc:  # damaged in a way only the summary reads (or since it was examined)
                row.update(measures(None, spec, "damaged"), status="damaged", error=str(exc))
                row.update(outcome_columns(None))
            if circuits:
                row.update(circuit_row(st.run, row["status"], bool(row["censored_tau_half"])))
            rows.append(row)
        return table_of(rows)

    def status_lines(self, table=None) -> list[str]:
        """One human line per run: axes, status, steps, tau, wall time (of `table`, default
        `self.table()`); a value a damaged run's run.json cannot tell is "?"."""
        import pandas as pd

        df = self.table() if table is None else table
        records = df.to_dict("records")
        axes_of = [" ".join(f"{f}={_cell(f, r[f])}" for f in self.spec.fields) for r in records]
        width = max([32, *map(len, axes_of)])
        name_width = max([28, *(len(r["run"]) for r in records)])
        lines = []
        for r, axes in zip(records, axes_of):
            tau = "-" if _nan(r["tau_half"]) else f"{int(r['tau_half'])}"
            if r.get("censored_tau_half"):
                tau = f">{r['steps_run']}"
            wall = "-" if _nan(r["wall_seconds"]) else f"{r['wall_seconds']:.0f} s"
            steps = "-" if pd.isna(r["steps_run"]) else f"{r['steps_run']}/{_cell('train.steps', r['planned_steps'])}"
            line = (f"{r['run']:<{name_width}} {axes:<{width}} {r['status']:<12} steps {steps:<12} "
                    f"tau_half {tau:<7} wall {wall}")
            if r.get("outcome") in DECIDED:  # transitioned / stuck / diverged (interp.outcome)
                line += f"  {r['outcome']} at {int(r['decided_at'])}"
            if isinstance(r["error"], str) and r["error"]:  # pandas shows a missing one as NaN
                line += f"  error: {r['error']}"
            lines.append(line)
        return lines


def _nan(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _check_empty(path: Path, sweep_ok: bool = False) -> None:
    """Refuse a folder that holds anything but the sweep's own lock (and another writer's temporary
    files; with `sweep_ok`, the sweep.json another process has just written)."""
    allowed = {SWEEP_LOCK, SWEEP_FILE} if sweep_ok else {SWEEP_LOCK}
    if path.is_dir() and any(p.name not in allowed and not p.name.endswith(".tmp") for p in path.iterdir()):
        raise InterpError(f"{path} exists, is not empty and is not a sweep; choose another folder")


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive OS lock on the sweep folder's lock file, waited for (held for milliseconds)."""
    fd = os.open(path / SWEEP_LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _cell(field: str, value) -> str:
    """A table value as the status line shows it: "?" for NaN, an int field as an int."""
    if _nan(value):
        return "?"
    if isinstance(value, float) and field_type(field) == "int" and value.is_integer():
        return str(int(value))
    return str(value)


DECIDED = ("transitioned", "stuck", "diverged")


def outcome_columns(run) -> dict:
    """A run's `outcome` (transitioned, stuck, diverged, inconclusive, crashed, running: interp.outcome) and the step
    it was decided at; None for a run not started, damaged, or with K = 1."""
    from interp.outcome import outcome_of

    if run is None or run.spec.task.k < 2:
        return {"outcome": None, "decided_at": None}
    judged = outcome_of(run)
    return {"outcome": judged.outcome, "decided_at": judged.decided_at}

