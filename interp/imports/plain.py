"""A plain TransformerLens checkpoint series: a folder of state_dict files whose names carry the step, and a small
spec file the user writes (docs/import.md, "A TransformerLens series").

    runs/mine/step_200.pt  step_400.pt  ...  spec.yaml

The step is the last number in a file's name; `.pt`, `.pth` and `.bin` files are read as torch files (plain tensors
only), `.safetensors` as safetensors. The spec file (YAML or JSON; `--spec`, default SRC/spec.yaml or spec.json) is an
interp run spec (seed, task, model, train: docs/runs.md), where `task` is drawn by interp's generator from `seed`, or
`data` replaces it with the author's generator's options (`generator: synass`, the data seed, its version);
`logged` ({step, train_loss, train_accuracy}) gives what the run's own log said, for the data check.
"""

from __future__ import annotations

import re
from pathlib import Path

from interp.errors import InterpError
from interp.imports.source import Source

SUFFIXES = (".pt", ".pth", ".bin", ".safetensors")
SPEC_NAMES = ("spec.yaml", "spec.yml", "spec.json")
KNOWN = {"seed", "task", "data", "model", "train", "logged"}


def series_files(src: Path) -> dict[int, Path]:
    """step -> file of every checkpoint file directly in `src` (the last number of its name is its step)."""
    out: dict[int, Path] = {}
    for path in sorted(Path(src).iterdir()):
        if not (path.is_file() and path.suffix in SUFFIXES):
            continue
        numbers = re.findall(r"\d+", path.stem)
        if not numbers:
            continue
        step = int(numbers[-1])
        if step in out:
            raise InterpError(f"{out[step].name} and {path.name} both name step {step}; keep one")
        out[step] = path
    return out


def read_plain(src: Path, spec_file: str | Path | None = None, version: int | None = None,
               ignore: tuple[str, ...] = ()) -> Source:
    import dataclasses

    from interp.imports.safe_load import load_json, load_yaml
    from interp.imports.synass import synass_data, task_of
    from interp.spec import ModelSpec, RunSpec, TaskSpec, TrainSpec
    from interp.task import Task

    src = Path(src)
    if spec_file is None:
        found = [src / name for name in SPEC_NAMES if (src / name).is_file()]
        if not found:
            raise InterpError(f"{src}: a TransformerLens series needs a spec file (seed, task or data, model, train: "
                              f"docs/import.md); write {src}/spec.yaml or give --spec FILE")
        spec_file = found[0]
    spec_file = Path(spec_file)
    blob = load_json(spec_file, "the series' spec") if spec_file.suffix == ".json" else load_yaml(spec_file, "the series' spec")
    where = str(spec_file)
    if not isinstance(blob, dict):
        raise InterpError(f"{where} is not a mapping")
    unknown = sorted(set(blob) - KNOWN - set(ignore))
    if unknown:
        raise InterpError(f"{where}: unknown fields {', '.join(unknown)}; known: {', '.join(sorted(KNOWN))}")
    if ("task" in blob) == ("data" in blob):
        raise InterpError(f"{where}: give either task (interp's generator, from seed) or data (the author's "
                          f"generator: generator: synass), not {'both' if 'task' in blob else 'neither'}")
    seed = blob.get("seed", 0)
    notes: list[str] = []
    try:
        model = ModelSpec.from_dict(blob.get("model") or {})
        train = TrainSpec.from_dict(blob.get("train") or {})
        if "task" in blob:
            task_spec = TaskSpec.from_dict(blob["task"] or {})
            spec = RunSpec(seed=seed, task=task_spec, model=model, train=train)
            spec.validate()
            task = Task.generate(task_spec, seed)
            data = {"generator": "interp", "seed": seed}
        else:
            options = dict(blob["data"] or {})
            if options.pop("generator", None) != "synass":
                raise InterpError(f"{where}: data.generator must be synass (the author's generator)")
            gen_version = options.pop("version", 5 if version is None else version)
            data_seed = options.pop("seed", seed)
            d = synass_data(options, data_seed, gen_version, where)
            task_spec, task = task_of(d, seed, notes)
            spec = RunSpec(seed=seed, task=task_spec, model=model, train=train)
            spec.validate()
            data = {"generator": "synass", **dataclasses.asdict(d)}
    except TypeError as exc:
        raise InterpError(f"{where}: {exc}") from None
    checkpoints = series_files(src)
    checkpoints = {s: p for s, p in checkpoints.items() if p != spec_file}
    if not checkpoints:
        raise InterpError(f"{src} holds no checkpoint file ({', '.join(SUFFIXES)}) whose name carries a step")
    logged = {}
    if blob.get("logged") is not None:
        entry = blob["logged"]
        if not isinstance(entry, dict) or not isinstance(entry.get("step"), int):
            raise InterpError(f"{where}: logged must be {{step, train_loss, train_accuracy}}")
        logged[entry["step"]] = {k: float(entry[k]) for k in ("train_loss", "train_accuracy") if k in entry}
    return Source("tl-series", src, spec, task, blob, data, checkpoints, {}, [], {}, logged, notes, [spec_file])
