"""The table of analyses: every part of the toolkit that lists or runs analyses reads it.

The suite (`interp analyze`), the CLI's `--only` choices and help, the cache keys and the
report's sections all come from `REGISTRY`. An analysis is one module with two entry points,

    at_step(run, step, *, model=None, device="cpu", **params) -> DataFrame (or {table: DataFrame})
    across(run, steps=..., **params) -> DataFrame

plus one `Analysis` entry below. Modules are imported only when an analysis runs, so reading
the table (for `interp --help`) never loads torch.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field

from interp.errors import InterpError


@dataclass(frozen=True)
class Analysis:
    """One analysis: where its per-step function lives, its defaults and how it is cached."""

    name: str
    module: str  # defines at_step and across
    summary: str  # one line, for --help and the report
    defaults: dict = field(default_factory=dict)  # parameters of at_step besides run, step, model, device
    steps: str = "all"  # default steps: "all", or relative ones such as "pre,mid,post" or "mid"
    tables: tuple[str, ...] = ()  # tables at_step returns, when more than one (else just `name`)
    version: int = 1  # part of the cache key: bump when what it computes changes
    default: bool = True  # run by `interp analyze` without --only (False: minutes of work, asked for)
    options: dict = field(default_factory=dict)  # CLI option -> parameter (e.g. {"method": "methods"})
    needs_routing_head: bool = False  # a parameter "routing" means the routing head of the run
    shares_model: bool = True  # may take the suite's loaded checkpoint (False: it changes the weights)
    extra: str = ""  # pip extra the module needs, named in the error when it is missing
    module_defaults: bool = False  # the defaults are the module's DEFAULTS (read when it runs)

    @property
    def table_names(self) -> tuple[str, ...]:
        return self.tables or (self.name,)

    def load(self):
        try:
            return importlib.import_module(self.module)
        except ImportError as exc:
            hint = f"; install it with: pip install -e '.[{self.extra}]'" if self.extra else ""
            raise InterpError(f"the {self.name} analysis cannot be imported ({exc}){hint}") from None

    def at_step(self) -> Callable:
        """The module's per-step function (imports the module)."""
        return self.load().at_step

    def params(self, options: dict | None = None) -> dict:
        """Its defaults with the options that apply to it (by CLI name or parameter name)."""
        params = dict(self.defaults)
        if self.module_defaults:
            params = {**self.load().DEFAULTS, **params}
        for key, value in (options or {}).items():
            if value is None:
                continue
            target = self.options.get(key, key)
            if target in params:
                params[target] = value
        return params

    def cache_key(self, params: dict) -> dict:
        return {"analysis": self.name, "version": self.version, "params": _jsonable(params)}


def _jsonable(value):
    return json.loads(json.dumps(value, sort_keys=True, default=list))


REGISTRY: dict[str, Analysis] = {}


def register(entry: Analysis) -> Analysis:
    REGISTRY[entry.name] = entry
    return entry


def get(name: str) -> Analysis:
    try:
        return REGISTRY[name]
    except KeyError:
        raise InterpError(f"unknown analysis {name!r}; allowed: {', '.join(REGISTRY)}") from None


def default_names() -> tuple[str, ...]:
    return tuple(name for name, entry in REGISTRY.items() if entry.default)


def parse_only(only) -> tuple[str, ...]:
    """Analysis names from "a,b" or a list; None means every default analysis."""
    if only is None:
        return default_names()
    names = [s.strip() for s in (only.split(",") if isinstance(only, str) else only) if s.strip()]
    unknown = [n for n in names if n not in REGISTRY]
    if unknown or not names:
        raise InterpError(f"unknown analysis {', '.join(unknown) or '(none)'}; allowed: {', '.join(REGISTRY)}")
    return tuple(dict.fromkeys(names))


def describe_all() -> str:
    """One line per analysis, for --help."""
    return "; ".join(f"{e.name}{'' if e.default else ' (only when asked)'}: {e.summary}" for e in REGISTRY.values())


register(Analysis(
    "sensitivity", "interp.analysis.sensitivity",
    "per-head attention to z and z-share at the decision position, every checkpoint",
    defaults={"n_groups": 64}, options={"n_groups": "n_groups"},
))
register(Analysis(
    "attention", "interp.analysis.attention",
    "mean attention pattern of every head over a fixed probe, every checkpoint",
    defaults={"n_groups": 32}, options={"n_groups": "n_groups"},
))
register(Analysis(
    "groups", "interp.analysis.groups",
    "per-group candidate accuracy at fractions of tau and through the transition window",
    defaults={"n_groups": 200}, steps="transition", options={"n_groups": "n_groups"},
))
register(Analysis(
    "ablation", "interp.analysis.ablation",
    "zero, mean and resample ablation of every head and layer at tau/4, tau and 2 tau",
    defaults={"methods": ("zero", "mean", "resample"), "n_examples": 256}, steps="pre,mid,post",
    options={"method": "methods"}, version=2,
))
register(Analysis(
    "patching", "interp.analysis.patching",
    "activation patching of the residual stream and of every head at tau",
    defaults={"n_pairs": 64}, steps="mid", tables=("patching_heads", "patching_residual"),
))
register(Analysis(
    "usage", "interp.analysis.usage",
    "when the routing head's z is used: its resample-ablation cost and patching recovery, every checkpoint",
    defaults={"head": "routing", "n_examples": 128, "n_pairs": 64}, needs_routing_head=True,
))
register(Analysis(
    "hessian", "interp.analysis.hessian",
    "loss Hessian extremes by Lanczos, gradient alignment and where the escape direction lives",
    defaults={"restrict": None}, module_defaults=True, default=False, tables=("hessian", "hessian_escape"),
    steps="transition",  # minutes a checkpoint: the plateau (tau/4..tau) and the transition window
))
register(Analysis(
    "llc", "interp.analysis.llc",
    "local learning coefficient (devinterp SGLD), whole model and per head",
    defaults={"restrict": ("full", "L0H3")}, module_defaults=True, default=False, shares_model=False,
    steps="transition",
    options={"heads": "restrict"}, extra="landscape",
))
