"""A run's outcome: transitioned, stuck on the plateau, or diverged, decided by written rules.

The rules are the author's (eta_sweep/run_single.py's status tracker, docs/phase.md), with their thresholds as
TrainSpec fields (`interp.spec.OUTCOME_DEFAULTS`). Each logged evaluation is judged in this order:

1. the candidate loss (or the training loss) is not finite: diverged, at once;
2. the candidate loss has stayed below `transition_below` log K for `transition_hold` steps: transitioned;
3. the run has stayed on the plateau (candidate loss within `plateau_band` log K of log K and the shuffle gap
   dz below `plateau_gap` nats; a missing dz is not the plateau) for `stuck_hold` steps, and the step is at least
   `stuck_after`: stuck;
4. the candidate loss has stayed above `diverge_above` log K for `diverge_hold` steps, counting only evaluations
   from step `diverge_after` on: diverged.

"Stayed for H steps at step t" means: every evaluation from some step s to t satisfies the condition, and
t - s >= H (the author's window: the entries within H steps of t all satisfy it and the oldest is at most
t - H + 1 steps old, the same on a grid that has an evaluation at t - H). The first decision is the run's outcome;
one trained with `stop_when_decided` stops there (a transition after `decided_tail` more steps). A run that ends
undecided is "inconclusive"; one that failed for another reason than a non-finite loss, "crashed"; one still
running or interrupted, "running".

The same `Tracker` judges live (interp.train) and after the fact (`outcome_of`), so both agree by construction.
No heavy imports: `interp show` and the sweep table use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from interp.errors import InterpError
from interp.spec import OUTCOME_DEFAULTS, OUTCOME_RULES, TrainSpec

OUTCOMES = ("transitioned", "stuck", "diverged", "inconclusive", "crashed", "running")
DECIDED = ("transitioned", "stuck", "diverged")


@dataclass(frozen=True)
class Rules:
    """The thresholds of the outcome rules (defaults: the author's)."""

    plateau_band: float = OUTCOME_DEFAULTS["plateau_band"]
    plateau_gap: float = OUTCOME_DEFAULTS["plateau_gap"]
    transition_below: float = OUTCOME_DEFAULTS["transition_below"]
    transition_hold: int = OUTCOME_DEFAULTS["transition_hold"]
    stuck_hold: int = OUTCOME_DEFAULTS["stuck_hold"]
    stuck_after: int = OUTCOME_DEFAULTS["stuck_after"]
    diverge_above: float = OUTCOME_DEFAULTS["diverge_above"]
    diverge_hold: int = OUTCOME_DEFAULTS["diverge_hold"]
    diverge_after: int = OUTCOME_DEFAULTS["diverge_after"]
    decided_tail: int = OUTCOME_DEFAULTS["decided_tail"]

    @classmethod
    def of(cls, spec: TrainSpec, **changes) -> Rules:
        """The rules a run was trained with, with `changes` (name -> value) applied; an unknown name or a value out of
        range is an InterpError naming what is allowed."""
        unknown = sorted(set(changes) - set(OUTCOME_RULES))
        if unknown:
            raise InterpError(f"unknown outcome rule {unknown[0]!r}; known: {', '.join(OUTCOME_RULES)}")
        values = {f.name: getattr(spec, f.name) for f in fields(cls)}
        values.update(changes)
        from dataclasses import replace

        replace(spec, **values).validate()  # the spec's own checks name the field and its range
        return cls(**values)

    def describe(self) -> str:
        return (f"plateau |Lc - log K| <= {self.plateau_band:g} log K and dz < {self.plateau_gap:g}; transitioned: "
                f"Lc < {self.transition_below:g} log K for {self.transition_hold} steps; stuck: plateau for "
                f"{self.stuck_hold} steps, from step {self.stuck_after}; diverged: Lc > {self.diverge_above:g} log K "
                f"for {self.diverge_hold} steps from step {self.diverge_after}, or not finite")


def parse_rules(texts: list[str] | None) -> dict:
    """NAME=VALUE texts (`--rule stuck_hold=1000`) as a dict of typed values; an unknown name or a value that is not a
    number is an InterpError naming the known ones."""
    out: dict = {}
    for text in texts or []:
        name, sep, value = text.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in OUTCOME_RULES:
            raise InterpError(f"unknown outcome rule {text!r}: give NAME=VALUE with NAME one of "
                              f"{', '.join(OUTCOME_RULES)}")
        kind = type(OUTCOME_DEFAULTS[name])
        try:
            out[name] = kind(value) if kind is float else int(value)
        except ValueError:
            raise InterpError(f"outcome rule {name} must be {'a number' if kind is float else 'a whole number'}, "
                              f"got {value!r}") from None
    return out


@dataclass(frozen=True)
class Decision:
    outcome: str  # one of DECIDED
    step: int  # the evaluation at which it was decided
    since: int  # the first step of the stretch that decided it
    reason: str

    def stop_step(self, rules: Rules) -> int:
        """The step a run trained with stop_when_decided ends at: a transition `decided_tail` steps after."""
        return self.step + (rules.decided_tail if self.outcome == "transitioned" else 0)


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class Tracker:
    """Feeds on one evaluation at a time (`update`) and returns the first decision, then keeps returning it."""

    def __init__(self, rules: Rules, log_k: float):
        if not log_k > 0:
            raise InterpError("a run's outcome needs K >= 2 (log K > 0): with K = 1 there is no plateau to leave")
        self.rules, self.log_k = rules, log_k
        self.decision: Decision | None = None
        self._since: dict[str, int | None] = {"transition": None, "plateau": None, "diverge": None}

    def _streak(self, name: str, step: int, holds: bool) -> int | None:
        if not holds:
            self._since[name] = None
        elif self._since[name] is None:
            self._since[name] = step
        return self._since[name]

    def update(self, step: int, loss_cand, dz=None, train_loss=None) -> Decision | None:
        if self.decision is not None:
            return self.decision
        r, log_k = self.rules, self.log_k
        if not _finite(loss_cand) or (train_loss is not None and isinstance(train_loss, float)
                                      and math.isinf(train_loss)):
            what = "candidate loss" if not _finite(loss_cand) else "training loss"
            value = loss_cand if what == "candidate loss" else train_loss
            self.decision = Decision("diverged", step, step, f"the {what} is {value} at step {step}")
            return self.decision
        since = self._streak("transition", step, loss_cand < r.transition_below * log_k)
        if since is not None and step - since >= r.transition_hold:
            self.decision = Decision("transitioned", step, since, f"Lc < {r.transition_below:g} log K from step "
                                                                  f"{since} to {step}")
            return self.decision
        plateau = abs(loss_cand - log_k) <= r.plateau_band * log_k and _finite(dz) and dz < r.plateau_gap
        since = self._streak("plateau", step, plateau)
        if since is not None and step >= r.stuck_after and step - since >= r.stuck_hold:
            self.decision = Decision("stuck", step, since, f"on the plateau (dz < {r.plateau_gap:g}) from step "
                                                           f"{since} to {step}")
            return self.decision
        since = self._streak("diverge", step, step >= r.diverge_after and loss_cand > r.diverge_above * log_k)
        if since is not None and step - since >= r.diverge_hold:
            self.decision = Decision("diverged", step, since, f"Lc > {r.diverge_above:g} log K from step {since} "
                                                              f"to {step}")
        return self.decision

    def feed(self, rows) -> Decision | None:
        """Judge logged rows (dicts with step, loss_cand, shuffle_gap, train_loss) in order."""
        for row in rows:
            if self.update(row["step"], row.get("loss_cand"), row.get("shuffle_gap"),
                           row.get("train_loss")) is not None:
                break
        return self.decision


@dataclass(frozen=True)
class Outcome:
    outcome: str  # one of OUTCOMES
    decided_at: int | None
    reason: str
    stopped: bool  # training was stopped because it was decided

    def as_row(self) -> dict:
        return {"outcome": self.outcome, "decided_at": self.decided_at, "outcome_reason": self.reason}


def judge_rows(rows: list[dict], log_k: float, rules: Rules, status: dict | None) -> Outcome:
    """The outcome of a run with logged `rows` and `status` (status.json; None: never trained to an end)."""
    status = status or {}
    decision = Tracker(rules, log_k).feed(rows)
    if decision is not None:
        return Outcome(decision.outcome, decision.step, decision.reason, bool(status.get("decided")))
    if status.get("diverged_at") is not None:  # training stopped on a non-finite loss before it was logged
        return Outcome("diverged", status["diverged_at"], status.get("error") or "a non-finite loss", False)
    state = status.get("state")
    if state == "failed":
        return Outcome("crashed", None, status.get("error") or "failed", False)
    if state != "done":
        return Outcome("running", None, "not finished", False)
    last = rows[-1]["step"] if rows else 0
    return Outcome("inconclusive", None, f"undecided at its last step {last}", False)


def outcome_of(run, **changes) -> Outcome:
    """A run's outcome from its metrics log (an imported run's source history where it has the author's columns),
    by its spec's rules with `changes` applied (`interp phase --rule`)."""
    rules = Rules.of(run.spec.train, **changes)
    return judge_rows(trajectory_rows(run), math.log(run.spec.task.k), rules, run.status)


def trajectory_rows(run) -> list[dict]:
    """The rows the outcome is judged on: the metrics log, or an imported run's source history when it logged the
    candidate loss and dz more densely (the author's eta-sweep runs: every 50 steps, against a checkpoint every
    200 or 2,000)."""
    rows = run.metric_rows()
    source = source_trajectory(run)
    return source if source and len(source) > len(rows) else rows


def source_trajectory(run) -> list[dict] | None:
    """An imported run's source history as rows under interp's names (loss_cand, shuffle_gap, train_loss, lr,
    grad_sq_heldout), or None when it has none or lacks the candidate loss."""
    block = run.imported
    if not block:
        return None
    from interp.run_layout import HISTORY_FILE

    path = run.path / HISTORY_FILE
    if not path.exists():
        return None
    from interp.files import load_jsonl

    rows = []
    for row in load_jsonl(path, "the source's history"):
        if not isinstance(row.get("step"), int) or "candidate_loss" not in row:
            continue
        rows.append({"step": row["step"], "loss_cand": _number(row.get("candidate_loss")),
                     "shuffle_gap": _number(row.get("delta_z")), "train_loss": _number(row.get("train_loss")),
                     "lr": _number(row.get("lr")), "grad_sq_heldout": _number(row.get("grad_norm_sq_held_out"))})
    rows.sort(key=lambda r: r["step"])
    return rows or None


def _number(value) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
