"""The analysis suite behind `interp analyze`: every analysis of a run, cached, plus findings.

Sensitivity, attention and per-group accuracy run at every saved step; ablation at pre, mid
and post (tau/4, tau, 2 tau); patching at mid. Results are cached in the run folder, so a
second call computes only what is new.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
from tqdm.auto import tqdm

from interp.analysis import ablation, attention, groups, patching, sensitivity
from interp.analysis.cache import ResultCache
from interp.analysis.common import select_steps
from interp.errors import InterpError
from interp.runs import Run
from interp.transition import ONSET_FRACTION, ONSET_M, rise_onset, tau

ANALYSES = ("sensitivity", "attention", "groups", "ablation", "patching")


@dataclass
class SuiteResult:
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    findings: dict = field(default_factory=dict)
    cache_hits: int = 0
    cache_misses: int = 0


def _parse_only(only) -> tuple[str, ...]:
    if only is None:
        return ANALYSES
    names = [s.strip() for s in (only.split(",") if isinstance(only, str) else only) if s.strip()]
    unknown = [n for n in names if n not in ANALYSES]
    if unknown or not names:
        raise InterpError(f"unknown analysis {', '.join(unknown) or '(none)'}; allowed: {', '.join(ANALYSES)}")
    return tuple(names)


def run_suite(
    run: Run,
    only=None,
    steps=None,
    method: str = "zero",
    n_groups: int | None = None,
    device: str = "cpu",
    progress: bool = True,
    cache: bool = True,
) -> SuiteResult:
    """Run the chosen analyses (all by default) and derive the headline findings.

    `steps` overrides the default steps of every chosen analysis (all saved steps for the
    per-step analyses, pre/mid/post for ablation, mid for patching).
    """
    names = _parse_only(only)
    if method not in ablation.METHODS:
        raise InterpError(f"unknown ablation method {method!r}; allowed: {', '.join(ablation.METHODS)}")
    store = ResultCache(run, enabled=cache)
    t = tau(run)
    every = [s for s, _ in select_steps(run, steps)]
    relative = lambda default: select_steps(run, steps if steps is not None else default)  # noqa: E731
    plan: dict[str, list[tuple[int, str]]] = {}
    if t is None and steps is None:
        for name in ("ablation", "patching"):
            if name in names:
                raise InterpError(
                    f"{name} defaults to steps relative to tau, but {run.path} never reaches 0.5 log K; "
                    f"pass --steps"
                )
    for name in names:
        if name == "ablation":
            plan[name] = relative("pre,mid,post")
        elif name == "patching":
            plan[name] = relative("mid")
        else:
            plan[name] = [(s, "") for s in every]
    total = sum(len(v) for v in plan.values())
    bar = tqdm(total=total, desc="analyze", unit="step", disable=not progress, leave=False)
    result = SuiteResult()
    dev = {"device": device}
    for name in names:
        bar.set_description(name)
        chosen = [s for s, _ in plan[name]]
        labels = dict((s, lab) for s, lab in plan[name])
        if name == "sensitivity":
            p = {"n_groups": n_groups or sensitivity.DEFAULT_GROUPS}
            df = store.per_step(name, p, chosen, lambda s: sensitivity.at_step(run, s, **p, **dev), bar.update)
        elif name == "attention":
            p = {"n_groups": n_groups or attention.DEFAULT_GROUPS}
            df = store.per_step(name, p, chosen, lambda s: attention.at_step(run, s, **p, **dev), bar.update)
            result.tables["attention_segments"] = attention.segments(df, run.task)
        elif name == "groups":
            p = {"n_groups": n_groups or groups.DEFAULT_GROUPS}
            df = store.per_step(name, p, chosen, lambda s: groups.at_step(run, s, **p, **dev), bar.update)
        elif name == "ablation":
            p = {"method": method, "n_examples": ablation.DEFAULT_EXAMPLES}
            df = store.per_step(name, p, chosen, lambda s: ablation.at_step(run, s, **p, **dev), bar.update)
            df["label"] = df["step"].map(labels).fillna("")
        else:
            p = {"n_pairs": patching.DEFAULT_PAIRS}
            heads = store.per_step("patching_heads", p, chosen, lambda s: patching.heads(run, s, **p, **dev))
            df = store.per_step("patching_residual", p, chosen,
                                lambda s: patching.residual(run, s, **p, **dev), bar.update)
            result.tables["patching_heads"] = heads
            name = "patching_residual"
        result.tables[name] = df
    bar.close()
    result.cache_hits, result.cache_misses = store.hits, store.misses
    result.findings = findings(run, result.tables, t)
    return result


def findings(run: Run, tables: dict[str, pd.DataFrame], t: int | None) -> dict:
    """Headline numbers: routing head, its onset and lead, ablation effect, collective snap."""
    out: dict = {"tau": t, "log_k": run.log_k, "onset_fraction": ONSET_FRACTION, "onset_m": ONSET_M}
    sens = tables.get("sensitivity")
    if sens is not None and not sens.empty:
        routing = sensitivity.routing_head(sens)
        series = sens[sens["head_name"] == routing].sort_values("step")
        onset = rise_onset(series["step"], series["z_share"])
        last = sens[sens["step"] == sens["step"].max()].set_index("head_name")
        out.update({
            "routing_head": routing,
            "routing_layer": int(last.loc[routing, "layer"]),
            "routing_z_share": float(last.loc[routing, "z_share"]),
            "routing_attn_to_z": float(last.loc[routing, "attn_to_z"]),
            "runner_up_z_share": float(last["z_share"].drop(routing).max()) if len(last) > 1 else None,
            "onset": onset,
            "lead": None if (onset is None or not t) else (t - onset) / t,
        })
    abl = tables.get("ablation")
    if abl is not None and not abl.empty and "routing_head" in out:
        rows = abl[abl["component"] == out["routing_head"]]
        for label in ("pre", "mid", "post"):
            hit = rows[rows["label"] == label]
            if not hit.empty:
                out[f"ablation_{label}_step"] = int(hit["step"].iloc[0])
                out[f"ablation_{label}_delta_loss_cand"] = float(hit["delta_loss_cand"].iloc[0])
                out[f"ablation_{label}_delta_loss_first"] = float(hit["delta_loss_first"].iloc[0])
        out["ablation_method"] = str(abl["method"].iloc[0])
    acc = tables.get("groups")
    if acc is not None and not acc.empty and t:
        share = groups.share_above(acc, t, fractions=(0.5,))
        out["groups_share_above_80_at_half_tau"] = float(share["share"].iloc[0])
        out["groups_half_tau_step"] = int(share["step"].iloc[0])
        out["groups_n"] = int(share["n_groups"].iloc[0])
        out["groups_spread"] = groups.spread(groups.snap_steps(acc), t)
    heads = tables.get("patching_heads")
    if heads is not None and not heads.empty:
        allpos = heads[heads["position"].isna()]
        top = allpos.loc[allpos["patched_ld"].idxmax()]
        out["patching_step"] = int(top["step"])
        out["patching_top_head"] = str(top["head_name"])
        out["patching_top_normalized"] = float(top["normalized"])
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
            f"onset / lead          onset at step {fmt(f.get('onset'))} "
            f"({int(100 * f['onset_fraction'])}% of its rise, held {f['onset_m']} checkpoints); "
            f"lead (tau - onset) / tau = {fmt(f.get('lead'), '.2f')}"
        )
    if "ablation_mid_delta_loss_cand" in f:
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
