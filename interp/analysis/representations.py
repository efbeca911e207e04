"""Representations at the decision position: within-group against between-group variance.

At the decision position every example of a group shares its base B and differs only in z,
so the residual stream's variance over a probe of whole groups splits exactly into

- within  = mean over groups of (1/K) sum_k ||x_gk - mean_k x_gk||^2: what z adds;
- between = (1/G) sum_g ||mean_k x_gk - grand mean||^2: what B adds;
- total   = mean over examples of ||x_gk - grand mean||^2 = within + between;

read after the embeddings ("embed", blocks.0.hook_resid_pre = hook_embed + hook_pos_embed,
layer -1) and after every layer ("L0", "L1", ...: blocks.{l}.hook_resid_post). Within is 0
at a site exactly when nothing before it carries z to the decision position (the embeddings
there are the same SEP token for every example, so the "embed" site has within = between = 0);
the author saw the within-group variance rise through the transition, the inverse of neural
collapse (docs/diagnostics.md, "Representations").

`decision_residuals` (one forward over the probe, cache limited to the hooks read, decision
position only: `decision_record`) is shared with the logit lens (`interp.analysis.lens`) and the
head sensitivity (`interp.analysis.sensitivity`): given the same model object, as the suite gives
every analysis at a checkpoint, the forward runs once for the three.
"""

from __future__ import annotations

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.analysis.common import across_of, get_act_name, group_examples, probe_groups, shared
from interp.analysis.registry import Analysis, N_GROUPS
from interp.errors import InterpError
from interp.runs import Run
from interp.task import Task

DEFAULT_GROUPS = 64
DEFAULTS = {"n_groups": DEFAULT_GROUPS}
CHUNK_GROUPS = 256  # groups per forward pass (bounds the cache when n_groups is None)


def site_names(n_layers: int) -> list[str]:
    """The residual-stream sites, in layer order: "embed" (layer -1), then "L0", "L1", ..."""
    return ["embed"] + [f"L{l}" for l in range(n_layers)]


def resid_hooks(n_layers: int) -> list[str]:
    """The hook of each site of `site_names`: the stream before block 0, then after each block."""
    return ["blocks.0.hook_resid_pre"] + [f"blocks.{l}.hook_resid_post" for l in range(n_layers)]


@torch.no_grad()
def decision_record(
    model: nn.Module,
    task: Task,
    groups: Int[Tensor, " g"],
    chunk_groups: int = CHUNK_GROUPS,
) -> list[dict[str, Tensor | list[Tensor]]]:
    """What one forward per chunk of groups records at the decision position, chunk by chunk: "resid", the
    residual stream at every site (embed, L0, L1, ...) [site, n, d_model] on the CPU; per layer, "pattern", the
    decision row of the attention pattern [n, head, key], and "z", the head outputs there [n, head, d_head]
    (views of the recorded activations, on the model's device). Inputs stop at the decision position and the
    cache holds only these hooks. Computed once per model and probe (`interp.analysis.common.shared`) and read
    by representations, the logit lens and the head sensitivity alike."""
    if not hasattr(model, "run_with_cache") or not hasattr(model, "cfg"):
        raise InterpError(f"the residual stream is read from a TransformerLens HookedTransformer; got "
                          f"{type(model).__name__}")
    if len(groups) == 0:
        raise InterpError("the probe needs at least one group, got none")
    key = ("decision_record", task, tuple(groups.tolist()), chunk_groups)
    return shared(model, key, lambda: _record(model, task, groups, chunk_groups))


def _record(model: nn.Module, task: Task, groups: Int[Tensor, " g"], chunk_groups: int) -> list[dict]:
    dec = task.layout.decision_pos
    n_layers = model.cfg.n_layers
    names = resid_hooks(n_layers)
    patterns = [get_act_name("pattern", l) for l in range(n_layers)]
    zs = [get_act_name("z", l) for l in range(n_layers)]
    wanted = set(names) | set(patterns) | set(zs)
    device = next(model.parameters()).device
    parts = []
    for start in range(0, len(groups), chunk_groups):
        idx = group_examples(task, groups[start : start + chunk_groups])
        tokens = task.tokens[idx, : dec + 1].to(device)
        _, cache = model.run_with_cache(tokens, names_filter=lambda name: name in wanted, return_type=None)
        parts.append({"resid": torch.stack([cache[name][:, dec] for name in names]).cpu(),
                      "pattern": [cache[name][:, :, dec].clone() for name in patterns],  # not the whole pattern
                      "z": [cache[name][:, dec] for name in zs]})
    return parts


def decision_residuals(
    model: nn.Module,
    task: Task,
    groups: Int[Tensor, " g"],
    chunk_groups: int = CHUNK_GROUPS,
) -> Float[Tensor, "site n d_model"]:
    """The residual stream at the decision position at every site (embed, L0, L1, ...) for the
    examples of `groups` (group-major, each group's K selectors in order), in the model's dtype:
    from `decision_record`, one cheap forward per chunk of groups, shared with the other analyses
    that read the same probe from the same model."""
    return torch.cat([part["resid"] for part in decision_record(model, task, groups, chunk_groups)], dim=1)


def variance_split(x: Float[Tensor, "site g k d_model"]) -> dict[str, Float[Tensor, " site"]]:
    """within, between, total and ratio (float64) of each site's [G, K, d] vectors.

    Vectors are shifted by the first example first: variances are unchanged, and a site where
    every vector is the same (the embeddings at the decision position, a SEP token) then gives
    exact zeros rather than rounding noise, so its ratio is NaN, not 0/1e-30."""
    x = x.double()
    x = x - x[:, :1, :1]
    group_mean = x.mean(2, keepdim=True)  # [site, g, 1, d]
    grand = group_mean.mean(1, keepdim=True)  # [site, 1, 1, d] (groups have equal size K)
    within = (x - group_mean).pow(2).sum(-1).mean((1, 2))
    between = (group_mean - grand).pow(2).sum(-1).mean((1, 2))
    total = (x - grand).pow(2).sum(-1).mean((1, 2))
    ratio = torch.where(between > 0, within / torch.where(between > 0, between, 1.0),
                        torch.full_like(between, float("nan")))
    return {"within": within, "between": between, "total": total, "ratio": ratio}


def at_step(run: Run, step: int, *, model: nn.Module | None = None, n_groups: int | None = DEFAULT_GROUPS,
            device: str = "cpu") -> pd.DataFrame:
    """Within- and between-group variance of the decision-position residual stream after the
    embeddings and after every layer, at `step`, over a seeded probe of `n_groups` whole groups
    (all groups when None; the same probe as the sensitivity analysis for the same n_groups).

    Returns one row per site: step, layer (-1 for the embeddings, else the block index), site
    ("embed", "L0", "L1", ...), within, between and total (mean squared distance, in squared
    residual-stream units; total = within + between), ratio (within / between, dimensionless;
    NaN where between is 0), n_groups (G, the probe's groups; K examples each).
    """
    task = run.task
    groups = probe_groups(task, n_groups, run.spec.seed)
    if model is None:
        model = run.model(step, device=device)
    resid = decision_residuals(model, task, groups)
    split = variance_split(resid.view(resid.shape[0], len(groups), task.k, -1))
    sites = site_names(model.cfg.n_layers)
    df = pd.DataFrame({"step": step, "layer": range(-1, len(sites) - 1), "site": sites})
    for name in ("within", "between", "total", "ratio"):
        df[name] = split[name].numpy()
    df["n_groups"] = len(groups)
    return df


across = across_of("representations")
ENTRY = Analysis(
    "representations", __name__,
    "within-group (z) and between-group (B) variance of the decision position's residual stream after each layer",
    options=(N_GROUPS,), order=110, groups=(("diagnostics", 3),),
)
