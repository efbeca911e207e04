"""Per-run cache of analysis results, keyed by analysis, version, parameters and step.

Analysis functions never write files; callers that want caching (the suite, the report, the
timeline) go through a `ResultCache`. Each (analysis key, step) result is one JSON file under
`RUN/cache/ANALYSIS/KEY/`, written atomically, holding every table the analysis returned and
the SHA-256 of the checkpoint it was computed from, so a retrained or replaced checkpoint is
recomputed and a damaged cache file is recomputed rather than trusted.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable

import pandas as pd

from interp.files import atomic_write_bytes
from interp.runs import CACHE_DIR, Run

CACHE_FORMAT = 2


def _digest(key: dict) -> str:
    blob = json.dumps({**key, "format": CACHE_FORMAT}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class ResultCache:
    def __init__(self, run: Run, enabled: bool = True):
        self.run, self.enabled = run, enabled
        self.hits = self.misses = 0  # results read from the cache / computed and stored
        self._hashes: dict[int, str] | None = None

    def _path(self, key: dict, step: int):
        return self.run.path / CACHE_DIR / key["analysis"] / _digest(key) / f"step_{step:07d}.json"

    def _checkpoint_sha(self, step: int) -> str | None:
        if self._hashes is None:
            self._hashes = self.run.checkpoint_hashes()
        return self._hashes.get(step)

    def load(self, key: dict, step: int) -> dict[str, pd.DataFrame] | None:
        path = self._path(key, step)
        if not self.enabled or not path.exists():
            return None
        try:
            blob = json.loads(path.read_text())
            if blob.get("checkpoint_sha256") != self._checkpoint_sha(step):
                return None
            tables = {name: pd.read_json(io.StringIO(text), orient="table") for name, text in blob["tables"].items()}
        except (ValueError, KeyError, OSError, TypeError, AttributeError):
            return None  # a damaged cache entry is recomputed, never trusted
        self.hits += 1
        return tables

    def store(self, key: dict, step: int, tables: dict[str, pd.DataFrame]) -> None:
        """Keep a result that was just computed (counted in `misses`)."""
        self.misses += 1
        if not self.enabled:
            return
        blob = {
            **key,
            "step": step,
            "checkpoint_sha256": self._checkpoint_sha(step),
            "tables": {name: df.to_json(orient="table", index=False, double_precision=15)
                       for name, df in tables.items()},
        }
        atomic_write_bytes(self._path(key, step), json.dumps(blob).encode())

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

    def cached(self, key: dict) -> dict[str, pd.DataFrame]:
        """Every step already cached under `key` (nothing is computed): for sections such as
        the report's geometry, which show results only when they have been asked for."""
        folder = self.run.path / CACHE_DIR / key["analysis"] / _digest(key)
        steps = sorted(int(p.stem.split("_")[1]) for p in folder.glob("step_*.json")) if folder.is_dir() else []
        parts: dict[str, list[pd.DataFrame]] = {}
        for step in steps:
            tables = self.load(key, step)
            for name, df in (tables or {}).items():
                parts.setdefault(name, []).append(df)
        return {name: pd.concat(dfs, ignore_index=True) for name, dfs in parts.items()}

    def cached_any(self, key: dict) -> dict[str, pd.DataFrame]:
        """`cached` under `key`, else under whichever parameters of the same analysis and
        version have the most cached steps (e.g. an LLC run with --heads L0H3,L0H1 when the
        report asks for the default heads): what was computed is shown, whatever it was asked with."""
        found = self.cached(key)
        if found or not self.enabled:
            return found
        root = self.run.path / CACHE_DIR / key["analysis"]
        best: tuple[int, float, dict] | None = None
        for folder in root.iterdir() if root.is_dir() else ():
            files = sorted(folder.glob("step_*.json"))
            if not files:
                continue
            try:
                blob = json.loads(files[0].read_text())
                other = {k: blob[k] for k in ("analysis", "version", "params")}
            except (ValueError, KeyError, OSError, TypeError):
                continue
            if other["version"] != key["version"] or _digest(other) != folder.name:
                continue
            rank = (len(files), max(f.stat().st_mtime for f in files), other)
            if best is None or rank[:2] > best[:2]:
                best = rank
        return self.cached(best[2]) if best else {}

