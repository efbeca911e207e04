"""What training is handed besides its stepper: a sink for the rows it logs.

`interp.train.train(run, sink=make_sink)` calls `make_sink(run, start)` once, with the first row it logs
(`start`: the step training continues from, 0 for a fresh run; a session that logs nothing makes no sink).
The sink gets the row of the step training continues from (a resumed run's last kept row, a fork's first,
written as the fork was made), then every row appended to metrics.jsonl, as it is appended: `sink.log(row)`;
and `sink.close()` when training ends, however it ends.
The loop knows no sink by name: the command line builds one (`interp.tracking.sinks.Tracker`, TensorBoard
or W&B) and hands it over, as the fork code hands over its stepper. A factory travels to a sweep's
workers in the job's payload, so it must pickle (a module-level class or function).

`Guarded` is how the loop holds one: a sink that fails (cannot be made, cannot write, cannot close)
is said once on stderr (`interp: warning: tracking stopped: ...`) and dropped; training goes on and
metrics.jsonl, the run's own log, is written as before.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Protocol


class Sink(Protocol):
    def log(self, row: dict) -> None: ...

    def close(self) -> None: ...


SinkFactory = Callable[..., Sink]  # make_sink(run, start) -> Sink


class Guarded:
    """A sink that never raises: the first failure is one warning, and the sink is dropped."""

    def __init__(self, make_sink: SinkFactory | None, run, start: int):
        self.make_sink, self.run, self.start = make_sink, run, start
        self.sink: Sink | None = None

    def _drop(self, exc: BaseException) -> None:
        sink, self.sink, self.make_sink = self.sink, None, None
        try:
            if sink is not None:
                sink.close()  # what it wrote so far is kept where it can be
        except Exception:  # noqa: BLE001, S110 - already failing: the warning below says so
            pass
        text = str(exc) or type(exc).__name__
        print(f"interp: warning: tracking stopped: {text}; training goes on (metrics.jsonl has every row)",
              file=sys.stderr)

    def log(self, row: dict) -> None:
        if self.make_sink is None:
            return
        try:
            if self.sink is None:
                self.sink = self.make_sink(self.run, self.start)
            self.sink.log(row)
        except Exception as exc:  # noqa: BLE001
            self._drop(exc)

    def close(self) -> None:
        sink, self.sink, self.make_sink = self.sink, None, None
        if sink is None:
            return
        try:
            sink.close()
        except Exception as exc:  # noqa: BLE001
            self._drop(exc)
