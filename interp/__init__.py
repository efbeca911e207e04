"""interp: mechanistic interpretability of training dynamics on the disambiguation task.

    import interp
    run = interp.Run.open("checkpoints/demo")
    model = run.model(run.steps[-1])     # a transformer_lens.HookedTransformer
    interp.tau(run)                      # tau_half; interp.tau(run, kind="window")
"""

from interp.errors import InterpError
from interp.model import ModelSpec
from interp.presets import PRESETS, preset
from interp.runs import Run
from interp.spec import RunSpec, TrainSpec
from interp.task import Task, TaskSpec
from interp.transition import tau


def timeline(run, **kwargs):
    """The circuit-formation timeline of `run` (`interp.timelines.timeline`; imported lazily
    because it loads TransformerLens)."""
    from interp.timelines import timeline as compute

    return compute(run, **kwargs)


__all__ = [
    "PRESETS",
    "InterpError",
    "ModelSpec",
    "Run",
    "RunSpec",
    "Task",
    "TaskSpec",
    "TrainSpec",
    "preset",
    "tau",
    "timeline",
]
__version__ = "0.1.0"
