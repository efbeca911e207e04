"""The `edges` analysis on a sweep (docs/edges.md, "On a sweep"): how much the runs' circuits at tau overlap, and
whether the routing head's edges are the first to form, across seeds and K.

Read from each run's cache alone: nothing is computed and no checkpoint is loaded (`interp analyze SWEEP --only
edges` fills the caches). A run's edges are those cached under the parameters asked for (the defaults, or the
options `interp analyze SWEEP` was given), else under whichever parameters have the most cached steps, as the run
report reads them; runs without cached edges, unfinished or censored runs, and runs whose circuit at tau is
undefined are named with why and left out.

- The circuit at tau: the edges `in_circuit` (the smallest top-|score| set reaching the faithfulness target) at the
  cached step nearest tau_half (ties: the earlier), as the run's own edges findings choose it. Undefined (the run is
  left out of the overlap) where the target is not reached, clean and corrupted LD are within 0.1 nats, or no cached
  step lies within STEP_SLACK (0.15) tau of tau_half.
- Overlap: the Jaccard index |A & B| / |A | B| of every pair of runs' circuits; the mean over all pairs, over pairs
  at the same K (labelled with what they differ in: seeds, a family's fork steps and arms, a sweep's other axes)
  and over pairs at different K, each with a percentile interval of a bootstrap that
  resamples runs (a pair of two draws of one run is left out; `bootstrap.N_BOOT` replicates, the `bootstrap`
  stream). No interval with fewer than 3 runs (two runs give every replicate the one value), nor where fewer than
  half the replicates hold a pair of that kind (`bootstrap.quantiles`).
- The routing head's edges: the edges whose sender is the run's routing head (its output, "L0H3->...") or whose
  receiver is one of its inputs ("...->L0H3.q/.k/.v"). They form first when the earliest carried onset (the rise
  onset of |score|, `edges.onsets`) among them equals the earliest among the run's circuit edges (those in the
  circuit at some cached step, the population of the run's findings: an edge never in the circuit has the onset of
  noise; `population="all"` takes every edge). A tie with another edge at that checkpoint counts as first (steps
  between checkpoints cannot order them); `strictly_first` says whether no other edge shares it. The share of runs
  gets a Wilson interval (`circuit_fits.wilson`). The routing head is the table's `routing_head` column (the
  circuit columns), else read from the cached sensitivity (which `interp analyze SWEEP --only edges` caches at the
  last readable checkpoint); a run without one is left out of the share. Runs left out for one reason are named on
  one line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from interp.analysis.edges import POPULATIONS, first_edge, head_edges  # noqa: F401 - the run's own findings' rule
from interp.errors import InterpError
from interp.seeding import numpy_generator
from interp.sweeps.bootstrap import N_BOOT, check_level, quantiles
from interp.sweeps.circuit_fits import wilson
from interp.sweeps.fits import ci_str, fmt, jsonable

COMMAND = "interp analyze SWEEP --only edges"  # what fills the caches this reads (SWEEP: the folder, when known)
GROUPS = ("all", "same_k", "across_k")
GROUP_TEXT = {"all": "all pairs", "same_k": "same K", "across_k": "across K"}
# what a point's values are called in the "same K, across ..." label (a sweep's axes, a family's fork step, arm, seed)
VARIED = {"seed": "seeds", "step": "fork steps", "arm": "arms"}


def varied_within_k(records: list[dict]) -> list[str]:
    """What the pairs at the same K differ in (their points' values besides K: seeds, a family's fork steps and
    arms, a sweep's other axes), as the label's words; a record without `point` (made without its sweep) differs
    in its seed, as a sweep of seeds does."""
    found: dict[str, None] = {}
    for i, a in enumerate(records):
        for b in records[i + 1:]:
            if a["k"] != b["k"]:
                continue
            pa, pb = a.get("point") or {"seed": a["seed"]}, b.get("point") or {"seed": b["seed"]}
            found.update(dict.fromkeys(k for k in (*pa, *(k for k in pb if k not in pa)) if pa.get(k) != pb.get(k)))
    return [VARIED.get(k, k) for k in found]


def circuit_at(edges: pd.DataFrame, curve: pd.DataFrame, tau: int | float) -> dict:
    """The circuit at the cached step nearest `tau` (ties: the earlier): step, size (None: undefined),
    faithfulness and its edge set (empty when undefined)."""
    from interp.analysis.edges import circuits

    from interp.transition import STEP_SLACK

    steps = sorted(set(curve["step"]) & set(edges["step"]))
    at = min(steps, key=lambda s: (abs(s - tau), s))
    if abs(at - tau) > STEP_SLACK * tau:  # no cached step near tau: no circuit at tau (the run's findings say the same)
        return {"tau_step": int(at), "size": None, "faithfulness": None, "circuit": frozenset(),
                "why_undefined": f"no cached step within {STEP_SLACK:g} τ of tau_half = {tau:g} (the nearest is step {at})"}
    row = circuits(curve[curve["step"] == at]).iloc[0]
    size = None if math.isnan(row["size"]) else int(row["size"])
    part = edges[edges["step"] == at]
    members = frozenset(part.loc[part["in_circuit"].astype(bool), "edge"].astype(str)) if size is not None else frozenset()
    return {"tau_step": int(at), "size": size, "faithfulness": None if size is None else float(row["faithfulness"]),
            "circuit": members, "why_undefined": None if size is not None else (
                f"no circuit at step {at} (nearest tau): the faithfulness target is not reached or clean and corrupted "
                f"LD are within 0.1 nats")}


def run_record(name: str, tables: dict, tau: int | float, k=math.nan, seed=math.nan, head: str | None = None,
               population: str = "circuit", n_checkpoints: int | None = None, command: str = COMMAND,
               point: dict | None = None) -> dict:
    """One run's row: its circuit at tau and whether its routing head's edges form first (`tables`: the
    cached "edges" and "edges_curve"); `point`: its values in the sweep or family besides K (what pairs differ in)."""
    from interp.analysis.edges import onsets

    edges, curve = tables["edges"], tables["edges_curve"]
    return {"run": name, "k": k, "seed": seed, "method": str(edges["method"].iloc[0]), "tau": float(tau),
            "steps_cached": int(edges["step"].nunique()), "n_checkpoints": n_checkpoints, "routing_head": head,
            **({"point": dict(point)} if point is not None else {}),
            **circuit_at(edges, curve, tau), **first_edge(onsets(edges), head, population, command)}


def jaccard(a: frozenset, b: frozenset) -> float:
    """|a & b| / |a | b| (NaN for two empty sets)."""
    union = len(a | b)
    return len(a & b) / union if union else math.nan


def pair_masks(ks: np.ndarray) -> dict[str, np.ndarray]:
    """(n, n) masks of the pairs of each group (i < j): all, same K, different K (an unknown K in neither)."""
    n = len(ks)
    upper = np.triu(np.ones((n, n), bool), 1)
    known = np.isfinite(ks)[:, None] & np.isfinite(ks)[None, :]
    same = ks[:, None] == ks[None, :]
    return {"all": upper, "same_k": upper & known & same, "across_k": upper & known & ~same}


def mean_pairs(J: np.ndarray, ks: np.ndarray, n_boot: int = N_BOOT, level: float = 0.95, seed: int = 0) -> dict:
    """Per group: the mean Jaccard over its pairs, its pair count and a bootstrap interval resampling runs (a
    draw of one run twice makes no pair); no interval with fewer than 3 runs."""
    check_level(level, n_boot)
    n = len(ks)
    masks = pair_masks(ks)
    idx = numpy_generator(seed, "bootstrap").integers(0, n, (n_boot, n)) if n >= 3 else None
    q = [(1 - level) / 2, (1 + level) / 2]
    out = {}
    for group, mask in masks.items():
        values = J[mask]
        row = {"mean": float(values.mean()) if values.size else math.nan, "n_pairs": int(values.size),
               "ci": (math.nan, math.nan)}
        if idx is not None and values.size:
            a, b = idx[:, :, None], idx[:, None, :]
            drawn = np.triu(np.ones((n, n), bool), 1)[None] & (a != b) & (mask | mask.T)[a, b]
            sums = np.where(drawn, J[a, b], 0.0).sum((1, 2))
            counts = drawn.sum((1, 2))
            with np.errstate(invalid="ignore", divide="ignore"):
                reps = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
            lo, hi, _ = quantiles(reps, q)
            row["ci"] = (lo, hi)
        out[group] = row
    return out


@dataclass
class EdgeOverlap:
    """The sweep's edge circuits at tau: per run (`runs`), per pair (`pairs`), the mean overlap per group with its
    interval (`overlap`), the share of runs whose routing head's edges form first (`share`, Wilson), and the runs
    left out with why (`left_out`: of everything; `not_compared`, `not_counted`: of the overlap, of the share)."""

    runs: pd.DataFrame
    pairs: pd.DataFrame
    overlap: dict
    n_first: int
    n_strict: int
    n_counted: int
    share: float
    share_ci: tuple[float, float]
    level: float
    population: str
    left_out: dict[str, str] = field(default_factory=dict)
    not_compared: dict[str, str] = field(default_factory=dict)
    not_counted: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    command: str = COMMAND  # what fills the caches, with the sweep's folder
    same_k: str = "same K"  # the label of the pairs at the same K, naming what they differ in

    @property
    def empty(self) -> bool:
        """No run has its edges cached."""
        return self.runs.empty

    def lines(self) -> list[str]:
        """The summary, a few lines of text (`interp analyze SWEEP --only edges`, the sweep report)."""
        if self.empty:
            return [f"no run has the edges analysis cached (run: {self.command})"]
        methods = ", ".join(sorted(set(self.runs["method"])))
        sizes = self.runs["size"].dropna()
        out = [f"edges ({methods}) cached in {len(self.runs)} run(s); circuit at tau: "
               + (f"{int(sizes.min())}{'' if sizes.min() == sizes.max() else f'-{int(sizes.max())}'} edges" if len(sizes)
                  else "undefined in every run")]
        groups = []
        for group in GROUPS:
            row = self.overlap[group]
            if row["n_pairs"]:
                text = self.same_k if group == "same_k" else GROUP_TEXT[group]
                groups.append(f"{text} {fmt(row['mean'], 2)} {ci_str(row['ci'], 2)} ({row['n_pairs']} pairs)")
        out.append(f"circuit overlap at tau (Jaccard, mean, {self.level:.0%} CI resampling runs): "
                   + ("; ".join(groups) if groups else "needs 2 runs with a circuit at tau"))
        who = "circuit edges" if self.population == "circuit" else "edges"
        out.append(f"routing head's edges first to form (earliest carried onset among the {who}; a tie counts): "
                   + (f"{self.n_first} of {self.n_counted} runs ({self.share:.0%}, {self.level:.0%} CI "
                      f"{ci_str(self.share_ci, 2)}, Wilson); strictly first in {self.n_strict}"
                      if self.n_counted else "no run can be counted"))
        for what, runs in (("left out", self.left_out), ("not in the overlap", self.not_compared),
                           ("not in the share", self.not_counted)):
            by_why: dict[str, list[str]] = {}  # one line per reason, naming its runs
            for name, why in runs.items():
                by_why.setdefault(why, []).append(name)
            out.extend(f"  {what}: {', '.join(names)}: {why}" for why, names in by_why.items())
        return out + self.notes

    def to_dict(self) -> dict:
        runs = self.runs.assign(circuit=[sorted(c) for c in self.runs["circuit"]]) if not self.empty else self.runs
        return jsonable({"runs": runs.to_dict(orient="records"), "pairs": self.pairs.to_dict(orient="records"),
                         "overlap": self.overlap, "n_first": self.n_first, "n_strict": self.n_strict,
                         "n_counted": self.n_counted, "share": self.share, "share_ci": list(self.share_ci),
                         "level": self.level, "population": self.population, "left_out": self.left_out,
                         "not_compared": self.not_compared, "not_counted": self.not_counted, "notes": self.notes})


def summarise(records: list[dict], left_out: dict[str, str] | None = None, level: float = 0.95, n_boot: int = N_BOOT,
              seed: int = 0, population: str = "circuit", command: str = COMMAND) -> EdgeOverlap:
    """The overlap and the share from the runs' records (`run_record`)."""
    check_level(level, n_boot)
    runs = pd.DataFrame(records, columns=None if records else ["run", "k", "seed", "method", "size", "circuit"])
    not_compared = {r["run"]: r.get("why_undefined") or (f"no circuit at step {r['tau_step']} (nearest tau): the "
                                                         f"faithfulness target is not reached or clean and corrupted "
                                                         f"LD are within 0.1 nats") for r in records if r["size"] is None}
    compared = [r for r in records if r["size"] is not None]
    n = len(compared)
    J = np.full((n, n), np.nan)
    for i in range(n):
        for j in range(n):
            J[i, j] = jaccard(compared[i]["circuit"], compared[j]["circuit"])
    ks = np.array([float(r["k"]) for r in compared], float)
    overlap = mean_pairs(J, ks, n_boot, level, seed)
    pairs = pd.DataFrame([{"run_a": compared[i]["run"], "run_b": compared[j]["run"], "k_a": compared[i]["k"],
                           "k_b": compared[j]["k"], "jaccard": J[i, j]} for i in range(n) for j in range(i + 1, n)],
                         columns=["run_a", "run_b", "k_a", "k_b", "jaccard"])
    counted = [r for r in records if r["routing_first"] is not None]
    not_counted = {r["run"]: r["why"] for r in records if r["routing_first"] is None}
    n_first, n_strict = sum(r["routing_first"] for r in counted), sum(r["strictly_first"] for r in counted)
    notes = []
    if records and runs["method"].nunique() > 1:
        notes.append("the runs' edges were scored by different methods: " + ", ".join(sorted(set(runs["method"]))))
    partial = [r["run"] for r in records if r["n_checkpoints"] and r["steps_cached"] < r["n_checkpoints"]]
    if partial:
        notes.append(f"edges cached at only some checkpoints (onsets from those): {', '.join(partial)}")
    if 0 < n < 3:
        notes.append("no interval on the overlap: it needs 3 or more runs with a circuit at tau")
    varied = varied_within_k(compared)
    return EdgeOverlap(runs=runs, pairs=pairs, overlap=overlap, n_first=int(n_first), n_strict=int(n_strict),
                       n_counted=len(counted), share=n_first / len(counted) if counted else math.nan,
                       share_ci=wilson(int(n_first), len(counted), level), level=level, population=population,
                       left_out=dict(left_out or {}), not_compared=not_compared, not_counted=not_counted, notes=notes,
                       command=command, same_k="same K" + (f", across {', '.join(varied)}" if varied else ""))


def cached_edges(run, options: dict | None = None) -> dict | None:
    """The run's cached edges tables ({"edges", "edges_curve"}) under the parameters of `options` (the defaults
    when none), else under whichever have the most cached steps; None when there are none. Never computes."""
    from interp.analysis.edges import cached

    tables, _ = cached(run, options=options)
    if not all(name in tables and not tables[name].empty for name in ("edges", "edges_curve")):
        return None
    return tables


def edge_overlap(sweep, table: pd.DataFrame | None = None, options: dict | None = None, level: float = 0.95,
                 n_boot: int = N_BOOT, seed: int = 0, population: str = "circuit") -> EdgeOverlap:
    """The sweep's (or fork family's) edge overlap at tau and routing-first share, read from the runs' caches
    (`table`: `sweep.table()`, with the circuit columns when it has them)."""
    from interp.analysis.cache import ResultCache
    from interp.analysis.suite import routing_head_of
    from interp.transition import tau_or_none

    if population not in POPULATIONS:
        raise InterpError(f"unknown population {population!r}; allowed: {', '.join(POPULATIONS)}")
    check_level(level, n_boot)
    table = sweep.table() if table is None else table
    where = getattr(sweep, "path", None)  # (a stand-in that only opens its runs by name has neither)
    command = COMMAND if where is None else COMMAND.replace("SWEEP", str(where))
    points = {}  # each run's values besides K (a family's fork step, arm, seed): what the pairs at one K differ in
    try:
        points = {name: {k: (v if isinstance(v, (int, float, str)) else getattr(v, "label", str(v)))
                         for k, v in values.items() if k not in ("k", "task.k")}
                  for name, _, values in sweep.points()} if hasattr(sweep, "points") else {}
    except InterpError:
        pass
    records, left_out = [], {}
    for r in table.to_dict("records"):
        name = r["run"]
        if r["status"] != "done":
            left_out[name] = f"the run is {r['status']}"
            continue
        if pd.notna(r.get("censored_tau_half")) and bool(r.get("censored_tau_half")):
            left_out[name] = "censored: it never reached tau_half, so it has no circuit at tau"
            continue
        run = sweep.run(name)
        tables = cached_edges(run, options)
        tau = tau_or_none(run)
        if tables is None:
            left_out[name] = f"no edges cached (run: {command})"
            continue
        if tau is None:
            left_out[name] = "no tau_half"
            continue
        head = r.get("routing_head")
        if not isinstance(head, str):
            found = routing_head_of(run, ResultCache(run), compute=False)
            head = found[0] if found else None
        records.append(run_record(name, tables, tau, r.get("k", math.nan), r.get("seed", math.nan), head, population,
                                  len(run.steps), command, points.get(name)))
    return summarise(records, left_out, level, n_boot, seed, population, command)
