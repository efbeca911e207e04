"""Issue 32's bad input to the escape criterion and the Gamma window, as tables in the style of
test_adversarial_forks.py: `interp fork` (one fork or a family) refuses a malformed criterion, an
unknown metric, a hold longer than the horizon and a Gamma window outside the horizon before anything
is written (one line, exit 2, no traceback, the parent untouched, no output folder); `interp fork
status FAMILY --escape / --gamma-window` re-judges a family's logs, and refuses the same bad input
(and a range outside the window its forks measured) without touching the family.

Fixtures: `parent` is the session's 30-step tiny run; `family` a trained 4-step family of it (minibatch
and full_batch at step 20, Gamma sampled at every step of a 3-step window).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import run_main, snapshot


@pytest.fixture(scope="module")
def parent(tiny_run) -> Path:
    return tiny_run()


@pytest.fixture(scope="module")
def family(parent, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("adversarial-escape") / "fam"
    code, text, err = _main(["fork", str(parent), "--at", "20", "--arm", "minibatch,full_batch", "--steps", "4",
                             "--out", str(out), "--gamma-every", "1", "--gamma-window", "1:3", "--eval-every", "1",
                             "--quiet", "--json"])
    assert code == 1 or code == 0, err  # 1: every fork censored is still done; the table decides below
    rows = json.loads(text)["table"]
    assert {r["status"] for r in rows} == {"done"}, rows
    return out


def _main(argv: list[str]) -> tuple[int, str, str]:
    from interp.cli import main

    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def _refused(argv: list[str], fragment: str, watched: Path, capsys, scratch: Path | None = None) -> None:
    saved = snapshot(watched, cache=False)
    code, out, err = run_main(argv, capsys)
    text = out + err
    assert code == 2, text[-2000:]
    assert "Traceback" not in text and fragment.lower() in text.lower(), text[-2000:]
    assert len(text.strip().splitlines()) == 1, text[-2000:]
    assert snapshot(watched, cache=False) == saved, "a refused command changed what it read"
    if scratch is not None:
        assert not list(scratch.iterdir()), "a refused fork left a folder behind"


# ---------------------------------------------------------------------------- making forks
FORK = ["fork", "{P}", "--at", "20", "--steps", "5", "--out", "{T}/f", "--quiet"]
FAMILY = ["--arm", "minibatch,full_batch"]
FORK_INPUT = [
    # (id, extra argv, fragment)
    ("escape-malformed", ["--escape", "loss_first=3"], "is not a criterion"),
    ("escape-no-threshold", ["--escape", "loss_first<"], "finite number"),
    ("escape-bad-unit", ["--escape", "loss_cand<0.5logQ"], "finite number"),
    ("escape-unknown-metric", ["--escape", "loss_foo<3"], "unknown metric 'loss_foo'"),
    ("escape-not-evaluated", ["--escape", "train_loss<3"], "evaluated columns"),
    ("escape-bad-hold", ["--escape", "loss_first<3,hold=ten"], "hold=STEPS"),
    ("escape-hold-past-horizon", ["--escape", "loss_first<3,hold=6"], "longer than the horizon"),
    ("escape-hold-past-horizon-family", ["--escape", "loss_first<3,hold=6", *FAMILY], "longer than the horizon"),
    ("gamma-window-past-horizon", ["--gamma-every", "1", "--gamma-window", "6"], "outside the horizon"),
    ("gamma-range-past-horizon", ["--gamma-every", "1", "--gamma-window", "2:6"], "outside the horizon"),
    ("gamma-range-past-horizon-family", ["--gamma-window", "2:6", *FAMILY], "outside the horizon"),
    ("gamma-range-reversed", ["--gamma-window", "4:2"], "0 <= A <= B"),
    ("gamma-range-malformed", ["--gamma-window", "1-3"], "--gamma-window"),
    ("gamma-window-zero", ["--gamma-window", "0"], "B >= 1"),
    ("v-only-xi-unknown", ["--arm", "v_only_noise:xi=gaussian"], "measured, isotropic"),
    # issue 43, 5: "escape after 0 steps" (log K units on an accuracy, read the falling way)
    ("escape-accuracy-wrong-way-log-k", ["--escape", "acc_first<0.5logK"], "acc_first rises as a run learns"),
    ("escape-accuracy-wrong-way", ["--escape", "acc_cand<0.5"], "reads it the wrong way round"),
    ("escape-accuracy-in-log-k", ["--escape", "acc_cand>0.5logK"], "log K units are for the losses"),
    ("escape-accuracy-above-one", ["--escape", "acc_exact>1.5"], "strictly between 0 and 1"),
    ("escape-loss-wrong-way", ["--escape", "loss_first>3,hold=2"], "loss_first falls as a run learns"),
    ("escape-gap-wrong-way", ["--escape", "shuffle_gap<0.1", *FAMILY], "shuffle_gap rises as a run learns"),
    ("escape-gap-in-log-k", ["--escape", "shuffle_gap>0.1logK"], "log K units are for the losses"),
]


@pytest.mark.parametrize("case", FORK_INPUT, ids=lambda c: c[0])
def test_fork_input(case, parent, tmp_path, capsys):
    name, extra, fragment = case
    scratch = tmp_path / "t"
    scratch.mkdir()
    argv = [a.replace("{P}", str(parent)).replace("{T}", str(scratch)) for a in FORK + extra]
    _refused(argv, fragment, parent, capsys, scratch)


# ---------------------------------------------------------------------------- re-judging a family
STATUS_INPUT = [
    ("status-escape-malformed", ["--escape", "loss_first<<3"], "finite number"),
    ("status-escape-unknown-metric", ["--escape", "accuracy>0.9"], "unknown metric"),
    ("status-escape-hold-past-horizon", ["--escape", "loss_first<3,hold=5"], "longer than the horizon (4 steps"),
    ("status-gamma-range-past-window", ["--gamma-window", "2:4"], "outside the window its forks measured"),
    ("status-gamma-range-reversed", ["--gamma-window", "3:1"], "0 <= A <= B"),
    ("status-escape-wrong-way", ["--escape", "acc_first<0.5logK"], "the wrong way round"),  # issue 43, 5
]


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("case", STATUS_INPUT, ids=lambda c: c[0])
def test_status_input(case, as_json, family, capsys):
    name, extra, fragment = case
    _refused(["fork", "status", str(family), *extra, *(["--json"] if as_json else [])], fragment, family, capsys)


def test_status_rejudges_the_logs_and_names_the_criterion(family, capsys):
    saved = snapshot(family, cache=False)
    _, out, _ = run_main(["fork", "status", str(family), "--json"], capsys)
    own = json.loads(out)
    assert {r["escape_criterion"] for r in own["table"]} == {"loss_cand<0.5logK"}
    assert own["comparison"]["y"] == "escape" and own["comparison"]["criterion"] == "loss_cand<0.5logK"
    assert own["comparison"]["gamma_range"] == "1:3"
    logs = [json.loads(line) for f in family.glob("at*/metrics.jsonl") for line in f.read_text().splitlines()]
    top = max(r["loss_first"] for r in logs) + 5.0  # every evaluation is below it, from the fork on
    code, out, _ = run_main(["fork", "status", str(family), "--json", "--escape", f"loss_first<{top:.3f},hold=3",
                             "--gamma-window", "2:3"], capsys)
    blob = json.loads(out)
    assert {r["escape_criterion"] for r in blob["table"]} == {f"loss_first<{top:.3f},hold=3".replace(".000", "")}
    assert blob["comparison"]["criterion"].startswith("loss_first<") and blob["comparison"]["gamma_range"] == "2:3"
    assert code == 0 and all(r["escape"] == 0 and not r["censored_escape"] for r in blob["table"])
    code, out, _ = run_main(["fork", "status", str(family), "--escape", f"loss_first<{top:.3f},hold=3"], capsys)
    assert f"[loss_first < {float(f'{top:.3f}'):g} held 3 steps]" in out and "escape 0" in out
    assert snapshot(family, cache=False) == saved, "re-judging wrote to the family"


def test_a_family_without_gamma_refuses_a_gamma_range(parent, tmp_path, capsys):
    out = tmp_path / "fam"
    code, _, err = _main(["fork", str(parent), "--at", "20", "--arm", "minibatch,full_batch", "--steps", "1",
                          "--out", str(out), "--quiet"])
    assert code in (0, 1), err
    _refused(["fork", "status", str(out), "--gamma-window", "1"], "without --gamma-every", out, capsys)


def test_the_report_names_the_criterion_it_judged_under(family, tmp_path):
    from interp.report.forks import fork_family_report

    own = fork_family_report(family, tmp_path / "own.html").read_text()
    assert 'id="arms-escape"' not in own and 'id="arms-escape_half"' in own  # the default: tau_half's table
    assert "loss_cand &lt; 0.5 log K, no hold" in own
    page = fork_family_report(family, tmp_path / "held.html", escape="loss_first<90,hold=3",
                              gamma_window="2:3").read_text()
    assert 'id="arms-escape"' in page and "escape: loss_first &lt; 90 held 3 steps" in page
    assert "re-judged from the logs (the family&#x27;s: loss_cand &lt; 0.5 log K, no hold)" in page
    assert "Gamma median 2:3" in page and "the per-step median over steps 2..3" in page
