"""Step 6: one fork. Continue the demo's frozen state at tau/2 on the full-batch gradient.

    python examples/06_fork.py [RUN] [OUT_DIR]

The demo ships its optimizer-complete state at tau/2 (step 500), so nothing is replayed; the
fork trains 25 steps on the full-training-set gradient (no sampling
noise; about 1.7 s a step, 20 minibatch steps' worth). The fork is an ordinary run folder: its steps continue the demo's, and
every analysis works on it. Running it again trains nothing. The same from the command line:
`interp fork checkpoints/demo --at tau/2 --arm full_batch --steps 25 --out OUT_DIR`.
"""

import sys

import interp
from interp.forks.family import escapes

run = sys.argv[1] if len(sys.argv) > 1 else "checkpoints/demo"
out = sys.argv[2] if len(sys.argv) > 2 else "forks/example"
demo = interp.Run.open(run)
fork = interp.fork(demo, "tau/2", "full_batch", steps=25, out=out, progress=False)
block = fork.fork
print(f"forked {block['parent']} at step {block['parent_step']} ({block['state']}), arm {block['arm']}")
rows = fork.metrics[["step", "loss_cand"]].assign(lc_over_logk=lambda d: d["loss_cand"] / fork.log_k)
print(rows.to_string(index=False))
esc = escapes(fork, block["parent_step"], (fork.status or {}).get("state", ""))
print("escape to tau_half:", f"> {esc['steps_run']} steps (censored)" if esc["censored_escape_half"]
      else f"{esc['escape_half']:.0f} steps after the fork")
