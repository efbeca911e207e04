"""Head z-sensitivity at the decision position, per (layer, head), across checkpoints.

For a probe of whole groups (each base B with all K selectors; up to the decision position
the K examples of a group differ only in z):

- `attn_to_z`: attention mass from the decision position to the z positions, averaged over
  the probe (read from hook_pattern).
- `z_share`: the share of the head output's variance explained by z. The head output is
  hook_z @ W_O at the decision position; its total variance over the probe splits into a
  within-group part (only z varies within a group) and a between-group part (B varies);
  z_share = within / total.
- `z_var`: the within-group variance itself (squared norm, per example), so that a head whose
  output is tiny but z-driven can be told from a head that writes z into the stream.
- `out_norm`: mean norm of the head output.

The routing head is the one with the largest z_share at the last analysed step.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import pandas as pd
from jaxtyping import Float, Int

from interp.analysis.common import across_of, head_name, no_grad, probe_groups
from interp.analysis.findings import Rows, carried_onsets, lead, routing_head  # routing_head: re-exported
from interp.analysis.registry import Analysis, N_GROUPS
from interp.formatting import fmt
from interp.runs import Run
from interp.task import Task

# torch is imported where the code computes, so that reading cached results (a report's findings) never loads it;
# where torch is already loaded (the tests), its names are bound here for jaxtyping's runtime checks of the annotations
if TYPE_CHECKING or "torch" in sys.modules:
    from torch import Tensor, nn

DEFAULT_GROUPS = 64
COLUMNS = ("attn_to_z", "z_share", "z_var", "out_norm")


@no_grad
def head_sensitivity(
    model: nn.Module,
    task: Task,
    groups: Int[Tensor, " g"],
    chunk_groups: int = 256,
    device: str = "cpu",
) -> dict[str, Float[Tensor, "layer head"]]:
    """Every COLUMNS entry as a [layer, head] table for one model. The activations are those of
    `representations.decision_record` (one forward per chunk of groups, shared with representations
    and the logit lens), on the model's own device (`device` is not used)."""
    import torch

    from interp.analysis.representations import decision_record

    layout = task.layout
    k = task.k
    z_pos = list(layout.z_pos)
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    d_model = model.cfg.d_model
    attn_sum = torch.zeros(n_layers, n_heads, dtype=torch.float64)
    within = torch.zeros(n_layers, n_heads, dtype=torch.float64)
    out_sum = torch.zeros(n_layers, n_heads, d_model, dtype=torch.float64)
    out_sq = torch.zeros(n_layers, n_heads, dtype=torch.float64)
    norm_sum = torch.zeros(n_layers, n_heads, dtype=torch.float64)
    n_total = 0
    record = decision_record(model, task, groups, chunk_groups)
    for start, part in zip(range(0, len(groups), chunk_groups), record):
        g = len(groups[start : start + chunk_groups])
        for layer in range(n_layers):
            pattern = part["pattern"][layer]  # [b, head, key]: the decision row
            attn_sum[layer] += pattern[:, :, z_pos].sum(-1).sum(0).double().cpu()
            z = part["z"][layer]  # [b, head, d_head]: the decision position
            out = torch.einsum("bhe,hed->bhd", z, model.blocks[layer].attn.W_O).double().cpu()
            grouped = out.view(g, k, n_heads, d_model)
            within[layer] += (grouped - grouped.mean(1, keepdim=True)).pow(2).sum(-1).sum((0, 1))
            out_sum[layer] += out.sum(0)
            out_sq[layer] += out.pow(2).sum(-1).sum(0)
            norm_sum[layer] += out.norm(dim=-1).sum(0)
        n_total += g * k
    total = out_sq - out_sum.pow(2).sum(-1) / n_total
    z_share = torch.where(total > 1e-12, within / total.clamp_min(1e-12), torch.full_like(total, float("nan")))
    return {
        "attn_to_z": (attn_sum / n_total).float(),
        "z_share": z_share.float(),
        "z_var": (within / n_total).float(),
        "out_norm": (norm_sum / n_total).float(),
    }


DEFAULTS = {"n_groups": DEFAULT_GROUPS}


def at_step(run: Run, step: int, *, model: nn.Module | None = None, n_groups: int | None = DEFAULT_GROUPS,
            device: str = "cpu") -> pd.DataFrame:
    """Head z-sensitivity at the decision position at `step`, over a seeded probe of `n_groups`
    whole groups (all groups when None).

    Returns one row per (layer, head): step, layer, head, head_name, attn_to_z (attention mass
    from the decision position to the z positions, 0..1), z_share (share of the head output's
    variance explained by z, 0..1), z_var (within-group variance, squared norm in residual
    units), out_norm (mean norm of the head output), n_groups.
    """
    import torch

    task = run.task
    groups = probe_groups(task, n_groups, run.spec.seed)
    if model is None:
        model = run.model(step, device=device)
    device = str(next(model.parameters()).device)
    tables = head_sensitivity(model, task, groups, device=device)
    n_layers, n_heads = tables["z_share"].shape
    layer = torch.arange(n_layers).repeat_interleave(n_heads)
    head = torch.arange(n_heads).repeat(n_layers)
    df = pd.DataFrame({"step": step, "layer": layer.numpy(), "head": head.numpy()})
    df["head_name"] = [head_name(l, h) for l, h in zip(df["layer"], df["head"])]
    for name in COLUMNS:
        df[name] = tables[name].reshape(-1).numpy()
    df["n_groups"] = len(groups)
    return df


across = across_of("sensitivity")
ENTRY = Analysis(
    "sensitivity", __name__, "per-head attention to z and z-share at the decision position, every checkpoint",
    options=(N_GROUPS,), order=10, groups=(("circuits", 1),),
)


# ---------------------------------------------------------------------------- findings and summary rows
def findings(run: Run, tables: dict, t: int | None, found: dict) -> dict:
    """The routing head, read at the last step of the table (`routing_step`); when that is not
    the run's last saved step, `routing_after` lists the later saved steps and
    `routing_unreadable_after` those of them whose checkpoint could not be read."""
    sens = tables["sensitivity"]
    routing = routing_head(sens)
    carried = carried_onsets(sens, routing)
    step = int(sens["step"].max())
    last = sens[sens["step"] == step].set_index("head_name")
    after = [s for s in run.steps if s > step]
    return {
        "routing_head": routing,
        "routing_step": step,
        "routing_after": after,
        "routing_unreadable_after": [s for s in after if s in found.get("unreadable_steps", ())],
        "routing_layer": int(last.loc[routing, "layer"]),
        "routing_z_share": float(last.loc[routing, "z_share"]),
        "routing_attn_to_z": float(last.loc[routing, "attn_to_z"]),
        "runner_up_z_share": float(last["z_share"].drop(routing).max()) if len(last) > 1 else None,
        "carried_attn_onset": carried["attn_to_z"],
        "carried_attn_lead": lead(t, carried["attn_to_z"]),
        "carried_share_onset": carried["z_share"],
        "carried_share_lead": lead(t, carried["z_share"]),
    }


def routing_at(f: dict) -> str:
    """Where the routing head was read, when not at the run's last step: at which step and why."""
    step, after, bad = f.get("routing_step"), f.get("routing_after") or [], f.get("routing_unreadable_after") or []
    if step is None or not after:
        return ""
    if bad:
        names = ", ".join(str(s) for s in bad)
        return f" at step {step} ({'step' if len(bad) == 1 else 'steps'} {names} {'is' if len(bad) == 1 else 'are'} " \
               "unreadable)"
    return f" at step {step} (the last analysed; the run's last is {after[-1]})"


def rows(f: dict, tables: dict) -> Rows:
    if "routing_head" not in f:
        return []
    at = routing_at(f)
    return [
        ("routing head", f"{f['routing_head']}{at} (z-share {f['routing_z_share']:.3f} at "
                         f"{'that step' if at else 'the last step'}, next best "
                         f"{fmt(f.get('runner_up_z_share'), '.3f')}; attention to z {f['routing_attn_to_z']:.3f})"),
        ("z carried", f"attention to z from step {fmt(f.get('carried_attn_onset'), none='never')} "
                      f"(lead {fmt(f.get('carried_attn_lead'), '.2f')}), z-share from step "
                      f"{fmt(f.get('carried_share_onset'), none='never')} (lead {fmt(f.get('carried_share_lead'), '.2f')}); "
                      f"onset: {int(100 * f['onset_fraction'])}% of the rise, held {f['onset_m']} checkpoints"),
    ]
