"""The disambiguation task (docs/definitions.md, "The task"): generation, token layout, groups and candidates.

A Task holds tensors, not lists of dicts. Examples are stored group-major: example
`g * K + i` is base `g` with selector `i`. Nothing here knows about models.

Selector `i` means the i-th selector of the example's own selector set: one set shared by
every base (the paper's task), or, with `TaskSpec.selector_groups = G`, one set per supergroup
of G consecutive bases (base g in supergroup g // G), no string shared between sets.
`selector_id` is always that within-set index 0..K-1, so the K candidates, the targets
`targets[g, i]` and every "other selector of the group" keep their meaning.
"""

from __future__ import annotations

import hashlib
import math
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from jaxtyping import Bool, Int

from interp.errors import InterpError
from interp.seeding import numpy_generator, torch_generator
from interp.spec import (  # noqa: F401  (re-exported: the task's vocabulary lives with its spec)
    ALPHABET,
    BOS,
    DIRECTIONS,
    EOS,
    FIRST_CHAR_ID,
    MAX_LEN,
    N_CHARS,
    PAD,
    SEP,
    VOCAB_SIZE,
    TaskSpec,
)

# torch is imported where a Task is made, so that the layout alone (a cached report) never loads it; where torch is
# already loaded (the tests), its names are bound here for jaxtyping's runtime checks of the annotations
if TYPE_CHECKING or "torch" in sys.modules:
    import torch
    from torch import Tensor

SPECIAL_NAMES = {PAD: "PAD", BOS: "BOS", EOS: "EOS", SEP: "SEP"}


@dataclass(frozen=True)
class Layout:
    """Where everything sits in a sequence. Every example of a task shares one layout."""

    length: int
    decision_pos: int  # logits here predict the first output token
    z_pos: tuple[int, ...]  # empty when the direction has no selector
    output_pos: tuple[int, ...]  # positions holding the output tokens, EOS included
    segments: dict[str, tuple[int, int]]  # name -> [start, stop): BOS, B, SEP, z, SEP2, A, EOS

    @property
    def loss_pos(self) -> tuple[int, ...]:
        """Positions whose logits are scored: each predicts the token one to its right."""
        return tuple(p - 1 for p in self.output_pos)


def build_layout(spec: TaskSpec) -> Layout:
    if spec.reverse:
        return _reversed_layout(spec)
    inputs, output = DIRECTIONS[spec.direction]
    lengths = {"A": spec.len_a, "B": spec.len_b, "z": spec.len_z}
    segments: dict[str, tuple[int, int]] = {"BOS": (0, 1)}
    pos = 1
    for i, name in enumerate(inputs):
        segments[name] = (pos, pos + lengths[name])
        pos += lengths[name]
        sep_name = "SEP" if i == 0 else "SEP2"
        segments[sep_name] = (pos, pos + 1)
        pos += 1
    decision = pos - 1
    segments[output] = (pos, pos + lengths[output])
    pos += lengths[output]
    segments["EOS"] = (pos, pos + 1)
    pos += 1
    z_pos = tuple(range(*segments["z"])) if "z" in segments else ()
    return Layout(
        length=pos,
        decision_pos=decision,
        z_pos=z_pos,
        output_pos=tuple(range(decision + 1, pos)),
        segments=segments,
    )


def _reversed_layout(spec: TaskSpec) -> Layout:
    """BOS A SEP z SEP2 B EOS (`TaskSpec.reverse`): the target comes first and is predicted from BOS alone; the
    scored outputs are A and the SEP after it (which closes A as EOS does in the forward layout)."""
    a, z, b = spec.len_a, spec.len_z, spec.len_b
    segments = {"BOS": (0, 1), "A": (1, 1 + a), "SEP": (1 + a, 2 + a), "z": (2 + a, 2 + a + z),
                "SEP2": (2 + a + z, 3 + a + z), "B": (3 + a + z, 3 + a + z + b), "EOS": (3 + a + z + b, 4 + a + z + b)}
    return Layout(length=4 + a + z + b, decision_pos=0, z_pos=tuple(range(*segments["z"])),
                  output_pos=tuple(range(1, 2 + a)), segments=segments)


def _digits(codes: np.ndarray, length: int) -> np.ndarray:
    """Integer codes -> [n, length] base-36 digits (most significant first)."""
    out = np.empty((len(codes), length), dtype=np.int64)
    rest = codes.copy()
    for j in range(length - 1, -1, -1):
        out[:, j] = rest % N_CHARS
        rest //= N_CHARS
    return out


def _first_duplicates(rows: np.ndarray) -> np.ndarray:
    """Boolean mask of rows equal to an earlier row."""
    _, first_index = np.unique(rows, axis=0, return_index=True)
    dup = np.ones(len(rows), dtype=bool)
    dup[first_index] = False
    return dup


def _distinct_strings(rng: np.random.Generator, n: int, length: int) -> np.ndarray:
    """n distinct random strings of `length` characters, as [n, length] character indices."""
    space = N_CHARS**length
    if space <= 10**7:
        return _digits(rng.choice(space, size=n, replace=False), length)
    rows = rng.integers(0, N_CHARS, size=(n, length))
    for _ in range(1000):
        dup = _first_duplicates(rows)
        if not dup.any():
            return rows
        rows[dup] = rng.integers(0, N_CHARS, size=(int(dup.sum()), length))
    raise InterpError(f"could not draw {n} distinct strings of length {length}")


def _more_distinct_strings(rng: np.random.Generator, taken: np.ndarray, n: int, length: int) -> np.ndarray:
    """n distinct random strings of `length` characters, none of them among the rows of `taken`."""
    space = N_CHARS**length
    if len(taken) + n > space:
        raise InterpError(f"could not draw {n} more distinct strings of length {length}: {len(taken)} of the "
                          f"{space} are taken")
    weights = N_CHARS ** np.arange(length - 1, -1, -1)
    if space <= 10**7:
        free = np.setdiff1d(np.arange(space), taken @ weights)
        return _digits(rng.choice(free, size=n, replace=False), length)
    rows = rng.integers(0, N_CHARS, size=(n, length))
    for _ in range(1000):
        dup = _first_duplicates(np.concatenate([taken, rows]))[len(taken):]
        if not dup.any():
            return rows
        rows[dup] = rng.integers(0, N_CHARS, size=(int(dup.sum()), length))
    raise InterpError(f"could not draw {n} more distinct strings of length {length}")


def _targets(rng: np.random.Generator, spec: TaskSpec) -> np.ndarray:
    """[n_bases, K, len_a] character indices, unique across the dataset."""
    n, k, length = spec.n_bases, spec.k, spec.len_a
    if not spec.unique_first:
        return _distinct_strings(rng, n * k, length).reshape(n, k, length)
    p = spec.unique_prefix
    # K distinct first characters (prefixes of p characters) per group: the first K of a random permutation per group
    first = np.argsort(rng.random((n, N_CHARS**p)), axis=1)[:, :k]
    head = first.reshape(-1, 1) if p == 1 else _digits(first.reshape(-1), p)
    rows = np.concatenate([head, rng.integers(0, N_CHARS, size=(n * k, length - p))], axis=1)
    for _ in range(10000):
        dup = _first_duplicates(rows)
        if not dup.any():
            return rows.reshape(n, k, length)
        if length == p:
            break
        rows[dup, p:] = rng.integers(0, N_CHARS, size=(int(dup.sum()), length - p))
    raise InterpError(
        f"could not make {n * k} distinct targets of length {length} with unique first "
        f"{'characters' if p == 1 else f'{p}-character prefixes'}; increase len_a"
    )


def _hierarchy_selectors(rng: np.random.Generator, spec: TaskSpec) -> np.ndarray:
    """[K, 2] character indices of `TaskSpec.hierarchy` K1xK2: selector i = c K2 + t is z1 = the c-th of K1 cluster
    characters and z2 = the t-th of K2 within-cluster characters, the K1 + K2 drawn distinct from the seed (the
    author's uses the alphabet's first K1 and next K2). Cluster c holds candidates c K2 .. (c + 1) K2 - 1 of each base."""
    k1, k2 = spec.hierarchy_factors
    chars = rng.permutation(N_CHARS)[: k1 + k2]
    z1, z2 = chars[:k1], chars[k1:]
    return np.stack([np.repeat(z1, k2), np.tile(z2, k1)], axis=1)


def _reassigned(rng: np.random.Generator, spec: TaskSpec, targets: np.ndarray) -> np.ndarray:
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


def _resized(rng: np.random.Generator, spec: TaskSpec, drawn: Task) -> tuple[np.ndarray, np.ndarray]:
    """([k, len_z] selectors, [n, k, len_a] targets) of the K0 task `drawn` resized to spec.k: the first k selectors
    and their targets (k < K0), or K0's with k - K0 new selectors and a new target per base and selector, distinct
    from every string drawn (with unique first characters: none of the base's first characters, or prefixes)."""
    k0, k = drawn.k, spec.k
    sets = drawn.selector_sets[0].numpy() - FIRST_CHAR_ID
    targets = drawn.targets.numpy() - FIRST_CHAR_ID
    if k < k0:
        return sets[:k], targets[:, :k]
    extra, n, length = k - k0, spec.n_bases, spec.len_a
    new_sets = np.concatenate([sets, _more_distinct_strings(rng, sets, extra, spec.len_z)])
    taken = targets.reshape(-1, length)
    if not spec.unique_first:
        new = _more_distinct_strings(rng, taken, n * extra, length).reshape(n, extra, length)
        return new_sets, np.concatenate([targets, new], axis=1)
    p = spec.unique_prefix
    weights = N_CHARS ** np.arange(p - 1, -1, -1)
    used = targets[:, :, :p] @ weights  # [n, K0] each base's prefixes
    score = rng.random((n, N_CHARS**p))
    score[np.arange(n)[:, None], used] = np.inf  # a base's own prefixes come last, never chosen
    heads = _digits(np.argsort(score, axis=1)[:, :extra].reshape(-1), p)
    rows = np.concatenate([heads, rng.integers(0, N_CHARS, size=(n * extra, length - p))], axis=1)
    for _ in range(10000):
        dup = _first_duplicates(np.concatenate([taken, rows]))[len(taken):]
        if not dup.any():
            return new_sets, np.concatenate([targets, rows.reshape(n, extra, length)], axis=1)
        if length == p:
            break
        rows[dup, p:] = rng.integers(0, N_CHARS, size=(int(dup.sum()), length - p))
    raise InterpError(f"could not draw {n * extra} new distinct targets of length {length}; increase len_a")


def _holdout(rng: np.random.Generator, spec: TaskSpec) -> np.ndarray:
    """[n_bases, K] booleans: the pairs never trained on, floor(F D) pairs (holdout_by "pair") or every pair of
    floor(F n_bases) bases ("base"), chosen uniformly from the seed."""
    n, k = spec.n_bases, spec.k
    held = np.zeros(n * k if spec.holdout_by == "pair" else n, dtype=bool)
    held[rng.choice(len(held), size=spec.held_out_count, replace=False)] = True
    return held.reshape(n, k) if spec.holdout_by == "pair" else np.repeat(held[:, None], k, axis=1)


def _label_noise(rng: np.random.Generator, spec: TaskSpec) -> np.ndarray:
    """[D] the candidate each example is trained to output (group-major): its own selector's, or with probability P
    (label_noise) another of its base's, uniform over the K - 1 others; drawn once (static, as the author's)."""
    n, k = spec.n_bases, spec.k
    own = np.tile(np.arange(k), n)
    flip = rng.random(n * k) < spec.label_noise
    other = (own + rng.integers(1, k, size=n * k)) % k
    return np.where(flip, other, own)


class Task:
    """A generated task: tokens [D, T] plus group, selector and candidate tables.

    `selector_sets` [S, K, len_z] holds every selector string, `supergroup` [n_bases] the set
    each base uses (S = 1 and all zeros unless `spec.selector_groups` is set; a task given by its
    tables may assign the sets in another order). `heldout` [n_bases, K] marks the pairs a run
    never trained on (a task given by its tables: `interp.task_tables`); None: every pair is trained on."""

    def __init__(
        self,
        spec: TaskSpec,
        seed: int,
        selector_sets: Int[Tensor, "sets k len_z"],
        bases: Int[Tensor, "n_bases len_b"],
        targets: Int[Tensor, "n_bases k len_a"],
        supergroup: Int[Tensor, " n_bases"] | None = None,
        heldout: Bool[Tensor, "n_bases k"] | None = None,
    ):
        import torch

        self.spec = spec
        self.seed = seed
        self.layout = build_layout(spec)
        self.selector_sets = selector_sets
        self.bases = bases
        self.targets = targets
        n, k = spec.n_bases, spec.k
        if len(selector_sets) != spec.n_selector_sets:
            raise InterpError(f"{len(selector_sets)} selector sets given; the spec needs {spec.n_selector_sets}")
        default = torch.arange(n) // spec.bases_per_selector_set
        self.supergroup = default if supergroup is None else supergroup
        self.own_order = supergroup is None or torch.equal(supergroup, default)
        self.heldout = heldout if heldout is not None and bool(heldout.any()) else None
        self.noisy: Tensor | None = None  # [D] the candidate each example is trained on, where label noise is set
        self.group_id = torch.arange(n).repeat_interleave(k)
        self.selector_id = torch.arange(k).repeat(n)
        self.tokens = self._build_tokens(self.group_id, self.selector_id)

    @classmethod
    def generate(cls, spec: TaskSpec, seed: int = 0) -> Task:
        """Draw selectors, bases and targets from `seed` (docs/definitions.md, "The task")."""

        spec.validate()
        if spec.source != "generated":
            raise InterpError(f"a task of source {spec.source!r} is not drawn from a seed: its run folder holds its "
                              f"tables (interp.task_tables; open the run and use run.task)")
        if spec.resized_from is not None:  # the K0 task's strings, resized
            import dataclasses

            drawn = cls.generate(dataclasses.replace(spec, k=spec.resized_from, resized_from=None, label_noise=0.0,
                                                     holdout_fraction=0.0, reassign_fraction=0.0), seed)
            sets, targets = _resized(numpy_generator(seed, "resize"), spec, drawn)
            return cls._finish(spec, seed, sets[None], drawn.bases.numpy() - FIRST_CHAR_ID, targets)
        rng = numpy_generator(seed, "task")
        selectors = _distinct_strings(rng, spec.k, spec.len_z)
        bases = _distinct_strings(rng, spec.n_bases, spec.len_b)
        targets = _targets(rng, spec)
        # the other supergroups' selectors come after every draw of the one-set task, so G = n_bases
        # (or None) gives it bit for bit; no string is shared between sets
        extra = (spec.n_selector_sets - 1) * spec.k
        if extra:
            selectors = np.concatenate([selectors, _more_distinct_strings(rng, selectors, extra, spec.len_z)])
        sets = selectors.reshape(spec.n_selector_sets, spec.k, spec.len_z)
        # the variants draw from streams of their own, after everything above: the default task is drawn as before
        if spec.hierarchy is not None:
            sets = _hierarchy_selectors(numpy_generator(seed, "hierarchy"), spec)[None]
        if spec.selector == "constant":  # every selector is the first one: z tells nothing
            sets = np.repeat(sets[:, :1], spec.k, axis=1)
        return cls._finish(spec, seed, sets, bases, targets)

    @classmethod
    def _finish(cls, spec: TaskSpec, seed: int, sets: np.ndarray, bases: np.ndarray, targets: np.ndarray) -> Task:
        """The task from its drawn strings (character indices): the reassignment, the held-out split and the label
        noise, each from a stream of its own."""
        import torch

        if spec.reassign_fraction:
            targets = _reassigned(numpy_generator(seed, "reassign"), spec, targets)
        as_tokens = lambda a: torch.from_numpy(np.ascontiguousarray(a) + FIRST_CHAR_ID).long()  # noqa: E731
        heldout = _holdout(numpy_generator(seed, "holdout"), spec) if spec.holdout_fraction else None
        task = cls(spec, seed, as_tokens(sets), as_tokens(bases), as_tokens(targets),
                   heldout=None if heldout is None else torch.from_numpy(heldout))
        if spec.label_noise:
            task.noisy = torch.from_numpy(_label_noise(numpy_generator(seed, "label_noise"), spec))
        return task

    # ----------------------------------------------------------------- sizes and names
    @property
    def k(self) -> int:
        return self.spec.k

    @property
    def n_groups(self) -> int:
        return self.spec.n_bases

    @property
    def size(self) -> int:
        return self.spec.dataset_size

    @property
    def n_selector_sets(self) -> int:
        return self.spec.n_selector_sets

    @property
    def selectors(self) -> Int[Tensor, "k len_z"]:
        """The K selectors every base shares (the task without `selector_groups`, or G = n_bases).
        With several selector sets there is no such table: use `selector_sets` or `selector_tokens`."""
        if self.n_selector_sets != 1:
            raise InterpError(
                f"this task has {self.n_selector_sets} selector sets (selector_groups = "
                f"{self.spec.selector_groups}), so no one table of K selectors: use task.selector_sets "
                f"[sets, K, len_z] with task.supergroup, or task.selector_tokens(group_id, selector_id)"
            )
        return self.selector_sets[0]

    def selector_tokens(
        self, group_id: Int[Tensor, " n"], selector_id: Int[Tensor, " n"]
    ) -> Int[Tensor, "n len_z"]:
        """The z tokens of selector `selector_id` of each group's own selector set."""
        return self.selector_sets[self.supergroup[group_id], selector_id]

    @property
    def log_k(self) -> float:
        return math.log(self.spec.k)

    @property
    def has_selector(self) -> bool:
        return bool(self.layout.z_pos)

    @property
    def has_candidates(self) -> bool:
        """Candidate metrics need the K outputs of a group to differ (the output is A)."""
        return DIRECTIONS[self.spec.direction][1] == "A"

    # ----------------------------------------------------------------- tokens
    def _segment_tokens(
        self, name: str, group_id: Int[Tensor, " n"], selector_id: Int[Tensor, " n"]
    ) -> Int[Tensor, "n len"]:
        if name == "B":
            return self.bases[group_id]
        if name == "z":
            return self.selector_tokens(group_id, selector_id)
        return self.targets[group_id, selector_id]

    def _build_tokens(
        self, group_id: Int[Tensor, " n"], selector_id: Int[Tensor, " n"]
    ) -> Int[Tensor, "n seq"]:
        import torch

        inputs, output = DIRECTIONS[self.spec.direction]
        n = len(group_id)
        col = lambda value: torch.full((n, 1), value, dtype=torch.long)  # noqa: E731
        seg = lambda name: self._segment_tokens(name, group_id, selector_id)  # noqa: E731
        if self.spec.reverse:  # BOS A SEP z SEP B EOS
            return torch.cat([col(BOS), seg("A"), col(SEP), seg("z"), col(SEP), seg("B"), col(EOS)], dim=1)
        parts = [col(BOS)]
        for i, name in enumerate(inputs):
            parts += [seg(name), col(SEP)]
        parts += [seg(output), col(EOS)]
        return torch.cat(parts, dim=1)

    def with_selector(
        self, idx: Int[Tensor, " n"], selector_id: Int[Tensor, " n"]
    ) -> Int[Tensor, "n seq"]:
        """The examples `idx` with their z replaced by selector `selector_id` of the example's own
        selector set (outputs kept)."""
        if not self.has_selector:
            raise InterpError(f"direction {self.spec.direction!r} has no selector to replace")
        tokens = self.tokens[idx].clone()
        start, stop = self.layout.segments["z"]
        tokens[:, start:stop] = self.selector_tokens(self.group_id[idx], selector_id)
        return tokens

    def outputs(self) -> Int[Tensor, "n_bases k out"]:
        """The output token sequence (EOS included) of every (group, selector)."""
        out = self.tokens[:, list(self.layout.output_pos)]
        return out.reshape(self.n_groups, self.k, -1)

    def candidates(self, idx: Int[Tensor, " n"]) -> Int[Tensor, "n k out"]:
        """The K candidate outputs of each example's group; candidate `selector_id` is correct."""
        return self.outputs()[self.group_id[idx]]

    def with_candidates(self, idx: Int[Tensor, " n"]) -> Int[Tensor, "n k seq"]:
        """Each example repeated K times with its output replaced by each candidate."""
        tokens = self.tokens[idx].unsqueeze(1).repeat(1, self.k, 1)
        tokens[:, :, list(self.layout.output_pos)] = self.candidates(idx)
        return tokens

    def other_selectors(self, idx: Int[Tensor, " n"], generator: torch.Generator) -> Int[Tensor, " n"]:
        """For each example a uniformly drawn selector of its group (so of its own selector set)
        that is never its own: a within-set index, as `with_selector` takes."""
        import torch

        if self.k < 2:
            raise InterpError("K = 1: a base has no other selector to swap in, so the shuffle gap (and every analysis "
                              "that swaps z: z-sensitivity, patching, resample ablation) is undefined for this run")
        offset = torch.randint(1, self.k, (len(idx),), generator=generator)
        return (self.selector_id[idx] + offset) % self.k

    def sample(self, n: int, seed: int, stream: str = "probe",
               pool: Int[Tensor, " p"] | None = None) -> tuple[Int[Tensor, " m"], Int[Tensor, " m"] | None]:
        """A fixed, seeded, sorted choice of n examples (all of them when n >= D) and, where the
        task has a selector, a z' for each (another selector of its group, never its own).
        Training's evaluation subset, the ablation probe and the patching pairs all come from here.
        `pool`: choose among these examples only (sorted indices; training's evaluation of a held-out split)."""
        import torch

        if n < 1:
            raise InterpError(f"a probe needs at least one example, got {n}")
        gen = torch_generator(seed, stream)
        if pool is not None:
            idx = pool if n >= len(pool) else pool[torch.randperm(len(pool), generator=gen)[:n]].sort().values
        elif n >= self.size:
            idx = torch.arange(self.size)
        else:
            idx = torch.randperm(self.size, generator=gen)[:n].sort().values
        alt = self.other_selectors(idx, gen) if self.has_selector and self.k > 1 else None  # K = 1: no other z
        return idx, alt

    # ----------------------------------------------------------------- identity
    def sha256(self) -> str:
        """Hash of everything generated, stored in a run to check regeneration."""
        h = hashlib.sha256()
        # selector_sets of one set has the bytes the one-set task always hashed; a supergroup order or a held-out
        # split (tasks given by their tables) add their bytes, so every task made before them hashes as it did
        parts = [self.selector_sets, self.bases, self.targets, self.tokens]
        if not self.own_order:
            parts.append(self.supergroup)
        if self.heldout is not None:
            parts.append(self.heldout.long())
        if self.noisy is not None:
            parts.append(self.noisy)
        for t in parts:
            h.update(t.numpy().astype("<i8").tobytes())
        return h.hexdigest()

    @property
    def train_idx(self) -> Int[Tensor, " m"]:
        """The examples a run trained on (group-major indices): every one unless the task holds a held-out split."""
        import torch

        if self.heldout is None:
            return torch.arange(self.size)
        return torch.nonzero(~self.heldout.reshape(-1)).squeeze(1)

    @property
    def train_tokens(self) -> Int[Tensor, "m seq"]:
        """The sequences training draws its minibatches from (the full gradient of a fork reads them too): every
        example (`tokens` itself) unless the task holds pairs out (only `train_idx`'s) or has label noise (the
        output replaced by the candidate the example is trained on). Evaluation reads the clean `tokens`."""
        if self.heldout is None and self.noisy is None:
            return self.tokens
        if getattr(self, "_train_tokens", None) is None:
            tokens = self.tokens
            if self.noisy is not None:
                tokens = tokens.clone()
                tokens[:, list(self.layout.output_pos)] = self.outputs()[self.group_id, self.noisy]
            self._train_tokens = tokens[self.train_idx] if self.heldout is not None else tokens
        return self._train_tokens

    @property
    def n_train(self) -> int:
        """How many examples training draws from: D, less the held-out pairs."""
        return self.size if self.heldout is None else int((~self.heldout).sum())

    @property
    def heldout_idx(self) -> Int[Tensor, " m"]:
        """The examples held out of training (group-major indices; empty without a split)."""
        import torch

        if self.heldout is None:
            return torch.zeros(0, dtype=torch.long)
        return torch.nonzero(self.heldout.reshape(-1)).squeeze(1)

    def decode(self, tokens: Int[Tensor, " seq"]) -> str:
        """Readable form of one sequence, e.g. 'BOS abcdef SEP x1 SEP q9r2 EOS'."""
        words, chars = [], ""
        for t in tokens.tolist():
            if t >= FIRST_CHAR_ID:
                chars += ALPHABET[t - FIRST_CHAR_ID]
                continue
            if chars:
                words.append(chars)
                chars = ""
            words.append(SPECIAL_NAMES[t])
        if chars:
            words.append(chars)
        return " ".join(words)

    def __repr__(self) -> str:
        s = self.spec
        return (
            f"Task({s.direction}, K={s.k}, n_bases={s.n_bases}, D={s.dataset_size}, "
            f"seq={self.layout.length}, decision_pos={self.layout.decision_pos}, seed={self.seed}"
            + (f", selector_groups={s.selector_groups})" if s.selector_groups is not None else ")")
        )
