"""Per-run circuit columns of a sweep table (`Sweep.table(circuits=True)`): what the analysis
suite found in each run, read from the run's cache alone.

Nothing is computed here and no checkpoint is loaded: `interp analyze SWEEP`
(`interp.sweeps.analyze`) fills each run's cache, and these columns read it back through the
suite's cache-only mode (`run_suite(compute=False)`), so they are exactly the findings
`interp analyze RUN` prints. An analysis that is missing at any of its steps is left out whole,
never read from part of its series; every value that cannot be had is NaN (or None for the
head) and `circuits_reason` says why: the run is not done, it never reached tau_half
(censored, so there is no tau to place the analyses), an analysis has not been run, or a cache
entry it needs is damaged (named, with its file: recomputed by the next `interp analyze SWEEP`). The
shuffle gap's onset and lead come from the metrics log and are among the plain table's
measures (`interp.collections.rows`).
"""

from __future__ import annotations

import math

from interp.analysis.registry import GROUPS
from interp.errors import InterpError

# the analyses the columns read, with their default parameters (`--only circuits`); the attribution runs only when
# asked (`--only attribution`): its column is read where it is cached, and is NaN (with no reason) where it is not
CIRCUIT_ANALYSES = GROUPS["circuits"]
OPTIONAL = ("attribution",)
# column -> the findings key it holds (interp.analysis.findings)
FINDINGS = {
    "routing_head": "routing_head",
    "routing_layer": "routing_layer",
    "routing_z_share": "routing_z_share",
    "carried_attn_onset": "carried_attn_onset",
    "carried_attn_lead": "carried_attn_lead",
    "carried_share_onset": "carried_share_onset",
    "carried_share_lead": "carried_share_lead",
    "used_ablation_onset": "used_ablation_onset",
    "used_ablation_lead": "used_ablation_lead",
    "used_patching_onset": "used_patching_onset",
    "used_patching_lead": "used_patching_lead",
    "ablation_method": "ablation_method",
    "ablation_tau_step": "ablation_mid_step",
    "ablation_at_tau": "ablation_mid_delta_loss_cand",
    "groups_above_80_at_half_tau": "groups_share_above_80_at_half_tau",
    "decodable_onset": "decodable_onset",
    "decodable_lead": "decodable_lead",
    "decodable_site": "decodable_site",
    "routing_attribution": "attribution_routing",
}
TEXT_COLUMNS = ("routing_head", "ablation_method", "decodable_site")
CIRCUIT_COLUMNS = (*FINDINGS, "circuits_reason")


def empty_row(reason: str | None) -> dict:
    """Every circuit column unknown, with the reason."""
    row = {c: (None if c in TEXT_COLUMNS else math.nan) for c in FINDINGS}
    row["circuits_reason"] = reason
    return row


def circuit_row(run, state: str, censored: bool) -> dict:
    """One run's circuit columns (see the module's docstring); `state` is the point's state
    and `censored` whether a finished run never reached tau_half."""
    if run is None or state != "done":
        return empty_row(f"the run is {state}")
    if censored:
        return empty_row("censored: the run never reached tau_half, so the analyses have no tau to place their steps")
    from interp.analysis.suite import run_suite

    try:
        result = run_suite(run, only=CIRCUIT_ANALYSES + OPTIONAL, progress=False, compute=False)
    except InterpError as exc:
        return empty_row(f"cannot be read: {exc}")
    row = empty_row(None)
    found = result.findings
    for column, key in FINDINGS.items():
        value = found.get(key)
        if value is not None:
            row[column] = value if column in TEXT_COLUMNS else float(value)
    reasons = []
    hint = f"interp analyze {run.path.parent}"  # the sweep's (or the family's) folder, which holds the run
    damaged = {name: result.damaged[name] for name in result.missing if result.damaged.get(name)}
    if damaged:  # entries the cache refused: named as damaged, never as not analysed
        notes = "; ".join(note for by_step in damaged.values() for note in by_step.values())
        reasons.append(f"damaged cache entries: {notes} (recompute them: {hint})")
    unanalysed = [name for name, steps in result.missing.items() if not set(steps) <= set(damaged.get(name, {}))
                  and name not in OPTIONAL]
    if unanalysed:
        reasons.append(f"not analysed: {', '.join(unanalysed)} (run: {hint})")
    if row["routing_head"] is not None:
        for column, label in (("carried_attn_onset", "attention to z"), ("carried_share_onset", "z-share"),
                              ("used_ablation_onset", "ablation cost"), ("used_patching_onset", "patching")):
            analysed = column.startswith("carried") or "usage" not in result.missing
            if analysed and math.isnan(row[column]):
                reasons.append(f"no {label} onset within the run")
    row["circuits_reason"] = "; ".join(reasons) or None
    return row
