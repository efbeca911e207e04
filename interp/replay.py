"""The optimizer-complete state of a run at any saved step: kept, or replayed and verified.

A fork starts from the parameters, AdamW's moments and step counter, and the batch RNG at a
saved step (`interp.checkpoints.ResumeState`). A run trained with `--save-optimizer` keeps one
beside every checkpoint (`interp.run_states`). Otherwise the state is *replayed*: CPU training
is bit-for-bit deterministic at a given thread count, so the state at step s is recomputed from
the nearest earlier state (a kept one, the resume state, or the initialisation at step 0) with
the same training step (`interp.steps.MinibatchStep`), and the replayed parameters must equal
the saved checkpoint (after the same cast, for float16 / bfloat16 checkpoints). Refused with a
clear error: a run trained on a GPU, or with another thread count, or by another session whose
settings this one cannot match, and a replay that does not reproduce the checkpoint (an edited
checkpoint, another machine or torch build).

A replayed state can be kept in the run's cache (`state_at(..., cache=True)`, what the `updates` analysis
asks): `cache/replayed/step_NNNNNNN.safetensors`, safetensors as every state (never pickle), written
atomically, carrying its own content hash and the identity of its run (spec hash, seed, step and the
checkpoint's SHA-256 as the manifest lists it). It stands in for a replay that would be made (the refusals
above still apply) only while that identity holds and it was replayed from the same start: a checkpoint
replaced at its step (another hash), a damaged or edited file, is replayed again and the file rewritten.
"""

from __future__ import annotations

from pathlib import Path

import torch
from tqdm.auto import tqdm

from interp.errors import InterpError


def sessions_upto(run, step: int) -> list[dict]:
    """The training sessions (run.json "training") that produced steps 1..step."""
    sessions = run.info.get("training") or []
    return [s for s in sessions if s.get("from_step", 0) < step]


def check_replayable(run, start: int, step: int) -> None:
    """Refuse a replay from `start` to `step` this process cannot reproduce, before computing it."""
    if getattr(run, "imported", None) is not None:  # trained elsewhere: only the states its source saved exist
        from interp.run_states import kept_steps

        kept = kept_steps(run)
        have = (f"it keeps optimizer states at steps {', '.join(map(str, kept))} (where its source saved them)"
                if kept else "its source saved no optimizer state, so it has none")
        raise InterpError(f"{run.path} was imported ({run.imported.get('format')}): interp did not train it, so its "
                          f"optimizer state at step {step} cannot be replayed; {have}")
    if run.fork is not None:  # a fork of a fork starts from a state the fork kept (docs/forks.md, "Relapse")
        from interp.run_states import kept_steps

        kept = kept_steps(run)
        have = (f"it keeps states at steps {', '.join(map(str, kept))}" if kept
                else "it keeps none: it was made without --save-optimizer")
        raise InterpError(f"{run.path} is itself a fork with no state kept at step {step} ({have}), and a fork's "
                          f"states cannot be replayed: fork it at a kept step or at its last checkpoint (its resume "
                          f"state), or make the fork again with --save-optimizer to keep a state at every checkpoint")
    threads = torch.get_num_threads()
    sessions = sessions_upto(run, step)
    # session i trained the steps after its from_step up to the next session's from_step
    relevant = [s for i, s in enumerate(sessions)
                if i == len(sessions) - 1 or sessions[i + 1].get("from_step", 0) > start]
    for s in relevant:
        if s.get("device", "cpu") != "cpu":
            raise InterpError(f"{run.path} was trained on {s['device']} (steps from {s.get('from_step', 0)}): a GPU "
                              f"run cannot be replayed bit for bit; a fork of it needs a state kept at step {step} "
                              f"(train with --save-optimizer)")
        if s.get("threads") is not None and s["threads"] != threads:
            raise InterpError(f"{run.path} was trained with {s['threads']} CPU threads (steps from "
                              f"{s.get('from_step', 0)}), this process uses {threads}: a replay is bit-exact only "
                              f"at the same thread count; use --threads {s['threads']} (torch.set_num_threads)")
        if s.get("precision", "float32") != run.spec.train.precision:
            raise InterpError(f"{run.path}: a training session ran with precision {s.get('precision', 'float32')}, "
                              f"its spec says {run.spec.train.precision}: it cannot be replayed")
        if s.get("compile", False) != run.spec.train.compile:
            raise InterpError(f"{run.path}: a training session ran with compile={s.get('compile')}, its spec says "
                              f"{run.spec.train.compile}: it cannot be replayed")


def starting_point(run, step: int):
    """The latest state before `step` to replay from: (state or None for the initialisation, source)."""
    from interp.run_states import kept_state, kept_steps

    kept = [s for s in kept_steps(run) if s < step]
    best, source = None, "initialisation"
    if kept:
        best, source = kept_state(run, kept[-1]), "kept"
    try:
        resume = run.load_resume()
    except InterpError:
        resume = None
    if resume is not None and resume.step < step and (best is None or resume.step > best.step):
        best, source = resume, "resume"
    return best, source


REPLAYED_DIR = "replayed"  # under the run's cache folder: the replayed states kept


def state_at(run, step: int, progress: bool = False, cache: bool = False) -> tuple:
    """(state at `step`, how it was had: "kept", "resume" or "replayed from N (...)") for a saved step. With
    `cache`, a replay that would be made (and is not refused) is read from the run's cache instead when one kept
    there still belongs to the run and its checkpoint and was replayed from the same start (module docstring),
    and a new one is kept there."""
    from interp.run_states import kept_state, kept_steps

    step = run.resolve_step(step)
    if step in kept_steps(run):
        return kept_state(run, step), "kept"
    try:
        resume = run.load_resume()
    except InterpError:
        resume = None
    if resume is not None and resume.step == step:
        return resume, "resume"
    start_state, source = starting_point(run, step)
    start = 0 if start_state is None else start_state.step
    check_replayable(run, start, step)  # refused as before, kept or not: the cache only saves the computation
    how = f"replayed from step {start} ({source})"
    found = cached_state(run, step) if cache else None
    if found is not None and found[1] == how:
        return found
    state = replay(run, start_state, step, progress)
    verify(run, state, step, start)
    if cache:
        keep_state(run, state, how)
    return state, how


def cached_path(run, step: int) -> Path:
    from interp.run_layout import CACHE_DIR

    return run.path / CACHE_DIR / REPLAYED_DIR / f"step_{step:07d}.safetensors"


def cached_state(run, step: int) -> tuple | None:
    """(state, how) of a replayed state kept in the run's cache at `step`, or None: none kept, or one that no
    longer belongs (another checkpoint hash at its step, another spec or seed), or one that cannot be read
    (damaged, edited: its content hash fails). What is not used is replayed again and rewritten."""
    from interp.checkpoints import read_resume
    from interp.run_states import identity

    path = cached_path(run, step)
    if not path.is_file():
        return None
    try:
        state = read_resume(path)
        if state.identity != identity(run, step) or state.step != step or "how" not in state.extra:
            return None
    except (InterpError, OSError, ValueError, TypeError):
        return None
    how = state.extra.pop("how")
    return state, how


def keep_state(run, state, how: str) -> None:
    """Write a replayed state to the run's cache (atomically; the tensors and layout of a resume state, `how`
    in its extra). A cache that cannot be written (a read-only run, `cache` a file) is skipped: the state was
    had, only not kept."""
    from interp.checkpoints import state_bytes
    from interp.files import atomic_write_bytes
    from interp.run_states import identity

    data = state_bytes(state.step, state.params, state.optimizer, state.generators, {**state.extra, "how": how},
                       identity(run, state.step))
    try:
        atomic_write_bytes(cached_path(run, state.step), data)
    except OSError:
        return


def replay(run, start_state, step: int, progress: bool = False):
    """Train `run` from `start_state` (None: its initialisation) to `step` in memory, as training
    did, and return the ResumeState there. Nothing is written."""
    from interp.checkpoints import ResumeState, load_params
    from interp.model import build_model, native_optimizer_state, tl_optimizer_state, tl_params
    from interp.seeding import torch_generator
    from interp.spec import VOCAB_SIZE
    from interp.precision import training_forward
    from interp.steps import MinibatchStep, build_optimizer, compiled

    spec, task = run.spec, run.task
    tspec = spec.train
    model = build_model(spec.model, task.layout.length, VOCAB_SIZE, seed=spec.seed)
    batches = torch_generator(spec.seed, "batches")
    optimizer = build_optimizer(model, tspec)
    start = 0
    if start_state is not None:
        load_params(model, start_state.params)
        optimizer.load_state_dict(native_optimizer_state(model, start_state.optimizer))
        batches.set_state(start_state.generators["batches"])
        start = start_state.step
    forward = training_forward(compiled(model) if tspec.compile else model, tspec.precision, "cpu")
    stepper = MinibatchStep(forward, model, optimizer, task.train_tokens, task.layout.loss_pos, task.n_train, batches, tspec,
                            "cpu")
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    model.train()
    try:
        for t in tqdm(range(start + 1, step + 1), disable=not progress, desc=f"replaying {run.name} to step {step}",
                      unit="step", dynamic_ncols=True):
            lr = tspec.lr_at(t)
            for group in optimizer.param_groups:
                group["lr"] = lr
            loss = stepper(t)
            if not bool(torch.isfinite(loss)):
                raise InterpError(f"replaying {run.path}: the training loss became {float(loss)} at step {t}, which "
                                  f"training never saw: the replay does not reproduce the run")
    finally:
        torch.use_deterministic_algorithms(was)
    params = {n: p.detach().clone() for n, p in tl_params(model).items()}  # checkpoint layout on either TL
    return ResumeState(step, params, tl_optimizer_state(model, optimizer.state_dict()), {"batches": batches.get_state()},
                       {"replayed_from": start}, None)


def verify(run, state, step: int, start: int) -> None:
    """Refuse a replayed state whose parameters, cast to the checkpoint's dtype, are not the checkpoint's."""
    saved = run.state_dict(step)
    if saved.keys() != state.params.keys():
        raise InterpError(f"replaying {run.path} to step {step}: the checkpoint holds other parameters")
    differ, total, worst = 0, 0, 0.0
    for name, tensor in saved.items():
        mine = state.params[name].to(tensor.dtype)
        bad = mine != tensor
        differ += int(bad.sum())
        total += tensor.numel()
        if bad.any():
            worst = max(worst, float((mine.float() - tensor.float()).abs().max()))
    if differ:
        recorded = sessions_upto(run, step)
        threads = recorded[-1].get("threads") if recorded else None
        why = ("the checkpoint was edited, or the run was trained by another torch build or machine"
               if threads is not None else
               "the checkpoint was edited, or the run was trained with another thread count, torch build or machine "
               "(its run.json does not record its threads)")
        raise InterpError(f"replaying {run.path} from step {start} to step {step} does not reproduce its checkpoint "
                          f"there ({differ} of {total} values differ, by up to {worst:.3g}): {why}; a fork needs a "
                          f"state kept at step {step} (train with --save-optimizer)")

