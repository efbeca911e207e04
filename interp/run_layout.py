"""The names of the files in a run folder (`interp.runs` documents what each holds), and what needs only them: the
check that a new run folder can be made, and the hash of a run.json block."""

from pathlib import Path

FORMAT = 1
RUN_FILE = "run.json"
MANIFEST_FILE = "manifest.json"
METRICS_FILE = "metrics.jsonl"
RESUME_FILE = "resume.safetensors"
STATUS_FILE = "status.json"
LOCK_FILE = ".lock"
CHECKPOINT_DIR = "checkpoints"
STATE_DIR = "states"
CACHE_DIR = "cache"
TASK_FILE = "task.safetensors"  # a task given by its tables (interp.task_tables)
HISTORY_FILE = "source_history.jsonl"  # an imported run's source log, as written (interp.imports)


def fork_sha256(block: dict) -> str:
    """SHA-256 of a fork block's canonical JSON (what run.json's `fork_sha256` holds)."""
    import json

    from interp.files import sha256_bytes

    return sha256_bytes(json.dumps(block, sort_keys=True, separators=(",", ":")).encode())


def check_new_folder(path: Path) -> None:
    """Refuse a path where a new run folder cannot be made, before anything is written."""
    from interp.errors import InterpError
    from interp.files import check_writable_parent

    if str(path) in ("", "."):
        raise InterpError("the run folder must be a non-empty path")
    if path.exists() and not path.is_dir():
        raise InterpError(f"{path} is a file; a run needs a folder")
    if (path / RUN_FILE).exists():
        raise InterpError(f"{path} already holds a run; resume it or choose another folder")
    if path.exists() and any(p.name != LOCK_FILE for p in path.iterdir()):
        raise InterpError(f"{path} exists and is not empty; choose another folder")
    check_writable_parent(path, "create")
