"""The README's picture is made as its script says: the demo's real report, its timeline drawn alone by headless
Chromium, a PNG of at most about 300 KB (docs/make_front_picture.py)."""

import struct
import subprocess
import sys
from pathlib import Path

from tests.helpers import DEMO, copy_run

ROOT = Path(__file__).resolve().parents[2]


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def test_the_committed_picture_is_the_one_the_readme_shows():
    picture = ROOT / "docs" / "images" / "timeline.png"
    assert "](docs/images/timeline.png)" in (ROOT / "README.md").read_text()
    width, height = png_size(picture)
    assert picture.stat().st_size <= 300_000 and width >= 800 and height >= 800


def test_the_script_makes_the_picture_from_the_demos_report(tmp_path):
    run = copy_run(DEMO, tmp_path / "demo")
    out = tmp_path / "timeline.png"
    result = subprocess.run([sys.executable, str(ROOT / "docs" / "make_front_picture.py"), "--run", str(run),
                             "--out", str(out)], capture_output=True, text=True, timeout=1800, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    width, height = png_size(out)
    assert out.stat().st_size <= 300_000 and width >= 800 and height >= 1000  # the whole figure, at its height
