"""The edges analysis on a sweep (interp.sweeps.edge_overlap): the Jaccard overlap of the runs' circuits at tau with
a bootstrap interval over runs, grouped by K; whether the routing head's edges form first, a share with a Wilson
interval; runs without cached edges named. Planted per-run edge tables with hand-computed values, then the same read
back through real run caches (copies of the demo with planted entries) and `interp analyze SWEEP --only edges`."""

import math
import sys

import numpy as np
import pandas as pd
import pytest

from interp.sweeps.circuit_fits import wilson
from interp.sweeps.edge_overlap import (
    edge_overlap,
    first_edge,
    head_edges,
    jaccard,
    mean_pairs,
    run_record,
    summarise,
)
from tests.helpers import DEMO, cli_json, copy_run

EDGES = ["embed->L0H3.v", "L0H3->MLP0", "MLP0->logits", "embed->L0H1.q", "L0H1->logits", "L1H0->logits"]


def planted(steps, rises: dict[str, int | None], circuits: dict[int, set | None], method: str = "eap-ig") -> dict:
    """An "edges" and an "edges_curve" table: each edge's |score| 0 before its rise step and 1 from it (None: never
    rises; its carried onset is then None), the circuit at each step as given (None: undefined, NaN faithfulness)."""
    rows, curve = [], []
    for step in steps:
        members = circuits.get(step) or set()
        for edge in EDGES:
            sender, receiver = edge.split("->")
            rise = rises.get(edge)
            rows.append({"step": step, "edge": edge, "sender": sender, "receiver": receiver,
                         "score": 1.0 if rise is not None and step >= rise else 0.0, "in_circuit": edge in members,
                         "method": method})
        size = None if circuits.get(step) is None else len(circuits[step])
        for n in range(len(EDGES) + 1):
            curve.append({"step": step, "n_edges": n, "faithfulness": math.nan if size is None else min(1.0, n / max(size, 1)),
                          "circuit": n == size, "target": 0.8})
    return {"edges": pd.DataFrame(rows), "edges_curve": pd.DataFrame(curve)}


STEPS = [0, 100, 200, 300, 400]
A, B, C = {"embed->L0H3.v", "L0H3->MLP0"}, {"embed->L0H3.v", "MLP0->logits"}, {"embed->L0H3.v", "L0H3->MLP0", "MLP0->logits"}


def test_jaccard_of_planted_circuits_at_tau_with_the_bootstrap_interval_over_runs():
    # circuits at the step nearest tau = 210 (200): J(A, B) = 1/3, J(A, C) = 2/3, J(B, C) = 2/3; mean 5/9
    records = [run_record(name, planted(STEPS, {}, {200: s, 300: set(EDGES)}), 210, k=k, seed=i, head="L0H3")
               for i, (name, s, k) in enumerate([("a", A, 3), ("b", B, 3), ("c", C, 10)])]
    assert [r["tau_step"] for r in records] == [200] * 3 and records[0]["circuit"] == frozenset(A)
    out = summarise(records)
    assert out.pairs["jaccard"].tolist() == pytest.approx([1 / 3, 2 / 3, 2 / 3])
    assert out.overlap["all"]["mean"] == pytest.approx(5 / 9) and out.overlap["all"]["n_pairs"] == 3
    # resampling 3 runs: of the 27 draws, 3 repeat one run (no pair); 6 draw a and b only (1/3), 12 draw c with one
    # other (2/3), 6 draw all three (5/9): the 2.5% and 97.5% quantiles are 1/3 and 2/3
    assert out.overlap["all"]["ci"] == pytest.approx((1 / 3, 2 / 3))
    # same K (3: a with b) and across K (3 with 10)
    assert out.overlap["same_k"]["mean"] == pytest.approx(1 / 3) and out.overlap["same_k"]["n_pairs"] == 1
    assert out.overlap["across_k"]["mean"] == pytest.approx(2 / 3) and out.overlap["across_k"]["n_pairs"] == 2
    # a same-K pair is drawn in 12 of 27 resamples, under half: no interval for it
    assert all(math.isnan(v) for v in out.overlap["same_k"]["ci"])
    assert summarise(records).overlap == out.overlap  # the same generator: the same interval


def test_identical_circuits_overlap_fully_and_two_runs_get_no_interval():
    J = np.ones((4, 4))
    got = mean_pairs(J, np.array([3.0, 3.0, 10.0, 10.0]))
    assert got["all"]["mean"] == 1.0 and got["all"]["ci"] == (1.0, 1.0) and got["across_k"]["n_pairs"] == 4
    two = mean_pairs(np.array([[1.0, 0.5], [0.5, 1.0]]), np.array([3.0, 3.0]))
    assert two["all"]["mean"] == 0.5 and all(math.isnan(v) for v in two["all"]["ci"])
    assert math.isnan(jaccard(frozenset(), frozenset())) and jaccard(frozenset("ab"), frozenset("bc")) == pytest.approx(1 / 3)


def test_wilson_interval_of_3_of_4_is_the_hand_value():
    # p = 0.75, z = 1.95996: centre (0.75 + z^2/8) / (1 + z^2/4) = 0.62753, half-width 0.32689
    lo, hi = wilson(3, 4, 0.95)
    assert (lo, hi) == pytest.approx((0.30064, 0.95441), abs=1e-5)


def test_the_routing_heads_edges_are_those_it_sends_or_that_feed_its_query_key_or_value():
    edges = pd.Series(["L0H3->MLP0", "embed->L0H3.v", "L0H3->L1H0.k", "embed->L0H1.q", "L0H30->logits", "MLP0->logits"])
    assert head_edges(edges, "L0H3").tolist() == [True, True, True, False, False, False]


def test_the_first_edge_rule_on_planted_onsets_with_ties_counted_and_named():
    from interp.analysis.edges import onsets

    circuit = {s: {"embed->L0H3.v", "L0H3->MLP0", "embed->L0H1.q"} for s in STEPS}
    # L0H3's edges rise at 100, L0H1's at 200: first, strictly
    rec = first_edge(onsets(planted(STEPS, {"embed->L0H3.v": 100, "L0H3->MLP0": 200, "embed->L0H1.q": 200},
                                     circuit)["edges"]), "L0H3")
    assert rec["routing_first"] and rec["strictly_first"] and rec["first_onset"] == 100
    assert rec["first_edges"] == ["embed->L0H3.v"]
    # a tie at 100 with a non-routing edge counts as first, but not strictly
    tied = first_edge(onsets(planted(STEPS, {"L0H3->MLP0": 100, "embed->L0H1.q": 100}, circuit)["edges"]), "L0H3")
    assert tied["routing_first"] and not tied["strictly_first"] and set(tied["first_edges"]) == {"L0H3->MLP0",
                                                                                              "embed->L0H1.q"}
    # another head's edge first: not first; an earlier edge never in the circuit does not count, unless all are asked
    late = planted(STEPS, {"embed->L0H3.v": 300, "embed->L0H1.q": 200, "L1H0->logits": 100}, circuit)["edges"]
    got = first_edge(onsets(late), "L0H3")
    assert got["routing_first"] is False and got["first_onset"] == 200 and got["routing_onset"] == 300
    assert first_edge(onsets(late), "L0H3", population="all")["first_edges"] == ["L1H0->logits"]
    # no routing head, or no circuit edge with an onset: undefined, with why
    assert first_edge(onsets(late), None)["routing_first"] is None
    flat = first_edge(onsets(planted(STEPS, {}, circuit)["edges"]), "L0H3")
    assert flat["routing_first"] is None and "no circuit edge has a carried onset" in flat["why"]


def test_the_share_of_runs_and_the_runs_left_out_are_named():
    circuit = {s: {"embed->L0H3.v", "embed->L0H1.q"} for s in STEPS}
    first, second = {"embed->L0H3.v": 100, "embed->L0H1.q": 200}, {"embed->L0H3.v": 200, "embed->L0H1.q": 100}
    records = [run_record(f"r{i}", planted(STEPS, rises, circuit), 200, k=3, seed=i, head=head)
               for i, (rises, head) in enumerate([(first, "L0H3"), (first, "L0H3"), (first, "L0H3"), (second, "L0H3"),
                                                  (first, None)])]
    records.append(run_record("undefined", planted(STEPS, first, {s: None for s in STEPS}), 200, k=3, head="L0H3"))
    out = summarise(records, {"missing": "no edges cached (run: interp analyze SWEEP --only edges)"})
    assert (out.n_first, out.n_counted, out.n_strict) == (3, 4, 3)
    assert out.share == 0.75 and out.share_ci == pytest.approx(wilson(3, 4, 0.95))
    assert set(out.not_counted) == {"r4", "undefined"} and "no routing head" in out.not_counted["r4"]
    assert set(out.not_compared) == {"undefined"} and out.overlap["all"]["n_pairs"] == 10
    text = "\n".join(out.lines())
    assert "3 of 4 runs (75%" in text and "left out: missing: no edges cached" in text and "circuit at tau: 2 edges" in text
    assert "not in the overlap: undefined: no circuit at step 200" in text
    assert "not in the share: undefined: no circuit edge" in text
    assert out.to_dict()["runs"][0]["circuit"] == sorted(circuit[0])


class _Family:
    """What `edge_overlap` asks of a sweep: its runs by name."""

    def __init__(self, folders):
        self.folders = folders

    def run(self, name):
        from interp.runs import Run

        return Run.open(self.folders[name])


def _plant(folder, circuits_at_tau: set, rises: dict, method: str = "eap-ig", params: dict | None = None):
    """Edges tables cached in a copy of the demo at every checkpoint (as `interp analyze RUN --only edges` leaves them)."""
    from interp.analysis import registry
    from interp.analysis.cache import ResultCache
    from interp.runs import Run

    run = Run.open(folder)
    entry = registry.get("edges")
    store = ResultCache(run)
    tables = planted(run.steps, rises, {s: circuits_at_tau for s in run.steps}, method)
    for step in run.steps:
        store.store(entry.cache_key(entry.params(params)), step,
                    {name: df[df["step"] == step].reset_index(drop=True) for name, df in tables.items()})


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    root = tmp_path_factory.mktemp("edge-family")
    folders = {name: copy_run(DEMO, root / name) for name in ("k10-s0", "k10-s1", "k20-s0", "bare")}
    rises = {"embed->L0H3.v": 400, "L0H3->MLP0": 900, "embed->L0H1.q": 900}
    _plant(folders["k10-s0"], A, rises)
    _plant(folders["k10-s1"], B, rises)
    _plant(folders["k20-s0"], C, {**rises, "embed->L0H3.v": 900, "MLP0->logits": 400}, "eap", {"method": "eap"})  # MLP0's first
    return folders


def test_the_overlap_is_read_from_the_runs_caches_and_runs_without_edges_are_named(family):
    table = pd.DataFrame([{"run": "k10-s0", "status": "done", "k": 10, "seed": 0, "routing_head": "L0H3"},
                          {"run": "k10-s1", "status": "done", "k": 10, "seed": 1, "routing_head": "L0H3"},
                          {"run": "k20-s0", "status": "done", "k": 20, "seed": 0, "routing_head": "L0H3"},
                          {"run": "bare", "status": "done", "k": 20, "seed": 1, "routing_head": None},
                          {"run": "late", "status": "running", "k": 20, "seed": 2, "routing_head": None}])
    before = {p: p.stat().st_mtime_ns for p in family["bare"].rglob("*")}
    out = edge_overlap(_Family(family), table)
    assert out.left_out == {"bare": "no edges cached (run: interp analyze SWEEP --only edges)",
                            "late": "the run is running"}
    assert {p: p.stat().st_mtime_ns for p in family["bare"].rglob("*")} == before  # read only: nothing computed
    runs = out.runs.set_index("run")
    assert runs["tau_step"].tolist() == [900] * 3  # the demo's tau_half is 925; its nearest checkpoint 900
    assert runs.loc["k20-s0", "method"] == "eap"  # cached under other parameters: read as the run report reads them
    assert out.overlap["all"]["mean"] == pytest.approx(5 / 9)
    assert out.overlap["same_k"]["mean"] == pytest.approx(1 / 3) and out.overlap["across_k"]["mean"] == pytest.approx(2 / 3)
    assert runs["routing_first"].tolist() == [True, True, False] and out.n_counted == 3
    assert any("different methods" in n for n in out.notes)


def test_the_module_and_the_cached_read_load_no_torch(family):
    import subprocess

    code = ("import sys; from interp.sweeps.edge_overlap import cached_edges, run_record, summarise; "
            "from interp.runs import Run; "
            f"t = cached_edges(Run.open({str(family['k10-s0'])!r})); assert t is not None and len(t['edges']); "
            "r = run_record('a', t, 925, head='L0H3'); assert r['tau_step'] == 900 and r['routing_first'], r; "
            "summarise([r, r, r]); assert 'torch' not in sys.modules, 'torch loaded'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_analyze_sweep_only_edges_caches_the_routing_head_and_prints_the_share_and_the_report_has_its_section(tmp_path, capsys):
    from interp.analysis.cache import ResultCache
    from interp.analysis.suite import routing_head_of
    from interp.cli import main
    from interp.report.sweep import write_sweep_report
    from interp.runs import Run
    from interp.sweeps.sweep import Sweep, SweepSpec

    sweep = Sweep.create(tmp_path / "sweep", SweepSpec(base=Run.open(DEMO).spec))
    (name, _, _), = sweep.points()
    folder = copy_run(DEMO, sweep.path / name)
    empty = write_sweep_report(sweep, tmp_path / "empty.html").read_text()
    assert "No run has the edges analysis cached; compute it with: interp analyze" in empty
    _plant(folder, A, {"embed->L0H3.v": 400, "embed->L0H1.q": 900})
    # read alone (the report's way), edges without the sensitivity give no head, and the command that gives it
    alone = edge_overlap(sweep)
    assert alone.not_counted == {name: f"no routing head (its sensitivity is not cached: interp analyze {sweep.path} "
                                       "--only edges caches it)"}  # the sweep's folder, never "SWEEP" (issue 43, 12)
    capsys.readouterr()
    # the edges are cached at every step; the routing head's sensitivity is computed at the last checkpoint, and cached
    assert main(["analyze", str(sweep.path), "--only", "edges", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "circuits by edges, across the runs:" in text and "edges (eap-ig) cached in 1 run(s)" in text
    assert "needs 2 runs with a circuit at tau" in text and "no routing head" not in text
    run = Run.open(folder)
    head = routing_head_of(run, ResultCache(run), compute=False)
    assert head is not None and head[1] == run.steps[-1]
    assert set(sensitivity_steps(run)) == {run.steps[-1]}  # one checkpoint, not the whole series
    got = cli_json(capsys, ["analyze", str(sweep.path), "--only", "edges", "--json"])
    assert got["runs"][0]["computed"] == 0  # the second call reads the head back
    edges = got["edges"]
    assert [r["run"] for r in edges["runs"]] == [name] and edges["runs"][0]["circuit"] == sorted(A)
    assert edges["runs"][0]["routing_head"] == head[0] and edges["n_counted"] == 1 and edges["not_counted"] == {}
    assert edges["n_first"] == int(head[0] == "L0H3")  # the planted first edge is L0H3's
    page = write_sweep_report(sweep, tmp_path / "report.html").read_text()
    assert 'id="edge-overlap"' in page and "embed-&gt;L0H3.v" in page


def sensitivity_steps(run) -> list[int]:
    """The steps whose sensitivity (default parameters) is in the run's cache."""
    from interp.analysis import registry
    from interp.analysis.cache import ResultCache

    entry = registry.get("sensitivity")
    table = ResultCache(run).cached(entry.cache_key(entry.params())).get("sensitivity")
    return [] if table is None else sorted(set(table["step"]))


def test_runs_left_out_for_one_reason_are_named_on_one_line():
    records = [run_record(f"r{i}", planted(STEPS, {"embed->L0H3.v": 100}, {s: A for s in STEPS}), 200, head=None)
               for i in range(3)]
    lines = summarise(records).lines()
    share = [line for line in lines if "not in the share" in line]
    assert share == ["  not in the share: r0, r1, r2: no routing head (its sensitivity is not cached: interp analyze "
                     "SWEEP --only edges caches it)"]


def test_analyze_run_only_edges_reads_the_routing_head_as_the_sweep_does(tiny_run, tmp_path, capsys, monkeypatch):
    """`interp analyze RUN --only edges`: whether the first edge to form is the routing head's needs the head; with no
    sensitivity chosen it is read as `interp analyze SWEEP --only edges` reads it (`suite.findings_routing_head`): its
    sensitivity at the last checkpoint computed and cached, then read back, nothing computed again."""
    from interp.analysis.cache import ResultCache
    from interp.analysis.suite import routing_head_of, run_suite
    from interp.runs import Run

    folder = copy_run(tiny_run(), tmp_path / "run", cache=False)
    run = Run.open(folder)
    head, _ = routing_head_of(run, ResultCache(run, enabled=False))  # what the command finds (nothing cached)
    monkeypatch.setitem(globals(), "EDGES", [f"{head}->logits", "embed->MLP0"])
    _plant(folder, set(EDGES), {f"{head}->logits": 2, "embed->MLP0": 10})  # the head's edge forms first
    assert sensitivity_steps(run) == []
    got = cli_json(capsys, ["analyze", str(folder), "--only", "edges", "--json"])
    assert got["findings"]["edges_first"][0] == [f"{head}->logits", 2] and got["findings"]["edges_routing_first"] is True
    assert sensitivity_steps(run) == [run.steps[-1]]  # one checkpoint, cached as the sweep caches it
    again = run_suite(run, only="edges", progress=False)
    assert again.cache_misses == 0 and again.routing_step == run.steps[-1]
    assert again.findings["edges_routing_first"] is True
    _plant(folder, set(EDGES), {f"{head}->logits": 10, "embed->MLP0": 2})  # another edge first
    assert run_suite(run, only="edges", progress=False).findings["edges_routing_first"] is False
