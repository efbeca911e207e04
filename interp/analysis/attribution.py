"""Direct logit attribution: which components write the logit difference that picks the right candidate.

At the decision position, the final residual stream is a sum of components: the embeddings (token and position),
every head's output (its hook_z through its W_O), every layer's attention bias b_O, and every MLP's output. The
model's logit difference between the correct first target character c* and the mean of the other K - 1 candidates'
first characters is, through the final LayerNorm with its scale frozen at its value on the clean run (the field's
convention: TransformerLens's `apply_ln_to_stack`; a component is centred over d_model and divided by that scale),

    logit(c*) - mean_j logit(c_j) = sum over components of  centred(component) / scale . (w_ln * d)
                                    + b_ln . d + b_U[c*] - mean_j b_U[c_j],      d = W_U[:, c*] - mean_j W_U[:, c_j],

so each component's attribution is its term of the sum, in nats of logit difference, and the components and the
bias terms add up to the logit difference exactly (`check`). Averaged over every example of the task where D is at
most `n_examples` (10,000: the demo's 3,000 whole), otherwise over a seeded sample of that size (per-head means over
256 examples differ from the full data's by up to 0.04 nats on the demo: a sample decides no ranking). Its test:
equal to TransformerLens's own `cache.stack_head_results(apply_ln=True)` projected on the same direction.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import pandas as pd
from jaxtyping import Float, Int

from interp.analysis.common import across_of, no_grad
from interp.analysis.findings import Rows
from interp.analysis.registry import Analysis, N_EXAMPLES
from interp.errors import InterpError
from interp.runs import Run
from interp.seeding import torch_generator

# torch is imported where the code computes, so that reading cached results (a report's findings) never loads it;
# where torch is already loaded (the tests), its names are bound here for jaxtyping's runtime checks of the annotations
if TYPE_CHECKING or "torch" in sys.modules:
    from torch import Tensor, nn

DEFAULTS = {"n_examples": 10_000}
CHUNK = 1024
COLUMNS = ("step", "component", "kind", "layer", "head", "attribution", "attribution_std", "n_examples")


def examples(task, n_examples: int, seed: int) -> Int[Tensor, " n"]:
    """Every example when D <= n_examples, else a seeded sample of n_examples (sorted)."""
    import torch

    if n_examples >= task.size:
        return torch.arange(task.size)
    gen = torch_generator(seed, "reference")
    return torch.randperm(task.size, generator=gen)[:n_examples].sort().values


def directions(model: nn.Module, task, idx: Int[Tensor, " n"]) -> tuple[Float[Tensor, "n d"], Float[Tensor, " n"]]:
    """Per example, d = W_U[:, c*] - mean over the other candidates of W_U[:, c_j], and the bias terms'
    contribution b_ln . d + b_U[c*] - mean_j b_U[c_j]."""
    import torch

    cands = task.candidates(idx)[:, :, 0]  # [n, K] first characters
    correct = task.selector_id[idx]
    k = task.k
    w_u, b_u = model.W_U.detach(), model.b_U.detach()
    cols = w_u[:, cands].permute(1, 2, 0)  # [n, K, d]
    own = cols[torch.arange(len(idx)), correct]
    others = (cols.sum(1) - own) / (k - 1)
    d = own - others
    b_cands = b_u[cands]
    b_own = b_cands[torch.arange(len(idx)), correct]
    bias = d @ model.ln_final.b.detach() + b_own - (b_cands.sum(1) - b_own) / (k - 1)
    return d, bias


@no_grad
def per_example(model: nn.Module, task, idx: Int[Tensor, " n"]) -> dict[str, Tensor]:
    """Each component's attribution for each example ("embed", per layer "attn_bias", "heads" [n, layers, heads],
    "mlp"), the bias terms, and the model's own logit difference, all [n, ...] float64."""
    import torch

    if model.cfg.normalization_type != "LN":
        raise InterpError(f"direct logit attribution here reads a LayerNorm's frozen scale; normalization_type "
                          f"{model.cfg.normalization_type!r} is not supported")
    dec = task.layout.decision_pos
    n_layers, device = model.cfg.n_layers, next(model.parameters()).device
    names = {"hook_embed", "hook_pos_embed", "ln_final.hook_scale"} | {
        f"blocks.{l}.attn.hook_z" for l in range(n_layers)} | {f"blocks.{l}.hook_mlp_out" for l in range(n_layers)}
    parts: dict[str, list] = {key: [] for key in ("embed", "attn_bias", "heads", "mlp", "bias", "logit_diff")}
    w_ln = model.ln_final.w.detach()

    def centred(x):
        return x - x.mean(-1, keepdim=True)

    for start in range(0, len(idx), CHUNK):
        part = idx[start:start + CHUNK]
        tokens = task.tokens[part, : dec + 1].to(device)
        logits, cache = model.run_with_cache(tokens, names_filter=lambda name: name in names)
        scale = cache["ln_final.hook_scale"][:, dec]  # [n, 1]
        d, bias = directions(model, task, part)
        d = d.to(device)
        wd = (d * w_ln).double()  # [n, d_model]

        def project(x):  # [n, ..., d_model] -> [n, ...]: centred, over the frozen scale, on w_ln * d
            x = centred(x.double()) / scale.double().view(-1, *([1] * (x.dim() - 1)))
            return torch.einsum("n...d,nd->n...", x, wd)

        parts["embed"].append(project(cache["hook_embed"][:, dec] + cache["hook_pos_embed"][:, dec]))
        heads, biases, mlps = [], [], []
        for l in range(n_layers):
            z = cache[f"blocks.{l}.attn.hook_z"][:, dec]  # [n, heads, d_head]
            heads.append(project(torch.einsum("nhe,hem->nhm", z, model.blocks[l].attn.W_O.detach())))
            b_o = model.blocks[l].attn.b_O.detach().expand(len(part), -1)
            biases.append(project(b_o))
            mlps.append(project(cache[f"blocks.{l}.hook_mlp_out"][:, dec]))
        parts["heads"].append(torch.stack(heads, 1))
        parts["attn_bias"].append(torch.stack(biases, 1))
        parts["mlp"].append(torch.stack(mlps, 1))
        parts["bias"].append(bias.double().to(device))
        cands = task.candidates(part)[:, :, 0].to(device)
        own = task.selector_id[part].to(device)
        chosen = logits[:, dec].double().gather(1, cands)  # [n, K]
        mine = chosen.gather(1, own.view(-1, 1)).squeeze(1)
        parts["logit_diff"].append(mine - (chosen.sum(1) - mine) / (task.k - 1))
    return {key: torch.cat(values).cpu() for key, values in parts.items()}


def check(values: dict[str, Tensor]) -> Float[Tensor, " n"]:
    """The logit difference the components and bias terms add up to, less the model's own (about 0)."""
    total = (values["embed"] + values["heads"].sum((1, 2)) + values["attn_bias"].sum(1) + values["mlp"].sum(1)
             + values["bias"])
    return total - values["logit_diff"]


def at_step(run: Run, step: int, *, model: nn.Module | None = None, n_examples: int = DEFAULTS["n_examples"],
            device: str = "cpu") -> pd.DataFrame:
    """The direct logit attribution at `step` (module docstring): one row per component (the embeddings, each head
    L{l}H{h}, each layer's attention bias L{l}.b_O, each MLP L{l}.mlp), and rows "bias" (b_ln and b_U's terms),
    "total" (all of the above) and "logit_diff" (the model's own); attribution in nats (the mean over the
    examples), attribution_std its spread over them."""
    task = run.task
    if not (task.has_candidates and task.has_selector):
        raise InterpError(f"direct logit attribution to the correct candidate needs a direction whose output is A "
                          f"and that has a selector; {task.spec.direction!r} has not")
    if model is None:
        model = run.model(step, device=device)
    idx = examples(task, n_examples, run.spec.seed)
    values = per_example(model, task, idx)
    n_layers, n_heads = values["heads"].shape[1:]
    rows = [("embed", "embed", -1, -1, values["embed"])]
    for l in range(n_layers):
        rows += [(f"L{l}H{h}", "head", l, h, values["heads"][:, l, h]) for h in range(n_heads)]
        rows += [(f"L{l}.b_O", "attn_bias", l, -1, values["attn_bias"][:, l]), (f"L{l}.mlp", "mlp", l, -1, values["mlp"][:, l])]
    rows.append(("bias", "bias", -1, -1, values["bias"]))
    rows.append(("total", "total", -1, -1, values["logit_diff"] + check(values)))
    rows.append(("logit_diff", "logit_diff", -1, -1, values["logit_diff"]))
    return pd.DataFrame([{"step": step, "component": name, "kind": kind, "layer": layer, "head": head,
                          "attribution": float(v.mean()), "attribution_std": float(v.std()) if len(v) > 1 else 0.0,
                          "n_examples": len(v)} for name, kind, layer, head, v in rows], columns=list(COLUMNS))


across = across_of("attribution")
ENTRY = Analysis(
    "attribution", __name__,
    "direct logit attribution of every head, MLP and the embeddings to the correct candidate's logit difference",
    default=False, options=(N_EXAMPLES,), order=28, groups=(("decoding", 3),),
)


def findings(run: Run, tables: dict, t: int | None, found: dict) -> dict:
    table = tables.get("attribution")
    if table is None or table.empty:
        return {}
    last = table[table["step"] == table["step"].max()]
    heads = last[last["kind"] == "head"].sort_values("attribution", ascending=False)
    out = {"attribution_step": int(last["step"].iloc[0]),
           "attribution_top_head": str(heads["component"].iloc[0]) if len(heads) else None,
           "attribution_top": float(heads["attribution"].iloc[0]) if len(heads) else None,
           "attribution_logit_diff": float(last.loc[last["kind"] == "logit_diff", "attribution"].iloc[0])}
    routing = found.get("routing_head")
    if routing is not None and (heads["component"] == routing).any():
        out["attribution_routing"] = float(heads.loc[heads["component"] == routing, "attribution"].iloc[0])
    return out


def rows(found: dict, tables: dict) -> Rows:
    if "attribution_step" not in found or found.get("attribution_top_head") is None:
        return []
    routing = ("" if found.get("attribution_routing") is None else
               f"; the routing head {found.get('routing_head')} writes {found['attribution_routing']:+.3f}")
    return [("logit attribution", f"at step {found['attribution_step']}, {found['attribution_top_head']} writes the most "
                                  f"of the correct candidate's logit difference ({found['attribution_top']:+.3f} of "
                                  f"{found['attribution_logit_diff']:+.3f} nats){routing}")]
