"""Atomic file writes and verified reads: nothing half-written is ever visible under its name."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import socket
import tempfile
import time
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


def remove_temporaries(folder: Path, names: str) -> None:
    """Remove the temporaries of `atomic_write_bytes` (".NAME.XXXXXXXX.tmp", mkstemp's random
    letters, digits and underscores) in `folder` whose NAME matches the regex `names` whole: left by
    a writer killed mid-write. Only the one writer of the folder may call it (a live writer's
    temporary would be removed)."""
    pattern = re.compile(rf"\.(?:{names})\.[a-z0-9_]+\.tmp")
    try:
        stale = [p for p in Path(folder).iterdir() if pattern.fullmatch(p.name) and p.is_file()]
    except FileNotFoundError:
        return
    for path in stale:
        path.unlink(missing_ok=True)


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
    """Refuse, before any work is done, a path a file cannot be written to: empty, a folder, a symbolic link or
    anything but a regular file (the atomic write replaces what is at the path: /dev/null would be replaced),
    under a file, or not writable. Missing parent folders are fine (they are created)."""
    if str(path).strip() == "":
        raise InterpError(f"the {what} must be a non-empty path")
    path = Path(path)
    if path.is_symlink():  # the atomic write would replace the link itself, not write through it
        raise InterpError(f"{path} is a symbolic link; the {what} is written by replacing the file at its path, which "
                          f"would replace the link: give the path it points to, or a new one")
    if path.is_dir():
        raise InterpError(f"{path} is a folder; the {what} must be a file path (e.g. {path / 'report.html'})")
    if path.exists() and not path.is_file():  # a device, a pipe, a socket: replacing it would destroy it
        raise InterpError(f"{path} is not a regular file (a device, a pipe or a socket); the {what} must be a plain "
                          f"file's path")
    check_writable_parent(path.parent, "write", target=path)
    if path.exists() and not os.access(path, os.W_OK):
        raise InterpError(f"cannot write {path}: permission denied")
    return path


class LockHeld(InterpError):
    """A writer's lock another live process holds (`WriterLock.acquire`): the input is fine, the folder is busy.
    Commands that skip or report such a folder catch it (`interp fork` exits 1, not 2); `holder` names the holder."""

    def __init__(self, message: str, holder: str):
        super().__init__(message)
        self.holder = holder


class WriterLock:
    """An exclusive OS file lock on `path` (a run's `.lock`), held by the one process that writes the run.

    The operating system releases it when the process dies, so a killed writer leaves no
    stale lock and a resume can start at once. The holder's pid and host are written into
    the file so that a refused writer can name it.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, retries: int = 5) -> None:
        if self._fd is not None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666 & ~current_umask())
        for attempt in range(retries + 1):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN) or attempt == retries:
                    os.close(fd)
                    raise self.refusal() from None
                time.sleep(0.1)  # a reader probing the lock holds it for microseconds
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None

    def refusal(self) -> LockHeld:
        """The error of a writer refused because another process holds the lock, naming it."""
        holder = self.holder() or "unknown pid"
        return LockHeld(f"{self.path.parent} is being written by another process ({holder}); "
                        f"only one writer at a time: wait for it to finish or stop it", holder)

    def holder(self) -> str:
        try:
            return self.path.read_text().strip()
        except OSError:
            return ""

    def is_locked(self) -> bool:
        """Whether some process holds the lock now (a non-blocking probe; never waits)."""
        if self._fd is not None:
            return True
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True
        finally:
            os.close(fd)  # closing drops the probe's shared lock
        return False


def load_jsonl(path: str | Path, what: str) -> list[dict]:
    """Rows of a JSON-lines file; a torn last line (a crash mid-write) is left out, any other bad line refused."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InterpError(f"{path} is missing ({what})") from None
    except UnicodeDecodeError:
        raise InterpError(f"{path} is not UTF-8 text ({what})") from None
    rows = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break
            raise InterpError(f"{path}: line {i + 1} is not JSON ({what})") from None
        if not isinstance(row, dict):
            raise InterpError(f"{path}: line {i + 1} is not a JSON object ({what})")
        rows.append(row)
    return rows
