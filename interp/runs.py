"""Run: a folder of checkpoints and metrics that everything downstream is computed from.

Layout of a run folder:

    run.json             spec (task, model, train, seed), task hash, package versions
    metrics.jsonl        one JSON object per evaluated step (append-only)
    manifest.json        saved steps -> checkpoint file, SHA-256 and size
    checkpoints/         step_0001200.safetensors: model parameters only
    resume.safetensors   parameters, optimizer state and RNG state of the latest checkpoint
    cache/               analysis results (written by callers of the analyses, never by them)

Every file is written atomically (temporary file + rename). Checkpoints are safetensors and
their hashes are checked on load; nothing is ever unpickled.
"""

from __future__ import annotations

import bisect
import datetime as _dt
import json
import math
import platform
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pandas as pd
import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from torch import Tensor, nn

from interp.errors import InterpError
from interp.io import append_line, atomic_write_bytes, atomic_write_json, sha256_bytes
from interp.spec import RunSpec
from interp.task import VOCAB_SIZE, Task, build_layout

FORMAT = 1
RUN_FILE = "run.json"
MANIFEST_FILE = "manifest.json"
METRICS_FILE = "metrics.jsonl"
RESUME_FILE = "resume.safetensors"
CHECKPOINT_DIR = "checkpoints"
CACHE_DIR = "cache"
PACKAGES = ("interp", "torch", "transformer-lens", "numpy", "safetensors", "pandas")


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _read_safetensors(path: Path, expected_sha: str | None = None) -> tuple[dict[str, Tensor], dict]:
    """Tensors and header metadata of a safetensors file, verified against `expected_sha`."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InterpError(f"missing file {path}") from None
    if expected_sha is not None and sha256_bytes(data) != expected_sha:
        raise InterpError(
            f"{path} is corrupt or truncated: its SHA-256 does not match the manifest "
            f"({len(data)} bytes on disk); the other checkpoints of the run are unaffected"
        )
    try:
        tensors = st_load(data)
        header_len = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + header_len])
    except (SafetensorError, ValueError, UnicodeDecodeError) as exc:
        raise InterpError(f"{path} is not a readable safetensors file: {exc}") from None
    return tensors, header.get("__metadata__", {})


@dataclass
class ResumeState:
    step: int
    params: dict[str, Tensor]
    optimizer: dict
    generators: dict[str, Tensor]
    extra: dict


class Run:
    """A training run on disk. Open one with `Run.open(path)`; training creates them."""

    def __init__(self, path: Path, info: dict):
        self.path = Path(path)
        self.info = info
        self.spec = RunSpec.from_dict(info["spec"])
        self._task: Task | None = None

    # ----------------------------------------------------------------- open / create
    @classmethod
    def open(cls, path: str | Path) -> Run:
        path = Path(path)
        run_file = path / RUN_FILE
        if not path.exists():
            raise InterpError(f"no run folder at {path}")
        if not run_file.exists():
            raise InterpError(f"{path} is not a run folder (it has no {RUN_FILE})")
        try:
            info = json.loads(run_file.read_text())
        except json.JSONDecodeError as exc:
            raise InterpError(f"{run_file} is not valid JSON: {exc}") from None
        if info.get("format") != FORMAT:
            raise InterpError(f"{run_file} has format {info.get('format')!r}; this interp reads format {FORMAT}")
        return cls(path, info)

    @classmethod
    def create(cls, path: str | Path, spec: RunSpec) -> Run:
        """Make a new run folder for `spec`; refuses to touch an existing run."""
        spec.validate()
        path = Path(path)
        if (path / RUN_FILE).exists():
            raise InterpError(f"{path} already holds a run; resume it or choose another folder")
        if path.exists() and any(path.iterdir()):
            raise InterpError(f"{path} exists and is not empty; choose another folder")
        task = Task.generate(spec.task, spec.seed)
        info = {
            "format": FORMAT,
            "spec": spec.to_dict(),
            "task_sha256": task.sha256(),
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "versions": package_versions(),
        }
        atomic_write_json(path / RUN_FILE, info)
        atomic_write_json(path / MANIFEST_FILE, {"format": FORMAT, "checkpoints": {}})
        run = cls(path, info)
        run._task = task
        return run

    @staticmethod
    def is_run(path: str | Path) -> bool:
        return (Path(path) / RUN_FILE).exists()

    def set_steps(self, steps: int) -> None:
        """Change the planned number of steps (the only setting a resumed run may change)."""
        spec_dict = self.spec.to_dict()
        spec_dict["train"]["steps"] = steps
        new_spec = RunSpec.from_dict(spec_dict)
        new_spec.validate()
        self.info = {**self.info, "spec": spec_dict}
        atomic_write_json(self.path / RUN_FILE, self.info)
        self.spec = new_spec

    # ----------------------------------------------------------------- read
    @property
    def name(self) -> str:
        return self.path.name

    @property
    def task(self) -> Task:
        """The task, regenerated from the stored spec and checked against the stored hash."""
        if self._task is None:
            task = Task.generate(self.spec.task, self.spec.seed)
            if task.sha256() != self.info.get("task_sha256"):
                raise InterpError(
                    f"the task regenerated from {self.path / RUN_FILE} does not match its stored "
                    f"hash: the task generator changed since this run was made"
                )
            self._task = task
        return self._task

    @property
    def log_k(self) -> float:
        return math.log(self.spec.task.k)

    def _manifest(self) -> dict:
        path = self.path / MANIFEST_FILE
        if not path.exists():
            return {"format": FORMAT, "checkpoints": {}}
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise InterpError(f"{path} is not valid JSON: {exc}") from None

    @property
    def steps(self) -> list[int]:
        """Saved checkpoint steps, sorted."""
        return sorted(int(s) for s in self._manifest()["checkpoints"])

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

    def state_dict(self, step: int | str) -> dict[str, Tensor]:
        """Parameters saved at `step`, verified against the manifest's SHA-256."""
        step = self.resolve_step(step)
        entry = self._manifest()["checkpoints"][str(step)]
        tensors, _ = _read_safetensors(self.path / entry["file"], entry["sha256"])
        return tensors

    def model(self, step: int | str = "last", device: str = "cpu") -> nn.Module:
        """The checkpoint at `step` as a HookedTransformer in eval mode."""
        from interp.model import build_model, to_device

        params = self.state_dict(step)
        model = build_model(self.spec.model, build_layout(self.spec.task).length, VOCAB_SIZE)
        load_params(model, params)
        return to_device(model, device).eval()

    @property
    def metrics(self) -> pd.DataFrame:
        """One row per evaluated step, sorted by step (the last row wins if a step repeats)."""
        path = self.path / METRICS_FILE
        rows = []
        if path.exists():
            lines = path.read_text().splitlines()
            for i, line in enumerate(lines):
                if not line.strip():
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    if i == len(lines) - 1:  # a write cut short by a crash: skip it
                        continue
                    raise InterpError(f"{path} line {i + 1} is not valid JSON") from None
        if not rows:
            return pd.DataFrame(columns=["step"])
        df = pd.DataFrame(rows).drop_duplicates("step", keep="last").sort_values("step")
        return df.reset_index(drop=True)

    # ----------------------------------------------------------------- write (training only)
    def save_checkpoint(self, step: int, model: nn.Module) -> None:
        dtype = getattr(torch, self.spec.train.checkpoint_dtype)
        params = {name: p.detach().cpu().to(dtype).contiguous() for name, p in model.named_parameters()}
        data = st_save(params, metadata={"step": str(step), "format": "interp-checkpoint-1"})
        rel = f"{CHECKPOINT_DIR}/step_{step:07d}.safetensors"
        atomic_write_bytes(self.path / rel, data)
        manifest = self._manifest()
        manifest["checkpoints"][str(step)] = {"file": rel, "sha256": sha256_bytes(data), "bytes": len(data)}
        atomic_write_json(self.path / MANIFEST_FILE, manifest)

    def append_metrics(self, row: dict) -> None:
        clean = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
        append_line(self.path / METRICS_FILE, json.dumps(clean, sort_keys=True))

    def truncate_metrics(self, last_step: int) -> None:
        """Drop rows after `last_step` (used when resuming from an earlier checkpoint)."""
        df = self.metrics
        if df.empty or df["step"].max() <= last_step:
            return
        keep = df[df["step"] <= last_step]
        lines = [json.dumps({k: (None if pd.isna(v) else v) for k, v in r.items()}, sort_keys=True)
                 for r in keep.to_dict("records")]
        atomic_write_bytes(self.path / METRICS_FILE, "".join(line + "\n" for line in lines).encode())

    def save_resume(
        self, step: int, model: nn.Module, optimizer: torch.optim.Optimizer,
        generators: dict[str, torch.Generator], extra: dict,
    ) -> None:
        """Everything needed to continue bit-exactly from `step`, in one atomic file."""
        tensors = {f"param.{n}": p.detach().cpu().contiguous() for n, p in model.named_parameters()}
        opt = optimizer.state_dict()
        for idx, state in opt["state"].items():
            for key, value in state.items():
                tensors[f"opt.{idx}.{key}"] = value.detach().cpu().contiguous()
        for name, gen in generators.items():
            tensors[f"rng.{name}"] = gen.get_state()
        meta = {
            "step": str(step),
            "param_groups": json.dumps(opt["param_groups"]),
            "extra": json.dumps(extra),
        }
        atomic_write_bytes(self.path / RESUME_FILE, st_save(tensors, metadata=meta))

    def load_resume(self) -> ResumeState | None:
        path = self.path / RESUME_FILE
        if not path.exists():
            return None
        tensors, meta = _read_safetensors(path)
        params, generators, opt_state = {}, {}, {}
        for key, value in tensors.items():
            kind, _, rest = key.partition(".")
            if kind == "param":
                params[rest] = value
            elif kind == "rng":
                generators[rest] = value
            elif kind == "opt":
                idx, _, field = rest.partition(".")
                opt_state.setdefault(int(idx), {})[field] = value
        optimizer = {"state": opt_state, "param_groups": json.loads(meta["param_groups"])}
        return ResumeState(int(meta["step"]), params, optimizer, generators, json.loads(meta["extra"]))

    def __repr__(self) -> str:
        s = self.spec
        return (
            f"Run({str(self.path)!r}, {s.task.direction}, K={s.task.k}, D={s.task.dataset_size}, "
            f"seed={s.seed}, {len(self.steps)} checkpoints)"
        )


def load_params(model: nn.Module, params: dict[str, Tensor]) -> None:
    """Copy saved parameters into `model`, refusing any mismatch of names or shapes."""
    own = dict(model.named_parameters())
    missing, extra = sorted(set(own) - set(params)), sorted(set(params) - set(own))
    if missing or extra:
        raise InterpError(f"checkpoint does not fit the model: missing {missing[:3]}, unexpected {extra[:3]}")
    with torch.no_grad():
        for name, p in own.items():
            if p.shape != params[name].shape:
                raise InterpError(
                    f"checkpoint parameter {name} has shape {tuple(params[name].shape)}, "
                    f"the model expects {tuple(p.shape)}"
                )
            p.copy_(params[name])
