"""The table of analyses: read from the analysis modules' own declarations, without importing them.

Every part of the toolkit that lists, runs, caches, shows or seeds an analysis reads its
`Analysis` entry here: the suite (`interp analyze`), the CLI's `--only` choices and options,
the cache keys, the report (which analyses it shows: their figures are the report's own,
`interp.report.sections`), the findings and their human summary, and the random streams of
`interp.seeding`. An analysis is one module of this package with

    DEFAULTS: dict                       # every parameter's default, in this one place
    at_step(run, step, *, model=None, device="cpu", **params) -> DataFrame (or {table: DataFrame})
    across = across_of(NAME)             # interp.analysis.common: at_step over steps (None: the entry's)
    ENTRY = Analysis(NAME, __name__, ...)  # its entry: steps, options, version, stream, needs, order, groups

and optionally `derive(run, tables) -> {table: DataFrame}` (tables computed from its own,
e.g. attention mass per segment), `check_params(params) -> params`, `findings(run, tables, tau,
found) -> dict` (its headline numbers) and `rows(found, tables) -> [(label, text)]` (its rows of
the human summary), found by those names. The entry declares what the suite must provide it
(`needs`: the routing head, a reader of the previous checkpoints, the optimizer state).

The registry finds the modules of this package (`discover`) and reads each one's `ENTRY = Analysis(...)`
(and the module-level `X = Option(...)` it uses) from its source, evaluated among the registry's
own names only (`Analysis`, `Need`, `Option`, the shared options, the parse functions, `__name__`),
so reading the table (for `interp --help` and every bad-input error) never imports an analysis
module, nor torch. Modules are imported only when an analysis runs. From outside the package, an
analysis is added with `register(entry)`.
"""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

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
    several: bool = False  # takes a comma-separated list of its choices (else exactly one of them)

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


# options shared by analyses (one object each); an option of one analysis is declared in its module
N_GROUPS = Option("n-groups", "n_groups", "probe size in groups (default: per analysis)", positive_int, metavar="N")
N_EXAMPLES = Option("n-examples", "n_examples", "examples per probe (default: per analysis; the Hessian's: the whole "
                    "training set)", positive_int, metavar="N")
# the ablation and the keep-only ablation (sufficiency) take the same --method
ABLATION_METHOD = Option("method", "methods", "ablation methods, comma-separated (default: all three)",
                         parse_methods, choices=ABLATION_METHODS, metavar="M[,M...]", several=True)
N_PAIRS = Option("n-pairs", "n_pairs", "clean / corrupted pairs for patching (default: per analysis)", positive_int,
                 metavar="N")


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


EDGE_METHODS = ("eap", "eap-ig")  # edge attribution: one gradient, or integrated gradients along the inputs


def parse_edge_method(text) -> str:
    """An edge attribution method, one of EDGE_METHODS."""
    name = str(text).strip().lower()
    if "," in name:
        raise ValueError(f"takes one method, one of {', '.join(EDGE_METHODS)}, got {text!r} (the edges are cached per "
                         f"method: run the analysis once for each)")
    if name not in EDGE_METHODS:
        raise ValueError(f"unknown edge attribution method {text!r}; allowed: {', '.join(EDGE_METHODS)}")
    return name


def unit_fraction(text) -> float:
    """A number in (0, 1] from text (ValueError otherwise)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"takes a number in (0, 1], got {text!r}") from None
    if not 0 < value <= 1:
        raise ValueError(f"takes a number in (0, 1], got {value:g}")
    return value


# ---------------------------------------------------------------------------- entries
ROUTING = "routing"  # what a parameter that takes the routing head holds until the suite puts the head in
# what the suite (and `across`) provides besides the run, the step and the parameters: the routing head, in the
# parameter `param` while that is ROUTING (so it is in the cache key); a reader of other saved checkpoints
# (step -> state dict, shared by the steps of one call), in the keyword `param`; the optimizer-complete state,
# which the analysis reads itself (so the suite never gives it the loaded checkpoint), and, in the keyword `param`
# when it has one, whether a replayed state may be kept in and read from the run's cache (False for --no-cache)
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
    shares_model: bool = True  # may take the suite's loaded checkpoint (False: it changes the weights)
    extra: str = ""  # pip extra the module needs (a key of EXTRAS), named in the refusal when it is missing
    needs: tuple[Need, ...] = ()  # what the suite provides it besides the run, the step and its parameters
    order: int = 0  # its place among the package's analyses (--help, the suite, the findings, JSON keys)
    groups: tuple[tuple[str, int], ...] = ()  # (group, place in it): --only names that stand for it with others

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
        """An optional module function (`derive`, `findings`, `rows`), or None. A module of this
        package whose source defines no such function is not imported to find out."""
        defined = _DEFINED.get(self.module)
        if defined is not None and name not in defined:
            return None
        return getattr(self.load(), name, None)

    def defaults(self) -> dict:
        """The module's DEFAULTS, read from its source where that can be done (`source_defaults`: no
        import, so a cached report or card loads no torch), else from the imported module."""
        found = source_defaults(self.module)
        return dict(found if found is not None else self.load().DEFAULTS)

    def params(self, options: dict | None = None) -> dict:
        """The module's DEFAULTS with the options that apply to it (by flag or parameter name)."""
        params = self.defaults()
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

# names that stand for several analyses in --only, listed in this order; an entry joins one with `groups`
GROUP_ORDER = (
    "diagnostics",  # the mechanism diagnostics of docs/diagnostics.md that are cheap enough for every checkpoint
    "circuits",  # what a sweep's circuit columns read (interp.sweeps.circuits): the routing head and its onsets
)
GROUPS: dict[str, tuple[str, ...]] = {}  # group -> its analyses, kept by `register`

# what each pip extra provides, by importable name (the refusal of an analysis whose extra is missing)
EXTRAS: dict[str, tuple[str, ...]] = {"landscape": ("devinterp",)}


def register(entry: Analysis) -> Analysis:
    """Add an analysis (the package's own are discovered; this is the way in from outside it)."""
    REGISTRY[entry.name] = entry
    members = sorted(((place, name, group) for name, e in REGISTRY.items() for group, place in e.groups), key=lambda m: m[0])
    named = dict.fromkeys([*(g for g in GROUP_ORDER if any(m[2] == g for m in members)), *(m[2] for m in members)])
    GROUPS.clear()
    GROUPS.update({group: tuple(name for _, name, g in members if g == group) for group in named})
    return entry


def get(name: str) -> Analysis:
    try:
        return REGISTRY[name]
    except KeyError:
        raise InterpError(f"unknown analysis {name!r}; allowed: {', '.join(REGISTRY)}") from None


def default_names() -> tuple[str, ...]:
    return tuple(name for name, entry in REGISTRY.items() if entry.default)


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


def _importable(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent that cannot be imported, a module without a spec
        return False


def require_extras(names) -> None:
    """Refuse, before any work, analyses whose pip extra is not installed (each would fail at every step)."""
    for name in names:
        entry = get(name)
        missing = [m for m in EXTRAS.get(entry.extra, ()) if not _importable(m)]
        if missing:
            raise InterpError(f"the {name} analysis needs {', '.join(missing)}, which is not installed; "
                              f"install it with: pip install -e '.[{entry.extra}]'")


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


def describe_all() -> str:
    """One line per analysis, for --help."""
    return "; ".join(f"{e.name}{'' if e.default else ' (only when asked)'}: {e.summary}" for e in REGISTRY.values())


# ---------------------------------------------------------------------------- discovery
_DEFINED: dict[str, frozenset[str]] = {}  # module -> the functions its source defines at module level
_DECLARATION = re.compile(r"^([A-Z][A-Z0-9_]*) = (Analysis|Option)\(", re.MULTILINE)


def _declared_names() -> dict:
    """What a declaration may use: the registry's classes, options, parse functions and constants."""
    names = {k: v for k, v in globals().items() if not k.startswith("_") and (
        v in (Analysis, Need, Option) or isinstance(v, (Option, str, int, tuple))
        or (callable(v) and getattr(v, "__module__", None) == __name__ and not isinstance(v, type)))}
    return {"__builtins__": {}, **names}


def _statement(source: str, start: int, path: Path) -> ast.expr:
    """The value of the assignment that starts at `start`: its lines up to the next line at column 0
    (a closing bracket aside), or, when that does not parse, the whole module's statement."""
    rest = source[start:].splitlines(keepends=True)
    end = next((i for i, line in enumerate(rest[1:], 1) if line[:1] not in ("", " ", "\t", "\n", ")", "]")), len(rest))
    try:
        return ast.parse("".join(rest[:end])).body[0].value
    except (SyntaxError, IndexError, AttributeError):
        line = source.count("\n", 0, start) + 1
        return next(node.value for node in ast.parse(source, str(path)).body
                    if isinstance(node, ast.Assign) and node.lineno == line)


def read_entry(path: Path, module: str) -> Analysis | None:
    """The `ENTRY = Analysis(...)` a module's source declares (None without one), read without
    importing the module: its declarations are evaluated among the registry's own names."""
    source = path.read_text(encoding="utf-8")
    declared = {m.group(1): m for m in _DECLARATION.finditer(source)}
    if "ENTRY" not in declared:
        return None
    _DEFINED[module] = frozenset(re.findall(r"^(?:async def |def |class )?(\w+)", source, re.MULTILINE))
    namespace = {**_declared_names(), "__name__": module}
    for name, match in declared.items():  # its own options first, then the entry that uses them
        try:
            value = eval(compile(ast.Expression(_statement(source, match.start(), path)), str(path), "eval"), namespace)
        except Exception as exc:  # noqa: BLE001  (a declaration the registry cannot read is a broken package)
            raise InterpError(f"{path}: {name} cannot be read without importing the module ({exc}); declare it with "
                              f"the registry's names only (Analysis, Need, Option, the shared options)") from None
        namespace[name] = value
    entry = namespace["ENTRY"]
    if not isinstance(entry, Analysis) or entry.module != module:
        raise InterpError(f"{path}: ENTRY must be Analysis(NAME, __name__, ...)")
    return entry


_TREES: dict[str, ast.Module | None] = {}  # module -> its parsed source (None: not a module of this package)
_SOURCE_DEFAULTS: dict[str, dict | None] = {}  # module -> its DEFAULTS read from source (None: cannot be)


def _tree(module: str) -> ast.Module | None:
    package = __name__.rpartition(".")[0]
    if module not in _TREES:
        path = Path(__file__).parent / f"{module.rpartition('.')[2]}.py"
        own = module.rpartition(".")[0] == package and path.is_file()
        _TREES[module] = ast.parse(path.read_text(encoding="utf-8"), str(path)) if own else None
    return _TREES[module]


def _constant(module: str, name: str, seen: tuple = ()):
    """The value of module-level `name` of `module`, from source: an assignment evaluated among the
    constants it names (found the same way), or a `from interp.analysis.X import name` followed to X;
    the registry's own names are its globals. Raises where a value needs more (the caller imports)."""
    if module == __name__:
        return globals()[name]
    if (module, name) in seen or (tree := _tree(module)) is None:
        raise LookupError(f"{module}.{name}")
    value = None
    for node in tree.body:  # the last binding at module level wins, as when the module runs
        if isinstance(node, ast.ImportFrom) and not node.level and any((a.asname or a.name) == name for a in node.names):
            alias = next(a for a in node.names if (a.asname or a.name) == name)
            value = ("import", node.module, alias.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                value = ("value", node.value)
    if value is None:
        raise LookupError(f"{module}.{name}")
    seen = (*seen, (module, name))
    if value[0] == "import":
        return _constant(value[1], value[2], seen)
    names = {n.id for n in ast.walk(value[1]) if isinstance(n, ast.Name)}
    scope = {n: _constant(module, n, seen) for n in names}
    return eval(compile(ast.Expression(value[1]), module, "eval"), {"__builtins__": {}}, scope)


def source_defaults(module: str) -> dict | None:
    """A package module's DEFAULTS evaluated from its source without importing it (its literals and
    the module-level constants they name), or None where that cannot be done. Equal to the imported
    DEFAULTS for every analysis of the package (tests/unit/test_registry.py)."""
    if module not in _SOURCE_DEFAULTS:
        try:
            found = _constant(module, "DEFAULTS")
            _SOURCE_DEFAULTS[module] = found if isinstance(found, dict) else None
        except Exception:  # noqa: BLE001  (anything the source alone cannot give: the module is imported)
            _SOURCE_DEFAULTS[module] = None
    return _SOURCE_DEFAULTS[module]


def discover() -> list[Analysis]:
    """The package's analyses: every module of interp.analysis that declares an ENTRY, in their `order`."""
    folder = Path(__file__).parent
    package = __name__.rpartition(".")[0]
    found = [read_entry(folder / f"{info.name}.py", f"{package}.{info.name}")
             for info in sorted(pkgutil.iter_modules([str(folder)]), key=lambda m: m.name) if not info.ispkg]
    return sorted((e for e in found if e is not None), key=lambda e: (e.order, e.name))


for _entry in discover():
    register(_entry)
seeding.add_streams(streams)  # interp.seeding knows the analyses' streams without importing them
