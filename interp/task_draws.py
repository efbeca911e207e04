"""The random draws of a task, as arrays of character indices from numpy generators: distinct strings, the targets
(unique first characters or prefixes), and each variant's draw (hierarchical selectors, reassigned targets, a resized
K, the held-out pairs, the label noise). `interp.task.Task.generate` calls them in a fixed order, each variant from
a stream of its own (docs/definitions.md, "The task")."""

from __future__ import annotations

import math

import numpy as np

from interp.errors import InterpError
from interp.spec import N_CHARS, TaskSpec


def digits(codes: np.ndarray, length: int) -> np.ndarray:
    """Integer codes -> [n, length] base-36 digits (most significant first)."""
    out = np.empty((len(codes), length), dtype=np.int64)
    rest = codes.copy()
    for j in range(length - 1, -1, -1):
        out[:, j] = rest % N_CHARS
        rest //= N_CHARS
    return out


def first_duplicates(rows: np.ndarray) -> np.ndarray:
    """Boolean mask of rows equal to an earlier row."""
    _, first_index = np.unique(rows, axis=0, return_index=True)
    dup = np.ones(len(rows), dtype=bool)
    dup[first_index] = False
    return dup


def distinct_strings(rng: np.random.Generator, n: int, length: int) -> np.ndarray:
    """n distinct random strings of `length` characters, as [n, length] character indices."""
    space = N_CHARS**length
    if space <= 10**7:
        return digits(rng.choice(space, size=n, replace=False), length)
    rows = rng.integers(0, N_CHARS, size=(n, length))
    for _ in range(1000):
        dup = first_duplicates(rows)
        if not dup.any():
            return rows
        rows[dup] = rng.integers(0, N_CHARS, size=(int(dup.sum()), length))
    raise InterpError(f"could not draw {n} distinct strings of length {length}")


def more_distinct_strings(rng: np.random.Generator, taken: np.ndarray, n: int, length: int) -> np.ndarray:
    """n distinct random strings of `length` characters, none of them among the rows of `taken`."""
    space = N_CHARS**length
    if len(taken) + n > space:
        raise InterpError(f"could not draw {n} more distinct strings of length {length}: {len(taken)} of the "
                          f"{space} are taken")
    weights = N_CHARS ** np.arange(length - 1, -1, -1)
    if space <= 10**7:
        free = np.setdiff1d(np.arange(space), taken @ weights)
        return digits(rng.choice(free, size=n, replace=False), length)
    rows = rng.integers(0, N_CHARS, size=(n, length))
    for _ in range(1000):
        dup = first_duplicates(np.concatenate([taken, rows]))[len(taken):]
        if not dup.any():
            return rows
        rows[dup] = rng.integers(0, N_CHARS, size=(int(dup.sum()), length))
    raise InterpError(f"could not draw {n} more distinct strings of length {length}")


def targets(rng: np.random.Generator, spec: TaskSpec) -> np.ndarray:
    """[n_bases, K, len_a] character indices, unique across the dataset."""
    n, k, length = spec.n_bases, spec.k, spec.len_a
    if not spec.unique_first:
        return distinct_strings(rng, n * k, length).reshape(n, k, length)
    p = spec.unique_prefix
    # K distinct first characters (prefixes of p characters) per group: the first K of a random permutation per group
    first = np.argsort(rng.random((n, N_CHARS**p)), axis=1)[:, :k]
    head = first.reshape(-1, 1) if p == 1 else digits(first.reshape(-1), p)
    rows = np.concatenate([head, rng.integers(0, N_CHARS, size=(n * k, length - p))], axis=1)
    for _ in range(10000):
        dup = first_duplicates(rows)
        if not dup.any():
            return rows.reshape(n, k, length)
        if length == p:
            break
        rows[dup, p:] = rng.integers(0, N_CHARS, size=(int(dup.sum()), length - p))
    raise InterpError(
        f"could not make {n * k} distinct targets of length {length} with unique first "
        f"{'characters' if p == 1 else f'{p}-character prefixes'}; increase len_a"
    )


def hierarchy_selectors(rng: np.random.Generator, spec: TaskSpec) -> np.ndarray:
    """[K, 2] character indices of `TaskSpec.hierarchy` K1xK2: selector i = c K2 + t is z1 = the c-th of K1 cluster
    characters and z2 = the t-th of K2 within-cluster characters, the K1 + K2 drawn distinct from the seed (the
    author's uses the alphabet's first K1 and next K2). Cluster c holds candidates c K2 .. (c + 1) K2 - 1 of each base."""
    k1, k2 = spec.hierarchy_factors
    chars = rng.permutation(N_CHARS)[: k1 + k2]
    z1, z2 = chars[:k1], chars[k1:]
    return np.stack([np.repeat(z1, k2), np.tile(z2, k1)], axis=1)


def reassigned(rng: np.random.Generator, spec: TaskSpec, targets: np.ndarray) -> np.ndarray:
    """`targets` [n, K, len_a] with those of floor(F n_bases) bases (the first of a seeded order of the bases, so a
    larger F reassigns a superset) permuted by a random K-cycle: each of those bases keeps its candidates, and none
    of its selectors keeps its target."""
    n, k = targets.shape[:2]
    chosen = rng.permutation(n)[: int(math.floor(spec.reassign_fraction * n + 1e-9))]
    out = targets.copy()
    for g in chosen:  # one K-cycle per base: order the selectors at random, each takes the next one's target
        order = rng.permutation(k)
        out[g, order] = targets[g, np.roll(order, -1)]
    return out


def resized(rng: np.random.Generator, spec: TaskSpec, sets: np.ndarray, targets: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """([k, len_z] selectors, [n, k, len_a] targets) of a K0 task's (`sets` [K0, len_z], `targets` [n, K0, len_a],
    character indices) resized to spec.k: the first k selectors
    and their targets (k < K0), or K0's with k - K0 new selectors and a new target per base and selector, distinct
    from every string drawn (with unique first characters: none of the base's first characters, or prefixes)."""
    k0, k = sets.shape[0], spec.k
    if k < k0:
        return sets[:k], targets[:, :k]
    extra, n, length = k - k0, spec.n_bases, spec.len_a
    new_sets = np.concatenate([sets, more_distinct_strings(rng, sets, extra, spec.len_z)])
    taken = targets.reshape(-1, length)
    if not spec.unique_first:
        new = more_distinct_strings(rng, taken, n * extra, length).reshape(n, extra, length)
        return new_sets, np.concatenate([targets, new], axis=1)
    p = spec.unique_prefix
    weights = N_CHARS ** np.arange(p - 1, -1, -1)
    used = targets[:, :, :p] @ weights  # [n, K0] each base's prefixes
    score = rng.random((n, N_CHARS**p))
    score[np.arange(n)[:, None], used] = np.inf  # a base's own prefixes come last, never chosen
    heads = digits(np.argsort(score, axis=1)[:, :extra].reshape(-1), p)
    rows = np.concatenate([heads, rng.integers(0, N_CHARS, size=(n * extra, length - p))], axis=1)
    for _ in range(10000):
        dup = first_duplicates(np.concatenate([taken, rows]))[len(taken):]
        if not dup.any():
            return new_sets, np.concatenate([targets, rows.reshape(n, extra, length)], axis=1)
        if length == p:
            break
        rows[dup, p:] = rng.integers(0, N_CHARS, size=(int(dup.sum()), length - p))
    raise InterpError(f"could not draw {n * extra} new distinct targets of length {length}; increase len_a")


def holdout(rng: np.random.Generator, spec: TaskSpec) -> np.ndarray:
    """[n_bases, K] booleans: the pairs never trained on, floor(F D) pairs (holdout_by "pair") or every pair of
    floor(F n_bases) bases ("base"), chosen uniformly from the seed."""
    n, k = spec.n_bases, spec.k
    held = np.zeros(n * k if spec.holdout_by == "pair" else n, dtype=bool)
    held[rng.choice(len(held), size=spec.held_out_count, replace=False)] = True
    return held.reshape(n, k) if spec.holdout_by == "pair" else np.repeat(held[:, None], k, axis=1)


def label_noise(rng: np.random.Generator, spec: TaskSpec) -> np.ndarray:
    """[D] the candidate each example is trained to output (group-major): its own selector's, or with probability P
    (label_noise) another of its base's, uniform over the K - 1 others; drawn once (static, as the author's)."""
    n, k = spec.n_bases, spec.k
    own = np.tile(np.arange(k), n)
    flip = rng.random(n * k) < spec.label_noise
    other = (own + rng.integers(1, k, size=n * k)) % k
    return np.where(flip, other, own)
