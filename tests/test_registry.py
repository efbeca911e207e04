"""One table of analyses: the suite, the CLI's --only choices and help, the cache and the
report's sections all come from the registry, so adding an analysis is one module plus one
entry (here tests/dummy_analysis.py)."""

import pytest

from interp.analysis import registry
from interp.analysis.cache import ResultCache
from interp.analysis.suite import run_suite
from interp.cli import build_parser, main
from interp.errors import InterpError
from interp.report import write_report
from interp.runs import Run
from interp.train import train
from tests.conftest import small_spec

SNAPPING = dict(steps=300, lr=3e-3, checkpoint_every=50, early_checkpoints=False)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Run:
    run = Run.create(tmp_path_factory.mktemp("registry") / "run", small_spec(**SNAPPING))
    train(run, progress=False)
    return run


@pytest.fixture
def dummy(monkeypatch):
    entry = registry.Analysis("dummy", "tests.dummy_analysis", "the mean decision logit of one token",
                              defaults={"token": 4})
    monkeypatch.setitem(registry.REGISTRY, "dummy", entry)
    return entry


def test_every_analysis_module_has_the_two_entry_points():
    import importlib

    for entry in registry.REGISTRY.values():
        if entry.extra:
            continue  # optional extras are checked where they are tested
        module = importlib.import_module(entry.module)
        assert callable(module.at_step) and callable(module.across), entry.name


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


def test_a_registered_analysis_is_a_cli_choice(run, dummy, capsys):
    analyze = next(a for a in build_parser()._subparsers._group_actions[0].choices.items() if a[0] == "analyze")[1]
    assert "dummy" in analyze.format_help()
    assert main(["analyze", str(run.path), "--only", "dummy", "--quiet"]) == 0
    assert "dummy" in capsys.readouterr().out
    assert main(["analyze", str(run.path), "--only", "nonesuch"]) == 2
    err = capsys.readouterr().err
    assert "allowed: " in err and "dummy" in err


def test_a_registered_analysis_gets_a_report_section(run, dummy, tmp_path):
    text = write_report(run, tmp_path / "report.html").read_text()
    assert 'data-section="dummy"' in text and 'id="fig-dummy"' in text
    assert "mean_logit" in text


def test_unknown_analyses_are_refused():
    with pytest.raises(InterpError, match="unknown analysis 'nope'; allowed: sensitivity"):
        registry.get("nope")
    with pytest.raises(InterpError, match="unknown analysis nope"):
        registry.parse_only("sensitivity,nope")


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


def test_analyze_prints_the_geometry_it_computed(run, capsys):
    last = run.steps[-1]
    assert main(["analyze", str(run.path), "--only", "hessian", "--steps", str(last), "--quiet"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.strip().startswith("hessian  step"))
    assert f"step {last}" in line and "lambda_min" in line and "anisotropy" in line
