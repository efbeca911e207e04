"""`interp.open(path)` (`interp.collections.folders`): a Run, a Sweep or a ForkFamily by the file
that marks the folder, and the run's own one-line error for a folder that is none of them;
`interp analyze FAMILY` analyses every finished fork as `interp analyze FORK` does each.

The fixture is a tiny parent that snaps (the small model of tests/integration/test_analyze_sweep.py
at K = 3) and its family forked at tau/2 under continue and full_batch, trained to the snap
(about 25 s on 2 CPU threads): both forks reach tau_half, so neither is censored.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import interp
from interp.cli import main
from interp.collections.folders import discover
from interp.errors import InterpError
from interp.forks.arms import parse_arms
from interp.forks.family import ForkFamily
from interp.presets import preset
from interp.runs import Run
from interp.sweeps.fits import jsonable
from interp.sweeps.sweep import Sweep, SweepSpec
from interp.train import train
from tests.helpers import cli_json, copy_run, small_spec


@pytest.fixture(scope="module")
def family(tmp_path_factory) -> ForkFamily:
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("open")
    spec = preset("tiny").override(k=3, n_bases=24, n_layers=2, n_heads=2, d_model=32, d_head=16, d_mlp=64,
                                   batch_size=16, lr=0.003, eval_every=10, eval_size=64, checkpoint_every=50,
                                   steps=400, stop_after_snap=30)
    parent = Run.create(root / "parent", spec)
    train(parent, progress=False)
    family = ForkFamily.create(Run.open(root / "parent"), ["tau/2"], parse_arms("continue,full_batch"), [0], 300,
                               root / "family")
    outcome = family.train(workers=1, threads=1, progress=False)
    assert {r["state"] for r in outcome.results} == {"done"}, outcome.results
    table = family.table()
    assert table["tau_half"].notna().all() and not table["censored_tau_half"].any(), table
    return family


@pytest.mark.slow  # its family fixture trains for 7 s; test_a_folder_that_is_none_of_them_is_one_line stays
def test_open_gives_a_run_a_sweep_or_a_family(family, tmp_path):
    parent = interp.open(family.parent.path)
    assert isinstance(parent, Run) and parent.path == family.parent.path
    fork = interp.open(family.path / "at50-continue-s0")
    assert isinstance(fork, Run) and fork.fork["arm"] == "continue"  # a fork is a run
    opened = interp.open(family.path)
    assert isinstance(opened, ForkFamily) and opened.design == family.design
    assert opened.table().equals(family.table())
    sweep = Sweep.create(tmp_path / "s", SweepSpec(base=small_spec(), grid=(("seed", (0, 1)),)))
    again = interp.open(str(sweep.path))
    assert isinstance(again, Sweep) and again.spec == sweep.spec and again.counts()["not started"] == 2
    # the family shares the collection's ways of reading its points
    assert opened.counts()["done"] == 2 and [r.path.name for r in opened.runs] == [n for n, _, _ in opened.points()]
    assert opened.state_of("at50-full_batch-s0") == ("done", None)
    with pytest.raises(InterpError, match="'nope' is not a point of the fork family"):
        opened.examine("nope")


def test_a_folder_that_is_none_of_them_is_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x")
    for path, says in ((tmp_path / "empty", f"{tmp_path / 'empty'} is not a run folder (it has no run.json)"),
                       (tmp_path / "missing", f"no run folder at {tmp_path / 'missing'}"),
                       (tmp_path / "file", f"{tmp_path / 'file'} is a file, not a run folder")):
        with pytest.raises(InterpError) as caught:
            interp.open(path)
        assert str(caught.value) == says
    for marker, kind in (("sweep.json", "sweep"), ("forks.json", "fork family")):
        (tmp_path / kind).mkdir()
        (tmp_path / kind / marker).write_text("{")
        with pytest.raises(InterpError, match=f"{marker} is not valid JSON"):
            interp.open(tmp_path / kind)
    for argv, says in ((["analyze", str(tmp_path / "empty")], "is not a run folder (it has no run.json)"),
                       (["report", str(tmp_path / "sweep"), "-o", str(tmp_path / "r.html")], "is not valid JSON"),
                       (["mechanisms", str(tmp_path / "fork family")], "is not valid JSON")):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("interp: error:") and says in err[0], (argv, err)


@pytest.mark.slow  # its family fixture trains for 7 s; test_a_folder_that_is_none_of_them_is_one_line stays
def test_discover_lists_runs_and_families(family):
    found = discover(family.path.parent)
    assert [Path(s["path"]).name for s in found.runs] == ["parent"] and not found.broken
    assert found.collections == [{"path": str(family.path), "kind": "fork family", "forks": 2, "done": 2,
                                  "parent": str(family.parent.path), "damaged": 0, "damaged_runs": {}}]
    with pytest.raises(InterpError, match="no folder at"):
        discover(family.path / "nope")


@pytest.mark.slow  # its family fixture trains for 7 s; test_a_folder_that_is_none_of_them_is_one_line stays
def test_analyze_family_gives_each_fork_the_findings_of_analyze_run(family, tmp_path, capsys):
    torch.set_num_threads(1)  # as the executor's one thread per run: the same sums
    swept = copy_run(family.path, tmp_path / "swept")
    alone = copy_run(family.path, tmp_path / "alone")
    got = cli_json(capsys, ["analyze", str(swept), "--only", "sensitivity", "--json", "--workers", "1",
                         "--threads-per-run", "1"])
    assert got["skipped"] == {} and [r["name"] for r in got["runs"]] == ["at50-continue-s0", "at50-full_batch-s0"]
    assert all(r["state"] == "done" and r["computed"] > 0 for r in got["runs"])
    table = {r["run"]: r for r in got["table"]}
    for result in got["runs"]:
        own = cli_json(capsys, ["analyze", str(alone / result["name"]), "--only", "sensitivity", "--json"])
        assert jsonable(own["findings"]) == jsonable(result["findings"]), result["name"]
        row = table[result["name"]]
        assert row["routing_head"] == result["findings"]["routing_head"] and row["arm"] in ("continue", "full_batch")
    assert "lead_exponent" in got["not_applicable"]  # one K: the circuit fits say what they need
    capsys.readouterr()
    assert main(["analyze", str(swept), "--only", "sensitivity", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{swept}: 2 run(s) analysed (0 computed, ") and "at50-continue-s0" in out
