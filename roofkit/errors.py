"""roofkit's errors: one base class, subclasses that are also builtins.

Every message names the bad value and what was expected, so that a learner
reading it knows what to type instead. ``except RoofkitError`` catches all of
them; ``except ValueError`` or ``except LookupError`` works too.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "RoofkitError",
    "InvalidValue",
    "UnitMismatch",
    "UnknownName",
    "UnknownHardware",
    "UnknownPrecision",
    "UnsupportedPrecision",
    "closest",
]


class RoofkitError(Exception):
    """Base class of every error roofkit raises on purpose."""


class InvalidValue(ValueError, RoofkitError):
    """A number that is negative, zero, NaN, infinite or not a number at all."""


class UnitMismatch(ValueError, RoofkitError):
    """A quantity in the wrong unit (bytes where FLOP/s were expected, ...)."""


class UnknownName(LookupError, RoofkitError):
    """A name that is not in a list of known names."""

    kind = "name"

    def __init__(self, name: object, choices: Iterable[str], aliases: dict[str, str] | None = None):
        self.name = name
        self.choices = sorted(set(choices))
        # aliases: other spellings -> the choice they stand for, used for suggestions only
        spellings = {c: c for c in self.choices} | dict(aliases or {})
        near = list(dict.fromkeys(spellings[s] for s in closest(str(name), spellings)))
        hint = f" Did you mean {' or '.join(repr(n) for n in near)}?" if near else ""
        super().__init__(
            f"Unknown {self.kind} {name!r}.{hint} Expected one of: {', '.join(self.choices)}."
        )

    def __reduce__(self):  # keep the error picklable (multiprocessing, pytest-xdist)
        return (type(self), (self.name, self.choices))


class UnknownHardware(UnknownName):
    kind = "accelerator"


class UnknownPrecision(UnknownName):
    kind = "precision"


class UnsupportedPrecision(LookupError, RoofkitError):
    """The accelerator exists but has no peak for that precision (T4 and BF16)."""

    def __init__(self, accelerator: str, precision: str, available: Iterable[str]):
        self.accelerator, self.precision = accelerator, precision
        self.available = list(available)
        super().__init__(
            f"{accelerator} has no {precision} peak in the catalog. "
            f"Available precisions: {', '.join(self.available)}."
        )

    def __reduce__(self):
        return (type(self), (self.accelerator, self.precision, self.available))


def closest(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """The few choices that look most like ``name`` (case-insensitive)."""
    lowered = {c.lower(): c for c in choices}
    hits = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.5)
    return [lowered[h] for h in hits]
