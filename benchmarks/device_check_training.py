"""benchmarks/device_check.py, the training and forks parts: a run to its snap on the DEVICE against the CPU, the same
command twice on the DEVICE, --precision bf16 (accepted by the hardware's units, and the tau-equivalence guard), and
a full_batch and a minibatch fork of the demo at step 500."""

from __future__ import annotations

import contextlib
import math
import os
import time

from device_check_lib import Part, fmt, verdict

HEIGHT_LIMIT = 0.02  # plateau height, device against the CPU, relative
FORK_AT = 500  # the demo's kept state (checkpoints/demo/states)
FORK_ARMS = ("full_batch", "minibatch")


def training_spec(quick: bool):
    """The run trained to its snap. Full: forks-tiny's parent (K = 10, D = 1,000, d_model 64; tau_half 200, snap 275
    on the CPU: docs/forks.md). Quick: two layers of width 32 on D = 400 (tau_half 180, snap 280 on the CPU), for the
    CPU smoke test."""
    from interp.forks.presets import fork_preset
    from interp.spec import ModelSpec, RunSpec, TaskSpec, TrainSpec

    if quick:
        return RunSpec(seed=0, task=TaskSpec(k=10, n_bases=40),
                       model=ModelSpec(n_layers=2, n_heads=2, d_model=32, d_head=16, d_mlp=128),
                       train=TrainSpec(steps=600, batch_size=64, eval_every=10, eval_size=64, checkpoint_every=100,
                                       lr=3e-3, early_checkpoints=False, stop_after_snap=10))
    return fork_preset("forks-tiny").parent.override(checkpoint_every=100, stop_after_snap=25)


def _trained(part: Part, name: str, spec, device: str) -> dict:
    """Train `spec` on `device` into the part's folder; its tau_half, plateau height, snap, routing head, seconds."""
    from interp.analysis.cache import ResultCache
    from interp.analysis.suite import routing_head_of
    from interp.runs import Run
    from interp.summary import run_summary
    from interp.train import train

    run = Run.create(part.work / "training" / name, spec)
    result, seconds = part.timed(lambda: train(run, device=device, progress=False), device)
    run = Run.open(run.path)
    summary = run_summary(run)
    head = routing_head_of(run, ResultCache(run), device=device)
    return {"run": run, "tau": summary["tau_half"], "height": summary["plateau_height"], "snap": summary["snap_step"],
            "head": head[0] if head else None, "seconds": seconds, "steps": result.last_step}


def _compare_runs(part: Part, a: dict, b: dict, what: str) -> None:
    """Rows: tau_half within one evaluation interval, the same routing head, plateau height within 2%."""
    every = a["run"].spec.train.eval_every
    tau_ok = a["tau"] is not None and b["tau"] is not None and abs(a["tau"] - b["tau"]) <= every
    part.row(f"{what}: tau_half", device=a["tau"], cpu=b["tau"],
             compare=None if a["tau"] is None or b["tau"] is None else abs(a["tau"] - b["tau"]),
             limit=f"|diff| <= {every} (one evaluation)", verdict=verdict(tau_ok), note=f"snap {a['snap']} / {b['snap']}")
    part.row(f"{what}: routing head", device=a["head"], cpu=b["head"], limit="the same head",
             verdict=verdict(a["head"] is not None and a["head"] == b["head"]))
    rel = (abs(a["height"] - b["height"]) / b["height"]) if a["height"] and b["height"] else None
    part.row(f"{what}: plateau height (Lc / log K)", device=a["height"], cpu=b["height"], compare=rel,
             limit=f"relative diff <= {HEIGHT_LIMIT:.0%}", verdict=verdict(rel is not None and rel <= HEIGHT_LIMIT))


def _weights_apart(a: dict, b: dict) -> tuple[int | None, float | None]:
    """The last step both runs saved, and the largest |weight difference| there."""
    common = sorted(set(a["run"].steps) & set(b["run"].steps))
    if not common:
        return None, None
    step = common[-1]
    wa, wb = a["run"].state_dict(step), b["run"].state_dict(step)
    return step, max(float((wa[n].double() - wb[n].double()).abs().max()) for n in wa)


def _repeat(part: Part, first: dict, spec) -> None:
    """The same command again on the DEVICE: bit for bit on the CPU (interp.train's deterministic kernels); on a GPU
    how far apart (not bit-exact)."""
    again = _trained(part, "device-2", spec, part.device)
    step, gap = _weights_apart(first, again)
    cols = [c for c in first["run"].metrics.columns if c != "seconds"]
    same_log = first["run"].metrics[cols].equals(again["run"].metrics[cols])
    note = (f"weights at step {step}; metrics logs {'identical' if same_log else 'differ'}; tau {first['tau']} / "
            f"{again['tau']}, snap {first['snap']} / {again['snap']}, head {first['head']} / {again['head']}")
    if part.same:
        part.row("same command twice on the DEVICE: max |weight diff|", device=gap, compare=None, limit="0 (the CPU)",
                 verdict=verdict(gap == 0 and same_log), seconds=again["seconds"], note=note)
    else:
        part.row("same command twice on the DEVICE: max |weight diff|", device=gap, limit="reported (GPUs are not "
                 "bit-exact)", verdict="info", seconds=again["seconds"], note=note)
        _compare_runs(part, again, first, "same command twice on the DEVICE")


def _bf16_accepted(part: Part) -> None:
    """--precision bf16 is accepted exactly where the hardware has bfloat16 units (the real capability)."""
    from interp.errors import InterpError
    from interp.precision import EMULATION_ENV, bf16_hardware, check_precision

    saved = os.environ.pop(EMULATION_ENV, None)
    try:
        found = {}
        for device in dict.fromkeys([part.device, "cpu"]):
            units, what = bf16_hardware(device)
            try:
                check_precision("bf16", device)
                accepted = True
            except InterpError:
                accepted = False
            found[device] = (units, what, accepted)
    finally:
        if saved is not None:
            os.environ[EMULATION_ENV] = saved
    ok = all(units == accepted for units, _, accepted in found.values())
    text = {d: "accepted" if acc else "refused" for d, (_, _, acc) in found.items()}
    part.row("--precision bf16 accepted where bf16 units are", device=text[part.device], cpu=text["cpu"],
             limit="accepted iff bf16 units", verdict=verdict(ok),
             note="; ".join(f"{d}: {what}" for d, (_, what, _) in found.items()))


def _bf16_guard(part: Part, first: dict, spec) -> None:
    """Issue 19's guard (interp.precision.guard_verdict) on two seeds, float32 against bf16 on the DEVICE."""
    from interp.precision import bf16_hardware, guard_verdict

    units, found = bf16_hardware(part.device)
    if not units:
        part.row("bf16 guard (2 seeds, tau and plateau height)", verdict="skipped",
                 note=f"this machine has no bf16 units ({found})")
        return
    runs = {"float32": [first], "bf16": []}
    for precision in runs:
        for seed in (0, 1):
            if precision == "float32" and seed == 0:
                continue
            runs[precision].append(_trained(part, f"guard-{precision}-s{seed}", spec.override(seed=seed,
                                                                                           precision=precision),
                                            part.device))
    rows = {p: [{"tau_half": r["tau"], "plateau_height": r["height"], "routing_head": r["head"]} for r in rs]
            for p, rs in runs.items()}
    v = guard_verdict(rows["float32"], rows["bf16"])
    seconds = {p: sum(r["seconds"] for r in rs) / len(rs) for p, rs in runs.items()}
    part.row("bf16 guard (2 seeds, tau and plateau height)",
             device=f"tau bf16 {[r['tau_half'] for r in rows['bf16']]}",
             cpu=None, compare=f"float32 taus {[r['tau_half'] for r in rows['float32']]}",
             limit="interp.precision.guard_verdict", verdict=verdict(v["passes"]),
             note=f"tau {'ok' if v['tau'] else 'out'}, height {'ok' if v['height'] else 'out'}, same head "
                  f"{v['same_head']}/2; mean train seconds float32 {seconds['float32']:.1f}, bf16 {seconds['bf16']:.1f}")


def training(part: Part) -> None:
    spec = training_spec(part.quick)
    part.check("--precision bf16 accepted where bf16 units are", lambda: _bf16_accepted(part), need=1)
    got = {}

    def on(name, device):
        def fn():
            with part.reference() if name == "cpu" else contextlib.nullcontext():
                got[name] = _trained(part, name, spec, device)
            r = got[name]
            part.row(f"train to the snap on the {'DEVICE' if name == 'device-1' else 'CPU'}: seconds", seconds=r["seconds"],
                     device=r["seconds"] if name == "device-1" else None, cpu=r["seconds"] if name == "cpu" else None,
                     note=f"{r['steps']} steps, tau {r['tau']}, snap {r['snap']}, head {r['head']}, height {fmt(r['height'])}"
                          + (" (one thread: the DEVICE is the CPU)" if name == "cpu" and part.same else ""))
        return fn

    part.check("train to the snap on the DEVICE", on("device-1", part.device), need=10)
    part.check("train to the snap on the CPU", on("cpu", "cpu"), need=10)
    if "device-1" in got and "cpu" in got:
        _compare_runs(part, got["device-1"], got["cpu"], "DEVICE against the CPU")
        step, gap = _weights_apart(got["device-1"], got["cpu"])
        part.row("DEVICE against the CPU: max |weight diff|", device=gap, verdict="info",
                 note=f"at step {step}, the last both saved (reported: the runs are compared by their facts above)")
        a, b = got["device-1"]["seconds"], got["cpu"]["seconds"]
        if not part.same:
            part.row("train to the snap: CPU seconds / DEVICE seconds", device=a, cpu=b, compare=b / a, verdict="info")
    if "device-1" in got:
        part.check("same command twice on the DEVICE", lambda: _repeat(part, got["device-1"], spec), need=10)
        part.check("bf16 guard (2 seeds, tau and plateau height)", lambda: _bf16_guard(part, got["device-1"], spec),
                   need=30)


# ---------------------------------------------------------------------------- forks
def _fork_settings(quick: bool) -> tuple[dict, dict]:
    """(horizon per arm, storage settings): evaluated every 5 steps, no checkpoints between, stopped at the snap. On
    the CPU (one thread, 2026-12-06) full_batch escaped 45 steps after the fork and minibatch 410."""
    horizon = {"full_batch": 4, "minibatch": 10} if quick else {"full_batch": 150, "minibatch": 600}
    settings = {"eval_every": 2 if quick else 5, "checkpoint_every": 10**6, "save_optimizer": False, "densify": False,
                "dense_until": 0, "stop_after_snap": 0, "early_checkpoints": False}
    return horizon, settings


def _forked(part: Part, parent, arm: str, role: str, horizon: int, settings: dict) -> dict:
    """The fork of `parent` at FORK_AT under `arm`, trained on the DEVICE (`role` "device") or the CPU ("cpu")."""
    from interp.forks.escape import DEFAULT
    from interp.forks.fork import fork

    device = part.device if role == "device" else "cpu"
    start = time.perf_counter()
    run = fork(parent, FORK_AT, arm, horizon, part.work / "forks" / f"{arm}-{role}", settings=settings, device=device,
               progress=False)
    seconds = time.perf_counter() - start
    series = run.metric_series("loss_cand")
    escape = DEFAULT.judge(series["step"], series["loss_cand"], FORK_AT, run.log_k)
    return {"escape": None if escape is None else escape - FORK_AT, "last_lc": series["loss_cand"][-1],
            "last_step": series["step"][-1], "seconds": seconds, "every": run.spec.train.eval_every}


def forks(part: Part) -> None:
    from interp.runs import Run

    parent = Run.open(part.work / "demo")
    horizon, settings = _fork_settings(part.quick)
    for arm in FORK_ARMS:
        got: dict[str, dict] = {}

        def on(role, arm=arm, got=got):
            def fn():
                with part.reference() if role == "cpu" else contextlib.nullcontext():
                    got[role] = _forked(part, parent, arm, role, horizon[arm], settings)
            return fn

        part.check(f"fork {arm} at {FORK_AT} on the DEVICE", on("device"), need=5)
        part.check(f"fork {arm} at {FORK_AT} on the CPU", on("cpu"), need=5)
        if len(got) == 2:
            _fork_rows(part, arm, got["device"], got["cpu"], horizon[arm])


def _fork_rows(part: Part, arm: str, a: dict, b: dict, horizon: int) -> None:
    every = a["every"]
    if a["escape"] is None and b["escape"] is None:
        ok, gap, text = True, None, f"both censored (no escape within {horizon} steps)"
    elif a["escape"] is None or b["escape"] is None:
        ok, gap, text = False, None, "one escaped, the other did not"
    else:
        gap = abs(a["escape"] - b["escape"])
        ok, text = gap <= max(2 * every, 0.1 * b["escape"]), f"|diff| {gap} steps"
    part.row(f"fork {arm} at {FORK_AT}: escape (steps after the fork, Lc < 0.5 log K)", device=a["escape"],
             cpu=b["escape"], compare=gap, limit=f"|diff| <= max(2 evaluations = {2 * every}, 10%)", verdict=verdict(ok),
             note=text)
    rel = abs(a["last_lc"] - b["last_lc"]) / abs(b["last_lc"]) if b["last_lc"] else math.inf
    part.row(f"fork {arm} at {FORK_AT}: Lc at the last evaluation", device=a["last_lc"], cpu=b["last_lc"], compare=rel,
             verdict="info", note=f"steps {a['last_step']} / {b['last_step']}; seconds {a['seconds']:.1f} / "
                                  f"{b['seconds']:.1f}")
