"""The `interp` command: bad input is one clear line and exit status 2; good input works."""

import re
import json

import pytest

from interp.cli import main
from interp.runs import Run
from interp.train import train
from tests.helpers import DEMO, copy_run, interp_cli, small_spec

TINY_FLAGS = ["--k", "4", "--n-bases", "24", "--n-layers", "1", "--d-model", "16", "--d-head", "8",
              "--d-mlp", "32", "--steps", "6", "--eval-every", "3", "--eval-size", "16",
              "--checkpoint-every", "3", "--batch-size", "8", "--quiet"]


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["train", "--k", "0"], "k must be >= 1"),
        (["train", "--k", "40"], "distinct first characters"),
        (["train", "--preset", "huge"], "invalid choice: 'huge'"),
        (["train", "--k", "ten"], "invalid int value: 'ten'"),
        (["train", "--lr", "-1"], "lr must be > 0"),
        (["show", "no/such/run"], "no run folder at no/such/run"),
        (["ls", "no/such/folder"], "no folder at no/such/folder"),
        (["analyze", "no/such/run"], "no run folder at no/such/run"),
    ],
)
def test_bad_input_is_one_line_and_status_2(tmp_path, args, fragment):
    if args[0] == "train":
        args = args + ["--out", str(tmp_path / "run")]
    result = interp_cli(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert fragment in lines[0] and "Traceback" not in result.stderr
    assert not (tmp_path / "run" / "run.json").exists()  # nothing half-made


def test_existing_run_is_not_overwritten(tmp_path, capsys):
    run = Run.create(tmp_path / "r", small_spec(steps=4, eval_every=2, checkpoint_every=2))
    train(run, progress=False)
    before = {p.name: p.read_bytes() for p in (run.path / "checkpoints").iterdir()}
    assert main(["train", "--out", str(run.path), *TINY_FLAGS]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert main(["train", "--resume", "--out", str(run.path), "--k", "7"]) == 2
    assert "only --steps may change" in capsys.readouterr().err
    after = {p.name: p.read_bytes() for p in (run.path / "checkpoints").iterdir()}
    assert before == after


def test_train_show_ls_and_resume(tmp_path, capsys):
    out = tmp_path / "runs" / "cli"
    assert main(["train", "--out", str(out), *TINY_FLAGS]) == 0
    run = Run.open(out)
    assert run.spec.task.k == 4 and run.spec.model.d_model == 16 and run.steps[-1] == 6
    assert main(["train", "--resume", "--out", str(out), "--steps", "9", "--quiet"]) == 0
    assert Run.open(out).steps[-1] == 9
    capsys.readouterr()
    assert main(["show", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["k"] == 4 and summary["last_step"] == 9 and summary["planned_steps"] == 9
    assert main(["show", str(out)]) == 0
    text = capsys.readouterr().out
    assert "tau_half" in text and "plateau" in text and "K=4" in text
    assert main(["ls", str(tmp_path / "runs")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and lines[1].startswith("cli ")


@pytest.mark.slow
def test_analyze_prints_findings_and_caches(tmp_path, capsys):
    run = copy_run(DEMO, tmp_path / "demo")
    assert main(["analyze", str(run), "--only", "sensitivity,ablation", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"routing head +L0H3 \(z-share", out) and re.search(r"zero-ablating L0H3 +candidate loss", out)
    assert main(["analyze", str(run), "--only", "sensitivity,ablation", "--json"]) == 0
    blob = json.loads(capsys.readouterr().out)
    assert blob["findings"]["routing_head"] == "L0H3"
    assert {"sensitivity", "ablation"} <= set(blob["tables"])
    assert main(["analyze", str(run), "--only", "sensitivity", "--quiet"]) == 0
    assert "0 computed" in capsys.readouterr().out  # everything came from the cache
    assert main(["analyze", str(run), "--only", "ablation", "--steps", "13"]) == 2
    assert "step 13 is not saved" in capsys.readouterr().err
    assert main(["analyze", str(run), "--only", "everything"]) == 2
    assert "unknown analysis everything" in capsys.readouterr().err
