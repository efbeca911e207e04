"""The data of the author's runs (mihirs-0/synass-lens, src/data/dataset.py), regenerated in interp's own words.

The author's runs do not store their data: the author's generator draws it from the config's seed with Python's
`random.Random`. This module makes the same draws in the same order, for each version of that generator, and
returns the task as tables (`interp.task_tables`). Versions (the draws differ only where an option is used):

  1-2  selectors, then per base its string and K targets; every string redrawn while it repeats one already drawn
       (targets are unique across the whole dataset); the held-out split shuffles the examples.
  3    `enforce_unique_a_first_char_per_b`: a base's K first characters are one `rng.sample` of the alphabet, each
       followed by a drawn suffix (redrawn while the whole target repeats one already drawn); directions whose
       output is A only.
  4    `split_by_base`: the held-out split shuffles the bases (first-seen order), not the examples.
  5    `disambiguation_prefix_length` 2 (K distinct two-character prefixes, one `rng.sample` of the 1,296), selector
       sets private to each base or shared within supergroups (base g uses set g mod S; no string in two sets), the
       selector length grown while 36 ** len < 2 x (sets x K), and label noise (training targets only: the tables
       keep the clean targets).

Strings are `"".join(rng.choices(alphabet, k=length))`. The split uses a fresh `random.Random(seed)`; the held-out
pairs are the first int(n x probe_fraction) of the shuffled list. Only the task matters here: the author's batch
order and initialisation are not reproduced (an imported run's weights come from its checkpoints).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from interp.errors import InterpError
from interp.spec import ALPHABET, FIRST_CHAR_ID

VERSIONS = (1, 2, 3, 4, 5)
TASKS = ("bz_to_a", "az_to_b", "b_to_a", "a_to_b")
SHARING = ("shared", "private", "supergroup")


@dataclass(frozen=True)
class SynassData:
    """The author's data options (config.yaml's `data` section, or an eta-sweep cell's), and the data seed."""

    seed: int
    n_unique_b: int = 1000
    k: int = 10
    b_length: int = 6
    a_length: int = 4
    z_length: int = 2
    vocab_chars: str = ALPHABET
    task: str = "bz_to_a"
    enforce_unique_a_first_char_per_b: bool = False
    disambiguation_prefix_length: int = 1
    z_sharing: str = "shared"
    n_supergroups: int = 1
    probe_fraction: float = 0.0
    split_by_base: bool = False
    label_noise_prob: float = 0.0
    version: int = 5

    # ------------------------------------------------------------------ checks
    def validate(self) -> None:
        if self.version not in VERSIONS:
            raise InterpError(f"unknown version {self.version!r} of the author's generator; known: "
                              f"{', '.join(map(str, VERSIONS))}")
        if self.task not in TASKS:
            raise InterpError(f"data.task {self.task!r}: the author's generator knows {', '.join(TASKS)}")
        for name in ("seed", "n_unique_b", "k", "b_length", "a_length", "z_length", "n_supergroups",
                     "disambiguation_prefix_length"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < (0 if name == "seed" else 1):
                raise InterpError(f"data.{name} must be a whole number{' >= 1' if name != 'seed' else ''}, got {value!r}")
        if self.vocab_chars != ALPHABET:
            raise InterpError(f"data.vocab_chars {self.vocab_chars!r}: interp's tokens are the 36 characters "
                              f"{ALPHABET!r} in that order (ids {FIRST_CHAR_ID}..{FIRST_CHAR_ID + 35}); another "
                              f"alphabet cannot be expressed")
        if not 0 <= self.probe_fraction < 1:
            raise InterpError(f"data.probe_fraction must be in [0, 1), got {self.probe_fraction!r}")
        if not 0 <= self.label_noise_prob <= 1:
            raise InterpError(f"data.label_noise_prob must be in [0, 1], got {self.label_noise_prob!r}")
        if self.z_sharing not in SHARING:
            raise InterpError(f"data.z_sharing {self.z_sharing!r}: allowed {', '.join(SHARING)}")
        if self.version < 5 and (self.z_sharing != "shared" or self.disambiguation_prefix_length != 1):
            raise InterpError(f"z_sharing and disambiguation_prefix_length exist from version 5 of the author's "
                              f"generator; this config is read as version {self.version}")
        if self.z_sharing == "supergroup" and not 1 <= self.n_supergroups <= self.n_unique_b:
            raise InterpError(f"data.n_supergroups must be in [1, n_unique_b = {self.n_unique_b}], got "
                              f"{self.n_supergroups}")
        if self.enforcing:
            limit = {1: 36, 2: 36 * 36}.get(self.prefix_length)
            if limit is None:
                raise InterpError(f"data.disambiguation_prefix_length must be 1 or 2, got {self.prefix_length}")
            if self.k > limit:
                raise InterpError(f"K = {self.k} needs {self.k} distinct prefixes of length {self.prefix_length}, "
                                  f"more than the {limit} there are")

    @property
    def enforcing(self) -> bool:
        """Whether distinct first characters (prefixes) are drawn: from version 3, for directions whose output is A."""
        return self.version >= 3 and self.enforce_unique_a_first_char_per_b and self.task in ("bz_to_a", "b_to_a")

    @property
    def prefix_length(self) -> int:
        return self.disambiguation_prefix_length if self.version >= 5 else 1

    @property
    def n_sets(self) -> int:
        return {"shared": 1, "private": self.n_unique_b, "supergroup": self.n_supergroups}[self.z_sharing]

    @property
    def selector_length(self) -> int:
        """The selectors' length: z_length, grown (version 5) while the strings of that length are fewer than twice
        the selectors needed."""
        length = self.z_length
        if self.version >= 5:
            while len(self.vocab_chars) ** length < 2 * self.n_sets * self.k:
                length += 1
        return length

    def set_of(self, group: int) -> int:
        return {"shared": 0, "private": group, "supergroup": group % self.n_supergroups}[self.z_sharing]

    # ------------------------------------------------------------------ the draws
    def generate(self) -> dict:
        """{"selector_sets": [[z]], "bases": [b], "targets": [[a]], "supergroup": [set], "heldout": [[bool]]}, as
        strings, in the author's order (base g, selector i -> target i)."""
        self.validate()
        rng = random.Random(self.seed)
        chars = self.vocab_chars

        def draw(length: int) -> str:
            return "".join(rng.choices(chars, k=length))

        length = self.selector_length
        used_z: set[str] = set()
        sets = []
        for _ in range(self.n_sets):
            zs = []
            for _ in range(self.k):
                z = draw(length)
                while z in used_z:
                    z = draw(length)
                used_z.add(z)
                zs.append(z)
            sets.append(zs)
        used_b: set[str] = set()
        used_a: set[str] = set()
        bases, targets = [], []
        for _ in range(self.n_unique_b):
            b = draw(self.b_length)
            while b in used_b:
                b = draw(self.b_length)
            used_b.add(b)
            bases.append(b)
            targets.append(self._targets(rng, draw, used_a))
        return {"selector_sets": sets, "bases": bases, "targets": targets,
                "supergroup": [self.set_of(g) for g in range(self.n_unique_b)], "heldout": self._heldout()}

    def _targets(self, rng: random.Random, draw, used_a: set[str]) -> list[str]:
        out = []
        if not self.enforcing:
            for _ in range(self.k):
                a = draw(self.a_length)
                while a in used_a:
                    a = draw(self.a_length)
                used_a.add(a)
                out.append(a)
            return out
        p = self.prefix_length
        population = list(self.vocab_chars) if p == 1 else [c1 + c2 for c1 in self.vocab_chars for c2 in self.vocab_chars]
        for prefix in rng.sample(population, self.k):
            a = self._with_suffix(prefix, draw)
            attempts = 0
            while a in used_a:
                attempts += 1
                if attempts > 1000:
                    raise InterpError(f"the author's generator gives up: no new target with prefix {prefix!r} in "
                                      f"1,000 draws (increase a_length)")
                a = self._with_suffix(prefix, draw)
            used_a.add(a)
            out.append(a)
        return out

    def _with_suffix(self, prefix: str, draw) -> str:
        if self.a_length <= len(prefix):
            return prefix[: self.a_length]
        return prefix + draw(self.a_length - len(prefix))

    def _heldout(self) -> list[list[bool]]:
        """The pairs the author's dataset held out (the probe split), from a fresh Random(seed)."""
        n, k = self.n_unique_b, self.k
        out = [[False] * k for _ in range(n)]
        if self.probe_fraction == 0:
            return out
        rng = random.Random(self.seed)
        by_base = self.version >= 4 and self.split_by_base and self.task in ("bz_to_a", "b_to_a")
        if by_base:  # the bases in first-seen (generation) order, shuffled; the first ones held out
            order = list(range(n))
            rng.shuffle(order)
            for g in order[: int(n * self.probe_fraction)]:
                out[g] = [True] * k
        else:  # every example its own unit (the other directions key on A, which is unique: the same draws)
            order = list(range(n * k))
            rng.shuffle(order)
            for e in order[: int(n * k * self.probe_fraction)]:
                out[e // k][e % k] = True
        return out


def token_tables(strings: dict) -> dict:
    """`SynassData.generate`'s strings as the token tables of `interp.task_tables` (torch tensors)."""
    import torch

    def ids(text: str) -> list[int]:
        return [FIRST_CHAR_ID + ALPHABET.index(c) for c in text]

    return {"selector_sets": torch.tensor([[ids(z) for z in zs] for zs in strings["selector_sets"]], dtype=torch.long),
            "bases": torch.tensor([ids(b) for b in strings["bases"]], dtype=torch.long),
            "targets": torch.tensor([[ids(a) for a in row] for row in strings["targets"]], dtype=torch.long),
            "supergroup": torch.tensor(strings["supergroup"], dtype=torch.long),
            "heldout": torch.tensor(strings["heldout"], dtype=torch.bool)}


def examples(strings: dict) -> list[dict]:
    """The author's example list ({"b", "z", "a"}, base by base, selector i with target i)."""
    sets, out = strings["selector_sets"], []
    for g, (b, row) in enumerate(zip(strings["bases"], strings["targets"])):
        zs = sets[strings["supergroup"][g]]
        out.extend({"b": b, "z": z, "a": a} for z, a in zip(zs, row))
    return out
