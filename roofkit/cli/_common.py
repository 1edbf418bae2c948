"""What every command shares: the one-line usage error, argument types, output as text or JSON."""

from __future__ import annotations

import argparse
import json
import math

from ..errors import RoofkitError

EXIT_USAGE = 2

_PREFIXES = [(1e24, "Y"), (1e21, "Z"), (1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]


def human(value: float, unit: str = "") -> str:
    """1.979e15, 'FLOP/s' -> '1.979 PFLOP/s'; small and plain values are printed as they are."""
    if value is None:
        return "-"
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}".strip()
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.4g} {prefix}{unit}".strip()
    if abs(value) < 1e-3 and unit == "s":
        return f"{value * 1e6:.4g} µs"
    if abs(value) < 1 and unit == "s":
        return f"{value * 1e3:.4g} ms"
    return f"{value:.4g} {unit}".strip()


def one_line(message: str) -> str:
    """``message`` with its control characters written as escapes: an argument such as 'a\\nb' echoed in an
    error keeps the error on one line.

    >>> one_line("unrecognized arguments: a\\nb\\r")
    'unrecognized arguments: a\\\\nb\\\\r'
    """
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line and exits 2."""

    def error(self, message):  # noqa: D401 - argparse's hook
        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_line(message)} (see '{self.prog} --help')\n")


def json_flag() -> argparse.ArgumentParser:
    """The ``--json`` flag, accepted before or after the command's words.

    Its default is SUPPRESS so that a subcommand that was not given ``--json``
    does not overwrite the value set by ``roofkit --json hw show h100``.
    """
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print one JSON object instead of text")
    return common


def _read_by(reader: str, name: str):
    """An argparse type that reads with ``roofkit.units.<reader>``, its error as our one-line message."""

    def parse(text):
        from .. import units  # deferred: import roofkit.cli loads no module but errors

        try:
            return getattr(units, reader)(text, name)
        except RoofkitError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return parse


def size(name):
    """An argparse type: '4096', '4e9', '70B' -> a positive number, or our one-line message."""
    return _read_by("size", name)


def token_count(name):
    """An argparse type: '4194304', '4M' (4 x 2^20: powers of two for a batch of tokens) -> a positive number."""
    return _read_by("tokens", name)


def number(name, zero=False):
    """An argparse type: a plain positive number such as 0.4 or 2.5 (``zero``: or 0)."""

    def parse(text):
        from ..units import nonnegative, positive  # deferred: import roofkit.cli loads no module but errors

        try:
            return (nonnegative if zero else positive)(float(text), name)
        except (ValueError, RoofkitError):
            what = "a number, 0 or more" if zero else "a positive number"
            raise argparse.ArgumentTypeError(f"{name} must be {what}; got {text!r}.") from None

    return parse


def count(name, least: int = 1):
    """An argparse type: a whole number of at least ``least`` (threads, workers, GPUs; 0 for a seed)."""

    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(f"{name} must be a whole number of at least {least}; got {text!r}.")
        return value

    return parse


def emit(args, data: dict, lines: list[str]) -> None:
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2, sort_keys=False, default=_jsonable))
    else:
        print("\n".join(lines))


def _jsonable(value):
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return str(value)


def table(rows: list[tuple[str, str]]) -> list[str]:
    if not rows:
        return []
    width = max(len(k) for k, _ in rows)
    return [f"{k:<{width}}  {v}" for k, v in rows]
