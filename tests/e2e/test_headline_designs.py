"""Issue 46's two designs, cut down to minutes and run end to end (slow tier): the wide lead family
(`landauer-dense-wide-tiny`: two K, one seed, trained and judged) and the relapse-depth family
(`forks-relapse-depth-tiny`: the parent, the relapse held, forks at two depths, read by its finding script)."""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wide_lead_family_cut_down_trains_and_is_judged(tmp_path):
    from interp.mechanisms.reconcile import reconcile
    from interp.sweeps.presets import SWEEP_PRESETS
    from interp.sweeps.sweep import Sweep, train_sweep

    spec = SWEEP_PRESETS["landauer-dense-wide-tiny"]
    cut = dataclasses.replace(spec, grid=(("seed", (0,)),), points=spec.points[:2])  # K = 3, 5; seed 0
    sweep = Sweep.create(tmp_path / "wide", cut)
    train_sweep(sweep, threads=2, progress=False)
    table = reconcile(sweep.path)
    rows = {r["key"]: r for r in table.rows}
    share = rows["lead_share"]
    assert share["measured_on"] == str(sweep.path) and share["n_runs"] == 2, share
    assert share["verdict"] == "not measured" and "2 runs (seeds), needs 3" in share["why"]
    assert share["command"].startswith("interp sweep --preset landauer-dense-wide-tiny --seed 0,1,2")
    for key in ("lead_trend", "lead_exponent"):  # two values of K: the fit needs 3 over 5 runs
        assert rows[key]["verdict"] == "not measured", rows[key]


def test_the_relapse_depth_design_cut_down_runs_end_to_end(tmp_path):
    script = ROOT / "analyses" / "relapse_depth.py"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    result = subprocess.run([sys.executable, str(script), str(tmp_path / "depth"), "--depths", "0,100", "--arms",
                             "full_batch,minibatch", "--seeds", "0", "--horizon", "60", "--escape", "loss_first<3.0,hold=20",
                             "--gamma-window", "10:50",
                             "--relapse-steps", "300",
                             "--workers", "1", "--out", str(tmp_path)], capture_output=True, text=True, cwd=tmp_path,
                            env=env, timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert out.count("v_mean / the solved state's") == 2, out  # one block per depth
    assert "minibatch / full_batch escape" in out and "reconciliation of" in out
    assert (tmp_path / "relapse_depth.html").stat().st_size > 10_000


def test_the_relapse_calibration_prints_each_lr_and_probes_the_deepest_depth_held(tmp_path):
    # the design's parent, one lr fork at the design's relapse lr (0.04, which holds its relapse to the end) cut to
    # 1,400 steps, and the full gradient probed at relapse+1000 (the deepest of 1,000 and 4,000 it holds)
    script = ROOT / "analyses" / "relapse_depth.py"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    result = subprocess.run([sys.executable, str(script), str(tmp_path / "depth"), "--calibrate", "0.04",
                             "--relapse-steps", "1400", "--probe-steps", "100"], capture_output=True, text=True,
                            cwd=tmp_path, env=env, timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "lr 0.04: relapse" in out and "held" in out and "log K" in out, out
    assert "(relapse+1000)" in out and "v_mean.all there" in out, out
    assert (tmp_path / "depth" / "calibrate" / "probe-lr-0.04").is_dir()
