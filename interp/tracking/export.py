"""`interp export PATH --to tensorboard|wandb`: what a run, a sweep or a fork family holds, written where
researchers already look. Nothing is computed.

For each run (a sweep's runs, a family's forks; damaged and unstarted ones are named and left out):
- its metrics log, every row under its own names at its step (as `--track` writes it while training);
- every cached analysis table reduced to scalars on the checkpoint axis (`interp.tracking.scalars`);
- its row of the collection's table (`Sweep.table(circuits=True)`, `ForkFamily.table(circuits=True)`; for a
  lone run the same columns: `interp.collections.rows`) as per-run numbers: TensorBoard scalars
  `summary/COLUMN` at the run's last step (and the axes as hparams), the W&B run's summary (and config);
- the HTML report and timeline, where given or found beside the folder's contents (PATH/report.html,
  PATH/timeline.html): a W&B artifact, a TensorBoard text entry with the file's path.

Where: TensorBoard writes OUT/RUN/ (one TensorBoard run per run: `tensorboard --logdir OUT`), W&B writes
OUT/wandb/offline-run-*/ (one W&B run per run, grouped by the sweep or family). OUT defaults to
PATH/exports/tensorboard or PATH/exports/wandb. What is not cached is named, with the command that computes it.
"""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from interp.errors import InterpError

from interp.tracking import check_tracker, require
from interp.tracking.scalars import cached_tables, metric_values, scalars
from interp.tracking.writers import open_writer

EXPORTS_DIR = "exports"
ATTACHED = ("report", "timeline")  # attachments, each looked for as PATH/NAME.html unless given


@dataclass
class Exported:
    out: Path
    runs: dict[str, dict] = field(default_factory=dict)  # run -> {"rows", "scalars", "analyses", "attached"}
    missing: dict[str, list[str]] = field(default_factory=dict)  # analysis -> runs without it in their cache
    skipped: list[str] = field(default_factory=list)  # runs left out, with why
    notes: list[str] = field(default_factory=list)  # the caches' notes, attachments not found, commands

    def to_dict(self) -> dict:
        return {"out": str(self.out), "runs": self.runs, "missing": self.missing, "skipped": self.skipped,
                "notes": self.notes}


def _busy(run):
    """The refusal of a run another live process writes (`interp.files.LockHeld`, exit 1): its export would hold
    the rows written so far only."""
    from interp.runs import RunLock

    held = RunLock(run.path).refusal()
    return type(held)(f"{run.path} is being trained by another process ({held.holder}): its export would hold only "
                      f"the rows written so far; export it when that process is done", held.holder)


def members(path: Path):
    """(kind, collection name or None, [(run, its table row, its axes)], [skipped: "NAME: why"])."""
    from interp.collections.folders import FAMILY, RUN, SWEEP, kind_of, open as open_folder
    from interp.runs import Run

    kind = kind_of(path)
    folder = open_folder(path)
    if kind == RUN:
        from interp.collections.rows import identity, measures
        from interp.sweeps.circuits import circuit_row

        state = (folder.status or {}).get("state", "not finished")
        row = {"run": folder.name, "status": state, **identity(folder.spec), **measures(folder, folder.spec, state)}
        row.update(circuit_row(folder, state, bool(row["censored_tau_half"])))
        return kind, None, [(folder, row, {})], []
    table = folder.table(circuits=True)
    axes = list(folder.spec.fields) if kind == SWEEP else [c for c in ("fork_step", "arm", "fork_seed") if c in table]
    out, skipped = [], []
    for row in table.to_dict("records"):
        name = row["run"]
        where = folder.path / str(name)
        if row.get("status") in ("damaged", "not started") or not Run.is_run(where):
            skipped.append(f"{name}: {row.get('status')}" + (f" ({row['error']})" if row.get("error") else ""))
            continue
        out.append((Run.open(where), row, {a: row[a] for a in axes if a in row}))
    assert kind in (SWEEP, FAMILY)
    return kind, folder.path.name, out, skipped


def _command(path: Path, analysis: str) -> str:
    from interp.analysis import registry

    only = "" if analysis in registry.default_names() else f" --only {analysis}"
    return f"interp analyze {path}{only}"


def _attachments(path: Path, given: dict[str, Path | None], notes: list[str]) -> dict[str, Path]:
    found = {}
    for kind in ATTACHED:
        file = given.get(kind)
        if file is not None:
            from interp.errors import InterpError

            if not Path(file).is_file():
                raise InterpError(f"--{kind} {file}: no such file")
            found[kind] = Path(file)
        elif (Path(path) / f"{kind}.html").is_file():
            found[kind] = Path(path) / f"{kind}.html"
        else:
            notes.append(f"no {kind} attached: write one with interp {kind} {path} -o {Path(path) / f'{kind}.html'}, "
                         f"or give --{kind} FILE")
    return found


MARKERS = ("run.json", "sweep.json", "forks.json")  # what makes a folder a run, a sweep or a fork family


def check_out(out: Path) -> None:
    """Refuse an output folder inside a run, a sweep or a fork family (its root, its checkpoints, another run's),
    where event files would be written among the run's own; the `exports/` folder under one is where they go."""
    import os

    here = Path(os.path.abspath(out))
    for folder in [here, *here.parents]:
        if any((folder / m).is_file() for m in MARKERS):
            inside = here.relative_to(folder).parts
            if not inside or inside[0] != EXPORTS_DIR:
                what = next(m for m in MARKERS if (folder / m).is_file())
                raise InterpError(f"--out {out} lies inside {folder} (it holds {what}), among its own files; write the "
                                  f"export elsewhere, or under {folder / EXPORTS_DIR}")
            return


def export(path, to: str, out=None, report=None, timeline=None) -> Exported:
    """Write PATH's runs to TensorBoard or W&B (module docstring); returns what was written and what was not. A run
    exported again to the same TensorBoard folder replaces its earlier export (no point twice); a run that another
    process is training is refused, naming it (its export would be partial)."""
    check_tracker(to)
    require(to)
    path = Path(path)
    kind, group, runs, skipped = members(path)
    if out is not None:
        check_out(Path(out))
    out = Path(out) if out is not None else path / EXPORTS_DIR / to
    for run, _, _ in runs:  # before anything is written
        if run.writing:
            raise _busy(run)
    result = Exported(out, skipped=skipped)
    given = {"report": report, "timeline": timeline}
    attached = _attachments(path, {k: None if v is None else Path(v) for k, v in given.items()}, result.notes)
    from interp.analysis import registry

    for run, row, axes in runs:
        tables, cache_notes = cached_tables(run)
        result.notes += cache_notes
        for name in registry.REGISTRY:
            if name not in tables:
                result.missing.setdefault(name, []).append(run.name)
        written = _write(to, out, run, group, row, axes, tables, attached)
        result.runs[run.name] = {**written, "analyses": sorted(tables), "attached": sorted(attached)}
    for name, names in result.missing.items():
        which = "" if kind == "run" else " in every run" if len(names) == len(runs) else \
            f" in {len(names)} of {len(runs)} runs"
        result.notes.append(f"{name}: not cached{which}; computed by: {_command(path, name)}")
    return result


def _write(to: str, out: Path, run, group, row: dict, axes: dict, tables: dict, attached: dict) -> dict:
    by_step: dict[int, dict] = {}
    last = {}
    for metrics in run.metric_rows():  # a repeated step: its last row wins, as in Run.metric_series
        last[int(metrics["step"])] = metric_values(metrics)
    for step, values in last.items():
        by_step.setdefault(step, {}).update(values)
    frame = scalars(tables)
    for step, tag, value in frame.itertuples(index=False):
        by_step.setdefault(int(step), {})[tag] = value
    config = {"spec": run.spec.to_dict(), "path": str(run.path.resolve()), **({"fork": run.fork} if run.fork else {})}
    # TensorBoard reads every event file in a run's folder: a new export is written beside the old one and then
    # takes its place, so exporting again replaces the points instead of adding them a second time
    final_folder = out / run.name
    folder = final_folder.with_name(f".{run.name}.exporting") if to == "tensorboard" else out
    if to == "tensorboard":
        shutil.rmtree(folder, ignore_errors=True)
    writer = open_writer(to, folder, name=run.name, group=group, config=config, job_type="export")
    try:
        for step in sorted(by_step):
            writer.scalars(step, by_step[step])
        final = max(by_step) if by_step else 0
        summary = {k: (float(v) if isinstance(v, bool) else v) for k, v in row.items() if not _missing(v)}
        writer.summary(summary, final)
        if axes:
            writer.hparams(axes, [f"summary/{k}" for k, v in summary.items() if isinstance(v, (int, float))])
        for kind, file in attached.items():
            writer.attach(kind, file)
    finally:
        writer.close()
    if to == "tensorboard":
        old = final_folder.with_name(f".{run.name}.replaced")
        shutil.rmtree(old, ignore_errors=True)
        if final_folder.exists():
            final_folder.rename(old)
        folder.rename(final_folder)
        shutil.rmtree(old, ignore_errors=True)
    return {"rows": len(last), "scalars": len(frame)}


def _missing(value) -> bool:
    try:
        return value is None or bool(value != value) or (isinstance(value, float) and math.isnan(value))
    except (TypeError, ValueError):
        return True  # pandas.NA and the like
