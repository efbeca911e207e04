"""Delta at other thresholds (interp.sweeps.thresholds, `interp scaling --threshold`; issue 51: 4): on a table whose
tau at each fraction follows a known power law the fit recovers each delta, the spread is numpy's range, mean and
population std of them, judged by the author's cut-offs; a fraction no run reaches is a note; sweeps pool into one
table with their runs kept apart."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from interp.cli_sweep import pooled_table
from interp.errors import InterpError
from interp.sweeps.thresholds import AUTHOR, parse_fractions, threshold_robustness, verdict

DELTAS = {0.3: 1.25, 0.4: 1.21, 0.5: 1.20, 0.6: 1.17, 0.7: 1.13}


def _table(deltas=DELTAS, seeds=3) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for k in (3, 5, 7, 10, 15, 20):
        for seed in range(seeds):
            d = 1000 * k
            row = {"run": f"k{k}-s{seed}", "status": "done", "error": None, "direction": "bz_to_a", "D": d, "k": k,
                   "n_bases": 1000, "seed": seed, "lr": 1e-3, "batch_size": 128, "steps_run": 10**6}
            for f, delta in deltas.items():
                row[f"tau_{f:g}"] = 0.01 * f * d**delta * float(np.exp(rng.normal(0, 0.01)))
                row[f"censored_tau_{f:g}"] = False
            rows.append(row)
    df = pd.DataFrame(rows)
    df["steps_run"] = df["steps_run"].astype("Int64")
    return df


def test_each_delta_is_recovered_and_the_spread_is_numpys():
    result = threshold_robustness(_table(), n_boot=200)
    got = result.deltas
    assert set(got) == set(DELTAS)
    for f, delta in DELTAS.items():
        assert got[f] == pytest.approx(delta, abs=0.02)
    d = np.array(list(got.values()))
    assert result.spread == pytest.approx({"range": d.max() - d.min(), "mean": d.mean(), "std": d.std()})
    assert verdict(result.spread["range"]) == "moderately robust"  # 0.12 as built
    assert verdict(0.05) == "robust" and verdict(0.25) == "sensitive"
    assert verdict(AUTHOR["range"]) == "moderately robust"  # 0.104: over the author's own 0.1
    assert "the author: range 0.104, mean 1.182, std 0.035" in result.lines()[-1]


def test_a_threshold_no_run_reaches_is_a_note():
    table = _table()
    table["tau_0.3"] = np.nan
    table["censored_tau_0.3"] = True
    result = threshold_robustness(table, n_boot=200)
    assert 0.3 not in result.fits and "too few points" in result.problems[0.3]
    assert len(result.fits) == 4


def test_fractions_are_parsed_or_refused():
    assert parse_fractions("all") == (0.3, 0.4, 0.5, 0.6, 0.7)
    assert parse_fractions("0.5,0.3") == (0.3, 0.5)
    for bad in ("0.35,0.5", "x", "0.5"):
        with pytest.raises(InterpError, match="--threshold"):
            parse_fractions(bad)


class _Sweep:
    def __init__(self, path, table):
        self.path, self._table = path, table

    def table(self):
        return self._table.copy()


def test_pooled_sweeps_keep_their_runs_apart(tmp_path):
    a, b = _table(seeds=1), _table(seeds=1)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    pooled = pooled_table([_Sweep(tmp_path / "a", a), _Sweep(tmp_path / "b", b)])
    assert len(pooled) == len(a) + len(b) and pooled["run"].is_unique
    assert set(pooled["run"].str.split("/").str[0]) == {"a", "b"}
    with pytest.raises(InterpError, match="the same sweep folder is given twice"):
        pooled_table([_Sweep(tmp_path / "a", a), _Sweep(tmp_path / "a", a)])
