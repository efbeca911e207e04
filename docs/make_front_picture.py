"""The README's picture: the demo run's circuit-formation timeline, cut from its real report by headless Chromium.

    python docs/make_front_picture.py                     # writes docs/images/timeline.png from checkpoints/demo
    python docs/make_front_picture.py --run RUN --out FILE.png [--report report.html]

It writes the run's report (`interp report`: the analyses come from the run's cache when they are there, else
they are computed, about 2.5 minutes for the demo on 2 cores), or takes the one given, and has Chromium
(/usr/bin/chromium, as the browser tests use) draw only its timeline section, the report's own figure and
nothing else (a style that hides the rest is added to a copy of the page), at the figure's own height. The PNG
is kept under MAX_BYTES (about 300 KB) by narrowing the window if it must. tests/e2e/test_front_picture.py runs it.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
MAX_BYTES = 300_000
WIDTHS = (1100, 1000, 900, 800)  # window widths tried, widest first, until the PNG is under MAX_BYTES
# the report's own elements other than the timeline section are hidden (by kind: plotly measures text in an
# element of its own that it adds to the body, which must stay)
ONLY_TIMELINE = """<style>
body > :is(h1, h2, h3, p, table, div, details, pre, section:not([data-section="timeline"])) { display: none !important; }
body > section[data-section="timeline"] { margin: 0; }
.modebar-container { display: none !important; }
section[data-section="timeline"] > h2, section[data-section="timeline"] figcaption { display: none; }
body { margin: 0 auto !important; padding: 8px 12px !important; max-width: none !important; }
</style>"""


def timeline_page(report: Path, folder: Path) -> tuple[Path, int]:
    """A copy of `report` that shows only its timeline figure, and that figure's height in pixels."""
    text = report.read_text(encoding="utf-8")
    match = re.search(r'<div style="height:\s*(\d+)px[^"]*">\s*<div id="fig-timeline"', text)
    if match is None or 'data-section="timeline"' not in text:
        raise SystemExit(f"{report} has no circuit-formation timeline (see the report's notes for why)")
    page = folder / "timeline-only.html"
    page.write_text(text.replace("</head>", ONLY_TIMELINE + "</head>", 1), encoding="utf-8")
    return page, int(match.group(1))


def screenshot(page: Path, out: Path, width: int, height: int, profile: Path) -> None:
    cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
           "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
           f"--user-data-dir={profile}", "--force-device-scale-factor=1", f"--window-size={width},{height}",
           "--virtual-time-budget=15000", f"--screenshot={out}", page.resolve().as_uri()]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if result.returncode != 0 or not out.is_file():
        raise SystemExit(f"chromium could not draw {page}: {result.stderr[-2000:]}")


def make(run: Path, out: Path, report: Path | None = None) -> Path:
    if not CHROMIUM.exists():
        raise SystemExit(f"{CHROMIUM} is missing: apt-get install -y chromium (tests/setup_browser.sh)")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if report is None:
            report = folder / "report.html"
            subprocess.run([sys.executable, "-m", "interp.cli", "report", str(run), "-o", str(report), "--quiet"],
                           check=True)
        page, height = timeline_page(report, folder)
        out.parent.mkdir(parents=True, exist_ok=True)
        for width in WIDTHS:
            screenshot(page, out, width, height + 16, folder / "profile")
            if out.stat().st_size <= MAX_BYTES:
                break
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, default=ROOT / "checkpoints" / "demo", help="run folder (default: the demo)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images" / "timeline.png", help="PNG to write")
    parser.add_argument("--report", type=Path, help="an existing report of the run (default: write one)")
    args = parser.parse_args()
    path = make(args.run, args.out, args.report)
    print(f"wrote {path} ({path.stat().st_size // 1000} KB)")


if __name__ == "__main__":
    main()
