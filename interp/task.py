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

from interp import task_draws as draws
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
            drawn_sets, drawn_targets = drawn.selector_sets[0].numpy(), drawn.targets.numpy()
            sets, targets = draws.resized(numpy_generator(seed, "resize"), spec, drawn_sets - FIRST_CHAR_ID,
                                          drawn_targets - FIRST_CHAR_ID)
            return cls._finish(spec, seed, sets[None], drawn.bases.numpy() - FIRST_CHAR_ID, targets)
        rng = numpy_generator(seed, "task")
        selectors = draws.distinct_strings(rng, spec.k, spec.len_z)
        bases = draws.distinct_strings(rng, spec.n_bases, spec.len_b)
        targets = draws.targets(rng, spec)
        # the other supergroups' selectors come after every draw of the one-set task, so G = n_bases
        # (or None) gives it bit for bit; no string is shared between sets
        extra = (spec.n_selector_sets - 1) * spec.k
        if extra:
            selectors = np.concatenate([selectors, draws.more_distinct_strings(rng, selectors, extra, spec.len_z)])
        sets = selectors.reshape(spec.n_selector_sets, spec.k, spec.len_z)
        # the variants draw from streams of their own, after everything above: the default task is drawn as before
        if spec.hierarchy is not None:
            sets = draws.hierarchy_selectors(numpy_generator(seed, "hierarchy"), spec)[None]
        if spec.selector == "constant":  # every selector is the first one: z tells nothing
            sets = np.repeat(sets[:, :1], spec.k, axis=1)
        return cls._finish(spec, seed, sets, bases, targets)

    @classmethod
    def _finish(cls, spec: TaskSpec, seed: int, sets: np.ndarray, bases: np.ndarray, targets: np.ndarray) -> Task:
        """The task from its drawn strings (character indices): the reassignment, the held-out split and the label
        noise, each from a stream of its own."""
        import torch

        if spec.reassign_fraction:
            targets = draws.reassigned(numpy_generator(seed, "reassign"), spec, targets)
        as_tokens = lambda a: torch.from_numpy(np.ascontiguousarray(a) + FIRST_CHAR_ID).long()  # noqa: E731
        heldout = draws.holdout(numpy_generator(seed, "holdout"), spec) if spec.holdout_fraction else None
        task = cls(spec, seed, as_tokens(sets), as_tokens(bases), as_tokens(targets),
                   heldout=None if heldout is None else torch.from_numpy(heldout))
        if spec.label_noise:
            task.noisy = torch.from_numpy(draws.label_noise(numpy_generator(seed, "label_noise"), spec))
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
