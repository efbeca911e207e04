"""Reading another toolkit's files without running its code.

Checkpoints saved with `torch.save` are pickles; a pickle can name any function to call when it is read. They are
read here with `torch.load(..., weights_only=True)` only, which rebuilds tensors and plain containers and refuses
everything else; a file that would need more (a pickled class, a function) is refused in one line naming the file
and what it asked for. Numpy arrays (which an RNG state may hold) are read only where the caller allows them, through
an explicit allowlist of plain numpy types (`NUMPY_TYPES`). JSON and YAML are parsed as data (yaml.safe_load), never
as objects. Nothing here writes: the source folder is only read.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from interp.errors import InterpError
from interp.files import load_jsonl  # noqa: F401 - re-exported (the one JSON-lines reader)


def numpy_types() -> list:
    """The plain numpy types an RNG state's arrays need (ndarray, dtype and the numeric dtype classes); nothing
    that runs code."""
    import numpy as np

    try:
        from numpy._core.multiarray import _reconstruct
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct
    kinds = [np.ndarray, np.dtype, _reconstruct]
    for name in ("bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                 "float32", "float64"):
        kinds.append(type(np.dtype(getattr(np, name))))
    return kinds


def _refusal(path: Path, what: str, exc: Exception) -> InterpError:
    text = str(exc)
    found = re.search(r"GLOBAL ([\w.]+)", text)
    if found:
        return InterpError(f"{path} ({what}) would need code to load (it pickles {found.group(1)}); interp reads only "
                           f"plain tensors and containers from torch files (torch.load weights_only=True), so it is "
                           f"refused")
    return InterpError(f"{path} ({what}) would need more than plain tensors to load ({text.strip().splitlines()[0][:160]}); "
                       f"refused")


def load_torch(path: str | Path, what: str, allow_numpy: bool = False):
    """The object a `torch.save` file holds, on the CPU, read with weights_only=True (and, with `allow_numpy`, the
    plain numpy types of `numpy_types` allowed); a missing, empty, truncated or code-bearing file is refused in one
    line naming it."""
    import pickle
    import zipfile

    import torch

    path = Path(path)
    if not path.is_file():
        raise InterpError(f"{path} is missing ({what})")
    if path.stat().st_size == 0:
        raise InterpError(f"{path} is empty ({what}): a truncated or failed save")
    try:
        if allow_numpy:
            with torch.serialization.safe_globals(numpy_types()):
                return torch.load(path, map_location="cpu", weights_only=True)
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise _refusal(path, what, exc) from None
    except (RuntimeError, EOFError, KeyError, ValueError, zipfile.BadZipFile, OSError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise InterpError(f"{path} is not a readable torch file ({what}): truncated or damaged ({first})") from None


def load_json(path: str | Path, what: str):
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InterpError(f"{path} is missing ({what})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InterpError(f"{path} is not valid JSON ({what}): {exc}") from None


def load_yaml(path: str | Path, what: str):
    """A YAML file as plain data (yaml.safe_load: no tags, no objects)."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InterpError(f"{path} is missing ({what})") from None
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InterpError(f"{path} is not plain YAML ({what}): {first}") from None
    if not isinstance(data, dict):
        raise InterpError(f"{path} is not a YAML mapping ({what})")
    return data
