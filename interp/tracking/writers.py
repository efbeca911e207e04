"""The two writers, one interface: `scalars(step, {tag: value})`, `summary({name: value}, step)`,
`hparams(axes, names)`, `attach(kind, path)`, `close()`.

TensorBoard: `torch.utils.tensorboard.SummaryWriter`, every scalar in double precision (`new_style`,
`double_precision`: TensorBoard's own reader gives back the float64 the log holds); a per-run number (a sweep
table's column) is a scalar `summary/NAME` at the run's last step, a sweep's axes are TensorBoard's hparams
(the HPARAMS tab compares the runs), text is `add_text`, and an attached file is a text entry holding its path.

W&B: `wandb.init` with the run's name, its group (the sweep or fork family) and its spec as the config;
scalars through `run.log(..., step=step)` (steps ascending), per-run numbers in the run's summary, an
attached file as an artifact. W&B runs offline (`wandb_mode`) unless the user has configured it: WANDB_MODE
set, an API key in WANDB_API_KEY or in ~/.netrc (what `wandb login` writes), or a mode in wandb's settings
file; an offline run needs no network, and `wandb sync DIR/wandb/offline-run-*` uploads it later. W&B's
console capture, system metrics, git and code saving are off: the command's own output stays its own.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from interp.tracking import require

PROJECT = "interp"  # the W&B project unless WANDB_PROJECT says otherwise


class TensorBoardWriter:
    def __init__(self, folder: Path, purge_step: int | None = None):
        require("tensorboard")
        from torch.utils.tensorboard import SummaryWriter

        self.folder = Path(folder)
        self.writer = SummaryWriter(log_dir=str(self.folder), purge_step=purge_step, flush_secs=30)

    def scalars(self, step: int, values: dict[str, float]) -> None:
        for tag, value in values.items():
            self.writer.add_scalar(tag, value, int(step), new_style=True, double_precision=True)

    def summary(self, values: dict, step: int) -> None:
        numbers = {f"summary/{k}": float(v) for k, v in values.items() if _number(v)}
        self.scalars(step, numbers)
        for key, value in values.items():
            if isinstance(value, str) and value:
                self.writer.add_text(f"summary/{key}", value, int(step))

    def hparams(self, axes: dict, metrics: list[str]) -> None:
        """The run's axis values as TensorBoard hparams, compared on `metrics` (tags of `summary`)."""
        from torch.utils.tensorboard.summary import hparams

        clean = {k: v if isinstance(v, (int, float, str, bool)) else str(v) for k, v in axes.items()}
        for proto in hparams(clean, {m: 0.0 for m in metrics}):
            self.writer._get_file_writer().add_summary(proto)

    def attach(self, kind: str, path: Path) -> None:
        self.writer.add_text(f"attachments/{kind}", f"{kind}: {Path(path).resolve()}", 0)

    def close(self) -> None:
        self.writer.close()


def wandb_mode() -> str | None:
    """"offline" unless the user has configured W&B (then None: wandb decides, as it would for the user)."""
    if os.environ.get("WANDB_MODE") or os.environ.get("WANDB_API_KEY"):
        return None
    import netrc
    from urllib.parse import urlparse

    host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname or "api.wandb.ai"
    try:
        if netrc.netrc().authenticators(host):
            return None
    except (OSError, netrc.NetrcParseError):
        pass
    settings = Path(os.environ.get("WANDB_CONFIG_DIR", Path.home() / ".config" / "wandb")) / "settings"
    try:
        if re.search(r"^\s*mode\s*=", settings.read_text(), re.M):
            return None
    except OSError:
        pass
    return "offline"


class WandbWriter:
    def __init__(self, folder: Path, name: str, group: str | None, config: dict, job_type: str):
        require("wandb")
        import wandb

        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.name = name
        settings = wandb.Settings(console="off", silent=True, x_disable_stats=True, save_code=False, disable_git=True,
                                  x_save_requirements=False, x_disable_machine_info=True)
        self.run = wandb.init(dir=str(self.folder), project=os.environ.get("WANDB_PROJECT", PROJECT), name=name,
                              group=group, config=config, job_type=job_type, mode=wandb_mode(), reinit="create_new",
                              settings=settings)

    def scalars(self, step: int, values: dict[str, float]) -> None:
        self.run.log(values, step=int(step))

    def summary(self, values: dict, step: int) -> None:
        self.run.summary.update({k: (float(v) if _number(v) else v) for k, v in values.items()
                                 if _number(v) or (isinstance(v, str) and v)})

    def hparams(self, axes: dict, metrics: list[str]) -> None:
        self.run.config.update({"axes": axes}, allow_val_change=True)

    def attach(self, kind: str, path: Path) -> None:
        import wandb

        artifact = wandb.Artifact(re.sub(r"[^\w.-]", "_", f"{self.name}-{kind}"), type=kind)
        artifact.add_file(str(path), name=Path(path).name)
        self.run.log_artifact(artifact)

    def close(self) -> None:
        self.run.finish()


def _number(value) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(float(value))) or (
        type(value).__module__ == "numpy" and hasattr(value, "dtype") and value.dtype.kind in "iuf"
        and not math.isnan(float(value)))


def open_writer(kind: str, folder: Path, *, name: str, group: str | None = None, config: dict | None = None,
                job_type: str = "train", purge_step: int | None = None):
    """A writer for one run: TensorBoard's event files in `folder`; W&B's run folder under `folder`/wandb."""
    if kind == "tensorboard":
        return TensorBoardWriter(folder, purge_step)
    return WandbWriter(folder, name, group, config or {}, job_type)
