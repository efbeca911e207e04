"""A source's tensors in interp's terms: a checkpoint's parameters (buffers checked, then dropped), an AdamW state
in interp's optimizer-complete layout, and the check that the regenerated data are the run's own.

A HookedTransformer's state_dict holds, besides the parameters, two buffers per layer: `attn.mask` (the causal mask:
an n_ctx x n_ctx lower triangle in TransformerLens 1-2, an empty tensor in 3.x) and `attn.IGNORE` (the score of a
masked position: -inf, or -1e5 in old versions). They are checked against those and dropped; any other extra entry,
a missing parameter or a shape that is not the spec's is refused, naming the file.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.errors import InterpError

BUFFER = re.compile(r"blocks\.(\d+)\.attn\.(mask|IGNORE)$")
IGNORE_VALUES = (-math.inf, -1e5)


def _check_buffer(name: str, kind: str, t, n_ctx: int, path: Path) -> None:
    if not isinstance(t, Tensor):
        raise InterpError(f"{path}: {name} is not a tensor")
    if kind == "mask":
        if t.numel() == 0:
            return
        want = torch.tril(torch.ones(n_ctx, n_ctx)).bool()
        if tuple(t.shape) != (n_ctx, n_ctx) or not torch.equal(t.bool(), want):
            raise InterpError(f"{path}: {name} (shape {tuple(t.shape)}) is not the causal mask TransformerLens builds "
                              f"for n_ctx {n_ctx}: this is not a plain causal HookedTransformer")
        return
    if t.numel() != 1 or float(t) not in IGNORE_VALUES:
        raise InterpError(f"{path}: {name} is {t.flatten()[:1].tolist()}, not TransformerLens's -inf (or -1e5)")


def parameters_of(obj, path: Path, shapes: dict[str, tuple[int, ...]], n_ctx: int) -> dict[str, Tensor]:
    """The parameters of a loaded state_dict `obj` (from `path`), float32, checked against the checkpoint layout
    `shapes` (`interp.model.tl_param_shapes`)."""
    if not isinstance(obj, dict) or not all(isinstance(k, str) for k in obj):
        raise InterpError(f"{path} is not a state_dict (a mapping of parameter names to tensors)")
    params, unexpected = {}, []
    for name, t in obj.items():
        buffer = BUFFER.match(name)
        if buffer:
            _check_buffer(name, buffer.group(2), t, n_ctx, path)
            continue
        if name not in shapes:
            unexpected.append(name)
            continue
        if not isinstance(t, Tensor) or not t.is_floating_point():
            raise InterpError(f"{path}: {name} is not a floating-point tensor")
        if tuple(t.shape) != shapes[name]:
            raise InterpError(f"{path}: {name} has shape {tuple(t.shape)}, the spec's model has {shapes[name]} "
                              f"(every checkpoint of a run must have the same shapes)")
        params[name] = t.detach().to(torch.float32).contiguous()
    missing = [name for name in shapes if name not in params]
    if unexpected or missing:
        parts = ([f"unexpected {', '.join(unexpected[:4])}"] if unexpected else []) + (
            [f"missing {', '.join(missing[:4])}"] if missing else [])
        raise InterpError(f"{path} does not fit the spec's model: {'; '.join(parts)}")
    return {name: params[name] for name in shapes}  # the checkpoint order


def optimizer_state_of(obj, path: Path, shapes: dict[str, tuple[int, ...]], step: int, notes: list[str]) -> dict:
    """The AdamW state (`torch.optim.AdamW.state_dict()` of a HookedTransformer, its parameters in
    `named_parameters` order, which is `shapes`' order) as {"state": {index: {step, exp_avg, exp_avg_sq}}},
    every moment checked against its parameter's shape."""
    if not (isinstance(obj, dict) and isinstance(obj.get("state"), dict) and isinstance(obj.get("param_groups"), list)):
        raise InterpError(f"{path} is not an optimizer state_dict (state and param_groups)")
    groups = obj["param_groups"]
    params = [i for g in groups if isinstance(g, dict) for i in g.get("params", [])]
    if len(groups) != 1 or sorted(params) != list(range(len(shapes))):
        raise InterpError(f"{path}: {len(groups)} parameter groups over {len(params)} parameters; interp's AdamW has "
                          f"one group over the model's {len(shapes)} parameters")
    group = groups[0]
    if group.get("amsgrad"):
        raise InterpError(f"{path}: AdamW with amsgrad cannot be expressed")
    names = list(shapes)
    state = {}
    for index, entry in obj["state"].items():
        if not isinstance(index, int) or not 0 <= index < len(names) or not isinstance(entry, dict):
            raise InterpError(f"{path}: an optimizer state entry {index!r} is not one of the model's parameters")
        for key in ("exp_avg", "exp_avg_sq"):
            t = entry.get(key)
            if not isinstance(t, Tensor) or tuple(t.shape) != shapes[names[index]]:
                got = tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__
                raise InterpError(f"{path}: {key} of parameter {index} ({names[index]}) is {got}, the parameter "
                                  f"has shape {shapes[names[index]]}")
        count = entry.get("step")
        count = float(count) if isinstance(count, (Tensor, int, float)) else math.nan
        if not math.isfinite(count):
            raise InterpError(f"{path}: parameter {index} has no step count")
        state[index] = {"step": torch.tensor(count, dtype=torch.float32),
                        "exp_avg": entry["exp_avg"].detach().float().contiguous(),
                        "exp_avg_sq": entry["exp_avg_sq"].detach().float().contiguous()}
    if state and len(state) != len(names):  # none at all: no update yet (a state saved at step 0)
        raise InterpError(f"{path} holds AdamW moments for {len(state)} of the model's {len(names)} parameters")
    counts = {int(s["step"]) for s in state.values()} or {0}
    if counts != {step}:
        notes.append(f"{path.parent.name}: AdamW's step count is {sorted(counts)}, not the checkpoint's step {step} "
                     f"(bias correction follows the count)")
    return {"state": state, "betas": group.get("betas"), "eps": group.get("eps"),
            "weight_decay": group.get("weight_decay")}


# ---------------------------------------------------------------------------- the data check
@torch.no_grad()
def token_scores(model, tokens: Int[Tensor, "n seq"], loss_pos: tuple[int, ...],
                 chunk: int = 512) -> tuple[float, float]:
    """(mean cross-entropy over the output tokens, EOS included; teacher-forced argmax accuracy over the output's
    characters, EOS excluded): the author's train_loss and train_accuracy, on fixed data."""
    first, last = loss_pos[0], loss_pos[-1]
    total, hits, count, chars = 0.0, 0.0, 0, 0
    for start in range(0, len(tokens), chunk):
        part = tokens[start:start + chunk]
        logits: Float[Tensor, "b out vocab"] = model(part[:, : last + 1])[:, first: last + 1].double()
        targets = part[:, first + 1: last + 2]
        total += float(torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="sum"))
        hits += float((logits[:, :-1].argmax(-1) == targets[:, :-1]).sum())
        count += targets.numel()
        chars += targets[:, :-1].numel()
    return total / count, hits / chars


def other_data(task, idx: Int[Tensor, " n"]) -> Int[Tensor, "n seq"]:
    """The examples `idx` with their output replaced by the same selector's output of the next base: data the run
    did not train on, in the same layout."""
    tokens = task.tokens[idx].clone()
    out = list(task.layout.output_pos)
    g, i = task.group_id[idx], task.selector_id[idx]
    tokens[:, out] = task.outputs()[(g + 1) % task.n_groups, i]
    return tokens


def data_check(model, task, logged: dict | None, step: int, sample: int = 2048) -> dict:
    """Does the run know these data? The model at `step` is scored on (a seeded sample of) the task's training pairs
    and on other data (`other_data`); the first must agree with what the source logged at that step (its loss within
    max(0.3, 0.3 x logged) nats, its accuracy within 0.15), and is informative only where the two differ by more than
    a nat. Returns the numbers and "verdict": "verified", "uninformative" (the model scores other data alike, as an
    untrained model does) or "mismatch"."""
    from interp.seeding import torch_generator

    idx = task.train_idx
    if len(idx) > sample:
        idx = idx[torch.randperm(len(idx), generator=torch_generator(0, "import_check"))[:sample].sort().values]
    loss_pos = task.layout.loss_pos
    own_loss, own_acc = token_scores(model, task.tokens[idx], loss_pos)
    other_loss, other_acc = token_scores(model, other_data(task, idx), loss_pos)
    out = {"step": step, "loss": own_loss, "accuracy": own_acc, "other_loss": other_loss, "other_accuracy": other_acc,
           "logged_loss": None, "logged_accuracy": None, "examples": len(idx)}
    logged = logged or {}
    bad = []
    if logged.get("train_loss") is not None:
        out["logged_loss"] = float(logged["train_loss"])
        if abs(own_loss - out["logged_loss"]) > max(0.3, 0.3 * out["logged_loss"]):
            bad.append("loss")
    if logged.get("train_accuracy") is not None:
        out["logged_accuracy"] = float(logged["train_accuracy"])
        if abs(own_acc - out["logged_accuracy"]) > 0.15:
            bad.append("accuracy")
    informative = other_loss - own_loss > 1.0
    out["verdict"] = "mismatch" if bad else "verified" if informative else "uninformative"
    return out
