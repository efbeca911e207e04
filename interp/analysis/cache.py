"""Per-run cache of analysis results, keyed by analysis, parameters and step.

Analysis functions never write files; callers that want caching (the `interp analyze`
suite, the report) go through `ResultCache.per_step`. Each (analysis, parameters, step)
result is one JSON file under `RUN/cache/`, written atomically, and carries the SHA-256 of
the checkpoint it was computed from, so a retrained or replaced checkpoint is recomputed.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable

import pandas as pd

from interp.io import atomic_write_bytes
from interp.runs import CACHE_DIR, Run

CACHE_VERSION = 1  # bump when an analysis changes what it computes


def _key(analysis: str, params: dict) -> str:
    blob = json.dumps({"analysis": analysis, "params": params, "version": CACHE_VERSION}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class ResultCache:
    def __init__(self, run: Run, enabled: bool = True):
        self.run, self.enabled = run, enabled
        self.hits = self.misses = 0

    def _path(self, analysis: str, params: dict, step: int):
        return self.run.path / CACHE_DIR / analysis / _key(analysis, params) / f"step_{step:07d}.json"

    def _checkpoint_sha(self, step: int) -> str:
        return self.run.checkpoint_hashes()[step]

    def load(self, analysis: str, params: dict, step: int) -> pd.DataFrame | None:
        path = self._path(analysis, params, step)
        if not self.enabled or not path.exists():
            return None
        try:
            blob = json.loads(path.read_text())
        except (json.JSONDecodeError, OSError):
            return None  # a damaged cache entry is recomputed, never trusted
        if blob.get("checkpoint_sha256") != self._checkpoint_sha(step):
            return None
        return pd.read_json(io.StringIO(blob["table"]), orient="table")

    def store(self, analysis: str, params: dict, step: int, df: pd.DataFrame) -> None:
        if not self.enabled:
            return
        blob = {
            "analysis": analysis,
            "params": params,
            "step": step,
            "checkpoint_sha256": self._checkpoint_sha(step),
            "table": df.to_json(orient="table", index=False, double_precision=15),
        }
        atomic_write_bytes(self._path(analysis, params, step), json.dumps(blob).encode())

    def per_step(
        self,
        analysis: str,
        params: dict,
        steps: list[int],
        compute: Callable[[int], pd.DataFrame],
        on_step: Callable[[], None] | None = None,
    ) -> pd.DataFrame:
        """Concatenated results for `steps`, computing (and storing) only the missing ones."""
        frames = []
        for step in steps:
            df = self.load(analysis, params, step)
            if df is None:
                self.misses += 1
                df = compute(step)
                self.store(analysis, params, step, df)
            else:
                self.hits += 1
            frames.append(df)
            if on_step is not None:
                on_step()
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
