"""The task's section of a run spec: its alphabet and layouts (directions), and TaskSpec with its variants
(label noise, held-out pairs, hierarchical selectors, a constant selector, two-character prefixes). Re-exported by
interp.spec, whose rules it follows: no heavy imports, fields omitted at their defaults."""

from __future__ import annotations

import math
from dataclasses import dataclass

from interp.errors import InterpError
from interp.spec_fields import Section, check_bool, check_float, check_int

# ---------------------------------------------------------------------------- the task's alphabet
PAD, BOS, EOS, SEP = 0, 1, 2, 3
ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
N_CHARS = len(ALPHABET)
FIRST_CHAR_ID = 4
VOCAB_SIZE = FIRST_CHAR_ID + N_CHARS  # 40
MAX_LEN = 32

# direction -> (input segments in order, output string). "z" marks the selector segment.
DIRECTIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "bz_to_a": (("B", "z"), "A"),  # the disambiguation task: BOS B SEP z SEP A EOS
    "a_to_b": (("A",), "B"),  # deterministic reverse: BOS A SEP B EOS
    "az_to_b": (("A", "z"), "B"),  # z present but redundant: BOS A SEP z SEP B EOS
    "b_to_a": (("B",), "A"),  # no selector: the loss floor stays at log K: BOS B SEP A EOS
}
TASK_SOURCES = ("generated", "tables")  # TaskSpec.source
HOLDOUT_BY = ("pair", "base")  # TaskSpec.holdout_by: single (base, selector) pairs, or whole bases with all K
SELECTORS = ("informative", "constant")  # TaskSpec.selector: "constant": every example's z is one string


# ---------------------------------------------------------------------------- task
@dataclass(frozen=True)
class TaskSpec(Section):
    """Everything that determines a Task, together with the seed passed to `Task.generate`."""

    SECTION = "task"
    # set only when given: a run made before a field existed hashes as it did (docs/runs.md, "Task variants")
    OMITTED_AT = {"selector_groups": None, "source": "generated", "unique_prefix": 1, "label_noise": 0.0,
                  "holdout_fraction": 0.0, "holdout_by": "pair", "hierarchy": None, "selector": "informative",
                  "reverse": False, "reassign_fraction": 0.0, "resized_from": None}

    k: int = 10
    n_bases: int = 1000
    len_b: int = 6
    len_z: int = 2
    len_a: int = 4
    direction: str = "bz_to_a"
    unique_first: bool = True
    selector_groups: int | None = None  # G: bases g // G share one set of K selectors; None: one set for all
    # (the selector-sharing control, docs/definitions.md "The task"); omitted from to_dict when None
    source: str = "generated"  # "generated": drawn by Task.generate from the seed; "tables": the run folder holds
    # the task's strings (task.safetensors, hash-checked), e.g. a run imported from another generator (docs/import.md)
    # the author's task variants (docs/runs.md, "Task variants"), each left out of the spec at its default
    unique_prefix: int = 1  # with unique_first: the K candidates of a base differ in their first `unique_prefix`
    # characters (2: K up to 36 x 36; the first-token candidate loss is then scored on those characters)
    label_noise: float = 0.0  # P: each training target replaced, with probability P, by another candidate of the
    # same base (uniform over the K - 1 others), drawn once from the seed; evaluation reads the clean targets
    holdout_fraction: float = 0.0  # F: a share of the pairs (or of the bases, holdout_by "base") never trained on;
    # evaluated on both, the held-out columns prefixed `heldout_`
    holdout_by: str = "pair"  # "pair" or "base" (whole bases held out with all K of their pairs)
    hierarchy: str | None = None  # "K1xK2": z1 (the first selector character) picks a cluster of K2 candidates, z2
    # (the second) one within it; K = K1 K2, len_z = 2. The candidate loss steps log K -> log K2 -> 0
    selector: str = "informative"  # "constant": every example carries the same z, which then tells nothing
    reverse: bool = False  # the target before the selector and the base: BOS A SEP z SEP B EOS (bz_to_a only); A is
    # predicted from BOS alone, so the conditional cannot be learned (the author's reversed layout)
    # the data a fork may change (docs/forks.md, "Forks that change the data"): drawn from the task's own strings
    reassign_fraction: float = 0.0  # F: the targets of floor(F n_bases) bases (nested in F) permuted among their
    # selectors, none left in place: the same candidates, new pairings (the author's continual shift)
    resized_from: int | None = None  # K0: the task is the K0-candidate one resized to k (k < K0: each base keeps
    # the candidates of the first k selectors; k > K0: k - K0 new selectors and targets drawn for every base)

    @property
    def dataset_size(self) -> int:
        return self.n_bases * self.k

    @property
    def n_selector_sets(self) -> int:
        """How many distinct sets of K selectors the task has: n_bases / G (1 when G is None)."""
        return 1 if self.selector_groups is None else self.n_bases // self.selector_groups

    @property
    def bases_per_selector_set(self) -> int:
        """How many bases share each selector string: G, or n_bases when every base shares one set."""
        return self.n_bases if self.selector_groups is None else self.selector_groups

    def validate(self) -> None:
        """Refuse impossible specs with a message that says why and what is allowed."""
        for name in ("k", "n_bases", "len_b", "len_z", "len_a"):
            check_int(name, getattr(self, name))
        check_bool("unique_first", self.unique_first)
        if self.source not in TASK_SOURCES:
            raise InterpError(f"unknown task source {self.source!r}; allowed: {', '.join(TASK_SOURCES)}")
        if self.direction not in DIRECTIONS:
            raise InterpError(
                f"unknown direction {self.direction!r}; allowed: {', '.join(DIRECTIONS)}"
            )
        if self.k < 1:
            raise InterpError(f"k must be >= 1 (got {self.k}); K = 1 is the control with nothing to disambiguate")
        if self.n_bases < 1:
            raise InterpError(f"n_bases must be >= 1 (got {self.n_bases})")
        for name in ("len_b", "len_z", "len_a"):
            value = getattr(self, name)
            if not 1 <= value <= MAX_LEN:
                raise InterpError(f"{name} must be between 1 and {MAX_LEN} (got {value})")
        check_int("unique_prefix", self.unique_prefix, minimum=1, maximum=2)
        if self.unique_prefix > 1 and not self.unique_first:
            raise InterpError(f"unique_prefix = {self.unique_prefix} makes the candidates differ in their first "
                              f"{self.unique_prefix} characters: it needs unique first characters (--unique-first)")
        if self.unique_prefix > self.len_a:
            raise InterpError(f"unique_prefix = {self.unique_prefix} is longer than the targets (len_a = {self.len_a})")
        prefixes = N_CHARS**self.unique_prefix
        if self.unique_first and self.k > prefixes:
            raise InterpError(
                f"k = {self.k} needs {self.k} distinct {'first characters' if self.unique_prefix == 1 else 'prefixes'} "
                f"per group but there are {prefixes}; use k <= {prefixes}, "
                + ("--unique-prefix 2 (K up to 1296)" if self.unique_prefix == 1 else "")
                + " or turn off unique first characters"
            )
        if self.k > N_CHARS**self.len_z:
            raise InterpError(
                f"k = {self.k} selectors do not fit in the {N_CHARS**self.len_z} distinct z strings "
                f"of length {self.len_z}; increase len_z or lower k"
            )
        self._validate_selector_groups()
        if self.n_bases > N_CHARS**self.len_b:
            raise InterpError(
                f"n_bases = {self.n_bases} exceeds the {N_CHARS**self.len_b} distinct B strings of "
                f"length {self.len_b}; increase len_b or lower n_bases"
            )
        if self.dataset_size > N_CHARS**self.len_a:
            raise InterpError(
                f"n_bases * k = {self.dataset_size} targets exceed the {N_CHARS**self.len_a} "
                f"distinct A strings of length {self.len_a}; increase len_a or shrink the dataset"
            )
        if self.unique_first and self.n_bases > N_CHARS ** (self.len_a - self.unique_prefix):
            raise InterpError(
                f"with unique {'first characters' if self.unique_prefix == 1 else 'prefixes'}, n_bases = "
                f"{self.n_bases} may put more targets on one prefix than the "
                f"{N_CHARS ** (self.len_a - self.unique_prefix)} A strings that start with it; increase len_a or "
                f"lower n_bases"
            )
        self._validate_variants()

    def _validate_variants(self) -> None:
        """The author's task variants: each refused, in one line, where it cannot mean what it says."""
        check_float("label_noise", self.label_noise, low=0, high=1, high_open=True)
        if isinstance(self.holdout_fraction, (int, float)) and self.holdout_fraction >= 1:
            raise InterpError(f"holdout_fraction {self.holdout_fraction} would hold out every pair and leave none to "
                              f"train on; give a share below 1")
        check_float("holdout_fraction", self.holdout_fraction, low=0, high=1, high_open=True)
        check_bool("reverse", self.reverse)
        if self.holdout_by not in HOLDOUT_BY:
            raise InterpError(f"unknown holdout_by {self.holdout_by!r}; allowed: {', '.join(HOLDOUT_BY)}")
        if self.selector not in SELECTORS:
            raise InterpError(f"unknown selector {self.selector!r}; allowed: {', '.join(SELECTORS)}")
        has_z = "z" in DIRECTIONS[self.direction][0]
        check_float("reassign_fraction", self.reassign_fraction, low=0, high=1)
        if self.reassign_fraction and self.k < 2:
            raise InterpError("reassign_fraction permutes a base's targets among its selectors; k = 1 has one")
        if self.resized_from is not None:
            check_int("resized_from", self.resized_from, minimum=1)
            if self.resized_from == self.k:
                raise InterpError(f"resized_from = {self.resized_from} is k itself; leave it unset")
            if self.hierarchy is not None or self.selector_groups is not None:
                raise InterpError("a resized task keeps one selector set of plain selectors: not with hierarchy or "
                                  "selector_groups")
        if self.label_noise:
            if self.k < 2:
                raise InterpError(f"label_noise {self.label_noise} replaces a target by another candidate of its base; "
                                  f"k = 1 has none")
            if DIRECTIONS[self.direction][1] != "A":
                raise InterpError(f"label_noise needs a direction whose output is a candidate A; {self.direction!r} "
                                  f"outputs {DIRECTIONS[self.direction][1]}")
        if self.holdout_fraction:
            units = self.n_bases if self.holdout_by == "base" else self.dataset_size
            held = self.held_out_count
            if held == 0:
                raise InterpError(f"holdout_fraction {self.holdout_fraction} of {units} "
                                  f"{'bases' if self.holdout_by == 'base' else 'pairs'} holds out none; give at least "
                                  f"{1 / units:.3g}")
        if self.selector != "informative" and not has_z:
            raise InterpError(f"selector {self.selector!r} needs a direction with a selector z; {self.direction!r} "
                              f"has none")
        if self.reverse and self.direction != "bz_to_a":
            raise InterpError(f"reverse puts the target before z and B: it applies to bz_to_a, not {self.direction!r}")
        if self.hierarchy is not None:
            k1, k2 = self.hierarchy_factors
            if self.selector_groups is not None or self.selector != "informative":
                raise InterpError("hierarchy builds its own selectors (z1 z2): it cannot be combined with "
                                  "selector_groups or a constant selector")
            if not has_z:
                raise InterpError(f"hierarchy needs a direction with a selector z; {self.direction!r} has none")
            if self.len_z != 2:
                raise InterpError(f"hierarchy {self.hierarchy} writes z as two characters (z1, z2): give len_z = 2, "
                                  f"got {self.len_z}")
            if k1 + k2 > N_CHARS:
                raise InterpError(f"hierarchy {self.hierarchy} needs {k1} + {k2} distinct selector characters; the "
                                  f"alphabet has {N_CHARS}")

    @property
    def held_out_count(self) -> int:
        """How many pairs (holdout_by "pair") or bases ("base") are held out: floor(F x their number), the author's."""
        units = self.n_bases if self.holdout_by == "base" else self.dataset_size
        return int(math.floor(self.holdout_fraction * units + 1e-9))

    @property
    def hierarchy_factors(self) -> tuple[int, int]:
        """(K1, K2) of `hierarchy` "K1xK2", checked: whole numbers >= 2 whose product is k."""
        text = str(self.hierarchy)
        parts = text.lower().split("x")
        try:
            if len(parts) != 2:
                raise ValueError
            k1, k2 = int(parts[0]), int(parts[1])
        except ValueError:
            raise InterpError(f"hierarchy {text!r}: give K1xK2, two whole numbers (e.g. 5x4)") from None
        if k1 < 2 or k2 < 2:
            raise InterpError(f"hierarchy {text!r}: K1 and K2 must both be >= 2 (a level of one cluster or one "
                              f"candidate is no level)")
        if k1 * k2 != self.k:
            raise InterpError(f"hierarchy {text} does not factor k = {self.k}: K1 x K2 = {k1 * k2}; give factors "
                              f"of {self.k} (e.g. {_factor_hint(self.k)}) or --k {k1 * k2}")
        return k1, k2

    def _validate_selector_groups(self) -> None:
        g = self.selector_groups
        if g is None:
            return
        check_int("selector_groups", g, minimum=1, maximum=self.n_bases)
        if "z" not in DIRECTIONS[self.direction][0]:
            raise InterpError(f"selector_groups = {g} needs a direction with a selector z; {self.direction!r} "
                              f"has none (allowed: {', '.join(d for d, (i, _) in DIRECTIONS.items() if 'z' in i)})")
        if self.n_bases % g:
            divisors = [d for d in range(1, self.n_bases + 1) if self.n_bases % d == 0]
            near = sorted(divisors, key=lambda d: (abs(d - g), d))[:2]
            raise InterpError(f"selector_groups = {g} does not divide n_bases = {self.n_bases}: every supergroup "
                              f"must hold the same number of bases (nearest allowed: "
                              f"{', '.join(map(str, sorted(near)))})")
        need = self.n_selector_sets * self.k
        if need > N_CHARS**self.len_z:
            raise InterpError(
                f"selector_groups = {g} gives {self.n_selector_sets} selector sets of k = {self.k}: {need} distinct "
                f"z strings, more than the {N_CHARS**self.len_z} of length {self.len_z}; increase len_z "
                f"(or raise selector_groups)"
            )

    @property
    def sequence_length(self) -> int:
        """Tokens per example: BOS, each input and a separator after it, the output, EOS."""
        inputs, output = DIRECTIONS[self.direction]
        lengths = {"A": self.len_a, "B": self.len_b, "z": self.len_z}
        return 1 + sum(lengths[name] + 1 for name in inputs) + lengths[output] + 1



def describe_task_variants(spec: TaskSpec) -> list[str]:
    """The task's variants in words (empty for the paper's task): what `interp show` adds to the task row."""
    out = []
    if spec.unique_prefix > 1:
        out.append(f"candidates differ in their first {spec.unique_prefix} characters")
    if spec.label_noise:
        out.append(f"label noise {spec.label_noise:g}")
    if spec.holdout_fraction:
        unit = "bases" if spec.holdout_by == "base" else "pairs"
        out.append(f"{spec.held_out_count} {unit} held out ({spec.holdout_fraction:g})")
    if spec.hierarchy is not None:
        out.append(f"hierarchy {spec.hierarchy}")
    if spec.selector != "informative":
        out.append(f"{spec.selector} selector")
    if spec.reverse:
        out.append("reversed layout (A before z and B)")
    if spec.resized_from is not None:
        out.append(f"resized from K = {spec.resized_from}")
    if spec.reassign_fraction:
        out.append(f"targets of {int(math.floor(spec.reassign_fraction * spec.n_bases + 1e-9))} bases reassigned "
                   f"({spec.reassign_fraction:g})")
    return out


def _factor_hint(k: int) -> str:
    pairs = [f"{a}x{k // a}" for a in range(2, k) if k % a == 0 and k // a >= 2]
    return ", ".join(pairs[:3]) or "none: k is prime"
