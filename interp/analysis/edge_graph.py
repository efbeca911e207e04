"""The edge graph of the interp model family, and one forward pass over it that can patch or differentiate edges.

Senders write into the residual stream: the embeddings (token + position), each head (its hook_z @ W_O,
TransformerLens's hook_result, computed here without `use_attn_result`) and each MLP. Receivers read it: each
head's query, key and value input (TransformerLens's `use_split_qkv_input`), each MLP's input (`use_hook_mlp_in`)
and the logits (the input of the final LayerNorm). An edge runs from a sender to every later receiver. The
residual stream entering a receiver is the sum of its senders' outputs and the attention biases b_O; since those
are the same in every run, a receiver's input with some edges patched is its input in the run minus, for each
patched edge, (the sender's output in the run - its output in the reference run). That is `forward`'s `mix`:
every edge patch in one batched pass (exact edge patching, a circuit's faithfulness). Its `leaves` add zero
tensors to every receiver's input, whose gradients are the ones EAP multiplies with sender differences.

Clean and corrupted inputs agree before z, so every run (patched, interpolated) agrees there too: the forward
starts at z's first position, with the earlier positions' keys and values as a shared past (`Pairs`), and edges
are scored from there on (a sender's clean and corrupted outputs are equal before it). The last layer computes
queries, the MLP and the logits at the output position alone (the only one that reaches the logits); sender
outputs there are recorded at that position and zero elsewhere, as are the gradients of receivers computed there
(their other positions reach nothing: the gradient there is exactly zero).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jaxtyping import Float

# torch is imported where the code computes; bound here where it is loaded (jaxtyping's runtime checks in the tests)
if TYPE_CHECKING or "torch" in sys.modules:
    from torch import Tensor, nn

QKV = ("q", "k", "v")


@dataclass(frozen=True)
class EdgeGraph:
    """Senders, receivers and the edges between them for a model of `n_layers` layers of `n_heads` heads.

    Sender order: embed, then per layer its heads and its MLP. Receiver order: per layer the heads' q inputs,
    k inputs, v inputs and the MLP input, then the logits. A sender feeds a receiver when it comes before it
    (`rank`: embed -1, layer l's heads 2l, its MLP 2l + 1; a receiver of layer l's attention 2l, its MLP 2l + 1,
    the logits 2 n_layers)."""

    n_layers: int
    n_heads: int
    senders: tuple[str, ...] = field(init=False)
    receivers: tuple[str, ...] = field(init=False)
    sender_rank: tuple[int, ...] = field(init=False)
    receiver_rank: tuple[int, ...] = field(init=False)
    edges: tuple[tuple[int, int], ...] = field(init=False)  # (sender, receiver) indices, sender-major

    def __post_init__(self):
        L, H = self.n_layers, self.n_heads
        senders, s_rank, receivers, r_rank = ["embed"], [-1], [], []
        for l in range(L):
            senders += [f"L{l}H{h}" for h in range(H)] + [f"MLP{l}"]
            s_rank += [2 * l] * H + [2 * l + 1]
            receivers += [f"L{l}H{h}.{x}" for x in QKV for h in range(H)] + [f"MLP{l}"]
            r_rank += [2 * l] * 3 * H + [2 * l + 1]
        receivers.append("logits")
        r_rank.append(2 * L)
        edges = tuple((s, r) for s in range(len(senders)) for r in range(len(receivers)) if s_rank[s] < r_rank[r])
        for name, value in (("senders", senders), ("receivers", receivers), ("sender_rank", s_rank),
                            ("receiver_rank", r_rank), ("edges", edges)):
            object.__setattr__(self, name, tuple(value))

    @classmethod
    def of(cls, model: nn.Module) -> EdgeGraph:
        return cls(model.cfg.n_layers, model.cfg.n_heads)

    def attn_receivers(self, layer: int) -> range:
        first = layer * (3 * self.n_heads + 1)
        return range(first, first + 3 * self.n_heads)

    def mlp_receiver(self, layer: int) -> int:
        return layer * (3 * self.n_heads + 1) + 3 * self.n_heads

    @property
    def logits_receiver(self) -> int:
        return len(self.receivers) - 1

    def edge_names(self) -> list[str]:
        return [f"{self.senders[s]}->{self.receivers[r]}" for s, r in self.edges]

    def mask(self) -> Tensor:
        """[S, R] bool: which (sender, receiver) pairs are edges."""
        import torch

        return torch.tensor(self.sender_rank).view(-1, 1) < torch.tensor(self.receiver_rank).view(1, -1)

    def index(self, name: str) -> int:
        """The position in `edges` of an edge named "SENDER->RECEIVER" (ValueError naming it otherwise)."""
        names = self.edge_names()
        if name not in names:
            raise ValueError(f"no edge {name!r} in a model of {self.n_layers} layers of {self.n_heads} heads")
        return names.index(name)


@dataclass
class Mix:
    """Edge patches of k variants of each of n examples: receiver r's input in variant v gets
    sum_s w[v, s, r] (ref_s - out_s), where out_s is sender s's output in the run and ref_s its output in the
    reference run on the same example (w = 1: the edge carries the reference value)."""

    w: Float[Tensor, "k s r"]
    ref: Float[Tensor, "s n c d"]


@dataclass
class Pass:
    logits: Tensor  # [n, k, vocab] at the last position
    outs: Tensor | None = None  # [S, n, k, c, d] sender outputs (when recorded)


def _stack(outs: list[Tensor], c: int) -> Tensor:
    """[S, n, k, c, d] from outputs at c or 1 (the last layer's: the last position) positions, zero-padded."""
    import torch

    return torch.stack([o if o.shape[2] == c else torch.cat([o.new_zeros(*o.shape[:2], c - 1, o.shape[3]), o], 2)
                        for o in outs])


def _mixed(mix: Mix | None, outs: list[Tensor], receivers, last: bool) -> Tensor | None:
    """The patch of `receivers`' inputs, [n, k, c, R, d] (c = 1 at the last position alone, when `last`)."""
    import torch

    if mix is None:
        return None
    w = mix.w[:, : len(outs), list(receivers)]  # the senders so far are exactly the ones before these receivers
    if not bool(w.any()):
        return None
    ref = mix.ref[: len(outs), :, -1:] if last else mix.ref[: len(outs)]
    run = torch.stack([o[:, :, -1:] if last else o for o in outs])  # [S', n, k, c, d]
    return torch.einsum("ksr,snkcd->nkcrd", w, ref.unsqueeze(2) - run)


def _heads_in(block: nn.Module, x: Tensor, kind: str, per_head: bool) -> Tensor:
    """Queries, keys or values [..., H, e] from LayerNormed inputs: one per head ([..., H, d]) or shared ([..., d])."""
    import torch

    from interp.fastpath.block import project

    if not per_head:
        return project(block, x, kind)
    attn = block.attn
    return torch.einsum("...hd,hde->...he", x, getattr(attn, f"W_{kind}")) + getattr(attn, f"b_{kind}")


def forward(
    model: nn.Module,
    graph: EdgeGraph,
    x: Float[Tensor, "n k c d"],
    past: list[tuple[Tensor, Tensor]] | None = None,
    mix: Mix | None = None,
    leaves: list[Tensor] | None = None,
    record: bool = False,
) -> Pass:
    """Logits at the last position of k variants of n examples from the embeddings `x` of positions p..p+c-1,
    the earlier positions' keys and values being `past` (per layer, [n, p, H, e]: the same in every variant);
    with the edge patches `mix` and the receivers' inputs shifted by `leaves` (the layout of `zero_leaves`);
    `record`: keep every sender's output. A layer whose receivers no patch reaches computes one LayerNorm and
    one projection for all heads, as the model does."""
    import torch

    from interp.fastpath.block import attend, layer_norm, mlp, unembed

    H, L = graph.n_heads, graph.n_layers
    resid, outs = x, [x]
    for l, block in enumerate(model.blocks):
        last, attn = l == L - 1, block.attn
        shifts = [e for e in (_mixed(mix, outs, graph.attn_receivers(l), False), leaves[2 * l] if leaves else None)
                  if e is not None]
        split = bool(shifts)
        normed = layer_norm(block.ln1, resid.unsqueeze(3) + sum(shifts) if split else resid)
        pick = (lambda i: normed[..., i * H : (i + 1) * H, :]) if split else (lambda i: normed)  # noqa: E731
        q = _heads_in(block, pick(0)[:, :, -1:] if last else pick(0), "Q", split)
        k, v = _heads_in(block, pick(1), "K", split), _heads_in(block, pick(2), "V", split)
        z = attend(attn, q, k, v, *(past[l] if past else (None, None)))
        heads = torch.einsum("nkqhe,hed->hnkqd", z, attn.W_O)  # each head's output (hook_result)
        mid = (resid[:, :, -1:] if last else resid) + heads.sum(0) + attn.b_O
        outs.extend(heads.unbind(0))
        m_in = mid
        for extra in (_mixed(mix, outs, [graph.mlp_receiver(l)], last), leaves[2 * l + 1] if leaves else None):
            m_in = m_in if extra is None else m_in + extra.reshape(m_in.shape)
        out = mlp(block, layer_norm(block.ln2, m_in))
        outs.append(out)
        resid = mid + out
    final = resid[:, :, -1]
    for extra in (_mixed(mix, outs, [graph.logits_receiver], True), leaves[-1] if leaves else None):
        final = final if extra is None else final + extra.reshape(final.shape)
    return Pass(unembed(model, final), _stack(outs, x.shape[2]) if record else None)


def zero_leaves(graph: EdgeGraph, x: Float[Tensor, "n k c d"]) -> list[Tensor]:
    """Zero tensors added to every receiver's input, requiring gradients: per layer [n, k, c, 3H, d] (its heads'
    q, k, v inputs) and [n, k, c or 1, d] (its MLP's), then [n, k, d] (the logits')."""
    n, k, c, d = x.shape
    out = []
    for l in range(graph.n_layers):
        out.append(x.new_zeros(n, k, c, 3 * graph.n_heads, d).requires_grad_())
        out.append(x.new_zeros(n, k, 1 if l == graph.n_layers - 1 else c, d).requires_grad_())
    out.append(x.new_zeros(n, k, d).requires_grad_())
    return out


def receiver_grads(graph: EdgeGraph, grads: list[Tensor], c: int) -> Tensor:
    """`zero_leaves`' gradients as [R, n, k, c, d] in receiver order (zero where a receiver is not computed)."""
    out = []
    for l in range(graph.n_layers):
        out.extend(grads[2 * l].movedim(3, 0).unbind(0))
        out.append(grads[2 * l + 1])
    out.append(grads[-1].unsqueeze(2))
    return _stack(out, c)


# ---------------------------------------------------------------------------- the pairs, attribution and patching
def logit_diff(logits: Float[Tensor, "*b vocab"], good: Tensor, bad: Tensor) -> Float[Tensor, "*b"]:
    """The patching analysis's metric, logit(a1 of A1) - logit(a1 of A2), per example; `good` and `bad` [n]
    index the first dimension of logits [n, ...]."""
    shape = (-1,) + (1,) * (logits.dim() - 1)
    pick = lambda i: logits.gather(-1, i.view(shape).expand(*logits.shape[:-1], 1))[..., 0]  # noqa: E731
    return pick(good) - pick(bad)


@dataclass
class Pairs:
    """Clean / corrupted pairs ready for the edge forward: they agree before position `start` (z's first), so
    there every run is the same and the forward starts at `start` with those positions' keys and values as past."""

    start: int
    clean: Tensor  # [n, c, d] embeddings of positions start..
    corrupt: Tensor
    past: list[tuple[Tensor, Tensor]]  # per layer [n, start, H, e]
    good: Tensor
    bad: Tensor

    @property
    def n(self) -> int:
        return len(self.good)


def prepare(model: nn.Module, clean: Tensor, corrupt: Tensor, good: Tensor, bad: Tensor) -> Pairs:
    """`Pairs` of token rows [n, T] that end at the output position."""
    import torch

    from interp.fastpath import base_cache
    from interp.fastpath.block import embed

    differs = torch.nonzero((clean != corrupt).any(0)).view(-1)
    start = int(differs[0]) if len(differs) else clean.shape[1] - 1
    with torch.no_grad():
        past = []
        if start:
            cache = base_cache(model, corrupt[:, :start])
            past = [(k, v) for k, v in zip(cache.k, cache.v)]
        e = lambda tokens: embed(model, tokens[:, start:], start)  # noqa: E731
        return Pairs(start, e(clean), e(corrupt), past, good, bad)


def recorded(model: nn.Module, graph: EdgeGraph, pairs: Pairs, which: str) -> tuple[Tensor, Tensor]:
    """The clean or corrupted run's sender outputs [S, n, c, d] and logit difference per example [n]."""
    import torch

    with torch.no_grad():
        run = forward(model, graph, getattr(pairs, which).unsqueeze(1), pairs.past or None, record=True)
    return run.outs[:, :, 0], logit_diff(run.logits[:, 0], pairs.good, pairs.bad)


def attribution(model: nn.Module, graph: EdgeGraph, pairs: Pairs, ig_steps: int = 1,
                clean_outs: Tensor | None = None, corrupt_outs: Tensor | None = None) -> Tensor:
    """Attribution scores [S, R] (zero off the edges): the sum over positions of (clean - corrupted sender output)
    . d mean LD / d receiver input, with the gradient taken at the corrupted run (EAP, `ig_steps` = 1) or averaged
    over `ig_steps` runs on embeddings interpolated from the corrupted towards the clean ones at alpha = j / m,
    j = 0..m-1 (EAP-IG's interpolation of the inputs, Hanna et al. 2024; m = 1 is EAP)."""
    import torch

    clean_outs = recorded(model, graph, pairs, "clean")[0] if clean_outs is None else clean_outs
    corrupt_outs = recorded(model, graph, pairs, "corrupt")[0] if corrupt_outs is None else corrupt_outs
    alphas = torch.arange(ig_steps, dtype=pairs.clean.dtype, device=pairs.clean.device).view(1, -1, 1, 1) / ig_steps
    x = pairs.corrupt.unsqueeze(1) + alphas * (pairs.clean - pairs.corrupt).unsqueeze(1)  # [n, m, c, d]
    leaves = zero_leaves(graph, x)
    with torch.enable_grad():
        out = forward(model, graph, x, pairs.past or None, leaves=leaves)
        metric = logit_diff(out.logits, pairs.good, pairs.bad).sum() / (pairs.n * ig_steps)
        grads = torch.autograd.grad(metric, leaves)
    g = receiver_grads(graph, list(grads), x.shape[2]).sum(2)  # [R, n, c, d]: the steps' mean, times m
    scores = torch.einsum("sncd,rncd->sr", clean_outs - corrupt_outs, g)
    return scores * graph.mask().to(scores.device)


def patched_lds(model: nn.Module, graph: EdgeGraph, pairs: Pairs, which: str, ref: Tensor, w: Tensor,
                chunk_rows: int = 2048) -> Tensor:
    """Mean LD [V] of the clean or corrupted run (`which`) with each variant's edge patches w[v] ([V, S, R])
    towards the reference run's sender outputs `ref` ([S, n, c, d]), variants in chunks of about `chunk_rows`."""
    import torch

    x0 = getattr(pairs, which).unsqueeze(1)
    per = max(1, chunk_rows // pairs.n)
    out = []
    with torch.no_grad():
        for start in range(0, len(w), per):
            part = w[start : start + per]
            run = forward(model, graph, x0.expand(-1, len(part), -1, -1), pairs.past or None, mix=Mix(part, ref))
            out.append(logit_diff(run.logits, pairs.good, pairs.bad).mean(0))
    return torch.cat(out)


def one_edge_weights(graph: EdgeGraph, edges: list[int] | None = None) -> Tensor:
    """[V, S, R]: variant v patches edge edges[v] alone (every edge when None)."""
    import torch

    chosen = list(range(len(graph.edges)) if edges is None else edges)
    w = torch.zeros(len(chosen), len(graph.senders), len(graph.receivers))
    w[torch.arange(len(chosen)), [graph.edges[e][0] for e in chosen], [graph.edges[e][1] for e in chosen]] = 1.0
    return w


def exact_patching(model: nn.Module, graph: EdgeGraph, pairs: Pairs, edges: list[int] | None = None,
                   clean_outs: Tensor | None = None) -> Tensor:
    """Mean LD [E] of the corrupted run with one edge's sender clean in its receiver's input alone: that input is
    the corrupted one + (clean - corrupted sender output), everything else as the corrupted run computes it
    (every edge when `edges` is None). Its difference from the corrupted LD is what EAP approximates."""
    clean_outs = recorded(model, graph, pairs, "clean")[0] if clean_outs is None else clean_outs
    w = one_edge_weights(graph, edges).to(clean_outs.device)
    return patched_lds(model, graph, pairs, "corrupt", clean_outs, w)


def circuit_weights(graph: EdgeGraph, order: Tensor, sizes: list[int]) -> Tensor:
    """[V, S, R]: variant v patches every edge outside the first sizes[v] edges of `order` (edge indices)."""
    import torch

    s_idx = torch.tensor([s for s, _ in graph.edges])[order]
    r_idx = torch.tensor([r for _, r in graph.edges])[order]
    w = torch.zeros(len(sizes), len(graph.senders), len(graph.receivers))
    for v, k in enumerate(sizes):
        w[v, s_idx[k:], r_idx[k:]] = 1.0
    return w


def faithfulness_curve(model: nn.Module, graph: EdgeGraph, pairs: Pairs, order: Tensor,
                       corrupt_outs: Tensor | None = None, sizes: list[int] | None = None) -> Tensor:
    """Mean LD [V] of the clean run with every edge outside the top sizes[v] edges of `order` patched to its
    corrupted value (sizes 0..E by default): no edge kept is the corrupted run, every edge the clean one."""
    corrupt_outs = recorded(model, graph, pairs, "corrupt")[0] if corrupt_outs is None else corrupt_outs
    sizes = list(range(len(graph.edges) + 1)) if sizes is None else sizes
    w = circuit_weights(graph, order, sizes).to(corrupt_outs.device)
    return patched_lds(model, graph, pairs, "clean", corrupt_outs, w)
