"""Where work runs: torch device names, and whether a run fits in the machine's memory.

Both checks run before anything is written, so a bad `--device` or a model too large for the
machine is one clear error instead of a traceback and a half-made run folder.
"""

from __future__ import annotations

import contextlib
import os
import re

from interp.errors import InterpError
from interp.spec import VOCAB_SIZE, RunSpec

DEVICE_PATTERN = re.compile(r"^(cpu|cuda|mps|xpu)(:\d+)?$")


@contextlib.contextmanager
def torch_threads(n: int | None):
    """torch's intra-op threads set to `n` for the block and given back after it (None or 0: left as they are): a
    job run in the caller's own process (a pool of one worker) leaves the caller's thread count as it found it."""
    if not n:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def deterministic_kernels(device):
    """torch's deterministic algorithms on for the block where `device` is the CPU, and given back after it.

    On the CPU the embedding backward otherwise sums in a thread-dependent order, and every kernel the
    toolkit uses has a deterministic version. Elsewhere they are left as they are: on CUDA, torch raises
    at the first matrix product under deterministic mode unless CUBLAS_WORKSPACE_CONFIG was set before
    the GPU was first used, and some kernels have no deterministic version at all (GPU work is not
    bit-reproducible; benchmarks/device_check.py measures how far apart two runs are)."""
    import torch

    if torch.device(device).type != "cpu":
        yield
        return
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was)


def check_device(name: str) -> str:
    """`name` if torch can use it on this machine, else an InterpError saying what is allowed."""
    if not isinstance(name, str) or not DEVICE_PATTERN.match(name):
        raise InterpError(f"unknown device {name!r}; allowed: cpu, cuda, cuda:N, mps")
    kind, _, index = name.partition(":")
    if kind == "cpu":
        return name
    import torch

    if kind == "cuda":
        if not torch.cuda.is_available():
            raise InterpError(f"device {name!r} was asked for, but this machine has no CUDA GPU "
                              f"(or this torch build has no CUDA); use --device cpu")
        if index and int(index) >= torch.cuda.device_count():
            raise InterpError(f"device {name!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    elif kind == "mps" and not torch.backends.mps.is_available():
        raise InterpError(f"device {name!r} was asked for, but MPS is not available here; use --device cpu")
    elif kind == "xpu" and not (hasattr(torch, "xpu") and torch.xpu.is_available()):
        raise InterpError(f"device {name!r} was asked for, but no XPU is available here; use --device cpu")
    return name


def training_bytes(spec: RunSpec) -> int:
    """A generous estimate of the memory training `spec` needs: parameters, gradients and
    AdamW state (4 copies), the dataset's tokens, and one batch's activations and their
    gradients."""
    n_ctx = spec.task.sequence_length
    m = spec.model
    params = spec.model.n_params(m.context(n_ctx), VOCAB_SIZE)
    tokens = spec.task.dataset_size * n_ctx * 8
    per_position = m.n_layers * (8 * m.d_model + 3 * m.n_heads * m.d_head + 2 * m.d_mlp
                                 + 2 * m.n_heads * n_ctx) + 3 * VOCAB_SIZE
    activations = 2 * spec.train.batch_size * n_ctx * per_position * 4
    return 4 * params * 4 + tokens + activations


def available_bytes(device: str) -> int | None:
    """Memory of `device` (physical RAM for the CPU), or None when it cannot be told."""
    kind = device.partition(":")[0]
    if kind == "cpu":
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            return None
    if kind == "cuda":
        import torch

        return torch.cuda.get_device_properties(torch.device(device)).total_memory
    return None


def check_fits(spec: RunSpec, device: str) -> None:
    """Refuse a run whose estimated training memory exceeds what `device` has, or whose
    precision `device` has no units for (`interp.precision.check_precision`)."""
    from interp.precision import check_precision

    check_precision(spec.train.precision, device)
    check_memory(training_bytes(spec), device,
                 f"this run needs about {{need}} to train (batch_size {spec.train.batch_size}, d_model "
                 f"{spec.model.d_model}, {spec.model.n_params(spec.model.context(spec.task.sequence_length)):,} parameters)",
                 "lower batch_size or the model size")


def check_memory(need: int, device: str, what: str, remedy: str) -> None:
    """Refuse work estimated to need `need` bytes where `device` has less, before any is done: one line, `what` (its
    "{need}" filled with the estimate in GiB), what the device has, and `remedy`."""
    have = available_bytes(device)
    if have is not None and need > have:
        gib = 1024**3
        raise InterpError(f"{what.format(need=f'{need / gib:,.1f} GiB')} but {device} has {have / gib:,.1f} GiB; {remedy}")


def is_allocation_failure(exc: BaseException) -> bool:
    """Whether `exc` is torch running out of memory (CPU allocator or GPU)."""
    if type(exc).__name__ == "OutOfMemoryError" or isinstance(exc, MemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("allocate" in text or "out of memory" in text)
