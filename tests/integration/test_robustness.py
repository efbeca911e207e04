"""What a careful user trips on: damaged files, bad input, a second writer, kill -9.

Every case ends in one clear line and exit status 2 (no traceback), names the damaged file,
leaves what is saved intact and never gives a silently wrong or stale result.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from interp.cli import main
from interp.errors import InterpError
from interp.runs import METRICS_FILE, RESUME_FILE, RUN_FILE, Run
from interp.train import train
from tests.helpers import TINY_FLAGS, copy_run, interp_cli, run_main, small_spec, snapshot

REPO = Path(__file__).resolve().parents[2]


def _one_line(result: subprocess.CompletedProcess, fragment: str, status: int = 2) -> None:
    assert result.returncode == status, (result.returncode, result.stderr[-2000:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert fragment in lines[0], lines[0]


@pytest.fixture(scope="module")
def base(tiny_run) -> Path:
    """A short run: 30 steps, checkpoints at 0, 1, 2, 4, 8, 10, 20, 30."""
    return tiny_run()


@pytest.fixture
def copy(base, tmp_path) -> Path:
    return copy_run(base, tmp_path / "r")


# ---------------------------------------------------------------------------- the resume state
def test_a_damaged_resume_state_is_refused_not_resumed(copy, capsys):
    victim = copy / RESUME_FILE
    data = bytearray(victim.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    victim.write_bytes(bytes(data))
    before = snapshot(copy)
    assert main(["train", "--resume", "--out", str(copy), "--steps", "40", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "resume.safetensors is corrupt" in err
    assert snapshot(copy) == before  # run.json still says 30 steps; nothing was written


def test_a_truncated_resume_state_leaves_run_json_alone(copy, capsys):
    victim = copy / RESUME_FILE
    victim.write_bytes(victim.read_bytes()[:1000])
    before = snapshot(copy)
    assert main(["train", "--resume", "--out", str(copy), "--steps", "40", "--quiet"]) == 2
    assert "resume.safetensors" in capsys.readouterr().err
    assert snapshot(copy) == before
    assert Run.open(copy).spec.train.steps == 30


def test_resume_drops_a_torn_metrics_line(copy, base, capsys):
    with open(copy / METRICS_FILE, "a") as f:
        f.write('{"step": 31, "loss": 1.')  # a crash mid-write
    assert main(["train", "--resume", "--out", str(copy), "--steps", "40", "--quiet"]) == 0
    rows = Run.open(copy).metric_rows()
    assert [r["step"] for r in rows] == sorted({r["step"] for r in rows}) and rows[-1]["step"] == 40
    capsys.readouterr()
    assert main(["show", str(copy)]) == 0  # readable for good, not only once
    assert "last evaluated 40" in capsys.readouterr().out


def test_resume_cannot_go_back(copy, capsys):
    before = snapshot(copy)
    assert main(["train", "--resume", "--out", str(copy), "--steps", "20", "--quiet"]) == 2
    assert "already reached" in capsys.readouterr().err
    assert snapshot(copy) == before


def test_resume_refuses_a_preset_and_needs_out(copy, capsys):
    assert main(["train", "--resume", "--out", str(copy), "--preset", "paper"]) == 2
    assert "--preset cannot be combined" in capsys.readouterr().err
    assert main(["train", "--resume"]) == 2
    assert "--resume needs --out" in capsys.readouterr().err


# ---------------------------------------------------------------------------- training input
@pytest.mark.parametrize("flag,value,fragment", [
    ("--weight-decay", "inf", "weight_decay must be a finite number"),
    ("--init-std", "inf", "init_std must be a finite number"),
    ("--lr", "nan", "lr must be a finite number"),
    ("--grad-clip", "inf", "grad_clip must be a finite number"),
])
def test_infinite_settings_are_refused(tmp_path, flag, value, fragment):
    result = interp_cli("train", "--out", tmp_path / "r", *TINY_FLAGS, "--steps", "3", flag, value)
    _one_line(result, fragment)
    assert not (tmp_path / "r").exists()


def test_a_diverging_run_stops_at_the_nan_and_names_the_step(tmp_path):
    run = Run.create(tmp_path / "r", small_spec(lr=1e12, steps=40))
    # the training loss, or the evaluation at the step the weights blew up
    with pytest.raises(InterpError, match=r"(training|evaluation) loss became (nan|inf) at step \d+"):
        train(run, progress=False)
    status = Run.open(run.path).status
    assert status["state"] == "failed" and "at step" in status["error"]
    for step in run.steps:  # what was saved before the divergence is finite
        assert all(torch.isfinite(t).all() for t in run.state_dict(step).values())


@pytest.mark.parametrize("args,fragment", [
    (["--device", "bogus"], "unknown device 'bogus'"),
    (["--device", "cuda"], "no CUDA GPU"),
    (["--batch-size", "1000000000000"], "GiB to train"),
    (["--d-model", "1000000000"], "GiB to train"),
])
def test_impossible_training_is_one_line_and_leaves_no_folder(tmp_path, args, fragment, capsys, monkeypatch):
    out = tmp_path / "r"
    # with the GPUs hidden, so that "no CUDA GPU" is what a CPU-only machine sees, here too (in this process: the
    # command's own main, as its subprocess would run it, without the second of starting one)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    code, text, err = run_main(["train", "--out", str(out), *TINY_FLAGS, "--steps", "3", *args], capsys)
    assert code == 2 and not text and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert fragment in err
    assert not out.exists()
    assert main(["train", "--out", str(out), *TINY_FLAGS, "--steps", "3"]) == 0  # the corrected command works


def test_a_failure_after_the_folder_was_made_cleans_it_up(tmp_path, monkeypatch, capsys):
    import interp.train as train_module

    def no_memory(*args, **kwargs):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes")

    monkeypatch.setattr(train_module, "build_model", no_memory)
    out = tmp_path / "r"
    assert main(["train", "--out", str(out), *TINY_FLAGS, "--steps", "3"]) == 2
    assert "not enough memory" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("out,fragment", [
    ("afile", "is a file; a run needs a folder"),
    ("afile/run", "afile is a file"),
    ("", "--out must be a non-empty path"),
])
def test_bad_run_folders(tmp_path, out, fragment):
    (tmp_path / "afile").write_text("x")
    _one_line(interp_cli("train", "--out", out, *TINY_FLAGS, "--steps", "3", cwd=tmp_path), fragment)
    assert not (tmp_path / "checkpoints").exists()  # --out "" never falls back to the default


# ---------------------------------------------------------------------------- reading runs
@pytest.mark.parametrize("content,fragment", [
    (b"\x89\xfe\x00garbage\xff", "is not valid JSON"),
    (json.dumps({"format": 1}).encode(), "has no 'spec'"),
    (None, "k must be an integer, got 'ten'"),
])
def test_a_damaged_run_json_is_one_line(copy, content, fragment):
    if content is None:
        info = json.loads((copy / RUN_FILE).read_text())
        info["spec"]["task"]["k"] = "ten"
        content = json.dumps(info).encode()
    (copy / RUN_FILE).write_bytes(content)
    _one_line(interp_cli("show", copy), fragment)
    assert "run.json" in interp_cli("show", copy).stderr


def test_a_manifest_without_a_hash_and_a_missing_manifest_are_named(copy):
    manifest = json.loads((copy / "manifest.json").read_text())
    del manifest["checkpoints"]["10"]["sha256"]
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InterpError, match="manifest.json: the entry for step 10 lacks its file or sha256"):
        Run.open(copy).model(10)
    (copy / "manifest.json").unlink()
    with pytest.raises(InterpError, match=r"manifest.json is missing"):
        Run.open(copy).steps
    _one_line(interp_cli("show", copy), "manifest.json is missing", status=1)  # damaged, as ls says (issue 43, 7)


@pytest.mark.slow
def test_one_bad_checkpoint_spares_the_other_steps(copy, capsys):
    (copy / "checkpoints" / "step_0000010.safetensors").write_bytes(b"not a checkpoint")
    (copy / "checkpoints" / "step_0000004.safetensors").unlink()
    status = main(["analyze", str(copy), "--only", "sensitivity", "--quiet", "--no-cache"])
    err = capsys.readouterr()
    assert status == 1
    assert "step 10" in err.err and "step_0000010.safetensors is corrupt" in err.err
    assert "step 4" in err.err and "missing file" in err.err
    result_steps = json.loads(interp_cli("analyze", copy, "--only", "sensitivity", "--json").stdout)
    steps = {row["step"] for row in result_steps["tables"]["sensitivity"]}
    assert steps == set(Run.open(copy).steps) - {4, 10}


# ---------------------------------------------------------------------------- output paths
@pytest.mark.parametrize("command,target,fragment", [
    ("report", "adir", "is a folder"),
    pytest.param("report", "", "must be a non-empty path", marks=pytest.mark.slow),
    pytest.param("report", "/proc/interp-nope/report.html", "is not writable", marks=pytest.mark.slow),
    pytest.param("timeline", "afile/t.html", "afile is a file", marks=pytest.mark.slow),
])
def test_output_paths_are_checked_before_any_work(copy, tmp_path, command, target, fragment):
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("x")
    _one_line(interp_cli(command, copy, "-o", target, cwd=tmp_path), fragment)
    assert not (copy / "cache").exists()  # refused up front, before any analysis was computed or cached


@pytest.mark.slow
def test_bad_options_of_analyze(copy):
    _one_line(interp_cli("analyze", copy, "--n-groups", "0"), "must be a positive integer")
    assert interp_cli("analyze", copy, "--only", "sensitivity", "--quiet").returncode == 0  # the cache answers now
    _one_line(interp_cli("analyze", copy, "--only", "sensitivity", "--device", "bogus"), "unknown device 'bogus'")


# ---------------------------------------------------------------------------- files and processes
@pytest.mark.slow
def test_identical_weights_give_identical_files(tmp_path):
    outs = [tmp_path / "a", tmp_path / "b"]
    for out in outs:  # two processes: nothing in one process's state can make them agree
        assert interp_cli("train", "--out", out, *TINY_FLAGS, "--steps", "10").returncode == 0
    a, b = (Run.open(o) for o in outs)
    assert a.checkpoint_hashes() == b.checkpoint_hashes()
    for step in a.steps:
        assert (outs[0] / a.manifest()[step]["file"]).read_bytes() == (outs[1] / b.manifest()[step]["file"]).read_bytes()
    # the resume states hold the same tensors (their metadata also records each run's wall time)
    ra, rb = a.load_resume(), b.load_resume()
    assert ra.params.keys() == rb.params.keys() and all(torch.equal(ra.params[k], rb.params[k]) for k in ra.params)


@pytest.mark.slow
def test_one_writer_per_run_and_kill_9_leaves_no_stale_lock(tmp_path):
    out = tmp_path / "r"
    long_flags = [*TINY_FLAGS, "--steps", "100000", "--eval-every", "50", "--checkpoint-every", "50"]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    first = subprocess.Popen([sys.executable, "-m", "interp.cli", "train", "--out", str(out), *long_flags],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not (out / "checkpoints" / "step_0000050.safetensors").exists():
            time.sleep(0.2)
        assert (out / "checkpoints" / "step_0000050.safetensors").exists(), "the first writer never got going"
        second = interp_cli("train", "--resume", "--out", out, "--quiet")
        _one_line(second, f"pid {first.pid}", status=1)  # a held lock: the folder is busy, the input is fine
        assert "being written by another process" in second.stderr
        shown = interp_cli("show", out)  # readers are never blocked
        assert shown.returncode == 0 and "checkpoints" in shown.stdout
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    resumed = interp_cli("train", "--resume", "--out", out, "--steps", str(Run.open(out).steps[-1] + 20), "--quiet")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert Run.open(out).status["state"] == "done"


def test_quick_commands_never_import_torch(base, tmp_path):
    code = f"""
import sys
from interp.cli import main
for argv in (["ls", {str(base.parent)!r}], ["show", {str(base)!r}], ["show", {str(base)!r}, "--json"],
             ["train", "--k", "0", "--out", {str(tmp_path / 'x')!r}], ["show", "no/such/run"],
             ["analyze", "no/such/run"], ["train", "--lr", "inf", "--out", {str(tmp_path / 'y')!r}]):
    main(argv)
for argv in (["--help"], ["train", "--help"], ["analyze", "--help"], ["train", "--k", "ten"]):
    try:
        main(argv)
    except SystemExit:
        pass
heavy = [m for m in ("torch", "transformer_lens", "pandas", "plotly") if m in sys.modules]
assert not heavy, heavy
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]


def test_safetensors_headers_are_canonical():
    # safetensors' own writer orders metadata keys differently from one call to the next
    from interp.checkpoints import serialize

    tensors = {"b": torch.ones(2), "a": torch.arange(3.0)}
    meta = {"step": "1", "format": "x", "param_groups": "[]", "extra": "{}"}
    blobs = {serialize(tensors, meta) for _ in range(25)}
    assert len(blobs) == 1
    blobs = {serialize(tensors, dict(reversed(list(meta.items()))), self_hash=True) for _ in range(25)}
    assert len(blobs) == 1


def test_the_resume_state_checks_its_own_content(tmp_path):
    from interp.checkpoints import read, serialize

    path = tmp_path / "x.safetensors"
    blob = bytearray(serialize({"a": torch.arange(64.0)}, {"step": "3"}, self_hash=True))
    path.write_bytes(bytes(blob))
    tensors, meta = read(path, self_hashed=True)
    assert meta == {"step": "3"} and torch.equal(tensors["a"], torch.arange(64.0))
    blob[-10] ^= 0x01  # one bit of one weight
    path.write_bytes(bytes(blob))
    with pytest.raises(InterpError, match="is corrupt"):
        read(path, self_hashed=True)
