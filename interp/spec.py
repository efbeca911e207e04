"""Everything that determines a run: TaskSpec, ModelSpec, TrainSpec and RunSpec.

A RunSpec plus its seed regenerates the task and reproduces the weights, so a run folder
needs no dataset files. This module imports nothing heavy (no torch, numpy or pandas), so
reading a run folder, listing runs and validating command-line input stay instant.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field

from interp.errors import InterpError

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
ACT_FNS = ("gelu", "gelu_new", "relu", "silu")
SCHEDULES = ("constant", "cosine")
CHECKPOINT_DTYPES = ("float32", "float16", "bfloat16")
PRECISIONS = ("float32", "bf16")  # the training step's arithmetic (interp.precision)
# TrainSpec.optimizer (interp.optimizers, docs/runs.md "Optimizers"): AdamW (decoupled weight decay, the paper's), Adam
# with weight decay as an L2 term of the gradient (coupled), Adam without weight decay, SGD, RMSProp
OPTIMIZERS = ("adamw", "adam-l2", "adam", "sgd", "rmsprop")
ADAM_FAMILY = ("adamw", "adam-l2", "adam")
OPTIMIZER_FIELDS = ("optimizer", "momentum", "eps", "bias_correction")  # TrainSpec's, written only when set
TASK_SOURCES = ("generated", "tables")  # TaskSpec.source
HOLDOUT_BY = ("pair", "base")  # TaskSpec.holdout_by: single (base, selector) pairs, or whole bases with all K
SELECTORS = ("informative", "constant")  # TaskSpec.selector: "constant": every example's z is one string


# ---------------------------------------------------------------------------- checks shared by the specs
def check_int(name: str, value, minimum: int | None = None, maximum: int | None = None) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InterpError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise InterpError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise InterpError(f"{name} must be an integer <= {maximum}, got {value!r}")


def check_float(name: str, value, low: int | float | None = None, high: int | float | None = None,
                low_open: bool = False, high_open: bool = False) -> None:
    """A finite number within [low, high] (open ends where asked); inf and NaN are refused."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise InterpError(f"{name} must be a finite number, got {value!r}")
    if low is not None and (value <= low if low_open else value < low):
        raise InterpError(f"{name} must be {'>' if low_open else '>='} {low}, got {value!r}")
    if high is not None and (value >= high if high_open else value > high):
        raise InterpError(f"{name} must be {'<' if high_open else '<='} {high}, got {value!r}")


def _check_bool(name: str, value) -> None:
    if not isinstance(value, bool):
        raise InterpError(f"{name} must be true or false, got {value!r}")


def _from_dict(cls, data, what: str):
    if not isinstance(data, dict):
        raise InterpError(f"the {what} spec must be a JSON object, got {type(data).__name__}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - known
    if unknown:
        raise InterpError(f"unknown {what} fields {sorted(unknown)}; known: {sorted(known)}")
    return cls(**data)


class _Section:
    """A section of the run spec (task, model, train): its dict for run.json and back. A field whose
    value equals its entry in OMITTED_AT is left out of the dict, so the specs (and their hashes,
    `spec_sha256`) of runs made before that field existed are unchanged."""

    SECTION = ""  # its key in the run spec
    OMITTED_AT: dict = {}

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        for name, value in self.OMITTED_AT.items():
            if out[name] == value:
                del out[name]
        return out

    @classmethod
    def from_dict(cls, data: dict):
        return _from_dict(cls, data, cls.SECTION)


# ---------------------------------------------------------------------------- task
@dataclass(frozen=True)
class TaskSpec(_Section):
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
        _check_bool("unique_first", self.unique_first)
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
        _check_bool("reverse", self.reverse)
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


# ---------------------------------------------------------------------------- model
@dataclass(frozen=True)
class ModelSpec(_Section):
    """Architecture of the transformer (the paper's defaults: ~0.8M parameters)."""

    SECTION = "model"
    OMITTED_AT = {"n_ctx": None}  # set only when given

    n_layers: int = 4
    n_heads: int = 4
    d_model: int = 128
    d_head: int = 32
    d_mlp: int = 512
    act_fn: str = "gelu"
    init_std: float | None = None  # None: 0.8 / sqrt(d_model), TransformerLens's GPT-2 default
    n_ctx: int | None = None  # positions the model has; None: the task's sequence length. Runs made elsewhere may
    # have more (the author's 32): the positions past the sequence are kept and never read; omitted when None

    def validate(self) -> None:
        for name in ("n_layers", "n_heads", "d_model", "d_head", "d_mlp"):
            check_int(name, getattr(self, name), minimum=1)
        if self.n_ctx is not None:
            check_int("n_ctx", self.n_ctx, minimum=1)
        if self.act_fn not in ACT_FNS:
            raise InterpError(f"unknown act_fn {self.act_fn!r}; allowed: {', '.join(ACT_FNS)}")
        if self.init_std is not None:
            check_float("init_std", self.init_std, low=0, low_open=True)

    @property
    def std(self) -> float:
        return self.init_std if self.init_std is not None else 0.8 / math.sqrt(self.d_model)

    def context(self, sequence_length: int) -> int:
        """The model's positions for a task of `sequence_length` tokens: n_ctx when set, else the length itself."""
        return self.n_ctx if self.n_ctx is not None else sequence_length

    def n_params(self, n_ctx: int, d_vocab: int = VOCAB_SIZE) -> int:
        """Parameter count of the HookedTransformer this spec builds (no model is built)."""
        d, h, e, m = self.d_model, self.n_heads, self.d_head, self.d_mlp
        attn = 3 * (h * d * e + h * e) + h * e * d + d
        mlp = d * m + m + m * d + d
        per_layer = attn + mlp + 4 * d  # two LayerNorms
        return d_vocab * d + n_ctx * d + self.n_layers * per_layer + 2 * d + d * d_vocab + d_vocab



# ---------------------------------------------------------------------------- training
@dataclass(frozen=True)
class TrainSpec(_Section):
    """Optimiser, schedule, evaluation cadence and checkpoint policy (the paper's defaults)."""

    SECTION = "train"
    # written only when set: a run made before these fields hashes as it did
    OMITTED_AT = {"precision": "float32", "optimizer": "adamw", "momentum": 0.0, "eps": 1e-8, "bias_correction": True}

    steps: int = 20000
    lr: float = 1e-3
    weight_decay: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.999
    batch_size: int = 128
    schedule: str = "constant"  # or "cosine" (decays to min_lr_ratio * lr after the warmup)
    warmup_steps: int = 0  # linear warmup, for either schedule
    min_lr_ratio: float = 0.0
    grad_clip: float | None = None  # max global gradient norm; None: no clipping
    eval_every: int = 50
    eval_size: int = 1024  # fixed evaluation subset; the whole dataset when D is smaller
    checkpoint_every: int = 500
    early_checkpoints: bool = True  # also save at steps 1, 2, 4, 8, ... below checkpoint_every
    densify: bool = True  # save at every evaluation while the candidate loss is in transition
    dense_until: int = 0  # also save at every evaluation up to this step (0: off)
    stop_after_snap: int | None = None  # stop this many steps after the snap (None: run all steps)
    stop_after_exact: int | None = None  # stop this many steps after exact match first reaches 0.99
    checkpoint_dtype: str = "float32"  # float16 halves a checkpoint series (weights rounded;
    # the resume state stays float32, so resuming is still exact)
    compile: bool = False  # torch.compile the training step's forward and backward (same weights
    # to float tolerance, not bit for bit, hence part of the spec)
    save_optimizer: bool = False  # keep the optimizer-complete state beside every checkpoint (states/), so
    # forks start from it without a replay; about 3x a float32 checkpoint each
    precision: str = "float32"  # "bf16": the training step's forward and backward under bfloat16 autocast
    # (float32 master weights, AdamW state, evaluation and checkpoints; interp.precision); omitted
    # from to_dict when "float32"
    optimizer: str = "adamw"  # one of OPTIMIZERS (interp.optimizers): beta1/beta2 are Adam's moments' decays, beta2
    # is RMSProp's smoothing constant (alpha); weight_decay is decoupled for adamw, an L2 term of the gradient for the
    # others (refused for adam, which has none)
    momentum: float = 0.0  # SGD's and RMSProp's momentum (0: none); Adam's first moment is beta1
    eps: float = 1e-8  # added to the root of the second moment (Adam, RMSProp)
    bias_correction: bool = True  # Adam's 1 - beta^t corrections of both moments; False: the raw moments

    def validate(self) -> None:
        check_int("steps", self.steps, minimum=1)
        check_int("batch_size", self.batch_size, minimum=1)
        check_int("eval_every", self.eval_every, minimum=1)
        check_int("eval_size", self.eval_size, minimum=1)
        check_int("checkpoint_every", self.checkpoint_every, minimum=1)
        check_int("warmup_steps", self.warmup_steps, minimum=0)
        check_int("dense_until", self.dense_until, minimum=0)
        for name in ("stop_after_snap", "stop_after_exact"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), minimum=0)
        check_float("lr", self.lr, low=0, low_open=True)
        check_float("weight_decay", self.weight_decay, low=0)
        check_float("beta1", self.beta1, low=0, high=1, high_open=True)
        check_float("beta2", self.beta2, low=0, high=1, high_open=True)
        check_float("min_lr_ratio", self.min_lr_ratio, low=0, high=1)
        if self.grad_clip is not None:
            check_float("grad_clip", self.grad_clip, low=0, low_open=True)
        for name in ("early_checkpoints", "densify", "compile", "save_optimizer"):
            _check_bool(name, getattr(self, name))
        if self.schedule not in SCHEDULES:
            raise InterpError(f"unknown schedule {self.schedule!r}; allowed: {', '.join(SCHEDULES)}")
        if self.precision not in PRECISIONS:
            raise InterpError(f"unknown precision {self.precision!r}; allowed: {', '.join(PRECISIONS)}")
        if self.checkpoint_dtype not in CHECKPOINT_DTYPES:
            raise InterpError(
                f"unknown checkpoint_dtype {self.checkpoint_dtype!r}; allowed: {', '.join(CHECKPOINT_DTYPES)}"
            )
        self._validate_optimizer()

    def _validate_optimizer(self) -> None:
        """The optimizer and the settings it takes: a setting another optimizer owns is refused, not ignored."""
        if self.optimizer not in OPTIMIZERS:
            raise InterpError(f"unknown optimizer {self.optimizer!r}; allowed: {', '.join(OPTIMIZERS)}")
        check_float("momentum", self.momentum, low=0, high=1, high_open=True)
        check_float("eps", self.eps, low=0, low_open=True)
        _check_bool("bias_correction", self.bias_correction)
        name = self.optimizer
        if name in ADAM_FAMILY and self.momentum:
            raise InterpError(f"momentum {self.momentum} is SGD's and RMSProp's; optimizer {name}'s first moment "
                              f"decays with beta1 (--beta1, or --betas B1,B2)")
        if name not in ADAM_FAMILY and not self.bias_correction:
            raise InterpError(f"--no-bias-correction applies to Adam's moments; optimizer {name} has none "
                              f"(allowed with: {', '.join(ADAM_FAMILY)})")
        if name == "sgd" and self.eps != 1e-8:
            raise InterpError(f"eps {self.eps} is Adam's and RMSProp's; optimizer sgd divides by nothing")
        if name == "adam" and self.weight_decay:
            raise InterpError(f"optimizer adam takes no weight decay (got {self.weight_decay}): give --weight-decay 0, "
                              f"or --optimizer adam-l2 (weight decay as an L2 term of the gradient) or adamw (decoupled)")

    def lr_at(self, step: int) -> float:
        """Learning rate used for optimizer step `step` (1-based)."""
        if self.warmup_steps and step <= self.warmup_steps:
            return self.lr * step / self.warmup_steps
        if self.schedule == "constant":
            return self.lr
        span = max(1, self.steps - self.warmup_steps)
        progress = min(1.0, (step - self.warmup_steps) / span)
        floor = self.min_lr_ratio * self.lr
        return floor + (self.lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def describe_optimizer(spec: TrainSpec) -> str:
    """One line naming the optimizer and the settings it takes, e.g. 'sgd (momentum 0.9, weight decay 0.01 as L2)'."""
    name, parts = spec.optimizer, []
    if name in ADAM_FAMILY:
        parts.append(f"betas {spec.beta1},{spec.beta2}")
        if not spec.bias_correction:
            parts.append("no bias correction")
    if name == "rmsprop":
        parts.append(f"alpha {spec.beta2}")
    if name in ("sgd", "rmsprop") and spec.momentum:
        parts.append(f"momentum {spec.momentum}")
    if name != "sgd" and spec.eps != 1e-8:
        parts.append(f"eps {spec.eps}")
    if spec.weight_decay:
        parts.append(f"weight decay {spec.weight_decay}" + (" decoupled" if name == "adamw" else " as L2"))
    return name + (f" ({', '.join(parts)})" if parts else "")


# ---------------------------------------------------------------------------- the run
SECTIONS = {"task": TaskSpec, "model": ModelSpec, "train": TrainSpec}


@dataclass(frozen=True)
class RunSpec:
    """Task, model, training and the one seed that fixes data, initialisation and batch order."""

    seed: int = 0
    task: TaskSpec = field(default_factory=TaskSpec)
    model: ModelSpec = field(default_factory=ModelSpec)
    train: TrainSpec = field(default_factory=TrainSpec)

    def validate(self) -> None:
        check_int("seed", self.seed, minimum=0)
        self.task.validate()
        self.model.validate()
        self.train.validate()
        if self.model.n_ctx is not None and self.model.n_ctx < self.task.sequence_length:
            raise InterpError(f"n_ctx = {self.model.n_ctx} is shorter than the task's {self.task.sequence_length}-token "
                              f"sequences; give n_ctx >= {self.task.sequence_length} (or none: the sequence length)")

    def to_dict(self) -> dict:
        """What run.json stores and `spec_sha256` hashes (each section's own `to_dict`)."""
        return {"seed": self.seed, "task": self.task.to_dict(), "model": self.model.to_dict(),
                "train": self.train.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> RunSpec:
        if not isinstance(data, dict):
            raise InterpError(f"a run spec must be a JSON object, got {type(data).__name__}")
        unknown = set(data) - {"seed", *SECTIONS}
        if unknown:
            raise InterpError(f"unknown run spec fields {sorted(unknown)}; known: seed, {', '.join(SECTIONS)}")
        try:
            return cls(seed=data.get("seed", 0),
                       **{name: kind.from_dict(data.get(name, {})) for name, kind in SECTIONS.items()})
        except TypeError as exc:  # a dataclass given something it cannot take
            raise InterpError(f"invalid run spec: {exc}") from None

    def override(self, **values) -> RunSpec:
        """A copy with fields replaced by flat name (`k=5`, `lr=3e-4`, `seed=1`, `d_model=64`)."""
        changes: dict[str, dict] = {name: {} for name in SECTIONS}
        top: dict = {}
        for name, value in values.items():
            if name == "seed":
                top["seed"] = value
                continue
            owners = [s for s, kind in SECTIONS.items() if name in {f.name for f in dataclasses.fields(kind)}]
            if not owners:
                raise InterpError(f"unknown setting {name!r}; known: {', '.join(sorted(override_names()))}")
            changes[owners[0]][name] = value
        return dataclasses.replace(
            self,
            **top,
            **{s: dataclasses.replace(getattr(self, s), **c) for s, c in changes.items() if c},
        )

    def get(self, dotted: str):
        """The value of a field by dotted name: `seed`, `task.k`, `train.lr`, `model.n_layers`."""
        section, name = _split_dotted(dotted)
        return self.seed if section is None else getattr(getattr(self, section), name)

    def replace(self, dotted: str, value) -> RunSpec:
        """A copy with one field replaced by dotted name (`task.k`, `train.lr`, `seed`)."""
        section, name = _split_dotted(dotted)
        if section is None:
            return dataclasses.replace(self, seed=value)
        return dataclasses.replace(self, **{section: dataclasses.replace(getattr(self, section), **{name: value})})


def spec_sha256(spec: RunSpec | dict, *, ignore_steps: bool = False) -> str:
    """SHA-256 of a spec's canonical JSON (sorted keys, no spaces): what run.json's `spec_sha256`
    holds, so a hand-edited spec is caught. `spec` is a RunSpec or the dict run.json stores;
    `ignore_steps` leaves out `train.steps`, the one setting a resume may change (the resume
    state records this hash)."""
    data = spec.to_dict() if isinstance(spec, RunSpec) else copy.deepcopy(spec)
    if ignore_steps and isinstance(data.get("train"), dict):
        data["train"].pop("steps", None)
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _split_dotted(dotted: str) -> tuple[str | None, str]:
    if dotted == "seed":
        return None, "seed"
    section, _, name = dotted.partition(".")
    kind = SECTIONS.get(section)
    if kind is None or name not in {f.name for f in dataclasses.fields(kind)}:
        raise InterpError(f"unknown field {dotted!r}; known: {', '.join(dotted_names())}")
    return section, name


def dotted_names() -> list[str]:
    """Every field of a RunSpec by dotted name: seed, task.k, ..., train.steps, ..."""
    return ["seed"] + [f"{s}.{f.name}" for s, kind in SECTIONS.items() for f in dataclasses.fields(kind)]


def override_names() -> set[str]:
    names = {"seed"}
    for kind in SECTIONS.values():
        names |= {f.name for f in dataclasses.fields(kind)}
    return names
