"""Headline findings from the analysis tables and their human summary, one pair of functions
per analysis (each registry entry names its own): the routing head, when it carries z and when
z is used, the ablation effect around tau, the collective snap, the top patched head, the
geometry. `findings` and `summary_rows` walk the registry; every caller (the CLI, the report)
renders the same rows.

The routing head's two kinds of onset (docs/definitions.md, "Routing head"):
- carried: the onsets of its attention to z and of its z-share (the first checkpoint at which
  the series has made `ONSET_FRACTION` of its own rise and stays there `ONSET_M` checkpoints);
- used: the first checkpoint from which resample-ablating it costs more than
  `USED_ABLATION_NATS` of candidate loss, and the first from which patching it restores more
  than `USED_PATCH_FRACTION` of the logit difference (each held `ONSET_M` checkpoints).
Each comes with its lead over tau, (tau - onset) / tau.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from interp.analysis import registry
from interp.formatting import fmt
from interp.runs import Run
from interp.transition import ONSET_FRACTION, ONSET_M, onset, rise_onset

USED_ABLATION_NATS = 0.1  # resample-ablating the head costs more than this much candidate loss
USED_PATCH_FRACTION = 0.2  # patching the head restores more than this share of the logit difference


def lead(t: int | None, step: int | None) -> float | None:
    return None if (step is None or not t) else (t - step) / t


def routing_head(sens: pd.DataFrame, column: str = "z_share") -> str:
    """The head with the largest `column` at the last step in `sens`."""
    last = sens[sens["step"] == sens["step"].max()]
    return str(last.loc[last[column].idxmax(), "head_name"])


def carried_onsets(sens: pd.DataFrame, head: str, fraction: float = ONSET_FRACTION, m: int = ONSET_M
                   ) -> dict[str, int | None]:
    """Onsets of the head's attention to z and z-share (relative to each series' own rise)."""
    series = sens[sens["head_name"] == head].sort_values("step")
    return {column: rise_onset(series["step"], series[column], fraction, m) if len(series) else None
            for column in ("attn_to_z", "z_share")}


def used_onsets(usage: pd.DataFrame, head: str, ablation_nats: float = USED_ABLATION_NATS,
                patch_fraction: float = USED_PATCH_FRACTION, m: int = ONSET_M) -> dict[str, int | None]:
    """First checkpoints from which the head's z is used: resample ablation and patching.
    A normalised patching value that is undefined (clean ~ corrupt) counts as not restored."""
    rows = usage[usage["head_name"] == head].sort_values("step")
    if rows.empty:
        return {"ablation": None, "patching": None}
    restored = rows["patch_normalized"].astype(float).fillna(-np.inf)
    return {
        "ablation": onset(rows["step"], rows["resample_delta_loss_cand"].astype(float), ablation_nats, m=m),
        "patching": onset(rows["step"], restored, patch_fraction, m=m),
    }


Rows = list[tuple[str, str]]


def findings(run: Run, tables: dict[str, pd.DataFrame], t: int | None, unreadable=()) -> dict:
    """Headline numbers of every analysis whose tables are present (in registry order, so the
    routing head is known before the analyses that read it). `unreadable`: the steps whose
    checkpoint could not be read (listed as `unreadable_steps` when there are any), so that the
    findings can say why they were read at an earlier step than the run's last."""
    out: dict = {"tau": t, "log_k": run.log_k, "onset_fraction": ONSET_FRACTION, "onset_m": ONSET_M,
                 "used_ablation_nats": USED_ABLATION_NATS, "used_patch_fraction": USED_PATCH_FRACTION}
    if unreadable:
        out["unreadable_steps"] = sorted(int(s) for s in unreadable)
    for entry in registry.REGISTRY.values():
        present = [tables.get(name) for name in entry.table_names]
        if entry.findings and any(df is not None and not df.empty for df in present):
            out.update(registry.resolve(entry.findings)(run, tables, t, out))
    return out


def summary_rows(found: dict, tables: dict[str, pd.DataFrame] | None = None) -> Rows:
    """The findings as (label, text) rows: the one rendering used by `interp analyze` and the report."""
    rows: Rows = []
    for entry in registry.REGISTRY.values():
        if entry.describe:
            rows.extend(registry.resolve(entry.describe)(found, tables or {}))
    return rows


# ---------------------------------------------------------------------------- per analysis
def sensitivity_findings(run: Run, tables: dict, t: int | None, found: dict) -> dict:
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


def sensitivity_rows(f: dict, tables: dict) -> Rows:
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


def usage_findings(run: Run, tables: dict, t: int | None, found: dict) -> dict:
    usage = tables["usage"]
    head = found.get("routing_head") or str(usage["head_name"].iloc[0])
    used = used_onsets(usage, head)
    return {"usage_head": head, "used_ablation_onset": used["ablation"], "used_ablation_lead": lead(t, used["ablation"]),
            "used_patching_onset": used["patching"], "used_patching_lead": lead(t, used["patching"])}


def usage_rows(f: dict, tables: dict) -> Rows:
    if "usage_head" not in f:
        return []
    return [("z used", f"resample-ablating {f['usage_head']} costs > {f['used_ablation_nats']} nats from step "
                       f"{fmt(f.get('used_ablation_onset'), none='never')} (lead {fmt(f.get('used_ablation_lead'), '.2f')}); "
                       f"patching restores > {f['used_patch_fraction']:.0%} from step "
                       f"{fmt(f.get('used_patching_onset'), none='never')} (lead {fmt(f.get('used_patching_lead'), '.2f')})")]


def ablation_findings(run: Run, tables: dict, t: int | None, found: dict) -> dict:
    abl = tables["ablation"]
    if "routing_head" not in found:
        return {}
    methods = list(dict.fromkeys(abl["method"]))
    method = "zero" if "zero" in methods else methods[0]
    rows = abl[(abl["component"] == found["routing_head"]) & (abl["method"] == method)]
    out: dict = {"ablation_method": method, "ablation_methods": methods}
    for label in ("pre", "mid", "post"):
        hit = rows[rows["label"].astype(str).str.split("/").apply(lambda parts: label in parts)] \
            if "label" in rows else rows.iloc[0:0]
        if not hit.empty:
            out[f"ablation_{label}_step"] = int(hit["step"].iloc[0])
            out[f"ablation_{label}_delta_loss_cand"] = float(hit["delta_loss_cand"].iloc[0])
            out[f"ablation_{label}_delta_loss_first"] = float(hit["delta_loss_first"].iloc[0])
    return out


def ablation_rows(f: dict, tables: dict) -> Rows:
    if "ablation_method" not in f:
        return []
    parts = [f"{lab} (step {f[f'ablation_{lab}_step']}) {f[f'ablation_{lab}_delta_loss_cand']:+.3f}"
             for lab in ("pre", "mid", "post") if f"ablation_{lab}_step" in f]
    return [(f"{f['ablation_method']}-ablating {f['routing_head']}",
             "candidate loss change, nats: " + ("; ".join(parts) or "no step") + f" (log K = {f['log_k']:.3f})")]


def groups_findings(run: Run, tables: dict, t: int | None, found: dict) -> dict:
    from interp.analysis import groups

    acc = tables["groups"]
    if not t:
        return {}
    out: dict = {}
    share = groups.share_above(acc, t, fractions=(0.5,))
    if not share.empty:
        out["groups_share_above_80_at_half_tau"] = float(share["share"].iloc[0])
        out["groups_half_tau_step"] = int(share["step"].iloc[0])
        out["groups_n"] = int(share["n_groups"].iloc[0])
    out["groups_spread"] = groups.spread(groups.snap_steps(acc), t)
    return out


def groups_rows(f: dict, tables: dict) -> Rows:
    if "groups_share_above_80_at_half_tau" not in f:
        return []
    n = f["groups_n"]
    share = f["groups_share_above_80_at_half_tau"]
    spread = f.get("groups_spread") or {}
    extra = (f"; group snap steps: median {spread['median']:.0f}, IQR {spread['iqr_over_tau']:.2f} τ"
             if "iqr_over_tau" in spread else "")
    return [("collective snap", f"{round(share * n)} of {n} groups ({100 * share:.1f}%) ≥ 80% accurate at τ/2 "
                                f"(step {f['groups_half_tau_step']}){extra}")]


def patching_findings(run: Run, tables: dict, t: int | None, found: dict) -> dict:
    heads = tables["patching_heads"]
    allpos = heads[heads["position"].isna()]
    step = int(allpos["step"].max())
    allpos = allpos[allpos["step"] == step]
    top = allpos.loc[allpos["patched_ld"].idxmax()]
    value = float(top["normalized"])
    return {"patching_step": step, "patching_top_head": str(top["head_name"]),
            "patching_top_normalized": None if math.isnan(value) else value}


def patching_rows(f: dict, tables: dict) -> Rows:
    if "patching_top_head" not in f:
        return []
    return [("patching", f"top head {f['patching_top_head']} at step {f['patching_step']}, restores "
                         f"{fmt(f['patching_top_normalized'], '.2f')} of the logit difference")]


def hessian_rows(f: dict, tables: dict) -> Rows:
    """One row per step of the Hessian extremes that were computed."""
    hess = tables.get("hessian")
    if hess is None or not len(hess):
        return []
    rows = []
    for step, df in hess.groupby("step", sort=True):
        r = df.iloc[0]
        rows.append((f"hessian step {int(step)}",
                     f"lambda_min {r['lambda_min']:+.4g}  lambda_max {r['lambda_max']:.4g}  anisotropy "
                     f"{r['anisotropy']:.3g}  |cos(g, v_min)| {r['cos_grad_vmin']:.3f}  (n = {r['n_examples']}, "
                     f"max residual {df['residual'].max():.1e})"))
    return rows


def llc_rows(f: dict, tables: dict) -> Rows:
    """One row per step of the learning coefficients that were computed."""
    llc = tables.get("llc")
    if llc is None or not len(llc):
        return []
    per = llc.groupby(["step", "restrict"], sort=True)[["llc_mean", "llc_std"]].first().reset_index()
    return [(f"llc step {int(step)}", ", ".join(f"{r.restrict} {r.llc_mean:.4g} +- {r.llc_std:.2g}" for r in df.itertuples()))
            for step, df in per.groupby("step", sort=True)]
