"""Runs in the author's formats (SPEC 11; docs/import.md), written from the formats' keys by these functions, not by
the author's code: a small model is trained by interp on the data the author's generator draws (a task given by its
tables, n_ctx 32 as the author's models have), and its checkpoints are written as the author's scripts write theirs
(torch.save of a HookedTransformer state_dict with TransformerLens 2's mask and IGNORE buffers; AdamW's state_dict;
metadata.json; training_history.json; an eta-sweep cell's config.json, log.jsonl and status.json)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
import yaml

from interp.imports.convert import token_scores
from interp.imports.synass import task_of
from interp.imports.synass_data import SynassData
from interp.model import ModelSpec
from interp.run_states import kept_state, kept_steps
from interp.runs import Run
from interp.spec import RunSpec, TrainSpec
from interp.train import train

MODEL = {"n_layers": 1, "n_heads": 2, "d_model": 32, "d_head": 16, "d_mlp": 64, "act_fn": "gelu"}


def trained(folder: Path, data: SynassData, seed: int = 0, steps: int = 300, lr: float = 0.003) -> Run:
    """An interp run on the author's data `data`: the model the fixtures below write out."""
    notes: list[str] = []
    task_spec, task = task_of(data, seed, notes)
    spec = RunSpec(seed=seed, task=task_spec, model=ModelSpec(**MODEL, n_ctx=32),
                   train=TrainSpec(steps=steps, lr=lr, batch_size=16, eval_every=50, eval_size=64,
                                   checkpoint_every=100, early_checkpoints=False, densify=False, save_optimizer=True))
    run = Run.create(folder, spec, task=task)
    train(run, progress=False)
    return Run.open(folder)


def state_dict(run: Run, step: int) -> dict:
    """The checkpoint as a TransformerLens 2 HookedTransformer's state_dict: parameters and the two buffers."""
    state = dict(run.state_dict(step))
    n_ctx = run.spec.model.n_ctx
    for layer in range(run.spec.model.n_layers):
        state[f"blocks.{layer}.attn.mask"] = torch.tril(torch.ones(n_ctx, n_ctx)).bool()
        state[f"blocks.{layer}.attn.IGNORE"] = torch.tensor(-math.inf)
    return state


def optimizer_dict(run: Run, step: int) -> dict:
    """AdamW's state_dict as torch writes it: state by parameter index, one param group."""
    opt = kept_state(run, step).optimizer
    group = {"lr": run.spec.train.lr, "betas": (0.9, 0.999), "eps": 1e-08, "weight_decay": 0.01, "amsgrad": False,
             "maximize": False, "foreach": None, "capturable": False, "differentiable": False, "fused": None,
             "initial_lr": run.spec.train.lr, "params": list(range(len(list(run.model(step).parameters()))))}
    return {"state": {int(i): s for i, s in opt["state"].items()}, "param_groups": [group]}


def scores(run: Run, step: int) -> tuple[float, float]:
    task = run.task
    with torch.no_grad():
        return token_scores(run.model(step), task.tokens[task.train_idx], task.layout.loss_pos)


def write_main(run: Run, data: SynassData, out: Path, name: str = "landauer_tiny", extra: dict | None = None) -> Path:
    """outputs/NAME: config.yaml, checkpoints/step_NNNNNN/{model.pt, optimizer.pt, metadata.json},
    training_history.json."""
    out = Path(out)
    tr = run.spec.train
    config = {"experiment": {"name": name, "seed": data.seed},
              "data": {"n_unique_b": data.n_unique_b, "k": data.k, "task": data.task, "b_length": data.b_length,
                       "a_length": data.a_length, "z_length": data.z_length, "vocab_chars": data.vocab_chars,
                       "probe_fraction": data.probe_fraction, "split_by_base": data.split_by_base,
                       "enforce_unique_a_first_char_per_b": data.enforce_unique_a_first_char_per_b},
              "tokenizer": {"pad_token": "<PAD>", "bos_token": "<BOS>", "eos_token": "<EOS>", "sep_token": "<SEP>"},
              "model": dict(MODEL),
              "training": {"batch_size": tr.batch_size, "learning_rate": tr.lr, "weight_decay": tr.weight_decay,
                           "max_steps": tr.steps, "warmup_steps": 0, "scheduler": "constant",
                           "checkpoint_every": tr.checkpoint_every, "eval_every": tr.eval_every},
              "probes": {"enabled": ["attention_to_z"]}, "output": {"base_dir": "outputs"}}
    for section, values in (extra or {}).items():
        config.setdefault(section, {}).update(values)
    out.mkdir(parents=True)
    (out / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    kept = set(kept_steps(run))
    for step in run.steps:
        folder = out / "checkpoints" / f"step_{step:06d}"
        folder.mkdir(parents=True)
        torch.save(state_dict(run, step), folder / "model.pt")
        if step in kept:
            torch.save(optimizer_dict(run, step), folder / "optimizer.pt")
        loss, acc = scores(run, step)
        (folder / "metadata.json").write_text(json.dumps({"step": step, "train_loss": loss, "train_accuracy": acc}))
    rows = [r for r in run.metric_rows() if r["step"] > 0]
    history = {"train_loss": [r["train_loss"] for r in rows], "train_accuracy": [r["acc_first"] for r in rows],
               "first_target_loss": [r.get("train_loss_first", r["loss_first"]) for r in rows],
               "loss_z_shuffled": [r.get("batch_shuffled_loss_first", r["loss_first"]) for r in rows],
               "steps": [r["step"] for r in rows]}
    (out / "training_history.json").write_text(json.dumps(history, indent=2))
    return out


def write_eta(run: Run, out_root: Path, eta: float, k: int, seed: int, n_unique_b: int) -> Path:
    """eta_sweep/results/eta_{eta:g}_K_{K}_seed_{s}/: config.json, log.jsonl, status.json,
    checkpoints/model_step_NNNNNNN.pt (state_dict only)."""
    out = Path(out_root) / f"eta_{eta:g}_K_{k}_seed_{seed}"
    (out / "checkpoints").mkdir(parents=True)
    cell = {"eta": eta, "k": k, "seed": seed, "n_unique_b": n_unique_b, "b_length": 6, "a_length": 4, "z_length": 2,
            "vocab_chars": "abcdefghijklmnopqrstuvwxyz0123456789", "enforce_unique_a_first_char_per_b": True,
            "disambiguation_prefix_length": 1, "split_by_base": True, "probe_fraction": 0.0, "task": "bz_to_a",
            **MODEL, "batch_size": run.spec.train.batch_size, "weight_decay": 0.01, "scheduler": "constant",
            "warmup_steps": 0, "grad_clip": None, "optimizer": "adamw", "momentum": 0.0, "checkpoint_every_early": 100,
            "checkpoint_every_late": 500, "switch_step": 5000, "candidate_eval_n": 32, "held_out_grad_batch_size": 256,
            "min_steps": 2000, "plateau_tol_frac": 0.05, "delta_z_plateau": 0.05, "transition_frac": 0.3,
            "transition_patience": 500, "stuck_patience": 2000, "diverge_ratio": 1.5, "diverge_patience": 500,
            "weight_checkpoint_every": 100}
    (out / "config.json").write_text(json.dumps({"cell": cell, "git_commit": "0" * 40}, indent=2))
    rows = []
    for r in run.metric_rows():
        if r["step"] == 0 or r["step"] % 50:
            continue
        rows.append({"step": r["step"], "train_loss": scores(run, r["step"])[0] if r["step"] in run.steps else
                     r["train_loss"], "candidate_loss": r["loss_cand"], "candidate_loss_shuffled_z": r["loss_cand"] +
                     r["shuffle_gap"], "delta_z": r["shuffle_gap"], "grad_norm_sq_held_out": 1.0,
                     "grad_norm_sq_training": r.get("grad_sq_mean", 1.0), "lr": eta, "wall_clock_s": float(r["step"])})
    (out / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for step in run.steps:
        if step:
            torch.save({k: v for k, v in state_dict(run, step).items()}, out / "checkpoints" / f"model_step_{step:07d}.pt")
    (out / "status.json").write_text(json.dumps({"status": "inconclusive", "final_step": run.steps[-1],
                                                 "wall_clock_s": 1.0, "run_name": out.name, "eta": eta, "k": k,
                                                 "seed": seed, "transition_detected_step": None}))
    return out


def write_series(run: Run, out: Path, data: SynassData, seed: int) -> Path:
    """A plain TransformerLens series: NAME_step{N}.pt files and a spec.yaml (the author's generator's data)."""
    out = Path(out)
    out.mkdir(parents=True)
    for step in run.steps:
        torch.save(state_dict(run, step), out / f"ckpt_step{step}.pt")
    spec = {"seed": seed, "data": {"generator": "synass", "version": data.version, "seed": data.seed,
                                   "n_unique_b": data.n_unique_b, "k": data.k,
                                   "enforce_unique_a_first_char_per_b": data.enforce_unique_a_first_char_per_b},
            "model": {**{k: v for k, v in MODEL.items()}, "n_ctx": 32},
            "train": {"lr": run.spec.train.lr, "batch_size": run.spec.train.batch_size, "steps": run.spec.train.steps}}
    (out / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return out
