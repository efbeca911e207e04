"""`interp doctor [--json] [--ray]`: what this machine gives interp, in one answer to paste into a bug report.

interp, Python, torch (its threads, the CUDA it was built for), TransformerLens and the model class it gives
(`interp.model.tl_major`: a HookedTransformer on 3.x, a TransformerBridge on 4.x), the devices torch sees (the
CPU with its instruction set and bfloat16 units, each CUDA GPU with its memory, MPS), and which optional extras
are installed (ray, devinterp, tensorboard, wandb). Versions come from the installed packages' metadata: nothing
is imported that the answer does not need (never TransformerLens, Ray, devinterp, tensorboard or wandb; torch,
for its threads and devices). `--ray` also starts a local Ray instance and stops it (seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from importlib.metadata import PackageNotFoundError, version

EXTRAS = {"ray": "ray", "devinterp": "landscape", "tensorboard": "track", "wandb": "track"}  # package -> extra


def _version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def _cpu_flags() -> set[str]:
    """The CPU's flags as Linux lists them (empty elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _model_class(problems: list[str]) -> str | None:
    from interp.errors import InterpError
    from interp.model import tl_major

    try:
        return "HookedTransformer" if tl_major() == 3 else "TransformerBridge (compatibility mode)"
    except InterpError as exc:
        problems.append(str(exc))
        return None


def _devices() -> list[dict]:
    import torch

    from interp.precision import bf16_hardware

    flags = _cpu_flags()
    cpu = {"device": "cpu", "cores": os.cpu_count(), "capability": torch.backends.cpu.get_cpu_capability(),
           "bf16_units": bf16_hardware("cpu")[0],
           "cpu_flags": sorted(flags & {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})}
    found = [cpu]
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            found.append({"device": f"cuda:{i}", "name": props.name, "memory_gib": round(props.total_memory / 2**30, 1),
                          "capability": f"{props.major}.{props.minor}", "bf16_units": bf16_hardware(f"cuda:{i}")[0]})
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        memory = getattr(torch.mps, "recommended_max_memory", lambda: 0)()
        found.append({"device": "mps", "memory_gib": round(memory / 2**30, 1) if memory else None, "bf16_units": None})
    return found


def _ray() -> dict:
    """Whether a local Ray instance starts (and stops), and how long that took."""
    if _version("ray") is None:
        return {"starts": False, "error": "ray is not installed (pip install -e '.[ray]')"}
    began = time.perf_counter()
    try:
        import ray

        ray.init(include_dashboard=False, log_to_driver=False, logging_level="ERROR", num_cpus=1)
        resources = ray.cluster_resources()
        ray.shutdown()
    except Exception as exc:  # noqa: BLE001 - the answer is whether it starts
        return {"starts": False, "error": f"{type(exc).__name__}: {exc}", "seconds": round(time.perf_counter() - began, 1)}
    return {"starts": True, "seconds": round(time.perf_counter() - began, 1), "cpus": resources.get("CPU")}


def doctor(ray: bool = False) -> dict:
    began = time.perf_counter()
    import interp

    problems: list[str] = []
    out = {
        "interp": {"version": _version("interp"), "path": os.path.dirname(interp.__file__)},
        "python": {"version": platform.python_version(), "executable": sys.executable,
                   "platform": platform.platform()},
    }
    import torch

    out["torch"] = {"version": torch.__version__, "threads": torch.get_num_threads(),
                    "interop_threads": torch.get_num_interop_threads(), "cuda_build": torch.version.cuda,
                    "omp_num_threads": os.environ.get("OMP_NUM_THREADS")}
    out["transformer_lens"] = {"version": _version("transformer-lens"), "model_class": _model_class(problems)}
    out["devices"] = _devices()
    out["extras"] = {package: _version(package) for package in EXTRAS}
    if ray:
        out["ray"] = _ray()
        if not out["ray"]["starts"]:  # asked for and not working: a problem, in the JSON as in the exit status
            problems.append(f"ray does not start: {out['ray']['error']}")
    from interp.errors import InterpError
    from interp.tracking import check_wandb_env

    try:
        check_wandb_env()
    except InterpError as exc:
        problems.append(str(exc))
    out["problems"] = problems
    out["seconds"] = round(time.perf_counter() - began, 2)
    return out


def as_lines(found: dict) -> list[str]:
    torch, tl = found["torch"], found["transformer_lens"]
    lines = [("interp", f"{found['interp']['version']} ({found['interp']['path']})"),
             ("python", f"{found['python']['version']} ({found['python']['executable']}; {found['python']['platform']})"),
             ("torch", f"{torch['version']}, {torch['threads']} threads ({torch['interop_threads']} inter-op"
                       + (f", OMP_NUM_THREADS={torch['omp_num_threads']}" if torch["omp_num_threads"] else "")
                       + f"), CUDA build {torch['cuda_build'] or 'none'}"),
             ("transformer_lens", f"{tl['version'] or 'not installed'}: {tl['model_class'] or 'unsupported'}")]
    for d in found["devices"]:
        if d["device"] == "cpu":
            units = "bfloat16 units" if d["bf16_units"] else "no bfloat16 units (bf16 would be emulated)"
            text = f"{d['cores']} cores, {d['capability']}, {units}; flags {', '.join(d['cpu_flags']) or 'none listed'}"
        else:
            text = ", ".join(str(x) for x in (d.get("name"), d.get("memory_gib") and f"{d['memory_gib']} GiB",
                                              d.get("capability") and f"capability {d['capability']}",
                                              d.get("bf16_units") and "bfloat16 units") if x)
        lines.append((d["device"], text))
    lines.append(("extras", ", ".join(f"{p} {v}" if v else f"{p} - (pip install -e '.[{EXTRAS[p]}]')"
                                      for p, v in found["extras"].items())))
    if "ray" in found:
        r = found["ray"]
        lines.append(("ray", f"a local instance started and stopped in {r['seconds']} s" if r["starts"]
                      else f"does not start: {r['error']}"))
    lines += [("problem", p) for p in found["problems"]]
    width = max(len(k) for k, _ in lines)
    return [f"{k:<{width}}  {v}" for k, v in lines]


def cmd_doctor(args: argparse.Namespace) -> int:
    found = doctor(ray=args.ray)
    print(json.dumps(found, indent=2) if args.json else "\n".join(as_lines(found)))
    return 1 if found["problems"] else 0


def add_parsers(sub) -> None:
    p = sub.add_parser("doctor", help="what this machine gives interp: versions, devices, extras (for a bug report)",
                       description=__doc__.split("\n\n")[1].replace("\n", " "))
    p.add_argument("--json", action="store_true", help="the same as JSON")
    p.add_argument("--ray", action="store_true", help="also start a local Ray instance and stop it")
    p.set_defaults(func=cmd_doctor)
