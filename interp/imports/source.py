"""What an import reads from a source folder, whatever its format: the spec it maps to, the task, where each
checkpoint and optimizer state lies, the source's own logged history, and what could not be expressed exactly.

Each format's reader (`interp.imports.synass`, `interp.imports.plain`) returns a `Source`; `interp.imports.writer`
turns it into a run folder. Nothing here writes, and every file read is listed (`files`), so the import can record
its SHA-256.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from interp.errors import InterpError

FORMATS = ("synass-main", "synass-eta", "synass-eta-sweep", "tl-series")
FORMAT_NAMES = {"synass-main": "the author's main pipeline (config.yaml, checkpoints/step_NNNNNN/model.pt)",
                "synass-eta": "an eta-sweep run of the author's (config.json, log.jsonl, "
                              "checkpoints/model_step_NNNNNNN.pt)",
                "synass-eta-sweep": "a folder of the author's eta-sweep runs (eta_*_K_*_seed_*/)",
                "tl-series": "a TransformerLens state_dict series with a spec file"}
ETA_RUN = re.compile(r"eta_[^/]+_K_\d+_seed_\d+$")


@dataclass
class Source:
    """A source folder as an import reads it (nothing loaded yet but its small files)."""

    format: str
    path: Path
    spec: object  # RunSpec
    task: object  # Task
    config: dict  # the configuration as the source wrote it
    data: dict  # how the task was had: {"generator": "synass", ...options} or {"generator": "interp", ...}
    checkpoints: dict[int, Path]  # step -> the model file
    optimizers: dict[int, Path] = field(default_factory=dict)  # step -> the optimizer file
    history: list[dict] = field(default_factory=list)  # the source's logged rows, its names, its steps
    columns: dict[str, str] = field(default_factory=dict)  # a history column -> its name in interp's metrics log
    logged: dict[int, dict] = field(default_factory=dict)  # step -> {"train_loss", "train_accuracy"} (the data check)
    notes: list[str] = field(default_factory=list)  # what the spec cannot express exactly
    files: list[Path] = field(default_factory=list)  # every small file read so far (the checkpoints are added)
    status: dict = field(default_factory=dict)  # the source's own status, where it has one
    log: list[dict] | None = None  # interp's own metrics log, carried whole (a run interp exported); None: rebuilt


def detect(src: Path) -> str:
    """The format of the folder `src`, or a one-line refusal naming what was found."""
    src = Path(src)
    if not src.exists():
        raise InterpError(f"no such folder: {src}")
    if not src.is_dir():
        raise InterpError(f"{src} is a file; give the folder of a run made elsewhere")
    if (src / "run.json").is_file():
        raise InterpError(f"{src} is itself an interp run (it has run.json): open it as it is (interp show {src})")
    for marker in ("sweep.json", "forks.json"):
        if (src / marker).is_file():
            raise InterpError(f"{src} is an interp collection (it has {marker}), not a run made elsewhere")
    if (src / "config.yaml").is_file() and (src / "checkpoints").is_dir():
        return "synass-main"
    if (src / "config.json").is_file() and ((src / "checkpoints").is_dir() or (src / "log.jsonl").is_file()):
        return "synass-eta"
    if any(ETA_RUN.search(p.name) and (p / "config.json").is_file() for p in src.iterdir() if p.is_dir()):
        return "synass-eta-sweep"
    if any(p.suffix in (".pt", ".pth", ".bin", ".safetensors") and re.search(r"\d", p.stem)
           for p in src.iterdir() if p.is_file()):
        return "tl-series"
    found = sorted(p.name for p in src.iterdir())[:6]
    raise InterpError(f"{src}: unknown format (it holds {', '.join(found) or 'nothing'}); interp imports "
                      + "; ".join(FORMAT_NAMES.values()) + " (--format names one)")


def refuse_unknown(config: dict, known: dict, where: str, ignore: tuple[str, ...] = ()) -> list[str]:
    """The dotted names of `config`'s fields that `known` ({section: field names, or None for a whole section the
    import has no use for}) does not list, less those in `ignore`; refused in one line naming them."""
    unknown = []
    for key, value in config.items():
        if key not in known:
            unknown.append(key)
        elif isinstance(known[key], (set, frozenset, tuple, list)):
            if not isinstance(value, dict):
                raise InterpError(f"{where}: {key} is not a section (got {type(value).__name__})")
            unknown += [f"{key}.{name}" for name in value if name not in known[key]]
    unknown = [name for name in unknown if name not in ignore and name.split(".")[0] not in ignore]
    if unknown:
        raise InterpError(f"{where}: interp cannot express {', '.join(sorted(unknown))} (not a field it maps); if "
                          f"{'it does' if len(unknown) == 1 else 'they do'} not change the data, the model or the "
                          f"training, import with --ignore {','.join(sorted(unknown))}")
    return unknown


def check_no_interpolation(config, where: str, prefix: str = "") -> None:
    """OmegaConf writes an unresolved `${...}` as text; such a value is refused (its meaning is not in the file)."""
    if isinstance(config, dict):
        for key, value in config.items():
            check_no_interpolation(value, where, f"{prefix}{key}.")
    elif isinstance(config, str) and "${" in config:
        raise InterpError(f"{where}: {prefix.rstrip('.')} is an unresolved interpolation ({config!r}); write the "
                          f"config resolved (OmegaConf.to_yaml(cfg, resolve=True))")
