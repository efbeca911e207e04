"""A stand-in analysis for the registry test: the mean decision-position logit of a token."""

import pandas as pd
import torch

from interp.runs import Run


@torch.no_grad()
def at_step(run: Run, step: int, *, model=None, token: int = 4, device: str = "cpu") -> pd.DataFrame:
    model = model if model is not None else run.model(step, device=device)
    tokens = run.task.tokens[:8, : run.task.layout.decision_pos + 1]
    value = float(model(tokens)[:, -1, token].mean())
    return pd.DataFrame([{"step": step, "token": token, "mean_logit": value}])


def across(run: Run, steps=None, **params) -> pd.DataFrame:
    from interp.analysis.common import over_steps

    return over_steps(run, steps, lambda s, _: at_step(run, s, **params), "dummy", False)
