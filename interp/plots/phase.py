"""The phase-diagram figure as a self-contained SVG (no plotting library, no browser): lr (log axis) x K, each cell
shaded by the share of seeds that transitioned with its count and its stuck (S) and diverged (D) runs; per K, our
eta_c (a diamond) with its calibrated interval (a bar; an arrow where it is open), the author's least-squares eta_c
(a circle) and the bracket (ticks). `interp phase --figure F.svg` writes it; `interp report SWEEP` inlines it."""

from __future__ import annotations

import math
from html import escape

CELL_H, LEFT, TOP, WIDTH = 54, 70, 34, 640
BLUE = (31, 119, 180)


def _shade(share: float) -> str:
    r, g, b = (round(255 - (255 - c) * share) for c in BLUE)
    return f"rgb({r},{g},{b})"


def phase_svg(result) -> str:
    """The SVG text of a `interp.sweeps.phase.Phase`."""
    cells = result.cells
    lrs = sorted(set(cells["lr"].astype(float)))
    ks = sorted(set(cells["k"].astype(int)))
    logs = [math.log(v) for v in lrs]
    step = (logs[-1] - logs[0]) / max(len(logs) - 1, 1) or 1.0
    lo, hi = logs[0] - step / 2, logs[-1] + step / 2
    height = TOP + CELL_H * len(ks) + 70

    def x(value: float) -> float:
        return LEFT + (math.log(value) - lo) / (hi - lo) * WIDTH

    bounds = [lo] + [(a + b) / 2 for a, b in zip(logs, logs[1:])] + [hi]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + 20}" height="{height}" '
             f'font-family="sans-serif" font-size="12" role="img" aria-label="learning-rate phase diagram">',
             f'<text x="{LEFT}" y="18" font-size="13">share of seeds that transitioned, per (lr, K); '
             f'diamond: eta_c with its interval; circle: the author\'s fit</text>']
    fits = result.eta_c()
    for row, k in enumerate(reversed(ks)):
        y0 = TOP + row * CELL_H
        parts.append(f'<text x="{LEFT - 8}" y="{y0 + CELL_H / 2 + 4}" text-anchor="end">K = {k}</text>')
        for i, lr in enumerate(lrs):
            c = cells[(cells["k"] == k) & (cells["lr"].astype(float) == lr)]
            x0 = LEFT + (bounds[i] - lo) / (hi - lo) * WIDTH
            x1 = LEFT + (bounds[i + 1] - lo) / (hi - lo) * WIDTH
            if c.empty:
                parts.append(f'<rect x="{x0:.1f}" y="{y0}" width="{x1 - x0:.1f}" height="{CELL_H}" fill="#eee" '
                             f'stroke="white"/>')
                continue
            r = c.iloc[0]
            share = float(r["share"])
            ink = "white" if share > 0.6 else "black"
            marks = " ".join(m for m in (f"S{int(r['stuck'])}" if r["stuck"] else "",
                                         f"D{int(r['diverged'])}" if r["diverged"] else "",
                                         f"?{int(r['other'])}" if r["other"] else "") if m)
            parts.append(f'<rect x="{x0:.1f}" y="{y0}" width="{x1 - x0:.1f}" height="{CELL_H}" '
                         f'fill="{_shade(share)}" stroke="white"><title>K={k} lr={lr:g}: {int(r["transitioned"])}/'
                         f'{int(r["n"])} transitioned, {int(r["stuck"])} stuck, {int(r["diverged"])} diverged</title></rect>')
            parts.append(f'<text x="{(x0 + x1) / 2:.1f}" y="{y0 + 20}" text-anchor="middle" fill="{ink}">'
                         f'{int(r["transitioned"])}/{int(r["n"])}</text>')
            if marks:
                parts.append(f'<text x="{(x0 + x1) / 2:.1f}" y="{y0 + 36}" text-anchor="middle" fill="{ink}" '
                             f'font-size="11">{escape(marks)}</text>')
        fit = fits.get(k)
        if fit is None:
            continue
        ym = y0 + CELL_H - 8
        clip = (lambda v: min(max(v, LEFT), LEFT + WIDTH))
        if fit.eta_c is not None:
            a = clip(x(fit.low)) if fit.low is not None else LEFT
            b = clip(x(fit.high)) if fit.high is not None else LEFT + WIDTH
            parts.append(f'<line x1="{a:.1f}" y1="{ym}" x2="{b:.1f}" y2="{ym}" stroke="#d62728" stroke-width="2"/>')
            for end, is_open, sign in ((a, fit.low is None, -1), (b, fit.high is None, 1)):
                if is_open:
                    parts.append(f'<path d="M{end:.1f},{ym} l{-6 * sign},-4 l0,8 z" fill="#d62728"/>')
            cx = clip(x(fit.eta_c))
            parts.append(f'<path d="M{cx:.1f},{ym - 6} l6,6 l-6,6 l-6,-6 z" fill="#d62728"><title>eta_c = '
                         f'{fit.eta_c:.3g}</title></path>')
        if fit.author_eta_c is not None and fit.author_eta_c > 0:
            ax = clip(x(fit.author_eta_c))
            parts.append(f'<circle cx="{ax:.1f}" cy="{ym}" r="4" fill="none" stroke="black"/>')
    axis_y = TOP + CELL_H * len(ks)
    for lr in lrs:
        parts.append(f'<text x="{x(lr):.1f}" y="{axis_y + 16}" text-anchor="middle">{lr:g}</text>')
    parts.append(f'<text x="{LEFT + WIDTH / 2}" y="{axis_y + 34}" text-anchor="middle">learning rate (log scale)'
                 f'</text>')
    parts.append(f'<text x="{LEFT}" y="{axis_y + 54}" font-size="11">S: stuck, D: diverged, ?: inconclusive or '
                 f'crashed; interval cutoff {result.cutoff:.2f} (calibrated by simulation)</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def phase_figure(result, path) -> None:
    """Write the figure to `path` (.svg)."""
    from interp.files import atomic_write_bytes

    from pathlib import Path

    atomic_write_bytes(Path(path), phase_svg(result).encode())
