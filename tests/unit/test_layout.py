"""The package's layout: files by concern on floors, no import circles, light entry points.

The floors (docs/architecture.md), bottom up; a module imports only from its own floor or
below, lazy imports and "module:function" strings included:

    1 core          names, errors, formatting, seeding, files, spec, spec_fields, task_spec, precision, devices,
                    presets, run_layout, presentable
    2 task/model    task, task_draws, model, fastpath
    3 run           runs, checkpoints, run_states, metrics, metrics_log, transition, summary, task_tables
    4 training      steps, optimizer, optimizers, optimizer_stats, replay, sinks, train, imports/
    5 analysis      analysis/, timelines
    6 collections   collections/, sweeps/, forks/
    7 judgement     mechanisms/, reconcile/
    8 presentation  plots/, display/, report/, tracking/
    9 entry         cli*, and the package itself (interp/__init__.py: the lazy public names)

Figures take results, never the reverse; the quick paths (`interp scaling`, `import
interp.plots`) load neither torch nor TransformerLens, and a cached `interp report`, `interp timeline`
or sweep report loads none of torch, TransformerLens and transformers; no module is over 500 lines.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "interp"
MAX_LINES = 500
HEAVY = ("torch", "transformer_lens")


# ---------------------------------------------------------------------------- the import graph
def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of interp/ (a package is its __init__)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Every import statement, at module level or inside functions (lazy imports), but not those
    under `if TYPE_CHECKING:` (they never run)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and _type_checking(node):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {imported interp module: line of the first such import}.

    `import interp.x.y` and `from interp.x.y import name` are edges to interp.x.y;
    `from interp.x import y` is an edge to interp.x.y when that is a module, else to interp.x
    (a package's __init__). The parents Python initialises on the way (interp, interp.x) are
    not edges: a package importing its own submodules is not a circle."""
    mods = modules()

    def known(name: str) -> str:
        while name not in mods and "." in name:
            name = name.rsplit(".", 1)[0]
        return name

    graph: dict[str, dict[str, int]] = {m: {} for m in mods}
    for mod, path in mods.items():
        is_package = path.name == "__init__.py"
        for node in _imports(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [known(a.name) for a in node.names if a.name.split(".")[0] == "interp"]
            else:
                if node.level:
                    base = mod.split(".") if is_package else mod.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                if source.split(".")[0] != "interp":
                    continue
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    targets.append(full if full in mods else known(source))
            for target in targets:
                if target != mod:
                    graph[mod].setdefault(target, node.lineno)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One concrete cycle (first module repeated at the end) per strongly connected component."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(set(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    out = []
    for comp in components:
        start = min(comp)
        paths = {start: [start]}
        queue = [start]
        while queue:  # shortest path from start back to start inside the component
            v = queue.pop(0)
            for w in sorted(graph[v]):
                if w == start:
                    queue = []
                    out.append(paths[v] + [start])
                    break
                if w in comp and w not in paths:
                    paths[w] = paths[v] + [w]
                    queue.append(w)
    return out


FLOORS = (
    ("core", ("interp.names", "interp.errors", "interp.formatting", "interp.seeding", "interp.files", "interp.spec",
              "interp.spec_fields", "interp.task_spec", "interp.precision", "interp.devices", "interp.presets",
              "interp.run_layout", "interp.presentable")),
    ("task/model", ("interp.task", "interp.task_draws", "interp.model", "interp.fastpath")),
    ("run", ("interp.runs", "interp.checkpoints", "interp.run_states", "interp.run_segments", "interp.metrics",
             "interp.metrics_log", "interp.transition", "interp.summary", "interp.task_tables", "interp.outcome")),
    ("training", ("interp.steps", "interp.optimizer", "interp.optimizers", "interp.optimizer_stats", "interp.replay",
                  "interp.sinks", "interp.train", "interp.imports")),
    ("analysis", ("interp.analysis", "interp.timelines")),
    ("collections", ("interp.collections", "interp.sweeps", "interp.forks")),
    ("judgement", ("interp.mechanisms", "interp.reconcile")),
    ("presentation", ("interp.plots", "interp.display", "interp.report", "interp.tracking")),
    ("entry", ("interp", "interp.cli", "interp.cli_fork", "interp.cli_sweep", "interp.cli_mechanisms", "interp.cli_show",
               "interp.cli_export", "interp.cli_track", "interp.cli_doctor", "interp.cli_import",
               "interp.cli_phase")),
)


def floor_of(module: str) -> int | None:
    """The floor (0 = core) of a dotted module name: its longest prefix in FLOORS (the package
    itself, "interp", names only its __init__)."""
    best = None
    for number, (_, prefixes) in enumerate(FLOORS):
        for prefix in prefixes:
            inside = module == prefix or (prefix != "interp" and module.startswith(prefix + "."))
            if inside and (best is None or len(prefix) > best[1]):
                best = (number, len(prefix))
    return None if best is None else best[0]


def string_imports(path: Path) -> set[str]:
    """Modules named by "interp.x.y:function" strings in a file (resolved at run time: imports too)."""
    return {node.value.split(":", 1)[0] for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value.startswith("interp.") and ":" in node.value}


def upward_edges() -> list[str]:
    mods = modules()
    graph = import_graph()
    out = []
    for mod, path in mods.items():
        here = floor_of(mod)
        named = {t: f"line {line}" for t, line in graph[mod].items()}
        named.update({t: "a 'module:function' string" for t in string_imports(path) if t not in named})
        for target, where in sorted(named.items()):
            there = floor_of(target)
            if target != "interp" and there is not None and here is not None and there > here:
                out.append(f"{mod} ({FLOORS[here][0]}) -> {target} ({FLOORS[there][0]}), {where}")
    return out


def test_every_module_has_a_floor():
    assert not [m for m in modules() if floor_of(m) is None], "add these modules to FLOORS (and docs/architecture.md)"


def test_imports_point_down_the_floors():
    up = upward_edges()
    assert not up, "imports that point up the floors:\n  " + "\n  ".join(up)


def test_the_floor_check_sees_strings_and_lazy_imports(tmp_path):
    path = tmp_path / "m.py"
    path.write_text('X = "interp.report.figures:attention"\ndef f():\n    import interp.plots\n')
    assert string_imports(path) == {"interp.report.figures"}
    assert floor_of("interp.analysis.registry") == 4 and floor_of("interp.report.figures") == 7
    assert floor_of("interp.cli_fork") == floor_of("interp") == 8 and floor_of("interp.nowhere") is None


def test_no_import_circles():
    graph = import_graph()
    found = cycles(graph)
    described = ["\n    ".join(f"{a} -> {b}  ({modules()[a].relative_to(ROOT)}:{graph[a][b]})"
                                for a, b in zip(cycle, cycle[1:])) for cycle in found]
    assert not found, "import circles (lazy imports included):\n  " + "\n  ".join(described)


def test_the_graph_sees_lazy_and_from_imports():
    """The checker itself: a lazy import inside a function and `from pkg import module` are edges."""
    graph = import_graph()
    assert "interp.analysis.groups" in graph["interp.plots.run"]  # imported inside group_histograms
    assert "interp.analysis.registry" in graph["interp.analysis.common"]  # from interp.analysis import registry
    assert "interp.sweeps.fits" not in graph["interp.plots.sweep"]  # TYPE_CHECKING only
    assert cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c", "a"]]


def test_results_never_import_figures():
    graph = import_graph()
    for mod in ("interp.sweeps.scaling", "interp.sweeps.fits", "interp.sweeps.conditions", "interp.sweeps.family",
                "interp.sweeps.bootstrap", "interp.timelines"):
        assert not [t for t in graph[mod] if t.startswith("interp.plots")], mod
    assert set(graph["interp.sweeps.paper"]) == set(), "interp.sweeps.paper is a leaf"
    assert {t for t in graph["interp.plots.sweep"] if t.startswith("interp.sweeps")} == {"interp.sweeps.paper"}


MODEL_CLASSES = {"HookedTransformer", "HookedTransformerConfig", "TransformerBridge", "TransformerBridgeConfig"}


def model_class_imports() -> list[str]:
    """Imports of TransformerLens's model classes (or their modules) outside interp.model."""
    out = []
    for mod, path in modules().items():
        for node in _imports(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names]
            source = node.module or "" if isinstance(node, ast.ImportFrom) else ""
            dotted = names if isinstance(node, ast.Import) else [f"{source}.{n}" for n in names]
            if not any(d.split(".")[0] == "transformer_lens" for d in dotted + [source]):
                continue
            if any(set(d.split(".")) & (MODEL_CLASSES | {"model_bridge", "tl_checkpoint_conversion"}) for d in dotted):
                out.append(f"{mod}:{node.lineno}")
    return [where for where in out if not where.startswith("interp.model:")]


def test_only_the_model_module_imports_transformer_lens_model_classes():
    """interp.model is the one place that knows the TransformerLens version (issue 35): it builds a
    HookedTransformer on TL 3 and a TransformerBridge on TL 4; every other module reaches it there."""
    found = model_class_imports()
    assert not found, "import the model through interp.model, not TransformerLens:\n  " + "\n  ".join(found)


# ---------------------------------------------------------------------------- files by concern
def test_no_module_is_over_500_lines():
    long = {str(p.relative_to(ROOT)): n for p in modules().values()
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


@pytest.mark.parametrize("name", ["MEASURES", "HEAD_PARTS", "PAPER_DELTA", "PAPER_ASYMMETRY"])
def test_shared_constants_are_defined_once(name):
    where = []
    for mod, path in modules().items():
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, ast.AnnAssign) else []
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                where.append(mod)
    assert len(where) == 1, f"{name} is defined in {where}"


def test_the_one_measures_tuple_is_shared():
    from interp.sweeps import scaling, sweep
    from interp.sweeps.fits import MEASURES

    assert scaling.MEASURES is sweep.MEASURES is MEASURES


# ---------------------------------------------------------------------------- light entry points
def _loaded(code: str) -> list[str]:
    """Run `code` in a fresh interpreter; the heavy modules (and interp.report) it loaded."""
    probe = (f"{code}\nimport sys\n"
             f"print(sorted(m for m in {(*HEAVY, 'plotly', 'interp.report')!r} if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    return eval(result.stdout.strip().splitlines()[-1])


def test_import_plots_never_loads_torch():
    loaded = _loaded("import interp.plots")
    assert not set(loaded) & set(HEAVY), loaded


def test_the_fits_load_neither_torch_nor_plotly():
    assert _loaded("import interp.sweeps.scaling") == []


@pytest.fixture(scope="module")
def scaling_sweep(tmp_path_factory) -> Path:
    from interp.sweeps.sweep import SweepSpec
    from tests.helpers import small_spec
    from tests.synthetic_sweeps import write_sweep_folder

    spec = SweepSpec(base=small_spec(steps=3000, n_bases=24), grid=(("task.k", (3, 4, 6)), ("seed", (0, 1))))
    path = tmp_path_factory.mktemp("layout") / "scaling"
    write_sweep_folder(path, spec, lambda s, rng: 3.0 * s.task.dataset_size ** 1.2)
    return path


def test_interp_scaling_never_loads_torch_nor_the_report(scaling_sweep):
    code = f"""
import contextlib, io
from interp.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()):
    assert main(["scaling", {str(scaling_sweep)!r}]) == 0
    assert main(["scaling", {str(scaling_sweep)!r}, "--json"]) == 0
assert "delta" in out.getvalue(), out.getvalue()
"""
    loaded = _loaded(code)
    assert not set(loaded) & {*HEAVY, "interp.report"}, loaded


def _cached_commands_load(commands: list[list[str]]) -> list[str]:
    """Run interp's `commands` in one fresh interpreter; the model code it loaded (tests.helpers.MODEL_CODE,
    interp.model, scipy.stats)."""
    from tests.helpers import model_code_loaded

    return model_code_loaded(commands)


@pytest.mark.slow  # 17 s: a report subprocess; the sweep's and the family's (default tier) guard the same imports
def test_a_cached_report_loads_no_model_code(tiny_run, tmp_path):
    """A report or timeline whose analyses are all cached only reads and draws: neither torch nor TransformerLens
    nor transformers (seconds of imports, issue 34) nor the model is imported, nor scipy.stats (the mechanism
    table's Wilson interval) nor IPython (plotly's notebook renderers): the findings, the derived tables, the
    layout and the parameters (DEFAULTS, read from the source) come without them."""
    from tests.helpers import copy_run, interp_cli

    path = copy_run(tiny_run(), tmp_path / "run")
    # computes and caches every default analysis (a subprocess: without the tests' shape checks, faster)
    assert interp_cli("report", str(path), "--out", str(tmp_path / "first.html")).returncode == 0
    # and the edges (asked for only), which the report's sections and the timeline's edge panel read from the cache
    assert interp_cli("analyze", str(path), "--only", "edges", "--steps", "10,20,30", "--n-pairs", "8",
                      "--edge-method", "eap").returncode == 0
    loaded = _cached_commands_load([["report", str(path), "--out", str(tmp_path / "cached.html")],
                                    ["timeline", str(path), "--out", str(tmp_path / "timeline.html")]])
    assert loaded == []
    assert "from cache" in (tmp_path / "cached.html").read_text()  # it was the cached report
    assert "edge onset (carried" in (tmp_path / "timeline.html").read_text()  # the edge panel was drawn


def test_a_sweep_report_loads_no_model_code(scaling_sweep, tmp_path):
    """The sweep report reads its runs' logs and cached analyses: no torch, TransformerLens or transformers."""
    assert _cached_commands_load([["report", str(scaling_sweep), "--out", str(tmp_path / "sweep.html")]]) == \
        ["scipy.stats"]  # the fits' intervals
