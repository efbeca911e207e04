"""Derive independent random streams (data, init, batches, eval) from the one run seed.

Every consumer gets its own local generator, so nothing reseeds the global RNG and
changing the seed changes the data, the initialisation and the batch order at once.
"""

import hashlib

import numpy as np

# Streams shared across the toolkit; an analysis that draws its own declares it in its
# registry entry (`Analysis.stream`), which is where `streams()` finds it.
BASE_STREAMS = ("task", "init", "batches", "eval", "probe", "resample", "reference", "bootstrap")


def streams() -> tuple[str, ...]:
    """Every known stream: the shared ones and those of the registered analyses."""
    from interp.analysis import registry  # torch-free: the table only, no analysis module

    return BASE_STREAMS + tuple(s for s in registry.streams() if s not in BASE_STREAMS)


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


def numpy_generator(seed: int, stream: str) -> np.random.Generator:
    return np.random.default_rng(derive_seed(seed, stream))
