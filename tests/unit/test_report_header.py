"""What the run report says about itself: the header counts drawn figures only (placeholders named
apart), and `interp report` says up front what it will compute and ends with the report's absolute path."""

from pathlib import Path

from interp.analysis import registry
from interp.cli import main
from interp.report.page import Section, figure_count
from interp.report.run import plan
from interp.runs import Run
from tests.helpers import DEMO


def test_the_header_counts_drawn_figures_and_names_the_placeholders():
    drawn = [Section(k, k, "", html="<div></div>") for k in ("timeline", "loss", "shuffle")]
    pending = [Section(k, k, "", problem="Not computed yet", pending=True, analysis=a)
               for k, a in (("hessian", "hessian"), ("anisotropy", "hessian"), ("llc", "llc"))]
    failed = [Section("ablation", "Ablation", "", problem="never falls below 0.5 log K")]
    text = figure_count(drawn + pending + failed)
    assert text.startswith("3 figures drawn, 3 not computed (hessian, llc: ")
    assert text.endswith(", 1 could not be made (listed below the summary)")
    assert "of 7" not in text and "7 figures" not in text  # placeholders are never counted as figures
    assert figure_count(drawn[:1]) == "1 figure drawn"


def test_plan_names_every_analysis_and_how_long():
    demo = Run.open(DEMO)
    line = plan(demo, cache=False)
    assert line.startswith(f"interp report: {demo.path}: computing ")
    for name in registry.default_names():
        assert name in line
    assert f"at {len(demo.steps)} checkpoints" in line
    assert line.endswith("min on 2 idle cores") or line.endswith("under a minute on 2 idle cores")


def test_interp_report_says_what_it_computes_then_where_it_wrote(tmp_path, monkeypatch, capsys):
    import interp.report

    def fake(run, path, **kwargs):  # the analyses are tested elsewhere: here, only what the command prints
        Path(path).write_text("<html></html>")
        return Path(path)

    monkeypatch.setattr(interp.report, "write_report", fake)
    monkeypatch.chdir(tmp_path)
    assert main(["report", str(DEMO.resolve()), "-o", "r.html", "--no-cache", "--quiet"]) == 0
    out = capsys.readouterr()
    assert out.err.startswith("interp report: ") and "sensitivity" in out.err and "2 idle cores" in out.err
    assert out.out.startswith(f"wrote {(tmp_path / 'r.html').resolve()} in ")
