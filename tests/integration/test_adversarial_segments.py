"""Issue 43, case 3, beside test_adversarial.py and in its style: a resume or a fork in another environment than
the one that trained its starting state was silently not bit-exact (another TransformerLens, another CPU
instruction set: the plateau's escape amplifies the last bits). Each training segment now records its versions,
threads, device and CPU capability in run.json; a continuation in another environment says so in one line;
`interp show` lists the segments; a run made before they were recorded still opens (its recorded versions and
threads are its segment). A freshly trained run resumes bit-exactly on any machine; the shipped demo's bit-exact
continuation is tested only on a CPU of its instruction set (AVX2), and says why it is skipped elsewhere.

Fixtures: the session's 30-step tiny run (copied, never changed); the shipped demo (copied).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from interp.runs import Run
from tests.helpers import DEMO, TINY_FLAGS, copy_run, run_main

HERE = torch.backends.cpu.get_cpu_capability()


def _edit_segments(edit: Callable[[list[dict]], None], rehash: bool = True) -> Callable[[Path], None]:
    """run.json's segments changed by `edit`: as a run trained elsewhere records them (`rehash`: their hash
    written again, as interp would), or edited by hand (the hash left as it was)."""
    from interp.run_segments import segments_sha256

    def mutate(folder: Path) -> None:
        info = json.loads((folder / "run.json").read_text())
        edit(info["segments"])
        if rehash:
            info["segments_sha256"] = segments_sha256(info["segments"])
        (folder / "run.json").write_text(json.dumps(info, indent=2))
    return mutate


def _legacy(versions: dict | None = None) -> Callable[[Path], None]:
    """run.json as interp wrote it before segments (its versions edited by `versions`)."""
    def mutate(folder: Path) -> None:
        info = json.loads((folder / "run.json").read_text())
        del info["segments"]
        info.pop("segments_sha256", None)
        info["versions"].update(versions or {})
        (folder / "run.json").write_text(json.dumps(info, indent=2))
    return mutate


def _cpu(value: str):
    return _edit_segments(lambda segs: segs[-1].update(cpu_capability=value))


def _version(name: str, value: str):
    return _edit_segments(lambda segs: segs[-1]["versions"].update({name: value}))


RESUME = ["train", "--resume", "--out", "{F}", "--steps", "35", "--quiet"]
CONTINUED = [
    # (id, how the run's recorded environment differs from this one, argv, fragments of the one line; [] none)
    ("same-environment", None, RESUME, []),
    ("other-cpu", _cpu("SSE9"), RESUME, [f"CPU capability SSE9 -> {HERE}", "not bit-exact", "its last segment"]),
    ("other-transformer-lens", _version("transformer-lens", "0.0.1"), RESUME, ["transformer-lens 0.0.1 -> "]),
    # a resume takes the recorded threads by default (bit-exact); only --threads changes them, and says so
    ("other-threads", _edit_segments(lambda segs: segs[-1].update(threads=7)), RESUME + ["--threads", "2"],
     ["threads 7 -> 2"]),
    ("other-cpu-and-torch", lambda f: (_cpu("SSE9")(f), _version("torch", "1.0")(f)), RESUME,
     ["torch 1.0 -> ", f"CPU capability SSE9 -> {HERE}"]),
    # a run made before segments were recorded: its versions and threads are its segment (its CPU never compared)
    ("legacy-same", _legacy(), RESUME, []),
    ("legacy-other-torch", _legacy({"torch": "1.0"}), RESUME, ["torch 1.0 -> "]),
    # a fork's first training continues its parent's state at the fork step
    ("fork-other-cpu", _cpu("SSE9"), ["fork", "{F}", "--at", "20", "--arm", "continue", "--steps", "5", "--out", "{T}/f",
                                      "--quiet"], [f"CPU capability SSE9 -> {HERE}", "its parent's (at step 20)"]),
    ("fork-same", None, ["fork", "{F}", "--at", "20", "--arm", "continue", "--steps", "5", "--out", "{T}/f", "--quiet"],
     []),
]


@pytest.mark.parametrize("case", CONTINUED, ids=lambda c: c[0])
def test_a_continuation_elsewhere_says_it_is_not_bit_exact(case, tiny_run, tmp_path, capsys):
    name, mutate, argv, fragments = case
    folder = copy_run(tiny_run(), tmp_path / "run")
    if mutate is not None:
        mutate(folder)
    code, out, err = run_main([a.replace("{F}", str(folder)).replace("{T}", str(tmp_path)) for a in argv], capsys)
    assert code == 0 and "Traceback" not in err, err[-3000:]
    notes = [line for line in err.splitlines() if "not bit-exact" in line]
    if not fragments:
        assert notes == [], notes
        return
    assert len(notes) == 1, err[-3000:]
    for fragment in fragments:
        assert fragment in notes[0], (fragment, notes[0])


def test_every_training_invocation_records_its_segment(tiny_run, tmp_path, capsys):
    from interp.run_segments import segments

    folder = copy_run(tiny_run(), tmp_path / "run")
    (first,) = segments(Run.open(folder).info)
    assert first["from_step"] == 0 and first["cpu_capability"] == HERE and first["threads"] == torch.get_num_threads()
    assert first["device"] == "cpu" and first["versions"]["transformer-lens"] and first["versions"]["torch"]
    assert run_main(["train", "--resume", "--out", str(folder), "--steps", "40", "--quiet"], capsys)[0] == 0
    assert [s["from_step"] for s in segments(Run.open(folder).info)] == [0, 30]
    code, out, _ = run_main(["show", str(folder)], capsys)
    shown = [line for line in out.splitlines() if line.startswith("segment")]
    assert code == 0 and len(shown) == 2 and "from step 30: torch " in shown[1] and f"on cpu, {HERE}" in shown[1], out
    code, out, _ = run_main(["show", str(folder), "--json"], capsys)
    assert [s["from_step"] for s in json.loads(out)["segments"]] == [0, 30]


def test_a_run_made_before_segments_opens_and_shows_its_one_segment(tiny_run, tmp_path, capsys):
    folder = copy_run(tiny_run(), tmp_path / "run")
    _legacy()(folder)
    code, out, _ = run_main(["show", str(folder)], capsys)
    (line,) = [line for line in out.splitlines() if line.startswith("segment")]
    assert code == 0 and "from step 0: torch " in line and "CPU capability not recorded" in line, out


def test_the_demo_shows_the_cpu_it_was_trained_on(tmp_path, capsys):
    code, out, _ = run_main(["show", str(DEMO)], capsys)
    (line,) = [line for line in out.splitlines() if line.startswith("segment")]
    assert code == 0 and "transformer-lens 3.9.0" in line and "2 threads on cpu, AVX2" in line, line


def test_a_fresh_runs_resume_is_bit_exact_on_any_machine(tiny_run, tmp_path, capsys):
    """Trained here to step 20 and resumed to 30: the checkpoints of the session's 30-step run, bit for bit."""
    out = tmp_path / "cut"
    assert run_main(["train", "--out", str(out), "--steps", "20", *TINY_FLAGS], capsys)[0] == 0
    code, _, err = run_main(["train", "--resume", "--out", str(out), "--steps", "30", "--quiet"], capsys)
    assert code == 0 and "not bit-exact" not in err, err
    assert Run.open(out).checkpoint_hashes() == Run.open(tiny_run()).checkpoint_hashes()


def test_a_resume_takes_the_threads_the_run_was_trained_with(tiny_run, tmp_path, capsys):
    """Trained at 1 thread, resumed without saying: it continues at 1 thread (recorded), bit-exactly; resumed with
    --threads 2, it says it is not bit-exact (issue 54: 5)."""
    import torch

    before = torch.get_num_threads()
    try:
        whole, cut = tmp_path / "whole", tmp_path / "cut"
        assert run_main(["train", "--out", str(whole), "--steps", "30", "--threads", "1", *TINY_FLAGS], capsys)[0] == 0
        assert run_main(["train", "--out", str(cut), "--steps", "20", "--threads", "1", *TINY_FLAGS], capsys)[0] == 0
        torch.set_num_threads(2)
        code, _, err = run_main(["train", "--resume", "--out", str(cut), "--steps", "30", "--quiet"], capsys)
        assert code == 0 and "not bit-exact" not in err, err
        assert Run.open(cut).checkpoint_hashes() == Run.open(whole).checkpoint_hashes()
        assert {s["threads"] for s in Run.open(cut).info["segments"]} == {1}
        code, _, err = run_main(["train", "--resume", "--out", str(cut), "--steps", "40", "--threads", "2",
                                 "--quiet"], capsys)
        assert code == 0 and "threads 1 -> 2" in err and "not bit-exact" in err, err
    finally:
        torch.set_num_threads(before)


def test_a_rerun_of_a_folder_resumes_with_its_runs_threads_and_workers(tmp_path):
    """The executor a re-run takes without flags: the threads the unfinished runs were trained with, and as many
    workers as the cores hold at that many each; flags given apply to every run."""
    import argparse
    import os

    from interp.cli_sweep import rerun_executor
    from interp.devices import torch_threads
    from interp.sweeps.sweep import Sweep, SweepSpec
    from interp.train import train
    from tests.helpers import small_spec

    sweep = Sweep.create(tmp_path / "s", SweepSpec(base=small_spec(steps=30), grid=(("seed", (0, 1)),)))
    for name, spec, _ in sweep.points():  # both trained at 1 thread, then cut short (interrupted)
        run = Run.create(sweep.path / name, spec)
        with torch_threads(1):
            train(run, progress=False, stop_at=10)
        run.release()
    args = argparse.Namespace(workers=None, threads_per_run=None, backend="local")
    assert rerun_executor(sweep, args) == (max(1, (os.cpu_count() or 1) // 1), 1, True)
    assert rerun_executor(sweep, argparse.Namespace(workers=1, threads_per_run=None, backend="local")) == (1, None, False)


def _demo_environment() -> str | None:
    """Why this machine cannot continue the demo bit-exactly (None: it can), naming both environments."""
    from interp.run_segments import current, differences, segments

    (trained,) = segments(Run.open(DEMO).info)
    diffs = differences(trained, current(0, "cpu", 2))
    return (f"the demo was trained with {trained['cpu_capability']} CPU kernels (TransformerLens "
            f"{trained['versions']['transformer-lens']}, 2 threads); here: {', '.join(diffs)}, so its continuation is "
            f"valid but not bit-exact") if diffs else None


@pytest.mark.slow
def test_a_continue_fork_of_the_demo_reproduces_its_next_checkpoint(tmp_path, capsys):
    """`continue` from the demo's kept state at step 500 for 100 steps is the demo's step 600, bit for bit (float16),
    where the demo was trained; elsewhere the fork says it is not bit-exact (test above) and this is skipped."""
    why = _demo_environment()
    if why is not None:
        pytest.skip(why)
    out = tmp_path / "cont"
    code, _, err = run_main(["fork", str(copy_run(DEMO, tmp_path / "demo")), "--at", "500", "--arm", "continue",
                             "--steps", "100", "--out", str(out), "--quiet"], capsys)
    assert code == 0 and "not bit-exact" not in err, err[-3000:]
    mine, theirs = Run.open(out).state_dict(600), Run.open(DEMO).state_dict(600)
    assert all(torch.equal(mine[n], theirs[n]) for n in theirs)


def test_a_fork_of_the_demo_here_says_whether_it_is_bit_exact(tmp_path, capsys):
    """One step of `continue` from the demo's kept state: the note names the demo's AVX2 and this CPU's capability
    where they differ (this machine: AVX512), and says nothing where they agree."""
    out = tmp_path / "cont"
    code, _, err = run_main(["fork", str(copy_run(DEMO, tmp_path / "demo")), "--at", "500", "--arm", "continue",
                             "--steps", "1", "--out", str(out), "--quiet"], capsys)
    assert code == 0, err[-3000:]
    notes = [line for line in err.splitlines() if "not bit-exact" in line]
    if _demo_environment() is None:
        assert notes == [], notes
    else:
        assert len(notes) == 1 and "its parent's (at step 500)" in notes[0], err[-3000:]
        if HERE != "AVX2":
            assert f"CPU capability AVX2 -> {HERE}" in notes[0], notes[0]


def _whole(value) -> Callable[[Path], None]:
    """run.json's segments replaced whole by `value`, the hash left as it was."""
    def mutate(folder: Path) -> None:
        info = json.loads((folder / "run.json").read_text())
        info["segments"] = value
        (folder / "run.json").write_text(json.dumps(info, indent=2))
    return mutate


def _no_hash(edit) -> Callable[[Path], None]:
    """As `edit`, on a run made before the segments' hash (none in run.json): the structure is still checked."""
    def mutate(folder: Path) -> None:
        edit(folder)
        info = json.loads((folder / "run.json").read_text())
        info.pop("segments_sha256", None)
        (folder / "run.json").write_text(json.dumps(info, indent=2))
    return mutate


@pytest.mark.parametrize("mutate,fragment", [
    (_edit_segments(lambda segs: segs[-1].update(threads=1), rehash=False), "do not match the hash"),
    (_edit_segments(lambda segs: segs[-1].update(from_step=7), rehash=False), "do not match the hash"),
    (_whole("oops"), "do not match the hash"),
    (_whole({}), "do not match the hash"),
    (_no_hash(_whole("oops")), "not a list of segments"),
    (_no_hash(_whole({})), "not a list of segments"),
    (_no_hash(_edit_segments(lambda segs: segs[-1].update(from_step="fifty"), rehash=False)), "not a list of segments"),
    (_no_hash(_edit_segments(lambda segs: segs[-1].update(threads="many"), rehash=False)), "not a list of segments"),
    (_no_hash(_edit_segments(lambda segs: segs[-1].update(from_step=-100), rehash=False)), "not a list of segments"),
], ids=["threads", "from-step", "text", "object", "text-unhashed", "object-unhashed", "step-text", "threads-text",
        "step-negative"])
def test_edited_segments_are_refused_in_one_line(mutate, fragment, tiny_run, tmp_path, capsys):
    """The environment a run was trained in is covered by the run's integrity check (issue 54): an edit that would
    erase a non-exact resume from the record is refused by every command, one line, nothing written."""
    folder = copy_run(tiny_run(), tmp_path / "run")
    mutate(folder)
    before = (folder / "run.json").read_bytes()
    for argv in (["show", str(folder)], ["train", "--resume", "--out", str(folder), "--steps", "35", "--quiet"]):
        code, _, err = run_main(argv, capsys)
        assert code == 2 and fragment in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert (folder / "run.json").read_bytes() == before


def test_a_forks_show_lists_its_parents_segment(tiny_run, tmp_path, capsys):
    """A fork's first segment follows the parent's that made its starting state (its threads and CPU recorded),
    not an unrecorded "? threads" one."""
    out = tmp_path / "f"
    code, _, err = run_main(["fork", str(copy_run(tiny_run(), tmp_path / "p")), "--at", "20", "--arm", "continue",
                             "--steps", "5", "--out", str(out), "--quiet"], capsys)
    assert code == 0, err
    code, text, _ = run_main(["show", str(out)], capsys)
    lines = [line for line in text.splitlines() if line.startswith("segment")]
    assert len(lines) == 2 and "(the parent's)" in lines[0] and "not recorded" not in text, text
    assert f"{torch.get_num_threads()} threads on cpu, {HERE}" in lines[0]
