"""How an object shows itself (its notebook card, its short repr) without naming what draws it.

A Run, a Sweep or a fit sits on a low floor; its card is drawn by `interp.display`, on the
presentation floor, which imports the results and never the reverse. So a class's
`_repr_html_` (and, for the fit results, its `__repr__`) calls `html(self)` / `short_repr(self)`
here (or mixes in `Presentable`), and each display module registers its renderers under the
type's "module:Class" name:

    @renders("interp.runs:Run")
    def run_html(run) -> str: ...

Names rather than classes, so that registering imports none of the types' modules (a
timeline's loads torch, a fit's scipy) and showing a run stays light. The lookup walks the
object's MRO: a subclass (CancellationFit) is shown as its base (PowerLawFit) unless it has its
own renderer. The renderers are imported on the first lookup by the loader the package installs
(`interp/__init__.py` imports `interp.display`): nothing below the presentation floor names it.
"""

from __future__ import annotations

from collections.abc import Callable

HTML = "html"  # notebook HTML (`_repr_html_`)
REPR = "repr"  # the one-line `__repr__`

_RENDERERS: dict[tuple[str, str], Callable[[object], str]] = {}  # (kind, "module:Class") -> renderer
_LOADERS: list[Callable[[], object]] = []  # each imports modules that register renderers; run once


def type_name(cls: type) -> str:
    """"module:Class", the key renderers are registered under."""
    return f"{cls.__module__}:{cls.__qualname__}"


def renders(*names: str, kind: str = HTML):
    """Register the decorated function as the `kind` renderer of the types named "module:Class"."""

    def register(function):
        for name in names:
            _RENDERERS[(kind, name)] = function
        return function

    return register


def loads_renderers(loader: Callable[[], object]) -> None:
    """Run `loader` (it imports the modules that register renderers) before the first lookup."""
    _LOADERS.append(loader)


def registered(kind: str = HTML) -> list[str]:
    """The type names that have a `kind` renderer (the loaders run first)."""
    _load()
    return [name for k, name in _RENDERERS if k == kind]


def _load() -> None:
    while _LOADERS:
        _LOADERS[0]()  # a loader that fails stays, and is tried again at the next lookup
        _LOADERS.pop(0)


def renderer(obj, kind: str = HTML) -> Callable[[object], str]:
    """The renderer registered for the nearest type in `type(obj).__mro__`."""
    _load()
    for cls in type(obj).__mro__:
        found = _RENDERERS.get((kind, type_name(cls)))
        if found is not None:
            return found
    raise TypeError(f"no {kind} renderer is registered for {type_name(type(obj))}")


def html(obj) -> str:
    return renderer(obj, HTML)(obj)


def short_repr(obj) -> str:
    return renderer(obj, REPR)(obj)


class Presentable:
    """`__repr__` and `_repr_html_` from the renderers registered for the type (`interp.display`)."""

    def __repr__(self) -> str:
        return short_repr(self)

    def _repr_html_(self) -> str:
        return html(self)
