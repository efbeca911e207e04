"""A family of forks: fork steps x arms x fork seeds of one parent, trained like a sweep.

    forks/fam/forks.json               the parent, fork steps, arms, seeds, horizon, options
    forks/fam/at500-minibatch-s0/      an ordinary run folder (a fork: `interp.forks.fork`)
    forks/fam/at500-full_batch-s0/
    forks/fam/.lock                    held (an OS file lock) while forks.json is written and forks are made
    forks/fam/.at500-...-s0.making.tmp a fork being made, moved into its folder under that folder's own lock

Arms without randomness of their own (`continue`, `full_batch`: their class's `seedless`) get
one fork per step, not one per seed. `ForkFamily.train` first makes every missing fork folder (the state at each fork step
is computed once: kept, or replayed and verified, `interp.replay`), then hands the
folders to the executors (`interp.collections.training.train_points`: the local pool or Ray,
idempotent and resumable; a finished family trains nothing). The same command started twice at
once makes each fork once (the second waits on the `.lock`) and trains each in one process (a fork
the other holds is skipped and named, as sweeps do). The table is the sweep table's
columns plus fork_step, arm, arm_params, fork_seed, horizon, escape_half and escape_snap (steps
after the fork to tau_half and to the snap), escape under the family's escape criterion
(`interp.forks.escape`, named in escape_criterion; forks.json's "escape", absent = tau_half), their
censored_* flags (never reached within the horizon: a lower bound, never a value), gamma, the realised
update power over the window (ratio of sums), and gamma_median, the median per-step ratio over gamma_range;
steps_run counts the steps evaluated after the fork (last_step is the absolute last step).
A family whose parent was moved or deleted is still read (status, table, card, report,
mechanisms) from its forks' own folders, the parent named as missing (`parent_problem`).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import math
import os
import shutil
import sys
from pathlib import Path

from interp.collections.collection import Collection
from interp.errors import InterpError
from interp.files import LockHeld, atomic_write_json
from interp.forks.arms import Arm
from interp.forks.design import FAMILY_FILE, FORMAT, design_arms, design_points, read_design
from interp.forks.fork import (DEFAULT_GAMMA_WINDOW, STORAGE, check_out, check_state, create_fork, fork_block,
                               fork_spec, resolve_at)
from interp.runs import LOCK_FILE, RESUME_FILE, RUN_FILE, Run, RunLock

__all__ = ["ForkFamily", "escapes", "FAMILY_FILE", "FORMAT"]


class ForkFamily(Collection):
    """A fork family folder: its parent, design, fork folders and table."""

    KIND = "fork family"

    def __init__(self, path: Path, design: dict):
        self.path = Path(path)
        from interp.forks.escape import criterion_of

        self.design = design
        self.arms: list[Arm] = design_arms(design)
        self.escape = criterion_of(design)  # the family's escape criterion (absent: the default)

    @property
    def gamma_range(self) -> tuple[int, int]:
        """(A, B): the per-step Gamma median is taken over steps A..B after the fork (B: the window)."""
        return int(self.design.get("gamma_from", 0)), int(self.design["gamma_window"])

    def judging(self, escape=None, gamma_window=None) -> tuple:
        """(criterion, gamma range) the table is judged under: the family's, or those given (re-judged
        from the forks' logs, nothing trained); refused when the hold leaves no room within the horizon or the
        range lies outside the window the forks measured."""
        from interp.forks.escape import parse_escape, parse_gamma_window

        criterion = self.escape if escape is None else parse_escape(escape)
        criterion.check_horizon(int(self.design["horizon"]))
        window = self.gamma_range
        given = window if gamma_window is None else (
            gamma_window if isinstance(gamma_window, tuple) else parse_gamma_window(gamma_window))
        if given != window:  # another range than the family's own
            window = given
            if not self.design.get("gamma_every"):
                raise InterpError(f"--gamma-window {window[0]}:{window[1]}: {self.path} was made without "
                                  f"--gamma-every, so its forks logged no Gamma")
            if window[1] > int(self.design["gamma_window"]):
                raise InterpError(f"--gamma-window {window[0]}:{window[1]} lies outside the window its forks measured "
                                  f"(steps 1..{self.design['gamma_window']} after the fork); give a range within it")
        return criterion, window

    # ------------------------------------------------------------------ make / open
    @classmethod
    def create(cls, parent, at, arms: list[Arm], seeds, horizon: int, out, *, gamma_every: int = 0,
               gamma_window: int | str | tuple = DEFAULT_GAMMA_WINDOW, settings: dict | None = None,
               device: str | None = None, escape=None, relapse=None) -> ForkFamily:
        """Write (or re-open, when identical) the family folder `out`; validates every point first (and,
        given the `device` the forks will train on, that each fits there: `interp.devices.check_fits`).
        `escape`: the escape criterion (`interp.forks.escape`; None: the default); `gamma_window` the
        window's length B, or "A:B" (the per-step median over steps A..B, within the horizon); `relapse`: the
        relapse criterion a "relapse" step was found with (`interp.forks.relapse`; None: the default), kept so
        that reconcile judges the fork state by it."""
        from interp.forks.escape import check_gamma_window, parse_escape, parse_gamma_window
        from interp.forks.relapse import parse_relapse

        parent = parent if isinstance(parent, Run) else Run.open(parent)
        out = Path(out)
        check_out(parent, out)
        criterion = parse_escape(escape)
        relapse = None if relapse is None else parse_relapse(relapse)
        if isinstance(horizon, int) and not isinstance(horizon, bool):
            criterion.check_horizon(horizon)
        gamma_from = 0
        if isinstance(gamma_window, (str, tuple)):  # a range given: checked against the horizon
            gamma_from, gamma_window = gamma_window if isinstance(gamma_window, tuple) else parse_gamma_window(
                gamma_window)
            check_gamma_window((gamma_from, gamma_window), horizon)
        at = [a for a in (at if isinstance(at, (list, tuple)) else [at]) if str(a).strip()]
        if not at:
            raise InterpError("--at gives no fork step; give saved steps, tau/N, F*tau, pre, mid, post, first or "
                              "last, comma-separated")
        steps = sorted(dict.fromkeys(resolve_at(parent, a, relapse) for a in at))
        for step in steps:  # a fork of a fork starts only from a state it kept: refused before forks.json is written
            check_state(parent, step)
        seeds = list(dict.fromkeys(seeds))
        if not seeds or any(not isinstance(s, int) or isinstance(s, bool) or s < 0 for s in seeds):
            raise InterpError(f"fork seeds must be integers >= 0, got {seeds}")
        design = {"format": FORMAT, "parent": os.path.abspath(parent.path), "steps": steps,
                  "arms": [{"arm": a.name, "params": a.kwargs} for a in arms], "seeds": seeds, "horizon": horizon,
                  "gamma_every": gamma_every, "gamma_window": gamma_window, "settings": dict(settings or {})}
        if gamma_from:  # absent: the whole window, as in families made before the range
            design["gamma_from"] = gamma_from
        if not criterion.is_default:  # absent: the default criterion, as in families made before the option
            design["escape"] = criterion.text
        if relapse is not None and relapse != parse_relapse(None):  # absent: the default, as in families before it
            design["relapse"] = relapse.text
        family = cls(out, design)
        family._check(parent, device)  # every point checked before anything is written
        file = out / FAMILY_FILE
        if file.exists():
            return family._same_as_stored(parent)
        _check_empty(out)
        out.mkdir(parents=True, exist_ok=True)
        with _locked(out):  # the same command started twice at once: the second finds the first's forks.json
            if file.exists():
                return family._same_as_stored(parent)
            _check_empty(out)
            atomic_write_json(file, design)
        return family

    def _same_as_stored(self, parent: Run) -> ForkFamily:
        """The family its folder holds, when its forks.json has this design (a setting given or left at the
        parent's value is the same); refused, naming what differs, if not."""
        stored = type(self).open(self.path)

        def effective(design: dict) -> dict:
            settings = design.get("settings")
            if not isinstance(settings, dict) or any(k not in STORAGE for k in settings):
                return design  # a hand edit: compared as it is
            return {**design, "settings": {k: v for k, v in settings.items() if parent.spec.get(f"train.{k}") != v}}

        # a family made before the relapse criterion was recorded (none stored) is the same family: read as the default
        mine = {k: v for k, v in effective(self.design).items() if k != "relapse" or "relapse" in stored.design}
        if effective(stored.design) != mine:
            raise InterpError(f"{self.path} holds another fork family: its {FAMILY_FILE} has "
                              f"{_differences(effective(stored.design), mine)}; a family keeps the "
                              f"design it was made with (run it again without the change, or give another --out)")
        return stored

    @classmethod
    def open(cls, path) -> ForkFamily:
        path = Path(path)
        design = read_design(path)
        try:
            return cls(path, design)
        except (KeyError, TypeError) as exc:
            raise InterpError(f"{path / FAMILY_FILE} lacks part of a fork family ({exc})") from None

    @staticmethod
    def is_family(path) -> bool:
        return (Path(path) / FAMILY_FILE).is_file()

    def __repr__(self) -> str:
        d = self.design
        return (f"ForkFamily({str(self.path)!r}, steps {d['steps']}, arms {[a['arm'] for a in d['arms']]}, "
                f"seeds {d['seeds']})")

    def _repr_html_(self) -> str:
        """A notebook card (`interp.display.family`, found by type): design, counts per status, the table's head."""
        from interp.presentable import html

        return html(self)

    @property
    def parent(self) -> Run:
        return Run.open(self.design["parent"])

    def parent_problem(self) -> str | None:
        """Why the parent cannot be opened (moved, deleted, unreadable), or None. Without it the forks are
        read from their own folders (`states`, `table`: status, the card, the report, mechanisms), since a
        made fork needs nothing of its parent; making or training forks needs it and is refused."""
        try:
            self.parent
        except InterpError as exc:
            return str(exc)
        return None

    def _parent_or_none(self) -> Run | None:
        try:
            return self.parent
        except InterpError:
            return None

    # ------------------------------------------------------------------ points
    def _points(self, parent) -> list[tuple[str, object, dict]]:
        d = self.design
        return [(name, fork_spec(parent, step, arm, d["horizon"], d["settings"]), {"step": step, "arm": arm, "seed": seed})
                for name, step, arm, seed in design_points(d, self.arms)]

    def _check(self, parent, device: str | None) -> None:
        """Refuse a point whose fork block is bad or (given `device`) that cannot train there."""
        from interp.devices import check_fits

        d = self.design
        for name, spec, point in self._points(parent):
            fork_block(parent, point["step"], point["arm"], point["seed"], d["horizon"], d["gamma_every"],
                       d["gamma_window"], "")
            if device is not None:
                check_fits(spec, device)

    def points(self) -> list[tuple[str, object, dict]]:
        """(folder name, RunSpec, {"step", "arm", "seed"}) of every fork, in design order (the RunSpec None
        when the parent cannot be opened: each fork's is then the one its own run.json holds)."""
        parent = self._parent_or_none()
        if parent is None:
            return [(name, None, {"step": step, "arm": arm, "seed": seed})
                    for name, step, arm, seed in design_points(self.design, self.arms)]
        return self._points(parent)

    def states(self) -> dict:
        """Every fork's state (`interp.collections.states.examine`); a folder whose fork block is not the
        point's (another parent step, arm, seed or parent checkpoint) is damaged. Without the parent
        (`parent_problem`) each fork is read against its own run.json, and only the parent's checkpoint
        and spec hashes in its fork block cannot be checked."""
        from interp.collections.states import PointState, examine

        parent = self._parent_or_none()
        if parent is None:
            d = self.design
            return {name: _without_parent(self.path / name, {
                "parent": d["parent"], "parent_step": step, "arm": arm.name, "params": arm.kwargs, "seed": seed,
                "horizon": d["horizon"], "gamma_every": d["gamma_every"], "gamma_window": d["gamma_window"]})
                for name, step, arm, seed in design_points(d, self.arms)}
        out = {}
        for name, spec, point in self._points(parent):
            st = examine(self.path / name, spec)
            if st.run is not None:
                want = fork_block(parent, point["step"], point["arm"], point["seed"], self.design["horizon"],
                                  self.design["gamma_every"], self.design["gamma_window"], "")
                have = {k: v for k, v in (st.run.fork or {}).items() if k != "state"}
                want.pop("state")
                if have != want:
                    diff = sorted(k for k in set(have) | set(want) if have.get(k) != want.get(k))
                    st = PointState("damaged", f"{self.path / name / 'run.json'}: its fork block differs from "
                                               f"the family's point in {', '.join(diff)}", spec=st.spec)
                elif _half_made(st):
                    st = PointState("not started", spec=spec)  # made but its state never written: made again
            out[name] = st
        return out

    # ------------------------------------------------------------------ make and train
    def prepare(self, progress: bool = False) -> int:
        """Make every fork folder that does not exist yet (a half-made one is made again); the state
        at each fork step is computed once. Each fork is made holding its folder's writer lock, so a fork
        another process holds (training or making it) is left as it is: `states` says running, and
        `train` names it. Returns how many were made."""
        from interp.replay import state_at

        parent = self.parent
        waiting = f"interp: another process is making the forks of {self.path}; waiting for it" if progress else None
        made = 0
        with _locked(self.path, waiting):  # one process makes them; one started with it finds them made
            for stale in self.path.glob(f".*{MAKING}"):  # a killed prepare's (only prepare makes them, under this lock)
                shutil.rmtree(stale, ignore_errors=True)
            states = self.states()
            todo = [(n, s, p) for n, s, p in self._points(parent) if states[n].state == "not started"]
            cache: dict[int, tuple] = {}
            for name, _, point in todo:
                step = point["step"]
                if step not in cache:
                    cache[step] = state_at(parent, step, progress)
                state, source = cache[step]
                d = self.design
                made += _make_held(self.path / name, functools.partial(
                    create_fork, parent, step, point["arm"], d["horizon"], seed=point["seed"], gamma_every=d["gamma_every"],
                    gamma_window=d["gamma_window"], settings=d["settings"], state=state, source=source))
        return made

    def train(self, backend: str = "local", workers: int = 1, threads: int | None = None, device: str = "cpu",
              address: str | None = None, cpus_per_run: int | float = 1, gpus_per_run: int | float = 0,
              progress: bool = True, sink=None, keep_threads: bool = False):
        """Make the missing forks, then train every unfinished one (`train_points`; `sink`: the sink factory
        each is handed, `interp.sinks`; `keep_threads`: forks trained before resume with their own threads);
        returns its Outcome."""
        from interp.collections.executors import check_options
        from interp.collections.training import train_points
        from interp.forks.arm_steps import fork_stepper

        check_options(backend, workers, threads, cpus_per_run, gpus_per_run)
        self._check(self.parent, device)  # before any fork folder is written
        self.prepare(progress)
        return train_points(self, backend=backend, workers=workers, threads=threads, device=device, address=address,
                            cpus_per_run=cpus_per_run, gpus_per_run=gpus_per_run, progress=progress, create=False,
                            stepper=fork_stepper, sink=sink, keep_threads=keep_threads)

    # ------------------------------------------------------------------ the table
    def table(self, circuits: bool = False, escape=None, gamma_window=None):
        """One row per fork: the sweep table's columns (`interp.collections.rows`) and the fork's
        (module docstring). Escapes count evaluated steps after the fork step; `escape` and `censored_escape`
        under the family's criterion, or `escape` (a criterion's text) given; `gamma_median` over its
        range, or `gamma_window` ("A:B") given (`judging`). With `circuits`,
        also each fork's circuit columns, read from its analysis cache (`interp.sweeps.circuits`,
        filled by `interp analyze FAMILY`); this loads torch, the plain table does not."""
        from interp.collections.rows import identity, measures, table_of

        criterion, window = self.judging(escape, gamma_window)
        judged = {"escape_criterion": criterion.text, "gamma_range": f"{window[0]}:{window[1]}"}
        if circuits:
            from interp.sweeps.circuits import circuit_row

        rows = []
        for (name, _, point), st in zip(self.points(), self.states().values()):
            spec = st.spec
            arm = point["arm"]
            row = {"run": name, "status": st.state, "error": st.error, "fork_step": point["step"], "arm": arm.name,
                   "arm_params": arm.params_text, "fork_seed": point["seed"], "horizon": self.design["horizon"],
                   "eval_every": spec.train.eval_every if spec is not None else math.nan}  # an escape's resolution
            row.update(identity(spec))
            try:
                row.update(measures(st.run if st.state != "damaged" else None, spec, st.state))
                row["last_step"] = row.pop("steps_run")  # absolute; steps_run counts steps after the fork
                row.update(escapes(st.run if st.state != "damaged" else None, point["step"], st.state, criterion,
                                   window))
            except InterpError as exc:
                row.update(measures(None, spec, "damaged"), **escapes(None, point["step"], "damaged"),
                           status="damaged", error=str(exc))
                row["last_step"] = None
            row.update(judged)
            if circuits:
                row.update(circuit_row(st.run, row["status"], bool(row["censored_tau_half"])))
            rows.append(row)
        return table_of(rows)


FAMILY_LOCK = ".lock"  # held while forks.json is written and while the fork folders are made


MAKING = ".making.tmp"  # a fork made beside its folder (".NAME.making.tmp"), then moved in under the folder's lock


def _half_made(st) -> bool:
    """A fork whose starting state was never written (a kill while it was made): made again. That includes one a
    trainer took up and failed for want of that state, with no checkpoint past its fork step (it would fail
    the same way again)."""
    if (st.run.path / RESUME_FILE).exists():
        return False
    start = (st.run.fork or {}).get("parent_step")
    trained = any(step > start for step in st.run.steps) if isinstance(start, int) else bool(st.run.steps)
    return st.state in ("interrupted", "not started") or (st.state == "failed" and not trained)


def _make_held(folder: Path, make) -> bool:
    """Make the fork `folder` anew, holding its writer lock throughout (taken without waiting): False, and nothing
    touched, when another process holds it or has made the fork since it was looked at. Its half-made files are
    removed, the fork is made (`make`) in a sibling, whose own lock `Run.create` takes, and moved in, run.json
    first and the resume state last: the folder's lock file stays, held, and a kill leaves a half-made fork again."""
    folder.mkdir(exist_ok=True)
    lock = RunLock(folder)
    try:
        lock.acquire(retries=0)
    except LockHeld:
        return False
    try:
        if (folder / RESUME_FILE).exists() or (not Run.is_run(folder) and any(
                p.name != LOCK_FILE for p in folder.iterdir())):
            return False  # made (or filled) by another process between the look and the lock
        for p in folder.iterdir():
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            elif p.name != LOCK_FILE:
                p.unlink()
        temp = folder.with_name(f".{folder.name}{MAKING}")
        shutil.rmtree(temp, ignore_errors=True)
        try:
            make(temp)
            order = {RUN_FILE: 0, RESUME_FILE: 2}
            for p in sorted((p for p in temp.iterdir() if p.name != LOCK_FILE), key=lambda p: order.get(p.name, 1)):
                os.replace(p, folder / p.name)
        finally:
            shutil.rmtree(temp, ignore_errors=True)
    finally:
        lock.release()
    return True


def _check_empty(out: Path) -> None:
    """Refuse a folder that holds anything but the family's lock (and another writer's temporaries)."""
    if out.exists() and (not out.is_dir() or any(p.name != FAMILY_LOCK and not p.name.endswith(".tmp")
                                                 for p in out.iterdir())):
        raise InterpError(f"{out} exists and is not an empty folder; choose another folder")


@contextlib.contextmanager
def _locked(path: Path, waiting: str | None = None):
    """An exclusive OS lock on the family folder's lock file, waited for (`waiting`: said on stderr first);
    the operating system releases it with a killed process."""
    fd = os.open(path / FAMILY_LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            if waiting:
                print(waiting, file=sys.stderr)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _without_parent(path: Path, want: dict):
    """The state of a fork read from its own folder, its fork block checked against `want` (the design's)."""
    from interp.collections.collection import own_state
    from interp.collections.states import PointState

    st = own_state(path)
    if st.run is None:
        return st
    have = st.run.fork or {}
    diff = sorted(k for k in want if have.get(k) != want[k])
    if diff:
        return PointState("damaged", f"{path / 'run.json'}: its fork block differs from the family's point in "
                                     f"{', '.join(diff)}", spec=st.run.spec)
    if _half_made(st):
        return PointState("not started", spec=st.run.spec)  # made but its state never written
    return st


def _differences(stored: dict, asked: dict) -> str:
    """"settings.eval_every the parent's (this command asks 2)": what a family run again would change."""
    parts = []
    for key in dict.fromkeys([*stored, *asked]):
        have, want = stored.get(key), asked.get(key)
        if have == want:
            continue
        if key == "settings" and isinstance(have, dict) and isinstance(want, dict):
            for name in dict.fromkeys([*have, *want]):
                if have.get(name) != want.get(name):
                    unset = "the parent's"
                    parts.append(f"settings.{name} {have.get(name, unset)} (this command asks {want.get(name, unset)})")
        else:
            parts.append(f"{key} {have} (this command asks {want})")
    return "; ".join(parts)


def escapes(run, fork_step: int, state: str, escape=None, gamma_window: tuple[int, int] | None = None) -> dict:
    """escape_half / escape_snap (steps after the fork), the escape under `escape` (a criterion or its
    text, `interp.forks.escape`; None: the default, tau_half), censored flags, a censored escape's lower bound
    (escape_bound: where a trailing stretch past the threshold began, else the last evaluation), steps run after the fork,
    gamma (sum ||u - s||^2 / sum ||s||^2 over the logged samples) and gamma_median (the median of the
    per-step ratios at steps A..B after the fork, `gamma_window` (A, B); None: the fork's whole window)."""
    from interp.forks.escape import gamma_median, parse_escape
    from interp.transition import facts

    criterion = parse_escape(escape)
    out = {"escape_half": math.nan, "escape_snap": math.nan, "censored_escape_half": False,
           "censored_escape_snap": False, "escape": math.nan, "censored_escape": False, "escape_bound": math.nan,
           "steps_run": None,
           "gamma": math.nan, "gamma_samples": 0, "gamma_median": math.nan}
    if run is None:
        return out
    series = run.metric_series("gamma_num", "gamma_den", "gamma_samples", "gamma_steps", "gamma_ratios",
                               criterion.metric)
    half, snap, last = facts(run).reached_from(fork_step)
    held = criterion.judge(series["step"], series[criterion.metric], fork_step, run.log_k)
    done = state == "done"
    out["steps_run"] = (last - fork_step) if last is not None else 0
    for key, value in (("escape_half", half), ("escape_snap", snap), ("escape", held)):
        out[key] = math.nan if value is None else float(value - fork_step)
        out[f"censored_{key}"] = bool(done and value is None)
    if out["censored_escape"]:  # the earliest it may have escaped: a trailing stretch past the threshold's start
        bound = criterion.bound(series["step"], series[criterion.metric], fork_step, run.log_k)
        out["escape_bound"] = float(bound - fork_step) if bound is not None else float(out["steps_run"])
    num = sum(v for v in series["gamma_num"] if v == v)
    den = sum(v for v in series["gamma_den"] if v == v)
    n = int(sum(v for v in series["gamma_samples"] if v == v))
    out["gamma_samples"] = n
    out["gamma"] = num / den if n and den > 0 else math.nan
    steps = [s for v in series["gamma_steps"] if isinstance(v, list) for s in v]
    ratios = [r for v in series["gamma_ratios"] if isinstance(v, list) for r in v]
    if gamma_window is None:
        gamma_window = (0, int((run.fork or {}).get("gamma_window") or 0))
    out["gamma_median"] = gamma_median(steps, ratios, fork_step, gamma_window) if len(steps) == len(ratios) else math.nan
    return out
