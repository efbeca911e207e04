"""benchmarks/device_check.py, the analyses part: the default suite at three demo checkpoints, the edges (EAP and
EAP-IG), a Hessian extreme eigenvalue and a short LLC, each on the DEVICE and on the CPU of the same machine.

Each table is compared column by column (`device_check_lib.table_difference`): the largest |device - cpu| over the
column's largest |cpu|, after rounding both to float32; an analysis passes at most RELATIVE_LIMIT (1e-4). The LLC's
SGLD noise comes from each device's own random generator, so its chains differ by design: it is compared in units of
its spread over chains instead."""

from __future__ import annotations

import contextlib
import importlib.util
import math

from device_check_lib import RELATIVE_LIMIT, Part, findings_difference, table_difference, verdict

STEPS = "pre,mid,last"  # tau/4 and tau snapped to saved steps, and the last: three demo checkpoints
LIMIT = f"<= {RELATIVE_LIMIT:g} (float32)"


def owner(table: str, names) -> str:
    """The analysis a table belongs to: the longest analysis name it starts with ("patching_heads" -> patching)."""
    found = [n for n in names if table == n or table.startswith(n + "_")]
    return max(found, key=len) if found else table


def _suite_rows(part: Part, dev, cpu) -> None:
    from interp.analysis import registry

    names = list(registry.REGISTRY)
    worst: dict[str, dict] = {}
    for table in sorted(set(dev.tables) | set(cpu.tables)):
        a, b = dev.tables.get(table), cpu.tables.get(table)
        if a is None or b is None:
            diff = {"rel": math.inf, "where": "", "note": f"table {table} only on the {'DEVICE' if b is None else 'CPU'}"}
        else:
            diff = table_difference(a, b)
        name = owner(table, names)
        if name not in worst or diff["rel"] > worst[name]["rel"] or (diff["note"] and not worst[name]["note"]):
            worst[name] = {**diff, "table": table}
    for name, w in worst.items():
        where = f"{w['table']}.{w['where']}" if w["where"] else w["table"]
        part.row(f"suite: {name}", device=w["rel"], limit=LIMIT, verdict=verdict(w["rel"] <= RELATIVE_LIMIT),
                 note=(f"largest at {where}" if w["rel"] else "equal in every column") + (f"; {w['note']}" if w["note"] else ""))
    rel, key = findings_difference(dev.findings, cpu.findings)
    part.row("suite: findings", device=rel, limit=LIMIT, verdict=verdict(rel <= RELATIVE_LIMIT),
             note=f"largest at {key}" if key else f"{len(dev.findings)} findings equal")
    if dev.problems or cpu.problems:
        part.row("suite: problems", device="; ".join(dev.problems)[:300], cpu="; ".join(cpu.problems)[:300],
                 verdict="fail")


def suite(part: Part, run) -> None:
    from interp.analysis.suite import run_suite

    got = {}
    for role, device in (("device", part.device), ("cpu", "cpu")):
        with part.reference() if role == "cpu" else contextlib.nullcontext():
            got[role], seconds = part.timed(lambda: run_suite(run, steps=STEPS, device=device, progress=False,
                                                              cache=False), device)
        part.row(f"suite at {STEPS} on the {'DEVICE' if role == 'device' else 'CPU'}: seconds", seconds=seconds,
                 **{role: seconds}, note=f"{sum(len(t) for t in got[role].tables.values())} rows in "
                                         f"{len(got[role].tables)} tables")
    _suite_rows(part, got["device"], got["cpu"])


def _pair(part: Part, fn):
    """fn(device) on the DEVICE and on the CPU reference: ((device result, seconds), (cpu result, seconds))."""
    out = []
    for role, device in (("device", part.device), ("cpu", "cpu")):
        with part.reference() if role == "cpu" else contextlib.nullcontext():
            out.append(part.timed(lambda: fn(device), device))
    return out


def edges(part: Part, run, step: int) -> None:
    from interp.analysis import edges as edges_analysis

    for method in ("eap", "eap-ig"):
        def one(device, method=method):
            return edges_analysis.at_step(run, step, method=method, device=device)

        def fn(method=method, one=one):
            (a, sa), (b, sb) = _pair(part, one)
            diffs = {name: table_difference(a[name], b[name]) for name in a}
            name = max(diffs, key=lambda n: diffs[n]["rel"])
            w = diffs[name]
            part.row(f"edges {method} at step {step}", device=w["rel"], limit=LIMIT,
                     verdict=verdict(w["rel"] <= RELATIVE_LIMIT),
                     note=(f"largest at {name}.{w['where']}" if w["rel"] else "equal in every column")
                          + (f"; {w['note']}" if w["note"] else "")
                          + f"; seconds {sa:.2f} / {sb:.2f}")
        part.check(f"edges {method} at step {step}", fn, need=5)


def hessian(part: Part, run, step: int) -> None:
    from interp.analysis import hessian as hessian_analysis

    n = 64 if part.quick else 1024

    def one(device):
        return hessian_analysis.at_step(run, step, n_examples=n, device=device)["hessian"]

    (a, sa), (b, sb) = _pair(part, one)
    for name in ("lambda_max", "lambda_min"):
        x, y = float(a[name].iloc[0]), float(b[name].iloc[0])
        rel = abs(x - y) / abs(y) if y else math.inf
        part.row(f"Hessian {name} at step {step} ({n} examples)", device=x, cpu=y, compare=rel, limit=LIMIT,
                 verdict=verdict(rel <= RELATIVE_LIMIT),
                 note=f"converged {bool(a['converged'].all())} / {bool(b['converged'].all())}; products "
                      f"{int(a['n_matvec'].max())} / {int(b['n_matvec'].max())}; seconds {sa:.1f} / {sb:.1f}")


def llc(part: Part, run, step: int) -> None:
    if importlib.util.find_spec("devinterp") is None:
        part.row(f"LLC at step {step}", verdict="skipped", note="devinterp is not installed (pip install -e '.[landscape]')")
        return
    from interp.analysis import llc as llc_analysis

    chains, draws = (2, 10) if part.quick else (4, 60)

    def one(device):
        return llc_analysis.at_step(run, step, restrict="full", chains=chains, draws=draws, device=device)

    (a, sa), (b, sb) = _pair(part, one)
    ma, mb = float(a["llc_mean"].iloc[0]), float(b["llc_mean"].iloc[0])
    spread = math.sqrt((float(a["llc"].var(ddof=1)) + float(b["llc"].var(ddof=1))) / chains)
    z = abs(ma - mb) / spread if spread > 0 else (0.0 if ma == mb else math.inf)
    part.row(f"LLC at step {step} ({chains} chains x {draws} draws)", device=ma, cpu=mb, compare=z,
             limit="|diff| <= 3 standard errors", verdict=verdict(z <= 3),
             note=f"compare: |diff| in standard errors of the chains' mean (each device draws its own SGLD noise); "
                  f"chains {[round(v, 2) for v in a['llc']]} / {[round(v, 2) for v in b['llc']]}; seconds "
                  f"{sa:.1f} / {sb:.1f}")



def analyses(part: Part) -> None:
    from interp.analysis.common import select_steps
    from interp.runs import Run

    run = Run.open(part.work / "demo")
    ((tau_step, _),) = select_steps(run, ["mid"])
    part.check("suite", lambda: suite(part, run), need=20)
    edges(part, run, tau_step)
    part.check(f"Hessian at step {tau_step}", lambda: hessian(part, run, tau_step), need=10)
    part.check(f"LLC at step {tau_step}", lambda: llc(part, run, tau_step), need=10)
