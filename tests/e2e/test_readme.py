"""The README's API tour runs, as written, on a copy of the demo run."""

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import DEMO, copy_run

ROOT = Path(__file__).resolve().parents[2]


def tour_code() -> str:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"<!-- tour -->\s*```python\n(.*?)```\s*(?:<!-- /tour -->)?", text, re.S)
    assert len(blocks) >= 3, "the README has lost its tour blocks"
    return "\n".join(blocks)


def test_the_readme_tour_runs(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    copy_run(DEMO, tmp_path / "checkpoints" / "demo")
    code = tour_code() + "\nprint('tour ok')\n"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                            env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.strip().endswith("tour ok")
    assert (tmp_path / "sweeps" / "tour" / "sweep.json").exists()
