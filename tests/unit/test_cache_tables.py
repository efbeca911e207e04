"""Cached tables read back exactly: values bit for bit and dtypes, missing values included."""

import math

import numpy as np
import pandas as pd

from interp.analysis.cache import decode_table, encode_table


def test_a_table_round_trips_bit_for_bit_with_its_dtypes():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({
        "step": np.arange(4, dtype=np.int64),
        "x32": rng.standard_normal(4).astype(np.float32),
        "x64": np.array([1 / 3, math.pi * 1e-300, np.nan, -0.1 - 0.2]),  # need all 17 digits
        "flag": [True, False, True, False],
        "name": pd.array(["L0H0", None, "L1H3", "z"], dtype="str"),
        "count": pd.array([1, None, 3, 4], dtype="Int64"),
    })
    back = decode_table(encode_table(df))
    pd.testing.assert_frame_equal(back, df, check_exact=True)
    assert list(back.dtypes.astype(str)) == list(df.dtypes.astype(str))
    assert back["x64"].iloc[3] == -0.1 - 0.2 and back["x32"].dtype == np.float32


def test_an_empty_table_keeps_its_columns():
    df = pd.DataFrame({"step": pd.Series([], dtype=np.int64), "v": pd.Series([], dtype=np.float32)})
    back = decode_table(encode_table(df))
    assert list(back.columns) == ["step", "v"] and list(back.dtypes.astype(str)) == ["int64", "float32"]
