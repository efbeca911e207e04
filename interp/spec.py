"""Everything that determines a run: TaskSpec, ModelSpec, TrainSpec and RunSpec.

A RunSpec plus its seed regenerates the task and reproduces the weights, so a run folder
needs no dataset files. This module imports nothing heavy (no torch, numpy or pandas), so
reading a run folder, listing runs and validating command-line input stay instant.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field

from interp.errors import InterpError
from interp.spec_fields import Section, check_bool, check_float, check_int, from_dict  # noqa: F401 (re-exported)
from interp.task_spec import (  # noqa: F401 (re-exported: the task's section and its alphabet)
    ALPHABET, BOS, DIRECTIONS, EOS, FIRST_CHAR_ID, HOLDOUT_BY, MAX_LEN, N_CHARS, PAD, SELECTORS, SEP, TASK_SOURCES,
    VOCAB_SIZE, TaskSpec, describe_task_variants)

ACT_FNS = ("gelu", "gelu_new", "relu", "silu")
SCHEDULES = ("constant", "cosine")
CHECKPOINT_DTYPES = ("float32", "float16", "bfloat16")
PRECISIONS = ("float32", "bf16")  # the training step's arithmetic (interp.precision)
# TrainSpec.optimizer (interp.optimizers, docs/runs.md "Optimizers"): AdamW (decoupled weight decay, the paper's), Adam
# with weight decay as an L2 term of the gradient (coupled), Adam without weight decay, SGD, RMSProp
OPTIMIZERS = ("adamw", "adam-l2", "adam", "sgd", "rmsprop")
ADAM_FAMILY = ("adamw", "adam-l2", "adam")
OPTIMIZER_FIELDS = ("optimizer", "momentum", "eps", "bias_correction")  # TrainSpec's, written only when set
# TrainSpec's outcome rules (interp.outcome) at the author's values (eta_sweep/run_single.py), written only when changed
OUTCOME_DEFAULTS = {"stop_when_decided": False, "plateau_band": 0.05, "plateau_gap": 0.05, "transition_below": 0.3,
                    "transition_hold": 500, "stuck_hold": 2000, "stuck_after": 2000, "diverge_above": 1.5,
                    "diverge_hold": 500, "diverge_after": 200, "decided_tail": 0}
OUTCOME_RULES = tuple(name for name in OUTCOME_DEFAULTS if name != "stop_when_decided")


# ---------------------------------------------------------------------------- model
@dataclass(frozen=True)
class ModelSpec(Section):
    """Architecture of the transformer (the paper's defaults: ~0.8M parameters)."""

    SECTION = "model"
    OMITTED_AT = {"n_ctx": None}  # set only when given

    n_layers: int = 4
    n_heads: int = 4
    d_model: int = 128
    d_head: int = 32
    d_mlp: int = 512
    act_fn: str = "gelu"
    init_std: float | None = None  # None: 0.8 / sqrt(d_model), TransformerLens's GPT-2 default
    n_ctx: int | None = None  # positions the model has; None: the task's sequence length. Runs made elsewhere may
    # have more (the author's 32): the positions past the sequence are kept and never read; omitted when None

    def validate(self) -> None:
        for name in ("n_layers", "n_heads", "d_model", "d_head", "d_mlp"):
            check_int(name, getattr(self, name), minimum=1)
        if self.n_ctx is not None:
            check_int("n_ctx", self.n_ctx, minimum=1)
        if self.act_fn not in ACT_FNS:
            raise InterpError(f"unknown act_fn {self.act_fn!r}; allowed: {', '.join(ACT_FNS)}")
        if self.init_std is not None:
            check_float("init_std", self.init_std, low=0, low_open=True)

    @property
    def std(self) -> float:
        return self.init_std if self.init_std is not None else 0.8 / math.sqrt(self.d_model)

    def context(self, sequence_length: int) -> int:
        """The model's positions for a task of `sequence_length` tokens: n_ctx when set, else the length itself."""
        return self.n_ctx if self.n_ctx is not None else sequence_length

    def n_params(self, n_ctx: int, d_vocab: int = VOCAB_SIZE) -> int:
        """Parameter count of the HookedTransformer this spec builds (no model is built)."""
        d, h, e, m = self.d_model, self.n_heads, self.d_head, self.d_mlp
        attn = 3 * (h * d * e + h * e) + h * e * d + d
        mlp = d * m + m + m * d + d
        per_layer = attn + mlp + 4 * d  # two LayerNorms
        return d_vocab * d + n_ctx * d + self.n_layers * per_layer + 2 * d + d * d_vocab + d_vocab



# ---------------------------------------------------------------------------- training
@dataclass(frozen=True)
class TrainSpec(Section):
    """Optimiser, schedule, evaluation cadence and checkpoint policy (the paper's defaults)."""

    SECTION = "train"
    # written only when set: a run made before these fields hashes as it did
    OMITTED_AT = {"precision": "float32", "optimizer": "adamw", "momentum": 0.0, "eps": 1e-8, "bias_correction": True,
                  **OUTCOME_DEFAULTS}

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
    dense_until: int = 0  # also save at every evaluation up to this step (0: off)
    stop_after_snap: int | None = None  # stop this many steps after the snap (None: run all steps)
    stop_after_exact: int | None = None  # stop this many steps after exact match first reaches 0.99
    checkpoint_dtype: str = "float32"  # float16 halves a checkpoint series (weights rounded;
    # the resume state stays float32, so resuming is still exact)
    compile: bool = False  # torch.compile the training step's forward and backward (same weights
    # to float tolerance, not bit for bit, hence part of the spec)
    save_optimizer: bool = False  # keep the optimizer-complete state beside every checkpoint (states/), so
    # forks start from it without a replay; about 3x a float32 checkpoint each
    precision: str = "float32"  # "bf16": the training step's forward and backward under bfloat16 autocast
    # (float32 master weights, AdamW state, evaluation and checkpoints; interp.precision); omitted
    # from to_dict when "float32"
    optimizer: str = "adamw"  # one of OPTIMIZERS (interp.optimizers): beta1/beta2 are Adam's moments' decays, beta2
    # is RMSProp's smoothing constant (alpha); weight_decay is decoupled for adamw, an L2 term of the gradient for the
    # others (refused for adam, which has none)
    momentum: float = 0.0  # SGD's and RMSProp's momentum (0: none); Adam's first moment is beta1
    eps: float = 1e-8  # added to the root of the second moment (Adam, RMSProp)
    bias_correction: bool = True  # Adam's 1 - beta^t corrections of both moments; False: the raw moments
    # a run's outcome (interp.outcome, docs/phase.md): transitioned, stuck or diverged, by the author's rules with
    # these thresholds; with stop_when_decided training stops once it is decided. All omitted at their defaults
    stop_when_decided: bool = False
    plateau_band: float = 0.05  # on the plateau: candidate loss within this fraction of log K ...
    plateau_gap: float = 0.05  # ... and the shuffle gap dz below this many nats
    transition_below: float = 0.3  # transitioned: candidate loss below this fraction of log K ...
    transition_hold: int = 500  # ... for this many steps
    stuck_hold: int = 2000  # stuck: on the plateau for this many steps ...
    stuck_after: int = 2000  # ... decided no earlier than this step
    diverge_above: float = 1.5  # diverged: candidate loss above this fraction of log K (or not finite) ...
    diverge_hold: int = 500  # ... for this many steps ...
    diverge_after: int = 200  # ... counted from this step
    decided_tail: int = 0  # with stop_when_decided, steps trained on after a transition is decided (author's: 2000)

    def validate(self) -> None:
        check_int("steps", self.steps, minimum=1)
        check_int("batch_size", self.batch_size, minimum=1)
        check_int("eval_every", self.eval_every, minimum=1)
        check_int("eval_size", self.eval_size, minimum=1)
        check_int("checkpoint_every", self.checkpoint_every, minimum=1)
        check_int("warmup_steps", self.warmup_steps, minimum=0)
        check_int("dense_until", self.dense_until, minimum=0)
        for name in ("stop_after_snap", "stop_after_exact"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), minimum=0)
        check_float("lr", self.lr, low=0, low_open=True)
        check_float("weight_decay", self.weight_decay, low=0)
        check_float("beta1", self.beta1, low=0, high=1, high_open=True)
        check_float("beta2", self.beta2, low=0, high=1, high_open=True)
        check_float("min_lr_ratio", self.min_lr_ratio, low=0, high=1)
        if self.grad_clip is not None:
            check_float("grad_clip", self.grad_clip, low=0, low_open=True)
        for name in ("early_checkpoints", "densify", "compile", "save_optimizer"):
            check_bool(name, getattr(self, name))
        if self.schedule not in SCHEDULES:
            raise InterpError(f"unknown schedule {self.schedule!r}; allowed: {', '.join(SCHEDULES)}")
        if self.precision not in PRECISIONS:
            raise InterpError(f"unknown precision {self.precision!r}; allowed: {', '.join(PRECISIONS)}")
        if self.checkpoint_dtype not in CHECKPOINT_DTYPES:
            raise InterpError(
                f"unknown checkpoint_dtype {self.checkpoint_dtype!r}; allowed: {', '.join(CHECKPOINT_DTYPES)}"
            )
        self._validate_optimizer()
        self._validate_outcome()

    def _validate_outcome(self) -> None:
        check_bool("stop_when_decided", self.stop_when_decided)
        check_float("plateau_band", self.plateau_band, low=0, low_open=True, high=1, high_open=True)
        check_float("plateau_gap", self.plateau_gap, low=0, low_open=True)
        check_float("transition_below", self.transition_below, low=0, low_open=True, high=1, high_open=True)
        check_float("diverge_above", self.diverge_above, low=1, low_open=True)
        for name in ("transition_hold", "stuck_hold", "stuck_after", "diverge_hold", "diverge_after", "decided_tail"):
            check_int(name, getattr(self, name), minimum=0)
        if self.transition_below >= 1 - self.plateau_band:
            raise InterpError(f"transition_below {self.transition_below} must lie below the plateau band "
                              f"(1 - plateau_band = {1 - self.plateau_band:g})")

    def _validate_optimizer(self) -> None:
        """The optimizer and the settings it takes: a setting another optimizer owns is refused, not ignored."""
        if self.optimizer not in OPTIMIZERS:
            raise InterpError(f"unknown optimizer {self.optimizer!r}; allowed: {', '.join(OPTIMIZERS)}")
        check_float("momentum", self.momentum, low=0, high=1, high_open=True)
        check_float("eps", self.eps, low=0, low_open=True)
        check_bool("bias_correction", self.bias_correction)
        name = self.optimizer
        if name in ADAM_FAMILY and self.momentum:
            raise InterpError(f"momentum {self.momentum} is SGD's and RMSProp's; optimizer {name}'s first moment "
                              f"decays with beta1 (--beta1, or --betas B1,B2)")
        if name not in ADAM_FAMILY and not self.bias_correction:
            raise InterpError(f"--no-bias-correction applies to Adam's moments; optimizer {name} has none "
                              f"(allowed with: {', '.join(ADAM_FAMILY)})")
        if name == "sgd" and self.eps != 1e-8:
            raise InterpError(f"eps {self.eps} is Adam's and RMSProp's; optimizer sgd divides by nothing")
        if name == "adam" and self.weight_decay:
            raise InterpError(f"optimizer adam takes no weight decay (got {self.weight_decay}): give --weight-decay 0, "
                              f"or --optimizer adam-l2 (weight decay as an L2 term of the gradient) or adamw (decoupled)")

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


def describe_optimizer(spec: TrainSpec) -> str:
    """One line naming the optimizer and the settings it takes, e.g. 'sgd (momentum 0.9, weight decay 0.01 as L2)'."""
    name, parts = spec.optimizer, []
    if name in ADAM_FAMILY:
        parts.append(f"betas {spec.beta1},{spec.beta2}")
        if not spec.bias_correction:
            parts.append("no bias correction")
    if name == "rmsprop":
        parts.append(f"alpha {spec.beta2}")
    if name in ("sgd", "rmsprop") and spec.momentum:
        parts.append(f"momentum {spec.momentum}")
    if name != "sgd" and spec.eps != 1e-8:
        parts.append(f"eps {spec.eps}")
    if spec.weight_decay:
        parts.append(f"weight decay {spec.weight_decay}" + (" decoupled" if name == "adamw" else " as L2"))
    return name + (f" ({', '.join(parts)})" if parts else "")


# ---------------------------------------------------------------------------- the run
SECTIONS = {"task": TaskSpec, "model": ModelSpec, "train": TrainSpec}


@dataclass(frozen=True)
class RunSpec:
    """Task, model, training and the one seed that fixes data, initialisation and batch order."""

    seed: int = 0
    task: TaskSpec = field(default_factory=TaskSpec)
    model: ModelSpec = field(default_factory=ModelSpec)
    train: TrainSpec = field(default_factory=TrainSpec)

    def validate(self) -> None:
        check_int("seed", self.seed, minimum=0)
        self.task.validate()
        self.model.validate()
        self.train.validate()
        if self.model.n_ctx is not None and self.model.n_ctx < self.task.sequence_length:
            raise InterpError(f"n_ctx = {self.model.n_ctx} is shorter than the task's {self.task.sequence_length}-token "
                              f"sequences; give n_ctx >= {self.task.sequence_length} (or none: the sequence length)")

    def to_dict(self) -> dict:
        """What run.json stores and `spec_sha256` hashes (each section's own `to_dict`)."""
        return {"seed": self.seed, "task": self.task.to_dict(), "model": self.model.to_dict(),
                "train": self.train.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> RunSpec:
        if not isinstance(data, dict):
            raise InterpError(f"a run spec must be a JSON object, got {type(data).__name__}")
        unknown = set(data) - {"seed", *SECTIONS}
        if unknown:
            raise InterpError(f"unknown run spec fields {sorted(unknown)}; known: seed, {', '.join(SECTIONS)}")
        try:
            return cls(seed=data.get("seed", 0),
                       **{name: kind.from_dict(data.get(name, {})) for name, kind in SECTIONS.items()})
        except TypeError as exc:  # a dataclass given something it cannot take
            raise InterpError(f"invalid run spec: {exc}") from None

    def override(self, **values) -> RunSpec:
        """A copy with fields replaced by flat name (`k=5`, `lr=3e-4`, `seed=1`, `d_model=64`)."""
        changes: dict[str, dict] = {name: {} for name in SECTIONS}
        top: dict = {}
        for name, value in values.items():
            if name == "seed":
                top["seed"] = value
                continue
            owners = [s for s, kind in SECTIONS.items() if name in {f.name for f in dataclasses.fields(kind)}]
            if not owners:
                raise InterpError(f"unknown setting {name!r}; known: {', '.join(sorted(override_names()))}")
            changes[owners[0]][name] = value
        return dataclasses.replace(
            self,
            **top,
            **{s: dataclasses.replace(getattr(self, s), **c) for s, c in changes.items() if c},
        )

    def get(self, dotted: str):
        """The value of a field by dotted name: `seed`, `task.k`, `train.lr`, `model.n_layers`."""
        section, name = _split_dotted(dotted)
        return self.seed if section is None else getattr(getattr(self, section), name)

    def replace(self, dotted: str, value) -> RunSpec:
        """A copy with one field replaced by dotted name (`task.k`, `train.lr`, `seed`)."""
        section, name = _split_dotted(dotted)
        if section is None:
            return dataclasses.replace(self, seed=value)
        return dataclasses.replace(self, **{section: dataclasses.replace(getattr(self, section), **{name: value})})


def spec_sha256(spec: RunSpec | dict, *, ignore_steps: bool = False) -> str:
    """SHA-256 of a spec's canonical JSON (sorted keys, no spaces): what run.json's `spec_sha256`
    holds, so a hand-edited spec is caught. `spec` is a RunSpec or the dict run.json stores;
    `ignore_steps` leaves out `train.steps`, the one setting a resume may change (the resume
    state records this hash)."""
    data = spec.to_dict() if isinstance(spec, RunSpec) else copy.deepcopy(spec)
    if ignore_steps and isinstance(data.get("train"), dict):
        data["train"].pop("steps", None)
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _split_dotted(dotted: str) -> tuple[str | None, str]:
    if dotted == "seed":
        return None, "seed"
    section, _, name = dotted.partition(".")
    kind = SECTIONS.get(section)
    if kind is None or name not in {f.name for f in dataclasses.fields(kind)}:
        raise InterpError(f"unknown field {dotted!r}; known: {', '.join(dotted_names())}")
    return section, name


def dotted_names() -> list[str]:
    """Every field of a RunSpec by dotted name: seed, task.k, ..., train.steps, ..."""
    return ["seed"] + [f"{s}.{f.name}" for s, kind in SECTIONS.items() for f in dataclasses.fields(kind)]


def override_names() -> set[str]:
    names = {"seed"}
    for kind in SECTIONS.values():
        names |= {f.name for f in dataclasses.fields(kind)}
    return names
