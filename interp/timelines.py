"""The circuit-formation timeline: when each head starts carrying z, against when the loss moves.

`timeline(run)` gathers, on one step axis, the run's losses and shuffle gap (from its
metrics log), every head's z-sensitivity across checkpoints, each head's onset (the first
checkpoint at which the series has made `fraction` of its own rise and stays there for `m`
checkpoints; `interp.transition.rise_threshold` / `onset`), tau and the routing head's
lead (tau - onset) / tau. The paper's claim is a positive lead: the routing head forms
while the loss still sits at log K.

Plotting lives in `interp.plots`, imported only by `Timeline.figure()`, so computing a
timeline never needs plotly.

`interp.timeline(run)` is this module's `timeline`, imported lazily by the package (the
module is named `timelines` so that importing it never rebinds `interp.timeline`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from interp.analysis import sensitivity as sensitivity_analysis
from interp.errors import InterpError
from interp.runs import Run
from interp.transition import ONSET_FRACTION, ONSET_M, onset, rise_threshold, tau as run_tau

MIN_CHECKPOINTS = 3  # an onset held for m >= 2 checkpoints needs a rise before it


@dataclass
class Timeline:
    metrics: pd.DataFrame
    sensitivity: pd.DataFrame
    log_k: float
    tau: int | None
    tau_window: int | None
    routing_head: str
    onsets: pd.DataFrame  # one row per head: head_name, layer, head, threshold, onset (Int64, NA: none)
    lead: float | None
    column: str = "z_share"
    fraction: float = ONSET_FRACTION
    m: int = ONSET_M
    name: str = ""

    @property
    def routing_onset(self) -> int | None:
        row = self.onsets[self.onsets["head_name"] == self.routing_head]
        if row.empty or pd.isna(row["onset"].iloc[0]):
            return None
        return int(row["onset"].iloc[0])

    def figure(self):
        """The timeline as a plotly Figure (`interp.plots.timeline_figure`)."""
        from interp import plots

        return plots.timeline_figure(self)


def head_onsets(sens: pd.DataFrame, column: str = "z_share", fraction: float = ONSET_FRACTION,
                m: int = ONSET_M) -> pd.DataFrame:
    """Onset of every head's `column` series (relative to its own rise), L0H0 first."""
    rows = []
    heads = sens[["layer", "head", "head_name"]].drop_duplicates().sort_values(["layer", "head"])
    for layer, head, name in heads.itertuples(index=False):
        series = sens[sens["head_name"] == name].dropna(subset=[column]).sort_values("step")
        threshold, first = float("nan"), None
        if len(series):
            threshold = rise_threshold(series[column], fraction)
            first = onset(series["step"], series[column], threshold, m=m, above=True)
        rows.append({"head_name": str(name), "layer": int(layer), "head": int(head),
                     "threshold": threshold, "onset": pd.NA if first is None else first})
    df = pd.DataFrame(rows, columns=["head_name", "layer", "head", "threshold", "onset"])
    df["onset"] = df["onset"].astype("Int64")
    return df


def check_run(run: Run) -> None:
    """Raise InterpError, saying what is missing, if `run` cannot have a timeline."""
    steps = run.steps
    if len(steps) < MIN_CHECKPOINTS:
        raise InterpError(
            f"a timeline needs at least {MIN_CHECKPOINTS} saved checkpoints; {run.path} has {len(steps)}"
        )
    metrics = run.metrics
    if metrics.empty or "loss_cand" not in metrics or metrics["loss_cand"].isna().all():
        raise InterpError(
            f"a timeline needs the candidate loss, which {run.path} does not have "
            f"(direction {run.spec.task.direction!r} or no evaluations yet)"
        )
    if not run.task.has_selector:
        raise InterpError(
            f"a timeline tracks when heads start reading the selector z, but direction "
            f"{run.spec.task.direction!r} of {run.path} has none"
        )


def timeline(
    run: Run,
    sens: pd.DataFrame | None = None,
    column: str = "z_share",
    fraction: float = ONSET_FRACTION,
    m: int = ONSET_M,
    n_groups: int | None = None,
    device: str = "cpu",
) -> Timeline:
    """Compute the timeline of `run`; `sens` reuses a sensitivity table (e.g. the suite's cached one).

    Raises InterpError when the run cannot show a timeline: fewer than 3 saved checkpoints,
    no candidate loss (directions whose output is B, or no evaluation yet), or no selector.
    """
    check_run(run)
    if not 0.0 < fraction < 1.0:
        raise InterpError(f"the onset fraction must be between 0 and 1, got {fraction}")
    if m < 1:
        raise InterpError(f"m (checkpoints an onset must hold) must be >= 1, got {m}")
    if sens is None:
        n = n_groups if n_groups is not None else sensitivity_analysis.DEFAULT_GROUPS
        sens = sensitivity_analysis.across(run, n_groups=n, device=device)
    if column not in sens.columns:
        allowed = ", ".join(c for c in sensitivity_analysis.COLUMNS if c in sens.columns)
        raise InterpError(f"unknown sensitivity column {column!r}; allowed: {allowed}")
    n_sens = sens["step"].nunique()
    if n_sens < MIN_CHECKPOINTS:
        raise InterpError(
            f"a timeline needs sensitivity at >= {MIN_CHECKPOINTS} checkpoints; the table given has {n_sens}"
        )
    t = run_tau(run)
    routing = sensitivity_analysis.routing_head(sens, column)
    onsets = head_onsets(sens, column, fraction, m)
    routing_onset = onsets.loc[onsets["head_name"] == routing, "onset"].iloc[0]
    lead = None if (not t or pd.isna(routing_onset)) else (t - int(routing_onset)) / t
    return Timeline(
        metrics=run.metrics, sensitivity=sens, log_k=run.log_k, tau=t, tau_window=run_tau(run, kind="window"),
        routing_head=routing, onsets=onsets, lead=lead, column=column, fraction=fraction, m=m, name=run.name,
    )

