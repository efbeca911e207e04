"""Forks: continue a run's optimizer-complete state at a saved step under a changed regime.

    state     the state at any saved step: kept (--save-optimizer) or replayed and verified
    adamw     AdamW written out, each moment fed its own gradient
    arms      what each arm changes, its parameters and its training step
    fork      make one fork folder (`create_fork`) and train it (`fork`)
    family    a family of forks (steps x arms x seeds) trained like a sweep, and its table
    directions the Hessian bottom eigenvector for kicks (cached)

The comparison of arms is `interp.sweeps.forks.forks(table)` (`from interp import scaling`).
docs/forks.md explains the design and the arms.
"""
