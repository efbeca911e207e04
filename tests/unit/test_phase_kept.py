"""docs/phase.md's measured tables are what its kept per-run CSV gives: the cells and eta_c per K recomputed from
docs/data/phase/phase-tiny.csv (`interp phase --csv`) with the cutoff the docs state, and the Q laws from the same
rows (`interp scaling --q`'s fits)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from interp.sweeps.dissipation import q_laws
from interp.sweeps.phase import phase_of_runs

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "docs" / "data" / "phase" / "phase-tiny.csv"
DOC = ROOT / "docs" / "phase.md"


def _kept():
    runs = pd.read_csv(CSV)
    runs["outcome"] = runs["outcome"].where(runs["outcome"].notna(), None)
    return runs


def test_the_kept_runs_are_the_presets_design():
    runs = _kept()
    assert len(runs) == 36 and set(runs["k"]) == {5, 10, 20} and set(runs["lr"]) == {1e-3, 3e-3, 1e-2, 3e-2}
    assert set(runs["outcome"]) <= {"transitioned", "stuck", "diverged", "inconclusive"}


def test_docs_tables_are_the_kept_csvs():
    text = DOC.read_text()
    cutoff = float(re.search(r"calibrated profile cutoff (\d+\.\d+)", text).group(1))
    result = phase_of_runs(_kept(), "phase-tiny", cutoff=cutoff)
    for line in result.markdown():
        assert line in text, line
    for law in q_laws(_kept()):
        assert law.summary("Q_dz") in text, law.summary("Q_dz")
