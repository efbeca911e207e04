"""Head and layer ablation at chosen checkpoints (by default tau/4, tau and 2 tau).

A head is ablated by replacing its hook_z (at every position) with:
- `zero`: zeros, removing the head's contribution (z @ W_O) from the residual stream;
- `mean`: its per-position mean over a fixed reference set of training examples;
- `resample`: its value on the same input with z replaced by another selector of the same
  group, never the input's own (drawn once per (group, selector) from the run's seed).
Whole layers are ablated the same way with all their heads at once.

Effects are the metrics of `interp.metrics` (first-token loss, candidate loss, shuffle gaps,
accuracies) on a fixed probe, reported with the unablated values alongside.

How it is fast (`effects_by_method`): the probe's candidate sequences and its z-shuffled sequences are
run once with every layer's residual stream and head outputs recorded
(`interp.fastpath.tree`); ablating heads of layer L then resumes from that record at layer L,
with the replaced head outputs, for all heads of the layer in one batch. Nothing below L is
recomputed, the attention of layer L itself is never recomputed, and each shared prefix
runs once for its K candidates. `Ablated` is the plain TransformerLens hook path that this
must equal (tests check every method to 1e-5); it also serves models outside the family.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

import pandas as pd
from jaxtyping import Float, Int

from interp.analysis.common import across_of, get_act_name, head_name, no_grad
from interp.analysis.findings import Rows
from interp.analysis.registry import ABLATION_METHOD, ABLATION_METHODS, N_EXAMPLES, Analysis, parse_methods
from interp.errors import InterpError
from interp.names import METRICS
from interp.runs import Run
from interp.seeding import torch_generator
from interp.task import Task

# torch is imported where the code computes, so that reading cached results (a report's findings) never loads it;
# where torch is already loaded (the tests), its names are bound here for jaxtyping's runtime checks of the annotations
if TYPE_CHECKING or "torch" in sys.modules:
    from torch import Tensor, nn

    from interp.fastpath import Tree

METHODS = ABLATION_METHODS  # the --method choices of its entry (METHOD, below)
DEFAULTS = {"methods": METHODS, "n_examples": 256}
DEFAULT_EXAMPLES = DEFAULTS["n_examples"]
REFERENCE_SIZE = 512
# (variant, example, candidate) rows per resumed forward: one variant of the demo's probe
# (256 x 10). Bigger batches are slower on the CPU (2.9 s against 2.3 s a checkpoint at 16x):
# their activations no longer fit in cache, and fresh large buffers page-fault on every use.
ROWS_PER_BATCH = 2560


def check_methods(methods: str | Iterable[str]) -> tuple[str, ...]:
    """The ablation methods asked for ("zero", "zero,mean" or a list), as a tuple; an
    InterpError names an unknown one."""
    return parse_methods(methods)


def components(n_layers: int, n_heads: int) -> list[tuple[str, int, tuple[int, ...]]]:
    """(name, layer, heads): every head, then every whole layer."""
    out = [(head_name(l, h), l, (h,)) for l in range(n_layers) for h in range(n_heads)]
    out += [(f"L{l}", l, tuple(range(n_heads))) for l in range(n_layers)]
    return out


def resample_table(task: Task, seed: int) -> Int[Tensor, "n_groups k"]:
    """For each (group, selector), the selector whose activations replace it: never itself."""
    import torch

    gen = torch_generator(seed, "resample")
    offset = torch.randint(1, task.k, (task.n_groups, task.k), generator=gen)
    return (torch.arange(task.k).view(1, -1) + offset) % task.k


def _ids_of(rows: Int[Tensor, "n len"], table: Int[Tensor, "m len"]) -> Int[Tensor, " n"]:
    """Index of each row of `rows` in `table` (exact match), for any string length."""
    import torch

    table = table.to(rows.device)
    uniq, inverse = torch.unique(torch.cat([table, rows]), dim=0, return_inverse=True)
    lookup = torch.full((len(uniq),), -1, dtype=torch.long, device=rows.device)
    lookup[inverse[: len(table)]] = torch.arange(len(table), device=rows.device)
    found = lookup[inverse[len(table) :]]
    if bool((found < 0).any()):
        raise InterpError("resample ablation: an input is not an example of the task")
    return found


def resample_tokens(task: Task, tokens: Int[Tensor, "n seq"], table: Int[Tensor, "n_groups k"]) -> Int[Tensor, "n seq"]:
    """`tokens` (any length up to the full sequence) with z replaced by the resample selector."""
    lay = task.layout
    b0, b1 = lay.segments["B"]
    z0, z1 = lay.segments["z"]
    group = _ids_of(tokens[:, b0:b1], task.bases)
    # selector strings are unique across the task's selector sets (task.selector_groups), so the
    # flat index over every set, modulo K, is the selector's index within its own set
    own = _ids_of(tokens[:, z0:z1], task.selector_sets.reshape(-1, z1 - z0)) % task.k
    source = tokens.clone()
    source[:, z0:z1] = task.selector_tokens(group.cpu(), table.cpu()[group.cpu(), own.cpu()]).to(tokens.device)
    return source


@no_grad
def reference_mean_z(model: nn.Module, task: Task, seed: int, size: int = REFERENCE_SIZE) -> list[Tensor]:
    """Per-layer, per-position mean of hook_z over a fixed reference set: [seq, head, d_head]."""
    import torch

    gen = torch_generator(seed, "reference")
    idx = torch.randperm(task.size, generator=gen)[: min(size, task.size)]
    names = [get_act_name("z", l) for l in range(model.cfg.n_layers)]
    device = next(model.parameters()).device
    _, cache = model.run_with_cache(task.tokens[idx].to(device), names_filter=lambda n: n in names)
    return [cache[name].mean(0) for name in names]


def _ablated_class() -> type:
    """`Ablated`, made on first use: it is a torch `nn.Module`, and this module imports torch only to compute."""
    global _ABLATED
    if _ABLATED is not None:
        return _ABLATED
    import torch
    from torch import nn

    class Ablated(nn.Module):
        """`model` with the heads `targets` ({layer: heads}) ablated by `method`; tokens -> logits.

        The reference implementation through TransformerLens hooks (and the path for models the
        fast path does not support)."""

        def __init__(
            self,
            model: nn.Module,
            targets: dict[int, tuple[int, ...]],
            method: str,
            task: Task | None = None,
            mean_z: list[Tensor] | None = None,
            table: Tensor | None = None,
        ):
            super().__init__()
            check_methods(method)
            _check_inputs(method, task, mean_z, table)
            self.model, self.targets, self.method = model, targets, method
            self.task, self.mean_z, self.table = task, mean_z, table

        def forward(self, tokens: Int[Tensor, "n seq"]) -> Float[Tensor, "n seq vocab"]:
            source: dict[str, Tensor] = {}
            names = {get_act_name("z", layer): layer for layer in self.targets}
            if self.method == "resample":
                src_tokens = resample_tokens(self.task, tokens, self.table)
                with torch.no_grad():
                    _, cache = self.model.run_with_cache(src_tokens, names_filter=lambda n: n in names)
                source = {name: cache[name] for name in names}

            def hook(z, hook):
                heads = list(self.targets[names[hook.name]])
                z = z.clone()
                if self.method == "zero":
                    z[:, :, heads] = 0.0
                elif self.method == "mean":
                    z[:, :, heads] = self.mean_z[names[hook.name]][: z.shape[1], heads].to(z.dtype)
                else:
                    z[:, :, heads] = source[hook.name][:, :, heads]
                return z

            return self.model.run_with_hooks(tokens, fwd_hooks=[(name, hook) for name in names])

    Ablated.__qualname__ = "Ablated"
    _ABLATED = Ablated
    return Ablated


_ABLATED: type | None = None


def __getattr__(name: str):
    """`ablation.Ablated` (made on first use, see `_ablated_class`)."""
    if name == "Ablated":
        return _ablated_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _check_inputs(method: str, task: Task | None, mean_z, table) -> None:
    if method == "mean" and mean_z is None:
        raise ValueError("mean ablation needs mean_z (reference_mean_z)")
    if method == "resample" and (task is None or table is None or not task.has_selector):
        raise InterpError("resample ablation needs a task with a selector and a resample table")


# ---------------------------------------------------------------------------- the fast path
class _Probe:
    """One recorded forward of the probe: prefixes, their continuations and its z-source."""

    def __init__(self, model, prefix: Tensor, outputs: Tensor, source_prefix: Tensor | None, upto: int):
        from interp.fastpath import run_tree

        self.outputs = outputs  # [n, K, out]: the continuation tokens are outputs[..., :-1]
        self.tree = run_tree(model, prefix, outputs[:, :, :-1], record=True)
        # the source only lends head outputs, up to the highest ablated layer
        self.source = None if source_prefix is None else run_tree(model, source_prefix, outputs[:, :, :-1],
                                                                  record=True, upto=upto)

    def logprobs(self, first: Tensor, cont: Tensor, rows: Tensor) -> tuple[Tensor, Tensor]:
        from interp.metrics import tree_logprobs

        return tree_logprobs(first, cont, self.outputs[rows])


def _replacement(method: str, probe: _Probe, layer: int, mean_z: list[Tensor] | None
                 ) -> tuple[Tensor, Tensor]:
    """What ablated heads' outputs become at `layer`: [n, P, H, e] and [n, K, C, H, e]."""
    import torch

    tree: Tree = probe.tree
    zp, zc = tree.prefix_z[layer], tree.cont_z[layer]
    if method == "zero":
        return torch.zeros_like(zp[:1]), torch.zeros_like(zc[:1])
    if method == "mean":
        p, c = zp.shape[1], zc.shape[2]
        mean = mean_z[layer].to(zp.dtype)
        return mean[:p].unsqueeze(0), mean[p : p + c].view(1, 1, c, *mean.shape[1:])
    return probe.source.prefix_z[layer], probe.source.cont_z[layer]


def _ablated_logprobs(model, probe: _Probe, layer: int, masks: Tensor, method: str,
                      mean_z: list[Tensor] | None) -> tuple[Tensor, Tensor, Tensor]:
    """(logp [V, n, K, out], hit, first logits [V, n, vocab]) with heads masks[v] of `layer`
    ablated in variant v (masks [V, H])."""
    import torch

    from interp.fastpath import resume_tree

    tree = probe.tree
    n, k = probe.outputs.shape[:2]
    zp, zc = tree.prefix_z[layer], tree.cont_z[layer]
    rep_p, rep_c = _replacement(method, probe, layer, mean_z)
    per_batch = max(1, ROWS_PER_BATCH // (n * k))
    logps, hits, firsts = [], [], []
    for start in range(0, len(masks), per_batch):
        mask = masks[start : start + per_batch]
        v = len(mask)
        m_p = mask.view(v, 1, 1, -1, 1)
        m_c = mask.view(v, 1, 1, 1, -1, 1)
        new_p = torch.where(m_p, rep_p.unsqueeze(0), zp.unsqueeze(0)).reshape(v * n, *zp.shape[1:])
        new_c = torch.where(m_c, rep_c.unsqueeze(0), zc.unsqueeze(0)).reshape(v * n, *zc.shape[1:])
        rows = torch.arange(n, device=zp.device).repeat(v)
        first, cont = resume_tree(model, tree, layer, new_p, new_c, rows)
        logp, hit = probe.logprobs(first, cont, rows)
        logps.append(logp.view(v, n, *logp.shape[1:]))
        hits.append(hit.view(v, n, *hit.shape[1:]))
        firsts.append(first.view(v, n, -1))
    return torch.cat(logps), torch.cat(hits), torch.cat(firsts)


@no_grad
def effects_by_method(
    model: nn.Module,
    task: Task,
    idx: Int[Tensor, " n"],
    alt: Int[Tensor, " n"] | None,
    comps: list[tuple[str, int, tuple[int, ...]]],
    methods: tuple[str, ...],
    mean_z: list[Tensor] | None = None,
    table: Tensor | None = None,
) -> dict[str, dict[str, dict[str, Tensor]]]:
    """Per-example metrics (as `evaluate_examples`) with each component of `comps` ablated by each
    method, plus the unablated ones under the key "clean": {method: {component: metrics}}. The
    probe's recorded forward is shared by every method."""
    import torch

    from interp.fastpath import usable
    from interp.metrics import assemble, check_alt_selector, evaluate_examples

    methods = check_methods(methods)
    for method in methods:
        _check_inputs(method, task, mean_z, table)
    check_alt_selector(task, idx, alt)
    if not usable(model):
        clean = evaluate_examples(model, task, idx, alt)
        out = {}
        for method in methods:
            out[method] = {"clean": clean}
            for name, layer, heads in comps:
                ablated = _ablated_class()(model, {layer: heads}, method, task=task, mean_z=mean_z, table=table)
                out[method][name] = evaluate_examples(ablated, task, idx, alt)
        return out
    device = next(model.parameters()).device
    lay = task.layout
    dec = lay.decision_pos
    tokens = task.tokens[idx].to(device)
    resampled = "resample" in methods
    if task.has_candidates:
        outputs = task.candidates(idx).to(device)
    else:
        outputs = tokens[:, dec + 1 : lay.loss_pos[-1] + 2].unsqueeze(1)
    source = resample_tokens(task, tokens[:, : dec + 1], table) if resampled else None
    upto = max(c[1] for c in comps) if comps else 0
    probes = {"main": _Probe(model, tokens[:, : dec + 1], outputs, source, upto)}
    if task.has_selector and alt is not None:
        shuffled = task.with_selector(idx, alt).to(device)
        own = shuffled[:, dec + 1 : lay.loss_pos[-1] + 2].unsqueeze(1)
        source = resample_tokens(task, shuffled[:, : dec + 1], table) if resampled else None
        probes["shuffled"] = _Probe(model, shuffled[:, : dec + 1], own, source, upto)

    def metrics(main: tuple[Tensor, Tensor, Tensor], shuffled: tuple[Tensor, Tensor] | None) -> dict[str, Tensor]:
        logp, hit, first = (t.cpu() for t in main)
        if task.has_candidates:
            return assemble(task, idx, cand=(logp, hit, first), shuffled=shuffled)
        return assemble(task, idx, own=(logp[:, 0], hit[:, 0], first), shuffled=shuffled)

    def clean(probe: _Probe) -> tuple[Tensor, Tensor, Tensor]:
        rows = torch.arange(len(idx), device=device)
        logp, hit = probe.logprobs(probe.tree.first_logits, probe.tree.cont_logits, rows)
        return logp, hit, probe.tree.first_logits

    shuffled_of = lambda lp, fl: None if lp is None else (lp[:, 0].cpu(), fl.cpu())  # noqa: E731
    main_clean = clean(probes["main"])
    shuf_clean = clean(probes["shuffled"]) if "shuffled" in probes else None
    clean_metrics = metrics(main_clean, shuf_clean and shuffled_of(shuf_clean[0], shuf_clean[2]))
    n_heads = model.cfg.n_heads
    out = {}
    for method in methods:
        out[method] = {"clean": clean_metrics}
        for layer in sorted({c[1] for c in comps}):
            here = [c for c in comps if c[1] == layer]
            masks = torch.zeros(len(here), n_heads, dtype=torch.bool, device=device)
            for i, (_, _, heads) in enumerate(here):
                masks[i, list(heads)] = True
            main = _ablated_logprobs(model, probes["main"], layer, masks, method, mean_z)
            shuf = (_ablated_logprobs(model, probes["shuffled"], layer, masks, method, mean_z)
                    if "shuffled" in probes else None)
            for i, (name, _, _) in enumerate(here):
                out[method][name] = metrics(tuple(t[i] for t in main),
                                            shuf and shuffled_of(shuf[0][i], shuf[2][i]))
    return out


# ---------------------------------------------------------------------------- run level
@no_grad
def at_step(
    run: Run,
    step: int,
    *,
    model: nn.Module | None = None,
    methods: str | Iterable[str] = DEFAULTS["methods"],
    n_examples: int = DEFAULTS["n_examples"],
    heads: Iterable[str] | None = None,
    device: str = "cpu",
) -> pd.DataFrame:
    """Ablate every head and every whole layer (or only `heads`, e.g. ["L0H3"]) at `step`.

    Arguments: `methods` ("zero", "mean", "resample" or several), `n_examples` (probe size,
    seeded), `model` (the checkpoint already loaded, else `run.model(step)`).
    Returns one row per (method, component): step, method, component ("L0H3" or "L0" for a
    whole layer), layer, head (NA for a layer), then for each metric M of
    `interp.names.METRICS` the ablated value M, the unablated `clean_M` and `delta_M` =
    M - clean_M (losses and gaps in nats, accuracies as fractions), and n_examples.
    """
    from interp.metrics import summarize

    methods = check_methods(methods)
    task = run.task
    if model is None:
        model = run.model(step, device=device)
    device = str(next(model.parameters()).device)
    idx, alt = task.sample(n_examples, run.spec.seed, "probe")
    comps = components(model.cfg.n_layers, model.cfg.n_heads)
    if heads is not None:
        wanted = set(heads)
        unknown = wanted - {c[0] for c in comps}
        if unknown:
            raise InterpError(f"unknown component(s) {', '.join(sorted(unknown))}; this model has "
                              f"{', '.join(c[0] for c in comps)}")
        comps = [c for c in comps if c[0] in wanted]
    rows = []
    extra = {}
    if "mean" in methods:
        extra["mean_z"] = reference_mean_z(model, task, run.spec.seed)
    if "resample" in methods:
        extra["table"] = resample_table(task, run.spec.seed).to(device)
    every = effects_by_method(model, task, idx, alt, comps, methods, **extra)
    for method in methods:
        per = every[method]
        clean = summarize(per["clean"])
        for name, layer, hs in comps:
            values = summarize(per[name])
            row = {"step": step, "method": method, "component": name, "layer": layer,
                   "head": hs[0] if len(hs) == 1 else pd.NA}
            for m in METRICS:
                row[m] = values[m]
                row[f"clean_{m}"] = clean[m]
                row[f"delta_{m}"] = values[m] - clean[m]
            rows.append(row)
    df = pd.DataFrame(rows)
    df["head"] = df["head"].astype("Int64")
    df["n_examples"] = len(idx)
    return df


across = across_of("ablation", label=True)  # with a `label` column naming pre, mid, post
ENTRY = Analysis(
    "ablation", __name__, "zero, mean and resample ablation of every head and layer at tau/4, tau and 2 tau",
    steps="pre,mid,post", options=(ABLATION_METHOD, N_EXAMPLES), version=2, order=40, groups=(("circuits", 3),),
)


def at(run: Run, steps="pre,mid,post", method: str | Iterable[str] = "zero", n_examples: int = DEFAULT_EXAMPLES,
       device: str = "cpu", progress: bool = False) -> pd.DataFrame:
    """`across` under its former name (one method)."""
    return across(run, steps, progress=progress, methods=method, n_examples=n_examples, device=device)


# ---------------------------------------------------------------------------- findings and summary rows
def findings(run: Run, tables: dict, t: int | None, found: dict) -> dict:
    abl = tables["ablation"]
    if "routing_head" not in found:
        return {}
    methods = list(dict.fromkeys(abl["method"]))
    method = "zero" if "zero" in methods else methods[0]
    rows = abl[(abl["component"] == found["routing_head"]) & (abl["method"] == method)]
    out: dict = {"ablation_method": method, "ablation_methods": methods}
    for label in ("pre", "mid", "post", "last"):  # "last": the run's last step, read where 2 tau lies beyond it
        hit = rows[rows["label"].astype(str).str.split("/").apply(lambda parts: label in parts)] \
            if "label" in rows else rows.iloc[0:0]
        if not hit.empty:
            out[f"ablation_{label}_step"] = int(hit["step"].iloc[0])
            out[f"ablation_{label}_delta_loss_cand"] = float(hit["delta_loss_cand"].iloc[0])
            out[f"ablation_{label}_delta_loss_first"] = float(hit["delta_loss_first"].iloc[0])
    return out


def rows(f: dict, tables: dict) -> Rows:
    if "ablation_method" not in f:
        return []
    parts = [f"{lab} (step {f[f'ablation_{lab}_step']}) {f[f'ablation_{lab}_delta_loss_cand']:+.3f}"
             for lab in ("pre", "mid", "post", "last") if f"ablation_{lab}_step" in f]
    return [(f"{f['ablation_method']}-ablating {f['routing_head']}",
             "candidate loss change, nats: " + ("; ".join(parts) or "no step") + f" (log K = {f['log_k']:.3f})")]
