"""A measured family's numbers kept as a small CSV, so that a later rule change re-judges it without retraining.

`keep(path, csv)` writes one row per run (a run, a sweep's runs) or per fork (a family's forks): the columns
of its table that the reconciliation rows read (`Sweep.table(circuits=True)`, `ForkFamily.table()`), the
run's setting (model, K, n_bases, lr, batch size, checkpoint spacing), the per-run values of the mechanism
evidence (the share of groups at tau/2 as counts, direction consistency, the Hessian and gradient numbers)
and, for a family, its design facts (the Gamma window, whether it forks a relapsed state). `rejudge(csv)`
rebuilds the reconciliation table from that file alone, by the same gathering code as `reconcile`
(docs/data/ holds the measured ones; docs/reconciliation.md re-judges them).
"""

from __future__ import annotations

import math
from pathlib import Path

from interp.errors import InterpError
from interp.mechanisms.reconcile import FIELDS, Gathered, _fork_arms, _from_evidence, _lead_values, rows_of, table_claims
from interp.mechanisms.reconcile_table import ReconcileTable

EVIDENCE = ("coverage", "coverage_k", "coverage_n", "random_walk", "random_walk_transition", "spinodal", "anisotropy",
            "noise_signal", "coherence", "cancellation_snr", "entropic_curvature")
RUN_LEAD = ("gap_lead", "gap_onset", "gap_lead_author", "gap_onset_author", "carried_attn_onset")


def _setting(spec) -> dict:
    return {"n_layers": spec.model.n_layers, "n_heads": spec.model.n_heads, "d_model": spec.model.d_model,
            "d_mlp": spec.model.d_mlp, "checkpoint_every": spec.train.checkpoint_every}


def _evidence(ev) -> dict:
    return {f"ev_{k}": ev.values.get(k, math.nan) for k in EVIDENCE} | {"ev_tau": ev.tau}


def keep(path, csv) -> Path:
    """Write the CSV of a run, sweep or fork family folder (read from its caches: nothing is computed)."""
    import pandas as pd

    from interp.collections.folders import FAMILY, RUN, SWEEP, kind_of, open as open_folder
    from interp.files import atomic_write_bytes
    from interp.mechanisms.evidence import run_evidence

    kind, obj = kind_of(path), open_folder(path)
    if kind == RUN:
        from interp.sweeps.circuits import circuit_row

        ev = run_evidence(obj, compute=False)
        lead = _lead_values(obj)
        row = {"kind": "run", "run": obj.name, "status": "done", "k": obj.spec.task.k, "n_bases": obj.spec.task.n_bases,
               "lr": obj.spec.train.lr, "batch_size": obj.spec.train.batch_size, **_setting(obj.spec), **_evidence(ev),
               "gap_lead": lead["ours"]["gap_lead"], "gap_onset": lead["ours"]["gap_onset"],
               "gap_lead_author": lead["author"]["gap_lead"], "gap_onset_author": lead["author"]["gap_onset"],
               "carried_attn_onset": circuit_row(obj, "done", censored=ev.tau is None).get("carried_attn_onset")}
        table = pd.DataFrame([row])
    elif kind == SWEEP:
        table = obj.table(circuits=True)
        extra = []
        for name, status in zip(table["run"], table["status"]):
            if status != "done":  # pending or interrupted: kept as a row of the table, nothing of it is read
                extra.append({})
                continue
            run = obj.run(str(name))
            ev = run_evidence(run, compute=False)
            extra.append({**_setting(run.spec), **_evidence(ev)})
        table = pd.concat([table.reset_index(drop=True), pd.DataFrame(extra)], axis=1).assign(kind="sweep")
    elif kind == FAMILY:
        from interp.mechanisms.fork_measures import family_relapsed as _relapsed

        table = obj.table()
        parent = obj.parent
        table = table.assign(kind="fork family", relapsed=_relapsed(obj),
                             gamma_window=obj.design.get("gamma_window"), gamma_every=obj.design.get("gamma_every"),
                             **_setting(parent.spec))
    else:
        raise InterpError(f"{path} is not a run, sweep or fork family folder")
    table = table.assign(source=str(obj.design["parent"]) if kind == FAMILY else str(obj.path),
                         replicate=_replicate(kind, obj))
    text = table.to_csv(index=False)
    out = Path(csv)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out, text.encode())
    return out


def _replicate(kind: str, obj) -> str:
    """The command that adds replicates of what the folder measured (as `reconcile` names it), kept so that a
    re-judged row recommends a command that runs, never one naming the CSV."""
    from interp.collections.folders import FAMILY, RUN
    from interp.mechanisms import commands
    from interp.mechanisms.reconcile_rules import FIT, FORKS_PER_ARM, RUNS

    if kind == RUN:
        return commands.run_seeds(obj.spec, str(obj.path), RUNS.n)
    if kind == FAMILY:
        return commands.family_seeds(obj, FORKS_PER_ARM.n)
    return commands.sweep_seeds(obj, FIT.n)


def _settings_of(table) -> dict[str, list]:
    return {f: sorted({v for v in table[f].dropna().tolist()}) if f in table else [] for f in FIELDS}


def _run_evidence(table) -> list:
    from interp.mechanisms.evidence import RunEvidence
    from interp.mechanisms.rules import Measure

    out = []
    for r in table.to_dict("records"):
        if r.get("status") != "done" or "ev_tau" not in r:
            continue
        tau = r.get("ev_tau")
        ev = RunEvidence(str(r["run"]), None if tau is None or (isinstance(tau, float) and math.isnan(tau)) else int(tau))
        ev.values = {k: float(r[f"ev_{k}"]) for k in EVIDENCE if f"ev_{k}" in r and _finite(r[f"ev_{k}"])}
        ev.measures = {k: Measure(v) for k, v in ev.values.items() if k in ("coverage", "random_walk", "spinodal",
                                                                           "anisotropy", "noise_signal", "coherence",
                                                                           "cancellation_snr", "entropic_curvature")}
        if "coverage" in ev.values:  # one run's share of groups: its exact interval over its groups
            from interp.mechanisms.intervals import share_exact

            ev.measures["coverage"] = Measure.of(share_exact(int(ev.values["coverage_k"]), int(ev.values["coverage_n"])))
        out.append(ev)
    return out


def _finite(v) -> bool:
    import numbers

    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


KINDS = ("run", "sweep", "fork family")
# the columns each kind's rows are judged from (keep() writes them all); a table without one is refused, never read
# with a fallback (a dropped `escape` once fell back to `escape_half`, a dropped `gap_lead` gave NaN a verdict)
REQUIRED = {
    "run": ("run", "status", "k", "n_bases", "lr", "batch_size", "ev_tau", "gap_lead", "gap_onset", "gap_lead_author",
            "gap_onset_author", "carried_attn_onset"),
    "sweep": ("run", "status", "k", "n_bases", "D", "lr", "batch_size", "direction", "steps_run", "tau_half",
              "tau_window", "censored_tau_half", "gap_lead", "gap_onset", "gap_lead_author", "gap_onset_author",
              "censored_gap_lead", "ev_tau"),
    "fork family": ("run", "status", "fork_step", "arm", "arm_params", "fork_seed", "steps_run", "eval_every", "escape",
                    "censored_escape", "escape_half", "censored_escape_half", "relapsed", "gamma", "gamma_median", "lr",
                    "k", "n_bases"),
}
TEXT = {"run", "status", "kind", "arm", "arm_params", "direction", "error", "source", "replicate", "routing_head",
        "ablation_method", "circuits_reason", "escape_criterion", "gamma_range", "decodable_site", "label",
        "outcome"}
STATUSES = ("done", "failed", "interrupted", "not started", "damaged", "running")


def validate(table, where: str):
    """The kept table `table` (read from `where`) checked as a whole before anything is judged: one kind of table
    (KINDS), its columns (REQUIRED), numbers where numbers belong, true/false in the flags (censored_*, relapsed),
    each run (a family: each fork) once, a known status; one line naming what is wrong. Returns the table with
    its numeric and flag columns typed."""
    import pandas as pd

    if "kind" not in table or table.empty:
        raise InterpError(f"{where} is not a kept table (no 'kind' column, or no rows)")
    kinds = sorted({str(k) for k in table["kind"]})
    if len(kinds) != 1 or kinds[0] not in KINDS:
        bad = [k for k in kinds if k not in KINDS]
        raise InterpError(f"{where}: " + (f"kind {bad[0]!r} is not one of {', '.join(KINDS)}" if bad else
                                          f"its rows are of several kinds ({', '.join(kinds)}): a kept table is one "
                                          f"run, sweep or fork family"))
    kind = kinds[0]
    missing = [c for c in REQUIRED[kind] if c not in table.columns]
    if missing:
        raise InterpError(f"{where}: a kept {kind} table needs the column(s) {', '.join(missing)} (written by keep())")
    table = table.copy()
    for column in table.columns:
        if column.startswith("censored") or column == "relapsed":
            table[column] = _flags(table[column], column, where)
        elif column not in TEXT:
            values = pd.to_numeric(table[column], errors="coerce")
            bad = table[column].notna() & values.isna()
            if bad.any():
                row = int(bad.idxmax())
                raise InterpError(f"{where}: column {column} holds {table[column].iloc[row]!r} in row {row + 2} "
                                  f"(line {row + 2} of the file), not a number")
            table[column] = values
    duplicated = table["run"].astype(str)[table["run"].astype(str).duplicated()]
    if len(duplicated):
        raise InterpError(f"{where}: {duplicated.iloc[0]} has {int((table['run'].astype(str) == duplicated.iloc[0]).sum())} "
                          f"rows; each {'fork' if kind == 'fork family' else 'run'} is one row (a duplicated row would "
                          f"count twice)")
    unknown = sorted({str(v) for v in table["status"] if str(v) not in STATUSES})
    if unknown:
        raise InterpError(f"{where}: status {unknown[0]!r} is not one of {', '.join(STATUSES)}")
    return table


def _flags(column, name: str, where: str):
    """A flag column as booleans: true/false (any case, or 1/0), empty cells false; anything else refused."""
    words = {"true": True, "false": False, "1": True, "0": False, "1.0": True, "0.0": False}
    out = []
    for i, v in enumerate(column.tolist()):
        if isinstance(v, bool):
            out.append(v)
        elif v is None or (isinstance(v, float) and math.isnan(v)):
            out.append(False)
        elif str(v).strip().lower() in words:
            out.append(words[str(v).strip().lower()])
        else:
            raise InterpError(f"{where}: column {name} holds {v!r} in row {i + 2} (line {i + 2} of the file), not "
                              f"true or false")
    return out


def rejudge(csv) -> ReconcileTable:
    """The reconciliation table of a kept CSV (`keep`), by today's rules; the table validated as a whole first."""
    import pandas as pd

    path = Path(csv)
    if not path.is_file():
        raise InterpError(f"{csv} is not a file: give a CSV written by interp.mechanisms.kept.keep")
    try:  # only an empty cell is missing: "n/a", "NA", "null" in a number's column are refused, never read as NaN
        table = pd.read_csv(path, keep_default_na=False, na_values=[""])
    except pd.errors.EmptyDataError:
        raise InterpError(f"{csv} is empty: not a kept table") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InterpError(f"{csv} is not a readable CSV ({first})") from None
    table = validate(table, str(csv))
    kind = str(table["kind"].iloc[0])
    source = str(table["source"].iloc[0]) if "source" in table else str(path)  # the folder (a family: its parent)
    replicate = str(table["replicate"].iloc[0]) if "replicate" in table and isinstance(table["replicate"].iloc[0], str) else ""
    g = Gathered(str(path), kind, _settings_of(table), run_path=source, replicate=replicate)
    if kind == "fork family":
        from interp.mechanisms.evidence import forks_measure
        from interp.mechanisms.reconcile_rules import FORK_STATE

        relapsed = bool(table["relapsed"].iloc[0])
        if relapsed:
            g.same.add(FORK_STATE)
        deepest = relapsed and table["fork_step"].nunique() > 1  # as reconcile.deepest_relapse
        m, why = forks_measure(table, deepest=deepest)
        if m is not None:
            g.ours["fork_full_batch"] = m
        else:
            g.missing["fork_full_batch"] = why
        design = {k: table[k].iloc[0] for k in ("gamma_window", "gamma_every") if k in table and _finite(table[k].iloc[0])}
        _fork_arms(g, table, {k: int(v) for k, v in design.items()}, deepest=deepest)
    else:
        _from_evidence(g, _run_evidence(table))
        if kind == "sweep":
            table_claims(g, table)
            from interp.mechanisms.evidence import cancellation_measure

            m, why = cancellation_measure(table[table["status"] == "done"])
            if m is not None:
                g.ours["cancellation_beta"] = m
            elif why:
                g.missing["cancellation_beta"] = why
        else:
            r = table.iloc[0]
            from interp.mechanisms.reconcile import _point

            for name, target in (("", g.ours), ("_author", g.author)):
                m = _point(r.get(f"gap_lead{name}"), f"t(dz > 0.1) {r.get(f'gap_onset{name}')}")
                if m is not None:
                    target["lead_share"] = m
                onset = r.get(f"gap_onset{name}")
                attn = r.get("carried_attn_onset")
                if _finite(onset) and _finite(attn) and onset:
                    target["attention_onset"] = _point(attn / onset, "attention onset / t(dz > 0.1)")
    return ReconcileTable([{"path": str(path), "kind": kind}], rows_of([g]))
