"""Losses and diagnostics shared by training and analyses (docs/definitions.md, "Metrics").

All functions are batched and chunked; `model` is anything mapping tokens [n, seq] to
logits [n, seq, vocab] (a HookedTransformer, or a hand-built module in tests).

Definitions:
- full loss: mean cross-entropy over the output tokens (a1..a4 and EOS);
- first-token loss L1: cross-entropy of the first output token at the decision position;
- candidate loss Lc: scores s_j = log P(A_j, EOS | input) for the K candidates of the group,
  loss -log softmax(s)_k for the correct k; the first-token variant restricts a softmax of the
  decision-position logits to the K candidates' first tokens;
- shuffle gap dz = L1(B, z', A) - L1(B, z, A), z' a selector of the same group, never the
  correct one; `shuffle_gap_full` is the same substitution scored on the full loss (a1..a4 and
  EOS), which also sees z being read at the later output positions;
- accuracies: first-token argmax, candidate argmax, exact match (teacher-forced argmax right
  at every output position, which is the same as greedy decoding reproducing the target).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int
from torch import Tensor

from interp.fastpath import run_tree, usable
from interp.fastpath.objective import scored_logits
from interp.names import HIERARCHY_GAPS, METRICS
from interp.task import Task

Model = Callable[[Tensor], Tensor]
DEFAULT_CHUNK = 1024  # sequences per forward: 14% faster than 2048 on the CPU (activations stay in cache)

PER_EXAMPLE = METRICS  # every metric evaluate_examples returns, in table order


def _device(model: Model) -> torch.device:
    params = getattr(model, "parameters", None)
    first = next(params(), None) if params is not None else None
    return first.device if first is not None else torch.device("cpu")


def _wide(logits: Tensor) -> Tensor:
    """Metrics in at least float32 (float64 models keep float64)."""
    return logits if logits.dtype == torch.float64 else logits.float()


def output_logprobs(
    model: Model, tokens: Int[Tensor, "n seq"], loss_pos: tuple[int, ...], chunk_size: int = DEFAULT_CHUNK
) -> tuple[Float[Tensor, "n out"], Bool[Tensor, "n out"], Float[Tensor, "n vocab"]]:
    """Log-probability of each output token, whether it is the argmax, and the first-position logits.

    `loss_pos` are the consecutive positions whose logits predict the next token; inputs are
    truncated after the last of them, so nothing is computed that cannot matter. A plain
    HookedTransformer runs the fast path's forward (`interp.fastpath.objective.scored_logits`);
    a hooked one, or anything else, its own forward.
    """
    first, last = loss_pos[0], loss_pos[-1]
    targets = tokens[:, first + 1 : last + 2]
    device = _device(model)
    fast = usable(model)  # the fast path's forward: no hook points, the last layer at the scored positions only
    logps, hits, first_logits = [], [], []
    for start in range(0, len(tokens), chunk_size):
        chunk = tokens[start : start + chunk_size, : last + 1].to(device)
        logits = _wide(scored_logits(model, chunk, loss_pos) if fast else model(chunk)[:, first : last + 1])
        logp = logits.log_softmax(-1)
        tgt = targets[start : start + chunk_size].to(logits.device)
        logps.append(logp.gather(-1, tgt.unsqueeze(-1)).squeeze(-1).cpu())
        hits.append((logits.argmax(-1) == tgt).cpu())
        first_logits.append(logits[:, 0].cpu())
    return torch.cat(logps), torch.cat(hits), torch.cat(first_logits)


def first_token_nll(
    logits: Float[Tensor, "n vocab"], target: Int[Tensor, " n"]
) -> Float[Tensor, " n"]:
    return F.cross_entropy(logits, target, reduction="none")


def tree_logprobs(
    first_logits: Float[Tensor, "n vocab"],
    cont_logits: Float[Tensor, "n k c vocab"],
    outputs: Int[Tensor, "n k out"],
) -> tuple[Float[Tensor, "n k out"], Bool[Tensor, "n k out"]]:
    """Log-probability and argmax hit of each output token of K continuations of a prefix:
    the first from the prefix's last logits, the rest from the continuation logits."""
    first_logits, cont_logits = _wide(first_logits), _wide(cont_logits)
    first_lp = first_logits.log_softmax(-1).gather(-1, outputs[:, :, 0])
    cont_lp = cont_logits.log_softmax(-1).gather(-1, outputs[:, :, 1:].unsqueeze(-1)).squeeze(-1)
    first_hit = first_logits.argmax(-1, keepdim=True) == outputs[:, :, 0]
    hit = torch.cat([first_hit.unsqueeze(-1), cont_logits.argmax(-1) == outputs[:, :, 1:]], -1)
    return torch.cat([first_lp.unsqueeze(-1), cont_lp], -1), hit


def candidate_logprobs(
    model: Model, task: Task, idx: Int[Tensor, " n"], chunk_size: int = DEFAULT_CHUNK
) -> tuple[Float[Tensor, "n k out"], Bool[Tensor, "n k out"], Float[Tensor, "n vocab"]]:
    """Log-probability and argmax hit of every output token of every candidate, and the
    decision-position logits. Plain HookedTransformers run each shared prefix once and only
    the K continuations after it (`interp.fastpath.tree`); anything else runs the K full sequences."""
    layout = task.layout
    n, k = len(idx), task.k
    if not usable(model):
        seqs = task.with_candidates(idx).reshape(n * k, -1)
        logp, hit, first_logits = output_logprobs(model, seqs, layout.loss_pos, chunk_size)
        return logp.reshape(n, k, -1), hit.reshape(n, k, -1), first_logits.reshape(n, k, -1)[:, 0]
    device = _device(model)
    cands = task.candidates(idx)
    logps, hits, firsts = [], [], []
    per_chunk = max(1, chunk_size // k)
    for start in range(0, n, per_chunk):
        sel = slice(start, start + per_chunk)
        prefix = task.tokens[idx[sel], : layout.decision_pos + 1].to(device)
        cand = cands[sel].to(device)
        tree = run_tree(model, prefix, cand[:, :, :-1])
        logp, hit = tree_logprobs(tree.first_logits, tree.cont_logits, cand)
        logps.append(logp.cpu())
        hits.append(hit.cpu())
        firsts.append(_wide(tree.first_logits).cpu())
    return torch.cat(logps), torch.cat(hits), torch.cat(firsts)


def candidate_nll(
    scores: Float[Tensor, "n k"], correct: Int[Tensor, " n"]
) -> Float[Tensor, " n"]:
    """-log softmax(scores)_correct: the candidate loss of each example."""
    return -scores.log_softmax(-1).gather(-1, correct.unsqueeze(-1)).squeeze(-1)


@torch.no_grad()
def evaluate_examples(
    model: Model,
    task: Task,
    idx: Int[Tensor, " n"],
    alt_selector: Int[Tensor, " n"] | None = None,
    chunk_size: int = DEFAULT_CHUNK,
) -> dict[str, Tensor]:
    """Every per-example metric of PER_EXAMPLE for the examples `idx` (NaN where undefined), and for a task with
    a hierarchy its two shuffle gaps (`hierarchy_gaps`).

    `alt_selector` is the z' of the shuffle gaps; it must never equal the example's own
    selector (draw it with `task.other_selectors`).
    """
    layout = task.layout
    check_alt_selector(task, idx, alt_selector)
    cand = own = shuffled = None
    if task.has_candidates:
        cand = candidate_logprobs(model, task, idx, chunk_size)
    else:
        own = output_logprobs(model, task.tokens[idx], layout.loss_pos, chunk_size)
    if task.has_selector and alt_selector is not None:
        logp, _, first = output_logprobs(model, task.with_selector(idx, alt_selector), layout.loss_pos, chunk_size)
        shuffled = (logp, first)
    out = assemble(task, idx, cand=cand, own=own, shuffled=shuffled)
    if task.spec.hierarchy is not None and alt_selector is not None:
        out.update(hierarchy_gaps(model, task, idx, alt_selector, out["loss_first"], chunk_size))
    return out


def hierarchy_selectors(task: Task, idx: Int[Tensor, " n"],
                        alt_selector: Int[Tensor, " n"]) -> tuple[Int[Tensor, " n"], Int[Tensor, " n"]]:
    """(z1 swapped, z2 swapped): for each example the selector with only its cluster character z1 changed (another
    cluster, same within-cluster character), and the one with only z2 changed; the other cluster (character) is
    taken from the example's random z' (`alt_selector`), so it is uniform-like over the K1 - 1 (K2 - 1) others."""
    k1, k2 = task.spec.hierarchy_factors
    own = task.selector_id[idx]
    c, t = own // k2, own % k2
    c_alt = (c + 1 + alt_selector % (k1 - 1)) % k1
    t_alt = (t + 1 + alt_selector % (k2 - 1)) % k2
    return c_alt * k2 + t, c * k2 + t_alt


def hierarchy_gaps(model: Model, task: Task, idx: Int[Tensor, " n"], alt_selector: Int[Tensor, " n"],
                   loss_first: Float[Tensor, " n"], chunk_size: int = DEFAULT_CHUNK) -> dict[str, Tensor]:
    """The hierarchy's two shuffle gaps (`TaskSpec.hierarchy`; names.HIERARCHY_GAPS): the first-token loss with z1
    alone swapped (another cluster), and with z2 alone swapped (another candidate of the same cluster), less the
    clean first-token loss. The plateau at log K2 shows z1 read and z2 not: gap_z1 > 0, gap_z2 ~ 0."""
    layout = task.layout
    target_first = task.tokens[idx, layout.decision_pos + 1]
    out = {}
    for name, alt in zip(HIERARCHY_GAPS, hierarchy_selectors(task, idx, alt_selector)):
        _, _, first = output_logprobs(model, task.with_selector(idx, alt), layout.loss_pos, chunk_size)
        out[name] = first_token_nll(first, target_first) - loss_first
    return out


def check_alt_selector(task: Task, idx: Int[Tensor, " n"], alt_selector: Int[Tensor, " n"] | None) -> None:
    if alt_selector is not None and bool((alt_selector == task.selector_id[idx]).any()):
        raise ValueError("shuffle gap: alt_selector must never be the example's own selector")


def assemble(
    task: Task,
    idx: Int[Tensor, " n"],
    cand: tuple[Tensor, Tensor, Tensor] | None = None,
    own: tuple[Tensor, Tensor, Tensor] | None = None,
    shuffled: tuple[Tensor, Tensor] | None = None,
) -> dict[str, Tensor]:
    """The PER_EXAMPLE metrics from log-probabilities already computed (by any forward):

    - `cand`: (logp [n, K, out], hit [n, K, out], decision logits [n, vocab]) of the K
      candidates (directions whose output is A);
    - `own`: the same for the example's own output only (the other directions);
    - `shuffled`: (logp [n, out], decision logits [n, vocab]) with z replaced by z'.
    """
    layout = task.layout
    n = len(idx)
    nan = torch.full((n,), math.nan, dtype=torch.float64)
    correct = task.selector_id[idx]
    target_first = task.tokens[idx, layout.decision_pos + 1]
    out: dict[str, Tensor] = {}
    if cand is not None:
        logp, hit, first_logits = cand
        scores = logp.sum(-1)
        own_index = correct.view(n, 1, 1).expand(n, 1, logp.shape[-1])
        own_logp = logp.gather(1, own_index).squeeze(1)
        own_hit = hit.gather(1, own_index).squeeze(1)
        out["loss_cand"] = candidate_nll(scores, correct)
        prefix = task.spec.unique_prefix
        if prefix == 1:
            cand_first = task.candidates(idx)[:, :, 0]
            out["loss_cand_first"] = candidate_nll(first_logits.gather(-1, cand_first), correct)
        else:  # the candidates differ in their first `prefix` characters, which are scored together
            out["loss_cand_first"] = candidate_nll(logp[:, :, :prefix].sum(-1), correct)
        out["acc_cand"] = (scores.argmax(-1) == correct).float()
    else:
        own_logp, own_hit, first_logits = own
        out["loss_cand"] = out["loss_cand_first"] = out["acc_cand"] = nan
    out["loss"] = -own_logp.mean(-1)
    out["loss_first"] = first_token_nll(first_logits, target_first)
    out["acc_first"] = own_hit[:, 0].float()
    out["acc_exact"] = own_hit.all(-1).float()
    if shuffled is not None:
        shuffled_logp, shuffled_first = shuffled
        out["shuffle_gap"] = first_token_nll(shuffled_first, target_first) - out["loss_first"]
        out["shuffle_gap_full"] = -shuffled_logp.mean(-1) - out["loss"]
    else:
        out["shuffle_gap"] = out["shuffle_gap_full"] = nan
    return {name: out[name] for name in PER_EXAMPLE}


def summarize(per_example: dict[str, Tensor]) -> dict[str, float]:
    """Means over examples (NaN stays NaN for metrics a direction does not define)."""
    return {name: float(values.mean()) for name, values in per_example.items()}


def batch_loss(
    model: Model, tokens: Int[Tensor, "n seq"], loss_pos: tuple[int, ...]
) -> Float[Tensor, ""]:
    """The training objective: mean cross-entropy over the output tokens."""
    first, last = loss_pos[0], loss_pos[-1]
    logits = model(tokens[:, : last + 1])[:, first : last + 1]
    targets = tokens[:, first + 1 : last + 2]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def batch_loss_and_first(
    model: Model, tokens: Int[Tensor, "n seq"], loss_pos: tuple[int, ...]
) -> tuple[Float[Tensor, ""], Float[Tensor, ""]]:
    """`batch_loss` (the same operations, so the same gradient bit for bit) and, from the same logits
    (no second forward), the batch's mean full-vocabulary first-token cross-entropy, detached: the
    author's per-batch first_target_loss (SPEC 9.1)."""
    first, last = loss_pos[0], loss_pos[-1]
    logits = model(tokens[:, : last + 1])[:, first : last + 1]
    targets = tokens[:, first + 1 : last + 2]
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    with torch.no_grad():
        loss_first = F.cross_entropy(_wide(logits[:, 0].detach()), targets[:, 0])
    return loss, loss_first


@torch.no_grad()
def inbatch_shuffled_first_loss(
    model: Model, tokens: Int[Tensor, "n seq"], z_pos: tuple[int, ...], decision_pos: int, perm: Int[Tensor, " n"]
) -> float:
    """The author's loss_z_shuffled (SPEC 9.1): the mean full-vocabulary first-token cross-entropy of
    a batch whose z is permuted across its rows (row i gets row perm[i]'s z; a row may get its own,
    so this dz estimate is biased low by about 1/K). Call in eval mode."""
    shuffled = tokens.clone()
    cols = torch.tensor(z_pos, device=tokens.device)
    shuffled[:, cols] = tokens[perm.to(tokens.device)][:, cols]
    logits = model(shuffled[:, : decision_pos + 1])[:, decision_pos]
    return float(F.cross_entropy(_wide(logits), shuffled[:, decision_pos + 1]))
