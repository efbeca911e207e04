"""The environment of each training segment of a run: what a continuation must match to be bit-exact.

Every invocation that trains a run (`interp train`, `--resume`, a fork, a family's or a sweep's job) appends a
segment to run.json's `segments`: the step it started from, the package versions, the torch threads, the device
and the CPU's instruction set as torch reports it (`torch.backends.cpu.get_cpu_capability()`: AVX2, AVX512, ...).
A float32 CPU run is bit-exact only where these agree: another TransformerLens or torch, thread count or
instruction set rounds differently, and the plateau's escape amplifies the last bits. A resume, or a fork's first
training, whose environment differs from the segment that produced its starting state (its own last one; a fork's
parent's at the fork step) says so in one line: its checkpoints are valid, but it is not the continuation the
parent's machine would have made. A segment from a step on replaces those from that step on (a resume from an
earlier checkpoint rewrites them). A run made before segments were recorded reads as one segment per training
session, from its recorded versions, threads and device, with its CPU capability unknown (never compared).
Torch is imported only to describe the current environment.
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
from importlib import metadata
from pathlib import Path

from interp.errors import InterpError
from interp.files import atomic_write_json
from interp.run_layout import RUN_FILE

SEGMENTS = "segments"
PACKAGES = ("interp", "torch", "transformer-lens", "numpy", "safetensors", "pandas")
COMPARED = ("torch", "transformer-lens", "interp")  # the versions that change a training step's floats


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def current(from_step: int, device: str, threads: int) -> dict:
    """This process's segment, starting at `from_step`, on `device` with `threads` torch threads."""
    import torch

    kind = torch.device(device).type
    out = {"from_step": int(from_step), "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "versions": package_versions(), "threads": int(threads), "device": kind,
           "cpu_capability": torch.backends.cpu.get_cpu_capability()}
    if kind == "cuda":
        out["device_name"] = torch.cuda.get_device_name(torch.device(device))
    return out


def segments(info: dict) -> list[dict]:
    """run.json's segments; for a run made before they were recorded, one per training session (its `training`
    entries, or one from step 0) with the run's recorded versions and the CPU capability unknown (None)."""
    if isinstance(info.get(SEGMENTS), list):
        return [dict(s) for s in info[SEGMENTS] if isinstance(s, dict)]
    if "imported" in info and not info.get("training"):  # trained elsewhere: no segment of interp's training
        return []
    sessions = [s for s in info.get("training") or [] if isinstance(s, dict)] or [{"from_step": 0}]
    return [{"from_step": s.get("from_step", 0), "versions": dict(info.get("versions") or {}), "threads": s.get("threads"),
             "device": s.get("device"), "cpu_capability": None} for s in sessions]


def covering(segs: list[dict], step: int) -> dict | None:
    """The segment that produced `step`: the last one starting at or before it."""
    found = [s for s in segs if isinstance(s.get("from_step"), int) and s["from_step"] <= step]
    return max(found, key=lambda s: s["from_step"]) if found else None


def differences(old: dict, new: dict) -> list[str]:
    """What differs between two segments' environments ("torch 2.13.0 -> 2.14.0", "CPU AVX2 -> AVX512"); a value
    one of them does not record is not compared."""
    out = []
    before, after = old.get("versions") or {}, new.get("versions") or {}
    for name in COMPARED:
        if before.get(name) and after.get(name) and before[name] != after[name]:
            out.append(f"{name} {before[name]} -> {after[name]}")
    for key, label in (("threads", "threads"), ("device", "device"), ("device_name", "GPU"),
                       ("cpu_capability", "CPU capability")):
        if old.get(key) is not None and new.get(key) is not None and old[key] != new[key]:
            out.append(f"{label} {old[key]} -> {new[key]}")
    return out


def _start_segment(run, start: int) -> tuple[dict | None, str]:
    """The segment that produced the state `run` continues from at `start`, and whose it is."""
    own = covering(segments(run.info), start) if isinstance(run.info.get(SEGMENTS), list) else None
    if own is not None:
        return own, "its last segment"
    block = run.fork
    if block is not None and start == block.get("parent_step"):  # a fork's first training: its parent's state
        parent = _parent_info(run)
        if parent is None:
            return None, ""
        return covering(segments(parent), start), f"its parent's (at step {start})"
    return covering(segments(run.info), start), "its last segment"


def continuation_note(run, start: int, segment: dict) -> str | None:
    """One line when `run`, continued from `start` in `segment`'s environment, is not its bit-exact continuation."""
    block = run.fork
    if block is not None and start == block.get("parent_step"):
        imported = (_parent_info(run) or {}).get("imported")
        if isinstance(imported, dict):
            return (f"interp: note: {run.path} continues a run trained elsewhere ({imported.get('format')}, imported "
                    f"from {imported.get('path')}) from step {start}: with interp's training step and batch stream, "
                    f"not the source's, so not its exact continuation")
    base, whose = _start_segment(run, start)
    diffs = differences(base, segment) if base is not None else []
    if not diffs:
        return None
    return (f"interp: note: {run.path} continues from step {start} in another environment than {whose} "
            f"({'; '.join(diffs)}): not bit-exact (its checkpoints are valid, but where the earlier steps were "
            f"trained the same command gives other weights)")


def record(run, segment: dict) -> None:
    """Append `segment` to run.json (the segments from its step on replaced), with the hash that covers them,
    atomically; the writer only. A fork's first segment follows its parent's that made the state it starts from."""
    run._require_writer()
    if SEGMENTS not in run.info and run.fork is not None:
        earlier = _parent_segments(run, segment["from_step"])
    else:
        earlier = segments(run.info)
    kept = [s for s in earlier if s.get("from_step", 0) < segment["from_step"]]
    both = [*kept, segment]
    run.info = {**run.info, SEGMENTS: both, SEGMENTS_HASH: segments_sha256(both)}
    atomic_write_json(run.path / RUN_FILE, run.info)


def _parent_segments(run, before: int) -> list[dict]:
    """The parent's segments that trained the steps before a fork's first (read from its run.json; none when the
    parent cannot be read), marked as the parent's."""
    info = _parent_info(run)
    if info is None:
        return []
    return [{**s, "parent": True} for s in segments(info) if s.get("from_step", 0) < before]


def _parent_info(run) -> dict | None:
    """A fork's parent's run.json as read (None when it cannot be read): only its segments and `imported` block
    are used here, so the parent is not opened as a Run (no circle with interp.runs)."""
    try:
        info = json.loads((Path(run.fork["parent"]) / RUN_FILE).read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info if isinstance(info, dict) else None


SEGMENTS_HASH = "segments_sha256"


def segments_sha256(segs) -> str:
    """The SHA-256 run.json's `segments_sha256` holds: a segment edited by hand (threads, a step, its CPU) is caught
    by the run's integrity check, as an edited spec is."""
    from interp.run_layout import fork_sha256

    return fork_sha256({SEGMENTS: segs})


def check_segments(info: dict, where: str) -> None:
    """Refuse run.json's segments when they do not match their hash, or (a run made before the hash) are not
    segments: a list of objects whose from_step is a whole number >= 0, rising, and whose threads is one >= 1 or
    unrecorded; one line naming the file."""
    if SEGMENTS not in info:
        return
    segs = info[SEGMENTS]
    if SEGMENTS_HASH in info and info[SEGMENTS_HASH] != segments_sha256(segs):
        raise InterpError(f"{where}: its training segments do not match the hash they were written with (edited by "
                          f"hand?); the environment a run was trained in cannot be changed")
    ok = isinstance(segs, list) and all(isinstance(s, dict) for s in segs)
    steps = [s.get("from_step") for s in segs] if ok else []
    ok = ok and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in steps) and steps == sorted(steps)
    threads = [s.get("threads") for s in segs] if ok else []
    ok = ok and all(t is None or (isinstance(t, int) and not isinstance(t, bool) and t >= 1) for t in threads)
    if not ok:
        raise InterpError(f"{where}: its training segments are not a list of segments (from_step a rising whole "
                          f"number >= 0, threads a whole number >= 1): edited by hand?")


def describe(segment: dict) -> str:
    """A segment in one line, for `interp show`."""
    v = segment.get("versions") or {}
    versions = ", ".join(f"{name} {v[name]}" for name in COMPARED if v.get(name))
    cpu = segment.get("cpu_capability") or "CPU capability not recorded"
    where = segment.get("device") or "device not recorded"
    if segment.get("device_name"):
        where += f" ({segment['device_name']})"
    threads = segment.get("threads")
    whose = " (the parent's)" if segment.get("parent") else ""
    return (f"from step {segment.get('from_step', 0)}{whose}: {versions or 'versions not recorded'}; "
            f"{threads if threads is not None else '?'} threads on {where}, {cpu}")


def recorded_threads(info: dict) -> int | None:
    """The torch threads the run's last training segment ran with (None: not recorded): what a resume uses by
    default, so that it continues bit-exactly."""
    segs = segments(info)
    threads = segs[-1].get("threads") if segs else None
    return threads if isinstance(threads, int) and not isinstance(threads, bool) and threads > 0 else None
