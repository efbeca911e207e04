"""Number formatting shared by every printed or rendered table: one rule for missing values."""

from __future__ import annotations

import math


def fmt(value, spec: str = "", none: str = "-") -> str:
    """`format(value, spec)`, or `none` for a missing value (None or NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return none
    return format(value, spec)
