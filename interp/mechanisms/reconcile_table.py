"""The reconciliation table itself (`interp.mechanisms.reconcile.reconcile` makes it): its rows, the paths they
were measured on and the notes, as text, HTML, a data frame or JSON, and back from JSON."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

from interp.mechanisms.intervals import bound_prefix
from interp.mechanisms.reconcile_rules import VERDICTS


@dataclass
class ReconcileTable:
    """The rows (dicts with COLUMNS) and the paths they were measured on."""

    sources: list[dict]
    rows: list[dict]
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    damaged: dict[str, str] = field(default_factory=dict)

    COLUMNS = ("key", "claim", "author", "source", "author_def", "author_value", "author_low", "author_high",
               "value", "low", "high", "n_runs", "n_unit", "margin", "interval", "detail", "measured_on", "setting",
               "definition", "verdict", "why", "command")

    def to_dict(self) -> dict:
        from interp.sweeps.fits import jsonable

        return jsonable({"sources": self.sources, "rows": self.rows, "notes": self.notes, "damaged": self.damaged,
                         "verdicts": list(VERDICTS), "rules": "docs/reconciliation.md"})

    @classmethod
    def from_dict(cls, d: dict) -> ReconcileTable:
        """The table back from `to_dict` (JSON's nulls read as NaN in the numeric columns)."""
        nums = ("author_value", "author_low", "author_high", "value", "low", "high")
        rows = [{**r, **{k: math.nan if r.get(k) is None else r[k] for k in nums}} for r in d["rows"]]
        return cls(d["sources"], rows, list(d.get("notes", [])), [], dict(d.get("damaged", {})))

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame(self.rows, columns=list(self.COLUMNS))

    def verdict(self, key: str) -> list[str]:
        """The verdicts of claim `key` (one per path that measures it)."""
        return [r["verdict"] for r in self.rows if r["key"] == key]

    def summary(self) -> str:
        paths = ", ".join(f"{s['path']} ({s['kind']})" for s in self.sources)
        lines = [f"reconciliation of {paths}; rules: docs/reconciliation.md"]
        for r in self.rows:
            where = f" [{r['measured_on']}]" if r["measured_on"] and len(self.sources) > 1 else ""
            lines.append(f"- {r['claim']}{where}: {r['verdict'].upper()}")
            lines.append(f"    author: {r['author']} ({r['source']})")
            lines.append(f"    ours: {value_text(r, '')} ({r['n_runs']} {r.get('n_unit') or 'runs'})"
                         f"   under the author's definition: {r['author_def']}")
            if r.get("margin"):
                lines.append(f"    margin: {r['margin']} (90% interval: {r.get('interval', '')})")
            if r["setting"]:
                lines.append(f"    setting: {r['setting']}")
            lines.append(f"    {r['why']}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def html(self) -> str:
        """The table as an HTML fragment (no script; the report's styles)."""
        head = "".join(f"<th>{h}</th>" for h in ("claim", "author (source)", "ours, author's definition", "ours",
                                                    "runs", "setting differs", "verdict", "why"))
        body = []
        for r in self.rows:
            cls = r["verdict"].replace(" ", "-").replace(":", "")
            cells = (r["claim"] + (f" [{r['measured_on']}]" if r["measured_on"] and len(self.sources) > 1 else ""),
                     f"{r['author']} ({r['source']})", r["author_def"], value_text(r, ""), str(r["n_runs"] or ""),
                     r["setting"], r["verdict"], r["why"])
            body.append(f"<tr class='verdict-{cls}'>" + "".join(
                f"<td>{'<b>' if i == 6 else ''}{html.escape(c)}{'</b>' if i == 6 else ''}</td>"
                for i, c in enumerate(cells)) + "</tr>")
        notes = "".join(f"<p class='note'>{html.escape(n)}</p>" for n in self.notes)
        return (f"<table class='summary mechanisms reconcile'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}"
                f"</tbody></table>{notes}")

    def _repr_html_(self) -> str:
        return self.html()

    def __repr__(self) -> str:
        counts: dict[str, int] = {}
        for r in self.rows:
            counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
        return f"ReconcileTable({len(self.sources)} path(s), " + ", ".join(f"{v} {k}" for k, v in counts.items()) + ")"


def value_text(r: dict, prefix: str) -> str:
    """A row's value (`prefix` "") with its interval, "—" when there is none."""
    v, lo, hi = r[f"{prefix}value"], r[f"{prefix}low"], r[f"{prefix}high"]
    if v is None or not math.isfinite(v):
        return "—"
    bound = bound_prefix(r.get(f"{prefix}bound") or "")  # a value resting on censored forks
    if lo is None or hi is None or (math.isnan(lo) and math.isnan(hi)):
        return f"{bound}{v:.3g}"
    return f"{bound}{v:.3g} [{lo:.3g}, {'inf' if math.isinf(hi) else f'{hi:.3g}'}]"
