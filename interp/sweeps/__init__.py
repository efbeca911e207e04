"""Families of runs: a sweep folder of ordinary runs (a collection, `interp.collections`, trained
and analysed by its executors), and the fits of the paper's family-level claims (`interp.sweeps.scaling`)."""
