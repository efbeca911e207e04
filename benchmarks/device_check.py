"""A device checked end to end against the CPU: training, analyses, forks, speed and memory, in one table (issue 45).

    python benchmarks/device_check.py cuda --json $OUT/device_check.json     # a GPU: 7.5 minutes of time boxes
    python benchmarks/device_check.py cpu --quick                            # the CPU smoke test (the slow tier)

Parts, each in a process of its own with a time box: the boxes below are a quiet 2-core machine's, multiplied by how
much slower this machine runs a fixed reference workload at the start of the check (never less than 1) and by
`--scale`. A part that fails or runs out of time is rows in the table, never the end of the check:
  analyses  the default suite at three demo checkpoints, the edges (EAP and EAP-IG), a Hessian extreme eigenvalue
            and a short LLC (with devinterp installed), each on the DEVICE and on the CPU: the largest relative
            difference per analysis, at most 1e-4 after float32 rounding (the LLC, whose SGLD noise is each device's
            own, within 3 standard errors);
  training  a small run to its snap on the DEVICE and on the CPU (tau_half within one evaluation, the same routing
            head, plateau height within 2%); the same command twice on the DEVICE (on the CPU: bit for bit);
            --precision bf16 accepted exactly where the hardware has bfloat16 units, and issue 19's tau-equivalence
            guard on two seeds where it does;
  forks     a full_batch and a minibatch fork of the demo at step 500 on the DEVICE and the CPU: their escapes;
  speed     the paper preset's training step eager, compiled and under bf16 autocast (issue 19: bf16 at least 1.8x
            float32 eager), a bare matrix product's rate and a cold `interp analyze` of the demo, DEVICE and CPU in the
            same run (ratios);
  memory    each part's peak device memory (its last row).
The CPU reference runs on the same machine in the same process; where the DEVICE is the CPU itself, the reference runs
on one thread (so there is still something to compare) and the speed ratios are left out. Prints the table (and each
row's note below it), writes it with the machine's description as JSON (`--json`), and exits 0 when no check failed
or errored (a check that cannot apply here is "skipped" with its reason; one its time box cut short is "slow": a busy
machine is reported, not failed), 1 when one failed or errored, 2 on bad input.
Work goes to a temporary folder (`--work`), removed at the end unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PARTS = ("analyses", "training", "forks", "speed")
# each part's time box in seconds: full on a GPU machine (16 cores for the CPU reference), 7.5 minutes in all;
# --quick on a quiet 2-core CPU, where it takes about 4 minutes (a loaded one needs --scale)
BOXES = {False: {"analyses": 100, "training": 90, "forks": 140, "speed": 120},
         True: {"analyses": 120, "training": 150, "forks": 60, "speed": 90}}
GRACE = 15  # seconds a part may run past its box (its memory row, its last check) before it is killed
COLUMNS = ("part", "check", "device", "cpu", "compare", "limit", "verdict", "seconds")


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("device", help="torch device: cpu, cuda, cuda:N, mps")
    p.add_argument("--quick", action="store_true", help="small sizes: the CPU smoke test (a few minutes)")
    p.add_argument("--json", help="write the table and the machine's description here")
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {', '.join(PARTS)}")
    p.add_argument("--scale", type=float, default=1.0, help="multiply every part's time box (default 1)")
    p.add_argument("--work", help="working folder (default: a new temporary one)")
    p.add_argument("--keep", action="store_true", help="keep the working folder")
    p.add_argument("--part", help=argparse.SUPPRESS)  # the child process of one part
    p.add_argument("--rows", help=argparse.SUPPRESS)
    p.add_argument("--box", type=float, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def child(args) -> int:
    """One part, in this process: its rows go to args.rows."""
    import warnings

    from device_check_lib import Part, one_line

    warnings.filterwarnings("ignore")
    part = Part(args.part, args.device, args.quick, Path(args.rows), time.monotonic() + args.box, Path(args.work))
    if args.part == "training" or args.part == "forks":
        import device_check_training as module
    elif args.part == "analyses":
        import device_check_analyses as module
    else:
        import device_check_speed as module
    try:
        getattr(module, args.part)(part)
    except Exception as exc:  # noqa: BLE001 - the part's own failure is a row too
        part.row(args.part, verdict="error", note=one_line(exc))
    part.finish()
    return 0


def read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a line torn by the kill
            continue
    return rows


def run_part(name: str, args, work: Path, box: float) -> tuple[list[dict], float]:
    rows_path, log_path = work / f"{name}.rows.jsonl", work / f"{name}.log"
    cmd = [sys.executable, str(Path(__file__).resolve()), args.device, "--part", name, "--rows", str(rows_path),
           "--work", str(work), "--box", str(box)] + (["--quick"] if args.quick else [])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), str(ROOT),
                                                                      os.environ.get("PYTHONPATH", "")]))}
    start = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=ROOT)
        try:
            rc = proc.wait(timeout=box + GRACE)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
    seconds = time.monotonic() - start
    rows = read_rows(rows_path)
    base = {"part": name, "device": None, "cpu": None, "compare": None, "limit": "", "seconds": round(seconds, 1)}
    if rc is None:
        rows.append({**base, "check": "time box", "verdict": "slow",
                     "note": f"stopped after {box + GRACE:.0f} s (box {box:.0f} s): this machine ran the part slower "
                             f"than its box allows; the rows above were measured, the rest not run"})
    elif rc != 0 or not any(r["check"] == "peak memory (MiB)" for r in rows):
        tail = [line for line in log_path.read_text(errors="replace").splitlines() if line.strip()][-3:]
        rows.append({**base, "check": "process", "verdict": "error", "note": f"exit {rc}: " + " | ".join(tail)[-400:]})
    return rows, seconds


def table(rows: list[dict]) -> str:
    from device_check_lib import fmt

    cells = [[fmt(r.get(c)) if c not in ("part", "check", "limit", "verdict") else str(r.get(c) or "")
              for c in COLUMNS] for r in rows]
    heads = [c.upper() if c in ("device", "cpu") else c for c in COLUMNS]
    cap = {"check": 64, "device": 24, "cpu": 24, "compare": 12, "limit": 36}
    width = [min(max([len(h)] + [len(c[i]) for c in cells]), cap.get(col, 12)) for i, (h, col) in
             enumerate(zip(heads, COLUMNS))]
    line = lambda values: "  ".join(v[:w].ljust(w) for v, w in zip(values, width)).rstrip()  # noqa: E731
    out = [line(heads), line(["-" * w for w in width])] + [line(c) for c in cells]
    notes = [f"  [{r['verdict']}] {r['part']} / {r['check']}: {r['note']}" for r in rows if r.get("note")]
    return "\n".join(out + (["", "notes:"] + notes if notes else []))


def drive(args) -> int:
    sys.path.insert(0, str(HERE))
    from device_check_lib import REFERENCE_SECONDS, VERDICTS, box_factor, environment, reference_workload_seconds

    from interp.devices import check_device
    from interp.errors import InterpError
    from interp.files import atomic_write_json, check_output_file

    try:
        device = check_device(args.device)
        parts = [p.strip() for p in args.parts.split(",") if p.strip()]
        bad = [p for p in parts if p not in PARTS]
        if bad or not parts:
            raise InterpError(f"--parts {args.parts!r}: allowed: {', '.join(PARTS)}")
        if not args.scale > 0:
            raise InterpError(f"--scale must be positive, got {args.scale:g}")
        out = check_output_file(args.json, "--json file") if args.json else None
        if args.work and Path(args.work).exists() and not Path(args.work).is_dir():
            raise InterpError(f"--work {args.work} is a file; give a new or empty folder")
        work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="interp-device-check-"))
        if args.work and work.exists() and any(work.iterdir()):
            raise InterpError(f"--work {work} is not empty; give a new or empty folder")
    except InterpError as exc:
        print(f"device_check.py: {exc}", file=sys.stderr)
        return 2
    work.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ROOT / "checkpoints" / "demo", work / "demo", ignore=shutil.ignore_patterns("cache", "*.lock"))
    began = datetime.now(timezone.utc)
    env = environment(device)
    env["reference_seconds"] = round(reference_workload_seconds(), 4)
    env["box_factor"] = round(box_factor(env["reference_seconds"]), 2)
    print(f"device check of {device} ({env.get('gpu') or env['cpu']}), torch {env['torch']}, {env['threads']} CPU "
          f"threads, load average {env['load_average']}, {'quick' if args.quick else 'full'}; work in {work}\n"
          f"  reference workload {env['reference_seconds']:.3f} s (a quiet 2-core machine: "
          f"{REFERENCE_SECONDS:.3f} s): time boxes x {env['box_factor']:.2f}" + (f" x {args.scale:g} (--scale)"
                                                                                  if args.scale != 1 else ""),
          flush=True)
    rows: list[dict] = []
    boxes = {name: BOXES[args.quick][name] * env["box_factor"] * args.scale for name in parts}
    for name in parts:
        got, seconds = run_part(name, args, work, boxes[name])
        rows.extend(got)
        bad = sum(r["verdict"] in ("fail", "error") for r in got)
        print(f"  {name}: {len(got)} rows in {seconds:.0f} s (box {boxes[name]:.0f} s), {bad} failed or errored",
              flush=True)
    env["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    print()
    print(table(rows))
    print(f"\n{counts['pass']} passed, {counts['fail']} failed, {counts['error']} errors, {counts['skipped']} skipped, "
          f"{counts['slow']} slow (over their time box), "
          f"{counts['info']} informational; load average {env['load_average']} before, "
          f"{env['load_average_after']} after; {(datetime.now(timezone.utc) - began).total_seconds():.0f} s")
    if out is not None:
        atomic_write_json(out, {"benchmark": "device_check", "quick": args.quick, "started": began.isoformat(),
                                "environment": env, "boxes": boxes, "counts": counts, "rows": rows})
    if not args.keep and not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if counts["fail"] or counts["error"] else 0


def main(argv=None) -> int:
    args = parse(argv)
    if args.part:
        return child(args)
    return drive(args)


if __name__ == "__main__":
    sys.exit(main())
