"""One run made elsewhere becomes an interp run folder (`interp import`: `interp.collections.imports`), written
through the run's own writers (checkpoints as safetensors, optimizer-complete states, the metrics log), atomically as a whole.

The source folder is only read: nothing is written, moved or locked there. The run is made in a temporary sibling
of RUN and renamed into place only once complete, so a refusal or a failure leaves no half-written output. Order:
the source's small files are read and mapped (`interp.imports.synass`, `interp.imports.plain`), the last checkpoint
is checked against the regenerated data (`interp.imports.convert.data_check`: a wrong regeneration refuses the
import, naming both numbers), then every checkpoint is converted, every optimizer state kept, the source's history
kept as it was written (source_history.jsonl), and the metrics log rebuilt from the checkpoints
(`interp.imports.evaluate`). run.json records where the run came from: the format, the path, the SHA-256 of every
source file read and the config as its author wrote it. Importing the same source again changes nothing; a changed
source is refused unless --replace.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from interp.errors import InterpError
from interp.files import atomic_write_bytes
from interp.imports.source import FORMATS, Source

from interp.run_layout import HISTORY_FILE
# the columns of interp's log that only its own training records: an imported run has them under the source's names
# where its source logged them (`Source.columns`), and otherwise not at all
NOT_RECORDED = ("grad_norm", "grad_sq_mean", "dissipation", "eff_step.*", "v_mean.*")
FORMAT = 1


@dataclass
class ImportResult:
    """What an import did: the run (or sweep) folder, its format, the steps and states it holds, the data check and
    the notes on what is not exact; `unchanged` when it was already imported from the same files."""

    path: Path
    format: str
    steps: list[int] = field(default_factory=list)
    states: list[int] = field(default_factory=list)
    data_check: dict | None = None
    notes: list[str] = field(default_factory=list)
    unchanged: bool = False
    runs: list["ImportResult"] = field(default_factory=list)

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["path"] = str(self.path)
        out["runs"] = [r.to_dict() for r in self.runs]
        return out


def file_sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_source(src: Path, fmt: str, spec_file=None, version=None, ignore=()) -> Source:
    if fmt == "synass-main":
        from interp.imports.synass import read_main

        return read_main(src, version, ignore)
    if fmt == "synass-eta":
        from interp.imports.synass import read_eta

        return read_eta(src, version, ignore)
    if fmt == "tl-series":
        from interp.imports.plain import read_plain

        return read_plain(src, spec_file, version, ignore)
    raise InterpError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")


def check_places(src: Path, out: Path) -> None:
    a, b = Path(os.path.abspath(src)), Path(os.path.abspath(out))
    if a == b or a in b.parents:
        raise InterpError(f"--out {out} lies inside the source {src}: the source folder is only read, never written")
    if b in a.parents:
        raise InterpError(f"the source {src} lies inside --out {out}")
    if str(out).strip() in ("", "."):
        raise InterpError("--out must be a non-empty path")


def _source_hashes(source: Source) -> dict[str, str]:
    files = list(source.files) + list(source.checkpoints.values()) + list(source.optimizers.values())
    return {os.path.relpath(p, source.path): file_sha256(p) for p in sorted(set(files))}


def _existing(out: Path, source: Source, hashes: dict[str, str], replace: bool) -> bool:
    """Whether `out` already holds this import of these very files (then nothing is done); refuses an `out` that
    holds anything else, and a changed source unless `replace`."""
    from interp.runs import Run

    if not out.exists():
        return False
    if not Run.is_run(out):
        if out.is_dir() and not any(out.iterdir()):
            return False
        raise InterpError(f"{out} exists and is not an imported run; choose another --out")
    run = Run.open(out)
    block = run.imported
    if block is None or block.get("path") != os.path.abspath(source.path) or block.get("format") != source.format:
        raise InterpError(f"{out} already holds another run; choose another --out")
    if block.get("files") == hashes:
        return True
    if not replace:
        changed = sorted(set(hashes.items()) ^ set(block.get("files", {}).items()))
        names = sorted({name for name, _ in changed})
        raise InterpError(f"{source.path} changed since it was imported into {out} ({len(names)} files differ: "
                          f"{', '.join(names[:3])}{' ...' if len(names) > 3 else ''}); --replace imports it again")
    return False


def _load_params(source: Source, step: int, spec):
    from interp.imports.convert import parameters_of
    from interp.imports.safe_load import load_torch
    from interp.model import tl_param_shapes
    from interp.spec import VOCAB_SIZE

    path = source.checkpoints[step]
    shapes = tl_param_shapes(spec.model, spec.task.sequence_length, VOCAB_SIZE)
    if path.suffix == ".safetensors":
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            obj = load_file(str(path))
        except (SafetensorError, OSError, ValueError) as exc:
            raise InterpError(f"{path} is not a readable safetensors file: {exc}") from None
    else:
        obj = load_torch(path, f"the weights at step {step}")
    return parameters_of(obj, path, shapes, spec.model.context(spec.task.sequence_length))


def with_context(source: Source) -> None:
    """The spec's n_ctx from the first checkpoint's positional embedding (the author's is 32, the sequence 16)."""
    from interp.imports.safe_load import load_torch

    step = min(source.checkpoints)
    path = source.checkpoints[step]
    if path.suffix == ".safetensors":
        from safetensors import safe_open

        try:
            with safe_open(str(path), "pt") as f:
                rows = f.get_slice("pos_embed.W_pos").get_shape()[0] if "pos_embed.W_pos" in f.keys() else None
        except Exception as exc:  # noqa: BLE001 - any unreadable file is one line
            raise InterpError(f"{path} is not a readable safetensors file: {exc}") from None
    else:
        obj = load_torch(path, f"the weights at step {step}")
        w = obj.get("pos_embed.W_pos") if isinstance(obj, dict) else None
        rows = int(w.shape[0]) if hasattr(w, "shape") and len(w.shape) == 2 else None
    if rows is None:
        raise InterpError(f"{path} has no pos_embed.W_pos: not a HookedTransformer with learned positions")
    seq = source.spec.task.sequence_length
    model = source.spec.model
    if model.n_ctx is not None and model.n_ctx != rows:
        raise InterpError(f"{path}: pos_embed.W_pos has {rows} positions, the spec says n_ctx {model.n_ctx}")
    if rows < seq:
        raise InterpError(f"{path}: pos_embed.W_pos has {rows} positions, fewer than the task's {seq}-token sequences")
    if rows != seq:
        source.spec = dataclasses.replace(source.spec, model=dataclasses.replace(model, n_ctx=rows))


def _model(spec, params):
    from interp.checkpoints import load_params
    from interp.model import build_model
    from interp.spec import VOCAB_SIZE

    model = build_model(spec.model, spec.task.sequence_length, VOCAB_SIZE)
    load_params(model, params)
    return model.eval()


def _check_data(source: Source, progress: bool) -> dict:
    from interp.imports.convert import data_check

    last = max(source.checkpoints)
    logged_steps = [s for s in source.logged if s <= last]
    logged = source.logged[max(logged_steps)] if logged_steps else None
    found = data_check(_model(source.spec, _load_params(source, last, source.spec)), source.task, logged, last)
    found["logged_step"] = max(logged_steps) if logged_steps else None
    import math

    no_log = found["logged_loss"] is None and found["logged_accuracy"] is None
    if no_log and found["loss"] > math.log(40) + 0.5:  # worse than a uniform guess on its own supposed training data
        found["verdict"] = "mismatch"
    if found["verdict"] == "mismatch":
        said = (f"the source logged loss {_num(found['logged_loss'])}, accuracy {_num(found['logged_accuracy'])} at step "
                f"{found['logged_step']}" if not no_log else "worse than a uniform guess over the 40 tokens")
        raise InterpError(f"the data regenerated from {source.path} do not fit the run: at step {last} its model scores "
                          f"loss {found['loss']:.4f}, accuracy {found['accuracy']:.4f} on them ({said}; on other data "
                          f"{found['other_loss']:.4f}): a wrong seed, generator version or option? "
                          f"(--generator-version; docs/import.md)")
    if found["verdict"] == "uninformative":
        source.notes.append(f"the data were not verified: at step {last} the model scores its regenerated pairs "
                            f"({found['loss']:.3f} nats) no better than other data ({found['other_loss']:.3f}), as an "
                            f"untrained model does")
    return found


def _num(x) -> str:
    return "-" if x is None else f"{x:.4f}"


def import_one(source: Source, out: Path, replace: bool, progress: bool, hashes: dict | None = None) -> ImportResult:
    from interp.runs import Run

    hashes = _source_hashes(source) if hashes is None else hashes
    if _existing(out, source, hashes, replace):
        run = Run.open(out)
        return ImportResult(out, source.format, run.steps, _kept(run), run.imported.get("data_check"),
                            list(run.imported.get("notes", [])), unchanged=True)
    with_context(source)
    source.spec.validate()
    check = _check_data(source, progress)
    tmp = out.parent / f".{out.name}.importing-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        result = _write(source, tmp, hashes, check, progress)
        if out.exists():  # --replace (or an empty folder): swapped in whole
            backup = out.parent / f".{out.name}.replaced-{os.getpid()}"
            out.rename(backup)
            tmp.rename(out)
            shutil.rmtree(backup)
        else:
            tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    result.path = out
    return result


def _kept(run) -> list[int]:
    from interp.run_states import kept_steps

    return kept_steps(run)


def _block(source: Source, hashes: dict, check: dict) -> dict:
    return {"format": source.format, "path": os.path.abspath(source.path), "files": hashes,
            "config": json.loads(json.dumps(source.config, default=str)), "data": source.data,
            "notes": list(source.notes), "columns": source.columns, "not_recorded": list(NOT_RECORDED),
            "data_check": check, "status": source.status, "import_format": FORMAT,
            "log": "rebuilt" if source.log is None else "carried"}


def _write(source: Source, folder: Path, hashes: dict, check: dict, progress: bool) -> ImportResult:
    from tqdm.auto import tqdm

    from interp.imports.evaluate import rebuild_metrics
    from interp.runs import Run

    spec = source.spec
    notes = source.notes
    run = Run.create(folder, spec, task=source.task if spec.task.source == "tables" else None,
                     imported=_block(source, hashes, check))
    try:
        steps = sorted(source.checkpoints)
        for step in tqdm(steps, desc=f"import {source.path.name}", unit="checkpoint", disable=not progress):
            model = _model(spec, _load_params(source, step, spec))
            run.save_checkpoint(step, model)
            if step in source.optimizers:
                _keep_state(run, source, step, model, notes)
        if source.history:
            text = "".join(json.dumps(row, sort_keys=True) + "\n" for row in source.history)
            atomic_write_bytes(folder / HISTORY_FILE, text.encode())
        if source.log is None:
            rebuild_metrics(run, progress=progress)
        else:  # interp's own log of a run it exported: carried whole, its rows between checkpoints too
            text = "".join(json.dumps(row, sort_keys=True) + "\n" for row in source.log)
            atomic_write_bytes(folder / "metrics.jsonl", text.encode())
        run.write_status("done", last_step=steps[-1], wall_seconds=None, imported=True)
    finally:
        run.release()
    if notes != run.imported.get("notes"):  # notes found while converting the states: recorded with the rest
        _renote(folder, notes)
    return ImportResult(folder, source.format, steps, sorted(source.optimizers), check, list(notes))


def _renote(folder: Path, notes: list[str]) -> None:
    from interp.files import atomic_write_json
    from interp.runs import RUN_FILE, fork_sha256

    info = json.loads((folder / RUN_FILE).read_text())
    info["imported"] = {**info["imported"], "notes": list(notes)}
    info["imported_sha256"] = fork_sha256(info["imported"])
    atomic_write_json(folder / RUN_FILE, info)


def _keep_state(run, source: Source, step: int, model, notes: list[str]) -> None:
    """The source's AdamW state at `step` as the run's optimizer-complete state there (forks start from it)."""
    from interp.imports.convert import optimizer_state_of
    from interp.imports.safe_load import load_torch
    from interp.model import native_optimizer_state, tl_param_shapes
    from interp.seeding import step_generator
    from interp.spec import VOCAB_SIZE
    from interp.steps import build_optimizer

    spec = run.spec
    path = source.optimizers[step]
    shapes = tl_param_shapes(spec.model, spec.task.sequence_length, VOCAB_SIZE)
    found = optimizer_state_of(load_torch(path, f"the optimizer state at step {step}"), path, shapes, step, notes)
    betas = found.get("betas")
    if betas is not None and tuple(betas) != (spec.train.beta1, spec.train.beta2):
        notes.append(f"{path}: betas {tuple(betas)} differ from the spec's ({spec.train.beta1}, {spec.train.beta2})")
    if found.get("eps") not in (None, 1e-8):
        notes.append(f"{path}: eps {found['eps']} cannot be expressed (interp's AdamW uses 1e-8)")
    optimizer = build_optimizer(model, spec.train)
    groups = optimizer.state_dict()["param_groups"]
    optimizer.load_state_dict(native_optimizer_state(model, {"state": found["state"], "param_groups": groups}))
    # the source's batch stream cannot be had: forks that continue "the parent's stream" draw this one
    run.save_state(step, model, optimizer, {"batches": step_generator(spec.seed, "batches", step)},
                   {"wall_seconds": 0.0, "imported": True})
