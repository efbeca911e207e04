"""Step 3: ablate every head before, at and after the transition (tau/4, tau, 2 tau; a step
that lies beyond the run is left out).

    python examples/03_ablate_mid_transition.py [RUN] [zero|mean|resample]
"""

import sys

import interp
from interp.analysis import ablation

run = interp.Run.open(sys.argv[1] if len(sys.argv) > 1 else "checkpoints/demo")
method = sys.argv[2] if len(sys.argv) > 2 else "zero"

table = ablation.at(run, steps="pre,mid,post", method=method, n_examples=128)
wide = table.pivot_table(index="component", columns="label", values="delta_loss_cand", sort=False)
print(f"{method} ablation: change in candidate loss (nats; log K = {run.log_k:.2f})")
print(wide[[c for c in ("pre", "mid", "post") if c in wide]].round(3).to_string())
heads = table[table["head"].notna()]  # single heads (the L{l} rows ablate whole layers)
worst = heads[heads["label"] == "mid"].sort_values("delta_loss_cand").iloc[-1]
print(f"\nat tau (step {worst['step']}), removing {worst['component']} costs "
      f"{worst['delta_loss_cand']:+.2f} nats of candidate loss and moves the shuffle gap "
      f"from {worst['clean_shuffle_gap']:.2f} to {worst['shuffle_gap']:.2f}")
