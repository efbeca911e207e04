"""Run: a folder of checkpoints and metrics that everything downstream is computed from.

Layout of a run folder:

    run.json             spec (task, model, train, seed), its hash, task hash, package versions
    metrics.jsonl        one JSON object per evaluated step (append-only)
    manifest.json        saved steps -> checkpoint file, SHA-256 and size
    checkpoints/         step_0001200.safetensors: model parameters only
    states/              step_0001200.safetensors: the optimizer-complete state at that checkpoint
                         (parameters, AdamW moments and step, batch RNG), with --save-optimizer only
    resume.safetensors   parameters, optimizer state and RNG state of the latest checkpoint
    task.safetensors     the task's tables, where it is given by them (a run made elsewhere: interp.task_tables)
    source_history.jsonl an imported run's source log, as its source wrote it (interp.imports)
    status.json          how the last training session ended: done / failed, wall seconds, error
    .lock                held (an OS file lock) by the one process writing the run
    cache/               analysis results (written by callers of the analyses, never by them); what analyses
                         keep to skip work (replayed optimizer states in replayed/, Hessian directions)

Every file is written atomically (temporary file + rename; the writer removes temporaries a
killed writer left). run.json carries the hash of its spec (and a fork's the hash of its fork block), so a
hand-edited spec is refused; it also records how each training session ran (device, threads), which a replay
of the optimizer state must match (`interp.replay`), and each training segment's environment (versions, threads,
device, CPU capability: `interp.run_segments`), which a bit-exact continuation must match;
the resume state records the run it belongs to (spec hash, seed, step, checkpoint hash). Checkpoints are safetensors and
their hashes are checked on load; nothing is ever unpickled. Reading a run never takes the
lock and never imports torch until a checkpoint is loaded (`interp ls` and `interp show`
stay instant); the tensor files themselves are handled by `interp.checkpoints`.
"""

from __future__ import annotations

import bisect
import datetime as _dt
import json
import math
import re
from pathlib import Path

from interp import metrics_log
from interp.errors import InterpError
from interp.files import (WriterLock, append_line, atomic_write_bytes, atomic_write_json, remove_temporaries, sha256_bytes)
from interp.presentable import html
from interp.run_segments import package_versions
from interp.spec import VOCAB_SIZE, RunSpec, spec_sha256

from interp.run_layout import (CACHE_DIR, CHECKPOINT_DIR, FORMAT, HISTORY_FILE, LOCK_FILE,  # noqa: F401 - re-exported
                               MANIFEST_FILE, METRICS_FILE, RESUME_FILE, RUN_FILE, STATE_DIR, STATUS_FILE, TASK_FILE,
                               check_new_folder, fork_sha256)

# the files that mark a folder of runs (`interp.forks.family.FAMILY_FILE`, `interp.sweeps.sweep.SWEEP_FILE`), named
# when such a folder is opened as a run
COLLECTIONS = (("forks.json", "a fork family", "interp fork status"), ("sweep.json", "a sweep", "interp sweep status"))
STATES = ("done", "failed", "interrupted")


def _read_json(path: Path, what: str):
    """Parsed JSON of `path`; a missing, unreadable or invalid file is an InterpError naming it."""
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise InterpError(f"{path} is missing: {what}") from None
    except UnicodeDecodeError:
        raise InterpError(f"{path} is not valid JSON (not UTF-8 text)") from None
    except OSError as exc:
        raise InterpError(f"cannot read {path}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InterpError(f"{path} is not valid JSON: {exc}") from None


class RunLock(WriterLock):
    """The writer's lock of the run folder `run_path` (its `.lock`; `interp.files.WriterLock`)."""
    def __init__(self, run_path: Path):
        super().__init__(Path(run_path) / LOCK_FILE)


class Run:
    """A training run on disk. Open one with `Run.open(path)`; training creates them."""

    def __init__(self, path: Path, info: dict):
        self.path = Path(path)
        if not isinstance(info, dict) or "spec" not in info:
            raise InterpError(f"{self.path / RUN_FILE} has no 'spec': it is not a run description")
        try:
            spec = RunSpec.from_dict(info["spec"])
            spec.validate()
        except InterpError as exc:
            raise InterpError(f"{self.path / RUN_FILE} holds an invalid spec: {exc}") from None
        stored = info.get("spec_sha256")  # absent in runs made before it was recorded
        if stored is not None and stored != spec_sha256(info["spec"]):
            raise InterpError(f"{self.path / RUN_FILE}: its spec does not match the hash it was written with "
                              f"(edited by hand?); a run's spec cannot be changed, only --steps by a resume")
        from interp.run_segments import check_segments

        check_segments(info, str(self.path / RUN_FILE))
        for block, what in (("fork", "a fork's parent and arm"), ("imported", "where an imported run came from")):
            if block in info and info.get(f"{block}_sha256") != fork_sha256(info[block]):
                raise InterpError(f"{self.path / RUN_FILE}: its {block} block does not match the hash it was written "
                                  f"with (edited by hand?); {what} cannot be changed")
        self.info = info
        self.spec = spec
        self._task = None
        self._lock = RunLock(self.path)

    # ----------------------------------------------------------------- open / create
    @classmethod
    def open(cls, path: str | Path) -> Run:
        path = Path(path)
        if not path.exists():
            raise InterpError(f"no run folder at {path}")
        if not path.is_dir():
            raise InterpError(f"{path} is a file, not a run folder")
        run_file = path / RUN_FILE
        if not run_file.exists():
            for marker, kind, command in COLLECTIONS:  # a fork family or a sweep: say so, and where its runs are shown
                if (path / marker).is_file():
                    raise InterpError(f"{path} is {kind}, not a run folder (it has {marker}, no {RUN_FILE}): "
                                      f"{command} {path} shows its runs; one of them is {path}/NAME")
            raise InterpError(f"{path} is not a run folder (it has no {RUN_FILE})")
        info = _read_json(run_file, "the run description")
        if not isinstance(info, dict):
            raise InterpError(f"{run_file} is not a JSON object")
        if info.get("format") != FORMAT:
            raise InterpError(f"{run_file} has format {info.get('format')!r}; this interp reads format {FORMAT}")
        return cls(path, info)

    @classmethod
    def create(cls, path: str | Path, spec: RunSpec, fork: dict | None = None, task=None,
               imported: dict | None = None) -> Run:
        """Make a new run folder for `spec` and hold its lock; refuses to touch an existing run. `fork` (a fork's
        parent and arm) and `imported` (where a run made elsewhere came from) are stored with their hashes; `task`
        is required where the spec's task is given by its tables (`interp.task_tables`)."""
        spec.validate()
        path = Path(path)
        check_new_folder(path)
        from interp.task_tables import task_of_new_run

        task, tables = task_of_new_run(spec, task, path)  # the slow part, before anything is made
        info = {
            "format": FORMAT,
            "spec": spec.to_dict(),
            "spec_sha256": spec_sha256(spec),
            "task_sha256": task.sha256(),
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "versions": package_versions(),
        }
        if fork is not None:
            info.update(fork=fork, fork_sha256=fork_sha256(fork))
        if imported is not None:
            info.update(imported=imported, imported_sha256=fork_sha256(imported))
        made = not path.exists()
        path.mkdir(parents=True, exist_ok=True)
        run = cls(path, info)
        try:
            run.acquire()
            if (path / RUN_FILE).exists():  # created by another process since the check above
                run.release()
                raise InterpError(f"{path} already holds a run; resume it or choose another folder")
            atomic_write_json(path / MANIFEST_FILE, {"format": FORMAT, "checkpoints": {}})
            if tables is not None:
                atomic_write_bytes(path / TASK_FILE, tables)
            atomic_write_json(path / RUN_FILE, info)
        except BaseException:  # Ctrl-C or a full disk half-way: leave no half-made folder behind
            if made and run.is_writer:
                import shutil

                run.release()
                shutil.rmtree(path, ignore_errors=True)
            raise
        run._task = task
        return run

    @staticmethod
    def is_run(path: str | Path) -> bool:
        return (Path(path) / RUN_FILE).is_file()

    # ----------------------------------------------------------------- the writer's lock
    def acquire(self) -> None:
        """Become the run's one writer (an OS file lock held until `release` or process exit),
        and remove the temporaries a killed writer left (only the writer makes them)."""
        if self._lock.held:
            return
        self._lock.acquire()
        own = "|".join(re.escape(name) for name in (RUN_FILE, MANIFEST_FILE, METRICS_FILE, RESUME_FILE, STATUS_FILE,
                                                    TASK_FILE, HISTORY_FILE))
        remove_temporaries(self.path, own)
        remove_temporaries(self.path / CHECKPOINT_DIR, r"step_\d+\.safetensors")
        remove_temporaries(self.path / STATE_DIR, r"step_\d+\.safetensors")

    def release(self) -> None:
        self._lock.release()

    @property
    def writing(self) -> bool:
        """Whether some process (this one included) holds the writer's lock now."""
        return self._lock.is_locked()

    @property
    def is_writer(self) -> bool:
        """Whether this process holds the run's writer lock."""
        return self._lock.held

    def _require_writer(self) -> None:
        if not self.is_writer:
            raise InterpError(f"{self.path}: only the process holding the run's lock may write it "
                              f"(call run.acquire() first)")

    def set_steps(self, steps: int) -> None:
        """Change the planned number of steps (the only setting a resumed run may change)."""
        self._require_writer()
        spec_dict = json.loads(json.dumps(self.info["spec"]))  # the stored spec, only train.steps changed
        spec_dict.setdefault("train", {})["steps"] = steps
        new_spec = RunSpec.from_dict(spec_dict)
        new_spec.validate()
        self.info = {**self.info, "spec": spec_dict, "spec_sha256": spec_sha256(spec_dict)}
        atomic_write_json(self.path / RUN_FILE, self.info)
        self.spec = new_spec

    # ----------------------------------------------------------------- read
    @property
    def name(self) -> str:
        return self.path.name

    @property
    def spec_sha256(self) -> str:
        """SHA-256 of the spec with every field (`interp.spec.spec_sha256(run.spec)`): equal specs,
        equal hashes. run.json's `spec_sha256` (checked on open) hashes the spec as stored; the two
        agree except for runs stored before a spec field was added."""
        return spec_sha256(self.spec)

    @property
    def task(self):
        """The Task, regenerated from the stored spec and checked against the stored hash."""
        if self._task is None and self.spec.task.source == "tables":
            from interp.task_tables import read_task

            self._task = read_task(self.path / TASK_FILE, self.spec.task, self.spec.seed, self.info.get("task_sha256"))
        if self._task is None:
            from interp.task import Task

            task = Task.generate(self.spec.task, self.spec.seed)
            if task.sha256() != self.info.get("task_sha256"):
                why = ("the task generator changed since this run was made" if "spec_sha256" in self.info
                       else "run.json's task/seed was edited, or the task generator changed")
                raise InterpError(
                    f"the task regenerated from {self.path / RUN_FILE} does not match its stored hash: {why}"
                )
            self._task = task
        return self._task

    @property
    def layout(self):
        """Where everything sits in the task's sequences, from the spec alone (no task generated, no torch)."""
        from interp.task import build_layout

        return build_layout(self.spec.task)

    @property
    def log_k(self) -> float:
        return math.log(self.spec.task.k)

    def manifest(self) -> dict[int, dict]:
        """Saved step -> {"file", "sha256", "bytes"}, checked entry by entry."""
        path = self.path / MANIFEST_FILE
        blob = _read_json(path, "every run folder has one (it lists the saved checkpoints)")
        entries = blob.get("checkpoints") if isinstance(blob, dict) else None
        if not isinstance(entries, dict):
            raise InterpError(f"{path} has no 'checkpoints' table")
        out: dict[int, dict] = {}
        for step, entry in entries.items():
            if not (isinstance(entry, dict) and isinstance(entry.get("file"), str)
                    and isinstance(entry.get("sha256"), str)):
                raise InterpError(f"{path}: the entry for step {step} lacks its file or sha256")
            try:
                out[int(step)] = entry
            except ValueError:
                raise InterpError(f"{path}: {step!r} is not a step number") from None
        return out

    def checkpoint_hashes(self) -> dict[int, str]:
        """Saved step -> SHA-256 of its checkpoint file (what caches key their results on)."""
        return {step: entry["sha256"] for step, entry in self.manifest().items()}

    @property
    def steps(self) -> list[int]:
        """Saved checkpoint steps, sorted."""
        return sorted(self.manifest())

    def resolve_step(self, step: int | str) -> int:
        """A saved step from an int or 'last' / 'first'; a clear error naming the nearest otherwise."""
        steps = self.steps
        if not steps:
            raise InterpError(f"run {self.path} has no saved checkpoints")
        if step == "last":
            return steps[-1]
        if step == "first":
            return steps[0]
        if isinstance(step, str):
            try:
                step = int(step)
            except ValueError:
                raise InterpError(f"step must be an integer, 'first' or 'last', got {step!r}") from None
        if step in steps:
            return step
        i = bisect.bisect_left(steps, step)
        near = [str(s) for s in steps[max(0, i - 1) : i + 1]]
        raise InterpError(
            f"step {step} is not saved in {self.path}; nearest saved: {', '.join(near)} "
            f"({len(steps)} checkpoints from {steps[0]} to {steps[-1]})"
        )

    def state_dict(self, step: int | str) -> dict:
        """Parameters saved at `step` (name -> tensor), verified against the manifest's SHA-256."""
        from interp.checkpoints import read

        step = self.resolve_step(step)
        entry = self.manifest()[step]
        tensors, _ = read(self.path / entry["file"], entry["sha256"])
        return tensors

    def model(self, step: int | str = "last", device: str = "cpu"):
        """The checkpoint at `step` as a transformer_lens.HookedTransformer in eval mode (a TransformerBridge on TL 4)."""
        from interp.checkpoints import load_params
        from interp.model import build_model, to_device

        params = self.state_dict(step)
        model = build_model(self.spec.model, self.spec.task.sequence_length, VOCAB_SIZE)
        load_params(model, params)
        return to_device(model, device).eval()

    def metric_rows(self) -> list[dict]:
        """The metrics log as dicts (copies), in file order (a torn last line, left by a crash, is skipped);
        parsed once per version of the file (`interp.metrics_log`)."""
        return [dict(row) for row in metrics_log.rows(self.path / METRICS_FILE)]

    def metric_series(self, *names: str) -> dict[str, list]:
        """Columns of the metrics log, one value per evaluated step (sorted; the last row of a
        repeated step wins; missing values are NaN). No pandas needed."""
        by_step = {row["step"]: row for row in metrics_log.rows(self.path / METRICS_FILE)}
        steps = sorted(by_step)
        out: dict[str, list] = {"step": steps}
        for name in names:
            values = [by_step[s].get(name) for s in steps]
            out[name] = [math.nan if v is None else v for v in values]
        return out

    @property
    def metrics(self):
        """One row per evaluated step as a pandas DataFrame, sorted by step (the last row wins
        if a step repeats)."""
        import pandas as pd

        rows = metrics_log.rows(self.path / METRICS_FILE)
        if not rows:
            return pd.DataFrame(columns=["step"])
        df = pd.DataFrame(list(rows)).drop_duplicates("step", keep="last").sort_values("step")
        return df.reset_index(drop=True)

    @property
    def status(self) -> dict | None:
        """How the last training session ended ({"state", "last_step", "wall_seconds", ...}),
        or None if none has ended yet (never trained, or still running, or killed)."""
        path = self.path / STATUS_FILE
        if not path.exists():
            return None
        blob = _read_json(path, "")
        return blob if isinstance(blob, dict) else None

    # ----------------------------------------------------------------- write (the writer only)
    def save_checkpoint(self, step: int, model) -> None:
        from interp.checkpoints import checkpoint_bytes

        self._require_writer()
        data = checkpoint_bytes(model, step, self.spec.train.checkpoint_dtype)
        rel = f"{CHECKPOINT_DIR}/step_{step:07d}.safetensors"
        atomic_write_bytes(self.path / rel, data)
        manifest = {str(s): e for s, e in self.manifest().items()}
        manifest[str(step)] = {"file": rel, "sha256": sha256_bytes(data), "bytes": len(data)}
        ordered = {str(s): manifest[str(s)] for s in sorted(int(s) for s in manifest)}
        atomic_write_json(self.path / MANIFEST_FILE, {"format": FORMAT, "checkpoints": ordered})

    def append_metrics(self, row: dict) -> None:
        self._require_writer()
        clean = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
        append_line(self.path / METRICS_FILE, json.dumps(clean, sort_keys=True))

    def rewrite_metrics(self, last_step: int | None = None) -> None:
        """Rewrite the metrics log whole: without a torn last line (a crash mid-write) and,
        given `last_step`, without the rows after it (resuming from an earlier checkpoint)."""
        self._require_writer()
        path = self.path / METRICS_FILE
        if not path.exists():
            return
        rows = self.metric_rows()
        keep = [r for r in rows if last_step is None or r["step"] <= last_step]
        text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in keep)
        if text.encode() != path.read_bytes():
            atomic_write_bytes(path, text.encode())

    def save_resume(self, step: int, model, optimizer, generators: dict, extra: dict) -> None:
        """Everything needed to continue bit-exactly from `step` (saved first as a checkpoint), in
        one self-verifying file that records this run's identity."""
        from interp.checkpoints import resume_bytes

        self._require_writer()
        entry = self.manifest().get(step)
        if entry is None:
            raise InterpError(f"{self.path}: no checkpoint at step {step}; a resume state follows its checkpoint")
        identity = {"spec_sha256": spec_sha256(self.info["spec"], ignore_steps=True), "seed": self.spec.seed,
                    "step": step, "checkpoint_sha256": entry["sha256"]}
        atomic_write_bytes(self.path / RESUME_FILE, resume_bytes(step, model, optimizer, generators, extra, identity))

    def load_resume(self):
        """The resume state (`interp.checkpoints.ResumeState`), checked to belong to this run, or
        None when the run has none and nothing saved past step 0 (`interp.run_states.load_resume`)."""
        from interp.run_states import load_resume

        return load_resume(self)

    def save_state(self, step: int, model, optimizer, generators: dict, extra: dict) -> None:
        """Keep the optimizer-complete state at `step` beside its checkpoint (`--save-optimizer`)."""
        from interp.run_states import save_state

        self._require_writer()
        save_state(self, step, model, optimizer, generators, extra)

    @property
    def fork(self) -> dict | None:
        """The fork block of run.json (parent, step, arm, params, seed) or None for a plain run."""
        return self.info.get("fork")

    @property
    def imported(self) -> dict | None:
        """Where a run made elsewhere came from (`interp.imports`), or None for a run interp trained."""
        return self.info.get("imported")

    def record_training(self, entry: dict) -> None:
        """Record how a training session from `entry["from_step"]` ran (device, threads, compile): what a replay
        must match. Sessions from that step on are replaced (they are rewritten)."""
        self._require_writer()
        kept = [e for e in self.info.get("training", []) if e.get("from_step", 0) < entry["from_step"]]
        if kept and {k: v for k, v in kept[-1].items() if k != "from_step"} == {
                k: v for k, v in entry.items() if k != "from_step"}:
            sessions = kept  # the same settings continue
        else:
            sessions = kept + [entry]
        if sessions != self.info.get("training"):
            self.info = {**self.info, "training": sessions}
            atomic_write_json(self.path / RUN_FILE, self.info)

    def write_status(self, state: str, **fields) -> None:
        self._require_writer()
        if state not in STATES:
            raise ValueError(f"unknown run state {state!r}")
        blob = {"state": state, "updated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                **fields}
        atomic_write_json(self.path / STATUS_FILE, blob)

    def clear_status(self) -> None:
        self._require_writer()
        (self.path / STATUS_FILE).unlink(missing_ok=True)

    def _repr_html_(self) -> str:
        """A notebook card (`interp.display.run`, found by type: `interp.presentable`): reads the
        folder and the cache only, no torch."""
        return html(self)

    def __repr__(self) -> str:
        s = self.spec
        try:
            n = f"{len(self.steps)} checkpoints"
        except InterpError:
            n = "unreadable manifest"
        return (
            f"Run({str(self.path)!r}, {s.task.direction}, K={s.task.k}, D={s.task.dataset_size}, "
            f"seed={s.seed}, {n})"
        )
