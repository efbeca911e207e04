"""The cached analysis tables of a run reduced to scalars on the checkpoint axis, for TensorBoard and W&B.

Nothing is computed: `cached_tables(run)` reads what `interp analyze` (or a report, a timeline) left in the
run's cache, under whichever parameters hold the most steps (`ResultCache.cached_any`), and the tables each
analysis derives from its own (the attention mass per segment, the circuit per step). `scalars(tables)` turns
them into one tidy frame (step, tag, value): a tag is `TABLE/COLUMN[/SERIES]`, the series named by the row's
identifying columns (a head, a method and component, a segment, ...), e.g. `sensitivity/z_share/L0H3`,
`ablation/delta_loss_cand/zero/L0H3`, `patching_heads/normalized/L0H3`, `edges_circuit/size`,
`edges/score/L0H3->logits`, `hessian/lambda_max/all`. The routing head's series (the head with the largest
z-share at the last cached step, as the findings read it) are there again under `routing/`, without the head's
name (`routing/sensitivity/z_share`, `routing/ablation/delta_loss_cand/zero`, `routing/patching_heads/normalized`):
runs whose routing heads differ compare on one tag. Where several rows share a step and a series (a value
repeated on every row of its step, as the Hessian's lambda_max), the first is taken: every value is one of the
table's own numbers, exactly. `REDUCTIONS` says which columns of each table; a table it does not name (a new
analysis's) is reduced by its string columns (the series) and float columns (the values).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import pandas as pd


@dataclass(frozen=True)
class Reduce:
    """The series of a table: `values` (numeric columns), one series per value of `by` (identifying columns),
    on the rows where every `where` column holds its value."""

    by: tuple[str, ...] = ()
    values: tuple[str, ...] = ()
    where: dict = field(default_factory=dict)


REDUCTIONS: dict[str, Reduce | None] = {
    "sensitivity": Reduce(("head_name",), ("z_share", "attn_to_z", "z_var", "out_norm")),
    "attention": None,  # every query and key: exported as attention_segments (the decision position's mass)
    "attention_segments": Reduce(("head_name", "segment"), ("mass",)),
    "groups": None,  # one row per group: exported as groups_summary (`_groups`)
    "ablation": Reduce(("method", "component"), ("delta_loss_cand", "delta_loss_first", "delta_shuffle_gap",
                                                 "delta_acc_cand")),
    "patching_heads": Reduce(("head_name",), ("normalized", "patched_ld"), {"segment": "all"}),
    "patching_residual": Reduce(("layer", "position"), ("normalized",)),
    "usage": Reduce(("head_name",), ("resample_delta_loss_cand", "resample_delta_loss_first", "patch_normalized")),
    "edges": None,  # every edge: exported as the scores of the edges ever in the circuit (`_edges`)
    "edges_curve": None,  # every circuit size: exported as edges_circuit
    "edges_circuit": Reduce((), ("size", "faithfulness")),
    "edges_onsets": None,  # one row per edge, no step
    "hessian": Reduce(("restrict",), ("lambda_max", "lambda_min", "anisotropy", "grad_norm", "cos_grad_vmin", "loss")),
    "hessian_escape": Reduce(("component", "part"), ("mass",)),
    "llc": Reduce(("restrict",), ("llc_mean", "llc_std", "init_loss")),
    "trajectory": Reduce(("component",), ("displacement_per_step", "cosine", "weight_norm")),
    "spectra": Reduce(("head_name", "circuit"), ("sigma_1", "sigma_ratio", "effective_rank")),
    "spectra_values": None,  # every singular value: its summaries are in spectra
    "representations": Reduce(("site",), ("within", "between", "ratio")),
    "lens": Reduce(("site",), ("loss_cand_over_log_k", "acc_cand", "loss_first")),
}
GROUP_THRESHOLD = 0.8  # groups_summary/share_above_80: the share of groups at least this accurate (the report's)


def cached_tables(run) -> tuple[dict[str, dict[str, pd.DataFrame]], list[str]]:
    """{analysis: {table: frame}} of every analysis with a cached step (its derived tables added), and the
    cache's notes (entries not used: damaged, edited). Reads only; computes nothing."""
    from interp.analysis import registry
    from interp.analysis.cache import ResultCache

    store = ResultCache(run)
    out: dict[str, dict[str, pd.DataFrame]] = {}
    for name, entry in registry.REGISTRY.items():
        tables = store.cached_any(entry.cache_key(entry.params({})))
        if not tables or all(df.empty for df in tables.values()):
            continue
        derive = entry.hook("derive")
        if derive is not None and all(name in tables and not tables[name].empty for name in entry.table_names):
            tables = {**tables, **derive(run, tables)}
        out[name] = tables
    notes = list(store.notes)
    root = run.path / "cache"
    for entry in sorted(root.glob("*/*/step_*.json")) if root.is_dir() else ():  # what no reader can take: named
        if not entry.is_file():
            notes.append(f"{entry} is not a file (a folder?): that cache entry is left out; remove it and run the "
                         f"analysis again")
    return out, notes


def _name(column: str, value) -> str:
    if isinstance(value, str):
        return value
    return f"{column}{value}"


def reduce_table(name: str, df: pd.DataFrame, how: Reduce) -> pd.DataFrame:
    """(step, tag, value) of one table under `how`; NaN and missing values are left out."""
    if df.empty or "step" not in df.columns:
        return _empty()
    for column, value in how.where.items():
        df = df[df[column] == value]
    values = [c for c in how.values if c in df.columns]
    by = [c for c in how.by if c in df.columns]
    rows = []
    for keys, part in df.groupby(["step", *by], sort=True, dropna=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        series = "/".join(_name(c, k) for c, k in zip(by, keys[1:]))
        first = part.iloc[0]
        for column in values:
            value = first[column]
            if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
                continue
            rows.append((int(keys[0]), f"{name}/{column}" + (f"/{series}" if series else ""), float(value)))
    return pd.DataFrame(rows, columns=["step", "tag", "value"])


def _generic(df: pd.DataFrame) -> Reduce:
    """A table REDUCTIONS does not name: its string columns name the series, its float columns are the values."""
    by = tuple(c for c in df.columns if c != "step" and (pd.api.types.is_string_dtype(df[c]) or df[c].dtype == object))
    values = tuple(c for c in df.columns if c != "step" and pd.api.types.is_float_dtype(df[c]))
    return Reduce(by, values)


def _groups(df: pd.DataFrame) -> pd.DataFrame:
    """The groups table per step: the share of groups at least GROUP_THRESHOLD accurate, the mean accuracy and loss."""
    rows = []
    for step, part in df.groupby("step", sort=True):
        acc = part["acc_cand"].to_numpy(dtype=float)
        rows += [(int(step), "groups_summary/share_above_80", float((acc >= GROUP_THRESHOLD).mean())),
                 (int(step), "groups_summary/mean_acc_cand", float(acc.mean())),
                 (int(step), "groups_summary/mean_loss_cand", float(part["loss_cand"].to_numpy(dtype=float).mean()))]
    return pd.DataFrame(rows, columns=["step", "tag", "value"])


def _edges(df: pd.DataFrame) -> pd.DataFrame:
    """The scores of the edges that are in the circuit at some step, at every step."""
    ever = set(df.loc[df["in_circuit"].astype(bool), "edge"])
    return reduce_table("edges", df[df["edge"].isin(ever)], Reduce(("edge",), ("score",)))


SPECIAL = {"groups": _groups, "edges": _edges}
ROUTED = ("sensitivity/", "ablation/", "patching_heads/", "usage/")  # tables whose per-head series `routing/` repeats


def _routing(frame: pd.DataFrame, tables: dict) -> pd.DataFrame:
    """The routing head's series again, as routing/TABLE/COLUMN[/rest]: the head's name taken out of the tag."""
    sens = tables.get("sensitivity", {}).get("sensitivity")
    if sens is None or sens.empty:
        return _empty()
    from interp.analysis.findings import routing_head

    head = routing_head(sens)
    parts = frame["tag"].str.split("/")
    keep = frame["tag"].str.startswith(ROUTED) & parts.map(lambda p: head in p[2:])
    out = frame[keep].copy()
    out["tag"] = ["routing/" + "/".join(x for x in p if x != head) for p in parts[keep]]
    return out


def scalars(tables: dict[str, dict[str, pd.DataFrame]]) -> pd.DataFrame:
    """Every cached table of `cached_tables` as (step, tag, value) rows, sorted by tag then step."""
    parts = [_empty()]
    for analysis in tables.values():
        for name, df in analysis.items():
            if name in SPECIAL:
                parts.append(SPECIAL[name](df))
                continue
            how = REDUCTIONS.get(name, _generic(df))
            if how is not None:
                parts.append(reduce_table(name, df, how))
    out = pd.concat([p for p in parts if len(p)] or [_empty()], ignore_index=True)
    out = pd.concat([out, _routing(out, tables)], ignore_index=True)
    return out.sort_values(["tag", "step"], kind="stable").reset_index(drop=True)


def metric_values(row: dict) -> dict[str, float]:
    """A metrics.jsonl row's numbers under their own names (the step is the axis; missing and NaN values,
    written as null in the log, are left out)."""
    out = {}
    for key, value in row.items():
        if key == "step" or isinstance(value, bool) or not isinstance(value, numbers.Real):
            continue
        if not math.isnan(float(value)):
            out[key] = float(value)
    return out


def _empty() -> pd.DataFrame:
    return pd.DataFrame({"step": pd.Series([], dtype="int64"), "tag": pd.Series([], dtype=object),
                         "value": pd.Series([], dtype="float64")})
