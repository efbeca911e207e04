"""A task given by its tables: the strings of a task made elsewhere (`TaskSpec.source = "tables"`), kept in the run
folder as `task.safetensors` and hash-checked like everything else.

A run imported from another toolkit (docs/import.md) trained on data that interp's own generator does not draw: the
author's generator regenerates them once, at import (`interp.imports.synass_data`), and from then on the run holds
them as tables: the selector sets [S, K, len_z], the bases [n_bases, len_b], the targets [n_bases, K, len_a], which
selector set each base uses, and which pairs the run held out of training. Token ids, as everywhere (`interp.task`).
The file is safetensors with a canonical header (`interp.checkpoints.serialize`): the same task gives the same bytes.
"""

from __future__ import annotations

from pathlib import Path

from interp.errors import InterpError
from interp.spec import TaskSpec

from interp.run_layout import TASK_FILE  # noqa: F401 - the file this module reads
NAMES = ("selector_sets", "bases", "targets", "supergroup", "heldout")


def tables_bytes(task) -> bytes:
    """The task's tables as safetensors bytes."""
    import torch

    from interp.checkpoints import serialize

    heldout = task.heldout if task.heldout is not None else torch.zeros(task.n_groups, task.k, dtype=torch.bool)
    tensors = {"selector_sets": task.selector_sets, "bases": task.bases, "targets": task.targets,
               "supergroup": task.supergroup, "heldout": heldout.to(torch.uint8)}
    return serialize({name: t.contiguous().long() if name != "heldout" else t.contiguous() for name, t in tensors.items()},
                     {"format": "interp-task-tables-1"})


def task_from_tables(spec: TaskSpec, seed: int, tables: dict):
    """A Task from its tables (token ids), each checked against the spec's shapes and the vocabulary."""

    from interp.spec import FIRST_CHAR_ID, VOCAB_SIZE
    from interp.task import Task

    missing = [name for name in NAMES if name not in tables]
    if missing:
        raise InterpError(f"the task tables lack {', '.join(missing)}")
    n, k = spec.n_bases, spec.k
    want = {"selector_sets": (spec.n_selector_sets, k, spec.len_z), "bases": (n, spec.len_b),
            "targets": (n, k, spec.len_a), "supergroup": (n,), "heldout": (n, k)}
    for name, shape in want.items():
        if tuple(tables[name].shape) != shape:
            raise InterpError(f"the task table {name} has shape {tuple(tables[name].shape)}; the spec needs {shape}")
    for name in ("selector_sets", "bases", "targets"):
        t = tables[name]
        if t.numel() and (int(t.min()) < FIRST_CHAR_ID or int(t.max()) >= VOCAB_SIZE):
            raise InterpError(f"the task table {name} holds token ids outside the characters "
                              f"{FIRST_CHAR_ID}..{VOCAB_SIZE - 1}")
    sup = tables["supergroup"].long()
    if sup.numel() and (int(sup.min()) < 0 or int(sup.max()) >= spec.n_selector_sets):
        raise InterpError(f"the task table supergroup names selector sets outside 0..{spec.n_selector_sets - 1}")
    heldout = tables["heldout"].bool()
    if bool(heldout.all()):
        raise InterpError("the task tables hold every pair out of training: no training pair is left")
    return Task(spec, seed, tables["selector_sets"].long(), tables["bases"].long(), tables["targets"].long(),
                supergroup=sup, heldout=heldout)


def read_task(path: Path, spec: TaskSpec, seed: int, expected_sha: str | None):
    """The task of a run whose spec says `source = "tables"`, from its task file, checked against the hash run.json
    recorded for it."""
    from interp.checkpoints import read

    path = Path(path)
    if not path.exists():
        raise InterpError(f"{path} is missing: this run's task is given by its tables (it was made elsewhere), "
                          f"and they are kept there")
    tables, _ = read(path)
    task = task_from_tables(spec, seed, tables)
    if task.sha256() != expected_sha:
        raise InterpError(f"{path} does not match the task hash run.json recorded (edited or replaced?)")
    return task


def task_of_new_run(spec, task, path: Path):
    """(the task, its tables' bytes or None) of a run being made with `spec`: a generated task is drawn from the seed;
    one given by its tables must be handed in (`task`), and is written with the run."""
    from interp.task import Task

    if spec.task.source != "tables":
        return Task.generate(spec.task, spec.seed), None
    if task is None or task.spec != spec.task or task.seed != spec.seed:
        raise InterpError(f"{path}: a run whose task is given by its tables is made with that task")
    return task, tables_bytes(task)
