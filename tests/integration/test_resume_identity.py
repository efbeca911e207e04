"""Nothing silently wrong (issue 15): a resume continues only its own run, from intact files, and
writes nothing before everything is checked; an edited run.json is refused; stale temporaries
are cleaned; Ctrl-C, a NaN evaluation and a negative number each end in one clear line."""

import json
import os
import shutil
from pathlib import Path

import pytest

from interp.checkpoints import IDENTITY_KEY, read, serialize
from interp.cli import main
from interp.errors import InterpError
from interp.runs import MANIFEST_FILE, METRICS_FILE, RESUME_FILE, RUN_FILE, Run
from interp.spec import spec_sha256
from tests.helpers import DEMO, TINY_FLAGS, copy_run, garbage_line, interp_cli, snapshot

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def runs(tiny_run) -> dict[str, Path]:
    """Two 30-step runs of the same spec, seeds 0 and 1 (checkpoints at 0, 1, 2, 4, 8, 10, 20, 30)."""
    return {"r": tiny_run(), "r1": tiny_run(1)}


@pytest.fixture
def copy(runs, tmp_path) -> Path:
    return copy_run(runs["r"], tmp_path / "r")


def _main(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's usage errors
        return exc.code
    except KeyboardInterrupt:  # would end the whole test session
        pytest.fail("main() let a KeyboardInterrupt through")


def _refused(capsys, argv: list[str], *fragments: str) -> str:
    """Exit status 2 and one error line on stderr holding every fragment (after, at most, the
    "training ..." line of a run that got going)."""
    code = _main(argv)
    err = capsys.readouterr().err
    assert code == 2, err[-2000:]
    lines = err.strip().splitlines()
    assert "Traceback" not in err and (len(lines) == 1 or lines[:-1] == [lines[0]] and lines[0].startswith(
        "training Run(")), err[-2000:]
    assert all(f in lines[-1] for f in fragments), lines[-1]
    return lines[-1]


def _resume(folder: Path, steps: int = 33) -> list[str]:
    return ["train", "--resume", "--out", str(folder), "--steps", str(steps), "--quiet"]


def _rewrite_identity(path: Path, **changes) -> None:
    """Re-sign `path` (a resume state) with its identity changed (None: the key removed)."""
    tensors, meta = read(path, self_hashed=True)
    identity = json.loads(meta[IDENTITY_KEY])
    if changes.get("identity", 1) is None:
        del meta[IDENTITY_KEY]
    else:
        meta[IDENTITY_KEY] = json.dumps({**identity, **changes}, sort_keys=True)
    path.write_bytes(serialize(tensors, meta, self_hash=True))


# ---------------------------------------------------------------------------- 1: another run's resume state
def test_another_runs_resume_state_is_refused(copy, runs, capsys):
    shutil.copy(runs["r1"] / RESUME_FILE, copy / RESUME_FILE)
    before = snapshot(copy)
    _refused(capsys, _resume(copy), "resume.safetensors belongs to another run", "seed 1", "seed 0")
    assert snapshot(copy) == before  # run.json still plans 30 steps


@pytest.mark.parametrize("changes,fragment", [
    ({"spec_sha256": "0" * 64}, "its spec hash differs from"),
    ({"seed": 7}, "saved with seed 7"),
    ({"checkpoint_sha256": "0" * 64}, "its step 30 checkpoint hash differs"),
    ({"step": 20}, "its identity says step 20"),
])
def test_each_identity_field_is_checked(copy, capsys, changes, fragment):
    _rewrite_identity(copy / RESUME_FILE, **changes)
    before = snapshot(copy)
    _refused(capsys, _resume(copy), "resume.safetensors", fragment)
    assert snapshot(copy) == before
    with pytest.raises(InterpError, match=fragment):  # the library's own path (sweeps, `train(run)`) too
        Run.open(copy).load_resume()


def test_an_older_resume_state_is_tied_to_its_run_by_its_weights(copy, runs, capsys):
    """A state written before identities were recorded resumes only where its weights are the
    run's checkpoint at its step."""
    _rewrite_identity(copy / RESUME_FILE, identity=None)
    assert Run.open(copy).load_resume().identity is None
    shutil.copy(runs["r1"] / RESUME_FILE, copy / "r1.safetensors")
    _rewrite_identity(copy / "r1.safetensors", identity=None)
    shutil.move(copy / "r1.safetensors", copy / RESUME_FILE)
    before = snapshot(copy)
    _refused(capsys, _resume(copy), "records no run identity", "its weights differ from")
    assert snapshot(copy) == before
    shutil.copy(runs["r"] / RESUME_FILE, copy / RESUME_FILE)
    _rewrite_identity(copy / RESUME_FILE, identity=None)
    assert main(_resume(copy)) == 0  # its own older state: continued
    assert Run.open(copy).steps[-1] == 33


def test_the_identity_survives_a_change_of_steps(copy):
    state = Run.open(copy).load_resume()
    assert state.identity == {"spec_sha256": spec_sha256(Run.open(copy).spec, ignore_steps=True), "seed": 0,
                              "step": 30, "checkpoint_sha256": Run.open(copy).checkpoint_hashes()[30]}
    assert main(_resume(copy, 35)) == 0  # run.json's steps (and its spec hash) change, the identity's hash not
    assert main(_resume(copy, 40)) == 0
    run = Run.open(copy)
    assert run.spec.train.steps == 40 and run.steps[-1] == 40
    assert run.info["spec_sha256"] == spec_sha256(run.info["spec"]) == run.spec_sha256


# ---------------------------------------------------------------------------- 2: an edited run.json
def _edit_run_json(folder: Path, edit) -> None:
    info = json.loads((folder / RUN_FILE).read_text())
    edit(info)
    (folder / RUN_FILE).write_text(json.dumps(info, indent=2))


def test_an_edited_spec_is_refused_by_show_ls_and_resume(copy, capsys):
    _edit_run_json(copy, lambda info: info["spec"]["task"].update(k=5))
    before = snapshot(copy)
    fragment = "its spec does not match the hash it was written with (edited by hand?)"
    _refused(capsys, ["show", str(copy)], "run.json", fragment)
    _refused(capsys, ["show", str(copy), "--json"], "run.json", fragment)
    _refused(capsys, _resume(copy), "run.json", fragment)
    assert main(["ls", str(copy.parent)]) == 1
    out = capsys.readouterr().out
    assert "unreadable" in out and "run.json" in out and "bz_to_a" not in out  # never a row with K = 5, D = 1500
    with pytest.raises(InterpError, match=r"run\.json: its spec does not match"):
        Run.open(copy)
    assert snapshot(copy) == before


def test_an_edited_old_run_json_blames_the_edit_or_the_generator(copy, capsys):
    # a run.json written before spec_sha256 existed: the task hash is the check left
    _edit_run_json(copy, lambda info: (info.pop("spec_sha256"), info["spec"]["task"].update(n_bases=25)))
    with pytest.raises(InterpError, match=r"run.json's task/seed was edited, or the task generator changed"):
        Run.open(copy).task
    before = snapshot(copy)
    _refused(capsys, _resume(copy), "task/seed was edited")
    assert snapshot(copy) == before  # refused before run.json was rewritten


def test_the_demo_carries_its_spec_hash():
    run = Run.open(DEMO)
    assert run.info["spec_sha256"] == spec_sha256(run.info["spec"])


# ---------------------------------------------------------------------------- 3, 4: everything checked before any write
def _unlist_step_30(folder: Path) -> None:
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    del manifest["checkpoints"]["30"]
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest))


def _only_up_to_step_20(folder: Path) -> None:
    lines = (folder / METRICS_FILE).read_text().splitlines(keepends=True)
    (folder / METRICS_FILE).write_text("".join(line for line in lines if json.loads(line)["step"] <= 20))


@pytest.mark.parametrize("damage,fragments", [
    (lambda f: garbage_line(f / METRICS_FILE, 3), ["metrics.jsonl line 3 is not valid JSON"]),
    (lambda f: (f / RESUME_FILE).unlink(), ["resume.safetensors is missing", "checkpoints up to step 30"]),
    (lambda f: (f / METRICS_FILE).unlink(), ["metrics.jsonl is missing", "checkpoints up to step 30"]),
    (_only_up_to_step_20, ["metrics.jsonl has no row for step 30"]),
    (lambda f: (f / "checkpoints" / "step_0000030.safetensors").unlink(), ["step_0000030.safetensors is missing"]),
    (lambda f: (f / "checkpoints" / "step_0000030.safetensors").write_bytes(b"x"),
     ["step_0000030.safetensors is corrupt"]),
    (lambda f: (f / MANIFEST_FILE).write_text("[1, 2"), ["manifest.json is not valid JSON"]),
    (_unlist_step_30, ["continues from step 30, which", "manifest.json does not list"]),
], ids=["metrics-garbage", "resume-missing", "metrics-missing", "metrics-truncated", "checkpoint-missing",
        "checkpoint-damaged", "manifest-damaged", "step-unlisted"])
def test_a_refused_resume_writes_nothing(copy, capsys, damage, fragments):
    damage(copy)
    before = snapshot(copy)
    _refused(capsys, _resume(copy, 50), *fragments)
    assert snapshot(copy) == before  # run.json still says 30 steps, status.json still "done"
    assert json.loads((copy / RUN_FILE).read_text())["spec"]["train"]["steps"] == 30


@pytest.mark.parametrize("keep_step_0", [False, True], ids=["no-checkpoint", "killed-before-the-first-resume-state"])
def test_a_run_with_nothing_past_step_0_starts_from_zero(tmp_path, keep_step_0):
    out = tmp_path / "fresh"
    assert main(["train", "--out", str(out), "--steps", "10", *TINY_FLAGS]) == 0
    reference = Run.open(out).checkpoint_hashes()
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    kept = {"0": manifest["checkpoints"]["0"]} if keep_step_0 else {}
    for path in [out / RESUME_FILE, out / METRICS_FILE, *(out / "checkpoints").iterdir()]:
        if not (keep_step_0 and path.name == "step_0000000.safetensors"):
            path.unlink()
    (out / MANIFEST_FILE).write_text(json.dumps({"format": 1, "checkpoints": kept}))
    assert main(_resume(out, 10)) == 0
    assert Run.open(out).checkpoint_hashes() == reference  # the same run, step 0 saved again identically


# ---------------------------------------------------------------------------- 5: stale temporaries
def test_the_writer_removes_the_temporaries_a_killed_writer_left(copy):
    stale = [copy / ".resume.safetensors.k3j_x9q2.tmp", copy / ".manifest.json.abcdefgh.tmp",
             copy / "checkpoints" / ".step_0000040.safetensors.a1b2c3d4.tmp"]
    stale[0].write_bytes((copy / RESUME_FILE).read_bytes()[:-100])  # a resume write cut short
    for path in stale[1:]:
        path.write_bytes(b"half")
    kept = [copy / ".notes.json.abcdefgh.tmp", copy / "notes.tmp", copy / ".resume.safetensors.tmp",
            copy / "cache" / ".step_0000010.json.abcdefgh.tmp"]
    for path in kept:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"not ours")
    assert main(_resume(copy)) == 0
    assert not any(path.exists() for path in stale)
    assert all(path.exists() for path in kept)


def test_a_reader_never_removes_temporaries(copy, capsys):
    tmp = copy / ".resume.safetensors.abcdefgh.tmp"
    tmp.write_bytes(b"a writer's, in flight")
    assert main(["show", str(copy)]) == 0
    Run.open(copy).steps
    assert tmp.exists()


# ---------------------------------------------------------------------------- 6: Ctrl-C during startup
def test_ctrl_c_before_the_first_checkpoint_leaves_no_folder(tmp_path, monkeypatch, capsys):
    import interp.train as train_module

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(train_module, "build_model", interrupted)  # after Run.create, before step 0
    out = tmp_path / "x"
    assert _main(["train", "--out", str(out), "--steps", "30", *TINY_FLAGS]) == 130
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == "interrupted" and "Traceback" not in err
    assert not out.exists()


def test_ctrl_c_while_the_task_is_built_leaves_no_folder(tmp_path, monkeypatch, capsys):
    from interp.task import Task

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Task, "generate", interrupted)
    out = tmp_path / "x"
    assert _main(["train", "--out", str(out), "--steps", "30", *TINY_FLAGS]) == 130
    assert capsys.readouterr().err.strip() == "interrupted"
    assert not out.exists()


def test_ctrl_c_inside_a_finalizer_is_not_lost(tmp_path, monkeypatch, capsys):
    # Python swallows an exception raised in a __del__ (with a traceback): a Ctrl-C landing there
    # must still stop the command
    import gc
    import time

    import interp.train as train_module

    real = train_module.build_model

    class Finalized:
        def __del__(self):
            raise KeyboardInterrupt

    def build_model(*args, **kwargs):
        Finalized()
        gc.collect()
        time.sleep(2)  # the Ctrl-C is delivered again meanwhile
        return real(*args, **kwargs)

    monkeypatch.setattr(train_module, "build_model", build_model)
    out = tmp_path / "x"
    assert _main(["train", "--out", str(out), "--steps", "30", *TINY_FLAGS]) == 130
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == "interrupted" and "Exception ignored" not in err, err
    assert not out.exists()


def test_ctrl_c_after_a_checkpoint_keeps_the_run_to_resume(tmp_path, monkeypatch, capsys):
    import interp.train as train_module

    real = train_module.summarize
    calls = []

    def summarize(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:  # the evaluation at step 2, after the checkpoints at 0 and 1
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(train_module, "summarize", summarize)
    out = tmp_path / "x"
    assert main(["train", "--out", str(out), "--steps", "30", *TINY_FLAGS]) == 130
    assert "continue with: interp train --resume" in capsys.readouterr().err
    assert Run.open(out).steps == [0, 1] and Run.open(out).status["state"] == "interrupted"
    monkeypatch.setattr(train_module, "summarize", real)
    assert main(["train", "--resume", "--out", str(out), "--quiet"]) == 0


# a real SIGINT, sent by the process itself at a chosen point of its startup (installed through
# sitecustomize, so that the command runs as `python -m interp.cli`, its __main__ path); it lands
# in exec'd source, as when dataclasses builds a class at import, which CPython 3.11 remembers
SIGINT_AT = """
import sys

def sigint():
    exec("import os, signal\\nos.kill(os.getpid(), signal.SIGINT)\\nfor _ in range(10 ** 6): pass")

class SigintAt:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            sys.meta_path.remove(self)
            if name != "interp.task":
                sigint()
                return None
            from importlib.machinery import PathFinder  # the task module loads, its generator sends it
            spec = PathFinder.find_spec(name, path)
            load = spec.loader.exec_module

            def exec_module(module):
                load(module)
                generate = module.Task.generate.__func__
                module.Task.generate = classmethod(lambda cls, *a, **k: (sigint(), generate(cls, *a, **k))[1])

            spec.loader.exec_module = exec_module
            return spec
        return None

sys.meta_path.insert(0, SigintAt())
"""


@pytest.mark.parametrize("module", ["torch", "interp.task"], ids=["importing-torch", "building-the-task"])
def test_a_real_sigint_during_startup_is_one_line(tmp_path, module):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SIGINT_AT.format(module=module))
    out = tmp_path / "x"
    env = {"PYTHONPATH": os.pathsep.join([str(site), str(REPO), os.environ.get("PYTHONPATH", "")])}
    result = interp_cli("train", "--out", out, "--steps", "30", *TINY_FLAGS, cwd=REPO, env=env)
    assert result.returncode == 130, result.stderr[-3000:]
    assert result.stderr.strip() == "interrupted", result.stderr[-3000:]
    assert not out.exists()


# ---------------------------------------------------------------------------- 7: NaN evaluations
def test_an_all_nan_evaluation_stops_training(tmp_path, capsys):
    out = tmp_path / "x"
    _refused(capsys, ["train", "--out", str(out), "--init-std", "1e30", "--steps", "20", *TINY_FLAGS],
             "evaluation loss became nan at step 0")
    assert not out.exists()  # nothing was saved, so nothing is left


def test_nan_evaluations_after_checkpoints_fail_the_run_and_keep_them(tmp_path, monkeypatch, capsys):
    import math

    import interp.train as train_module

    real = train_module.summarize
    calls = []

    def summarize(*args, **kwargs):
        row = real(*args, **kwargs)
        calls.append(1)
        if len(calls) >= 4:  # from the evaluation at step 4 on
            row = {k: (math.nan if k.startswith("loss") else v) for k, v in row.items()}
        return row

    monkeypatch.setattr(train_module, "summarize", summarize)
    out = tmp_path / "x"
    assert main(["train", "--out", str(out), "--steps", "20", *TINY_FLAGS]) == 2
    assert "evaluation loss became nan at step 4" in capsys.readouterr().err
    run = Run.open(out)
    assert run.steps == [0, 1, 2] and run.status["state"] == "failed" and "step 4" in run.status["error"]


# ---------------------------------------------------------------------------- 8: negative numbers, empty paths
@pytest.mark.parametrize("flag,value,fragment", [
    ("--lr", "-1e-3", "lr must be > 0, got -0.001"),
    ("--lr", "-.5", "lr must be > 0, got -0.5"),
    ("--init-std", "-1E+2", "init_std must be > 0, got -100.0"),
    ("--weight-decay", "-0.01", "weight_decay must be >= 0"),
    ("--warmup-steps", "-3", "warmup_steps must be an integer >= 0"),
    ("--grad-clip", "-inf", "grad_clip must be a finite number"),
])
def test_negative_numbers_reach_the_real_check(tmp_path, capsys, flag, value, fragment):
    out = tmp_path / "x"
    _refused(capsys, ["train", "--out", str(out), *TINY_FLAGS, flag, value], fragment)
    assert not out.exists()


def test_ls_refuses_an_empty_path(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _refused(capsys, ["ls", ""], "non-empty path")
