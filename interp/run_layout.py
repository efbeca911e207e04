"""The names of the files in a run folder (`interp.runs` documents what each holds)."""

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
