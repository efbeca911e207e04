"""The optimizer-complete states of a run: its resume state and the states kept beside checkpoints.

A state holds the float32 parameters, AdamW's moments and step counter, and the RNG streams
(`interp.checkpoints.ResumeState`); with it a run continues bit for bit. `resume.safetensors`
holds the latest one (overwritten at each checkpoint); `--save-optimizer` also keeps one per
checkpoint in `states/`, listed in the manifest entry of its step with its SHA-256, which forks
start from (`interp.replay`). Every state records the run it belongs to (spec hash, seed,
step and the hash of its checkpoint) and is refused, naming the file, when it does not.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from interp.errors import InterpError
from interp.files import atomic_write_bytes, atomic_write_json, sha256_bytes
from interp.spec import spec_sha256


def identity(run, step: int) -> dict:
    """What a state of `run` at `step` records about the run it belongs to."""
    entry = run.manifest().get(step)
    if entry is None:
        raise InterpError(f"{run.path}: no checkpoint at step {step}; a state follows its checkpoint")
    return {"spec_sha256": spec_sha256(run.info["spec"], ignore_steps=True), "seed": run.spec.seed,
            "step": step, "checkpoint_sha256": entry["sha256"]}


def load_resume(run):
    """The resume state, checked to belong to `run`, or None when the run has none and nothing saved
    past step 0 (training starts at step 0 and saves step 0 again, identically). Refused, naming the
    file: a missing resume state once later checkpoints exist, a damaged one, one of another run (its
    spec hash, seed or checkpoint hash differ) or without an identity whose weights are not the run's
    checkpoint (an older interp's), a missing or damaged checkpoint at its step, and a metrics log
    that is missing, unreadable or lacks that step."""
    from interp.checkpoints import read_resume
    from interp.run_layout import METRICS_FILE, RESUME_FILE

    path, metrics = run.path / RESUME_FILE, run.path / METRICS_FILE
    manifest = run.manifest()
    rows = run.metric_rows()
    if not path.exists():
        if any(step > 0 for step in manifest):
            raise InterpError(f"{path} is missing, but the run has checkpoints up to step {max(manifest)}: it "
                              f"cannot be continued (starting over would overwrite them); train again into a new folder")
        return None
    if not metrics.exists():
        raise InterpError(f"{metrics} is missing, but the run has checkpoints up to step {max(manifest, default=0)}: "
                          f"resuming would lose its history; restore the file or train again into a new folder")
    state = read_resume(path)
    check_state(run, state, path, manifest)
    if not any(row["step"] == state.step for row in rows):
        raise InterpError(f"{metrics} has no row for step {state.step}, where {path} continues: "
                          f"the metrics log was truncated or replaced")
    return state


def check_state(run, state, path: Path, manifest: dict[int, dict]) -> None:
    """Refuse a state that does not belong to `run` (module docstring), naming `path`."""
    from interp.checkpoints import weights_match
    from interp.run_layout import MANIFEST_FILE, RUN_FILE

    ident, run_file, listed = state.identity, run.path / RUN_FILE, run.path / MANIFEST_FILE
    if ident is not None and ident.get("step") != state.step:
        raise InterpError(f"{path} is inconsistent: its identity says step {ident.get('step')!r}, its state "
                          f"step {state.step}")
    if state.step not in manifest:
        raise InterpError(f"{path} continues from step {state.step}, which {listed} does not list")
    entry = manifest[state.step]
    checkpoint = run.path / entry["file"]
    try:
        data = checkpoint.read_bytes()
    except FileNotFoundError:
        raise InterpError(f"{checkpoint} is missing: it is the checkpoint at step {state.step}, "
                          f"from which {path} continues") from None
    if sha256_bytes(data) != entry["sha256"]:
        raise InterpError(f"{checkpoint} is corrupt or truncated: its SHA-256 does not match {listed}; it is "
                          f"the checkpoint at step {state.step}, from which {path} continues")
    if ident is None:  # an older interp's state: it belongs here if its weights are this run's checkpoint
        if not weights_match(state.params, data):
            raise InterpError(f"{path} belongs to another run: it records no run identity (an older interp "
                              f"wrote it) and its weights differ from {checkpoint}")
        return
    if ident.get("seed") != run.spec.seed:
        raise InterpError(f"{path} belongs to another run: it was saved with seed {ident.get('seed')!r}, "
                          f"{run_file} says seed {run.spec.seed}")
    if ident.get("spec_sha256") != spec_sha256(run.info["spec"], ignore_steps=True):
        raise InterpError(f"{path} belongs to another run: its spec hash differs from {run_file}'s spec "
                          f"(train.steps aside)")
    if ident.get("checkpoint_sha256") != entry["sha256"]:
        raise InterpError(f"{path} belongs to another run: its step {state.step} checkpoint hash differs "
                          f"from the one {listed} lists")


def save_state(run, step: int, model, optimizer, generators: dict, extra: dict) -> None:
    """Write the state at `step` to states/ and list it in the manifest entry of that step."""
    from interp.checkpoints import resume_bytes
    from interp.run_layout import FORMAT, MANIFEST_FILE, STATE_DIR

    data = resume_bytes(step, model, optimizer, generators, extra, identity(run, step))
    rel = f"{STATE_DIR}/step_{step:07d}.safetensors"
    atomic_write_bytes(run.path / rel, data)
    manifest = {str(s): e for s, e in run.manifest().items()}
    manifest[str(step)] = {**manifest[str(step)], "state": {"file": rel, "sha256": sha256_bytes(data),
                                                             "bytes": len(data)}}
    atomic_write_json(run.path / MANIFEST_FILE, {"format": FORMAT, "checkpoints": manifest})


def kept_steps(run) -> list[int]:
    """The steps at which `run` keeps a state (`--save-optimizer`), sorted."""
    return sorted(step for step, entry in run.manifest().items() if isinstance(entry.get("state"), dict))


def kept_state(run, step: int):
    """The state kept at `step`, verified against the manifest's hash and the run's identity."""
    from interp.checkpoints import read_resume

    manifest = run.manifest()
    entry = (manifest.get(step) or {}).get("state")
    if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
        raise InterpError(f"{run.path} keeps no optimizer state at step {step}")
    path = run.path / entry["file"]
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InterpError(f"{path} is missing: the manifest lists it as the state at step {step}") from None
    if sha256_bytes(data) != entry["sha256"]:
        raise InterpError(f"{path} is corrupt or truncated: its SHA-256 does not match the manifest")
    state = read_resume(path)
    if state.step != step:
        raise InterpError(f"{path} holds the state at step {state.step}, not {step}")
    check_state(run, state, path, manifest)
    return state


def _steps_to_keep(keep, who: str = "drop_states") -> list[int]:
    """`keep` as sorted steps: one step (an int) or an iterable of whole numbers (20.0 is step 20). A string
    is refused, not read: iterating "40" would keep steps 4 and 0 and delete the state at 40."""
    import numbers

    allowed = f"keep must be a step or a list of steps (whole numbers), e.g. {who}(run, [500])"
    if isinstance(keep, numbers.Integral) and not isinstance(keep, bool):
        keep = [keep]
    if isinstance(keep, (str, bytes)) or not hasattr(keep, "__iter__"):
        what = f"{keep!r} is a string" if isinstance(keep, (str, bytes)) else f"got {keep!r}"
        raise InterpError(f"{who}: {allowed}; {what}")
    steps = []
    for step in list(keep):
        whole = (isinstance(step, numbers.Integral) or (isinstance(step, numbers.Real) and float(step).is_integer()))
        if isinstance(step, bool) or not whole:
            what = f"{step!r} is a string" if isinstance(step, (str, bytes)) else f"{step!r} is not a whole number"
            raise InterpError(f"{who}: {allowed}; {what}")
        steps.append(int(step))
    return sorted(set(steps))


@contextmanager
def _as_writer(run):
    """Hold `run`'s writer lock while its files are changed (kept when the caller already holds it): a folder another
    live process writes (`interp train`, a fork being made) is refused with its holder (`interp.files.LockHeld`),
    before anything is read or touched."""
    held = run.is_writer
    run.acquire()
    try:
        yield
    finally:
        if not held:
            run.release()


def drop_states(run, keep) -> list[int]:
    """Delete the states kept at every step but those in `keep` (one step, or an iterable of steps that keep
    one; a string is refused), and return the steps dropped: a run trained with --save-optimizer keeps about
    three times its float32 weights per checkpoint, and most uses need a few (the shipped demo keeps the one
    at tau/2, where its forks start). `keep` is checked before anything is touched, and the run's writer lock is
    held throughout (a run another process writes is refused, naming it); the manifest then stops listing the
    dropped states first, so an interruption leaves at worst unlisted files."""
    keep = _steps_to_keep(keep)
    with _as_writer(run):
        return _drop_states(run, keep)


def _drop_states(run, keep: list[int]) -> list[int]:
    from interp.run_layout import FORMAT, MANIFEST_FILE

    kept = kept_steps(run)
    missing = [step for step in keep if step not in kept]
    if missing:
        raise InterpError(f"{run.path} keeps no state at step {', '.join(map(str, missing))}; it keeps states at "
                          f"{', '.join(map(str, kept)) or 'no step'}")
    manifest = {str(s): e for s, e in run.manifest().items()}
    dropped = [step for step in kept if step not in keep]
    files = [run.path / manifest[str(step)]["state"]["file"] for step in dropped]
    for step in dropped:
        manifest[str(step)] = {k: v for k, v in manifest[str(step)].items() if k != "state"}
    atomic_write_json(run.path / MANIFEST_FILE, {"format": FORMAT, "checkpoints": manifest})
    for path in files:
        path.unlink(missing_ok=True)
    return dropped


def drop_checkpoints(run, keep) -> list[int]:
    """Delete the saved checkpoints at every step but those in `keep` (one step, or an iterable of saved steps;
    a string is refused) and return the steps dropped. The last step and every step that keeps a state are
    always kept (a run resumes, and its forks start, there). How the shipped demo is thinned to its size (its
    onsets read at 50 steps, the transition at 100): `keep` is checked before anything is touched, and the run's
    writer lock is held throughout (a run another process writes is refused, naming it); the manifest then stops
    listing the dropped checkpoints first, so an interruption leaves at worst unlisted files. The
    run's analysis cache is removed with them: an entry is keyed by its own checkpoint, and some analyses
    (trajectory) read the one saved before, which changes."""
    keep = _steps_to_keep(keep, "drop_checkpoints")
    with _as_writer(run):
        return _drop_checkpoints(run, keep)


def _drop_checkpoints(run, keep: list[int]) -> list[int]:
    import shutil

    from interp.run_layout import CACHE_DIR, FORMAT, MANIFEST_FILE

    manifest = run.manifest()
    unsaved = [step for step in keep if step not in manifest]
    if unsaved:
        raise InterpError(f"drop_checkpoints: {run.path} saved no checkpoint at step {', '.join(map(str, unsaved))}; "
                          f"it saved {', '.join(map(str, sorted(manifest))) or 'none'}")
    keep = set(keep) | set(kept_steps(run)) | ({max(manifest)} if manifest else set())
    dropped = [step for step in sorted(manifest) if step not in keep]
    files = [run.path / manifest[step]["file"] for step in dropped]
    remaining = {str(s): e for s, e in sorted(manifest.items()) if s in keep}
    atomic_write_json(run.path / MANIFEST_FILE, {"format": FORMAT, "checkpoints": remaining})
    for path in files:
        path.unlink(missing_ok=True)
    if dropped:
        shutil.rmtree(run.path / CACHE_DIR, ignore_errors=True)
    return dropped
