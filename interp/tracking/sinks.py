"""`interp train|sweep|fork --track tensorboard|wandb`: the sink training is handed (`interp.sinks`).

`Tracker(kind, group)` is the factory: it pickles, so a sweep's workers (a process pool, Ray) get it in
their job's payload and each run opens its own writer. At every evaluation the sink writes the row
metrics.jsonl gets, under the same names (`scalars.metric_values`), at its step.

Where: TensorBoard's event files go in RUN/tensorboard/ (`tensorboard --logdir SWEEP` shows a sweep's runs side
by side). Each session writes its own event file, opened as a session start at the step it continues from, so a
resumed run's rows from its checkpoint on (logged again by the resumed session) replace, in TensorBoard's view,
those the session that stopped had logged. W&B's run goes in RUN/wandb/ (offline unless configured:
`interp.tracking.writers.wandb_mode`), named as the run, grouped by the sweep or fork family, its spec as the
config; each training session is one W&B run, logging from the step it starts at.
"""

from __future__ import annotations

from dataclasses import dataclass

from interp.tracking.scalars import metric_values
from interp.tracking.writers import open_writer

TENSORBOARD_DIR = "tensorboard"  # RUN/tensorboard/: the event files of --track tensorboard


@dataclass(frozen=True)
class Tracker:
    """The sink factory `interp.train.train(run, sink=Tracker(kind, group))` calls as `Tracker(...)(run, start)`."""

    kind: str
    group: str | None = None

    def __call__(self, run, start: int = 0) -> MetricsSink:
        if self.kind == "tensorboard":
            writer = open_writer("tensorboard", run.path / TENSORBOARD_DIR, name=run.name,
                                 purge_step=start)  # a session start: TensorBoard purges from it on
        else:
            writer = open_writer("wandb", run.path, name=run.name, group=self.group,
                                 config={"spec": run.spec.to_dict(), "path": str(run.path.resolve()),
                                         **({"fork": run.fork} if run.fork else {})},
                                 job_type="fork" if run.fork else "train")
        return MetricsSink(writer)


class MetricsSink:
    """Each logged row to one writer, as it is logged."""

    def __init__(self, writer):
        self.writer = writer

    def log(self, row: dict) -> None:
        values = metric_values(row)
        if values:
            self.writer.scalars(int(row["step"]), values)

    def close(self) -> None:
        self.writer.close()
