"""Reading back what `--track` and `interp export` wrote, with the libraries' own readers.

TensorBoard: the `EventAccumulator` of tensorboard's server (`plugin_event_accumulator`: what TensorBoard
shows, a restarted session's purge applied); interp writes every scalar as a float64 tensor.
W&B: an offline run is one `run-ID.wandb` file, W&B's record log (LevelDB's log format: 32 KiB blocks of
chunks, each with a CRC-32 of its type and data, under a 7-byte ":W&B" header) of protobuf `Record`s, parsed
with wandb's own `wandb_internal_pb2.Record`; the history, summary, config and artifacts are records in it.
(wandb 0.31 has no Python reader of its own for it: its Go core reads it for `wandb sync`.)
"""

from __future__ import annotations

import json
import struct
import time
import zlib
from pathlib import Path

BLOCK = 32768
HEADER = struct.Struct("<4sHB")  # ":W&B", magic 0xBEE1, version
CHUNK = struct.Struct("<IHB")  # crc32, length, type (1 full, 2 first, 3 middle, 4 last)


def _board(folder: Path):
    """TensorBoard's reader as its server uses it (every summary a tensor; a restarted session's purge applied)."""
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"tensors": 0})
    acc.Reload()
    return acc


def tensorboard_scalars(folder: Path, unique: bool = False) -> dict[str, dict[int, float]]:
    """{tag: {step: value}} of every scalar in the event files of `folder` (one TensorBoard run), as TensorBoard
    shows it (events a later session purged left out); `unique`: no tag has two events at one step."""
    from tensorboard.util import tensor_util

    acc = _board(folder)
    out: dict[str, dict[int, float]] = {}
    for tag in acc.Tags()["tensors"]:
        for event in acc.Tensors(tag):
            value = tensor_util.make_ndarray(event.tensor_proto)
            if value.dtype.kind == "f" and value.size == 1:
                assert not unique or event.step not in out.get(tag, {}), f"{tag} twice at step {event.step}"
                out.setdefault(tag, {})[event.step] = float(value.item())
    return out


def tensorboard_texts(folder: Path) -> dict[str, str]:
    """{tag: text} of the text entries of `folder` (the last of each tag)."""
    from tensorboard.util import tensor_util

    acc = _board(folder)
    out = {}
    for tag in acc.Tags()["tensors"]:
        value = tensor_util.make_ndarray(acc.Tensors(tag)[-1].tensor_proto)
        if value.dtype.kind in "OSU":
            text = value.item()
            out[tag.removesuffix("/text_summary")] = text.decode() if isinstance(text, bytes) else str(text)
    return out


def wandb_records(path: Path, wait: float = 60.0) -> list:
    """Every record of a .wandb file (or of the one .wandb file in an offline run folder), each CRC checked, once
    the run's exit record is in it: `run.finish()` returns when W&B's service has the run's last record, which its
    own process then writes to the file (within milliseconds to seconds), so a reader waits for it (`wait` s)."""
    path = Path(path)
    if path.is_dir():
        (path,) = path.glob("run-*.wandb")
    deadline = time.monotonic() + wait
    while True:
        records = _records(path)
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.monotonic() > deadline:
            return records
        time.sleep(0.2)


def _records(path: Path) -> list:
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    ident, magic, _ = HEADER.unpack_from(data)
    assert ident == b":W&B" and magic == 0xBEE1, f"{path} is not a W&B record log"
    records, pos, pending = [], HEADER.size, b""
    while pos + CHUNK.size <= len(data):
        if BLOCK - pos % BLOCK < CHUNK.size:  # a block's tail too short for a header is padding
            pos += BLOCK - pos % BLOCK
            continue
        crc, length, kind = CHUNK.unpack_from(data, pos)
        if kind == 0 and length == 0:
            pos += BLOCK - pos % BLOCK
            continue
        chunk = data[pos + CHUNK.size: pos + CHUNK.size + length]
        if len(chunk) < length:
            break  # a record being written
        assert zlib.crc32(bytes([kind]) + chunk) & 0xFFFFFFFF == crc, f"{path}: bad checksum at byte {pos}"
        pos += CHUNK.size + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(pending)
            records.append(record)
    return records


def _key(item) -> str:
    return item.key or "/".join(item.nested_key)


def wandb_run(folder: Path) -> dict:
    """An offline W&B run's name, group, job type, config, history ({step: {key: value}}), summary and
    artifacts ({name: {"type", "files": {path: size}}}), from its records."""
    out = {"name": None, "group": None, "job_type": None, "config": {}, "history": {}, "summary": {}, "artifacts": {}}
    for record in wandb_records(folder):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            out.update(name=record.run.display_name, group=record.run.run_group, job_type=record.run.job_type)
            out["config"].update({_key(i): json.loads(i.value_json) for i in record.run.config.update})
        elif kind == "config":
            out["config"].update({_key(i): json.loads(i.value_json) for i in record.config.update})
        elif kind == "history":
            row = {_key(i): json.loads(i.value_json) for i in record.history.item}
            out["history"][int(row.pop("_step"))] = {k: v for k, v in row.items() if not k.startswith("_")}
        elif kind == "summary":
            out["summary"].update({_key(i): json.loads(i.value_json) for i in record.summary.update
                                   if not _key(i).startswith("_")})
        elif kind == "artifact":
            out["artifacts"][record.artifact.name] = {
                "type": record.artifact.type, "files": {c.path: c.size for c in record.artifact.manifest.contents}}
    return out


def wandb_sessions(folder: Path) -> list[dict]:
    """Every offline run under `folder` (its wandb/offline-run-* folders), in the order they were started."""
    return [wandb_run(p) for p in sorted(Path(folder).glob("**/offline-run-*")) if p.is_dir()]


def wandb_runs(folder: Path) -> dict[str, dict]:
    """Every offline run under `folder`, by run name (each name once)."""
    runs = wandb_sessions(folder)
    assert len({r["name"] for r in runs}) == len(runs), [r["name"] for r in runs]
    return {r["name"]: r for r in runs}


def metrics_by_step(path: Path) -> dict[int, dict[str, float]]:
    """metrics.jsonl as {step: {name: value}}, the step and null values left out (the last row of a step wins)."""
    out = {}
    for line in (Path(path) / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        out[row["step"]] = {k: float(v) for k, v in row.items() if k != "step" and v is not None}
    return out


def by_tag(history: dict[int, dict[str, float]]) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {}
    for step, row in history.items():
        for key, value in row.items():
            out.setdefault(key, {})[step] = value
    return out
