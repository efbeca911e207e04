"""Step 1: open the demo run, load a checkpoint as a HookedTransformer, look at one head.

    python examples/01_load_checkpoint.py [RUN]
"""

import sys

import torch

import interp

run = interp.Run.open(sys.argv[1] if len(sys.argv) > 1 else "checkpoints/demo")
print(run)
print("saved steps:", run.steps)
tau = interp.tau(run)
print(f"tau_half = {tau}, tau_window = {interp.tau(run, kind='window')}")

# Every checkpoint is a transformer_lens.HookedTransformer: hooks, caches and all.
model = run.model("last")
task = run.task
example = task.tokens[:1]
print("example:", task.decode(example[0]))

# Cache only the hook we read (names_filter), on the input up to the decision position.
dec = task.layout.decision_pos
_, cache = model.run_with_cache(example[:, : dec + 1], names_filter="blocks.0.attn.hook_pattern")
pattern = cache["blocks.0.attn.hook_pattern"][0]  # [head, query, key]
z_pos = list(task.layout.z_pos)
for head in range(model.cfg.n_heads):
    mass = pattern[head, dec, z_pos].sum()
    print(f"L0H{head}: attention from the decision position (pos {dec}) to z (pos {z_pos}) = {mass:.3f}")

# The prediction at the decision position is the first target character.
with torch.no_grad():
    logits = model(example[:, : dec + 1])[0, dec]
top = torch.topk(logits.softmax(-1), 3)
print("top first-token predictions:", [(task.decode(torch.tensor([int(i)])), round(float(p), 3))
                                       for p, i in zip(top.values, top.indices)])
print("target:", task.decode(example[0, dec + 1 : dec + 2]))
