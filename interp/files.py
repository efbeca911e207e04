"""Atomic file writes and verified reads: nothing half-written is ever visible under its name."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from interp.errors import InterpError


def current_umask() -> int:
    """The process's umask (read without changing it for longer than the call)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over `path`.

    The file gets the permissions a plain open() would give (mkstemp's are owner-only)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_json(path: Path, obj) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode())


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def append_line(path: Path, line: str) -> None:
    """Append one line and fsync. A crash can leave at most a partial last line, which readers skip."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def check_writable_parent(path: Path, verb: str = "write", target: Path | None = None) -> None:
    """Refuse when the nearest existing folder at or above `path` is a file or not writable
    (a real probe: permissions, read-only mounts and root's special folders alike), naming
    `target` (default `path`). Missing folders are fine: they are created."""
    target = path if target is None else target
    parent = path
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise InterpError(f"cannot {verb} {target}: {parent} is a file, not a folder")
    try:
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as exc:
        raise InterpError(f"cannot {verb} {target}: {parent} is not writable ({exc.strerror})") from None


def check_output_file(path: str | Path, what: str = "output file") -> Path:
    """Refuse, before any work is done, a path a file cannot be written to: empty, a folder,
    under a file, or not writable. Missing parent folders are fine (they are created)."""
    if str(path).strip() == "":
        raise InterpError(f"the {what} must be a non-empty path")
    path = Path(path)
    if path.is_dir():
        raise InterpError(f"{path} is a folder; the {what} must be a file path (e.g. {path / 'report.html'})")
    check_writable_parent(path.parent, "write", target=path)
    if path.exists() and not os.access(path, os.W_OK):
        raise InterpError(f"cannot write {path}: permission denied")
    return path
