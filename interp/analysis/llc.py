"""Local learning coefficient (LLC) of checkpoints, whole model and refined per head, via devinterp.

The estimate is devinterp's (2.x): SGLD chains localised at the checkpoint w0 sample
exp(-n_beta L(w) - gamma/2 |w - w0|^2) with `devinterp.slt.sampling.sample`, and
`devinterp.slt.llc.compute_llc` turns the sampled losses into

    llc = n_beta * (mean sampled loss - loss at w0)        (per chain; nats * n_beta, unitless)

L is the training objective (mean cross-entropy over the output tokens) on batches of the
training set shuffled from the run's "llc" random stream. devinterp's per-token loss hook must
return [batch, seq - 1]; we broadcast each example's mean output cross-entropy over that shape,
so devinterp's mean, and its gradient, are exactly `interp.metrics.batch_loss`.

The refined LLC of a head samples only that head's slices of W_Q/W_K/W_V/W_O and b_Q/b_K/b_V
(`interp.analysis.params`, the grammar the Hessian's `restrict` uses; the same slices as
devinterp's weight restriction "l0h3"; SGMCMC multiplies update and noise by the mask, so every
other parameter stays bit-identical along the chain).

Settings (see DEFAULTS): chains, draws, burnin, epsilon (SGLD step size, devinterp's lr),
gamma (localisation), n_beta (inverse temperature times n; None: devinterp's
default_nbeta(batch_size) = b / log b), batch_size, init_loss_batches. devinterp 2.0.1's
estimator averages the loss over every SGLD step, burn-in included, so burnin defaults to 0.

devinterp writes its draws to a zarr store; we put it in a private temporary directory that
is deleted before returning, so nothing is written to the run or the repository. Global RNG
states (torch, numpy, random), which devinterp reseeds, are restored afterwards.
"""

from __future__ import annotations

import contextlib
import io
import random
import re
import tempfile
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.analysis import params
from interp.analysis.common import across_of, head_name
from interp.analysis.findings import Rows
from interp.analysis.registry import Analysis, Option, check_heads, parse_heads, positive_int
from interp.devices import deterministic_kernels
from interp.errors import InterpError
from interp.fastpath.objective import example_losses, fast_objective
from interp.runs import Run
from interp.seeding import torch_generator

RESTRICT = ("full", "L0H3")
DEFAULTS: dict = {
    "chains": 4,
    "draws": 120,  # SGLD steps per chain (one step between draws); 4 epochs of the demo at batch 100
    "burnin": 0,  # devinterp 2.0.1 averages burn-in steps into the estimate anyway
    "epsilon": 3e-4,  # SGLD step size
    "gamma": 1000.0,  # localisation strength (pull towards the checkpoint)
    "n_beta": None,  # None: devinterp.utils.default_nbeta(batch_size) = b / log b
    "batch_size": 100,
    "init_loss_batches": None,  # None: one epoch (every full batch of the training set)
    "restrict": RESTRICT,  # "full" and/or heads: the whole model's LLC and each head's refined one
}
COLUMNS = (
    "step", "restrict", "chain", "llc", "llc_mean", "llc_std", "drift", "init_loss", "n_params",
    "chains", "draws", "burnin", "epsilon", "gamma", "n_beta", "batch_size", "init_loss_batches",
)
SGLD = ("chains", "draws", "burnin", "epsilon", "gamma", "n_beta", "batch_size", "init_loss_batches")  # sample_llc's
INSTALL_HINT = "the LLC needs devinterp: pip install -e '.[landscape]'"

LossFn = Callable[[nn.Module, Tensor], Tensor]


def _devinterp():
    """devinterp's sampler and estimator (imported only when needed)."""
    try:
        from devinterp.slt.llc import compute_llc
        from devinterp.slt.sampling import sample
        from devinterp.utils import default_nbeta
    except ImportError as exc:
        raise InterpError(f"{INSTALL_HINT} ({exc})") from None
    return sample, compute_llc, default_nbeta


# ---------------------------------------------------------------------------- restrictions
def canonical_restriction(name: str, n_layers: int, n_heads: int) -> str:
    """'full' or a head 'L{layer}H{head}' (any case in, canonical out)."""
    heads = f"L0H0..L{n_layers - 1}H{n_heads - 1}"
    if not isinstance(name, str):
        raise InterpError(f"restriction must be a string ('full' or a head such as L0H3), got {name!r}")
    if name.strip().lower() == "full":
        return "full"
    try:
        return head_name(*params.check_head(re.sub(r"\s+", "", name), n_layers, n_heads))
    except InterpError:
        raise InterpError(f"unknown LLC restriction {name!r}; allowed: 'full' or a head {heads} (any case)") from None


def _restrictions(restrict: str | Sequence[str], n_layers: int, n_heads: int) -> list[str]:
    items = [restrict] if isinstance(restrict, str) else list(restrict)
    if not items:
        raise InterpError("restrict is empty; give 'full' and/or heads such as 'L0H3'")
    return list(dict.fromkeys(canonical_restriction(r, n_layers, n_heads) for r in items))


def param_masks(model: nn.Module, restriction: str) -> dict[str, Tensor | None]:
    """devinterp ParamMasks for 'full' or a head: name -> bool mask (None: the whole tensor).

    A head's masks are its slices of W_Q/W_K/W_V/W_O and b_Q/b_K/b_V
    (`interp.analysis.params.masks`, the selection the Hessian's `restrict` makes too; the
    same slices as devinterp's own restriction "l0h3").
    """
    canon = canonical_restriction(restriction, model.cfg.n_layers, model.cfg.n_heads)
    return params.masks(model, None if canon == "full" else canon)


def _n_selected(model: nn.Module, masks: dict[str, Tensor | None]) -> int:
    from interp.model import tl_params  # lazy: a cached report never imports the model

    tensors = tl_params(model)
    return sum(tensors[n].numel() if m is None else int(m.sum()) for n, m in masks.items())


# ---------------------------------------------------------------------------- the objective
def output_token_loss(
    model: nn.Module, input_ids: Int[Tensor, "b seq"], loss_pos: tuple[int, ...]
) -> Float[Tensor, "b seq-1"]:
    """Each example's mean output cross-entropy, broadcast over devinterp's [batch, seq - 1] shape.

    The mean over the result (devinterp's reduction) equals `interp.metrics.batch_loss`. Computed
    by `interp.fastpath.objective` (only what the loss reads) where the fast path supports the
    model and no hook is attached; by the model's own forward otherwise.
    """
    if fast_objective(model):
        per_example = example_losses(model, input_ids, loss_pos)
        return per_example.unsqueeze(1).expand(-1, input_ids.shape[1] - 1)
    first, last = loss_pos[0], loss_pos[-1]
    logits = model(input_ids[:, : last + 1])[:, first : last + 1]
    targets = input_ids[:, first + 1 : last + 2]
    per_token = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
    per_example = per_token.view(len(input_ids), -1).mean(-1)
    return per_example.unsqueeze(1).expand(-1, input_ids.shape[1] - 1)


class _Examples(torch.utils.data.Dataset):
    """Rows of a token tensor as devinterp's {"input_ids": ...} records."""

    def __init__(self, input_ids: Tensor):
        self.input_ids = input_ids

    def __len__(self) -> int:
        return len(self.input_ids)

    def __getitem__(self, i: int) -> dict[str, Tensor]:
        return {"input_ids": self.input_ids[i]}


@contextlib.contextmanager
def _quiet_and_isolated(device: str):
    """Restore the global RNGs devinterp reseeds, keep its progress bars off stderr, and use
    deterministic kernels on the CPU (its embedding gradients otherwise sum in a thread-dependent
    order; on a GPU they are left as they are: `interp.devices.deterministic_kernels`)."""
    np_state, py_state = np.random.get_state(), random.getstate()
    cuda = [torch.device(device)] if torch.device(device).type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=cuda), contextlib.redirect_stderr(io.StringIO()), \
                deterministic_kernels(device):
            yield
    finally:
        np.random.set_state(np_state)
        random.setstate(py_state)


def sample_llc(
    model: nn.Module,
    input_ids: Tensor,
    loss_fn: LossFn,
    masks: dict[str, Tensor | None] | None = None,
    *,
    seed: int = 0,
    chains: int = DEFAULTS["chains"],
    draws: int = DEFAULTS["draws"],
    burnin: int = DEFAULTS["burnin"],
    epsilon: float = DEFAULTS["epsilon"],
    gamma: float = DEFAULTS["gamma"],
    n_beta: float | None = DEFAULTS["n_beta"],
    batch_size: int = DEFAULTS["batch_size"],
    init_loss_batches: int | None = DEFAULTS["init_loss_batches"],
    device: str = "cpu",
) -> dict:
    """devinterp's LLC of any model: `input_ids` rows are the dataset, `loss_fn(model, ids)` the
    per-token loss [batch, seq - 1]. Returns per-chain values, their mean and std, the init
    loss, each chain's drift (n_beta times its mean loss over the second half of the steps minus
    the first half: far from 0 means the chain has not settled; free of batch noise when each
    half covers whole epochs) and n_beta."""
    sample, compute_llc, default_nbeta = _devinterp()
    if init_loss_batches is None:
        init_loss_batches = max(1, len(input_ids) // batch_size) if isinstance(batch_size, int) else 0
    for name, value in (("chains", chains), ("draws", draws), ("batch_size", batch_size),
                        ("init_loss_batches", init_loss_batches)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InterpError(f"{name} must be a positive integer, got {value!r}")
    if not isinstance(burnin, int) or burnin < 0:
        raise InterpError(f"burnin must be a non-negative integer, got {burnin!r}")
    if not epsilon > 0 or not gamma >= 0:
        raise InterpError(f"epsilon must be > 0 and gamma >= 0, got epsilon={epsilon!r}, gamma={gamma!r}")
    if batch_size > len(input_ids):
        raise InterpError(f"batch_size {batch_size} exceeds the {len(input_ids)} examples available")
    if input_ids.ndim != 2 or input_ids.shape[1] < 2:
        raise InterpError(f"input_ids must be [examples, length >= 2], got shape {tuple(input_ids.shape)}")
    nb = float(default_nbeta(batch_size)) if n_beta is None else float(n_beta)
    if not nb > 0:
        raise InterpError(f"n_beta must be positive, got {n_beta!r}")
    from interp.model import tl_apply, tl_module

    sampled = tl_module(model)  # TL 4: the bridge's parameters in checkpoint layout (masks' names, SGLD's noise as on TL 3)
    if sampled is not model:
        loss_fn = (lambda fn: lambda m, ids: tl_apply(m, fn, ids))(loss_fn)
    with warnings.catch_warnings(record=True) as caught, _quiet_and_isolated(device), \
            tempfile.TemporaryDirectory(prefix="interp-llc-") as tmp:
        warnings.simplefilter("always")
        # inside: nothing on the way to the chains' seed may touch the global RNGs either
        init_seed = int(torch.randint(0, 2**31 - 1, (1,), generator=torch_generator(seed, "llc")))
        samples = sample(
            sampled, _Examples(input_ids.cpu()), {}, lr=epsilon, n_beta=nb, param_masks=masks,
            num_chains=chains, num_draws=draws, batch_size=batch_size, num_burnin_steps=burnin,
            num_init_loss_batches=init_loss_batches, init_seed=init_seed, localization=gamma,
            device=device, output_path=Path(tmp) / "samples.zarr", loss_fn=loss_fn,
        )
        result = compute_llc(samples)
        per_chain = np.asarray(result["llc_per_chain"].values, dtype=np.float64)
        trace = np.asarray(result["loss_trace"].values, dtype=np.float64)  # [chain, step]
        init_loss = float(result["init_loss"].values)
        llc_mean, llc_std = float(result["llc_mean"].values), float(result["llc_std"].values)
    failed = [str(w.message) for w in caught if "Chain" in str(w.message) and "failed" in str(w.message)]
    if failed:  # devinterp stops a chain whose loss is not finite; its value is then NaN
        warnings.warn(f"LLC: {len(failed)} chain(s) failed (NaN values): {'; '.join(failed)}", stacklevel=2)
    half = trace.shape[1] // 2
    drift = nb * (trace[:, half:].mean(1) - trace[:, :half].mean(1)) if half else np.full(chains, np.nan)
    return {"chain_values": per_chain, "llc_mean": llc_mean, "llc_std": llc_std, "init_loss": init_loss,
            "drift": drift, "n_beta": nb, "init_loss_batches": init_loss_batches, "failed": failed}


# ---------------------------------------------------------------------------- run level
def at_step(
    run: Run,
    step: int,
    *,
    model: nn.Module | None = None,
    restrict: str | Sequence[str] = DEFAULTS["restrict"],
    device: str = "cpu",
    **sgld,
) -> pd.DataFrame:
    """LLC of the checkpoint at `step`, for the whole model and each restricted head.

    Contract:
      run, step   a saved checkpoint; `model` (optional) is that checkpoint already loaded
                  (then `run.model(step)` is not called; devinterp samples deep copies of it).
      restrict    "full" and/or heads "L0H3" (any case), a string or a list.
      sgld        chains, draws, burnin, epsilon, gamma, n_beta, batch_size, init_loss_batches: passed to
                  `sample_llc` (DEFAULTS where not given).
    Returns one row per (step, restrict, chain) (tidy: per-chain values are rows):
      step, restrict ("full" or "L0H3"), chain (0..chains-1), llc (that chain's estimate,
      unitless), llc_mean and llc_std (over chains, devinterp's, std with ddof 0; repeated on
      each row of the (step, restrict)), drift (n_beta * (chain's mean loss over its second
      half of steps - over its first half); near 0 when it settled), init_loss (nats at w0),
      n_params (parameters sampled), and the settings (n_beta resolved to its value).
    Chains of different steps and restrictions share seeds (common random numbers).
    """
    unknown = sorted(set(sgld) - set(SGLD))
    if unknown:
        raise TypeError(f"at_step() got unexpected keyword argument(s) {', '.join(unknown)}")
    sgld = {name: sgld.get(name, DEFAULTS[name]) for name in SGLD}
    step = run.resolve_step(step)
    if model is None:
        model = run.model(step, device=device)
    task = run.task
    loss_pos = task.layout.loss_pos
    input_ids = task.train_tokens[:, : loss_pos[-1] + 2]
    names = _restrictions(restrict, model.cfg.n_layers, model.cfg.n_heads)
    frames = []
    for name in names:
        masks = param_masks(model, name)
        res = sample_llc(
            model, input_ids, lambda m, ids: output_token_loss(m, ids, loss_pos), masks, seed=run.spec.seed,
            device=device, **sgld,
        )
        frames.append(pd.DataFrame({
            "step": step, "restrict": name, "chain": np.arange(sgld["chains"]), "llc": res["chain_values"],
            "llc_mean": res["llc_mean"], "llc_std": res["llc_std"], "drift": res["drift"],
            "init_loss": res["init_loss"], "n_params": _n_selected(model, masks),
            **sgld, "n_beta": res["n_beta"], "init_loss_batches": res["init_loss_batches"],  # as resolved
        }))
    return pd.concat(frames, ignore_index=True)[list(COLUMNS)]


def check_params(params: dict) -> dict:
    """The parameters of `at_step` (for `across`): InterpError naming any unknown one."""
    unknown = set(params) - set(DEFAULTS) - {"device"}
    if unknown:
        raise InterpError(f"unknown LLC parameter(s) {sorted(unknown)}; known: {sorted(DEFAULTS)}, device")
    return params


across = across_of("llc")
HEADS = Option("heads", "restrict", "heads for the per-head LLC, e.g. L0H3,L0H1 (the whole model's is added)",
               parse_heads, metavar="LxHy[,...]", check=check_heads)
CHAINS = Option("chains", "chains", "SGLD chains of the LLC (default: 4)", positive_int, metavar="N")
DRAWS = Option("draws", "draws", "SGLD draws per chain of the LLC (default: 120)", positive_int, metavar="N")
ENTRY = Analysis(
    "llc", __name__, "local learning coefficient (devinterp SGLD), whole model and per head",
    default=False, shares_model=False, steps="transition", stream="llc", options=(HEADS, CHAINS, DRAWS),
    extra="landscape", order=80,
)


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (step, restrict): llc_mean, llc_std and the relative spread llc_std / |llc_mean|."""
    if table.empty:
        raise InterpError("LLC summary: the table is empty")
    out = table.groupby(["step", "restrict"], sort=False).agg(
        llc_mean=("llc_mean", "first"), llc_std=("llc_std", "first"), drift=("drift", "mean")).reset_index()
    out["rel_spread"] = out["llc_std"] / out["llc_mean"].abs()
    return out


# ---------------------------------------------------------------------------- findings and summary rows
def rows(f: dict, tables: dict) -> Rows:
    """One row per step of the learning coefficients that were computed."""
    llc = tables.get("llc")
    if llc is None or not len(llc):
        return []
    per = llc.groupby(["step", "restrict"], sort=True)[["llc_mean", "llc_std"]].first().reset_index()
    return [(f"llc step {int(step)}", ", ".join(f"{r.restrict} {r.llc_mean:.4g} +- {r.llc_std:.2g}" for r in df.itertuples()))
            for step, df in per.groupby("step", sort=True)]
