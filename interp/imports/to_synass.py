"""`interp export RUN --to synass OUT`: an interp run in the author's main-pipeline format (docs/import.md), so the
author's own analysis scripts can read it, and so an import can be checked by a round trip.

    OUT/config.yaml                                  the author's keys, and an `interp` block: the run's own spec and
                                                     task hash (an import reads the task back from it exactly)
    OUT/checkpoints/step_NNNNNN/model.pt             a HookedTransformer state_dict of plain tensors (the parameters
                                                     in the checkpoint's dtype, and TransformerLens 2's attn.mask and
                                                     attn.IGNORE buffers, as the author's files hold them)
    OUT/checkpoints/step_NNNNNN/optimizer.pt         AdamW's state_dict, where the run keeps an optimizer state
    OUT/checkpoints/step_NNNNNN/metadata.json        {step, train_loss, train_accuracy}: measured on the checkpoint
                                                     over the training pairs (interp keeps no running accuracy)
    OUT/training_history.json                        the metrics log on its evaluation grid, under the author's names
    OUT/interp_metrics.jsonl                         the run's own metrics log, whole (an import carries it over:
                                                     its steps between checkpoints too)
    OUT/interp_task.safetensors                      a task given by its tables (an imported run's), where there is one

Everything is written to a temporary sibling and renamed into place when complete; OUT must not exist.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

from interp.errors import InterpError

HISTORY = {"train_loss": "train_loss", "train_loss_first": "first_target_loss",
           "batch_shuffled_loss_first": "loss_z_shuffled", "loss_cand": "candidate_loss",
           "acc_cand": "candidate_accuracy"}


def _config(run, name: str) -> dict:
    from interp.spec import ALPHABET

    s = run.spec
    t, m, tr = s.task, s.model, s.train
    return {
        "experiment": {"name": name, "seed": s.seed},
        "data": {"n_unique_b": t.n_bases, "k": t.k, "task": t.direction, "b_length": t.len_b, "a_length": t.len_a,
                 "z_length": t.len_z, "vocab_chars": ALPHABET, "probe_fraction": 0.0, "split_by_base": True,
                 "enforce_unique_a_first_char_per_b": t.unique_first},
        "tokenizer": {"pad_token": "<PAD>", "bos_token": "<BOS>", "eos_token": "<EOS>", "sep_token": "<SEP>"},
        "model": {"n_layers": m.n_layers, "n_heads": m.n_heads, "d_model": m.d_model, "d_head": m.d_head,
                  "d_mlp": m.d_mlp, "act_fn": m.act_fn},
        "training": {"batch_size": tr.batch_size, "learning_rate": tr.lr, "weight_decay": tr.weight_decay,
                     "max_steps": tr.steps, "warmup_steps": tr.warmup_steps, "scheduler": tr.schedule,
                     "grad_clip": tr.grad_clip, "checkpoint_every": tr.checkpoint_every, "eval_every": tr.eval_every},
        "interp": {"format": 1, "spec": run.info["spec"], "task_sha256": run.info.get("task_sha256"),
                   "note": "written by interp export --to synass: the data are interp's (this spec), not the "
                           "author's generator's; interp import reads them back from here"},
    }


def _history(run) -> dict:
    rows = [r for r in run.metric_rows() if r["step"] % run.spec.train.eval_every == 0]
    out: dict = {"steps": [r["step"] for r in rows]}
    for ours, theirs in HISTORY.items():
        values = [r.get(ours) for r in rows]
        values = [float(v) if isinstance(v, (int, float)) else math.nan for v in values]
        if any(math.isfinite(v) for v in values):
            out[theirs] = values
    return out


def export_synass(run, out, progress: bool = True) -> dict:
    """Write `run` (a Run) to the new folder `out` in the author's main-pipeline format; returns what was written."""
    import torch
    import yaml
    from tqdm.auto import tqdm

    from interp.imports.convert import token_scores
    from interp.run_states import kept_state, kept_steps
    from interp.spec import VOCAB_SIZE  # noqa: F401

    out = Path(out)
    if str(out).strip() in ("", "."):
        raise InterpError("the output folder must be a non-empty path")
    if out.exists():
        raise InterpError(f"{out} exists; give a new folder for the exported run")
    a, b = Path(os.path.abspath(run.path)), Path(os.path.abspath(out))
    if a in b.parents:
        raise InterpError(f"{out} lies inside the run {run.path}; export elsewhere")
    if run.fork is not None:
        raise InterpError(f"{run.path} is a fork: the author's format has no parent or arm (export its parent)")
    task = run.task
    n_ctx = run.spec.model.context(run.spec.task.sequence_length)
    kept = set(kept_steps(run))
    tmp = out.parent / f".{out.name}.exporting-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        (tmp / "checkpoints").mkdir(parents=True)
        (tmp / "config.yaml").write_text(yaml.safe_dump(_config(run, out.name), sort_keys=False))
        (tmp / "training_history.json").write_text(json.dumps(_history(run), indent=2))
        shutil.copyfile(run.path / "metrics.jsonl", tmp / "interp_metrics.jsonl")
        if run.spec.task.source == "tables":
            from interp.task_tables import TASK_FILE

            shutil.copyfile(run.path / TASK_FILE, tmp / "interp_task.safetensors")
        idx = task.train_idx
        for step in tqdm(run.steps, desc=f"export {run.name}", unit="checkpoint", disable=not progress):
            folder = tmp / "checkpoints" / f"step_{step:06d}"
            folder.mkdir()
            state = dict(run.state_dict(step))
            for layer in range(run.spec.model.n_layers):
                state[f"blocks.{layer}.attn.mask"] = torch.tril(torch.ones(n_ctx, n_ctx)).bool()
                state[f"blocks.{layer}.attn.IGNORE"] = torch.tensor(-math.inf)
            torch.save(state, folder / "model.pt")
            if step in kept:
                opt = kept_state(run, step).optimizer
                torch.save({"state": opt["state"], "param_groups": opt["param_groups"]}, folder / "optimizer.pt")
            with torch.no_grad():
                loss, acc = token_scores(run.model(step), task.tokens[idx], task.layout.loss_pos)
            (folder / "metadata.json").write_text(json.dumps({"step": step, "train_loss": loss, "train_accuracy": acc},
                                                             indent=2))
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"path": str(out), "steps": run.steps, "optimizer_states": sorted(kept)}
