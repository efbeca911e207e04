"""The paper's numbers for the family-level claims, drawn beside our fits and figures.

A leaf module: it imports nothing from interp, so the fits (`interp.sweeps.fits`,
`interp.sweeps.conditions`) and the figures (`interp.plots.sweep`) both read it without
depending on each other.
"""

PAPER_DELTA = 1.19                       # tau ~ D^delta, D from 3k to 36k (K varied at n_bases = 1000)
PAPER_DELTA_CI = (1.14, 1.31)            # 95% CI, one seed per point, bootstrap over points
PAPER_DELTA_RANGE = (3_000, 36_000)
PAPER_FIXED_D = 10_000
PAPER_FIXED_D_TAU = {5: 1600, 10: 1650, 20: 1600, 36: 1600}  # K -> tau at D = 10,000
PAPER_LR_K = 20
PAPER_LR_MEASURE = "tau_window"
PAPER_LR_TAU = {3e-4: 2100, 5e-4: 2200, 1e-3: 3400, 2e-3: 7550}  # lr -> tau_window at K = 20
PAPER_LR_NEVER = 5e-3                    # never snaps ...
PAPER_LR_NEVER_STEPS = 50_000            # ... within this many steps
PAPER_LR_RATIO = (7.0, 3.6)              # "7x lr gives 3.6x tau"
PAPER_ASYMMETRY = (1.7, 4.4)             # a_to_b needs 1.7-4.4x the steps of bz_to_a

# the circuits across a family (the author's follow-up, docs/definitions.md "Shuffle-gap lead")
PAPER_LEAD_SHARE = 0.52                  # the shuffle gap's lead, (t_loss - t(dz > 0.1)) / t_loss, mean over K = 3..36
PAPER_LEAD_SHARE_SD = 0.14               # ... and its spread over K
PAPER_LEAD_SHARE_K = {3: 0.20, 10: 0.47, 36: 0.68}
PAPER_LEAD_EXPONENT = 2.13               # the lead in steps grows as K^2.13
PAPER_ROUTING = "L0H3"                   # the routing head of the paper's run (K = 10), in layer 0
PAPER_ABLATION_K = 10
PAPER_ABLATION_AT_TAU = 1.41             # zero-ablating it mid-transition raised the candidate loss by 1.41 nats
