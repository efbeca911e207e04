"""The six presets of the author's program end to end, cut down (slow tier): `analyses/variants.py PRESET --steps N
--seeds 1` trains each design short (a sweep's runs, a fork family's horizon, the reversal's scratch reference), writes
its per-run table and prints each of its verdicts' lines, named as `interp.mechanisms.variants` names them. The
numbers at this size decide nothing (docs/variants.md holds the measured tables); what is checked is that every
stage runs and reads what the one before wrote."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
VERDICTS = ("reproduced", "not reproduced", "inconclusive", "measured (no published number)", "not measured")

# preset -> (steps, the claim names its verdicts print, the runs its table holds at one seed)
PRESETS = {
    "k1-control-tiny": (150, ["K = 1 exact match 0.99 / K = 10 tau_half"], 2),
    "label-noise-tiny": (150, ["tau_acc_half at P = 0.05 / clean", "tau_acc_half at P = 0.2 / clean"], 3),
    "hierarchy-tiny": (150, ["share of seeds with two plateaus", "share of seeds whose z1 gap opens before z2's"], 1),
    "holdout-tiny": (150, ["held-out exact match (held out by pair)", "held-out exact match (held out by base)"], 2),
    "optimizer-branch-tiny": (50, ["optimizer:name=adamw,beta1=0: share escaped",
                                   "optimizer:name=sgd,lr=0.03,momentum=0.9: share escaped",
                                   "decoupled weight decay is necessary and sufficient"], 7),
    "reversal-transfer-tiny": (50, ["escape after the switch (fresh optimizer) / tau_half from scratch",
                                    "escape after the switch (carried optimizer) / tau_half from scratch"], 3),
}


@pytest.mark.slow
@pytest.mark.parametrize("preset", list(PRESETS))
def test_a_cut_down_preset_runs_end_to_end(tmp_path, preset):
    steps, claims, runs = PRESETS[preset]
    csv = tmp_path / f"{preset}.csv"
    argv = [sys.executable, str(ROOT / "analyses" / "variants.py"), preset, str(tmp_path / preset), "--steps",
            str(steps), "--seeds", "1", "--csv", str(csv)]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for claim in claims:
        line = next((x for x in out.splitlines() if x.strip().startswith(claim)), None)
        assert line is not None, f"no line for {claim!r} in:\n{out}"
        assert any(f": {v} (" in line for v in VERDICTS), line
    table = pd.read_csv(csv)
    assert len(table) == runs and set(table["status"]) == {"done"}, table[["status"]]
    again = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)  # trains nothing
    assert again.returncode == 0 and again.stdout == out, again.stderr[-2000:]


def test_the_cut_down_options_refuse_bad_input_in_one_line(tmp_path):
    argv = [sys.executable, str(ROOT / "analyses" / "variants.py"), "hierarchy-tiny", str(tmp_path / "h"), "--steps",
            "0"]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and "--steps: invalid positive_int value: '0'" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2 and not (tmp_path / "h").exists()
