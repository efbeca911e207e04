"""Which mechanism holds the plateau: the rules (`rules`), the numbers behind them (`evidence`)
and the table that puts each candidate mechanism beside its evidence (`table`); see
docs/mechanisms.md. `mechanisms(path)` builds the table of a run, a sweep or a fork family."""

from interp.mechanisms.table import MechanismTable, mechanisms

__all__ = ["MechanismTable", "mechanisms"]
