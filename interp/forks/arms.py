"""The arms of a fork: one class per arm, registered by name in ARMS.

Each arm changes one thing about the parent's regime; each class's `doc` says what (the table of docs/forks.md,
and `interp fork --help` lists them). g_B is a minibatch gradient at the fork's batch size, g the gradient over
the whole training set (computed in chunks), xi = (g_B1 - g_B2) / sqrt(2) the measured noise of two independent
minibatches: full_batch steps on g, measured_noise on g + c xi, v_only_noise and m_only_noise put the noise in
one moment only, the data arms (switch_task, reassign, resize) train on changed data, `optimizer` switches the
optimizer with a fresh state (the author's optimizer branch).

An arm class says everything about its arm, so that a new arm is one class passed to `register`:
its name, doc and parameters (`PARAMS`, checked by `make_arm`); whether it has a random stream of
its own (`seedless`: one fork per step in a family) and which batch stream it starts from
(`stream`); its place in comparison tables (`order`, else its place in ARMS); the training
settings it changes (`train_changes`); what it does at the fork (`prepare_params` before the
model is built, `prepare_optimizer` once the parent's optimizer state is loaded); and at each
step, `gradients`: an arm that defines it steps with the explicit Adam on the gradients it
returns for each moment, the others take the parent's minibatch step (`interp.forks.arm_steps`
drives both). An instance is the arm with every parameter given, as a fork records it.
This module imports no torch: the hooks reach tensors only through what they are handed.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from interp.errors import InterpError
from interp.spec import ADAM_FAMILY, OPTIMIZERS
from interp.spec import DIRECTIONS as TASK_DIRECTIONS

DIRECTIONS = ("vmin", "-vmin", "random")
XI = ("measured", "isotropic")  # v_only_noise's noise: the measured xi, or isotropic of its norm (the author's)
FLOAT32_MAX = 3.4028234663852886e38  # torch.finfo(torch.float32).max, without importing torch


@dataclass(frozen=True)
class Param:
    kind: type
    default: object  # None: required
    low: int | float | None = 0.0
    low_open: bool = False
    choices: tuple = ()
    doc: str = ""
    added: bool = False  # added after forks were recorded: left out of `params` at its default (shown in labels)
    optional: bool = False  # may be left out (default None): then the arm leaves that setting as the parent has it
    high: int | float | None = None  # the largest value allowed (inclusive), where there is one


@dataclass
class ForkStart:
    """What an arm's `prepare_params` may change at the fork: `params` (name -> tensor, loaded into
    the fork's model afterwards), from the parent's `state` at `step`, for fork seed `seed`."""

    parent: object
    step: int
    seed: int
    state: object
    params: dict


def fork_seed(parent_seed: int, step: int, seed: int, purpose: str) -> int:
    digest = hashlib.sha256(f"interp-fork:{parent_seed}:{step}:{seed}:{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


@dataclass(frozen=True)
class Arm:
    """An arm with every parameter given (defaults filled in), as a fork records it; its class
    (registered in ARMS) says what the arm does (module docstring)."""

    params: tuple[tuple[str, object], ...] = ()

    name: ClassVar[str] = ""
    doc: ClassVar[str] = ""
    PARAMS: ClassVar[dict[str, Param]] = {}
    seedless: ClassVar[bool] = False  # no random stream of its own: one fork per step, not per seed
    stream: ClassVar[str] = "new"  # "parent": the parent's batch stream; "new": one per fork seed
    order: ClassVar[float | None] = None  # place in comparison tables; None: its place in ARMS
    fresh_state: ClassVar[bool] = False  # the fork's optimizer starts with an empty state (not the parent's)

    def __repr__(self) -> str:
        return f"Arm(name={self.name!r}, params={self.params!r})"

    @property
    def kwargs(self) -> dict:
        return dict(self.params)

    @property
    def shown(self) -> tuple[tuple[str, object], ...]:
        """Every parameter, an `added` one left at its default included: what tables and labels show."""
        given = dict(self.params)
        return tuple((k, given.get(k, p.default)) for k, p in self.PARAMS.items() if k in given or p.added)

    @property
    def params_text(self) -> str:
        return ",".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.shown)

    @property
    def label(self) -> str:
        return self.name if not self.params else f"{self.name}:{self.params_text}"

    @property
    def slug(self) -> str:
        """The arm in a folder name ("v_only_noise_s0.5"): characters other than letters, digits, . + - _ become _."""
        text = self.name + "".join(f"_{k}{v:g}" if isinstance(v, float) else f"_{k}{v}" for k, v in self.params)
        return "".join(ch if ch.isalnum() or ch in ".+-_" else "_" for ch in text)

    @property
    def explicit(self) -> bool:
        """Steps with the explicit Adam on the gradients of `gradients` (clipped as the run clips)."""
        return type(self).gradients is not Arm.gradients

    def train_changes(self) -> dict:
        """The training settings this arm changes (lr, batch_size, weight_decay; the optimizer and its settings)."""
        return {}

    def task_changes(self, parent_task) -> dict:
        """The task settings this arm changes, given the parent's TaskSpec (the data-changing arms)."""
        return {}

    def prepare_params(self, start: ForkStart) -> None:
        """At the fork, before the model is built: change `start.params` in place (a kick)."""

    def prepare_optimizer(self, optimizer) -> None:
        """At the fork, once the parent's optimizer state is loaded: change it (a reset)."""

    def gradients(self, step) -> tuple:
        """(loss, the clean gradient g or None, the gradient for the first moment, for the second)
        of one step; `step` is the `interp.forks.arm_steps.ArmStep` (full_gradient, measured_noise,
        minibatch_gradient, isotropic, sq_norm). Arms that do not define it take the minibatch step."""
        raise NotImplementedError


ARMS: dict[str, type[Arm]] = {}


def register(cls: type[Arm]) -> type[Arm]:
    """Add an arm class to ARMS under its `name` (a class decorator)."""
    if not cls.name or not cls.name.replace("_", "").isalnum():
        raise InterpError(f"an arm needs a name of letters, digits and _, got {cls.name!r}")
    ARMS[cls.name] = cls
    return cls


def table_order(name: str) -> int | float:
    """Where an arm's rows go in comparison tables: its class's `order`, else its place in ARMS;
    arms not registered come last."""
    cls = ARMS.get(name)
    if cls is None:
        return len(ARMS)
    return list(ARMS).index(name) if cls.order is None else cls.order


# ---------------------------------------------------------------------------- the arms
@register
class Continue(Arm):
    name = "continue"
    doc = "the parent's own batch stream (reproduces the parent bit for bit on the CPU)"
    seedless = True
    stream = "parent"


@register
class Minibatch(Arm):
    name = "minibatch"
    doc = "the reference arm: the parent's regime with a new batch stream per fork seed"


@register
class FullBatch(Arm):
    name = "full_batch"
    doc = "the full-training-set gradient g at every step: no sampling noise"
    seedless = True

    def gradients(self, step) -> tuple:
        loss, g = step.full_gradient()
        return loss, g, g, g


class NoisyGradient(Arm):
    """g plus a noise of scale c made from the measured noise xi (`noise`), fed to both moments."""

    PARAMS = {"c": Param(float, 1.0, doc="noise scale")}

    def noise(self, step, xi) -> list:
        raise NotImplementedError

    def gradients(self, step) -> tuple:
        loss, g = step.full_gradient()
        noisy = [a + b for a, b in zip(g, self.noise(step, step.measured_noise()))]
        return loss, g, noisy, noisy


@register
class MeasuredNoise(NoisyGradient):
    name = "measured_noise"
    doc = "g + c (g_B1 - g_B2) / sqrt(2): noise with the minibatch covariance, in both moments"

    def noise(self, step, xi) -> list:
        return [self.kwargs["c"] * b for b in xi]


@register
class IsotropicNoise(NoisyGradient):
    name = "isotropic_noise"
    doc = "g + isotropic Gaussian noise of norm c ||g_B1 - g_B2|| / sqrt(2), in both moments"

    def noise(self, step, xi) -> list:
        return step.isotropic(self.kwargs["c"] * step.sq_norm(xi).sqrt())


@register
class VOnlyNoise(Arm):
    name = "v_only_noise"
    doc = ("first moment g, second moment (g + s xi)^2: noise reaches the update only through the preconditioner; "
           "xi=measured (default): xi = (g_B1 - g_B2) / sqrt(2); xi=isotropic (the author's): isotropic Gaussian "
           "noise of that norm")
    PARAMS = {"s": Param(float, 1.0, doc="noise scale"),
              "xi": Param(str, "measured", low=None, choices=XI, doc="measured or isotropic", added=True)}

    def gradients(self, step) -> tuple:
        loss, g = step.full_gradient()
        xi = step.measured_noise()
        if self.kwargs.get("xi", "measured") == "isotropic":
            xi = step.isotropic(step.sq_norm(xi).sqrt())
        return loss, g, g, [a + self.kwargs["s"] * b for a, b in zip(g, xi)]


@register
class MOnlyNoise(Arm):
    name = "m_only_noise"
    doc = ("first moment g + s xi, second moment g^2: noise reaches the update only through the first moment (the "
           "author's construction check: a clean, small v amplifies it); xi=measured (default) or isotropic (the "
           "author's), as v_only_noise")
    PARAMS = {"s": Param(float, 1.0, doc="noise scale"),
              "xi": Param(str, "measured", low=None, choices=XI, doc="measured or isotropic")}

    def gradients(self, step) -> tuple:
        loss, g = step.full_gradient()
        xi = step.measured_noise()
        if self.kwargs["xi"] == "isotropic":
            xi = step.isotropic(step.sq_norm(xi).sqrt())
        return loss, g, [a + self.kwargs["s"] * b for a, b in zip(g, xi)], g


@register
class ResetOptimizer(Arm):
    name = "reset_optimizer"
    doc = ("the optimizer's state zeroed (AdamW: both moments and the step counter; SGD, RMSProp: their buffers), "
           "then minibatch")

    def prepare_optimizer(self, optimizer) -> None:
        for slot in optimizer.state.values():
            for value in slot.values():
                if hasattr(value, "zero_"):
                    value.zero_()


@register
class SwitchOptimizer(Arm):
    """The author's optimizer branch (docs/forks.md, "Optimizer branch"): from the fork step on, another optimizer
    with a fresh state (the step counter, moments and buffers started over; the weights carried). A setting left
    out is the parent's, except those the new optimizer does not take (Adam has no momentum and `adam` no weight
    decay; SGD and RMSProp no bias correction, SGD no eps), which go back to their defaults."""

    name = "optimizer"
    doc = ("minibatch with another optimizer from the fork on, its state fresh: name=adamw|adam-l2|adam|sgd|rmsprop, "
           "and any of lr, beta1, beta2, momentum, eps, weight_decay, bias_correction=true|false (else the parent's)")
    PARAMS = {"name": Param(str, None, low=None, choices=OPTIMIZERS, doc="the optimizer"),
              "lr": Param(float, None, low_open=True, optional=True, doc="lr"),
              "beta1": Param(float, None, optional=True, doc="Adam's first-moment decay"),
              "beta2": Param(float, None, optional=True, doc="Adam's second-moment decay, RMSProp's alpha"),
              "momentum": Param(float, None, optional=True, doc="SGD's and RMSProp's momentum"),
              "eps": Param(float, None, low_open=True, optional=True, doc="eps"),
              "weight_decay": Param(float, None, optional=True, doc="weight decay"),
              "bias_correction": Param(str, None, low=None, choices=("true", "false"), optional=True,
                                       doc="Adam's bias correction")}
    fresh_state = True

    def train_changes(self) -> dict:
        kw = self.kwargs
        name = kw["name"]
        out = {"optimizer": name, **{k: kw[k] for k in ("lr", "beta1", "beta2", "momentum", "eps", "weight_decay")
                                     if k in kw}}
        if "bias_correction" in kw:
            out["bias_correction"] = kw["bias_correction"] == "true"
        defaults = {"momentum": 0.0} if name in ADAM_FAMILY else {"bias_correction": True}
        if name == "adam":
            defaults["weight_decay"] = 0.0
        if name == "sgd":
            defaults["eps"] = 1e-8
        return {**defaults, **out}


OPTIMIZER_STATE = ("fresh", "carried")  # a data-changing arm's optimizer: started over (the author's) or carried


class DataArm(Arm):
    """An arm that changes the data the fork trains on (docs/forks.md, "Forks that change the data"), its optimizer
    state fresh (the author's: a new optimizer for the new data) or carried (`optimizer=carried`)."""

    @property
    def fresh_state(self) -> bool:  # type: ignore[override]
        return self.kwargs.get("optimizer", "fresh") == "fresh"


def _state_param() -> Param:
    return Param(str, "fresh", low=None, choices=OPTIMIZER_STATE, doc="the optimizer's state: fresh or carried")


@register
class SwitchTask(DataArm):
    name = "switch_task"
    doc = ("minibatch on the task in another direction (the reversal transfer: a model trained on az_to_b continues "
           "on bz_to_a), from the same strings; optimizer=fresh (default) or carried")
    PARAMS = {"direction": Param(str, None, low=None, choices=tuple(TASK_DIRECTIONS), doc="the new direction"),
              "optimizer": _state_param()}

    def task_changes(self, parent_task) -> dict:
        return {"direction": self.kwargs["direction"]}


@register
class Reassign(DataArm):
    name = "reassign"
    doc = ("minibatch after the targets of a fraction of the bases are permuted among their selectors (forgetting "
           "and relearning: the author's continual shift); optimizer=fresh (default) or carried")
    PARAMS = {"fraction": Param(float, None, low=0.0, low_open=True, high=1.0, doc="the share of bases, in (0, 1]"),
              "optimizer": _state_param()}

    def task_changes(self, parent_task) -> dict:
        return {"reassign_fraction": self.kwargs["fraction"]}


@register
class Resize(DataArm):
    name = "resize"
    doc = ("minibatch with K changed to k: candidates removed (each base keeps those of the first k selectors) or "
           "added (new selectors and targets); optimizer=fresh (default) or carried")
    PARAMS = {"k": Param(int, None, low=1, doc="the new K"), "optimizer": _state_param()}

    def task_changes(self, parent_task) -> dict:
        origin = parent_task.resized_from if parent_task.resized_from is not None else parent_task.k
        k = self.kwargs["k"]
        return {"k": k, "resized_from": None if k == origin else origin}


class SettingArm(Arm):
    """Minibatch with one training setting (`setting`) changed to `value`."""

    setting: ClassVar[str] = ""

    def train_changes(self) -> dict:
        return {self.setting: self.kwargs["value"]}


@register
class LearningRate(SettingArm):
    name = setting = "lr"
    doc = "minibatch at another learning rate"
    PARAMS = {"value": Param(float, None, low_open=True, doc="lr")}


@register
class BatchSize(SettingArm):
    name = setting = "batch_size"
    doc = "minibatch at another batch size"
    PARAMS = {"value": Param(int, None, low=1, doc="batch size")}


@register
class WeightDecay(SettingArm):
    name = setting = "weight_decay"
    doc = "minibatch at another weight decay"
    PARAMS = {"value": Param(float, None, doc="weight decay")}


@register
class Kick(Arm):
    name = "kick"
    doc = ("minibatch after displacing the parameters by eps along the Hessian bottom eigenvector at the fork step "
           "(vmin: oriented downhill, -vmin: uphill) or a random unit direction (the control)")
    PARAMS = {"eps": Param(float, None, low_open=True, doc="displacement (parameter units)"),
              "direction": Param(str, "vmin", low=None, choices=DIRECTIONS, doc="vmin, -vmin or random")}

    def prepare_params(self, start: ForkStart) -> None:
        kw = self.kwargs
        direction = kick_direction(start.parent, start.step, start.state, kw["direction"], start.seed)
        start.params.update({n: t + kw["eps"] * direction[n] for n, t in start.params.items()})


def kick_direction(parent, step: int, state, direction: str, seed: int) -> dict:
    """A unit vector (name -> tensor): the Hessian bottom eigenvector at the state (vmin oriented
    so that the gradient's component along it is <= 0, i.e. downhill; -vmin the other way), or a
    random unit direction from the fork seed. The eigenvector is cached in the parent's cache/."""
    import torch

    if direction == "random":
        gen = torch.Generator().manual_seed(fork_seed(parent.spec.seed, step, seed, "kick"))
        draws = {n: torch.randn(p.shape, generator=gen) for n, p in state.params.items()}
        norm = torch.sqrt(sum((d.double() ** 2).sum() for d in draws.values()))
        return {n: (d / norm).float() for n, d in draws.items()}
    from interp.forks.directions import bottom_eigenvector

    vmin = bottom_eigenvector(parent, step, state)
    return vmin if direction == "vmin" else {n: -v for n, v in vmin.items()}


# ---------------------------------------------------------------------------- parsing
def make_arm(name: str, /, **params) -> Arm:
    """An Arm with its parameters checked: a clear error for an unknown arm or parameter, or a bad value."""
    if name not in ARMS:
        raise InterpError(f"unknown arm {name!r}; allowed: {', '.join(ARMS)}")
    cls = ARMS[name]
    unknown = sorted(set(params) - set(cls.PARAMS))
    if unknown:
        allowed = ", ".join(cls.PARAMS) or "none"
        raise InterpError(f"arm {name} has no parameter {', '.join(unknown)}; its parameters: {allowed}")
    out = []
    for key, p in cls.PARAMS.items():
        value = params.get(key, p.default)
        if value is None and p.optional:
            continue
        if value is None:
            raise InterpError(f"arm {name} needs {key}= ({p.doc}), e.g. {name}:{key}=...")
        value = _value(name, key, p, value)
        if not (p.added and value == p.default):  # recorded as before the parameter existed
            out.append((key, value))
    return cls(tuple(out))


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
    if p.high is not None and number > p.high:
        raise InterpError(f"{where} must be in {'(' if p.low_open else '['}{p.low:g}, {p.high:g}], got {value!r}")
    if abs(number) > FLOAT32_MAX:  # the weights are float32: such an lr or decay makes every update inf
        raise InterpError(f"{where} must be at most {FLOAT32_MAX:.4g} (the largest float32), got {value!r}")
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
            if key.strip() in groups[-1][1]:
                raise InterpError(f"arm {groups[-1][0]}: parameter {key.strip()} is given twice; give each once")
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
