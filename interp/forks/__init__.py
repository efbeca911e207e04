"""Forks: continue a run's optimizer-complete state at a saved step under a changed regime.

    arms      one class per arm (registered in ARMS): what it changes at the fork and at each step,
              its parameters, whether it has a seed, its place in tables
    arm_steps the arm's training step, and the stepper a fork is trained with (`fork_stepper`)
    fork      make one fork folder (`create_fork`) and train it (`fork`)
    family    a family of forks (steps x arms x seeds) trained like a sweep, and its table
    escape    when a fork has escaped (`--escape METRIC<THRESHOLD[,hold=STEPS]`) and the Gamma range
    directions the Hessian bottom eigenvector for kicks (cached)
    relapse   when a solved run (an lr fork of it) fell back to the marginal, and the state to fork there
    staged    a design made stage by stage: parent -> lr fork -> relapse -> family
    presets   named designs (forks-tiny, forks-relapse-tiny)

The state at a saved step (kept or replayed) is `interp.replay`; the explicit AdamW `interp.optimizer`.
The comparison of arms is `interp.sweeps.forks.forks(table)` (`from interp import scaling`).
docs/forks.md explains the design and the arms.
"""
