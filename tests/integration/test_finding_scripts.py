"""The finding scripts are user commands (issue 54: 6): bad input is one line on stderr, exit status 2, no traceback
and nothing written (analyses/lead_family.py, analyses/relapse_depth.py; the others share their argument handling,
analyses/_common.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import DEMO, copy_run

ROOT = Path(__file__).resolve().parents[2]


def script(name: str, *args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "analyses" / name), *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


CASES = [
    ("lead-nonexistent", "lead_family.py", ["{T}/nowhere"], "is not a sweep folder"),
    pytest.param("lead-run", "lead_family.py", ["{RUN}"], "is not a sweep folder", marks=pytest.mark.slow),
    pytest.param("lead-out-file", "lead_family.py", ["{RUN}", "--out", "{T}/afile"], "is not a sweep folder",
                 marks=pytest.mark.slow),
    pytest.param("lead-y", "lead_family.py", ["--y", "tau_window"], "unrecognized arguments: --y",
                 marks=pytest.mark.slow),
    ("relapse-seeds", "relapse_depth.py", ["{T}/new", "--seeds", "a,b"], "--seeds 'a,b': give comma-separated"),
    pytest.param("relapse-calibrate", "relapse_depth.py", ["{T}/new", "--calibrate", "junk"], "--calibrate 'junk'",
                 marks=pytest.mark.slow),
    pytest.param("relapse-calibrate-comma", "relapse_depth.py", ["{T}/new", "--calibrate", ","], "--calibrate ','",
                 marks=pytest.mark.slow),
    pytest.param("relapse-depths", "relapse_depth.py", ["{T}/new", "--depths", "x"], "--depths 'x'",
                 marks=pytest.mark.slow),
    pytest.param("relapse-horizon", "relapse_depth.py", ["{T}/new", "--horizon", "-5"], "--horizon -5",
                 marks=pytest.mark.slow),
    pytest.param("relapse-escape", "relapse_depth.py", ["{T}/new", "--escape", "junk"], "is not a criterion",
                 marks=pytest.mark.slow),
    pytest.param("relapse-a-run", "relapse_depth.py", ["{RUN}"], "is a run folder", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("case,name,args,fragment", CASES, ids=lambda c: c if isinstance(c, str) else None)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, case, name, args, fragment):
    run = copy_run(DEMO, tmp_path / "run", cache=False)
    (tmp_path / "afile").write_text("x")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    proc = script(name, *[a.replace("{T}", str(tmp_path)).replace("{RUN}", str(run)) for a in args], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr and fragment in lines[0], proc.stderr
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing made (no out/, no run)
