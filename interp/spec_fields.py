"""The checks every section of a run spec shares (a finite number in range, an integer, a bool) and the section
base class (its dict for run.json, fields omitted at their defaults). No heavy imports, as interp.spec."""

from __future__ import annotations

import dataclasses
import math

from interp.errors import InterpError


def check_int(name: str, value, minimum: int | None = None, maximum: int | None = None) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InterpError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise InterpError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise InterpError(f"{name} must be an integer <= {maximum}, got {value!r}")


def check_float(name: str, value, low: int | float | None = None, high: int | float | None = None,
                low_open: bool = False, high_open: bool = False) -> None:
    """A finite number within [low, high] (open ends where asked); inf and NaN are refused."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise InterpError(f"{name} must be a finite number, got {value!r}")
    if low is not None and (value <= low if low_open else value < low):
        raise InterpError(f"{name} must be {'>' if low_open else '>='} {low}, got {value!r}")
    if high is not None and (value >= high if high_open else value > high):
        raise InterpError(f"{name} must be {'<' if high_open else '<='} {high}, got {value!r}")


def check_bool(name: str, value) -> None:
    if not isinstance(value, bool):
        raise InterpError(f"{name} must be true or false, got {value!r}")


def from_dict(cls, data, what: str):
    if not isinstance(data, dict):
        raise InterpError(f"the {what} spec must be a JSON object, got {type(data).__name__}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - known
    if unknown:
        raise InterpError(f"unknown {what} fields {sorted(unknown)}; known: {sorted(known)}")
    return cls(**data)


class Section:
    """A section of the run spec (task, model, train): its dict for run.json and back. A field whose
    value equals its entry in OMITTED_AT is left out of the dict, so the specs (and their hashes,
    `spec_sha256`) of runs made before that field existed are unchanged."""

    SECTION = ""  # its key in the run spec
    OMITTED_AT: dict = {}

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        for name, value in self.OMITTED_AT.items():
            if out[name] == value:
                del out[name]
        return out

    @classmethod
    def from_dict(cls, data: dict):
        return from_dict(cls, data, cls.SECTION)
