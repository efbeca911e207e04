"""`--track tensorboard|wandb` of `interp train`, `interp sweep` and `interp fork` (docs/tracking.md): the flag,
and the sink factory it gives training (`interp.tracking.sinks.Tracker`, handed over as `interp.sinks` says)."""

from __future__ import annotations

import argparse

from interp.errors import InterpError
from interp.tracking import TRACKERS


def _tracker_kind(text: str) -> str:
    """--track's value: a known tracker whose library is installed (checked as the command line is read,
    before anything is written)."""
    from interp.tracking import require

    try:
        require(text)
    except InterpError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_track_flag(parser: argparse.ArgumentParser, what: str = "the run") -> None:
    parser.add_argument("--track", type=_tracker_kind, metavar="|".join(TRACKERS),
                        help=f"also log {what} at every evaluation to TensorBoard (RUN/tensorboard/) or W&B (RUN/wandb/, "
                             "offline unless configured), under metrics.jsonl's names (extra: pip install 'interp[track]')")


def tracker_of(args: argparse.Namespace, group: str | None = None):
    """The sink factory training is handed (`interp.sinks`), or None without --track."""
    kind = getattr(args, "track", None)
    if kind is None:
        return None
    from interp.tracking.sinks import Tracker

    return Tracker(kind, group)
