"""Self-contained HTML reports: the page they share (`page`), a run's report and timeline
(`run`), a sweep's report (`sweep`), a fork family's report (`forks`, read by `fork_data`).
The entry points are imported when first used, so that importing one submodule does not pull
in the others."""

_ENTRY_POINTS = {"write_report": "run", "write_timeline": "run", "write_sweep_report": "sweep",
                 "fork_family_report": "forks"}
__all__ = list(_ENTRY_POINTS)


def __getattr__(name: str):
    if name in _ENTRY_POINTS:
        import importlib

        return getattr(importlib.import_module(f"interp.report.{_ENTRY_POINTS[name]}"), name)
    raise AttributeError(f"module 'interp.report' has no attribute {name!r}")
