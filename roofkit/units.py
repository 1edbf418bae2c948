"""Reading numbers the way people write them, and refusing the ones that make no sense.

* ``size("70B")`` -> 7e10, ``size("15T")`` -> 1.5e13, ``size("4e9")`` -> 4e9:
  the suffixes K, M, B (or G), T, P are powers of 1000, as in "a 70B model".
* ``positive(4096, "m")`` returns the number, or raises InvalidValue naming
  ``m`` when it is zero, negative, NaN, infinite or not a number. numpy arrays
  are checked element by element and returned unchanged.
* ``quantity("3.35 TB/s", "byte/s")`` -> 3.35e12, read by :mod:`roofkit.quantities`:
  TB/s, GB/s or TiB/s are converted, while "3.35 TFLOP/s" raises UnitMismatch.
"""

from __future__ import annotations

import math
import numbers
import re

from .errors import InvalidValue, UnitMismatch

__all__ = ["size", "positive", "nonnegative", "whole", "fraction", "quantity", "is_symbolic", "SUFFIXES"]

SUFFIXES = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15}
_SIZE = re.compile(r"^\s*([-+]?(?:\d[\d_,]*\.?\d*|\.\d+)(?:e[-+]?\d+)?)\s*([kmbgtp]?)\s*$", re.I)


def is_symbolic(value) -> bool:
    """True for sympy expressions, which the formulas accept unchecked."""
    return type(value).__module__.startswith("sympy")


def size(value, name: str = "size"):
    """A positive count from a number or a string such as '70B', '15T', '4e9', '1,024'."""
    if isinstance(value, str):
        match = _SIZE.match(value)
        if not match:
            raise InvalidValue(
                f"{name} must be a number such as 4096, 4e9, 70B or 15T "
                f"(suffixes K, M, B/G, T, P); got {value!r}."
            )
        number, suffix = match.groups()
        value = float(number.replace(",", "").replace("_", "")) * SUFFIXES.get(suffix.lower(), 1)
    return positive(value, name)


TOKEN_SUFFIXES = {"k": 2**10, "m": 2**20, "b": 2**30, "g": 2**30, "t": 2**40}  # a batch of tokens: powers of two


def tokens(value, name: str = "tokens"):
    """A count of tokens in a batch from a number or a string: '4M' is 4 x 2^20 = 4,194,304 tokens, as papers mean
    a "4M-token batch" (Llama 3: 1,024 sequences of 4,096); '4194304' and '4e6' are taken as written."""
    if isinstance(value, str):
        match = _SIZE.match(value)
        if not match or match.groups()[1].lower() == "p":
            raise InvalidValue(f"{name} must be a number of tokens such as 4194304 or 4M (K, M, G, T are powers "
                               f"of two here: 4M = 4 x 2^20); got {value!r}.")
        number, suffix = match.groups()
        value = float(number.replace(",", "").replace("_", "")) * TOKEN_SUFFIXES.get(suffix.lower(), 1)
    return positive(value, name)


def _check(value, name: str, ok, what: str):
    if is_symbolic(value):
        return value
    if isinstance(value, bool) or value is None:
        raise InvalidValue(f"{name} must be {what}; got {value!r}.")
    if isinstance(value, numbers.Real):
        try:
            finite = math.isfinite(value)
        except OverflowError:  # an int too large for a float, such as 10**400
            finite = False
        if not finite or not ok(value):
            raise InvalidValue(f"{name} must be {what}; got {value!r}.")
        return value
    if type(value).__module__ == "numpy":
        import numpy as np  # deferred: numpy costs ~80 ms at import

        array = np.asarray(value)
        if array.dtype.kind not in "iuf" or array.size == 0:
            raise InvalidValue(f"{name} must be {what}; got an array of dtype {array.dtype}.")
        bad = ~(np.isfinite(array) & ok(array))
        if bad.any():
            raise InvalidValue(f"{name} must be {what}; got {array[bad].flat[0].item()!r} among the values.")
        return value
    raise InvalidValue(f"{name} must be {what}; got {value!r} ({type(value).__name__}).")


def positive(value, name: str = "value"):
    """``value`` itself when it is a finite number > 0 (or an array of them)."""
    return _check(value, name, lambda v: v > 0, "a finite number greater than 0")


def nonnegative(value, name: str = "value"):
    """``value`` itself when it is a finite number >= 0 (or an array of them)."""
    return _check(value, name, lambda v: v >= 0, "a finite number of at least 0")


def whole(value, name: str = "value", low: int = 1, integer_only: bool = False) -> int:
    """``value`` as an int when it is a whole number of at least ``low``: 4 or 4.0, or with ``integer_only``
    (what a catalog file must write) 4 only.

    >>> whole(4.0, "gpus"), whole(0, "tokens", low=0)
    (4, 0)
    """
    ok = not isinstance(value, bool) and isinstance(value, numbers.Integral if integer_only else numbers.Real)
    if ok:
        try:
            ok = math.isfinite(value) and value == int(value) and value >= low
        except OverflowError:  # an int too large for a float
            ok = False
    if not ok:
        raise InvalidValue(f"{name} must be a whole number of at least {low}; got {value!r}.")
    return int(value)


def fraction(value, name: str = "fraction"):
    """``value`` itself when it lies in (0, 1], such as an MFU of 0.4."""
    return _check(value, name, lambda v: (v > 0) & (v <= 1), "a fraction in (0, 1], e.g. 0.4 for 40%")


def quantity(text, unit: str, name: str = "value") -> float:
    """The magnitude of ``text`` in ``unit``: quantity('3.35 TB/s', 'byte/s') -> 3.35e12.

    Read by :func:`roofkit.quantities.read`, the reader every answer goes
    through (:mod:`roofkit.answers` adds the catalog's accelerators as things
    counted, '8 H100s'; a quantity here has none). A bare number is taken to
    be in ``unit`` already; a positive number is required. A quantity whose dimension differs from ``unit``
    raises UnitMismatch naming both.
    """
    from .quantities import read  # deferred: ~12 ms that hw list never needs (a foundation too)

    if not isinstance(text, str):
        return positive(text, name)
    try:
        value = read(text, unit).value
    except UnitMismatch as error:
        raise UnitMismatch(f"{name}: {error}") from None
    except InvalidValue as error:
        raise InvalidValue(f"{name}: {error}") from None
    return float(positive(value, name))
