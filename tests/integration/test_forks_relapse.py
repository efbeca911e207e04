"""The relapse design end to end, cut down (slow tier): `analyses/forks_relapse.py` makes forks-relapse-tiny's
parent, relapses it with its lr fork, forks the relapsed state (full_batch and minibatch, one seed, a short
horizon and hold) and prints the comparison under the family's criterion, the author's and today's, each named."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_cut_down_relapse_family_names_its_criteria(tmp_path):
    folder = tmp_path / "relapse"
    argv = [sys.executable, str(ROOT / "analyses" / "forks_relapse.py"), str(folder), "--arms", "full_batch,minibatch",
            "--seeds", "0", "--horizon", "100", "--escape", "loss_first<3.0,hold=25", "--gamma-window", "0:20"]
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    relapsed = (folder / "relapse" / "run.json").read_text()
    assert '"lr": 0.015' in relapsed and (folder / "relapse" / "states").is_dir()  # the lr fork kept its states
    assert "escape under the family's criterion [loss_first < 3 held 25 steps]" in out, out
    assert "not judged (the hold is longer than the horizon 100)" in out  # the author's hold of 500
    assert "escape under today's (tau_half) criterion [loss_cand < 0.5 log K, no hold]" in out, out
    assert "loss_first < 3 held 25 steps" in out.split("escape under today's")[0]  # the comparison's own header
    assert "at 400: full_batch: escape" in out and "ratio to full_batch" in out
