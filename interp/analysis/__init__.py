"""The analyses (one module each) and their registry, loaded first so that `interp.seeding` knows
their random streams before any analysis draws one."""

from interp.analysis import registry  # noqa: F401  (declares the analyses' streams to interp.seeding)
