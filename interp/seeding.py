"""Derive independent random streams (data, init, batches, eval) from the one run seed.

Every consumer gets its own local generator, so nothing reseeds the global RNG and
changing the seed changes the data, the initialisation and the batch order at once.
"""

import hashlib
from collections.abc import Callable, Iterable

import numpy as np

# Streams shared across the toolkit; an analysis that draws its own declares it in its
# registry entry (`Analysis.stream`), and the registry declares them here (`add_streams`).
# "inbatch_shuffle": the permutation of z across the logged training batch (the author's in-batch dz),
# drawn per step (`step_generator`) so that it never touches the batch stream and a resumed run draws the same.
BASE_STREAMS = ("task", "init", "batches", "eval", "probe", "resample", "reference", "bootstrap", "inbatch_shuffle",
                "import_check",  # "import_check": the training pairs an import scores its last checkpoint on
                # the task variants' own draws (interp.task), after the task's, and the held-out evaluation subset
                "hierarchy", "holdout", "label_noise", "eval_heldout", "reassign", "resize")
_SOURCES: list[Callable[[], Iterable[str]]] = []  # each lists more streams, read whenever they are asked for


def add_streams(source: Callable[[], Iterable[str]]) -> None:
    """Declare more streams: `source()` lists them, called each time streams are asked for (so a
    floor above, such as the analysis registry, declares its own without this module knowing it;
    `interp.analysis` loads the registry before any analysis can draw)."""
    if source not in _SOURCES:
        _SOURCES.append(source)


def streams() -> tuple[str, ...]:
    """Every known stream: the shared ones and those declared (the registered analyses')."""
    return BASE_STREAMS + tuple(dict.fromkeys(s for source in _SOURCES for s in source() if s not in BASE_STREAMS))


def derive_seed(seed: int, stream: str) -> int:
    """A 63-bit seed for `stream`, a pure function of (seed, stream)."""
    if stream not in BASE_STREAMS and stream not in streams():
        raise ValueError(f"unknown random stream {stream!r}; known: {', '.join(streams())}")
    digest = hashlib.sha256(f"interp:{int(seed)}:{stream}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def torch_generator(seed: int, stream: str):
    """A CPU torch.Generator for `stream` (CPU so results do not depend on the device).
    torch is imported here, so that the numpy streams need none of it."""
    import torch

    gen = torch.Generator(device="cpu")
    gen.manual_seed(derive_seed(seed, stream))
    return gen


def step_generator(seed: int, stream: str, step: int):
    """A CPU torch.Generator for `stream` at one step: a pure function of (seed, stream, step), so it
    needs no state in a resume file and draws the same whether or not the run was resumed."""
    import torch

    gen = torch.Generator(device="cpu")
    gen.manual_seed((derive_seed(seed, stream) + int(step)) & ((1 << 63) - 1))
    return gen


def numpy_generator(seed: int, stream: str) -> np.random.Generator:
    return np.random.default_rng(derive_seed(seed, stream))
