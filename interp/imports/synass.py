"""The author's two run formats (mihirs-0/synass-lens; docs/import.md), read into a `Source`.

The main pipeline (scripts/train.py): NAME/config.yaml, NAME/checkpoints/step_NNNNNN/{model.pt, optimizer.pt,
metadata.json}, NAME/training_history.json. An eta-sweep run (eta_sweep/run_single.py): eta_{lr}_K_{K}_seed_{s}/
{config.json, log.jsonl, status.json, checkpoints/model_step_NNNNNNN.pt}. Each config field is mapped to the spec,
named as having no effect on the weights (where files go, post-hoc probes, logging cadences, early-stopping rules),
or refused (`--ignore` lets a user say it does not matter). What the spec expresses only approximately (the author's
warmup starts at lr 0, its cosine uses 3.14159) is a note: forks of such a run are not exact continuations.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from interp.errors import InterpError
from interp.imports.safe_load import load_json, load_jsonl, load_yaml
from interp.imports.source import Source, check_no_interpolation, refuse_unknown
from interp.imports.synass_data import SynassData, token_tables

STEP_DIR = re.compile(r"step_(\d+)$")
ETA_CHECKPOINT = re.compile(r"model_step_(\d+)\.pt$")
# config fields with no effect on the data, the model or the weights: where files go, post-hoc probes, tokens' names
MAIN_KNOWN = {
    "experiment": {"name", "seed"},
    "data": {"n_unique_b", "k", "task", "b_length", "a_length", "z_length", "vocab_chars", "probe_fraction",
             "split_by_base", "enforce_unique_a_first_char_per_b", "disambiguation_prefix_length", "label_noise_prob",
             "z_sharing", "n_supergroups"},
    "tokenizer": {"pad_token", "bos_token", "eos_token", "sep_token"},
    "model": {"n_layers", "n_heads", "d_model", "d_head", "d_mlp", "act_fn", "architecture"},
    "training": {"batch_size", "learning_rate", "weight_decay", "max_steps", "warmup_steps", "scheduler", "grad_clip",
                 "checkpoint_every", "eval_every", "early_stop_convergence_frac", "optimizer_type",
                 "record_dissipation"},
    "probes": None, "output": None, "interp": None,
}
TOKENS = {"pad_token": "<PAD>", "bos_token": "<BOS>", "eos_token": "<EOS>", "sep_token": "<SEP>"}
ETA_KNOWN_CELL = {"eta", "k", "seed", "n_unique_b", "b_length", "a_length", "z_length", "vocab_chars",
                  "enforce_unique_a_first_char_per_b", "disambiguation_prefix_length", "split_by_base", "probe_fraction",
                  "task", "n_layers", "n_heads", "d_model", "d_head", "d_mlp", "act_fn", "batch_size", "weight_decay",
                  "scheduler", "warmup_steps", "grad_clip", "optimizer", "momentum",
                  # when checkpoints and logs are written, and the live status rules: no effect on the weights
                  "checkpoint_every_early", "checkpoint_every_late", "switch_step", "candidate_eval_n",
                  "held_out_grad_batch_size", "min_steps", "plateau_tol_frac", "delta_z_plateau", "transition_frac",
                  "transition_patience", "stuck_patience", "diverge_ratio", "diverge_patience",
                  "weight_checkpoint_every", "output_subdir", "max_steps_override"}
# the author's history columns that interp's log has under its own name (SPEC 9.1: the same definitions)
MAIN_COLUMNS = {"train_loss": "train_loss", "first_target_loss": "train_loss_first",
                "loss_z_shuffled": "batch_shuffled_loss_first", "train_accuracy": "train_accuracy",
                "grad_norm_sq": "grad_norm_sq", "grad_norm_sq_clipped": "grad_norm_sq_clipped",
                "clipping_active": "clipping_active", "candidate_loss": "candidate_loss",
                "candidate_accuracy": "candidate_accuracy", "q_work": "q_work", "q_update": "q_update",
                "eta_eff": "eta_eff"}
ETA_COLUMNS = {"train_loss": "train_loss", "candidate_loss": "candidate_loss",
               "candidate_loss_shuffled_z": "candidate_loss_shuffled_z", "delta_z": "delta_z",
               "grad_norm_sq_held_out": "grad_norm_sq_held_out", "grad_norm_sq_training": "grad_norm_sq_training",
               "wall_clock_s": "seconds"}


def _get(section: dict, name: str, default, kind, where: str):
    value = section.get(name, default)
    if kind is bool:
        if not isinstance(value, bool):
            raise InterpError(f"{where}: {name} must be true or false, got {value!r}")
        return value
    if kind is int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise InterpError(f"{where}: {name} must be a whole number, got {value!r}")
        return value
    if kind is float:
        if isinstance(value, str):  # YAML 1.1 reads 1e-3 as text
            try:
                value = float(value)
            except ValueError:
                pass
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise InterpError(f"{where}: {name} must be a number, got {value!r}")
        return float(value)
    if not isinstance(value, str):
        raise InterpError(f"{where}: {name} must be text, got {value!r}")
    return value


def _data_version(data: dict, forced: int | None) -> int:
    """Which version of the author's generator made data described by these keys (the first that has them all);
    `forced` (--generator-version) wins."""
    if forced is not None:
        return forced
    if any(key in data for key in ("disambiguation_prefix_length", "label_noise_prob", "z_sharing", "n_supergroups")):
        return 5
    if "split_by_base" in data:
        return 4
    if "enforce_unique_a_first_char_per_b" in data:
        return 3
    return 2


def synass_data(data: dict, seed: int, version: int, where: str) -> SynassData:
    d = SynassData(
        seed=seed, version=version,
        n_unique_b=_get(data, "n_unique_b", 1000, int, where), k=_get(data, "k", 10, int, where),
        b_length=_get(data, "b_length", 6, int, where), a_length=_get(data, "a_length", 4, int, where),
        z_length=_get(data, "z_length", 2, int, where),
        vocab_chars=_get(data, "vocab_chars", "abcdefghijklmnopqrstuvwxyz0123456789", str, where),
        task=_get(data, "task", "bz_to_a", str, where),
        enforce_unique_a_first_char_per_b=_get(data, "enforce_unique_a_first_char_per_b", False, bool, where),
        disambiguation_prefix_length=_get(data, "disambiguation_prefix_length", 1, int, where),
        z_sharing=_get(data, "z_sharing", "shared", str, where), n_supergroups=_get(data, "n_supergroups", 1, int, where),
        probe_fraction=_get(data, "probe_fraction", 0.0, float, where),
        split_by_base=_get(data, "split_by_base", False, bool, where),
        label_noise_prob=_get(data, "label_noise_prob", 0.0, float, where))
    d.validate()
    return d


def task_of(d: SynassData, seed: int, notes: list[str]):
    """The interp TaskSpec (source "tables") and Task of the author's data `d`, and notes on what interp's training
    cannot reproduce of it."""
    from interp.spec import TaskSpec
    from interp.task_tables import task_from_tables

    if d.k < 2:
        raise InterpError(f"K = {d.k}: interp's tasks have K >= 2 (K = 1 leaves nothing to disambiguate)")
    if d.prefix_length != 1 and d.enforcing:
        notes.append(f"targets carry distinct {d.prefix_length}-character prefixes: interp's first-token metrics read "
                     f"the first character only, where candidates may share it")
    groups = None
    if d.n_sets > 1:
        if d.n_unique_b % d.n_sets:
            raise InterpError(f"{d.n_sets} selector sets over {d.n_unique_b} bases: interp's selector sets hold the "
                              f"same number of bases each (n_unique_b divisible by the sets); this cannot be expressed")
        groups = d.n_unique_b // d.n_sets
    if d.label_noise_prob > 0:
        notes.append(f"label noise {d.label_noise_prob:g} on the training targets: the task keeps the clean targets, "
                     f"and forks train without the noise")
    spec = TaskSpec(k=d.k, n_bases=d.n_unique_b, len_b=d.b_length, len_z=d.selector_length, len_a=d.a_length,
                    direction=d.task, unique_first=d.enforcing and d.prefix_length == 1, selector_groups=groups,
                    source="tables")
    try:
        spec.validate()
    except InterpError as exc:
        raise InterpError(f"the author's data cannot be expressed as an interp task: {exc}") from None
    return spec, task_from_tables(spec, seed, token_tables(d.generate()))


def _schedule(training: dict, where: str, notes: list[str], main: bool) -> dict:
    """The spec's lr schedule and clipping from the author's training section."""
    scheduler = _get(training, "scheduler", "cosine" if main else "constant", str, where)
    warmup = _get(training, "warmup_steps", 0, int, where)
    out = {"schedule": "constant", "warmup_steps": 0, "grad_clip": None}
    if scheduler == "constant":
        if warmup:
            notes.append(f"warmup_steps {warmup} has no effect under the author's constant schedule (lr {scheduler})")
    elif scheduler == "cosine":
        out.update(schedule="cosine", warmup_steps=warmup, min_lr_ratio=0.0)
        notes.append("the author's warmup and cosine schedule is expressed approximately (its first update has lr "
                     "0 and its cosine uses 3.14159): interp's lr differs by one step's shift; forks of it are not "
                     "exact continuations")
    else:
        raise InterpError(f"{where}: scheduler {scheduler!r} cannot be expressed (interp has constant and cosine)")
    if main:  # scripts/train.py: clipping at 1.0, none under a constant schedule in the versions that have one
        clip = training.get("grad_clip", 1.0)
        if "scheduler" in training and scheduler == "constant":
            clip = None
        out["grad_clip"] = None if clip is None else _get({"grad_clip": clip}, "grad_clip", 1.0, float, where)
    else:
        clip = training.get("grad_clip")
        out["grad_clip"] = None if clip is None else _get(training, "grad_clip", None, float, where)
    return out


def _model(section: dict, where: str):
    from interp.spec import ACT_FNS, ModelSpec

    d_model = _get(section, "d_model", 128, int, where)
    n_heads = _get(section, "n_heads", 4, int, where)
    act = _get(section, "act_fn", "gelu", str, where)
    if act not in ACT_FNS:
        raise InterpError(f"{where}: act_fn {act!r} cannot be expressed (interp has {', '.join(ACT_FNS)})")
    arch = section.get("architecture", "transformer")
    if arch != "transformer":
        raise InterpError(f"{where}: architecture {arch!r} is not a TransformerLens transformer; interp opens "
                          f"HookedTransformer checkpoints only")
    # TransformerLens's defaults where the config leaves them out (SPEC 11.1): d_head = d_model / n_heads, d_mlp = 4 d_model
    d_head = d_model // n_heads if section.get("d_head") is None else _get(section, "d_head", 0, int, where)
    d_mlp = 4 * d_model if section.get("d_mlp") is None else _get(section, "d_mlp", 0, int, where)
    return ModelSpec(n_layers=_get(section, "n_layers", 4, int, where), n_heads=n_heads, d_model=d_model,
                     d_head=d_head, d_mlp=d_mlp, act_fn=act)


# ---------------------------------------------------------------------------- the main pipeline
def read_main(src: Path, version: int | None = None, ignore: tuple[str, ...] = ()) -> Source:
    import dataclasses

    from interp.spec import RunSpec, TrainSpec

    src = Path(src)
    config_path = src / "config.yaml"
    config = load_yaml(config_path, "the run's config")
    where = str(config_path)
    check_no_interpolation(config, where)
    files = [config_path]
    checkpoints, optimizers, logged = {}, {}, {}
    folder = src / "checkpoints"
    for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
        match = STEP_DIR.match(entry.name)
        if not (match and entry.is_dir()):
            continue
        step = int(match.group(1))
        model = entry / "model.pt"
        if not model.is_file():
            raise InterpError(f"{entry} has no model.pt: the checkpoint at step {step} is missing its weights")
        checkpoints[step] = model
        if (entry / "optimizer.pt").is_file():
            optimizers[step] = entry / "optimizer.pt"
        if (entry / "metadata.json").is_file():
            meta = load_json(entry / "metadata.json", "a checkpoint's metadata")
            files.append(entry / "metadata.json")
            if isinstance(meta, dict):
                logged[step] = {k: meta[k] for k in ("train_loss", "train_accuracy") if isinstance(meta.get(k), (int, float))}
    if not checkpoints:
        raise InterpError(f"{folder} holds no step_NNNNNN/model.pt: nothing to import")
    if "interp" in config:  # written by `interp export --to synass`: interp's own spec and task, exactly
        return _interp_block(src, config, where, files, checkpoints, optimizers, logged)
    refuse_unknown(config, MAIN_KNOWN, where, ignore)
    experiment, data = config.get("experiment") or {}, config.get("data") or {}
    model_cfg, training = config.get("model") or {}, config.get("training") or {}
    tokenizer = config.get("tokenizer") or {}
    for name, want in TOKENS.items():
        if name in tokenizer and tokenizer[name] != want and "tokenizer" not in ignore:
            raise InterpError(f"{where}: tokenizer.{name} {tokenizer[name]!r} differs from {want!r}; the token ids "
                              f"are the same, but a changed tokenizer may mean a changed layout: --ignore tokenizer "
                              f"if it does not")
    seed = _get(experiment, "seed", 42, int, where)
    notes: list[str] = []
    d = synass_data(data, seed, _data_version(data, version), where)
    task_spec, task = task_of(d, seed, notes)
    optimizer = training.get("optimizer_type", "adamw")
    if optimizer != "adamw":
        raise InterpError(f"{where}: training.optimizer_type {optimizer!r} cannot be expressed (interp trains AdamW)")
    sched = _schedule(training, where, notes, main=True)
    max_steps = _get(training, "max_steps", 20000, int, where)
    train = TrainSpec(steps=max(max_steps, max(checkpoints)), lr=_get(training, "learning_rate", 1e-3, float, where),
                      weight_decay=_get(training, "weight_decay", 0.01, float, where),
                      batch_size=_get(training, "batch_size", 128, int, where),
                      eval_every=_get(training, "eval_every", 100, int, where),
                      checkpoint_every=_get(training, "checkpoint_every", 200, int, where), **sched)
    spec = RunSpec(seed=seed, task=task_spec, model=_model(model_cfg, where), train=train)
    history = []
    hist_path = src / "training_history.json"
    if hist_path.is_file():
        files.append(hist_path)
        history = _history_rows(load_json(hist_path, "the training history"), hist_path)
    if training.get("early_stop_convergence_frac") is not None:
        notes.append("the author's run may have stopped early (early_stop_convergence_frac): its last checkpoint "
                     "is where it stopped")
    return Source("synass-main", src, spec, task, config, {"generator": "synass", **dataclasses.asdict(d)},
                  checkpoints, optimizers, history, {k: v for k, v in MAIN_COLUMNS.items()}, logged, notes, files)


def _history_rows(blob, path: Path) -> list[dict]:
    """training_history.json (parallel lists keyed by name, `steps` the step of each entry) as rows."""
    if not isinstance(blob, dict) or not isinstance(blob.get("steps"), list):
        raise InterpError(f"{path} has no 'steps' list: not the author's training history")
    steps = blob["steps"]
    rows = [{"step": int(s)} for s in steps]
    for name, values in blob.items():
        if name == "steps" or not isinstance(values, list):
            continue
        if len(values) != len(steps):
            raise InterpError(f"{path}: {name} has {len(values)} entries for {len(steps)} steps")
        for row, value in zip(rows, values):
            row[name] = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return rows


def _interp_block(src, config, where, files, checkpoints, optimizers, logged) -> Source:
    """A run `interp export --to synass` wrote: its config carries interp's spec and task hash, so the task is
    interp's own, drawn again (or its tables, kept beside the config)."""
    from interp.spec import RunSpec
    from interp.task import Task
    from interp.task_tables import task_from_tables

    block = config["interp"]
    if not isinstance(block, dict) or not isinstance(block.get("spec"), dict):
        raise InterpError(f"{where}: its interp block holds no spec")
    spec = RunSpec.from_dict(block["spec"])
    spec.validate()
    if spec.task.source == "tables":
        from interp.checkpoints import read

        tables_path = src / "interp_task.safetensors"
        tables, _ = read(tables_path)
        files.append(tables_path)
        task = task_from_tables(spec.task, spec.seed, tables)
    else:
        task = Task.generate(spec.task, spec.seed)
    if task.sha256() != block.get("task_sha256"):
        raise InterpError(f"{where}: the task drawn again from its interp spec does not match the hash it records")
    history = []
    hist_path = src / "training_history.json"
    if hist_path.is_file():
        files.append(hist_path)
        history = _history_rows(load_json(hist_path, "the training history"), hist_path)
    log = None
    if (src / "interp_metrics.jsonl").is_file():  # the run's own log, whole: carried over, not rebuilt
        log = load_jsonl(src / "interp_metrics.jsonl", "the run's interp metrics log")
        files.append(src / "interp_metrics.jsonl")
    return Source("synass-main", src, spec, task, config, {"generator": "interp", "task_sha256": block["task_sha256"]},
                  checkpoints, optimizers, history, dict(MAIN_COLUMNS), logged, [], files, log=log)


# ---------------------------------------------------------------------------- eta-sweep runs
def eta_max_steps(eta: float) -> int:
    """eta_sweep/config.py's step budget of a cell (config.json does not record it)."""
    return 10_000 if eta >= 1e-2 else 30_000 if eta >= 1e-3 else 50_000 if eta >= 3e-4 else 100_000


def read_eta(src: Path, version: int | None = None, ignore: tuple[str, ...] = ()) -> Source:
    import dataclasses

    from interp.spec import RunSpec, TrainSpec

    src = Path(src)
    config_path = src / "config.json"
    config = load_json(config_path, "the cell's config")
    where = str(config_path)
    if not isinstance(config, dict) or not isinstance(config.get("cell"), dict):
        raise InterpError(f"{where} has no 'cell': not an eta-sweep run's config")
    cell = config["cell"]
    refuse_unknown({"cell": cell, **{k: v for k, v in config.items() if k != "cell"}},
                   {"cell": ETA_KNOWN_CELL, "git_commit": None}, where, ignore)
    files = [config_path]
    checkpoints = {}
    folder = src / "checkpoints"
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        match = ETA_CHECKPOINT.match(path.name)
        if match and path.is_file():
            checkpoints[int(match.group(1))] = path
    if not checkpoints:
        raise InterpError(f"{folder} holds no model_step_NNNNNNN.pt: nothing to import")
    eta = _get(cell, "eta", None, float, where)
    k, run_seed = _get(cell, "k", None, int, where), _get(cell, "seed", None, int, where)
    notes: list[str] = []
    data_seed = 1_000_003 * run_seed + k  # eta_sweep/run_single.py: the data seed of a cell
    d = synass_data({**cell, "label_noise_prob": 0.0}, data_seed, 5 if version is None else version, where)
    task_spec, task = task_of(d, run_seed, notes)
    optimizer = cell.get("optimizer", "adamw")
    if optimizer != "adamw" and "cell.optimizer" not in ignore:
        raise InterpError(f"{where}: optimizer {optimizer!r} cannot be expressed (interp trains AdamW); "
                          f"--ignore cell.optimizer imports the weights with the spec saying AdamW")
    sched = _schedule(cell, where, notes, main=False)
    status, history = {}, []
    if (src / "status.json").is_file():
        status = load_json(src / "status.json", "the run's status")
        files.append(src / "status.json")
        status = status if isinstance(status, dict) else {}
    if (src / "log.jsonl").is_file():
        history = load_jsonl(src / "log.jsonl", "the run's log")
        files.append(src / "log.jsonl")
    budget = eta_max_steps(eta)
    train = TrainSpec(steps=max(budget, max(checkpoints)), lr=eta,
                      weight_decay=_get(cell, "weight_decay", 0.01, float, where),
                      batch_size=_get(cell, "batch_size", 128, int, where), eval_every=100,
                      checkpoint_every=_get(cell, "weight_checkpoint_every", 2000, int, where), **sched)
    spec = RunSpec(seed=run_seed, task=task_spec, model=_model(cell, where), train=train)
    logged = {int(r["step"]): {"train_loss": r["train_loss"]} for r in history
              if isinstance(r.get("step"), int) and isinstance(r.get("train_loss"), (int, float))}
    notes.append(f"the data were drawn from the data seed 1,000,003 x {run_seed} + K = {data_seed} (the author's "
                 f"rule); the run seed {run_seed} is this run's seed in interp (its evaluation set and fork streams)")
    return Source("synass-eta", src, spec, task, config, {"generator": "synass", **dataclasses.asdict(d),
                                                          "run_seed": run_seed},
                  checkpoints, {}, history, dict(ETA_COLUMNS), logged, notes, files, status)


def eta_runs(src: Path) -> list[Path]:
    """The eta-sweep run folders directly inside `src`, sorted by name."""
    from interp.imports.source import ETA_RUN

    return sorted(p for p in Path(src).iterdir() if p.is_dir() and ETA_RUN.search(p.name) and (p / "config.json").is_file())
