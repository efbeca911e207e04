"""A relapsed state: a solved run that, continued at a higher lr, falls back to the marginal (SPEC 9.2).

The author forked a *collapsed* state: a solved model trained on at a high lr until its loss was
back at the input-blind marginal. Here that is an `lr` arm fork of a solved run's last checkpoint,
made with `save_optimizer` so that it keeps its states (docs/forks.md, "Relapse"). A relapse is
read from the run's metrics log alone (no torch): the first evaluation *after the run was solved*
(its first evaluation with Lc < 0.05 log K: a run from scratch sits on the marginal before it ever
solves, which is no relapse) that starts a held stretch of the relapse criterion. The criterion is
written as an escape criterion (`interp.forks.escape`) whose loss rises: `METRIC>THRESHOLD[,hold=STEPS]`,
by default `loss_cand>0.9logK,hold=200`: the candidate loss back within 10% of log K at every
evaluation for 200 steps. A stretch whose hold runs past the last evaluation is not known to hold.

`relapse_at(run, criterion)` is the step a fork family starts from (`interp fork RUN --at relapse
[--relapse CRITERION]`): the step nearest at or after the detection that has a state a fork can
start from: a kept state, else the resume state; a run that is not a fork may also be replayed at a
saved step. The state must lie within the relapsed stretch: before the first evaluation after the
relapse whose metric is no longer past the threshold (a run that re-solved); NaN, not evaluated, is
skipped. So the criterion's metric at the run's last evaluation at or before the step is still past
it, as `interp.mechanisms.fork_measures.family_relapsed` asks of a family's fork steps. A criterion never met, or a fork that
kept no state inside the stretch, is refused with the reason (and, for the second, the remedy).
"""

from __future__ import annotations

from interp.errors import InterpError
from interp.forks.escape import EscapeCriterion, held_escape, parse_escape

DEFAULT_RELAPSE = "loss_cand>0.9logK,hold=200"
SOLVED_FRACTION = 0.05  # Lc below this multiple of log K: solved (the snap, interp.transition.SNAP_FRACTION)


def parse_relapse(text: str | EscapeCriterion | None) -> EscapeCriterion:
    """The relapse criterion from its text (None: DEFAULT_RELAPSE), with errors that name --relapse: its metric
    read the way it moves as a run unlearns (a loss rises, an accuracy falls; `interp.forks.escape.check_sense`)."""
    return parse_escape(DEFAULT_RELAPSE if text is None else text, flag="--relapse")


def solved_step(steps, loss_cand, log_k: float) -> int | None:
    """The first evaluated step with Lc < 0.05 log K, or None."""
    return next((int(s) for s, v in zip(steps, loss_cand) if v == v and v < SOLVED_FRACTION * log_k), None)


def detect(steps, loss_cand, values, log_k: float, criterion: EscapeCriterion) -> tuple[int | None, int | None]:
    """(solved step, relapse step) from the series: the relapse is the first evaluation after the solved
    one that starts a held stretch of `criterion` over `values` (its metric's series); None where none."""
    solved = solved_step(steps, loss_cand, log_k)
    if solved is None:
        return None, None
    return solved, held_escape(steps, values, solved + 1, criterion.limit(log_k), criterion.hold, criterion.op)


def relapse_step(run, criterion=None) -> int | None:
    """The step at which `run` relapsed under `criterion` (text or EscapeCriterion; None: the default),
    read from its metrics log; None when it did not (or never solved)."""
    criterion = parse_relapse(criterion)
    series = run.metric_series("loss_cand", criterion.metric)
    return detect(series["step"], series["loss_cand"], series[criterion.metric], run.log_k, criterion)[1]


def not_relapsed(run, criterion: EscapeCriterion) -> str:
    """Why `run` shows no relapse, in one line."""
    series = run.metric_series("loss_cand")
    steps = series["step"]
    solved = solved_step(steps, series["loss_cand"], run.log_k)
    last = steps[-1] if steps else None
    if solved is None:
        return (f"{run.path} never solved (Lc < 0.05 log K) up to its last evaluation ({last}), so it cannot "
                f"relapse; fork a solved run at a higher lr (docs/forks.md, \"Relapse\")")
    return (f"{run.path} did not relapse: {criterion.words} is never met after it was solved (step {solved}) up to its "
            f"last evaluation ({last}); train the lr fork longer or at a higher lr, or give another --relapse")


def relapsed_until(steps, values, relapse: int, criterion: EscapeCriterion, log_k: float) -> int | None:
    """The first evaluated step after `relapse` whose value is no longer past the criterion's threshold (NaN:
    not evaluated, skipped): where the relapsed stretch ends; None when it lasts to the last evaluation."""
    limit = criterion.limit(log_k)
    for s, v in zip(steps, values):
        if s > relapse and v == v and not (v > limit if criterion.op == ">" else v < limit):
            return int(s)
    return None


def relapse_at(run, criterion=None, held: int = 0) -> int:
    """The step to fork `run` at for its relapsed state (module docstring), `held` steps into the relapse (the
    relapse's depth: `--at relapse+H`); InterpError if there is none."""
    from interp.run_states import kept_steps

    criterion = parse_relapse(criterion)
    series = run.metric_series("loss_cand", criterion.metric)
    steps, values = series["step"], series[criterion.metric]
    found = detect(steps, series["loss_cand"], values, run.log_k, criterion)[1]
    if found is None:
        raise InterpError(not_relapsed(run, criterion))
    ended = relapsed_until(steps, values, found, criterion, run.log_k)
    target = found + held
    resume = run.load_resume()
    states = set(kept_steps(run)) | ({resume.step} if resume is not None else set())
    if run.fork is None:
        states |= set(run.steps)  # a saved step, replayed (interp.replay)
    # the depths a fork can be had at: a state inside the relapsed stretch (what --at relapse+H then takes)
    depths = sorted(s - found for s in states if s >= found and (ended is None or s < ended))
    can = (f"the depths with a state inside it: {', '.join(map(str, depths[:8]))}{' ...' if len(depths) > 8 else ''}"
           if depths else "no state lies inside it")
    if held and ended is not None and target >= ended:
        raise InterpError(f"{run.path} relapsed at step {found} ({criterion.words}) and was no longer relapsed from "
                          f"step {ended}, so relapse+{held} (step {target}) lies past its relapsed stretch of "
                          f"{ended - found} steps ({can}); fork it at one of those depths, or relapse it at a higher "
                          f"lr (docs/forks.md, \"Relapse\")")
    candidates = [(s, "a kept state") for s in kept_steps(run) if s >= target]
    candidates += [(resume.step, "the resume state")] if resume is not None and resume.step >= target else []
    if run.fork is None:
        candidates += [(s, "a saved step, replayed") for s in run.steps if s >= target]  # interp.replay
    inside = sorted(s for s, _ in candidates if ended is None or s < ended)
    if inside:
        return inside[0]
    if held and not candidates:
        raise InterpError(f"{run.path} relapsed at step {found} ({criterion.words}) but keeps no state at or after "
                          f"step {target} (relapse+{held}): its last is {max(kept_steps(run) or [found])}; train the "
                          f"lr fork longer with --save-optimizer")
    where = f"{run.path} relapsed at step {found} ({criterion.words})"
    if not candidates:
        raise InterpError(f"{where} but keeps no optimizer state at or after it"
                          + (", and a fork's states cannot be replayed" if run.fork is not None else "")
                          + ": make the lr fork again with --save-optimizer (docs/forks.md, \"Relapse\")")
    step, kind = min(candidates)
    value = values[steps.index(ended)]
    raise InterpError(f"{where} but was no longer relapsed from step {ended} ({criterion.metric} {value:.4g}, not "
                      f"{criterion.op} {criterion.limit(run.log_k):.4g}); the nearest state at or after the relapse, "
                      f"{kind} at step {step}, lies after that and would fork a re-solved state ({can}): make the "
                      f"lr fork again with --save-optimizer and a denser --checkpoint-every (a state kept in "
                      f"{target}..{ended - 1}), or give --at STEP explicitly (docs/forks.md, \"Relapse\")")


def relapse_shown(run, criterion=None) -> tuple[tuple[str, str], dict]:
    """The relapse as `interp show --relapse` gives it: a (label, text) row and its JSON fields."""
    criterion = parse_relapse(criterion)
    step = relapse_step(run, criterion)
    text = (not_relapsed(run, criterion).removeprefix(f"{run.path} ") if step is None
            else f"at step {step} ({criterion.words}, after the run was solved)")
    return ("relapse", text), {"relapse_criterion": criterion.text, "relapse_step": step}
