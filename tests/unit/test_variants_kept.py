"""The measured tables of the author's program (docs/data/variants/, written by `analyses/variants.py --csv`) re-judge
to the claims docs/variants.md shows: each claim's row there holds the claim's name, our estimate and its verdict as
`interp.mechanisms.variants` gives them today, so the docs cannot drift from the rules or the data."""

from pathlib import Path

import pandas as pd
import pytest

from interp.mechanisms import variants as V

ROOT = Path(__file__).resolve().parents[2]
KEPT = sorted((ROOT / "docs" / "data" / "variants").glob("*.csv"))
DOCS = (ROOT / "docs" / "variants.md").read_text()


def test_every_preset_has_its_kept_table():
    assert {p.stem for p in KEPT} == {*V.SWEEP_VERDICTS, *V.FAMILY_VERDICTS}


@pytest.mark.parametrize("csv", KEPT, ids=lambda p: p.stem)
def test_a_kept_table_rejudges_to_the_docs_rows(csv):
    table = pd.read_csv(csv)
    assert set(table["status"]) == {"done"}, csv
    claims = V.judge_table(csv.stem, table)
    assert claims
    rows = [line for line in DOCS.splitlines() if line.startswith("|")]
    for claim in claims:
        row = next((r for r in rows if f"| {claim.name} |" in r), None)
        assert row is not None, f"docs/variants.md has no row for {claim.name!r}"
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert claim.ours in cells and claim.verdict == cells[-1], (claim.line(), row)


def test_an_unknown_preset_is_named():
    with pytest.raises(ValueError, match="unknown preset 'nope'; known: k1-control-tiny"):
        V.judge_table("nope", pd.DataFrame())
