"""The round trip of issue 49: the demo exported in the author's main-pipeline format (`interp export --to synass`)
and imported back (`interp import`) gives the same weights at every step and the same `interp analyze` tables
(sensitivity, patching, ablation, attention), the cached files byte for byte; the imported run's report renders and
says where the run came from."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import DEMO, copy_run, js_errors, render, run_main

ANALYSES = "sensitivity,patching,ablation,attention"


def test_the_demo_round_trip_gives_the_same_analysis_tables_bit_for_bit(tmp_path, capsys):
    demo = copy_run(DEMO, tmp_path / "demo", cache=False)
    assert run_main(["export", str(demo), "--to", "synass", str(tmp_path / "synass"), "--json"], capsys)[0] == 0
    assert run_main(["import", str(tmp_path / "synass"), "--out", str(tmp_path / "back"), "--quiet"], capsys)[0] == 0
    back = tmp_path / "back"
    for run in (demo, back):
        code, _, err = run_main(["analyze", str(run), "--only", ANALYSES], capsys)
        assert code == 0, err
    files = sorted(p.relative_to(demo / "cache") for p in (demo / "cache").rglob("*") if p.is_file())
    assert {Path(f).parts[0] for f in files} == set(ANALYSES.split(","))
    assert files == sorted(p.relative_to(back / "cache") for p in (back / "cache").rglob("*") if p.is_file())
    different = [f for f in files if (demo / "cache" / f).read_bytes() != (back / "cache" / f).read_bytes()]
    assert not different, different
    page = tmp_path / "back.html"
    code, _, err = run_main(["report", str(back), "-o", str(page)], capsys)
    assert code == 0, err
    html = page.read_text()
    assert "imported" in html and "synass-main" in html
    dom = render(page, tmp_path)
    assert js_errors(dom) == (0, ""), js_errors(dom)
