"""TrainSpec and RunSpec: everything that determines a run, stored in its folder as JSON.

A RunSpec plus its seed regenerates the task and reproduces the weights, so a run folder
needs no dataset files.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from interp.errors import InterpError
from interp.model import ModelSpec
from interp.task import TaskSpec

SCHEDULES = ("constant", "cosine")
CHECKPOINT_DTYPES = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class TrainSpec:
    """Optimiser, schedule, evaluation cadence and checkpoint policy (SPEC section 3 defaults)."""

    steps: int = 20000
    lr: float = 1e-3
    weight_decay: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.999
    batch_size: int = 128
    schedule: str = "constant"  # or "cosine" (decays to min_lr_ratio * lr after the warmup)
    warmup_steps: int = 0  # linear warmup, for either schedule
    min_lr_ratio: float = 0.0
    grad_clip: float | None = None  # max global gradient norm; None: no clipping
    eval_every: int = 50
    eval_size: int = 1024  # fixed evaluation subset; the whole dataset when D is smaller
    checkpoint_every: int = 500
    early_checkpoints: bool = True  # also save at steps 1, 2, 4, 8, ... below checkpoint_every
    densify: bool = True  # save at every evaluation while the candidate loss is in transition
    stop_after_snap: int | None = None  # stop this many steps after the snap (None: run all steps)
    checkpoint_dtype: str = "float32"  # float16 halves a checkpoint series (weights rounded;
    # the resume state stays float32, so resuming is still exact)

    def validate(self) -> None:
        def positive_int(name: str, value, minimum: int = 1) -> None:
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise InterpError(f"{name} must be an integer >= {minimum}, got {value!r}")

        positive_int("steps", self.steps)
        positive_int("batch_size", self.batch_size)
        positive_int("eval_every", self.eval_every)
        positive_int("eval_size", self.eval_size)
        positive_int("checkpoint_every", self.checkpoint_every)
        positive_int("warmup_steps", self.warmup_steps, minimum=0)
        if self.stop_after_snap is not None:
            positive_int("stop_after_snap", self.stop_after_snap, minimum=0)
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):
            raise InterpError(f"lr must be a positive number, got {self.lr!r}")
        if not self.weight_decay >= 0:
            raise InterpError(f"weight_decay must be >= 0, got {self.weight_decay!r}")
        for name in ("beta1", "beta2"):
            if not 0 <= getattr(self, name) < 1:
                raise InterpError(f"{name} must be in [0, 1), got {getattr(self, name)!r}")
        if self.schedule not in SCHEDULES:
            raise InterpError(f"unknown schedule {self.schedule!r}; allowed: {', '.join(SCHEDULES)}")
        if not 0 <= self.min_lr_ratio <= 1:
            raise InterpError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio!r}")
        if self.checkpoint_dtype not in CHECKPOINT_DTYPES:
            raise InterpError(
                f"unknown checkpoint_dtype {self.checkpoint_dtype!r}; allowed: {', '.join(CHECKPOINT_DTYPES)}"
            )
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise InterpError(f"grad_clip must be positive (or None), got {self.grad_clip!r}")

    def lr_at(self, step: int) -> float:
        """Learning rate used for optimizer step `step` (1-based)."""
        if self.warmup_steps and step <= self.warmup_steps:
            return self.lr * step / self.warmup_steps
        if self.schedule == "constant":
            return self.lr
        span = max(1, self.steps - self.warmup_steps)
        progress = min(1.0, (step - self.warmup_steps) / span)
        floor = self.min_lr_ratio * self.lr
        return floor + (self.lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))


@dataclass(frozen=True)
class RunSpec:
    """Task, model, training and the one seed that fixes data, initialisation and batch order."""

    seed: int = 0
    task: TaskSpec = field(default_factory=TaskSpec)
    model: ModelSpec = field(default_factory=ModelSpec)
    train: TrainSpec = field(default_factory=TrainSpec)

    def validate(self) -> None:
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise InterpError(f"seed must be a non-negative integer, got {self.seed!r}")
        self.task.validate()
        self.model.validate()
        self.train.validate()

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> RunSpec:
        unknown = set(data) - {"seed", "task", "model", "train"}
        if unknown:
            raise InterpError(f"unknown run spec fields {sorted(unknown)}")
        train_known = {f.name for f in dataclasses.fields(TrainSpec)}
        train_unknown = set(data.get("train", {})) - train_known
        if train_unknown:
            raise InterpError(f"unknown train fields {sorted(train_unknown)}; known: {sorted(train_known)}")
        return cls(
            seed=data.get("seed", 0),
            task=TaskSpec.from_dict(data.get("task", {})),
            model=ModelSpec.from_dict(data.get("model", {})),
            train=TrainSpec(**data.get("train", {})),
        )

    def override(self, **values) -> RunSpec:
        """A copy with fields replaced by flat name (`k=5`, `lr=3e-4`, `seed=1`, `d_model=64`)."""
        sections = {"task": self.task, "model": self.model, "train": self.train}
        changes: dict[str, dict] = {name: {} for name in sections}
        top: dict = {}
        for name, value in values.items():
            if name == "seed":
                top["seed"] = value
                continue
            owners = [s for s, obj in sections.items() if name in {f.name for f in dataclasses.fields(obj)}]
            if not owners:
                raise InterpError(f"unknown setting {name!r}; known: {', '.join(sorted(override_names()))}")
            changes[owners[0]][name] = value
        return dataclasses.replace(
            self,
            **top,
            **{s: dataclasses.replace(sections[s], **c) for s, c in changes.items() if c},
        )


def override_names() -> set[str]:
    names = {"seed"}
    for cls in (TaskSpec, ModelSpec, TrainSpec):
        names |= {f.name for f in dataclasses.fields(cls)}
    return names
