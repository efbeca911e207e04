"""Collections of runs: a sweep (`interp.sweeps`) and a fork family (`interp.forks`) are both
folders of ordinary run folders, one per point, and share everything here.

    collection  the base class: points, their states, runs, counts, the state after training
    states      a point's state from its run folder alone (done, running, failed, damaged, ...)
    rows        a point's columns of the table: its identity and its transition measures
    executors   where jobs run (a local process pool, or Ray), whatever the job does
    training    the training job, and `train_points`: train every unfinished point
    folders     `interp.open(path)`: a Run, a Sweep or a ForkFamily; `interp ls`'s discovery
"""
