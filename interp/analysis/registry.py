"""The table of analyses: the only place that describes one.

Every part of the toolkit that lists, runs, caches, shows or seeds an analysis reads its
`Analysis` entry here: the suite (`interp analyze`), the CLI's `--only` choices and options,
the cache keys, the report (which analyses it shows: their figures are the report's own,
`interp.report.sections`), the findings and their human summary, and the random streams of
`interp.seeding`. An analysis is one module with

    DEFAULTS: dict                       # every parameter's default, in this one place
    at_step(run, step, *, model=None, device="cpu", **params) -> DataFrame (or {table: DataFrame})
    across = across_of(NAME)             # interp.analysis.common: at_step over steps (None: the entry's)

and optionally `derive(run, tables) -> {table: DataFrame}` (tables computed from its own,
e.g. attention mass per segment), `check_params(params) -> params`, `findings(run, tables, tau,
found) -> dict` (its headline numbers) and `rows(found, tables) -> [(label, text)]` (its rows of
the human summary), plus one `Analysis` entry below. The entry names, as "module:function"
strings (resolved only when used), its findings and rows, and declares what the suite must
provide it (`needs`: the routing head, a reader of the previous checkpoints, the optimizer
state). Modules are imported only when an analysis runs, so reading the table (for `interp
--help` and every bad-input error) never loads torch.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass

from interp import seeding
from interp.errors import InterpError
from interp.names import parse_head
from interp.transition import RELATIVE_STEPS


# ---------------------------------------------------------------------------- options
@dataclass(frozen=True)
class Option:
    """One command-line option of an analysis: `--FLAG TEXT` sets parameter `param`.

    `parse` turns the text into the value (raising InterpError or ValueError on bad text) and
    runs while the command line is read, before any run is opened; `check(value, spec)` runs
    once the run is open (e.g. a head that must exist in its model). Options of several
    analyses may share a flag when they are the same object."""

    flag: str
    param: str
    help: str
    parse: Callable[[str], object] = str
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    check: Callable[[object, object], None] | None = None

    @property
    def dest(self) -> str:
        return self.flag.replace("-", "_")

    def read(self, text: str):
        try:
            return self.parse(text)
        except ValueError as exc:
            raise InterpError(f"--{self.flag}: {exc}") from None


def positive_int(text: str) -> int:
    """A positive integer from text (ValueError otherwise)."""
    value = int(text)
    if value < 1:
        raise ValueError(f"must be a positive integer, got {value}")
    return value


def _names(text: str, what: str) -> list[str]:
    names = [s.strip() for s in str(text).split(",") if s.strip()]
    if not names:
        raise ValueError(f"needs at least one {what}, got {text!r}")
    return names


ABLATION_METHODS = ("zero", "mean", "resample")


def parse_methods(text) -> tuple[str, ...]:
    """Ablation methods from "zero,resample" (or a list): each one of ABLATION_METHODS."""
    names = list(text) if isinstance(text, (list, tuple)) else _names(text, "method")
    unknown = [m for m in names if m not in ABLATION_METHODS]
    if unknown or not names:
        raise InterpError(f"unknown ablation method {', '.join(map(repr, unknown)) or '(none)'}; "
                          f"allowed: {', '.join(ABLATION_METHODS)}")
    return tuple(dict.fromkeys(names))


def parse_heads(text: str) -> tuple[str, ...]:
    """Head names for per-head geometry ("L0H3,L0H1"; "full" is the whole model, always added first)."""
    names = _names(text, "head")
    bad = [h for h in names if h.lower() != "full" and parse_head(h) is None]
    if bad:
        raise ValueError(f"takes head names such as L0H3,L0H1 (or 'full'), got {', '.join(bad)}")
    heads = ["full"] + [h for h in names if h.lower() != "full"]
    return tuple(dict.fromkeys(heads))


def check_heads(heads, spec) -> None:
    """Every head exists in the run's model (layer < n_layers, head < n_heads)."""
    for name in heads:
        if name.lower() == "full":
            continue
        layer, head = parse_head(name)
        if layer >= spec.model.n_layers or head >= spec.model.n_heads:
            raise InterpError(f"--heads {name}: the model has {spec.model.n_layers} layers of {spec.model.n_heads} heads "
                              f"(L0H0..L{spec.model.n_layers - 1}H{spec.model.n_heads - 1})")


N_GROUPS = Option("n-groups", "n_groups", "probe size in groups (default: per analysis)", positive_int, metavar="N")
N_EXAMPLES = Option("n-examples", "n_examples", "examples per probe (default: per analysis; the Hessian's: the whole "
                    "training set)", positive_int, metavar="N")
N_PAIRS = Option("n-pairs", "n_pairs", "clean / corrupted pairs for patching (default: per analysis)", positive_int,
                 metavar="N")
CHAINS = Option("chains", "chains", "SGLD chains of the LLC (default: 4)", positive_int, metavar="N")
DRAWS = Option("draws", "draws", "SGLD draws per chain of the LLC (default: 120)", positive_int, metavar="N")
METHOD = Option("method", "methods", "ablation methods, comma-separated (default: all three)", parse_methods,
                choices=ABLATION_METHODS, metavar="M[,M...]")
def parse_switch(text) -> bool:
    """on/off (yes/no, true/false, 1/0) as a bool."""
    if isinstance(text, bool):
        return text
    low = str(text).strip().lower()
    if low in ("on", "yes", "true", "1"):
        return True
    if low in ("off", "no", "false", "0"):
        return False
    raise ValueError(f"takes on or off, got {text!r}")


CURVATURE = Option("curvature", "curvature", "gradients: also the minibatch noise along the Hessian's v_max and v_min "
                   "(a small Lanczos run per checkpoint, cached; default off)", parse_switch, choices=("on", "off"),
                   metavar="on|off")
N_DRAWS = Option("n-draws", "n_draws", "updates: pairs of one-step minibatch updates per state (default: 64)",
                 positive_int, metavar="N")
HEADS = Option("heads", "restrict", "heads for the per-head LLC, e.g. L0H3,L0H1 (the whole model's is added)",
               parse_heads, metavar="LxHy[,...]", check=check_heads)


# ---------------------------------------------------------------------------- entries
ROUTING = "routing"  # what a parameter that takes the routing head holds until the suite puts the head in
# what the suite (and `across`) provides besides the run, the step and the parameters: the routing head, in the
# parameter `param` while that is ROUTING (so it is in the cache key); a reader of other saved checkpoints
# (step -> state dict, shared by the steps of one call), in the keyword `param`; the optimizer-complete state,
# which the analysis reads itself (so the suite never gives it the loaded checkpoint)
NEEDS = ("routing_head", "previous_checkpoints", "optimizer_state")


@dataclass(frozen=True)
class Need:
    """One thing an analysis needs (one of NEEDS) and the at_step keyword that receives it."""

    what: str
    param: str = ""

    def __post_init__(self):
        if self.what not in NEEDS:
            raise InterpError(f"unknown analysis need {self.what!r}; known: {', '.join(NEEDS)}")


@dataclass(frozen=True)
class Analysis:
    """One analysis: where it lives, its steps, options and how it is cached."""

    name: str
    module: str  # defines DEFAULTS, at_step and across (and optionally derive, check_params, findings, rows)
    summary: str  # one line, for --help and the report
    steps: str = "all"  # default steps: "all", "transition", or relative ones such as "pre,mid,post"
    tables: tuple[str, ...] = ()  # tables at_step returns, when more than one (else just `name`)
    version: int = 1  # part of the cache key: bump when what it computes changes
    default: bool = True  # run by `interp analyze` without --only (False: minutes of work, asked for)
    options: tuple[Option, ...] = ()  # its command-line options
    stream: str | None = None  # its own random stream in interp.seeding, if it draws one
    findings: str = ""  # "module:function" (run, tables, tau, found) -> its headline numbers
    describe: str = ""  # "module:function" (findings, tables) -> its rows of the human summary
    shares_model: bool = True  # may take the suite's loaded checkpoint (False: it changes the weights)
    extra: str = ""  # pip extra the module needs, named in the error when it is missing
    needs: tuple[Need, ...] = ()  # what the suite provides it besides the run, the step and its parameters

    def need(self, what: str) -> Need | None:
        """Its need `what` (one of NEEDS), or None."""
        return next((n for n in self.needs if n.what == what), None)

    @property
    def takes_model(self) -> bool:
        """Whether the suite may give it the checkpoint it loaded at the step."""
        return self.shares_model and self.need("optimizer_state") is None

    @property
    def table_names(self) -> tuple[str, ...]:
        return self.tables or (self.name,)

    @property
    def needs_tau(self) -> bool:
        """Whether its default steps are placed relative to tau (read from the steps spec)."""
        return steps_need_tau(self.steps)

    def load(self):
        try:
            return importlib.import_module(self.module)
        except ImportError as exc:
            hint = f"; install it with: pip install -e '.[{self.extra}]'" if self.extra else ""
            raise InterpError(f"the {self.name} analysis cannot be imported ({exc}){hint}") from None

    def at_step(self) -> Callable:
        """The module's per-step function (imports the module)."""
        return self.load().at_step

    def hook(self, name: str) -> Callable | None:
        """An optional module function (`derive`), or None."""
        return getattr(self.load(), name, None)

    def params(self, options: dict | None = None) -> dict:
        """The module's DEFAULTS with the options that apply to it (by flag or parameter name)."""
        params = dict(self.load().DEFAULTS)
        flags = {o.dest: o.param for o in self.options}
        for key, value in (options or {}).items():
            if value is None:
                continue
            target = flags.get(key, key)
            if target in params:
                params[target] = value
        return params

    def cache_key(self, params: dict) -> dict:
        return {"analysis": self.name, "version": self.version, "params": _jsonable(params)}


def steps_need_tau(steps) -> bool:
    """Whether a steps request ("all", "transition", "from:mid", "pre,900", [100, "post"]) names
    any step relative to tau."""
    if steps is None:
        return False
    items = [s.strip() for s in steps.split(",")] if isinstance(steps, str) else list(steps) \
        if not isinstance(steps, int) else [steps]
    for item in items:
        item = str(item)
        if item.startswith("from:"):
            item = item[len("from:"):]
        if item == "transition" or item in RELATIVE_STEPS:
            return True
    return False


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


# names that stand for several analyses in --only
GROUPS: dict[str, tuple[str, ...]] = {
    # the mechanism diagnostics of docs/diagnostics.md that are cheap enough for every checkpoint
    "diagnostics": ("trajectory", "spectra", "representations", "lens", "gradients"),
    # what a sweep's circuit columns read (interp.sweeps.circuits): the routing head, its onsets, its
    # ablation at tau and the collective snap
    "circuits": ("sensitivity", "usage", "ablation", "groups"),
}


def parse_only(only) -> tuple[str, ...]:
    """Analysis names from "a,b" or a list (a group name of GROUPS stands for its analyses); None
    means every default analysis."""
    if only is None:
        return default_names()
    names = [s.strip() for s in (only.split(",") if isinstance(only, str) else only) if s.strip()]
    names = [member for n in names for member in GROUPS.get(n, (n,))]
    unknown = [n for n in names if n not in REGISTRY]
    if unknown or not names:
        allowed = ", ".join([*REGISTRY, *(f"{g} (= {'+'.join(m)})" for g, m in GROUPS.items())])
        raise InterpError(f"unknown analysis {', '.join(unknown) or '(none)'}; allowed: {allowed}")
    return tuple(dict.fromkeys(names))


def options() -> list[Option]:
    """Every analysis option once (options shared between analyses are one object)."""
    seen: dict[str, Option] = {}
    for entry in REGISTRY.values():
        for option in entry.options:
            if option.flag in seen and seen[option.flag] is not option:
                raise InterpError(f"analyses {entry.name} and another define --{option.flag} differently")
            seen[option.flag] = option
    return list(seen.values())


def streams() -> tuple[str, ...]:
    """The random streams the analyses draw (each entry's `stream`)."""
    return tuple(dict.fromkeys(e.stream for e in REGISTRY.values() if e.stream))


seeding.add_streams(streams)  # interp.seeding knows the analyses' streams without importing them


def describe_all() -> str:
    """One line per analysis, for --help."""
    return "; ".join(f"{e.name}{'' if e.default else ' (only when asked)'}: {e.summary}" for e in REGISTRY.values())


def resolve(path: str) -> Callable:
    """The function named by "module:function" (findings, summary rows)."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


# ---------------------------------------------------------------------------- the analyses
register(Analysis(
    "sensitivity", "interp.analysis.sensitivity",
    "per-head attention to z and z-share at the decision position, every checkpoint",
    findings="interp.analysis.sensitivity:findings", describe="interp.analysis.sensitivity:rows",
    options=(N_GROUPS,),
))
register(Analysis(
    "attention", "interp.analysis.attention",
    "mean attention pattern of every head over a fixed probe, every checkpoint",
    options=(N_GROUPS,),
))
register(Analysis(
    "groups", "interp.analysis.groups",
    "per-group candidate accuracy at fractions of tau and through the transition window",
    findings="interp.analysis.groups:findings", describe="interp.analysis.groups:rows",
    steps="transition", options=(N_GROUPS,),
))
register(Analysis(
    "ablation", "interp.analysis.ablation",
    "zero, mean and resample ablation of every head and layer at tau/4, tau and 2 tau",
    findings="interp.analysis.ablation:findings", describe="interp.analysis.ablation:rows",
    steps="pre,mid,post", options=(METHOD, N_EXAMPLES), version=2,
))
register(Analysis(
    "patching", "interp.analysis.patching",
    "activation patching of the residual stream and of every head at tau",
    findings="interp.analysis.patching:findings", describe="interp.analysis.patching:rows",
    steps="mid", tables=("patching_heads", "patching_residual"), options=(N_PAIRS,),
))
register(Analysis(
    "usage", "interp.analysis.usage",
    "when the routing head's z is used: its resample-ablation cost and patching recovery, every checkpoint",
    findings="interp.analysis.usage:findings", describe="interp.analysis.usage:rows",
    needs=(Need("routing_head", "head"),),
    options=(N_EXAMPLES, N_PAIRS),
))
register(Analysis(
    "hessian", "interp.analysis.hessian",
    "loss Hessian extremes by Lanczos, gradient alignment and where the escape direction lives",
    describe="interp.analysis.hessian:rows",
    default=False, tables=("hessian", "hessian_escape"), stream="hessian", options=(N_EXAMPLES,),
    steps="transition",  # minutes a checkpoint: the plateau (tau/4..tau) and the transition window
))
register(Analysis(
    "llc", "interp.analysis.llc",
    "local learning coefficient (devinterp SGLD), whole model and per head",
    describe="interp.analysis.llc:rows",
    default=False, shares_model=False, steps="transition", stream="llc", options=(HEADS, CHAINS, DRAWS),
    extra="landscape",
))


# ---------------------------------------------------------------------------- mechanism diagnostics
register(Analysis(
    "trajectory", "interp.analysis.trajectory",
    "weight displacement per step, direction consistency and weight norms per component, between checkpoints",
    needs=(Need("previous_checkpoints", "previous"),),
))
register(Analysis(
    "spectra", "interp.analysis.spectra",
    "singular values, effective rank, sigma1/sigma2 and nuclear norm of every head's OV and QK circuits",
    tables=("spectra", "spectra_values"),
))
register(Analysis(
    "representations", "interp.analysis.representations",
    "within-group (z) and between-group (B) variance of the decision position's residual stream after each layer",
    options=(N_GROUPS,),
))
register(Analysis(
    "lens", "interp.analysis.lens",
    "logit lens at the decision position: first-token and candidate loss read out after each layer",
    options=(N_GROUPS,),
))
register(Analysis(
    "gradients", "interp.analysis.gradients",
    "full-gradient norm, minibatch noise and its ratio, per-example coherence, noise along directions, "
    "selector gradient SNR",
    default=False, stream="gradients", options=(N_EXAMPLES, N_GROUPS, CURVATURE),
))
register(Analysis(
    "updates", "interp.analysis.updates",
    "drift against diffusion: many paired one-step AdamW updates from the optimizer-complete state",
    default=False, stream="updates", steps="pre,mid,post", options=(N_DRAWS,), needs=(Need("optimizer_state"),),
))
