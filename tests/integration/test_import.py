"""`interp import` (issue 49, docs/import.md): runs made elsewhere, in each of the three formats, written by the
fixture functions of tests/synass_fixtures.py from the formats' keys (a small model trained on the data the
author's generator draws), import, evaluate, analyze and fork; the eta-sweep folder is a sweep that `interp scaling`
fits; the data check refuses a config with another seed; every bad input is one line, exit 2, nothing written to
the source (its files and modification times) and no half-written output. The demo's round trip through the
author's format is here too (its analysis tables bit for bit: tests/e2e/test_import_round_trip.py)."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from interp.imports.synass_data import SynassData
from interp.run_states import kept_state, kept_steps
from interp.runs import Run
from tests.helpers import DEMO, copy_run, run_main
from tests.synass_fixtures import trained, write_eta, write_main, write_series

DATA = SynassData(seed=7, n_unique_b=24, k=4, enforce_unique_a_first_char_per_b=True, split_by_base=True, version=4)


def state_of(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `folder`: its bytes and modification time (the source must keep both)."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def author(tmp_path_factory):
    """(the interp run the fixtures were written from, the main-pipeline folder, the series folder)."""
    root = tmp_path_factory.mktemp("author")
    run = trained(root / "trained", DATA, seed=0, steps=300)
    return run, write_main(run, DATA, root / "outputs" / "landauer_tiny"), write_series(run, root / "series", DATA, 0)


@pytest.fixture(scope="module")
def imported(author, tmp_path_factory):
    _, main, _ = author
    out = tmp_path_factory.mktemp("imported") / "run"
    from interp.collections.imports import import_run

    import_run(main, out, progress=False)
    return Run.open(out)


def _one_line(code: int, out: str, err: str, fragment: str) -> None:
    assert code == 2 and not out, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and fragment in lines[0], err


# ---------------------------------------------------------------------------- the main pipeline
def test_the_main_pipeline_imports_with_its_weights_states_and_provenance(author, imported):
    run, main, _ = author
    assert imported.steps == run.steps and imported.spec.model.n_ctx == 32 and imported.spec.task.source == "tables"
    for step in run.steps:
        mine, theirs = imported.state_dict(step), run.state_dict(step)
        assert mine.keys() == theirs.keys() and all(torch.equal(mine[n], theirs[n]) for n in theirs)
    assert torch.equal(imported.task.tokens, run.task.tokens)
    block = imported.imported
    assert block["format"] == "synass-main" and block["path"] == os.path.abspath(main)
    files = {p.relative_to(main).as_posix() for p in main.rglob("*") if p.is_file()}
    assert set(block["files"]) == files  # every source file read is hashed
    assert block["config"] == yaml.safe_load((main / "config.yaml").read_text())  # as the author wrote it
    assert block["data_check"]["verdict"] == "verified" and block["log"] == "rebuilt"
    assert kept_steps(imported) == run.steps  # an optimizer.pt at every checkpoint
    for step in (100, 300):  # AdamW's moments come across exactly
        mine, theirs = kept_state(imported, step).optimizer["state"], kept_state(run, step).optimizer["state"]
        assert all(torch.equal(mine[i]["exp_avg_sq"], theirs[i]["exp_avg_sq"]) for i in theirs)
    rows = imported.metric_rows()
    assert [r["step"] for r in rows] == run.steps and all(math.isfinite(r["loss_cand"]) for r in rows)
    history = json.loads((main / "training_history.json").read_text())
    at = history["steps"].index(200)
    assert rows[2]["train_loss_first"] == history["first_target_loss"][at]  # the author's column, at his step
    assert (imported.path / "source_history.jsonl").exists() and "grad_norm" not in rows[1]


def test_an_imported_run_shows_where_it_came_from_and_analyzes(imported, capsys):
    code, out, _ = run_main(["show", str(imported.path)], capsys)
    assert code == 0 and f"imported  from {imported.imported['path']} (synass-main)" in out
    assert "known only to the 100 steps between checkpoints" in out and "segment" not in out
    card = Run.open(imported.path)._repr_html_()  # the notebook card
    assert "imported" in card and "synass-main" in card
    code, out, err = run_main(["analyze", str(imported.path), "--only", "sensitivity,attention"], capsys)
    assert code == 0, err
    model = Run.open(imported.path).model(200)
    assert type(model).__name__ in ("HookedTransformer", "TransformerBridge") and model.cfg.n_ctx == 32
    code, out, err = run_main(["train", "--resume", "--out", str(imported.path), "--steps", "400"], capsys)
    assert code == 2 and "not continued with --resume; fork it instead" in err


def test_every_command_works_on_an_imported_run(imported, tmp_path, capsys):
    """timeline, report (its summary says where the run came from; the dissipation it cannot have is named as not
    recorded), mechanisms, reconcile and export to TensorBoard, as on any run."""
    run = copy_run(imported.path, tmp_path / "run")
    for argv in (["timeline", str(run), "-o", str(tmp_path / "t.html"), "--quiet"],
                 ["report", str(run), "-o", str(tmp_path / "r.html"), "--quiet"],
                 ["mechanisms", str(run)], ["reconcile", str(run)],
                 ["export", str(run), "--to", "tensorboard", "--out", str(tmp_path / "tb")]):
        code, _, err = run_main(argv, capsys)
        assert code == 0, (argv, err[-2000:])
    page = (tmp_path / "r.html").read_text()
    assert "imported" in page and "synass-main" in page and "not recorded: this run was imported" in page


def test_forks_of_an_imported_run_start_from_its_optimizer_state(imported, tmp_path, capsys):
    out = tmp_path / "fork"
    code, _, err = run_main(["fork", str(imported.path), "--at", "200", "--arm", "minibatch", "--steps", "20",
                             "--out", str(out), "--quiet"], capsys)
    assert code == 0, err
    assert "continues a run trained elsewhere (synass-main" in err and "not its exact continuation" in err
    fork = Run.open(out)
    assert fork.steps[0] == 200 and fork.steps[-1] == 220 and fork.spec.model.n_ctx == 32
    mine, theirs = fork.state_dict(200), imported.state_dict(200)
    assert all(torch.equal(mine[n], theirs[n]) for n in theirs)
    assert torch.equal(fork.task.tokens, imported.task.tokens)


def test_the_data_check_refuses_another_seed_and_accepts_the_true_one(author, tmp_path, capsys):
    _, main, _ = author
    wrong = Path(shutil.copytree(main, tmp_path / "wrong"))
    config = yaml.safe_load((wrong / "config.yaml").read_text())
    config["experiment"]["seed"] = 8
    (wrong / "config.yaml").write_text(yaml.safe_dump(config))
    before = state_of(wrong)
    code, out, err = run_main(["import", str(wrong), "--out", str(tmp_path / "no"), "--quiet"], capsys)
    _one_line(code, out, err, "do not fit the run")
    assert "logged loss" in err and "accuracy" in err and "other data" in err
    assert not (tmp_path / "no").exists() and state_of(wrong) == before
    assert not [p for p in tmp_path.iterdir() if ".importing-" in p.name]


def test_importing_again_changes_nothing_and_a_changed_source_needs_replace(author, tmp_path, capsys):
    _, main, _ = author
    src = Path(shutil.copytree(main, tmp_path / "src"))
    out = tmp_path / "run"
    assert run_main(["import", str(src), "--out", str(out), "--quiet"], capsys)[0] == 0
    before = state_of(out)
    code, text, _ = run_main(["import", str(src), "--out", str(out), "--quiet"], capsys)
    assert code == 0 and "nothing changed" in text and state_of(out) == before
    meta = src / "checkpoints" / "step_000300" / "metadata.json"
    meta.write_text(meta.read_text().replace('"step"', '"step" '))
    code, text, err = run_main(["import", str(src), "--out", str(out), "--quiet"], capsys)
    _one_line(code, text, err, "changed since it was imported")
    assert state_of(out) == before
    code, text, err = run_main(["import", str(src), "--out", str(out), "--quiet", "--replace"], capsys)
    assert code == 0, err
    import hashlib

    # re-imported: the changed file's hash is the one recorded now
    assert Run.open(out).imported["files"]["checkpoints/step_000300/metadata.json"] == \
        hashlib.sha256(meta.read_bytes()).hexdigest()
    assert "nothing changed" not in text and state_of(out) != before


# ---------------------------------------------------------------------------- the other formats
def test_a_transformerlens_series_with_a_spec_file_imports_and_evaluates(author, tmp_path, capsys):
    run, _, series = author
    before = state_of(series)
    out = tmp_path / "series"
    code, text, err = run_main(["import", str(series), "--out", str(out), "--quiet"], capsys)
    assert code == 0, err
    assert "a TransformerLens state_dict series" in text
    got = Run.open(out)
    assert got.steps == run.steps and torch.equal(got.task.tokens, run.task.tokens)
    assert all(torch.equal(got.state_dict(300)[n], run.state_dict(300)[n]) for n in run.state_dict(300))
    code, text, err = run_main(["evaluate", str(out), "--quiet"], capsys)
    assert code == 0 and "rebuilt from 4 checkpoints" in text
    assert state_of(series) == before


def test_an_eta_sweep_folder_imports_as_a_sweep_that_scaling_fits(tmp_path, capsys):
    results = tmp_path / "results"
    for k in (3, 4, 6):  # three values of D = 24 K
        data = SynassData(seed=1_000_003 * 0 + k, n_unique_b=24, k=k, enforce_unique_a_first_char_per_b=True,
                          split_by_base=True, version=5)
        write_eta(trained(tmp_path / f"t{k}", data, seed=0, steps=300), results, 0.003, k, 0, 24)
    before = state_of(results)
    out = tmp_path / "sweep"
    code, text, err = run_main(["import", str(results), "--out", str(out), "--quiet"], capsys)
    assert code == 0, err
    from interp.sweeps.sweep import Sweep

    table = Sweep.open(out).table()
    assert sorted(table["task.k"]) == [3, 4, 6] and set(table["status"]) == {"done"}
    run = Run.open(out / "k4-nb24-s0")
    assert run.imported["format"] == "synass-eta" and run.imported["data"]["seed"] == 4  # the author's data seed
    assert run.metric_rows()[0]["candidate_loss"] is not None  # the author's column under his name
    code, text, err = run_main(["scaling", str(out)], capsys)
    assert code == 0 and "scaling    delta =" in text, text + err
    # the phase measures read the author's dense log: his outcome beside ours, Q from his held-out gradient (1.0
    # every 50 steps here, so the trapezoid gives lr x the window's length)
    from interp.sweeps.phase import phase_table

    phase = phase_table(Sweep.open(out))
    assert set(phase["source_outcome"]) == {"inconclusive"} and set(phase["outcome"]) <= {"inconclusive",
                                                                                          "transitioned", "stuck"}
    assert all("held-out" in s for s in phase["q_source"])
    windows = phase.dropna(subset=["t1_dz", "t2_dz"])
    for r in windows.to_dict("records"):
        assert r["Q_dz"] == pytest.approx(0.003 * (r["t2_dz"] - r["t1_dz"]))
    code, text, err = run_main(["scaling", str(out), "--q"], capsys)
    assert code == 0 and "the author's held-out |g|^2" in text, text + err
    assert state_of(results) == before


# ---------------------------------------------------------------------------- bad input
class Evil:
    def __reduce__(self):
        return (os.system, ("echo imported code ran",))


def _damage(src: Path, case: str, tmp_path: Path) -> tuple[Path, list[str]]:
    step = src / "checkpoints" / "step_000100"
    extra: list[str] = []
    if case == "missing model.pt":
        (step / "model.pt").unlink()
    elif case == "truncated model.pt":
        data = (step / "model.pt").read_bytes()
        (step / "model.pt").write_bytes(data[: len(data) // 2])
    elif case == "mixed shapes":
        state = torch.load(step / "model.pt", weights_only=True)
        state["blocks.0.mlp.W_in"] = torch.zeros(32, 65)
        torch.save(state, step / "model.pt")
    elif case in ("a field interp cannot express", "a schedule interp cannot express"):
        config = yaml.safe_load((src / "config.yaml").read_text())
        if case.startswith("a field"):
            config["data"]["curriculum"] = "reverse"
        else:
            config["training"]["scheduler"] = "linear"
        (src / "config.yaml").write_text(yaml.safe_dump(config))
    elif case == "a pickle with code":
        torch.save({"embed.W_E": Evil()}, step / "model.pt")
    elif case == "unknown format":
        shutil.rmtree(src)
        src.mkdir()
        (src / "notes.txt").write_text("hello")
    elif case == "an output folder that exists":
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "mine.txt").write_text("keep me")
    return src, extra


@pytest.mark.parametrize("case,fragment", [
    ("missing model.pt", "has no model.pt"),
    ("truncated model.pt", "is not a readable torch file"),
    ("mixed shapes", "blocks.0.mlp.W_in has shape (32, 65)"),
    ("a field interp cannot express", "interp cannot express data.curriculum"),
    ("a schedule interp cannot express", "scheduler 'linear' cannot be expressed"),
    ("a pickle with code", "would need code to load (it pickles posix.system)"),
    ("unknown format", "unknown format"),
    ("an output folder that exists", "exists and is not an imported run"),
])
def test_bad_input_is_one_line_and_touches_nothing(author, tmp_path, capsys, case, fragment):
    _, main, _ = author
    src, _ = _damage(Path(shutil.copytree(main, tmp_path / "src")), case, tmp_path)
    before, out = state_of(src), tmp_path / "out"
    outside = state_of(out) if out.exists() else None
    code, text, err = run_main(["import", str(src), "--out", str(out), "--quiet"], capsys)
    _one_line(code, text, err, fragment)
    assert state_of(src) == before
    assert (state_of(out) if out.exists() else None) == outside
    assert not [p for p in tmp_path.iterdir() if ".importing-" in p.name]


def test_an_interp_run_is_not_imported(imported, tmp_path, capsys):
    _one_line(*run_main(["import", str(DEMO), "--out", str(tmp_path / "x")], capsys), "is itself an interp run")
    _one_line(*run_main(["import", str(imported.path), "--out", str(tmp_path / "x")], capsys), "is itself an interp run")
    assert not (tmp_path / "x").exists()


def test_numpy_arrays_are_read_only_through_the_allowlist(tmp_path):
    import numpy as np

    from interp.errors import InterpError
    from interp.imports.safe_load import load_torch

    path = tmp_path / "rng.pt"
    torch.save({"rng": np.random.RandomState(0).get_state(), "w": torch.ones(2)}, path)
    with pytest.raises(InterpError, match="would need code to load .*numpy"):
        load_torch(path, "an RNG state")
    got = load_torch(path, "an RNG state", allow_numpy=True)
    assert got["rng"][0] == "MT19937" and got["rng"][1].dtype == np.uint32


# ---------------------------------------------------------------------------- the round trip
@pytest.mark.slow  # 11 s; tests/e2e/test_import_round_trip.py goes further (the analysis tables)
def test_the_demo_exported_to_the_authors_format_imports_back_the_same(tmp_path, capsys):
    """Weights (the checkpoint files, so their hashes), spec, task and metrics log: the same after the round trip;
    the exported model.pt are plain tensors with TransformerLens 2's buffers, as the author's are."""
    demo = copy_run(DEMO, tmp_path / "demo")
    code, _, err = run_main(["export", str(demo), "--to", "synass", str(tmp_path / "synass"), "--json"], capsys)
    assert code == 0, err
    state = torch.load(tmp_path / "synass" / "checkpoints" / "step_000500" / "model.pt", weights_only=True)
    assert state["blocks.0.attn.mask"].shape == (16, 16) and float(state["blocks.1.attn.IGNORE"]) == -math.inf
    assert (tmp_path / "synass" / "checkpoints" / "step_000500" / "optimizer.pt").exists()
    code, _, err = run_main(["import", str(tmp_path / "synass"), "--out", str(tmp_path / "back"), "--quiet"], capsys)
    assert code == 0, err
    a, b = Run.open(demo), Run.open(tmp_path / "back")
    assert a.checkpoint_hashes() == b.checkpoint_hashes() and a.spec == b.spec
    assert a.info["task_sha256"] == b.info["task_sha256"] and a.metric_rows() == b.metric_rows()
    assert kept_steps(b) == [500]
    mine, theirs = kept_state(b, 500).optimizer["state"], kept_state(a, 500).optimizer["state"]
    assert all(torch.equal(mine[i]["exp_avg"], theirs[i]["exp_avg"]) for i in theirs)
    _one_line(*run_main(["export", str(demo), "--to", "synass", str(tmp_path / "synass")], capsys), "exists")
