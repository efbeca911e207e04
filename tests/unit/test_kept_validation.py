"""Kept tables judged from damaged CSVs (issue 54: 6): each damage the probe found is refused in one line naming what
is wrong, before anything is judged, instead of a traceback or a silently changed verdict."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from interp.errors import InterpError
from interp.mechanisms.kept import rejudge

DATA = Path(__file__).resolve().parents[2] / "docs" / "data"


def damaged(tmp_path, source: str, edit) -> Path:
    table = pd.read_csv(DATA / source)
    out = tmp_path / source
    edited = edit(table)
    if isinstance(edited, str):
        out.write_text(edited)
    else:
        edited.to_csv(out, index=False)
    return out


def _set(column, value, row=0):
    def edit(t):
        t[column] = t[column].astype(object)
        t.loc[row, column] = value
        return t
    return edit


CASES = [
    ("duplicated-rows", "landauer-dense-wide-tiny.csv", lambda t: pd.concat([t, t.iloc[:3]]), "has 2 rows"),
    ("duplicated-fork", "forks-relapse-depth-tiny-lr0.03.csv", lambda t: pd.concat([t, t.iloc[[0]]]), "has 2 rows"),
    ("no-escape", "forks-tiny.csv", lambda t: t.drop(columns=["escape"]), "needs the column(s) escape"),
    ("fork-step-text", "forks-tiny.csv", _set("fork_step", "fifty", 2), "column fork_step holds 'fifty'"),
    ("censored-maybe", "forks-tiny.csv", _set("censored_escape", "maybe"), "column censored_escape holds 'maybe'"),
    ("mixed-kinds", "forks-tiny.csv", _set("kind", "sweep"), "several kinds"),
    ("tau-text", "landauer-dense-tiny.csv", _set("tau_half", "n/a", 1), "column tau_half holds 'n/a'"),
    ("no-gap-lead", "landauer-dense-tiny.csv", lambda t: t.drop(columns=["gap_lead"]), "needs the column(s) gap_lead"),
    ("kind-foo", "demo.csv", lambda t: t.assign(kind="foo"), "kind 'foo' is not one of"),
    ("empty-file", "demo.csv", lambda t: "", "is empty"),
    ("no-arm", "forks-tiny.csv", lambda t: t.drop(columns=["arm"]), "needs the column(s) arm"),
    ("no-fork-step", "forks-tiny.csv", lambda t: t.drop(columns=["fork_step"]), "needs the column(s) fork_step"),
    ("no-relapsed", "forks-tiny.csv", lambda t: t.drop(columns=["relapsed"]), "needs the column(s) relapsed"),
    ("no-status", "forks-tiny.csv", lambda t: t.drop(columns=["status"]), "needs the column(s) status"),
    ("no-steps-run", "forks-tiny.csv", lambda t: t.drop(columns=["steps_run"]), "needs the column(s) steps_run"),
    ("ev-tau-text", "demo.csv", _set("ev_tau", "soon"), "column ev_tau holds 'soon'"),
    ("d-text", "landauer-dense-tiny.csv", _set("D", "big"), "column D holds 'big'"),
    ("escape-text", "forks-tiny.csv", _set("escape", "x"), "column escape holds 'x'"),
    ("steps-run-text", "forks-tiny.csv", _set("steps_run", "all"), "column steps_run holds 'all'"),
    ("status-unknown", "forks-tiny.csv", _set("status", "finished"), "status 'finished' is not one of"),
]


@pytest.mark.parametrize("case,source,edit,fragment", CASES, ids=[c[0] for c in CASES])
def test_a_damaged_kept_table_is_refused_in_one_line(tmp_path, case, source, edit, fragment):
    path = damaged(tmp_path, source, edit)
    with pytest.raises(InterpError) as caught:
        rejudge(path)
    message = str(caught.value)
    assert fragment in message and "\n" not in message, message


def test_every_kept_table_in_docs_data_is_valid_and_judged():
    for path in sorted(DATA.glob("*.csv")):
        assert rejudge(path).rows, path
