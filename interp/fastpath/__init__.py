"""The fast forward engine: partial forward passes of a HookedTransformer that recompute only
what an intervention can reach, for the interp model family.

- `block`: the one block implementation (layer norm, QKV projection, causal attention over a
  shared past, after-attention and MLP, unembedding), used by everything below;
- `support`: the one check of which models it computes faithfully (`usable`: supported and no
  hook attached, the question every caller asks before taking the fast path);
- `resume`: resume a forward from a layer and position with a patched residual stream or
  patched head outputs, reusing a cached base run (activation patching);
- `tree`: prefixes shared by K continuations, run once each and recorded; resumed from any
  layer with some heads' outputs replaced (candidate metrics and ablation).

TransformerLens's own `start_at_layer` does the same for a whole batch but recomputes every
position, the shared prefix K times and the patched layer's attention: it is slower on every
one of these uses (numbers in benchmarks/README.md); it is the reference the tests compare with.
"""

from interp.fastpath.resume import BaseCache, base_cache, resume_from_resid, resume_from_z, resume_from_z_at
from interp.fastpath.support import check_supported, has_active_hooks, problems, supported, usable
from interp.fastpath.tree import Tree, resume_tree, run_tree

__all__ = [
    "BaseCache", "Tree", "base_cache", "check_supported", "has_active_hooks", "problems", "resume_from_resid",
    "resume_from_z", "resume_from_z_at", "resume_tree", "run_tree", "supported", "usable",
]
