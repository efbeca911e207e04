"""A job run in the caller's own process (a pool of one worker, a notebook's `family.train(threads=1)`) gives the
caller's torch thread count back: a leaked count made later replays refuse ("trained with 1 CPU threads")."""

from __future__ import annotations

import torch

from interp.collections.training import train_point
from interp.devices import torch_threads
from interp.runs import Run
from interp.sweeps.analyze import analyze_point


def _other(n: int) -> int:
    return 1 if n != 1 else 2


def test_torch_threads_sets_and_gives_back_even_on_error():
    before = torch.get_num_threads()
    with torch_threads(_other(before)):
        assert torch.get_num_threads() == _other(before)
    assert torch.get_num_threads() == before
    try:
        with torch_threads(_other(before)):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert torch.get_num_threads() == before
    with torch_threads(None):
        assert torch.get_num_threads() == before


def test_a_training_and_an_analysis_job_in_this_process_leave_the_thread_count(tiny_run):
    run = Run.open(tiny_run())
    before = torch.get_num_threads()
    got = train_point(str(run.path), {"spec": run.spec.to_dict(), "create": False}, threads=_other(before))
    assert got["state"] == "done" and not got["trained"], got
    assert torch.get_num_threads() == before
    got = analyze_point(str(run.path), {"only": ["trajectory"], "steps": [run.steps[-1]], "cache": False},
                        threads=_other(before))
    assert got["state"] == "done", got
    assert torch.get_num_threads() == before
