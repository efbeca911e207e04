"""Linear probes for z: when is the selector *linearly decodable* at the position that predicts the answer?

At the decision position (the SEP whose logits predict a1), the residual stream after the embeddings ("embed",
layer -1) and after every block ("L0", "L1", ...) is read over a seeded probe of whole groups (one forward with
`names_filter`: `interp.analysis.representations.decision_record`). A multinomial logistic probe for the example's
selector (K classes, chance 1/K) is fit on the examples of 80% of the probe's bases and scored on the other 20%
(docs/analyses.md, "Probes"; SPEC 12):

- accuracy and cross_entropy (nats) on the held-out bases;
- control_accuracy: the same probe on the control task of Hewitt and Liang (2019), the labels permuted within
  each base's K examples (a fixed random permutation per base): a probe that reads z itself cannot predict a
  held-out base's own permutation, so it sits at chance there; selectivity = accuracy - control_accuracy;
- decodable: accuracy >= 1/K + 0.9 (1 - 1/K) and selectivity >= 0.5.

The probe minimises c sum_i CE_i + ||W||^2 / 2 (no penalty on the intercept) on features standardised with the
training examples' mean and spread: scikit-learn's `LogisticRegression(C=c)` objective (c = 0.1 by default), which
its tests check it against. Every site's probe is fit at once, batched, by L-BFGS in float32 (its control in a second
batch). The first checkpoint from which a site stays decodable for `ONSET_M` checkpoints is its decodable onset
(`findings`), beside the routing head's carried and used onsets.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import pandas as pd
from jaxtyping import Bool, Float, Int

from interp.analysis.common import across_of, group_examples, probe_groups
from interp.analysis.findings import Rows, lead
from interp.analysis.registry import Analysis, N_GROUPS
from interp.errors import InterpError
from interp.runs import Run
from interp.seeding import torch_generator
from interp.transition import ONSET_M, onset

# torch is imported where the code computes, so that reading cached results (a report's findings) never loads it;
# where torch is already loaded (the tests), its names are bound here for jaxtyping's runtime checks of the annotations
if TYPE_CHECKING or "torch" in sys.modules:
    from torch import Tensor, nn

DEFAULTS = {"n_groups": 64, "c": 0.1}  # the probe of representations, lens and sensitivity: one forward for all
HELD_OUT = 0.2  # the share of the probe's bases the probe is scored on
DECODABLE_SHARE = 0.9  # of the way from chance to 1
DECODABLE_SELECTIVITY = 0.5
COLUMNS = ("step", "layer", "site", "accuracy", "cross_entropy", "train_accuracy", "control_accuracy",
           "selectivity", "chance", "decodable", "n_train", "n_test")


def base_split(n_groups: int, seed: int) -> Bool[Tensor, " g"]:
    """Which of the probe's groups (bases) are held out: a seeded 20% (at least one, and one left to train on)."""
    import torch

    if n_groups < 2:
        raise InterpError(f"a probe scored on held-out bases needs at least 2 bases, got {n_groups}")
    n_test = min(n_groups - 1, max(1, round(HELD_OUT * n_groups)))
    order = torch.randperm(n_groups, generator=torch_generator(seed, "probes"))
    held = torch.zeros(n_groups, dtype=torch.bool)
    held[order[:n_test]] = True
    return held


def control_labels(labels: Int[Tensor, " n"], group: Int[Tensor, " n"], k: int, seed: int) -> Int[Tensor, " n"]:
    """The control task: each base's selector labels through a fixed random permutation of its own."""
    import torch

    gen = torch_generator(seed, "probes")
    n_groups = int(group.max()) + 1
    perms = torch.argsort(torch.rand(n_groups, k, generator=gen), dim=1)
    return perms[group, labels]


def fit_logistic(x: Float[Tensor, "site n d"], y: Int[Tensor, "*site n"], k: int, c: float = 1.0,
                 max_iter: int = 100) -> tuple[Float[Tensor, "site d k"], Float[Tensor, "site k"]]:
    """Multinomial logistic regression of `y` (0..k-1; one label per example, or one row of labels per site) on
    every site's features at once (float32, L-BFGS): minimises, per site, c * the sum of the cross-entropies +
    ||W||^2 / 2, the intercept unpenalised (the sites' problems are independent: one joint minimum is all of theirs)."""
    import torch

    x = x.float()
    s, n, d = x.shape
    w = torch.zeros(s, d, k, dtype=torch.float32, requires_grad=True)
    b = torch.zeros(s, k, dtype=torch.float32, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], lr=1, max_iter=max_iter, tolerance_grad=1e-4, tolerance_change=1e-9,
                            history_size=20, line_search_fn="strong_wolfe")
    target = (y.view(1, n).expand(s, n) if y.dim() == 1 else y).reshape(-1)

    def closure():
        opt.zero_grad()
        logits = torch.baddbmm(b.unsqueeze(1), x, w)  # [s, n, k]
        loss = c * torch.nn.functional.cross_entropy(logits.reshape(s * n, k), target, reduction="sum")
        loss = loss + 0.5 * w.pow(2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    return w.detach().double(), b.detach().double()


def score(w: Float[Tensor, "site d k"], b: Float[Tensor, "site k"], x: Float[Tensor, "site n d"],
          y: Int[Tensor, " n"]) -> tuple[Float[Tensor, " site"], Float[Tensor, " site"]]:
    """(accuracy, mean cross-entropy in nats) of each site's probe on (x, y)."""
    import torch

    logits = torch.baddbmm(b.unsqueeze(1), x.double(), w)
    s, n, k = logits.shape
    ce = torch.nn.functional.cross_entropy(logits.reshape(s * n, k), y.view(1, n).expand(s, n).reshape(-1),
                                           reduction="none").view(s, n).mean(1)
    return (logits.argmax(-1) == y).double().mean(1), ce


def standardise(train: Float[Tensor, "site n d"], *others: Float[Tensor, "site m d"]) -> list[Tensor]:
    """Features centred and scaled by the training examples' mean and spread per site and dimension (a constant
    dimension, as the embeddings at the decision position are, is left at 0)."""
    import torch

    train = train.double()
    mean, std = train.mean(1, keepdim=True), train.std(1, keepdim=True)
    std = torch.where(std > 1e-12, std, torch.ones_like(std))
    return [(t.double() - mean) / std for t in (train, *others)]


def probe_sites(resid: Float[Tensor, "site n d"], labels: Int[Tensor, " n"], group: Int[Tensor, " n"],
                held: Bool[Tensor, " g"], k: int, seed: int, c: float = 1.0) -> dict[str, Tensor]:
    """The probe and its control at every site: per-site accuracy, cross_entropy, train_accuracy,
    control_accuracy (held-out bases), as float64 tensors [site]."""
    test = held[group]
    x_train, x_test = standardise(resid[:, ~test], resid[:, test])
    control = control_labels(labels, group, k, seed)
    sites = resid.shape[0]
    # the probe on every site in one batched fit, and its control in another (a joint L-BFGS would share one line
    # search between the two, and the control's harder problem would hold the probe's back)
    w_probe, b_probe = fit_logistic(x_train, labels[~test], k, c)
    w_ctrl, b_ctrl = fit_logistic(x_train, control[~test], k, c)
    accuracy, ce = score(w_probe, b_probe, x_test, labels[test])
    train_accuracy, _ = score(w_probe, b_probe, x_train, labels[~test])
    control_accuracy, _ = score(w_ctrl, b_ctrl, x_test, control[test])
    assert accuracy.shape == (sites,)
    return {"accuracy": accuracy, "cross_entropy": ce, "train_accuracy": train_accuracy,
            "control_accuracy": control_accuracy, "n_train": int((~test).sum()), "n_test": int(test.sum())}


def decodable(accuracy, selectivity, k: int):
    """The rule (SPEC 12): held-out accuracy at least 0.9 of the way from chance to 1, selectivity at least 0.5."""
    return (accuracy >= 1 / k + DECODABLE_SHARE * (1 - 1 / k)) & (selectivity >= DECODABLE_SELECTIVITY)


def at_step(run: Run, step: int, *, model: nn.Module | None = None, n_groups: int | None = DEFAULTS["n_groups"],
            c: float = DEFAULTS["c"], device: str = "cpu") -> pd.DataFrame:
    """The selector probe at `step` at every site (module docstring), over a seeded probe of `n_groups` whole
    groups (all when None or more): one row per site with the columns of COLUMNS."""
    import torch

    from interp.analysis.representations import decision_residuals, site_names

    task = run.task
    if not task.has_selector:
        raise InterpError(f"direction {task.spec.direction!r} has no selector to probe for")
    groups = probe_groups(task, n_groups, run.spec.seed)
    if model is None:
        model = run.model(step, device=device)
    idx = group_examples(task, groups)
    resid = decision_residuals(model, task, groups).cpu()
    labels = task.selector_id[idx]
    group = torch.arange(len(groups)).repeat_interleave(task.k)
    held = base_split(len(groups), run.spec.seed)
    found = probe_sites(resid, labels, group, held, task.k, run.spec.seed, c)
    sites = site_names(model.cfg.n_layers)
    df = pd.DataFrame({"step": step, "layer": range(-1, len(sites) - 1), "site": sites})
    for name in ("accuracy", "cross_entropy", "train_accuracy", "control_accuracy"):
        df[name] = found[name].numpy()
    df["selectivity"] = df["accuracy"] - df["control_accuracy"]
    df["chance"] = 1 / task.k
    df["decodable"] = decodable(df["accuracy"], df["selectivity"], task.k)
    df["n_train"], df["n_test"] = found["n_train"], found["n_test"]
    return df[list(COLUMNS)]


across = across_of("probes")
ENTRY = Analysis(
    "probes", __name__,
    "linear probes for z on the residual stream at the decision position (held-out bases, a control task), "
    "every checkpoint",
    options=(N_GROUPS,), stream="probes", order=25, groups=(("decoding", 1), ("circuits", 5)),
)


# ---------------------------------------------------------------------------- findings and summary rows
def decodable_onsets(table: pd.DataFrame, m: int = ONSET_M) -> dict[str, int | None]:
    """Per site, the first checkpoint from which z stays decodable for m checkpoints (None: never)."""
    out = {}
    for site, part in table.sort_values("step").groupby("site", sort=False):
        out[str(site)] = onset(part["step"], part["decodable"].astype(float), 0.5, m=m, above=True)
    return out


def findings(run: Run, tables: dict, t: int | None, found: dict) -> dict:
    table = tables.get("probes")
    if table is None or table.empty:
        return {}
    onsets = decodable_onsets(table)
    dated = {site: step for site, step in onsets.items() if step is not None}
    first = min(dated.values()) if dated else None
    site = min(dated, key=lambda s: (dated[s], s)) if dated else None
    last = table[table["step"] == table["step"].max()]
    return {"decodable_onsets": onsets, "decodable_onset": first, "decodable_site": site,
            "decodable_lead": lead(t, first),
            "probe_accuracy_last": {str(r.site): float(r.accuracy) for r in last.itertuples()}}


def rows(found: dict, tables: dict) -> Rows:
    if "decodable_onsets" not in found:
        return []
    first = found.get("decodable_onset")
    per_site = ", ".join(f"{site} {'never' if step is None else step}" for site, step in found["decodable_onsets"].items())
    lead_text = "" if found.get("decodable_lead") is None else f" (lead {found['decodable_lead']:.2f})"
    text = (f"z is linearly decodable at the decision position from step {first} ({found['decodable_site']}){lead_text}"
            if first is not None else "z never becomes linearly decodable at the decision position")
    return [("z decodable", f"{text}; by site: {per_site} (held-out accuracy >= 0.9 of the way from chance, "
                            f"selectivity >= 0.5)")]


__all__ = ["at_step", "across", "fit_logistic", "probe_sites", "decodable_onsets"]
