"""Circuits at the level of edges, at every checkpoint: an attribution score for every edge, the circuit (the
smallest top-scored edge set that keeps `target` of the logit difference), its faithfulness curve, and each
edge's onsets.

Edges (`interp.analysis.edge_graph`) run from the embeddings, each head and each MLP to each later head's query,
key and value input, each later MLP and the logits. The pairs and the metric are the patching analysis's: clean
(B, z1 -> A1) and corrupted (B, z2 -> A2) examples of one group, LD = logit(a1 of A1) - logit(a1 of A2) at the
decision position, averaged over pairs.
- score (nats): EAP, (clean - corrupted sender output) . d LD / d receiver input at the corrupted run, or EAP-IG,
  the gradient averaged over `ig_steps` inputs interpolated from the corrupted towards the clean ones. It
  approximates `exact`: the LD gained by patching that edge alone into the corrupted run (`exact` on; the
  reference, about E times the work of a forward).
- the circuit: edges ranked by |score|; faithfulness of the top n is the share of clean - corrupted LD that
  remains when every other edge is patched to its corrupted value (n = 0: the corrupted run, 0; every edge: 1);
  the circuit is the smallest n that reaches `target`. Undefined (NaN) where |clean - corrupt| < 0.1 nats.
- onsets (derived across steps, docs/edges.md): carried, the rise onset of |score| (`transition.rise_onset`, as
  for heads); used, the first step from which the edge is in the circuit for ONSET_M checkpoints. The findings
  list the first edges by carried onset among those that are in the circuit at some step.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from interp.analysis.common import across_of, no_grad, select_steps
from interp.analysis.findings import Rows
from interp.analysis.registry import Analysis, N_PAIRS, Option, parse_edge_method, parse_switch, positive_int, unit_fraction
from interp.errors import InterpError
from interp.formatting import fmt
from interp.presentable import html
from interp.runs import Run
from interp.transition import ONSET_M, STEP_SLACK, facts, left_censored, onset, rise_onset, tau_or_none

if TYPE_CHECKING or "torch" in sys.modules:
    from torch import nn

DEFAULT_PAIRS = 64  # the patching analysis's
DEFAULT_METHOD = "eap-ig"
DEFAULT_IG_STEPS = 5
DEFAULT_TARGET = 0.8
GUARD = 0.1  # nats: below this |clean - corrupt| the faithfulness is undefined (the patching analysis's guard)
FIRST_SHOWN = 10
DEFAULTS = {"n_pairs": DEFAULT_PAIRS, "method": DEFAULT_METHOD, "ig_steps": DEFAULT_IG_STEPS,
            "target": DEFAULT_TARGET, "exact": False}


def check_params(params: dict) -> dict:
    """The parameters checked (a one-line InterpError naming what is wrong and what is allowed)."""
    out = dict(params)
    try:
        out["method"], out["target"] = parse_edge_method(out["method"]), unit_fraction(out["target"])
    except ValueError as exc:
        raise InterpError(f"edges: {exc}") from None
    m = out["ig_steps"]
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise InterpError(f"edges: ig_steps must be a positive integer, got {m!r}")
    return out


def check_model(model: nn.Module) -> None:
    """The edge graph is that of the interp model family (`interp.fastpath.problems`); refuse any other."""
    from interp.fastpath import problems

    found = problems(model)
    if found:
        raise InterpError(f"the edge graph supports the interp model family only (got {', '.join(found)})")


def _kind(receiver: str) -> str:
    return receiver.rsplit(".", 1)[1] if "." in receiver else ("logits" if receiver == "logits" else "mlp")


def _layer(name: str, n_layers: int) -> int:
    if name == "embed":
        return -1
    if name == "logits":
        return n_layers
    return int(name[3:]) if name.startswith("MLP") else int(name[1 : name.index("H")])


@no_grad
def at_step(run: Run, step: int, *, model: nn.Module | None = None, n_pairs: int = DEFAULT_PAIRS,
            method: str = DEFAULT_METHOD, ig_steps: int = DEFAULT_IG_STEPS, target: float = DEFAULT_TARGET,
            exact: bool = False, device: str = "cpu") -> dict[str, pd.DataFrame]:
    """Every edge's attribution score at `step` and the circuit, on the patching analysis's `n_pairs` pairs.

    Returns {"edges": one row per edge: step, edge ("SENDER->RECEIVER"), sender, receiver, kind (q, k, v, mlp,
    logits), sender_layer (-1: the embeddings), receiver_layer (n_layers: the logits), score (nats), rank (1: the
    largest |score|), in_circuit, exact (LD gained by patching the edge alone; NaN unless `exact`), method,
    ig_steps, n_pairs, clean_ld, corrupt_ld;
    "edges_curve": one row per circuit size n = 0..E: step, n_edges, patched_ld, faithfulness, circuit (True at
    the circuit's size), target}."""
    import torch

    from interp.analysis.edge_graph import EdgeGraph, attribution, exact_patching, faithfulness_curve, prepare, recorded
    from interp.analysis.patching import make_pairs

    p = check_params({"method": method, "ig_steps": ig_steps, "target": target})
    method, ig_steps, target = p["method"], p["ig_steps"], p["target"]
    if model is None:
        model = run.model(step, device=device)
    check_model(model)
    device = str(next(model.parameters()).device)
    task = run.task
    pairs = make_pairs(task, n_pairs, run.spec.seed)
    pos = task.layout.decision_pos
    graph = EdgeGraph.of(model)
    batch = prepare(model, *(pairs[k][:, : pos + 1].to(device) for k in ("clean", "corrupt")),
                    pairs["good"].to(device), pairs["bad"].to(device))
    clean_outs, clean_ld = recorded(model, graph, batch, "clean")
    corrupt_outs, corrupt_ld = recorded(model, graph, batch, "corrupt")
    clean_ld, corrupt_ld = float(clean_ld.double().mean()), float(corrupt_ld.double().mean())
    m = 1 if method == "eap" else ig_steps
    scores = attribution(model, graph, batch, m, clean_outs, corrupt_outs)
    s_idx = torch.tensor([s for s, _ in graph.edges], device=scores.device)
    r_idx = torch.tensor([r for _, r in graph.edges], device=scores.device)
    score = scores[s_idx, r_idx].double().cpu()
    order = torch.argsort(-score.abs(), stable=True)
    curve = faithfulness_curve(model, graph, batch, order, corrupt_outs).double().cpu()
    span = clean_ld - corrupt_ld
    faith = (curve - corrupt_ld) / span if abs(span) >= GUARD else torch.full_like(curve, float("nan"))
    reached = torch.nonzero(faith >= target - 1e-9).view(-1)  # the full graph is 1 up to rounding
    size = int(reached[0]) if len(reached) else None
    rank = torch.empty_like(order)
    rank[order] = torch.arange(1, len(order) + 1)
    effect = (exact_patching(model, graph, batch, clean_outs=clean_outs).double().cpu() - corrupt_ld) if exact \
        else torch.full_like(score, float("nan"))
    names = [(graph.senders[s], graph.receivers[r]) for s, r in graph.edges]
    n_layers = graph.n_layers
    edges = pd.DataFrame({
        "step": step, "edge": [f"{s}->{r}" for s, r in names], "sender": [s for s, _ in names],
        "receiver": [r for _, r in names], "kind": [_kind(r) for _, r in names],
        "sender_layer": [_layer(s, n_layers) for s, _ in names], "receiver_layer": [_layer(r, n_layers) for _, r in names],
        "score": score.numpy(), "rank": rank.numpy(),
        "in_circuit": (rank.numpy() <= size) if size is not None else False, "exact": effect.numpy(),
    })
    edges["method"], edges["ig_steps"], edges["n_pairs"] = method, m, len(batch.good)
    edges["clean_ld"], edges["corrupt_ld"] = clean_ld, corrupt_ld
    sizes = torch.arange(len(curve))
    curve_df = pd.DataFrame({"step": step, "n_edges": sizes.numpy(), "patched_ld": curve.numpy(),
                             "faithfulness": faith.numpy(), "circuit": (sizes == size).numpy() if size is not None
                             else False})
    curve_df["target"] = target
    return {"edges": edges, "edges_curve": curve_df}


def memory_bytes(run: Run, n_pairs: int, method: str, ig_steps: int) -> int:
    """A generous estimate (about twice what was measured) of the memory of `at_step`'s attribution: one backward pass
    over n_pairs x m interpolated rows (m = ig_steps for EAP-IG, 1 for EAP), each of the positions from z to the
    decision position keeping every receiver's input, its shift and their gradients, the heads' outputs, the MLP's
    and the attention pattern, in float32 for the forward and the backward."""
    m, layout = run.spec.model, run.layout
    positions = layout.decision_pos - layout.z_pos[0] + 1
    receivers = 3 * m.n_heads + 1
    per_position = m.n_layers * (4 * receivers * m.d_model + 4 * m.n_heads * m.d_model + 2 * m.d_mlp
                                 + 2 * m.n_heads * layout.length + 4 * m.d_model)
    rows = n_pairs * (ig_steps if method == "eap-ig" else 1)
    return rows * positions * per_position * 4 * 2


def check_fits(run: Run, params: dict, device: str) -> None:
    """Refuse, before any work, an attribution that would not fit in `device`'s memory (`memory_bytes`: it grows
    with n_pairs x ig_steps), in one line (`interp.devices.check_memory`)."""
    from interp.devices import check_memory

    p = check_params({**DEFAULTS, **params})
    n_pairs, method, m = int(p["n_pairs"]), p["method"], p["ig_steps"]
    check_memory(memory_bytes(run, n_pairs, method, m), device,
                 f"the edges analysis ({method}, {n_pairs} pairs" + (f" x {m} interpolation steps" if method == "eap-ig"
                                                                      else "") + ") needs about {need}",
                 "lower --ig-steps or --n-pairs")


across = across_of("edges")  # {table: DataFrame}
METHOD = Option("edge-method", "method", "edges: attribution method (default: eap-ig)", parse_edge_method,
                choices=("eap", "eap-ig"), metavar="eap|eap-ig")
IG_STEPS = Option("ig-steps", "ig_steps", "edges: EAP-IG interpolation steps (default: 5)", positive_int, metavar="M")
TARGET = Option("faithfulness", "target", "edges: the circuit's faithfulness target, in (0, 1] (default: 0.8)",
                unit_fraction, metavar="F")
EXACT = Option("exact-edges", "exact", "edges: also patch every edge alone, the reference (default off)", parse_switch,
               choices=("on", "off"), metavar="on|off")
ENTRY = Analysis(
    "edges", __name__, "edge attribution (EAP / EAP-IG) of every edge, the circuit and its faithfulness, every checkpoint",
    default=False, tables=("edges", "edges_curve"), options=(N_PAIRS, METHOD, IG_STEPS, TARGET, EXACT), order=55,
)


def scores(run: Run, step: int | str = "last", **params) -> pd.DataFrame:
    """The "edges" table at one step (a tidy table: one row per edge)."""
    ((step, _),) = select_steps(run, [step])
    return at_step(run, step, **{**DEFAULTS, **params})["edges"]


# ---------------------------------------------------------------------------- across steps: circuits and onsets
def circuits(curve: pd.DataFrame) -> pd.DataFrame:
    """One row per step: the circuit's size (NaN: the target is never reached or the metric is undefined), its
    faithfulness, the target and the number of edges."""
    rows = []
    for step, part in curve.groupby("step", sort=True):
        hit = part[part["circuit"].astype(bool)]
        rows.append({"step": int(step), "size": float(hit["n_edges"].iloc[0]) if len(hit) else math.nan,
                     "faithfulness": float(hit["faithfulness"].iloc[0]) if len(hit) else math.nan,
                     "target": float(part["target"].iloc[0]), "n_edges_total": int(part["n_edges"].max())})
    return pd.DataFrame(rows)


def onsets(edges: pd.DataFrame, m: int = ONSET_M) -> pd.DataFrame:
    """One row per edge: carried_onset (the rise onset of |score|, the heads' rule), used_onset (the first step
    from which it is in the circuit for m checkpoints), ever_in_circuit and last_abs_score (|score| at the last
    step); ordered by carried onset (never: last), then by the last step's |score|."""
    rows = []
    last, first = edges["step"].max(), int(edges["step"].min())
    for edge, part in edges.sort_values("step").groupby("edge", sort=False):
        magnitude = part["score"].abs().to_numpy(dtype=float)
        carried = rise_onset(part["step"], magnitude) if len(part) > 1 else None
        used = onset(part["step"], part["in_circuit"].astype(float), 0.5, m=m)
        rows.append({"edge": edge, "sender": part["sender"].iloc[0], "receiver": part["receiver"].iloc[0],
                     "carried_onset": carried, "used_onset": used, "ever_in_circuit": bool(part["in_circuit"].any()),
                     "last_abs_score": float(part.loc[part["step"] == last, "score"].abs().max()),
                     # at the first analysed step of a series that starts after 0 (a fork): only a bound
                     "carried_censored": left_censored(carried, first), "used_censored": left_censored(used, first)})
    df = pd.DataFrame(rows)
    df["_never"] = df["carried_onset"].isna()
    df = df.sort_values(["_never", "carried_onset", "last_abs_score"], ascending=[True, True, False])
    out = df.drop(columns="_never").reset_index(drop=True)
    for col in ("carried_onset", "used_onset"):
        out[col] = out[col].astype("Int64")
    return out


def derive(run: Run, tables: dict) -> dict:
    """The suite's derived tables: each edge's onsets, each step's circuit."""
    return {"edges_onsets": onsets(tables["edges"]), "edges_circuit": circuits(tables["edges_curve"])}


def first_edges(by_onset: pd.DataFrame, n: int = FIRST_SHOWN, dated: bool = True) -> pd.DataFrame:
    """The first `n` edges of `onsets(...)` among those in the circuit at some step (an edge that never is carries
    little: its onset is that of noise); all edges where none ever is. With `dated`, only edges with a carried onset:
    one without ("never", e.g. from a single analysed step) is not first by onset, and none is listed when none has
    one (without it, they follow the dated ones, as the timeline's rows show their used onsets)."""
    circuit = by_onset[by_onset["ever_in_circuit"].astype(bool)]
    pool = circuit if len(circuit) else by_onset
    return (pool[pool["carried_onset"].notna()] if dated else pool).head(n)


POPULATIONS = ("circuit", "all")  # the edges `first_edge` judges among: those ever in the circuit, or all
HEAD_COMMAND = "interp analyze RUN --only edges"  # caches the routing head with the edges (as the SWEEP form)


def head_edges(edges: pd.Series, head: str) -> pd.Series:
    """Whether each edge ("SENDER->RECEIVER") is one of `head`'s: sent by it, or into its query, key or value."""
    sender, receiver = edges.str.split("->", n=1, regex=False).str[0], edges.str.split("->", n=1, regex=False).str[1]
    return (sender == head) | (receiver.str.split(".", n=1, regex=False).str[0] == head)


def first_edge(onsets: pd.DataFrame, head: str | None, population: str = "circuit", command: str = HEAD_COMMAND) -> dict:
    """Whether `head`'s edges have the earliest carried onset among the population's (`edges.onsets`' table); ties
    count as first. Keys: first_onset, first_edges (every edge at it), routing_onset, routing_first (None:
    undefined, with `why`), strictly_first."""
    if population not in POPULATIONS:
        raise InterpError(f"unknown population {population!r}; allowed: {', '.join(POPULATIONS)}")
    out = {"first_onset": None, "first_edges": [], "routing_onset": None, "routing_first": None, "strictly_first": None,
           "why": None}
    pool = onsets[onsets["ever_in_circuit"].astype(bool)] if population == "circuit" else onsets
    pool = pool[pool["carried_onset"].notna()]
    if pool.empty:
        out["why"] = ("no circuit edge has a carried onset" if population == "circuit" else "no edge has a carried onset")
        return out
    earliest = int(pool["carried_onset"].min())
    at = pool[pool["carried_onset"] == earliest]
    out.update(first_onset=earliest, first_edges=[str(e) for e in at["edge"]])
    if "carried_censored" in at and at["carried_censored"].astype(bool).any():
        out["why"] = (f"the earliest onsets are censored at step {earliest}, the first analysed step (a fork): they "
                      f"formed at or before it, so which formed first is not seen")
        return out
    if head is None:
        out["why"] = f"no routing head (its sensitivity is not cached: {command} caches it)"
        return out
    mine = head_edges(pool["edge"].astype(str), head)
    out["routing_onset"] = int(pool.loc[mine, "carried_onset"].min()) if mine.any() else None
    first = out["routing_onset"] == earliest
    out["routing_first"] = bool(first)
    out["strictly_first"] = bool(first and head_edges(at["edge"].astype(str), head).all())
    return out


# ---------------------------------------------------------------------------- read from the cache, for a notebook
def command(run: Run) -> str:
    """The command that fills the cache (the edges run only when asked: minutes of work)."""
    return f"interp analyze {run.path} --only edges"


def cached(run: Run, cache: bool = True, options: dict | None = None) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """The edges tables the run's cache holds, under the parameters of `options` (the defaults when None) or else
    those with the most cached steps (as the report reads them), and the cache's notes (entries left out); nothing
    is computed, no torch imported."""
    from interp.analysis.cache import ResultCache
    from interp.analysis.registry import get

    entry = get("edges")
    store = ResultCache(run, enabled=cache)
    return store.cached_any(entry.cache_key(entry.params(options))), store.notes


def chosen_steps(steps, tau: int | None, snap: int | None) -> dict[str, int]:
    """The saved steps nearest tau/4, tau and the snap, and the last ({label: step}; the labels of one step joined by
    "/"): where the circuit is shown."""
    steps = sorted({int(s) for s in steps})
    near = lambda target: min(steps, key=lambda s: (abs(s - target), s))  # noqa: E731
    wanted = [("last", steps[-1])]
    if tau:
        wanted = [("τ/4", near(tau / 4)), ("τ", near(tau)), *([("snap", near(snap))] if snap else []), *wanted]
    by_step: dict[int, list[str]] = {}
    for label, step in wanted:
        by_step.setdefault(step, []).append(label)
    return {"/".join(labels): step for step, labels in by_step.items()}


@dataclass(repr=False)
class EdgeCircuits:
    """The edges analysis of one run across its steps. In a notebook it shows the circuit at the chosen steps (size,
    faithfulness, its top edges), the first edges by onset and the edge-onset raster (`interp.display.edges`)."""

    name: str
    edges: pd.DataFrame  # the "edges" table: one row per edge and step
    curve: pd.DataFrame  # "edges_curve": the faithfulness curve of each step
    onsets: pd.DataFrame  # `onsets(edges)`: one row per edge, by carried onset
    circuits: pd.DataFrame  # `circuits(curve)`: one row per step
    tau: int | None = None
    steps: dict[str, int] = field(default_factory=dict)  # `chosen_steps`: label -> step
    notes: list[str] = field(default_factory=list)  # cache entries left out

    def __repr__(self) -> str:
        method = str(self.edges["method"].iloc[0]) if "method" in self.edges else "?"
        return (f"EdgeCircuits({self.name!r}, {method}, {self.edges['edge'].nunique()} edges at "
                f"{self.edges['step'].nunique()} steps, tau {self.tau})")

    def _repr_html_(self) -> str:
        return html(self)

    def at(self, step: int) -> pd.DataFrame:
        """The circuit's edges at `step`, by rank."""
        part = self.edges[(self.edges["step"] == step) & self.edges["in_circuit"].astype(bool)]
        return part.sort_values("rank").reset_index(drop=True)


def view(run: Run, tables: dict[str, pd.DataFrame] | None = None, cache: bool = True) -> EdgeCircuits:
    """An EdgeCircuits of `tables` (`across(run)`'s result, or the suite's tables), else of the run's cache (nothing
    is computed: an InterpError names the command when nothing is cached)."""
    notes: list[str] = []
    if tables is None:
        tables, notes = cached(run, cache)
    table, curve = tables.get("edges"), tables.get("edges_curve")
    if table is None or table.empty:
        raise InterpError(f"the edges analysis of {run.path} is not cached; compute it with: {command(run)}")
    curve = curve if curve is not None else pd.DataFrame()
    t = tau_or_none(run)
    snap = facts(run).snap_step if t else None
    return EdgeCircuits(run.name, table, curve, onsets(table), circuits(curve) if not curve.empty else pd.DataFrame(),
                        t, chosen_steps(table["step"], t, snap), notes)


# ---------------------------------------------------------------------------- findings and summary rows
def findings(run: Run, tables: dict, t: int | None, found: dict) -> dict:
    edges, curve = tables["edges"], tables["edges_curve"]
    first = first_edges(onsets(edges))
    out = {"edges_method": str(edges["method"].iloc[0]), "edges_steps": int(edges["step"].nunique()),
           "edges_first": [[str(r.edge), int(r.carried_onset)] for r in first.itertuples()]}
    if "carried_censored" in first and first["carried_censored"].astype(bool).any():  # a fork's edges already
        out["edges_censored_at"] = int(edges["step"].min())  # carried at its first step: bounds
    if t is not None:
        steps = sorted(curve["step"].unique())
        at = min(steps, key=lambda s: (abs(s - t), s))
        if abs(at - t) > STEP_SLACK * t:  # no analysed step near tau: no circuit "at tau" (the nearest is named)
            out.update({"edges_tau": int(t), "edges_tau_nearest": int(at)})
        else:
            row = circuits(curve[curve["step"] == at]).iloc[0]
            out.update({"edges_tau": int(t), "edges_tau_step": int(at),
                        "edges_tau_size": None if math.isnan(row["size"]) else int(row["size"]),
                        "edges_tau_faithfulness": None if math.isnan(row["faithfulness"]) else float(row["faithfulness"])})
    head = found.get("routing_head")
    if head is not None and out["edges_first"]:  # the rule of the sweep's share (`first_edge`): one definition
        out["edges_routing_first"] = first_edge(onsets(edges), head)["routing_first"]
    return out


def rows(f: dict, tables: dict) -> Rows:
    if "edges_first" not in f:
        return []
    cut = f.get("edges_censored_at")
    first = ", ".join(f"{e} ({'<= ' if cut is not None and s == cut else ''}{s})" for e, s in f["edges_first"][:3])
    steps = f.get("edges_steps")
    text = (f"{f['edges_method']}: first circuit edges by onset {first}" if first else
            f"{f['edges_method']}: no edge has an onset" + (f" ({steps} analysed step(s); an onset is a rise across "
                                                            f"checkpoints)" if steps is not None else ""))
    if "edges_tau_step" in f:
        t, at = f.get("edges_tau"), f["edges_tau_step"]
        where = "at τ" if t is None or at == t else f"{abs(at - t)} steps {'after' if at > t else 'before'} τ = {t}"
        text += (f"; circuit at step {at} ({where}): {fmt(f['edges_tau_size'], none='-')} edges, "
                 f"faithfulness {fmt(f['edges_tau_faithfulness'], '.2f')}")
    elif "edges_tau_nearest" in f:
        text += (f"; no circuit at τ = {f['edges_tau']}: no analysed step within {STEP_SLACK:g} τ of it (the nearest, "
                 f"step {f['edges_tau_nearest']}, is {abs(f['edges_tau_nearest'] - f['edges_tau']) / f['edges_tau']:.2f} "
                 f"τ away)")
    return [("edges", text)]
