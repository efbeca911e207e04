"""Headline findings from the analysis tables: the routing head, when it carries z and when
z is used, the ablation effect around tau, the collective snap and the top patched head.

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


def findings(run: Run, tables: dict[str, pd.DataFrame], t: int | None, params: dict | None = None) -> dict:
    """Headline numbers: routing head, its carried and used onsets and leads, ablation effect,
    collective snap, top patched head."""
    out: dict = {"tau": t, "log_k": run.log_k, "onset_fraction": ONSET_FRACTION, "onset_m": ONSET_M,
                 "used_ablation_nats": USED_ABLATION_NATS, "used_patch_fraction": USED_PATCH_FRACTION}
    sens = tables.get("sensitivity")
    if sens is not None and not sens.empty:
        routing = routing_head(sens)
        carried = carried_onsets(sens, routing)
        last = sens[sens["step"] == sens["step"].max()].set_index("head_name")
        out.update({
            "routing_head": routing,
            "routing_layer": int(last.loc[routing, "layer"]),
            "routing_z_share": float(last.loc[routing, "z_share"]),
            "routing_attn_to_z": float(last.loc[routing, "attn_to_z"]),
            "runner_up_z_share": float(last["z_share"].drop(routing).max()) if len(last) > 1 else None,
            "onset": carried["z_share"],
            "lead": lead(t, carried["z_share"]),
            "carried_attn_onset": carried["attn_to_z"],
            "carried_attn_lead": lead(t, carried["attn_to_z"]),
            "carried_share_onset": carried["z_share"],
            "carried_share_lead": lead(t, carried["z_share"]),
        })
    usage = tables.get("usage")
    if usage is not None and not usage.empty:
        head = out.get("routing_head") or str(usage["head_name"].iloc[0])
        used = used_onsets(usage, head)
        out.update({
            "usage_head": head,
            "used_ablation_onset": used["ablation"],
            "used_ablation_lead": lead(t, used["ablation"]),
            "used_patching_onset": used["patching"],
            "used_patching_lead": lead(t, used["patching"]),
        })
    abl = tables.get("ablation")
    if abl is not None and not abl.empty and "routing_head" in out:
        methods = list(dict.fromkeys(abl["method"]))
        method = "zero" if "zero" in methods else methods[0]
        rows = abl[(abl["component"] == out["routing_head"]) & (abl["method"] == method)]
        for label in ("pre", "mid", "post"):
            hit = rows[rows["label"].astype(str).str.split("/").apply(lambda parts: label in parts)] \
                if "label" in rows else rows.iloc[0:0]
            if not hit.empty:
                out[f"ablation_{label}_step"] = int(hit["step"].iloc[0])
                out[f"ablation_{label}_delta_loss_cand"] = float(hit["delta_loss_cand"].iloc[0])
                out[f"ablation_{label}_delta_loss_first"] = float(hit["delta_loss_first"].iloc[0])
        out["ablation_method"] = method
        out["ablation_methods"] = methods
    acc = tables.get("groups")
    if acc is not None and not acc.empty and t:
        from interp.analysis import groups

        share = groups.share_above(acc, t, fractions=(0.5,))
        if not share.empty:
            out["groups_share_above_80_at_half_tau"] = float(share["share"].iloc[0])
            out["groups_half_tau_step"] = int(share["step"].iloc[0])
            out["groups_n"] = int(share["n_groups"].iloc[0])
        out["groups_spread"] = groups.spread(groups.snap_steps(acc), t)
    heads = tables.get("patching_heads")
    if heads is not None and not heads.empty:
        allpos = heads[heads["position"].isna()]
        step = int(allpos["step"].max())
        allpos = allpos[allpos["step"] == step]
        top = allpos.loc[allpos["patched_ld"].idxmax()]
        out["patching_step"] = step
        out["patching_top_head"] = str(top["head_name"])
        value = float(top["normalized"])
        out["patching_top_normalized"] = None if math.isnan(value) else value
    return out


def describe(findings: dict) -> list[str]:
    """The findings in a few human lines."""
    f = findings
    lines = []
    fmt = lambda v, spec="": "-" if v is None else format(v, spec)  # noqa: E731
    lines.append(f"tau (tau_half)        {fmt(f.get('tau'))}")
    if "routing_head" in f:
        lines.append(
            f"routing head          {f['routing_head']} (z-share {f['routing_z_share']:.3f} at the last step, "
            f"next best {fmt(f.get('runner_up_z_share'), '.3f')}; attention to z {f['routing_attn_to_z']:.3f})"
        )
        lines.append(
            f"z carried             attention-to-z onset at step {fmt(f.get('carried_attn_onset'))} "
            f"(lead {fmt(f.get('carried_attn_lead'), '.2f')}), z-share onset at step "
            f"{fmt(f.get('carried_share_onset'))} (lead {fmt(f.get('carried_share_lead'), '.2f')}); "
            f"{int(100 * f['onset_fraction'])}% of the rise, held {f['onset_m']} checkpoints"
        )
    if "usage_head" in f:
        lines.append(
            f"z used                resample ablation > {f['used_ablation_nats']} nats from step "
            f"{fmt(f.get('used_ablation_onset'))} (lead {fmt(f.get('used_ablation_lead'), '.2f')}), "
            f"patching > {f['used_patch_fraction']:.0%} from step {fmt(f.get('used_patching_onset'))} "
            f"(lead {fmt(f.get('used_patching_lead'), '.2f')})"
        )
    if "ablation_method" in f:
        parts = [f"{lab} (step {f[f'ablation_{lab}_step']}): {f[f'ablation_{lab}_delta_loss_cand']:+.3f}"
                 for lab in ("pre", "mid", "post") if f"ablation_{lab}_step" in f]
        lines.append(f"{f['ablation_method']}-ablating {f['routing_head']}  candidate loss change, nats: "
                     + "; ".join(parts) + f"  (log K = {f['log_k']:.3f})")
    if "groups_share_above_80_at_half_tau" in f:
        n = f["groups_n"]
        k = round(f["groups_share_above_80_at_half_tau"] * n)
        spread = f["groups_spread"]
        extra = ""
        if "iqr_over_tau" in spread:
            extra = f"; group snap steps: median {spread['median']:.0f}, IQR {spread['iqr_over_tau']:.2f} tau"
        lines.append(f"collective snap       {k} of {n} groups >= 80% accurate at tau/2 "
                     f"(step {f['groups_half_tau_step']}){extra}")
    if "patching_top_head" in f:
        lines.append(f"patching (step {f['patching_step']})  top head {f['patching_top_head']}, "
                     f"normalised {fmt(f['patching_top_normalized'], '.2f')}")
    return lines


def describe_geometry(tables: dict) -> list[str]:
    """One line per step of the geometry analyses that were run (Hessian extremes, LLC)."""
    lines = []
    hess = tables.get("hessian")
    if hess is not None and len(hess):
        for step, df in hess.groupby("step", sort=True):
            r = df.iloc[0]
            lines.append(f"hessian  step {int(step):<6} lambda_min {r['lambda_min']:+.4g}  lambda_max "
                         f"{r['lambda_max']:.4g}  anisotropy {r['anisotropy']:.3g}  |cos(g, v_min)| "
                         f"{r['cos_grad_vmin']:.3f}  (n = {r['n_examples']}, max residual {df['residual'].max():.1e})")
    llc = tables.get("llc")
    if llc is not None and len(llc):
        per = llc.groupby(["step", "restrict"], sort=True)[["llc_mean", "llc_std"]].first().reset_index()
        for step, df in per.groupby("step", sort=True):
            parts = [f"{r.restrict} {r.llc_mean:.4g} +- {r.llc_std:.2g}" for r in df.itertuples()]
            lines.append(f"llc      step {int(step):<6} " + ", ".join(parts))
    return lines
