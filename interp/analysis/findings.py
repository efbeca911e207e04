"""Headline findings from the analysis tables and their human summary: `findings` and
`summary_rows` walk the registry, calling each analysis's own pair of functions (`findings` and
`rows` in its module, found by those names): the routing head, when it carries z and when z is
used, the ablation effect around tau, the collective snap, the top patched head, the geometry.
Every caller (the CLI, the report) renders the same rows. What several analyses share lives here.

The routing head's two kinds of onset (docs/definitions.md, "Routing head"):
- carried: the onsets of its attention to z and of its z-share (the first checkpoint at which
  the series has made `ONSET_FRACTION` of its own rise and stays there `ONSET_M` checkpoints);
- used: the first checkpoint from which resample-ablating it costs more than
  `USED_ABLATION_NATS` of candidate loss, and the first from which patching it restores more
  than `USED_PATCH_FRACTION` of the logit difference (each held `ONSET_M` checkpoints).
Each comes with its lead over tau, (tau - onset) / tau.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from interp.analysis import registry
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
        if any(df is not None and not df.empty for df in present) and (own := entry.hook("findings")) is not None:
            out.update(own(run, tables, t, out))
    return out


def summary_rows(found: dict, tables: dict[str, pd.DataFrame] | None = None) -> Rows:
    """The findings as (label, text) rows: the one rendering used by `interp analyze` and the report.
    Given `tables`, an analysis none of whose tables is there is not asked (its module is not imported:
    a cached report of the default analyses loads no geometry code, nor torch)."""
    rows: Rows = []
    for entry in registry.REGISTRY.values():
        if tables is not None and not any(tables.get(name) is not None and not tables[name].empty
                                          for name in entry.table_names):
            continue
        if (own := entry.hook("rows")) is not None:
            rows.extend(own(found, tables or {}))
    return rows
