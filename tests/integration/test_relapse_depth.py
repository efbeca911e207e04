"""`--at relapse+H` (issue 46): a family forked from the relapsed state held H steps, the relapse's depth. The state
kept at or after relapse + H inside the relapsed stretch; refused in one line where the run re-solved before it or
keeps no state that deep."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from interp.cli import main
from tests.helpers import copy_run, run_main, snapshot

CRITERION = "loss_cand>0.9logK,hold=5"


@pytest.fixture(scope="module")
def relapsed(tmp_path_factory, tiny_run) -> dict[str, Path]:
    """An lr fork of the tiny run at step 20 for 20 steps keeping its states (20, 30, 40), its log planted to show
    a solved run relapsing from step 25 and held to the end (`held`), or re-solved at 35 (`resolved`)."""
    root = tmp_path_factory.mktemp("depth")
    run = tiny_run()
    assert main(["fork", str(run), "--at", "20", "--arm", "lr:value=0.006", "--steps", "20", "--save-optimizer",
                 "--out", str(root / "kept"), "--quiet"]) == 0
    out = {}
    for name, plant in (("held", {20: 0.01, 25: 0.95, 30: 0.96, 35: 0.97, 40: 0.98}),
                        ("resolved", {20: 0.01, 25: 0.95, 30: 0.96, 35: 0.01, 40: 0.01})):
        out[name] = copy_run(root / "kept", root / name)
        lines = []
        for line in (out[name] / "metrics.jsonl").read_text().splitlines():
            row = json.loads(line)
            row["loss_cand"] = plant[row["step"]] * math.log(4)
            lines.append(json.dumps(row))
        (out[name] / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return out


def test_relapse_plus_h_forks_the_state_held_h_steps(relapsed, tmp_path, capsys):
    out = tmp_path / "family"
    code, text, err = run_main(["fork", str(relapsed["held"]), "--at", "relapse,relapse+5,relapse+10", "--relapse",
                                CRITERION, "--arm", "minibatch,full_batch", "--steps", "5", "--out", str(out),
                                "--quiet", "--json"], capsys)
    assert code == 0, err[-2000:]
    design = json.loads((out / "forks.json").read_text())
    assert design["steps"] == [25, 30, 40]  # the relapse at 25; +5: the state kept at 30; +10: none at 35, so 40
    from interp.forks.family import ForkFamily
    from interp.mechanisms.reconcile import _relapsed

    assert _relapsed(ForkFamily.open(out))


@pytest.mark.parametrize("name, at, fragment", [
    ("held", "relapse+20", "keeps no state at or after step 45 (relapse+20)"),
    ("resolved", "relapse+10", "relapse+10 (step 35) lies past its relapsed stretch of 10 steps"),
    ("resolved", "relapse+15", "was no longer relapsed from step 35"),
])
def test_a_depth_past_the_relapse_is_refused_in_one_line(relapsed, tmp_path, capsys, name, at, fragment):
    parent = relapsed[name]
    saved = snapshot(parent, cache=False)
    code, out, err = run_main(["fork", str(parent), "--at", at, "--relapse", CRITERION, "--arm",
                               "minibatch,full_batch", "--steps", "5", "--out", str(tmp_path / "f"), "--quiet"], capsys)
    text = out + err
    assert code == 2 and fragment in text and len(text.strip().splitlines()) == 1, text[-2000:]
    assert snapshot(parent, cache=False) == saved and not (tmp_path / "f").exists()
