"""interp: mechanistic interpretability of training dynamics on the disambiguation task.

    import interp
    run = interp.Run.open("checkpoints/demo")
    model = run.model(run.steps[-1])     # a transformer_lens.HookedTransformer (a TransformerBridge on TL 4)
    interp.tau(run)                      # tau_half; interp.tau(run, kind="window")
    sw = interp.Sweep.open("sweeps/k")   # a family of runs; sw.table()
    interp.open("sweeps/k")              # whichever it is: a Run, a Sweep or a ForkFamily
    f = interp.fork(run, "tau/2", "full_batch", steps=1000, out="forks/fb")   # continue a frozen state
    interp.import_run("outputs/NAME", "checkpoints/theirs")   # a run made elsewhere (docs/import.md)

Names are imported on first use, so `import interp` (and the `interp` command's quick paths:
--help, ls, show, bad input) never loads torch or TransformerLens.
"""

from __future__ import annotations

import importlib

from interp import presentable
from interp.errors import InterpError

# the notebook cards and short reprs of interp's objects are registered by interp.display, which sits above every
# module that defines one: imported here, on the first card or repr shown (`interp.presentable`)
presentable.loads_renderers(lambda: importlib.import_module("interp.display"))

# public name -> module that defines it
_LAZY = {
    "ModelSpec": "interp.spec",
    "RunSpec": "interp.spec",
    "TaskSpec": "interp.spec",
    "TrainSpec": "interp.spec",
    "PRESETS": "interp.presets",
    "preset": "interp.presets",
    "Run": "interp.runs",
    "Task": "interp.task",
    "tau": "interp.transition",
    "Sweep": "interp.sweeps.sweep",
    "SweepSpec": "interp.sweeps.sweep",
    "fork": "interp.forks.fork",
    "ForkFamily": "interp.forks.family",
    "open": "interp.collections.folders",  # interp.open(path): a Run, a Sweep or a ForkFamily
    "import_run": "interp.collections.imports",  # interp.import_run(src, out): a run made elsewhere (docs/import.md)
    "evaluate_run": "interp.imports.evaluate",  # the metrics log rebuilt from the checkpoints
    "outcome_of": "interp.outcome",  # interp.outcome_of(run): transitioned, stuck or diverged (docs/phase.md)
    "phase": "interp.sweeps.phase",  # interp.phase(sweep): the learning-rate phase diagram (docs/phase.md)
}


# module aliases: `from interp import scaling`
_MODULES = {"scaling": "interp.sweeps.scaling"}


def __getattr__(name: str):
    if name in _MODULES:
        value = importlib.import_module(_MODULES[name])
        globals()[name] = value
        return value
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'interp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_MODULES))


def timeline(run, **kwargs):
    """The circuit-formation timeline of `run` (`interp.timelines.timeline`)."""
    from interp.timelines import timeline as compute

    return compute(run, **kwargs)


__all__ = ["InterpError", "timeline", *(name for name in _LAZY if name != "open")]  # `import *` keeps the builtin open
__version__ = "0.1.0"
