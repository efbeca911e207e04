"""One table of analyses: the suite, the CLI's --only choices and options, the cache, the
report's sections and the findings all come from the registry, so adding an analysis is one
module that declares its entry (here tests/dummy_analysis.py, with its own option, section and finding,
added with `register`; the package's own modules are discovered)."""

from pathlib import Path

import pytest

from interp.analysis import registry
from interp.analysis.cache import ResultCache
from interp.analysis.findings import summary_rows
from interp.analysis.suite import run_suite
from interp.cli import build_parser, main
from interp.errors import InterpError
from interp.report import write_report
from interp.report.sections import analyses_with_sections, sections_of
from interp.runs import Run
from tests import dummy_analysis
from tests.helpers import copy_run


@pytest.fixture(scope="module")
def run(snapping_run, tmp_path_factory) -> Run:
    """The session's snapping run (tests/conftest.py), copied: this module writes its cache."""
    return Run.open(copy_run(snapping_run, tmp_path_factory.mktemp("registry") / "run"))


@pytest.fixture
def dummy(monkeypatch):
    monkeypatch.setitem(registry.REGISTRY, "dummy", dummy_analysis.ENTRY)
    return dummy_analysis.ENTRY


def _analyze_help() -> str:
    return build_parser()._subparsers._group_actions[0].choices["analyze"].format_help()


def test_every_analysis_module_has_the_entry_points_and_its_defaults():
    import importlib

    for entry in registry.REGISTRY.values():
        if entry.extra:
            continue  # optional extras are checked where they are tested
        module = importlib.import_module(entry.module)
        assert callable(module.at_step) and callable(module.across), entry.name
        assert isinstance(module.DEFAULTS, dict), entry.name
        for option in entry.options:  # every option sets a parameter the module has a default for
            assert option.param in module.DEFAULTS, (entry.name, option.flag)
        for section in sections_of(entry.name):  # every registered figure function exists
            assert callable(section.figure), section.key
        for name in ("findings", "rows", "derive"):  # its own functions, found by name
            assert registry.REGISTRY[entry.name].hook(name) is getattr(module, name, None), (entry.name, name)


def test_every_built_in_modules_defaults_are_read_from_its_source_as_it_defines_them():
    """`params()` reads DEFAULTS from the source (no import, no torch: a cached report), equal to the module's."""
    import importlib

    for entry in registry.REGISTRY.values():
        found = registry.source_defaults(entry.module)
        assert found is not None, entry.name
        assert found == importlib.import_module(entry.module).DEFAULTS, entry.name
    assert registry.source_defaults("tests.dummy_analysis") is None  # outside the package: imported


def test_every_built_in_module_declares_the_entry_the_registry_read_without_importing_it():
    import importlib

    assert registry.discover() == list(registry.REGISTRY.values())
    assert [e.order for e in registry.REGISTRY.values()] == sorted(e.order for e in registry.REGISTRY.values())
    for entry in registry.REGISTRY.values():
        assert importlib.import_module(entry.module).ENTRY == entry, entry.name  # its options included


def test_no_file_but_its_own_names_a_built_in_analysis():
    # no entry, group or findings string in the registry: each module declares its own
    text = Path(registry.__file__).read_text()
    for name in registry.REGISTRY:
        assert f'"{name}"' not in text and f"'{name}'" not in text and f"interp.analysis.{name}" not in text, name
    members = {g: [n for n, e in registry.REGISTRY.items() if g in dict(e.groups)] for g in registry.GROUPS}
    assert {g: sorted(m) for g, m in registry.GROUPS.items()} == {g: sorted(m) for g, m in members.items()}
    assert list(registry.GROUPS) == ["diagnostics", "circuits", "decoding"]


def test_a_declaration_is_read_from_the_source_among_the_registry_names_only(tmp_path):
    good = tmp_path / "mine.py"
    good.write_text('import torch\nfrom interp.analysis.registry import Analysis, Option, positive_int\n\n'
                    'K = Option("k", "k", "how many", positive_int, metavar="N")\n'
                    'ENTRY = Analysis(\n    "mine", __name__, "a test",\n    options=(K,), groups=(("circuits", 9),),\n)\n'
                    'def rows(f, tables):\n    return []\n')
    entry = registry.read_entry(good, "pkg.mine")
    assert entry.module == "pkg.mine" and entry.options[0].flag == "k" and entry.options[0].parse is registry.positive_int
    assert entry.hook("findings") is None  # its source defines none: not imported to find out (pkg.mine cannot be)
    bad = tmp_path / "bad.py"
    bad.write_text('X = 3\nENTRY = Analysis("bad", __name__, "s", version=X + 1)\n')
    with pytest.raises(InterpError, match="ENTRY cannot be read without importing the module"):
        registry.read_entry(bad, "pkg.bad")
    (tmp_path / "none.py").write_text("import torch\n")
    assert registry.read_entry(tmp_path / "none.py", "pkg.none") is None


def test_register_adds_an_analysis_and_its_group(monkeypatch):
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    monkeypatch.setattr(registry, "GROUPS", dict(registry.GROUPS))
    registry.register(registry.Analysis("extra_one", "x", "y", groups=(("circuits", 3), ("mine", 1))))
    assert list(registry.REGISTRY)[-1] == "extra_one"
    assert registry.GROUPS["circuits"] == ("sensitivity", "usage", "ablation", "extra_one", "groups", "probes")
    assert registry.GROUPS["mine"] == ("extra_one",) and list(registry.GROUPS)[-1] == "mine"


def test_the_dummy_analysis_is_one_file_that_the_package_never_names():
    # its entry, option, findings, summary row and report section all live in tests/dummy_analysis.py
    package = Path(registry.__file__).resolve().parents[1]
    naming = [str(p.relative_to(package)) for p in package.rglob("*.py") if "dummy" in p.read_text().lower()]
    assert not naming, naming
    assert dummy_analysis.ENTRY.module == "tests.dummy_analysis"


def test_every_report_section_is_of_a_registered_analysis():
    # a section registered under a misspelt name would never be drawn
    assert set(analyses_with_sections()) <= set(registry.REGISTRY) | {"dummy"}
    assert sections_of("dummy")[0].figure is dummy_analysis.figure


def test_needing_tau_is_read_from_the_steps():
    assert [registry.steps_need_tau(s) for s in ("all", "transition", "pre,mid", "from:mid", "from:100", "0,25")] \
        == [False, True, True, True, False, False]
    assert {e.name for e in registry.REGISTRY.values() if e.needs_tau} == {"groups", "ablation", "patching",
                                                                            "hessian", "llc", "updates", "sufficiency"}


def test_a_registered_analysis_runs_in_the_suite_and_is_cached(run, dummy):
    result = run_suite(run, only="dummy", progress=False)
    table = result.tables["dummy"]
    assert sorted(table["step"]) == run.steps and (table["token"] == 4).all()
    assert result.cache_misses == len(run.steps)
    again = run_suite(run, only="dummy", progress=False)
    assert again.cache_hits == len(run.steps) and again.cache_misses == 0
    other = run_suite(run, only="dummy", options={"token": 5}, progress=False)  # parameters key the cache
    assert other.cache_misses == len(run.steps) and (other.tables["dummy"]["token"] == 5).all()
    assert "dummy" in registry.default_names()
    assert ResultCache(run).load(dummy.cache_key({"token": 4}), run.steps[0]) is not None


def test_its_option_is_in_the_cli_and_reaches_the_analysis(run, dummy, capsys):
    text = _analyze_help()
    assert "--token ID" in text and "the token whose logit is averaged [dummy]" in text
    assert main(["analyze", str(run.path), "--only", "dummy", "--token", "7", "--quiet", "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert {row["token"] for row in out["tables"]["dummy"]} == {7}
    assert out["findings"]["dummy_token"] == 7  # its findings function ran
    with pytest.raises(SystemExit) as exc:  # its own validation, as a one-line usage error
        main(["analyze", str(run.path), "--only", "dummy", "--token", "99"])
    assert exc.value.code == 2 and "a token id 0..63, got 99" in capsys.readouterr().err


def test_its_finding_is_a_summary_line(run, dummy, capsys):
    assert main(["analyze", str(run.path), "--only", "dummy", "--quiet"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "dummy logit" in line)
    assert "token 4:" in line and "at the last step" in line
    result = run_suite(run, only="dummy", progress=False)
    assert ("dummy logit", line.split("dummy logit", 1)[1].strip()) in summary_rows(result.findings, result.tables)


@pytest.mark.slow
def test_its_section_is_in_the_report(run, dummy, tmp_path):
    text = write_report(run, tmp_path / "report.html").read_text()
    assert 'data-section="dummy"' in text and 'id="fig-dummy"' in text
    assert "Dummy: mean logit" in text and "dummy mean logit" in text  # title and the figure's trace
    assert "dummy logit" in text  # its summary row


def test_unknown_analyses_are_refused():
    with pytest.raises(InterpError, match="unknown analysis 'nope'; allowed: sensitivity"):
        registry.get("nope")
    with pytest.raises(InterpError, match="unknown analysis nope"):
        registry.parse_only("sensitivity,nope")


def test_streams_come_from_the_registry(monkeypatch):
    from interp.seeding import derive_seed, streams

    assert {"hessian", "llc"} <= set(streams())
    with pytest.raises(ValueError, match="unknown random stream 'mine'"):
        derive_seed(0, "mine")
    monkeypatch.setitem(registry.REGISTRY, "mine", registry.Analysis("mine", "x", "y", stream="mine"))
    assert derive_seed(0, "mine") != derive_seed(0, "hessian")


def test_cached_results_are_found_under_other_parameters(run):
    # the report shows a geometry analysis run with other parameters (e.g. --heads L0H3,L0H1)
    import pandas as pd

    store = ResultCache(run)
    steps = run.steps[:2]
    asked = {"analysis": "probe_any", "version": 1, "params": {"x": 0}}
    more = {**asked, "params": {"x": 1}}
    fewer = {**asked, "params": {"x": 2}}
    for step in steps:
        store.store(more, step, {"t": pd.DataFrame({"step": [step], "x": [1]})})
    store.store(fewer, steps[0], {"t": pd.DataFrame({"step": [steps[0]], "x": [2]})})
    found = store.cached_any(asked)["t"]
    assert found["x"].tolist() == [1, 1] and found["step"].tolist() == steps  # the one with the most steps
    assert store.cached_any({**asked, "version": 2}) == {}  # another version is never shown
    store.store(asked, steps[0], {"t": pd.DataFrame({"step": [steps[0]], "x": [0]})})
    assert store.cached_any(asked)["t"]["x"].tolist() == [0]  # its own parameters first


@pytest.mark.slow
def test_analyze_prints_the_geometry_it_computed(run, capsys):
    last = run.steps[-1]
    assert main(["analyze", str(run.path), "--only", "hessian", "--steps", str(last), "--quiet"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.strip().startswith(f"hessian step {last}"))
    assert "lambda_min" in line and "anisotropy" in line
