"""A run's metrics log (metrics.jsonl), parsed once per version of the file.

One process reads a run's log many times over (the summary, the sweep table, each analysis's tau, the
timeline, the report), each through a Run opened on its own; so the parsed rows are kept here, per file,
and parsed again only when the file's version (device, inode, size, mtime_ns, ctime_ns) changes: a log
that grows (training in progress) or is replaced (a resume's rewrite) is read afresh, an unchanged one
is not read at all. A file whose mtime lies within RACY_NS of the moment it was parsed could change again
in the same timestamp tick, unseen by its version, so it is read (not parsed) again and compared by
hash until it is older than that. Nothing is written: a read-only run folder reads as any other.
`check_complete(run)` is the one check that a log holds all the run says it reached (a lost tail is damage).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import OrderedDict
from pathlib import Path

from interp.errors import InterpError
from interp.run_layout import MANIFEST_FILE, METRICS_FILE, RESUME_FILE, STATUS_FILE

Version = tuple[int, int, int, int, int]
KEPT = 256  # logs kept parsed, the least recently read dropped first (a few hundred rows each)
RACY_NS = 2_000_000_000  # file timestamps are coarse (a jiffy on Linux, 2 s on FAT): younger ones are re-checked


class _Parsed:
    __slots__ = ("version", "digest", "parsed_ns", "rows")

    def __init__(self, version: Version, digest: bytes, parsed_ns: int, rows: tuple[dict, ...]):
        self.version, self.digest, self.parsed_ns, self.rows = version, digest, parsed_ns, rows


_KEPT: OrderedDict[str, _Parsed] = OrderedDict()


def _version(st: os.stat_result) -> Version:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def parse(path: Path, text: str) -> tuple[dict, ...]:
    """The rows of a log's text, in file order (a torn last line, left by a crash, is skipped)."""
    lines = text.splitlines()
    rows = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:  # a write cut short by a crash: skip it
                continue
            raise InterpError(f"{path} line {i + 1} is not valid JSON") from None
        if not isinstance(row, dict) or not isinstance(row.get("step"), int):
            raise InterpError(f"{path} line {i + 1} is not a metrics row (no integer 'step')")
        rows.append(row)
    return tuple(rows)


def rows(path: Path) -> tuple[dict, ...]:
    """The parsed rows of the log at `path` (none when it is missing), shared by every caller of
    this process: never mutate them. The same tuple object is returned while the file is unchanged."""
    key = os.path.abspath(path)
    kept = _KEPT.get(key)
    try:
        now = _version(os.stat(path))
    except FileNotFoundError:
        _KEPT.pop(key, None)
        return ()
    except OSError as exc:
        raise InterpError(f"cannot read {path}: {exc}") from None
    if kept is not None and kept.version == now and now[3] + RACY_NS < kept.parsed_ns:
        _KEPT.move_to_end(key)
        return kept.rows
    began = time.time_ns()
    try:
        with open(path) as fh:  # text mode, as Path.read_text: the same decoding and newlines
            version = _version(os.fstat(fh.fileno()))
            text = fh.read()
    except FileNotFoundError:
        _KEPT.pop(key, None)
        return ()
    except (OSError, UnicodeDecodeError) as exc:
        raise InterpError(f"cannot read {path}: {exc}") from None
    digest = hashlib.blake2b(text.encode(), digest_size=16).digest()
    if kept is not None and kept.version == version and kept.digest == digest:
        kept.parsed_ns = began  # the same text: keep its rows (and the facts derived from them)
        _KEPT.move_to_end(key)
        return kept.rows
    parsed = _Parsed(version, digest, began, parse(path, text))
    _KEPT[key] = parsed
    _KEPT.move_to_end(key)
    while len(_KEPT) > KEPT:
        _KEPT.popitem(last=False)
    return parsed.rows


def check_complete(run) -> None:
    """Refuse a run whose log lost its tail, naming the file (InterpError): training logs a step's row
    before it saves that step's checkpoint or ends its session there, so a log that stops before the last
    step manifest.json lists or status.json says the run reached was cut short, and everything read from
    it (tau, escapes, censoring) would be wrong. The one check of a run's completeness: every reader of a
    finished or interrupted run's log (collection states, `interp fork status`, `interp mechanisms`) uses it."""
    status = run.status or {}
    said = status.get("last_step")
    claims = [(max(run.steps), MANIFEST_FILE)] if run.steps else []
    if isinstance(said, int) and not isinstance(said, bool):
        claims.append((said, STATUS_FILE))
    if not claims:
        return
    reached, source = max(claims, key=lambda c: (c[0], c[1] == STATUS_FILE))
    path = run.path / METRICS_FILE
    last = max((row["step"] for row in rows(path)), default=None)
    if last is None and not status and not (run.path / RESUME_FILE).exists():
        return  # a folder being made (a fork's first checkpoint is written before its first row): nothing trained
    if last is None or last < reached:
        ends = ("is missing" if not path.exists() else "has no rows") if last is None else f"ends at step {last}"
        raise InterpError(f"{path} {ends}, but {source} says the run reached step {reached}: the log lost its "
                          f"tail (restore it, or train the run again into a new folder); damaged, left out")


def forget() -> None:
    """Drop every kept log (tests; a process that wants its memory back)."""
    _KEPT.clear()
