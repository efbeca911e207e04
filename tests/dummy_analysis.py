"""A stand-in analysis for the registry test: the mean decision-position logit of a token, with
its own option (--token), findings and summary row, as a new analysis has, and its report section,
registered with the report (`interp.report.sections`)."""

import pandas as pd
import torch

from interp.analysis.registry import Analysis, Option
from interp.report.sections import section
from interp.runs import Run

DEFAULTS = {"token": 4}


@torch.no_grad()
def at_step(run: Run, step: int, *, model=None, token: int = DEFAULTS["token"], device: str = "cpu") -> pd.DataFrame:
    model = model if model is not None else run.model(step, device=device)
    tokens = run.task.tokens[:8, : run.task.layout.decision_pos + 1]
    value = float(model(tokens)[:, -1, token].mean())
    return pd.DataFrame([{"step": step, "token": token, "mean_logit": value}])


def across(run: Run, steps=None, **params) -> pd.DataFrame:
    from interp.analysis.common import over_steps

    return over_steps(run, steps, lambda s, _: at_step(run, s, **params), "dummy", False)


def findings(run, tables, tau, found) -> dict:
    last = tables["dummy"].sort_values("step").iloc[-1]
    return {"dummy_last_logit": float(last["mean_logit"]), "dummy_token": int(last["token"])}


def rows(f: dict, tables) -> list[tuple[str, str]]:
    return [("dummy logit", f"token {f['dummy_token']}: {f['dummy_last_logit']:+.4f} at the last step")] \
        if "dummy_last_logit" in f else []


@section("dummy", "dummy", "Dummy: mean logit", "The mean decision-position logit of one token.")
def figure(c):
    import plotly.graph_objects as go

    df = c.need("dummy")
    return go.Figure(go.Scatter(x=df["step"], y=df["mean_logit"], name="dummy mean logit"))


def _token(text: str) -> int:
    value = int(text)
    if not 0 <= value < 64:
        raise ValueError(f"a token id 0..63, got {value}")
    return value


ENTRY = Analysis(  # its findings and rows are the functions above, found by name
    "dummy", __name__, "the mean decision logit of one token",
    options=(Option("token", "token", "the token whose logit is averaged", _token, metavar="ID"),),
)
