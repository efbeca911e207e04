"""End to end: `benchmarks/device_check.py cpu --quick`, the check a GPU session runs (issue 45), runs on the CPU and
prints its table, so the script stays working between the rare sessions that have a GPU.

Where the DEVICE is the CPU, the reference runs on one thread: training on the CPU is deterministic per thread count
(the same command twice is bit for bit), the analyses agree with the reference within 1e-4, every part ends with its
memory row, and no check errors. Speed goals are reported, not asserted: a shared machine decides them. About 4 minutes
on a quiet 2-core CPU; the time boxes are widened tenfold here, so a machine other jobs load slows the test without
failing it (on this project's machine at load 10, torch's two threads ran training 20 times slower than one).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PARTS = ("analyses", "training", "forks", "speed")


def test_device_check_on_the_cpu_prints_the_table(tmp_path):
    out = tmp_path / "device_check.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "device_check.py"), "cpu", "--quick", "--json",
                           str(out), "--scale", "10"], cwd=tmp_path, capture_output=True, text=True, timeout=4 * 3600)
    print(proc.stdout)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    data = json.loads(out.read_text())
    rows = data["rows"]
    by_check = {(r["part"], r["check"]): r for r in rows}
    assert [line for line in proc.stdout.splitlines() if line.startswith("part ")][0].split()[:4] == \
        ["part", "check", "DEVICE", "CPU"]
    for r in rows:  # every row is in the printed table
        assert r["check"][:60] in proc.stdout
    errors = [r for r in rows if r["verdict"] == "error"]
    assert not errors, errors
    assert {r["part"] for r in rows} == set(PARTS)
    for part in PARTS:
        memory = by_check[(part, "peak memory (MiB)")]
        assert memory["device"] > 100  # a process that imported torch and TransformerLens
    suite = [r for r in rows if r["part"] == "analyses" and r["check"].startswith(("suite:", "edges", "Hessian"))]
    assert len(suite) >= 14 and all(r["verdict"] == "pass" for r in suite), [r for r in suite if r["verdict"] != "pass"]
    for check in ("DEVICE against the CPU: tau_half", "DEVICE against the CPU: routing head",
                  "same command twice on the DEVICE: max |weight diff|", "--precision bf16 accepted where bf16 units are"):
        assert by_check[("training", check)]["verdict"] == "pass", by_check[("training", check)]
    assert by_check[("training", "same command twice on the DEVICE: max |weight diff|")]["device"] == 0
    for arm in ("full_batch", "minibatch"):
        assert by_check[("forks", f"fork {arm} at 500: escape (steps after the fork, Lc < 0.5 log K)")]["verdict"] == "pass"
    assert by_check[("speed", "paper step, eager float32 (ms)")]["device"] > 0
    env = data["environment"]
    assert env["device"] == "cpu" and env["torch"] and len(env["load_average"]) == 3
