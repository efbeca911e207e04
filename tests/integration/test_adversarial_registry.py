"""Issue 30, case 21: an analysis whose pip extra is missing is refused once, up front, naming the
install, with exit status 2 and nothing written (it used to fail at every step, one warning each)."""

import sys

import pytest

from interp.analysis import registry
from interp.analysis.suite import run_suite
from interp.cli import main
from interp.errors import InterpError
from interp.runs import Run
from tests.helpers import DEMO, copy_run, snapshot


@pytest.fixture
def no_devinterp(monkeypatch):
    """devinterp as where the `landscape` extra is not installed: not found, not importable."""
    for name in [m for m in sys.modules if m == "devinterp" or m.startswith("devinterp.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "devinterp", None)


def test_analyze_llc_without_the_extra_is_one_refusal_before_any_work(no_devinterp, tmp_path, capsys):
    run = copy_run(DEMO, tmp_path / "run")
    before = snapshot(run)
    assert main(["analyze", str(run), "--only", "sensitivity,llc", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "llc analysis needs devinterp" in err[0], err
    assert "pip install -e '.[landscape]'" in err[0]
    assert snapshot(run) == before and not (run / "cache").exists()  # nothing computed, nothing written


def test_the_library_refuses_it_too_and_reading_the_cache_does_not_need_it(no_devinterp, tmp_path):
    run = Run.open(copy_run(DEMO, tmp_path / "run"))
    with pytest.raises(InterpError, match=r"install it with: pip install -e '\.\[landscape\]'"):
        run_suite(run, only="llc", progress=False)
    assert not (run.path / "cache").exists()
    assert run_suite(run, only="llc", progress=False, compute=False).tables["llc"].empty  # nothing cached: no work


def test_every_extra_an_analysis_names_is_known():
    import re
    import tomllib

    assert {e.extra for e in registry.REGISTRY.values() if e.extra} <= set(registry.EXTRAS)
    extras = tomllib.loads((DEMO.parents[1] / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, modules in registry.EXTRAS.items():  # what the refusal checks is what pyproject installs
        assert set(modules) <= {re.match(r"[\w.-]+", req).group().replace("-", "_") for req in extras[extra]}, extra
    registry.require_extras(registry.REGISTRY)  # all installed here
