"""The API tour runs, as written, on a copy of the demo run: every block marked `<!-- tour -->` in the README
and in docs/ (docs/api.md holds the tour), each file's blocks as one program, in order."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import DEMO, copy_run

ROOT = Path(__file__).resolve().parents[2]
TOUR = re.compile(r"<!-- tour -->\s*```python\n(.*?)```\s*(?:<!-- /tour -->)?", re.S)


def tour_files() -> list[str]:
    """The README and the docs files that hold tour blocks, relative to the repository."""
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [str(p.relative_to(ROOT)) for p in paths if TOUR.search(p.read_text())]


def tour_code(name: str) -> str:
    return "\n".join(TOUR.findall((ROOT / name).read_text()))


def test_the_tour_is_where_the_readme_points():
    assert "docs/api.md" in tour_files()
    assert len(TOUR.findall((ROOT / "docs" / "api.md").read_text())) >= 3, "docs/api.md has lost its tour blocks"
    assert "docs/api.md" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("name", tour_files())
def test_the_tour_runs(name, tmp_path):
    (tmp_path / "checkpoints").mkdir()
    copy_run(DEMO, tmp_path / "checkpoints" / "demo")
    code = tour_code(name) + "\nprint('tour ok')\n"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                            env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.strip().endswith("tour ok")
    if "SweepSpec" in code:
        assert (tmp_path / "sweeps" / "tour" / "sweep.json").exists()
