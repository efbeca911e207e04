"""`interp evaluate RUN`: the metrics log rebuilt from the checkpoints, on interp's evaluation set.

Every column that the weights alone determine is recomputed at every saved step with `interp.metrics` (the losses,
candidate loss and accuracy, the shuffle gaps, first-token columns), on the run's fixed evaluation subset
(`interp.train.eval_subset`; a task with a held-out split is evaluated on its training pairs, and its held-out pairs
give the `*_heldout` columns). Columns only training records come from the source's own history where it logged
them at that step (an imported run's `columns`: the author's names, or interp's where the definition is the same),
and are otherwise absent (run.json's `not_recorded`). The log's resolution is the checkpoints': tau is known only to
the step between two checkpoints.

For an imported run the rebuilt log is written (it is the log); for a run interp trained (or one it exported and
imported back, whose log it carries), whose log also holds the steps between checkpoints and the training-only
columns, `interp evaluate` compares instead: each recomputed column
against the logged one at the saved steps (the largest difference; float16 checkpoints differ by their rounding).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from interp.errors import InterpError

HELDOUT = ("loss_cand", "acc_cand", "shuffle_gap", "loss")


@dataclass
class Evaluation:
    """What `evaluate_run` did: the rows it computed, whether it wrote them, and per column the largest difference
    from the log already there (a trained run)."""

    rows: list[dict]
    written: bool
    differences: dict[str, float] = field(default_factory=dict)
    steps_compared: int = 0


def eval_sets(run):
    """(idx, alt) of the evaluation examples, and of the held-out ones (None without a held-out split)."""
    import torch

    from interp.seeding import torch_generator
    from interp.train import eval_subset

    task = run.task
    if task.heldout is None:
        return eval_subset(task, run.spec.train, run.spec.seed), None
    out = []
    for pool, stream in ((task.train_idx, "eval"), (torch.nonzero(task.heldout.reshape(-1)).squeeze(1), "probe")):
        gen = torch_generator(run.spec.seed, stream)
        n = min(run.spec.train.eval_size, len(pool))
        idx = pool[torch.randperm(len(pool), generator=gen)[:n].sort().values]
        out.append((idx, task.other_selectors(idx, gen) if task.has_selector else None))
    return out[0], out[1]


def _source_values(run) -> dict[int, dict]:
    """step -> the source history's values at that step, under their names in interp's log."""
    from interp.imports.safe_load import load_jsonl
    from interp.run_layout import HISTORY_FILE

    block = run.imported or {}
    path = run.path / HISTORY_FILE
    if not path.exists() or not block.get("columns"):
        return {}
    columns = block["columns"]
    out: dict[int, dict] = {}
    for row in load_jsonl(path, "the source's history"):
        step = row.get("step")
        if isinstance(step, int):
            out[step] = {columns[k]: v for k, v in row.items() if k in columns}
    return out


def metrics_rows(run, progress: bool = True) -> list[dict]:
    """One row per saved step: the weight-determined columns recomputed, the source's where it has them."""
    import torch
    from tqdm.auto import tqdm

    from interp.metrics import evaluate_examples, summarize

    task = run.task
    (idx, alt), held = eval_sets(run)
    source = _source_values(run)
    rows = []
    for step in tqdm(run.steps, desc=f"evaluate {run.name}", unit="checkpoint", disable=not progress):
        model = run.model(step)
        with torch.no_grad():
            row = summarize(evaluate_examples(model, task, idx, alt))
            if held is not None:
                other = summarize(evaluate_examples(model, task, held[0], held[1]))
                row.update({f"{name}_heldout": other[name] for name in HELDOUT})
        values = {"step": step, "lr": run.spec.train.lr_at(max(step, 1)), "train_loss": math.nan, **row,
                  "seconds": None}
        values.update(source.get(step, {}))
        rows.append(values)
    return rows


def evaluate_run(run, progress: bool = True) -> Evaluation:
    """Rebuild an imported run's metrics log (written atomically, under the run's writer lock), or compare a trained
    run's log with its checkpoints (nothing written)."""
    if not run.steps:
        raise InterpError(f"{run.path} has no saved checkpoints to evaluate")
    if run.imported is None or run.imported.get("log") != "rebuilt":  # interp's own log (trained, or carried over)
        rows = metrics_rows(run, progress)
        logged = {r["step"]: r for r in run.metric_rows()}
        diffs: dict[str, float] = {}
        compared = 0
        for row in rows:
            have = logged.get(row["step"])
            if have is None:
                continue
            compared += 1
            for name, value in row.items():
                old = have.get(name)
                if name in ("step", "seconds", "lr", "train_loss") or not isinstance(old, (int, float)):
                    continue
                if isinstance(value, float) and math.isfinite(value) and math.isfinite(old):
                    diffs[name] = max(diffs.get(name, 0.0), abs(value - old))
        return Evaluation(rows, False, diffs, compared)
    held = run.is_writer
    run.acquire()
    try:
        rows = rebuild_metrics(run, progress)
    finally:
        if not held:
            run.release()
    return Evaluation(rows, True)


def rebuild_metrics(run, progress: bool = True) -> list[dict]:
    """The import's call: write the rebuilt log of a run it holds the lock of."""
    from interp.files import atomic_write_bytes
    from interp.runs import METRICS_FILE

    rows = metrics_rows(run, progress)
    text = "".join(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()},
                              sort_keys=True) + "\n" for row in rows)
    atomic_write_bytes(run.path / METRICS_FILE, text.encode())
    return rows


def resolution(steps: list[int]) -> int | None:
    """The largest gap between consecutive saved steps: how finely a log rebuilt from checkpoints times anything."""
    gaps = [b - a for a, b in zip(steps, steps[1:])]
    return max(gaps) if gaps else None
