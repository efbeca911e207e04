"""The run report's sections: the figures each analysis gets, with their titles and captions.

The report owns them (the registry describes analyses, not pages): a figure function registers
itself with `@section(analysis, key, title, caption)` under an analysis's name, or under `RUN`
for the report's own (the metrics log and the timeline, drawn before every analysis). The
built-in ones are in `interp.report.figures` and `interp.report.diagnostic_figures`; an analysis
defined elsewhere (in a project's own module, or a test) registers its own the same way. An analysis with no
section gets a generic table figure. No plotting is imported here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

RUN = ""  # the report's own sections, not an analysis's


@dataclass(frozen=True)
class ReportSection:
    """One figure of the run report: `figure` takes the report's context and returns a plotly
    figure, or raises InterpError saying why it cannot be drawn."""

    key: str
    title: str
    caption: str
    figure: Callable


_SECTIONS: dict[str, list[ReportSection]] = {}  # analysis name (RUN: the report's own) -> its sections, in order


def section(analysis: str, key: str, title: str, caption: str):
    """Register the decorated figure function as a section of `analysis` (after those before it;
    registering a key again replaces that section in place)."""

    def register(figure: Callable) -> Callable:
        found = _SECTIONS.setdefault(analysis, [])
        new = ReportSection(key, title, caption, figure)
        at = next((i for i, s in enumerate(found) if s.key == key), None)
        if at is None:
            found.append(new)
        else:
            found[at] = new
        return figure

    return register


def sections_of(analysis: str) -> tuple[ReportSection, ...]:
    """The sections registered for `analysis` (RUN: the report's own), in order."""
    return tuple(_SECTIONS.get(analysis, ()))


def analyses_with_sections() -> list[str]:
    """Every analysis name that has a section (RUN left out)."""
    return [name for name, found in _SECTIONS.items() if name != RUN and found]
