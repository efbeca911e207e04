"""benchmarks/device_check.py's own machinery, without training anything: the comparison behind every "within 1e-4"
row, the rows a failing or late check leaves, the table, and the refusals of bad input (the CPU run itself is the
slow-tier test tests/e2e/test_device_check.py)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from device_check import table  # noqa: E402
from device_check_analyses import owner  # noqa: E402
from device_check_lib import Part, column_difference, findings_difference, table_difference  # noqa: E402


def frame(values, text=("a", "b", "c")):
    return pd.DataFrame({"step": [0, 1, 2], "value": values, "name": list(text), "flag": [True, False, True]})


def test_the_difference_is_relative_to_the_columns_largest_value_after_float32_rounding():
    cpu = frame([10.0, 1e-6, -2.0])
    assert table_difference(frame([10.0, 1e-6, -2.0]), cpu)["rel"] == 0
    # 1e-9 on a tiny entry is nothing against the column's 10; float32 rounding hides 1e-12 altogether
    assert table_difference(frame([10.0, 1.001e-6, -2.0]), cpu)["rel"] < 1e-9
    assert table_difference(frame([10.0 + 1e-12, 1e-6, -2.0]), cpu)["rel"] == 0
    got = table_difference(frame([10.0, 1e-6, -2.0 + 2e-3]), cpu)
    assert got["rel"] == pytest.approx(2e-4, rel=1e-3) and got["where"] == "value"
    assert table_difference(frame([10.0, 1e-6, -2.0 + 5e-4]), cpu)["rel"] <= 1e-4


def test_nan_text_and_shape_mismatches_are_infinite_and_named():
    cpu = frame([1.0, math.nan, 2.0])
    assert table_difference(frame([1.0, math.nan, 2.0]), cpu)["rel"] == 0
    got = table_difference(frame([1.0, 0.5, 2.0]), cpu)
    assert got["rel"] == math.inf and "non-finite" in got["note"]
    got = table_difference(frame([1.0, math.nan, 2.0], text=("a", "x", "c")), cpu)
    assert got["rel"] == math.inf and got["where"] == "name" and got["note"] == "1 of 3 cells differ"
    flipped = frame([1.0, math.nan, 2.0]).assign(flag=[True, True, True])
    assert column_difference(flipped["flag"], cpu["flag"])[0] == math.inf
    got = table_difference(cpu.iloc[:2], cpu)
    assert got["rel"] == math.inf and "shapes differ" in got["note"]
    assert column_difference(pd.Series([0.0, 0.0]), pd.Series([0.0, 1e-3]))[0] == pytest.approx(1.0)


def test_findings_are_compared_entry_by_entry():
    a = {"tau": 900, "head": "L1H2", "height": np.float64(1.0), "first": [["L0H1->L1H2.q", 250]], "sub": {"x": 2.0}}
    assert findings_difference(a, dict(a)) == (0.0, "")
    assert findings_difference({**a, "head": "L1H3"}, a) == (math.inf, "head")
    rel, where = findings_difference({**a, "sub": {"x": 2.0002}}, a)
    assert where == "sub.x" and rel == pytest.approx(1e-4, rel=1e-2)
    assert findings_difference({**a, "first": [["L0H1->L1H2.q", 275]]}, a)[1] == "first"


def test_tables_are_grouped_by_their_analysis():
    names = ["patching", "edges", "hessian", "spectra", "attention"]
    assert owner("patching_heads", names) == "patching" and owner("edges_curve", names) == "edges"
    assert owner("attention", names) == "attention" and owner("something", names) == "something"


def part(tmp_path, left: float = 60.0) -> Part:
    return Part("analyses", "cpu", True, tmp_path / "rows.jsonl", time.monotonic() + left, tmp_path)


def test_a_failing_check_is_an_error_row_and_the_rest_goes_on(tmp_path):
    p = part(tmp_path)

    def boom():
        raise RuntimeError("Expected all tensors to be on the same device, but found cuda:0 and cpu!\nmore")

    assert p.check("first", boom) is None
    assert p.check("second", lambda: p.row("second", device=1.0, verdict="pass") and 7) == 7
    p.finish()
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert [r["check"] for r in rows] == ["first", "second", "peak memory (MiB)"]
    assert rows[0]["verdict"] == "error" and rows[0]["note"].startswith("RuntimeError: Expected all tensors")
    assert "more" not in rows[0]["note"] and "test_device_check_lib.py:" in rows[0]["note"]
    assert rows[2]["device"] > 0 and rows[2]["verdict"] == "info"


def test_a_check_after_the_time_box_is_slow_not_run_nor_failed(tmp_path):
    p = part(tmp_path, left=3.0)
    ran = []
    p.check("late", lambda: ran.append(1), need=10)
    row = json.loads((tmp_path / "rows.jsonl").read_text())
    assert not ran and row["verdict"] == "slow" and "time box" in row["note"] and "not run" in row["note"]
    with pytest.raises(ValueError, match="verdict 'maybe'"):
        p.row("x", verdict="maybe")


def test_the_table_shows_every_row_and_the_notes():
    rows = [{"part": "analyses", "check": "suite: lens", "device": 3.2e-7, "cpu": None, "compare": None,
             "limit": "<= 0.0001", "verdict": "pass", "seconds": None, "note": "largest at lens.loss_cand"},
            {"part": "speed", "check": "paper step, eager float32 (ms)", "device": 12.25, "cpu": 980.0, "compare": 80.0,
             "limit": "CPU / DEVICE", "verdict": "info", "seconds": 3.0, "note": ""}]
    text = table(rows)
    lines = text.splitlines()
    assert lines[0].split() == ["part", "check", "DEVICE", "CPU", "compare", "limit", "verdict", "seconds"]
    assert "3.2e-07" in lines[2] and "12.25" in lines[3] and "980" in lines[3] and "80" in lines[3]
    assert "[pass] analyses / suite: lens: largest at lens.loss_cand" in text


@pytest.mark.parametrize("args,message", [
    (["gpu"], "unknown device 'gpu'; allowed: cpu, cuda, cuda:N, mps"),
    (["cuda:7"], "device 'cuda:7' was asked for, but this machine has no CUDA GPU"),
    (["cpu", "--parts", "analyses,nope"], "--parts 'analyses,nope': allowed: analyses, training, forks, speed"),
    (["cpu", "--scale", "0"], "--scale must be positive"),
    (["cpu", "--json", "/dev/null"], "/dev/null is not a regular file"),  # its atomic write would replace it
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message, capsys, monkeypatch):
    """The script's own main, in this process (its refusals happen before any part starts)."""
    import torch

    import device_check

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # what a CPU-only machine sees, here too
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    capsys.readouterr()
    code = device_check.main([*args, "--work", str(tmp_path / "work")])
    out = capsys.readouterr()
    assert code == 2 and out.err.startswith(f"device_check.py: {message}") and not out.out, out
    assert len(out.err.strip().splitlines()) == 1
    assert not (tmp_path / "work").exists()


def test_the_time_boxes_grow_with_the_machines_measured_slowness():
    """A machine as fast as the reference keeps the boxes; one twice as slow (busy, or an older CPU) doubles them; a
    faster one never shrinks them. The workload is measured and positive (no bound on its time: a busy machine may take
    any time, and speed lives in benchmarks/, never in a test)."""
    from device_check_lib import REFERENCE_SECONDS, box_factor, reference_workload_seconds

    assert box_factor(REFERENCE_SECONDS) == 1.0 and box_factor(REFERENCE_SECONDS / 3) == 1.0
    assert box_factor(2 * REFERENCE_SECONDS) == pytest.approx(2.0)
    seconds = reference_workload_seconds(repeats=1)
    assert 0 < seconds < float("inf")


def test_a_part_killed_at_its_box_is_slow_and_the_check_exits_0(tmp_path, monkeypatch):
    """The driver's view of a part that outran its box: a "slow" row (the rows it measured kept), not an error; the
    exit status counts only failed and errored checks."""
    import device_check

    class Args:
        device, quick = "cpu", True

    class Stuck:
        pid = 0

        def __init__(self, *a, **k):
            pass

        def wait(self, timeout=None):
            if timeout is not None:
                raise subprocess.TimeoutExpired("part", timeout)
            return -9

    (tmp_path / "analyses.rows.jsonl").write_text(json.dumps({"part": "analyses", "check": "suite: lens",
                                                              "verdict": "pass"}) + "\n")
    monkeypatch.setattr(device_check.subprocess, "Popen", Stuck)
    monkeypatch.setattr(device_check.os, "killpg", lambda pid, sig: None)
    rows, _ = device_check.run_part("analyses", Args, tmp_path, box=0.01)
    assert [r["verdict"] for r in rows] == ["pass", "slow"] and "box" in rows[1]["note"]


def test_a_link_or_a_file_as_output_is_refused_and_left_alone(tmp_path, capsys):
    """--json through a symbolic link would replace the link (the atomic write's rename), --work naming a file is
    no folder: one line, exit 2, both left as they were (issue 54)."""
    import device_check

    target = tmp_path / "real.json"
    target.write_text("keep")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    capsys.readouterr()
    assert device_check.main(["cpu", "--json", str(link), "--work", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert "is a symbolic link" in err and len(err.strip().splitlines()) == 1
    assert link.is_symlink() and target.read_text() == "keep"
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert device_check.main(["cpu", "--work", str(afile)]) == 2
    err = capsys.readouterr().err
    assert "--work" in err and "is a file" in err and afile.read_text() == "x"
