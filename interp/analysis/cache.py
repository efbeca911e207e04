"""Per-run cache of analysis results, keyed by analysis, version, parameters and step.

Analysis functions never write files; callers that want caching (the suite, the report, the
timeline) go through a `ResultCache`. Each (analysis key, step) result is one JSON file under
`RUN/cache/ANALYSIS/KEY/`, written atomically, holding every table the analysis returned, the
SHA-256 of the checkpoint it was computed from and the SHA-256 of its own content (`sha256`:
of the canonical JSON of every other field: key, step, checkpoint hash, format and the tables'
exact text). A retrained or replaced checkpoint is recomputed silently; an entry that is
damaged, edited, unreadable, filed under another key or step, or written without a content
hash (an older interp) is never used: it is recomputed (or, for `cached`, left out) and named
in `rejected` and `notes` (and by analysis and step in `damaged`), which the suite turns into warnings
and the report into a line.

A cache that cannot be used never stops an analysis: when `RUN/cache` is a file the cache is
switched off at once, and when a result cannot be written further writes are skipped; either
way everything is still computed and `notes` says so once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

import numpy as np
import pandas as pd

from interp.files import atomic_write_bytes
from interp.runs import CACHE_DIR, Run

CACHE_FORMAT = 3  # 3: every entry carries the SHA-256 of its own content


def _digest(key: dict) -> str:
    blob = json.dumps({**key, "format": CACHE_FORMAT}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def encode_table(df: pd.DataFrame) -> str:
    """A table as JSON text that reads back exactly: every column's dtype and its values as
    Python numbers (shortest round-trip text), so a cached result equals the computed one bit
    for bit and whatever is derived from it (e.g. attention mass per segment, summed in
    float32) is the same from the cache as fresh."""
    return json.dumps({"columns": [str(c) for c in df.columns], "dtypes": [str(t) for t in df.dtypes],
                       "data": {str(c): _values(df[c]) for c in df.columns}})


def _values(column: pd.Series) -> list:
    values = column.tolist()
    if isinstance(column.dtype, np.dtype):
        return values
    return [None if v is pd.NA or v is pd.NaT else v for v in values]  # nullable columns: missing is null


NUMPY_DTYPES = frozenset({"int64", "int32", "int16", "int8", "uint8", "float64", "float32", "bool"})


def decode_table(text: str) -> pd.DataFrame:
    """Each column built at its dtype (numpy's, or pandas' own for the others): three times faster than
    building the frame and casting it, and the same table (a cached report reads hundreds)."""
    blob = json.loads(text)
    columns, data = blob["columns"], blob["data"]
    built = {c: data[c] if t == "object" else np.array(data[c], dtype=t) if t in NUMPY_DTYPES else pd.array(data[c], dtype=t)
             for c, t in zip(columns, blob["dtypes"])}
    return pd.DataFrame(built, columns=columns)


def content_hash(body: dict) -> str:
    """SHA-256 of an entry's fields other than `sha256`, as canonical JSON (sorted keys, no
    spaces): the tables are JSON text inside it, so their exact bytes are covered."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def old_formats(root) -> list[str]:
    """One note naming the key folders under `root` (RUN/cache) that an older interp wrote (formats 1
    and 2: entries without a "format" field or content hash), or none: they are never read, which
    would otherwise go unsaid (their folder names are not the ones this format looks up)."""
    old = []
    for folder in sorted(p for p in root.glob("*/*") if p.is_dir()) if root.is_dir() else ():
        for path in sorted(folder.glob("step_*.json")):
            try:
                blob = json.loads(path.read_bytes())
            except (OSError, ValueError):
                continue  # a damaged entry says nothing of its folder's format: the next one may
            fmt = blob.get("format") if isinstance(blob, dict) else CACHE_FORMAT
            if fmt is None or (isinstance(fmt, int) and fmt < CACHE_FORMAT):
                old.append(str(folder))
            break
    if len(old) == 1:
        return [f"cache folder {old[0]} is in an older cache format (before format {CACHE_FORMAT}), not read by "
                f"this interp: its results are computed again; to clear this note, delete it: rm -r {old[0]}"]
    shown = ", ".join(old[:3]) + (f" and {len(old) - 3} more" if len(old) > 3 else "")
    return [f"{len(old)} cache folders are in an older cache format (before format {CACHE_FORMAT}), not read by "
            f"this interp: {shown}; their results are computed again; to clear this note, delete them (rm -r each), "
            f"or the whole {root}"] if old else []


class ResultCache:
    def __init__(self, run: Run, enabled: bool = True):
        self.run, self.enabled = run, enabled
        self.hits = self.misses = 0  # results read from the cache / computed and stored
        self.rejected: list[str] = []  # "PATH (why): what was done" for every entry that was not used
        self.damaged: dict[str, dict[int, str]] = {}  # the same, by analysis and step: what a reader names
        self.disabled: str | None = None  # why the cache is off or not written, when it is
        self._writable = True
        self._hashes: dict[int, str] | None = None
        self._old: list[str] | None = None  # the note on folders of an older format, once looked for
        root = run.path / CACHE_DIR
        if enabled and (root.exists() or root.is_symlink()) and not root.is_dir():
            self.enabled = False
            self.disabled = (f"cache disabled: {root} is a file, not a folder; every result is computed "
                             "and none is kept")

    @property
    def notes(self) -> list[str]:
        """What the caller should tell the user: the cache being off, folders of an older format (never
        read), then each entry not used."""
        if self._old is None:
            self._old = old_formats(self.run.path / CACHE_DIR) if self.enabled else []
        return list(dict.fromkeys(([self.disabled] if self.disabled else []) + self._old + self.rejected))

    def _path(self, key: dict, step: int):
        return self.run.path / CACHE_DIR / key["analysis"] / _digest(key) / f"step_{step:07d}.json"

    def _checkpoint_sha(self, step: int) -> str | None:
        if self._hashes is None:
            self._hashes = self.run.checkpoint_hashes()
        return self._hashes.get(step)

    def _reject(self, path, why: str, action: str) -> None:
        note = f"cache entry {path} {why}: {action}"
        self.rejected.append(note)
        # the place `_path` gave it: cache/ANALYSIS/KEY/step_NNNNNNN.json
        self.damaged.setdefault(path.parent.parent.name, {})[int(path.stem.split("_")[1])] = note

    def load(self, key: dict, step: int, action: str = "recomputed") -> dict[str, pd.DataFrame] | None:
        """The tables cached under (`key`, `step`), or None: none cached, a stale checkpoint hash
        (silently), or a bad entry (named in `rejected` with `action`, what the caller does instead)."""
        path = self._path(key, step)
        if not self.enabled or not path.is_file():
            return None
        try:
            blob = json.loads(path.read_bytes())
        except OSError as exc:
            self._reject(path, f"cannot be read ({exc.strerror or exc})", action)
            return None
        except ValueError:
            self._reject(path, "is not valid JSON (damaged)", action)
            return None
        if not isinstance(blob, dict):
            self._reject(path, "is not a JSON object (damaged)", action)
            return None
        stored = blob.pop("sha256", None)
        if stored is None:
            self._reject(path, "has no content hash (written by an older interp, or edited)", action)
            return None
        if stored != content_hash(blob):
            self._reject(path, "does not match its content hash (damaged or edited)", action)
            return None
        if any(blob.get(k) != key[k] for k in ("analysis", "version", "params")) or blob.get("step") != step:
            self._reject(path, f"holds another analysis, parameters or step than its place says (step "
                               f"{blob.get('step')!r}, {blob.get('analysis')!r})", action)
            return None
        if blob.get("checkpoint_sha256") != self._checkpoint_sha(step):
            return None  # computed from another checkpoint at this step (a retrained run): recomputed
        try:
            tables = {name: decode_table(text) for name, text in blob["tables"].items()}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self._reject(path, f"holds tables that cannot be read ({type(exc).__name__})", action)
            return None
        self.hits += 1
        return tables

    def store(self, key: dict, step: int, tables: dict[str, pd.DataFrame]) -> None:
        """Keep a result that was just computed (counted in `misses`). A write that fails (the
        folder is not writable, or a file stands in its way) turns writing off, with a note."""
        self.misses += 1
        if not self.enabled or not self._writable:
            return
        body = {
            **key,
            "format": CACHE_FORMAT,
            "step": step,
            "checkpoint_sha256": self._checkpoint_sha(step),
            "tables": {name: encode_table(df) for name, df in tables.items()},
        }
        path = self._path(key, step)
        try:
            atomic_write_bytes(path, json.dumps({**body, "sha256": content_hash(body)}).encode())
        except OSError as exc:
            self._writable = False
            self.disabled = (f"cache not written: cannot write {path} ({exc.strerror or exc}); results are "
                             "computed and not kept")

    def per_step(
        self,
        key: dict,
        steps: list[int],
        compute: Callable[[int], dict[str, pd.DataFrame]],
    ) -> dict[str, pd.DataFrame]:
        """Each table concatenated over `steps`, computing (and storing) only the missing steps."""
        parts: dict[str, list[pd.DataFrame]] = {}
        for step in steps:
            tables = self.load(key, step)
            if tables is None:
                tables = compute(step)
                self.store(key, step, tables)
            for name, df in tables.items():
                parts.setdefault(name, []).append(df)
        return {name: pd.concat(dfs, ignore_index=True) for name, dfs in parts.items()}

    def _steps_in(self, folder) -> list[int]:
        steps = []
        for path in folder.glob("step_*.json") if folder.is_dir() else ():
            try:
                steps.append(int(path.stem.split("_")[1]))
            except (IndexError, ValueError):
                continue  # not a name this cache writes
        return sorted(steps)

    def cached(self, key: dict) -> dict[str, pd.DataFrame]:
        """Every step already cached under `key` (nothing is computed): for sections such as
        the report's geometry, which show results only when they have been asked for. A bad
        entry is left out and named in `rejected`."""
        if not self.enabled:
            return {}
        parts: dict[str, list[pd.DataFrame]] = {}
        for step in self._steps_in(self.run.path / CACHE_DIR / key["analysis"] / _digest(key)):
            tables = self.load(key, step, action="left out")
            for name, df in (tables or {}).items():
                parts.setdefault(name, []).append(df)
        return {name: pd.concat(dfs, ignore_index=True) for name, dfs in parts.items()}

    def cached_any(self, key: dict, accept=None) -> dict[str, pd.DataFrame]:
        """`cached` under `key`, else under whichever parameters of the same analysis and
        version have the most cached steps (e.g. an LLC run with --heads L0H3,L0H1 when the
        report asks for the default heads): what was computed is shown, whatever it was asked with.
        `accept(params) -> bool` limits the parameters considered (e.g. only those with an option on)."""
        found = self.cached(key) if accept is None or accept(key["params"]) else {}
        if found or not self.enabled:
            return found
        root = self.run.path / CACHE_DIR / key["analysis"]
        best: tuple[int, float, dict] | None = None
        for folder in root.iterdir() if root.is_dir() else ():
            files = sorted(folder.glob("step_*.json")) if folder.is_dir() else []
            other = None
            for path in files:  # the key as any readable entry states it (`cached` verifies each)
                try:
                    blob = json.loads(path.read_bytes())
                    other = {k: blob[k] for k in ("analysis", "version", "params")}
                    break
                except (ValueError, KeyError, OSError, TypeError):
                    continue
            if other is None or other["version"] != key["version"] or _digest(other) != folder.name:
                continue
            if accept is not None and not accept(other["params"]):
                continue
            rank = (len(files), max(f.stat().st_mtime for f in files), other)
            if best is None or rank[:2] > best[:2]:
                best = rank
        return self.cached(best[2]) if best else {}
