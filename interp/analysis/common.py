"""What every analysis shares: choosing steps and probe examples, naming heads and positions, and the one
`across` (an analysis's `at_step` over steps, its needs provided)."""

from __future__ import annotations

import bisect
import functools
import sys
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, TypeVar

import pandas as pd
from tqdm.auto import tqdm

from interp.analysis import registry
from interp.errors import InterpError
from interp.names import head_name  # noqa: F401  (re-exported)
from interp.runs import Run
from interp.seeding import torch_generator
from interp.task import Layout, Task
from interp.transition import RELATIVE_STEPS, STEP_SLACK, tau

# torch is imported where the code computes, so that reading cached results (a report's findings) never loads it;
# where torch is already loaded (the tests), its names are bound here for jaxtyping's runtime checks of the annotations
if TYPE_CHECKING or "torch" in sys.modules:
    import torch


def no_grad(fn: Callable) -> Callable:
    """`torch.no_grad()` as a decorator that imports torch when `fn` runs, not when its module is imported
    (a cached report imports the analysis modules for their findings, and never torch)."""

    @functools.wraps(fn)
    def without_grad(*args, **kwargs):
        import torch

        with torch.no_grad():
            return fn(*args, **kwargs)

    return without_grad


T = TypeVar("T")
SHARED_KEEP = 8  # results kept per model (the suite's analyses at one checkpoint need a few)
_SHARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> (weights version, {key: result})


def weights_version(model) -> tuple:
    """What changes whenever the model's weights do: each parameter's storage and its in-place version counter
    (bumped by copy_, add_, an optimizer step...); and its mode."""
    return (model.training, *((p.data_ptr(), p._version) for p in model.parameters()))


def _hooked(model) -> bool:
    """Whether a forward hook on the model could change what it computes (a TransformerLens hook point's or any
    of its modules'): then nothing is shared. Global module hooks are not asked about: torch's own tools (the
    FLOP counter) attach them to observe, as the fast path's `usable` does not ask either; nor is TL 4's own capture
    wiring, which a bridge keeps after its first run_with_cache (`interp.model.has_user_hooks`)."""
    from interp.model import has_user_hooks  # lazy: reading cached results never imports the model module

    return has_user_hooks(model)


def shared(model, key: Hashable, compute: Callable[[], T]) -> T:
    """`compute()`, computed once per model object, state of its weights and `key`, and shared by the callers
    that give the same key: the suite loads one model per checkpoint and passes it to every analysis, so work
    two analyses need there (the decision-position residual stream of representations and lens, the head
    patching of patching and usage) runs once. The key names everything the result depends on besides the
    weights: the task object itself (hashed by identity and held by the key, so a new task never meets an old
    one's result; `Run.task` is made once per run object), the probe, chunk sizes. Held weakly by the model
    (gone with it), the last `SHARED_KEEP` per model; a model whose weights changed in place (its parameters'
    storage or version counters) computes afresh, and one with a forward hook attached shares nothing. Results
    are shared objects: callers never modify them."""
    if _hooked(model):
        return compute()
    version = weights_version(model)
    held = _SHARED.get(model)
    if held is None or held[0] != version:
        held = (version, OrderedDict())
        _SHARED[model] = held
    results = held[1]
    if key in results:
        results.move_to_end(key)
        return results[key]
    value = compute()
    results[key] = value
    while len(results) > SHARED_KEEP:
        results.popitem(last=False)
    return value


def get_act_name(name: str, layer: int) -> str:
    """TransformerLens's name of a hook, e.g. blocks.0.attn.hook_z. Imported when first needed: TransformerLens
    loads transformers (seconds), which reading cached results (a report, a card) never needs."""
    from transformer_lens.utilities import get_act_name as act_name

    return act_name(name, layer)


def segment_names(task: Task | Layout) -> list[str]:
    """The segment each position belongs to (BOS, B, SEP, z, SEP2, A, EOS), from a task or its layout
    (`Run.layout`: no task generated)."""
    layout = getattr(task, "layout", task)
    names = [""] * layout.length
    for name, (start, stop) in layout.segments.items():
        for p in range(start, stop):
            names[p] = name
    return names


def saved_steps(run: Run) -> list[int]:
    steps = run.steps
    if not steps:
        raise InterpError(f"run {run.path} has no saved checkpoints to analyse")
    return steps


def snap_to_saved(run: Run, target: float) -> int:
    """The saved step nearest to `target` (ties go to the earlier step)."""
    steps = saved_steps(run)
    i = bisect.bisect_left(steps, target)
    near = steps[max(0, i - 1) : i + 1]
    return min(near, key=lambda s: (abs(s - target), s))


RELATIVE_LABELS = {"pre": "τ/4", "mid": "τ", "post": "2τ"}


def near_saved(run: Run, target: int | float, t: int | float) -> tuple[int, bool]:
    """(the saved step nearest `target`, whether it lies within STEP_SLACK tau of it)."""
    step = snap_to_saved(run, target)
    return step, abs(step - target) <= STEP_SLACK * t


def far_note(label: str, target: int | float, step: int, t: int | float) -> str:
    """Why a step named relative to tau was left out: no checkpoint near its target."""
    return (f"{label} (= step {target:.0f}) has no checkpoint within {STEP_SLACK:g} τ (τ = {t:g}): the nearest saved, "
            f"step {step}, is {abs(step - target) / t:.2f} τ away; left out (give saved steps, or save checkpoints "
            f"more densely)")


def select_steps(run: Run, steps: int | str | Iterable | None = None,
                 notes: list[str] | None = None, defaults: bool = False) -> list[tuple[int, str]]:
    """Resolve a step request to (saved step, label) pairs.

    None or "all": every saved step; "from:X" every saved step from X on (X a step or
    pre/mid/post); "transition": the saved steps nearest to fractions of tau (TAU_FRACTIONS)
    and every saved step of the transition window (t_start..t_end, and the first after it).
    Integers must be saved steps (a clear error names the nearest otherwise). "pre", "mid",
    "post" are tau/4, tau and 2 tau snapped to the nearest saved step; they may be mixed with
    integers in a list or a comma-separated string. A relative step that lies beyond the
    run's last checkpoint, or whose nearest saved step is more than STEP_SLACK tau from it, is
    left out (never snapped back onto the last step, nor onto a far one) and, given `notes`, a
    sentence saying so is appended to it; each saved step appears at most once. When every
    requested step is left out, the InterpError says why for each. With `defaults` (an analysis's own default steps,
    not a user's request), a relative step beyond the run is read at the run's last step instead, labelled "last",
    where that step lies past the snap (after the transition, as 2 tau is meant to), and the transition's fractions of
    tau beyond the run are left out without a note: a run that stops after its snap but before 2 tau (the shipped
    demo) is analysed at what it has, silently.
    """
    notes = [] if notes is None else notes
    available = saved_steps(run)
    if steps is None or steps == "all":
        return [(s, "") for s in available]
    if steps == "transition":
        return transition_steps(run, notes, note_beyond=not defaults)
    if isinstance(steps, str) and steps.startswith("from:"):  # every saved step from one on
        ((first, _),) = select_steps(run, [steps[len("from:"):]])
        return [(s, "") for s in available if s >= first]
    if isinstance(steps, str):
        items: Sequence = [part.strip() for part in steps.split(",") if part.strip()]
    elif isinstance(steps, int):
        items = [steps]
    else:
        items = list(steps)
    if not items:
        raise InterpError("no steps requested")
    out: list[tuple[int, str]] = []
    for item in items:
        if isinstance(item, str) and item in RELATIVE_STEPS:
            t = tau(run)
            if t is None:
                raise InterpError(
                    f"step {item!r} is relative to tau, but {run.path} never reaches "
                    f"0.5 log K; give explicit steps instead"
                )
            target = RELATIVE_STEPS[item] * t
            if target > available[-1] and defaults and snapped_by_last(run):
                out.append((available[-1], "last"))
                continue
            if target > available[-1]:
                notes.append(beyond_note(item, target, available[-1]))
                continue
            step, near = near_saved(run, target, t)
            if not near:
                notes.append(far_note(f"{item} ({RELATIVE_LABELS[item]})", target, step, t))
                continue
            out.append((step, item))
        elif item == "last" or item == "first":
            out.append((run.resolve_step(item), item))
        else:
            try:
                step = int(item)
            except (TypeError, ValueError):
                raise InterpError(
                    f"unknown step {item!r}; use saved steps, 'all', 'first', 'last' or "
                    f"{', '.join(RELATIVE_STEPS)}"
                ) from None
            out.append((run.resolve_step(step), ""))
    seen: dict[int, str] = {}
    for step, label in out:  # one entry per saved step; labels of duplicates are joined
        seen[step] = label if step not in seen else "/".join(x for x in (seen[step], label) if x)
    if not seen:
        raise InterpError("no requested step can be read: " + "; ".join(notes))
    return list(seen.items())


TAU_FRACTIONS = (0.25, 0.5, 0.75, 0.97, 1.0, 1.5, 2.0)


def snapped_by_last(run: Run) -> bool:
    """Whether the run's last saved step lies at or after its snap (candidate loss below 0.05 log K)."""
    from interp.transition import facts

    snap = facts(run).snap_step
    return snap is not None and snap <= saved_steps(run)[-1]


def transition_steps(run: Run, notes: list[str] | None = None, note_beyond: bool = True) -> list[tuple[int, str]]:
    """Where per-group statistics are read: nearest saved steps to fractions of tau (those
    within the run and within STEP_SLACK tau of a saved step; the others are named in `notes`, those beyond the run
    only with `note_beyond`) and every saved step through the transition window."""
    from interp.transition import facts

    available = saved_steps(run)
    t = tau(run)
    if t is None:
        raise InterpError(f"the transition steps are relative to tau, but {run.path} never reaches 0.5 log K; "
                          f"give explicit steps instead")
    near = {f: near_saved(run, f * t, t) for f in TAU_FRACTIONS if f * t <= available[-1]}
    chosen = {step for step, close in near.values() if close}
    beyond = [f for f in TAU_FRACTIONS if f * t > available[-1]]
    far = [f for f, (_, close) in near.items() if not close]
    if beyond and notes is not None and note_beyond:  # named when asked for (a default's read what the run has)
        notes.append(f"transition steps at {', '.join(f'{f:g} τ' for f in beyond)} (τ = {t}) lie beyond the run "
                     f"(last step {available[-1]})")
    if far and notes is not None:
        notes.append(f"transition steps at {', '.join(f'{f:g} τ' for f in far)} (τ = {t}) have no checkpoint within "
                     f"{STEP_SLACK:g} τ (nearest saved: {', '.join(str(near[f][0]) for f in far)}); left out")
    bounds = facts(run).window
    if bounds is not None:
        start, end = bounds
        chosen |= {s for s in available if start <= s <= end}
        after = [s for s in available if s > end]
        if after:
            chosen.add(after[0])
    return [(s, "") for s in sorted(chosen)]


def beyond_note(label: str, target: float, last: int) -> str:
    multiple = RELATIVE_LABELS.get(label, label)
    return f"{label} ({multiple} = {target:.0f}) lies beyond the run (last step {last})"


def probe_groups(task: Task, n_groups: int | None, seed: int) -> torch.Tensor:
    """A fixed, seeded choice of groups (all of them when n_groups is None or too large)."""
    import torch

    if n_groups is not None and n_groups < 1:
        raise InterpError(f"the probe needs at least one group, got n_groups={n_groups}")
    if n_groups is None or n_groups >= task.n_groups:
        return torch.arange(task.n_groups)
    gen = torch_generator(seed, "probe")
    return torch.randperm(task.n_groups, generator=gen)[:n_groups].sort().values


def group_examples(task: Task, groups: torch.Tensor) -> torch.Tensor:
    """Example indices of `groups`, group-major: [G * K], each group's K selectors in order."""
    import torch

    return (groups.view(-1, 1) * task.k + torch.arange(task.k).view(1, -1)).reshape(-1)


def steps_progress(items: list, desc: str, progress: bool):
    return tqdm(items, desc=desc, unit="step", disable=not progress or len(items) < 2, leave=False)


def default_steps(analysis: str, steps: int | str | Iterable | None):
    """`steps`, or when None the default steps of the analysis's registry entry (so that
    `across(run)` computes what `interp analyze --only NAME` does)."""
    return registry.get(analysis).steps if steps is None else steps


def over_steps(
    run: Run,
    steps: int | str | Iterable | None,
    compute: Callable[[int, str], pd.DataFrame | dict[str, pd.DataFrame]],
    analysis: str,
    progress: bool,
) -> pd.DataFrame | dict[str, pd.DataFrame]:
    """Concatenate `compute(step, label)` over the requested steps (see `select_steps`; None:
    the analysis's default steps, or every saved step for one that is not registered), each
    table on its own when `compute` gives {table: DataFrame}."""
    chosen = select_steps(run, default_steps(analysis, steps) if analysis in registry.REGISTRY else steps,
                          defaults=steps is None)
    parts = [compute(s, label) for s, label in steps_progress(chosen, analysis, progress)]
    if parts and isinstance(parts[0], dict):  # an analysis of several tables: each concatenated
        return {name: pd.concat([p[name] for p in parts], ignore_index=True) for name in parts[0]}
    return pd.concat(parts, ignore_index=True)


# ---------------------------------------------------------------------------- one `across` for every analysis
class Checkpoints:
    """Saved checkpoints' parameters by step (`run.state_dict`: hash-checked), the last `keep` read
    kept: what the need "previous_checkpoints" provides. A reader lives as long as one suite call or
    one `across` call (so a checkpoint rewritten on disk is read again by the next), and walking the
    steps in order reads each checkpoint about once."""

    def __init__(self, run: Run, keep: int = 3):
        self.run, self.keep = run, keep
        self._kept: OrderedDict[int, dict[str, torch.Tensor]] = OrderedDict()

    def __call__(self, step: int) -> dict[str, torch.Tensor]:
        if step not in self._kept:
            self._kept[step] = self.run.state_dict(step)
            while len(self._kept) > self.keep:
                self._kept.popitem(last=False)
        self._kept.move_to_end(step)
        return self._kept[step]


def provided(entry: registry.Analysis, run: Run, cache: bool = True) -> dict:
    """The at_step keywords of the entry's needs that are met per call, not by a parameter (the
    routing head is a parameter, put in by the suite): a checkpoint reader shared by the steps; whether a
    replayed optimizer state may be read from and kept in the run's cache (`cache`: False for --no-cache)."""
    out = {}
    need = entry.need("previous_checkpoints")
    if need is not None:
        out[need.param] = Checkpoints(run)
    need = entry.need("optimizer_state")
    if need is not None and need.param:
        out[need.param] = cache
    return out


def across(analysis: str, run: Run, steps: int | str | Iterable | None = None, progress: bool = False,
           **params) -> pd.DataFrame | dict[str, pd.DataFrame]:
    """The analysis's `at_step` at each requested step, concatenated: a DataFrame, or {table: DataFrame}
    for an analysis of several tables. `steps` as in `select_steps` (None: the registry entry's default
    steps, so that `across(run)` computes what `interp analyze --only NAME` does); parameters default to
    the module's DEFAULTS (checked by its `check_params`, when it has one); `model` is never passed on
    (each step's own checkpoint is read); the entry's needs are provided, except the routing head (a
    parameter: give a head such as "L0H3")."""
    return _across(analysis, run, steps, progress, params, label=False)


def _across(analysis: str, run: Run, steps, progress: bool, params: dict, label: bool):
    entry = registry.get(analysis)
    module = entry.load()
    params = {**module.DEFAULTS, **params}
    params.pop("model", None)
    check = getattr(module, "check_params", None)
    params = check(params) if check is not None else params
    extra = provided(entry, run)

    def compute(step: int, name: str):
        out = module.at_step(run, step, **params, **extra)
        if label:
            out = {k: v.assign(label=name) for k, v in out.items()} if isinstance(out, dict) else out.assign(label=name)
        return out

    return over_steps(run, steps, compute, analysis, progress)


def across_of(analysis: str, table: str | None = None, label: bool = False) -> Callable:
    """An analysis module's `across(run, steps=None, progress=False, **params)`: `across` of
    `analysis`; `table` picks one table of several; `label` adds the column naming the relative steps
    (pre, mid, post; "" for the others)."""

    def across_steps(run: Run, steps: int | str | Iterable | None = None, progress: bool = False, **params):
        out = _across(analysis, run, steps, progress, params, label)
        return out[table] if table is not None else out

    across_steps.__name__ = across_steps.__qualname__ = "across"
    across_steps.__doc__ = (f"`at_step` of the {analysis} analysis at each requested step (None: its registry entry's "
                            f"default steps), concatenated{f' (its {table!r} table)' if table else ''}; see "
                            "`interp.analysis.common.across`.")
    return across_steps
