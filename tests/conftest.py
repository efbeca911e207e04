"""Shared fixtures, and the tiers: tests/unit (fast, no training, no browser), tests/integration
(short training runs, CLI subprocesses, Ray), tests/e2e (the browser, the README, the examples,
the tiny preset; marked `e2e` and `slow`). Plain `pytest` leaves out every `slow` test (the e2e tier
and the longest integration tests); `pytest -m slow` runs them. Helpers shared by
tests live in tests/helpers.py; no test imports another test module or this file.

Runtime shape checking of every jaxtyping annotation in `interp` is switched on by pytest's
jaxtyping option in pyproject.toml (`--jaxtyping-packages=interp,beartype.beartype`), which
instruments the whole package before anything imports it."""

import os
import signal

os.environ.setdefault("OMP_NUM_THREADS", "2")

# A harness started in the background (`cmd &` in a script, nohup) ignores ctrl-c, and every process it
# starts inherits that; the interruption tests stand for a user pressing ctrl-c at a terminal, so SIGINT
# raises KeyboardInterrupt here, and children (a handler resets to the default at exec) get the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import pytest  # noqa: E402
import torch  # noqa: E402

from interp.runs import Run  # noqa: E402
from interp.task import Task, TaskSpec  # noqa: E402
from tests.helpers import DEMO, TINY_FLAGS  # noqa: E402


@pytest.fixture
def demo_run():
    """The shipped demo run (read only: the tests that change it work on a copy)."""
    return Run.open(DEMO)


@pytest.fixture
def small_task() -> Task:
    return Task.generate(TaskSpec(k=4, n_bases=12), seed=3)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """`tiny_run(seed=0)`: the folder of `interp train --steps 30 TINY_FLAGS [--seed SEED]` (checkpoints at 0,
    1, 2, 4, 8, 10, 20, 30), trained once a session for every module that asks; read only: tests copy it."""
    from interp.cli import main

    made = {}

    def trained(seed: int = 0):
        if seed not in made:
            out = tmp_path_factory.mktemp(f"tiny-run-s{seed}") / "run"
            seeded = ["--seed", str(seed)] if seed else []
            assert main(["train", "--out", str(out), "--steps", "30", *seeded, *TINY_FLAGS]) == 0
            made[seed] = out
        return made[seed]

    return trained


@pytest.fixture(scope="session")
def snapping_run(tmp_path_factory):
    """The folder of a small run that snaps within seconds (tau about 130 of 300 steps, 7 checkpoints), trained once
    a session for every module that asks (`tests.helpers.SNAPPING`); read only: tests copy it."""
    from interp.train import train
    from tests.helpers import SNAPPING, small_spec

    torch.set_num_threads(2)
    run = Run.create(tmp_path_factory.mktemp("snapping") / "run", small_spec(**SNAPPING))
    train(run, progress=False)
    run.release()
    return run.path


@pytest.fixture(autouse=True)
def _deterministic_threads():
    torch.set_num_threads(2)
    yield


def pytest_collection_modifyitems(items):
    """Every test under tests/e2e carries the `e2e` and `slow` markers."""
    for item in items:
        if "e2e" in item.path.parts:
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.slow)
