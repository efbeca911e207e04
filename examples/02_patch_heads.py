"""Step 2: activation patching at tau: which heads carry the selector z to the decision?

    python examples/02_patch_heads.py [RUN]

Clean (B, z1 -> A1) and corrupted (B, z2 -> A2) share B; we patch each head's clean output
into the corrupted run and read the logit difference at the decision position.
"""

import sys

import interp
from interp.analysis import patching
from interp.analysis.common import select_steps

run = interp.Run.open(sys.argv[1] if len(sys.argv) > 1 else "checkpoints/demo")
((mid, _),) = select_steps(run, "mid")  # the saved step nearest tau

heads = patching.heads(run, step=mid, n_pairs=64)
all_pos = heads[heads["position"].isna()].sort_values("patched_ld", ascending=False)
print(f"step {mid}: clean LD {all_pos['clean_ld'].iloc[0]:.2f}, corrupt LD {all_pos['corrupt_ld'].iloc[0]:.2f}")
print("heads patched at every position (normalised: 1 = clean restored, 0 = no effect):")
print(all_pos[["head_name", "patched_ld", "normalized"]].round(3).to_string(index=False))

# Per position: where does the routing head's clean output matter?
top = all_pos["head_name"].iloc[0]
per_pos = heads[(heads["head_name"] == top) & heads["position"].notna()]
print(f"\n{top} by position:")
print(per_pos[["position", "segment", "normalized"]].round(3).to_string(index=False))

residual = patching.residual(run, step=mid)
best = residual.loc[residual.groupby("layer")["normalized"].idxmax()]
print("\nresidual stream: the most restoring position per layer")
print(best[["layer", "position", "segment", "normalized"]].round(3).to_string(index=False))
