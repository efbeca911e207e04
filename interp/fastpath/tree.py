"""Forward passes over prefixes that share K continuations, and resumed from any layer.

The candidate metrics score the K candidates of a group after one input prefix: every
candidate sequence shares positions 0..P-1 and differs after them. `run_tree` runs each
prefix once and its K continuations against the prefix's keys and values (a stream with k = K
and the prefix as its past, `block.py`), and can record every layer's residual stream and
head outputs (hook_z). `resume_tree` takes such a record and recomputes from one layer on
with some heads' outputs replaced: ablating a head at layer L leaves everything below L
untouched, and at layer L itself only the heads' outputs change, so the attention of that
layer is never recomputed. Tests compare it with TransformerLens's forward and with hooks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.fastpath.block import after_attention, attention, embed, unembed
from interp.fastpath.support import check_supported


@dataclass
class Tree:
    """Per-layer activations of a forward over prefixes [n, P] and continuations [n, K, C]."""

    prefix_resid: list[Tensor]  # [n, P, d_model] entering each layer
    prefix_z: list[Tensor]  # [n, P, head, d_head]
    cont_resid: list[Tensor]  # [n, K, C, d_model]
    cont_z: list[Tensor]  # [n, K, C, head, d_head]
    first_logits: Tensor | None  # [n, vocab] at the last prefix position (None: stopped early)
    cont_logits: Tensor | None  # [n, K, C, vocab]


def _forward_from(
    model: nn.Module,
    layer: int,
    prefix: Float[Tensor, "b p d_model"],
    cont: Float[Tensor, "b k c d_model"],
    record: dict[str, list[Tensor]] | None = None,
    upto: int | None = None,
) -> tuple[Float[Tensor, "b vocab"], Float[Tensor, "b k c vocab"]] | None:
    """Layers `layer`.. from residual streams entering `layer`; logits at the last prefix
    position and at every continuation position. `record` collects each layer's inputs."""
    n_layers = model.cfg.n_layers
    stream = prefix.unsqueeze(1)
    for l in range(layer, n_layers):
        block = model.blocks[l]
        # after the last attention only the last prefix position is read (unless recorded)
        last = l == n_layers - 1
        z_p, k, v = attention(block, stream, last_only=last and record is None)
        z_c, _, _ = attention(block, cont, k[:, 0], v[:, 0])
        if record is not None:
            for key, value in (("prefix_resid", stream[:, 0]), ("prefix_z", z_p[:, 0]),
                               ("cont_resid", cont), ("cont_z", z_c)):
                record[key].append(value)
        if upto is not None and l == upto:
            return None
        stream = after_attention(block, stream[:, :, -1:] if last else stream, z_p[:, :, -1:] if last else z_p)
        cont = after_attention(block, cont, z_c)
    return unembed(model, stream[:, 0, -1]), unembed(model, cont)


@torch.no_grad()
def run_tree(
    model: nn.Module,
    prefix: Int[Tensor, "n p"],
    continuations: Int[Tensor, "n k c"],
    record: bool = False,
    upto: int | None = None,
) -> Tree:
    """Logits of K continuations of each prefix (the continuation tokens are inputs at
    positions P..P+C-1), running each shared prefix once. With `record`, also every
    layer's residual stream and head outputs (what `resume_tree` needs); with `upto`, only
    the layers up to that one are run and recorded (no logits)."""
    check_supported(model)
    acts: dict[str, list[Tensor]] = {"prefix_resid": [], "prefix_z": [], "cont_resid": [], "cont_z": []}
    out = _forward_from(model, 0, embed(model, prefix), embed(model, continuations, prefix.shape[1]),
                        acts if record else None, upto)
    first, cont = out if out is not None else (None, None)
    return Tree(**acts, first_logits=first, cont_logits=cont)


@torch.no_grad()
def resume_tree(
    model: nn.Module,
    tree: Tree,
    layer: int,
    prefix_z: Float[Tensor, "b p head d_head"],
    cont_z: Float[Tensor, "b k c head d_head"],
    rows: Int[Tensor, " b"],
) -> tuple[Float[Tensor, "b vocab"], Float[Tensor, "b k c vocab"]]:
    """Logits when layer `layer`'s head outputs are `prefix_z` and `cont_z` (row i of the
    batch continues recorded example rows[i]); the layers below come from the record."""
    block = model.blocks[layer]
    resid_p = tree.prefix_resid[layer][rows]
    resid_c = after_attention(block, tree.cont_resid[layer][rows], cont_z)
    if layer == model.cfg.n_layers - 1:
        return unembed(model, after_attention(block, resid_p[:, -1], prefix_z[:, -1])), unembed(model, resid_c)
    return _forward_from(model, layer + 1, after_attention(block, resid_p, prefix_z), resid_c)
