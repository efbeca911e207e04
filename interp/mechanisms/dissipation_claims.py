"""The dissipation-law claims of the reconciliation table (q_law_*): the author's c of Q = c log(K / K*) at lr
3e-4, 1e-3, 3e-3 (SPEC 13.4), measured on a sweep's transitioned runs (`interp.sweeps.dissipation`)."""

from __future__ import annotations

import math

from interp.mechanisms.rules import Measure


def q_claims(g, sweep, table) -> None:
    """The dissipation-law claims (q_law_*): c of Q_dz = c log K + q0 over the sweep's transitioned runs at each of the
    author's learning rates (`interp.sweeps.dissipation`), or why not."""
    import numpy as np

    from interp.mechanisms.intervals import slope_t
    from interp.sweeps.dissipation import AUTHOR_C, transitioned_at
    from interp.sweeps.phase import phase_table

    runs = phase_table(sweep, table=table)
    lrs = sorted(set(runs["lr"].astype(float)))
    for lr in AUTHOR_C:
        key = f"q_law_{lr:g}"
        d = transitioned_at(runs, lr, "Q_dz")
        e = slope_t(np.log(d["k"].astype(float)), d["Q_dz"].astype(float)) if d["k"].nunique() >= 3 else None
        if e is None:
            g.missing[key] = (f"{len(d)} transitioned runs with Q at lr {lr:g} over {d['k'].nunique()} K (needs 3 K; "
                              f"the sweep's lrs: {', '.join(f'{v:g}' for v in lrs)})")
            continue
        g.ours[key] = Measure.of(e, f"Q_dz on log K at lr {lr:g}", {"n_x": e.n_x})
