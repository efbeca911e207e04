"""Finding: the reverse direction (predict B from A) learns more slowly than (B, z) -> A.

Paper: a_to_b needs 1.7-4.4x the steps of bz_to_a. Each seed trains both directions on the
same mapping (the same task seed), so the ratio of steps to exact match >= 0.99 is paired
per seed; we report its geometric and arithmetic means with CIs.

    interp sweep --preset asymmetry-tiny --out sweeps/asymmetry-tiny --workers 2
    python analyses/direction_asymmetry.py [SWEEP] [--out DIR]
"""

from _common import parse_sweep, row, status_line

from interp import plots
from interp.sweeps import scaling

sweep, out, _ = parse_sweep(__doc__.splitlines()[0], "sweeps/asymmetry-tiny", with_y=False)
print(status_line(sweep))
res = scaling.asymmetry(sweep.table())
lo, hi = scaling.PAPER_ASYMMETRY
print(row("a_to_b / bz_to_a, geometric mean [95% CI]",
          f"{res.geo_mean_ratio:.2f} [{res.ci[0]:.2f}, {res.ci[1]:.2f}]", f"{lo}-{hi}x"))
print(row("arithmetic mean [95% CI]",
          f"{res.mean_ratio:.2f} [{res.mean_ratio_ci[0]:.2f}, {res.mean_ratio_ci[1]:.2f}]", f"{lo}-{hi}x"))
print(row("seed pairs (censored)", f"{res.n_pairs} ({res.n_censored_pairs})", "-"))
print(f"summary: {res.summary()}")
path = out / "direction_asymmetry.html"
plots.asymmetry_bars(res).write_html(path, include_plotlyjs=True)
print(f"figure: {path}")
