"""Families of runs: a sweep folder of ordinary runs, executors that train them, and the fits
of the paper's family-level claims (`interp.sweeps.scaling`)."""
