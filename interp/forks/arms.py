"""The arms of a fork: what each changes, its parameters, and the training step it takes.

Each arm changes one thing about the parent's regime (docs/forks.md). g_B is a minibatch
gradient at the fork's batch size, g the gradient over the whole training set (computed in
chunks), xi = (g_B1 - g_B2) / sqrt(2) the measured noise of two independent minibatches.

    continue         the parent's own batch stream: reproduces the parent bit for bit (CPU)
    minibatch        the reference arm: the parent's regime with a new batch stream per fork seed
    full_batch       g at every step: no sampling noise
    measured_noise   g + c xi in both moments (c: noise scale, default 1)
    isotropic_noise  g plus isotropic Gaussian noise of norm c ||xi|| in both moments
    v_only_noise     first moment g, second moment (g + s xi)^2: noise only in the preconditioner
    reset_optimizer  both moments zeroed and the step counter reset, then minibatch
    lr, batch_size, weight_decay   minibatch with that setting changed to `value`
    kick             minibatch after displacing the parameters by eps along the Hessian bottom
                     eigenvector (direction vmin or -vmin) or a random unit direction

The training step of each arm is `interp.forks.arm_steps` (this module imports no torch).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from interp.errors import InterpError

DIRECTIONS = ("vmin", "-vmin", "random")


@dataclass(frozen=True)
class Param:
    kind: type
    default: object  # None: required
    low: int | float | None = 0.0
    low_open: bool = False
    choices: tuple = ()
    doc: str = ""


@dataclass(frozen=True)
class ArmDef:
    name: str
    doc: str
    params: dict
    explicit: bool = False  # steps with the explicit AdamW on the full gradient
    stream: str = "new"  # "parent": the parent's batch stream; "new": one per fork seed


ARMS = {d.name: d for d in (
    ArmDef("continue", "the parent's own batch stream (reproduces the parent bit for bit on the CPU)", {},
           stream="parent"),
    ArmDef("minibatch", "the reference arm: the parent's regime with a new batch stream per fork seed", {}),
    ArmDef("full_batch", "the full-training-set gradient g at every step: no sampling noise", {}, explicit=True),
    ArmDef("measured_noise", "g + c (g_B1 - g_B2) / sqrt(2): noise with the minibatch covariance, in both moments",
           {"c": Param(float, 1.0, doc="noise scale")}, explicit=True),
    ArmDef("isotropic_noise", "g + isotropic Gaussian noise of norm c ||g_B1 - g_B2|| / sqrt(2), in both moments",
           {"c": Param(float, 1.0, doc="noise scale")}, explicit=True),
    ArmDef("v_only_noise", "first moment g, second moment (g + s (g_B1 - g_B2) / sqrt(2))^2: noise reaches the "
           "update only through the preconditioner", {"s": Param(float, 1.0, doc="noise scale")}, explicit=True),
    ArmDef("reset_optimizer", "both AdamW moments zeroed and the step counter reset, then minibatch", {}),
    ArmDef("lr", "minibatch at another learning rate", {"value": Param(float, None, low_open=True, doc="lr")}),
    ArmDef("batch_size", "minibatch at another batch size", {"value": Param(int, None, low=1, doc="batch size")}),
    ArmDef("weight_decay", "minibatch at another weight decay", {"value": Param(float, None, doc="weight decay")}),
    ArmDef("kick", "minibatch after displacing the parameters by eps along the Hessian bottom eigenvector at the "
           "fork step (vmin: oriented downhill, -vmin: uphill) or a random unit direction (the control)",
           {"eps": Param(float, None, low_open=True, doc="displacement (parameter units)"),
            "direction": Param(str, "vmin", low=None, choices=DIRECTIONS, doc="vmin, -vmin or random")}),
)}
TRAIN_CHANGES = {"lr": "lr", "batch_size": "batch_size", "weight_decay": "weight_decay"}


@dataclass(frozen=True)
class Arm:
    """An arm with every parameter given (defaults filled in), as a fork records it."""

    name: str
    params: tuple[tuple[str, object], ...] = ()

    @property
    def definition(self) -> ArmDef:
        return ARMS[self.name]

    @property
    def kwargs(self) -> dict:
        return dict(self.params)

    @property
    def params_text(self) -> str:
        return ",".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.params)

    @property
    def label(self) -> str:
        return self.name if not self.params else f"{self.name}:{self.params_text}"

    @property
    def slug(self) -> str:
        """The arm in a folder name ("v_only_noise_s0.5"): characters other than letters, digits, . + - _ become _."""
        text = self.name + "".join(f"_{k}{v:g}" if isinstance(v, float) else f"_{k}{v}" for k, v in self.params)
        return "".join(ch if ch.isalnum() or ch in ".+-_" else "_" for ch in text)

    def train_changes(self) -> dict:
        """The training settings this arm changes (lr, batch_size, weight_decay)."""
        return {TRAIN_CHANGES[self.name]: self.kwargs["value"]} if self.name in TRAIN_CHANGES else {}


def make_arm(name: str, **params) -> Arm:
    """An Arm with its parameters checked: a clear error for an unknown arm or parameter, or a bad value."""
    if name not in ARMS:
        raise InterpError(f"unknown arm {name!r}; allowed: {', '.join(ARMS)}")
    spec = ARMS[name]
    unknown = sorted(set(params) - set(spec.params))
    if unknown:
        allowed = ", ".join(spec.params) or "none"
        raise InterpError(f"arm {name} has no parameter {', '.join(unknown)}; its parameters: {allowed}")
    out = []
    for key, p in spec.params.items():
        value = params.get(key, p.default)
        if value is None:
            raise InterpError(f"arm {name} needs {key}= ({p.doc}), e.g. {name}:{key}=...")
        out.append((key, _value(name, key, p, value)))
    return Arm(name, tuple(out))


def _value(arm: str, key: str, p: Param, value):
    where = f"arm {arm}: {key}"
    if p.kind is str:
        if value not in p.choices:
            raise InterpError(f"{where} must be one of {', '.join(p.choices)}, got {value!r}")
        return value
    try:
        number = p.kind(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        raise InterpError(f"{where} must be a {'number' if p.kind is float else 'whole number'}, got {value!r}") from None
    if p.kind is int and isinstance(value, str) and str(number) != value.strip():
        raise InterpError(f"{where} must be a whole number, got {value!r}")
    if not math.isfinite(number) or (p.low is not None and (number <= p.low if p.low_open else number < p.low)):
        bound = f"{'>' if p.low_open else '>='} {p.low:g}"
        raise InterpError(f"{where} must be a finite number {bound}, got {value!r}")
    return number


def parse_arms(texts: str | Sequence[str]) -> list[Arm]:
    """Arms from "NAME[:key=value,...]" items, comma separated ("minibatch,measured_noise:c=0.5,
    full_batch"): an item with "=" and no ":" continues the previous arm's parameters."""
    items = [t for text in ([texts] if isinstance(texts, str) else texts) for t in text.split(",")]
    groups: list[tuple[str, dict]] = []
    for raw in (t.strip() for t in items):
        if not raw:
            continue
        name, colon, rest = raw.partition(":")
        if not colon and "=" in raw:
            if not groups:
                raise InterpError(f"arm parameter {raw!r} comes before any arm; write NAME:key=value")
            name, rest = None, raw
        if name is not None:
            groups.append((name.strip(), {}))
        if rest:
            key, eq, value = rest.partition("=")
            if not eq or not key.strip():
                raise InterpError(f"arm parameters are key=value, got {rest!r} in {raw!r}")
            groups[-1][1][key.strip()] = value.strip()
    if not groups:
        raise InterpError(f"no arm given; allowed: {', '.join(ARMS)}")
    arms = [make_arm(name, **params) for name, params in groups]
    seen = set()
    for arm in arms:
        if arm.label in seen:
            raise InterpError(f"arm {arm.label} is given twice")
        seen.add(arm.label)
    return arms


def arm_of(block: dict) -> Arm:
    """The Arm a fork block records."""
    return make_arm(block["arm"], **block.get("params", {}))
