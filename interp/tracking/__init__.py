"""TensorBoard and Weights & Biases: where researchers already look (docs/tracking.md).

Training is handed a sink (`interp.sinks`) built here (`sinks.Tracker`): at every evaluation it writes what
metrics.jsonl logs, under the same names. `export.export` writes a run's, a sweep's or a fork family's
metrics and cached analysis tables (reduced to scalars on the checkpoint axis: `scalars`) after the fact.
Both go through `writers`: TensorBoard through `torch.utils.tensorboard` (the `tensorboard` package),
W&B through `wandb`, offline unless an account is configured. Both libraries are the optional extra
`track`, imported only where they are used; a missing one is one line (`require`).
"""

from __future__ import annotations

import importlib.util

from interp.errors import InterpError

TRACKERS = ("tensorboard", "wandb")
INSTALL = "pip install 'interp[track]' (in a checkout: pip install -e '.[track]')"


def check_tracker(kind: str) -> str:
    """`kind` when it is one of TRACKERS, else the one-line error saying which are."""
    if kind not in TRACKERS:
        raise InterpError(f"unknown tracker {kind!r}; allowed: {', '.join(TRACKERS)}")
    return kind


def require(kind: str) -> None:
    """Refuse, in one line naming the install, a tracker whose library is not installed (found without importing it)."""
    check_tracker(kind)
    try:
        found = importlib.util.find_spec(kind) is not None
    except (ImportError, ValueError):  # a module set to None in sys.modules: not importable
        found = False
    if not found:
        raise InterpError(f"{kind} is not installed: it comes with the optional extra track: {INSTALL}")
    if kind == "wandb":
        check_wandb_env()


WANDB_MODES = ("online", "offline", "disabled", "shared", "dryrun", "run")  # what W&B's own settings accept


def check_wandb_env() -> None:
    """Refuse, before anything is written, a WANDB_MODE that W&B itself would refuse mid-run (with a pydantic dump that
    never names the variable)."""
    import os

    mode = os.environ.get("WANDB_MODE")
    if mode is not None and mode.strip().lower() not in WANDB_MODES:
        raise InterpError(f"the environment's WANDB_MODE={mode!r} is not a W&B mode; W&B accepts "
                          f"{', '.join(WANDB_MODES)} (unset it: interp runs W&B offline by default)")
