"""Reading a quantity: a number as people type it, with arithmetic and a unit, as a value in a given unit.

The foundation of every reader in roofkit: :func:`roofkit.units.quantity` (the
command line's and the library's ``"3.35 TB/s"``) and :mod:`roofkit.answers`
(a learner's answer, in ``check()``, the answer box and the grader) both read
through :func:`read`:

    >>> from roofkit import quantities
    >>> quantities.number("3.35 TB/s", "byte/s"), quantities.number("2**10 KiB", "byte")
    (3350000000000.0, 1048576.0)
    >>> quantities.read("1.37e3 ms", "s").digits
    3

Nothing typed is ever handed to ``eval``: the text is tokenized and parsed by
a grammar of numbers, the four operations, powers and parentheses, followed by
a unit made of FLOP, byte, bit and time units with SI or binary prefixes, things
counted and count words (the module docstring of :mod:`roofkit.answers` and
docs/answers.md list the spellings). A thing counted by a name only a catalog
knows ("8 H100s") is read when the caller passes ``names``, a lookup from a word
to the noun it counts: the course's reader passes the accelerator catalog's.
This module imports nothing of roofkit but its errors.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass
from typing import Callable

from .errors import InvalidValue, UnitMismatch

__all__ = ["Reading", "Unit", "read", "number", "unit", "significant_digits", "MAX_LENGTH", "UNIT_EXAMPLES",
           "FACTOR_UNIT"]

MAX_LENGTH = 200  # characters of an answer; a real answer is far shorter
MAX_DEPTH = 20  # nested parentheses
MAX_TOKENS = 120
# examples in error messages: spellings, not values any question has as its key
_EXAMPLES = "42, 1.5e3, 2.5 TB/s or 3*2**10"
UNIT_EXAMPLES = "FLOP, byte (B), bit (b), s, ms, µs, h, day, %, x, TB/s, GiB/s, TFLOP/s, FLOP/byte"

# --- units -----------------------------------------------------------------------------
# A dimension is (FLOP, byte, second) exponents: FLOP/byte is (1, -1, 0), TB/s is (0, 1, -1).
_FLOP, _BYTE, _SECOND, _NONE = (1, 0, 0), (0, 1, 0), (0, 0, 1), (0, 0, 0)
_NAMES = {_FLOP: "FLOP", _BYTE: "byte", _SECOND: "s"}


@dataclass(frozen=True)
class Unit:
    """A unit: how many base units (FLOP, byte, second) it is, and its dimension."""

    scale: float
    dims: tuple[int, int, int]
    bits: bool = False  # spelled with a bit unit ('Gb/s'), which people often mean as bytes
    noun: str | None = None  # a counted thing ('GPUs', 'USD', 'MACs'): a plain number that messages name

    def __mul__(self, other: "Unit") -> "Unit":
        return Unit(self.scale * other.scale, tuple(a + b for a, b in zip(self.dims, other.dims)),
                    self.bits or other.bits, self.noun or other.noun)

    def __pow__(self, power: int) -> "Unit":
        return Unit(self.scale**power, tuple(a * power for a in self.dims), self.bits, self.noun)

    @property
    def dimensionless(self) -> bool:
        return self.dims == _NONE


ONE = Unit(1.0, _NONE)
_PER_SECOND = Unit(1.0, (0, 0, -1))
_YEAR = 365.25 * 86400.0  # a Julian year

# atoms, matched exactly first, then case-insensitively (long names only)
_EXACT = {
    "B": Unit(1.0, _BYTE), "b": Unit(0.125, _BYTE, bits=True),
    "s": Unit(1.0, _SECOND), "h": Unit(3600.0, _SECOND), "d": Unit(86400.0, _SECOND),
    "%": Unit(0.01, _NONE), "x": ONE, "×": ONE,
}
_WORDS = {
    "flop": Unit(1.0, _FLOP), "flops": Unit(1.0, _FLOP), "op": Unit(1.0, _FLOP), "ops": Unit(1.0, _FLOP),
    "byte": Unit(1.0, _BYTE), "bytes": Unit(1.0, _BYTE),
    "bit": Unit(0.125, _BYTE, bits=True), "bits": Unit(0.125, _BYTE, bits=True),
    "sec": Unit(1.0, _SECOND), "secs": Unit(1.0, _SECOND), "second": Unit(1.0, _SECOND),
    "seconds": Unit(1.0, _SECOND),
    "min": Unit(60.0, _SECOND), "mins": Unit(60.0, _SECOND), "minute": Unit(60.0, _SECOND),
    "minutes": Unit(60.0, _SECOND),
    "hr": Unit(3600.0, _SECOND), "hrs": Unit(3600.0, _SECOND), "hour": Unit(3600.0, _SECOND),
    "hours": Unit(3600.0, _SECOND),
    "day": Unit(86400.0, _SECOND), "days": Unit(86400.0, _SECOND),
    "week": Unit(604800.0, _SECOND), "weeks": Unit(604800.0, _SECOND),
    "month": Unit(_YEAR / 12, _SECOND), "months": Unit(_YEAR / 12, _SECOND),
    "year": Unit(_YEAR, _SECOND), "years": Unit(_YEAR, _SECOND), "yr": Unit(_YEAR, _SECOND),
    "yrs": Unit(_YEAR, _SECOND),
    "hz": _PER_SECOND, "hertz": _PER_SECOND,
    "percent": Unit(0.01, _NONE), "pct": Unit(0.01, _NONE), "dimensionless": ONE, "times": ONE,
}
# things counted: "10695 GPUs", "7e10 parameters", "285 micro-batches", "$3.89M": plain numbers, named in messages
_NOUNS = {
    **dict.fromkeys(("gpu", "gpus"), "GPUs"), **dict.fromkeys(("token", "tokens", "tok", "toks"), "tokens"),
    **dict.fromkeys(("element", "elements", "elem", "elems"), "elements"),
    **dict.fromkeys(("param", "params", "parameter", "parameters"), "parameters"),
    **dict.fromkeys(("sequence", "sequences", "seq", "seqs"), "sequences"),
    **dict.fromkeys(("kernel", "kernels"), "kernels"), **dict.fromkeys(("launch", "launches"), "launches"),
    **dict.fromkeys(("step", "steps"), "steps"),
    **dict.fromkeys(("microbatch", "microbatches", "minibatch", "minibatches", "batch", "batches"), "batches"),
    **dict.fromkeys(("request", "requests", "req", "reqs", "user", "users"), "requests"),
    **dict.fromkeys(("layer", "layers"), "layers"), **dict.fromkeys(("head", "heads"), "heads"),
    **dict.fromkeys(("row", "rows"), "rows"), **dict.fromkeys(("node", "nodes"), "nodes"),
    **dict.fromkeys(("rank", "ranks"), "ranks"), **dict.fromkeys(("stage", "stages"), "stages"),
    **dict.fromkeys(("iteration", "iterations", "iter", "iters"), "iterations"),
    **dict.fromkeys(("gpu_hours",), "GPU-hours"),
    **dict.fromkeys(("switch", "switches"), "switches"), **dict.fromkeys(("leaf", "leaves", "leafs"), "leaves"),
    **dict.fromkeys(("spine", "spines"), "spines"), **dict.fromkeys(("port", "ports"), "ports"),
    **dict.fromkeys(("link", "links"), "links"), **dict.fromkeys(("replica", "replicas"), "replicas"),
    **dict.fromkeys(("expert", "experts"), "experts"), **dict.fromkeys(("slice", "slices"), "slices"),
    **dict.fromkeys(("usd", "dollar", "dollars"), "USD"),
}
_CENT = Unit(0.01, _NONE, noun="USD")  # '3.2 cents': a hundredth of a dollar
# things counted that take a decimal prefix: 'Mtok', 'ktokens' (never a binary one: 'Ki tokens' means nothing)
_PREFIXABLE_NOUNS = ("tokens",)
_DECIMAL_COUNT_PREFIXES = ("k", "K", "M", "G", "T")
# a number written as a word: 'nine' (read where a plain number is asked: a count or a ratio)
_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_NUMBER_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
                      "ninety": 90})
# where the question asks for a factor (unit 'x'): the words for a factor of one
_NO_CHANGE = re.compile(r"^(?:(?:no|zero)\s+speed[- ]?up(?:\s+at\s+all)?|no\s+change|unchanged|no\s+faster|"
                        r"not\s+faster|(?:just\s+)?as\s+fast|(?:the\s+)?same(?:\s+(?:speed|time))?)$", re.I)
# words and letters that multiply the number: "3.89 million", "2k", "70B" (in a count), "8 Ki"
_COUNT = {"thousand": 1e3, "thousands": 1e3, "million": 1e6, "millions": 1e6, "mn": 1e6, "mio": 1e6,
          "billion": 1e9, "billions": 1e9, "bn": 1e9, "trillion": 1e12, "trillions": 1e12,
          "quadrillion": 1e15, "kilo": 1e3, "mega": 1e6, "giga": 1e9, "tera": 1e12, "peta": 1e15, "exa": 1e18}
_COUNT_LETTERS = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
                  "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
# prefixes: binary first (two letters), then SI; 'K' is tolerated for kilo, 'u' for micro
_PREFIXES = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60,
             "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
             "m": 1e-3, "µ": 1e-6, "μ": 1e-6, "u": 1e-6, "n": 1e-9, "p": 1e-12}
# the same, spelled out: 'terabytes', 'milliseconds', 'teraflops', 'gibibytes'
_PREFIX_WORDS = {"kibi": 2.0**10, "mebi": 2.0**20, "gibi": 2.0**30, "tebi": 2.0**40, "pebi": 2.0**50,
                 "kilo": 1e3, "mega": 1e6, "giga": 1e9, "tera": 1e12, "peta": 1e15, "exa": 1e18,
                 "milli": 1e-3, "micro": 1e-6, "nano": 1e-9, "pico": 1e-12}
# FLOP rates are written in lowercase too ('tflops', 'gflop/s'); an 'm' there is mega (MFLOPS), as is usual
_LOWER_FLOP = re.compile(r"([kmgtpe])(flops?|ops|macs?)")
_LOWER_FLOP_SCALE = {"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15, "e": 1e18}
_EXPONENT = re.compile(r"^(.+?)(?:\^|\*\*)([-+]?\d)$")


# a number under a slash, with an optional decimal count letter: 'per 1M tokens', '/1,000 tokens', '/1k tok'
_DENOMINATOR_COUNT = re.compile(r"(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)([kKMGT])?")

# a lookup of things counted by a name only a catalog knows: 'H100s' -> 'h100 GPUs', else None
Names = Callable[[str], "str | None"]


class _Context:
    """What reading one unit text needs to know and what it finds out (notes for the learner)."""

    def __init__(self, expected: "Unit | None", names: Names | None = None):
        self.names = names
        # 'FLOPS' alone is a count where an amount of FLOPs is asked, and a rate (as on a datasheet) anywhere else
        self.wants_rate = expected is None or expected.dims != _FLOP
        self.expects_bytes = expected is None or expected.dims[1] != 0
        self.expects_flops = expected is not None and expected.dims[0] != 0
        self.expects_time = expected is not None and expected.dims == _SECOND
        self.timed = expected is not None and expected.dims[2] != 0  # a time or a rate: no binary counts there
        self.denominator = False
        self.per_thing = False  # a count or a thing counted under the slash ('per million tokens', '/Mtok')
        self.alone = False
        self.notes: list[str] = []
        self.counts: list[tuple[str, float]] = []  # count words as typed, with their factors

    def count(self, typed: tuple[str, float]) -> None:
        """A count word or letter typed after the number (one under the slash divides: it is not the number's)."""
        if not self.denominator:
            self.counts.append(typed)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


def _mac(ctx: _Context) -> Unit:
    """A multiply-accumulate: 2 FLOPs where FLOPs are asked, else a thing counted (what fvcore reports)."""
    if ctx.expects_flops:
        ctx.note("a MAC (multiply-accumulate) was read as 2 FLOPs")
        return Unit(2.0, _FLOP)
    return Unit(1.0, _NONE, noun="MACs")


def _atom(word: str, ctx: _Context, prefixed: bool = False) -> Unit | None:
    """A unit word without prefix, or None."""
    if word in _EXACT:
        return _EXACT[word]
    if ctx.denominator and word == "S":  # 'TB/S': a capital S under a slash can only be seconds
        return _EXACT["s"]
    if prefixed and word == "F":  # 'TF/s', '282 TF': F after a prefix is a FLOP, as in tables
        return _WORDS["flop"]
    low = word.lower()
    if len(word) > 1 and low in _WORDS:
        return _WORDS[low]
    if low in ("mac", "macs"):
        return _mac(ctx)
    if len(word) > 1 and low in _NOUNS:
        return Unit(1.0, _NONE, noun=_NOUNS[low])
    if low in ("cent", "cents", "¢"):
        return _CENT
    return None


def _prefixed(word: str, ctx: _Context) -> Unit | None:
    """'TB', 'µs', 'GiB', 'terabytes', 'milliseconds', 'tflops', 'GMACs': a prefix and a unit, or None."""
    def usable(rest: Unit | None) -> bool:
        return rest is not None and rest is not _EXACT["%"] and (rest.dims != _NONE or rest.noun == "MACs")

    for prefix in sorted(_PREFIXES, key=len, reverse=True):
        if word.startswith(prefix) and len(word) > len(prefix):
            rest = _atom(word[len(prefix):], ctx, prefixed=True)
            if usable(rest):
                return Unit(_PREFIXES[prefix] * rest.scale, rest.dims, rest.bits, rest.noun)
    for prefix in _DECIMAL_COUNT_PREFIXES:  # 'Mtok', 'ktokens': a decimal count of a thing counted
        rest = _atom(word[len(prefix):], ctx) if word.startswith(prefix) and len(word) > len(prefix) + 1 else None
        if rest is not None and rest.noun in _PREFIXABLE_NOUNS and rest.dims == _NONE:
            return Unit(_PREFIXES[prefix] * rest.scale, rest.dims, rest.bits, rest.noun)
    low = word.lower()
    for prefix, factor in _PREFIX_WORDS.items():
        if low.startswith(prefix) and len(low) > len(prefix) + 1:
            rest = _atom(word[len(prefix):], ctx)
            if usable(rest):
                return Unit(factor * rest.scale, rest.dims, rest.bits, rest.noun)
    match = _LOWER_FLOP.fullmatch(word)
    if match:
        rest = _atom(match.group(2), ctx)
        return Unit(_LOWER_FLOP_SCALE[match.group(1)] * rest.scale, rest.dims, rest.bits, rest.noun)
    return None


def _word(word: str, ctx: _Context) -> tuple[Unit, str]:
    """One word of a unit and what it is: ('unit' | 'count' | 'noun'). 'TB', 'FLOPS', 'µs', 'million', 'H100s'."""
    low = word.lower()
    if low in _COUNT:
        ctx.count((word, _COUNT[low]))
        return Unit(_COUNT[low], _NONE), "count"
    if word == "B" and not ctx.expects_bytes and not ctx.denominator:
        ctx.count((word, 1e9))
        return Unit(1e9, _NONE), "count"  # '70 B' where a count is asked: a billion
    if word == "m" and not ctx.denominator:
        if ctx.expects_time:
            raise InvalidValue("'m' alone is ambiguous for a time: write ms for milliseconds or min for minutes.")
        ctx.count((word, 1e6))
        return Unit(1e6, _NONE), "count"  # a lone lowercase m is a million ('1.4m'); milli needs a unit ('ms')
    if low == "tps":  # '13200 tps': tokens per second, as serving benchmarks write it
        return Unit(1.0, _NONE, noun="tokens") * _PER_SECOND, "unit"
    found = _atom(word, ctx) or _prefixed(word, ctx)
    if found is None and word in _COUNT_LETTERS:
        if ctx.timed and word.endswith("i"):
            raise InvalidValue(f"{word!r} is {_COUNT_LETTERS[word]:,.0f}, a binary count (of bytes, or of a power "
                               "of two); a time or a rate is counted in thousands: write k, M or G.")
        ctx.count((word, _COUNT_LETTERS[word]))
        return Unit(_COUNT_LETTERS[word], _NONE), "count"
    if found is None and len(word) > 2 and low.endswith("ps") and not low.endswith("ops"):
        # 'TBps', 'Gbps': per second written as a suffix
        try:
            inner, _ = _word(word[:-2], _Context(None, ctx.names))
        except InvalidValue:
            raise InvalidValue(f"cannot read {word!r} as a unit; use units such as {UNIT_EXAMPLES}.") from None
        return inner * _PER_SECOND, "unit"
    if found is None:
        name = ctx.names(word) if ctx.names else None
        if name:
            return Unit(1.0, _NONE, noun=name), "noun"
        raise InvalidValue(f"cannot read {word!r} as a unit; use units such as {UNIT_EXAMPLES}.")
    if found.dims == _FLOP and low.endswith(("flops", "ops")):
        if ctx.wants_rate and ctx.alone:
            # 'TFLOPS' where a rate is asked: FLOP per second, as on a datasheet
            found = found * _PER_SECOND
            if re.search(r"OPs$", word):  # 'FLOPs', 'TFLOPs': the plural of FLOP, a count ('tflops' is a rate)
                ctx.note(f"{word} with a small s is a count of FLOPs; a rate is FLOP/s (or FLOPS): "
                         f"read as {word[:-1]}/s")
        elif not ctx.wants_rate and word.endswith("OPS"):
            ctx.note(f"{word} with a capital S usually means FLOP per second; read as a count of FLOPs, "
                     "as the question asks")
    return found, ("noun" if found.noun and found.dims == _NONE else "unit")


def _normal(text: str) -> str:
    normal = re.sub(r"\bper\b", "/", text, flags=re.I).replace("−", "-").replace("$", " USD ")
    normal = re.sub(r"\bGPU[- ]?h(?:ou)?rs?\b|\bGPUh\b", "gpu-hours", normal, flags=re.I)
    normal = re.sub(r"\b(micro|mini)[- ]?(batch(?:es)?)\b", r"\1\2", normal, flags=re.I)
    normal = re.sub(r"\s*(?:\*\*|\^)\s*", "^", normal)  # 's^-1', 's**-1'
    normal = normal.replace("·", " ").replace("⋅", " ").replace("*", " ")
    return re.sub(r"(?<=[A-Za-z])-(?=[A-Za-z])", " ", normal.replace("gpu-hours", "gpu_hours"))  # 'GPU-s'


def _parse_unit(text: str, expected: "Unit | None", names: Names | None = None) -> tuple[Unit, bool, _Context]:
    """The unit of ``text``, whether it held count words only ('million', 'k', '8K'), and what was noted."""
    ctx = _Context(expected, names)
    text = text.strip()
    if not text:
        return ONE, False, ctx
    parts = _normal(text).split("/")
    if any(not p.strip() for p in parts[1:]):
        raise InvalidValue(f"cannot read {text!r} as a unit: a '/' needs a unit after it; use units such as "
                           f"{UNIT_EXAMPLES}.")
    words_of = [p.split() for p in parts]
    ctx.alone = len(parts) == 1 and len(words_of[0]) == 1
    result, kinds = ONE, []
    for index, words in enumerate(words_of):
        ctx.denominator = index > 0
        for raw in words:
            power = 1
            match = _EXPONENT.match(raw)
            if match:
                raw, power = match.group(1), int(match.group(2))
            if raw == "1" and not ctx.denominator:
                continue  # '1/s'
            count = _DENOMINATOR_COUNT.fullmatch(raw) if ctx.denominator and raw is words[0] else None
            if count and len(words) > 1:  # 'per 1M tokens', '/1,000 tokens': a number of things under the slash
                rest = [_word(w, ctx)[0] for w in words[1:]]
                if any(r.dims != _NONE for r in rest):
                    raise InvalidValue(f"cannot read {raw!r} in a unit: a number under a slash counts things "
                                       "('per 1M tokens'); to divide quantities, write each with its unit.")
                ctx.per_thing = True
                letter = count.group(2) or ""
                piece = Unit(_literal(count.group(1)) * _COUNT_LETTERS.get(letter, 1.0), _NONE)
                for r in rest:
                    piece = piece * r
                result = result * piece**-1
                kinds.append("unit")
                break
            piece, kind = _word(raw, ctx)
            if ctx.denominator and piece.dims == _NONE and (kind in ("count", "noun") or piece.noun):
                ctx.per_thing = True
            kinds.append(kind if index == 0 and power == 1 else "unit")
            piece = piece**power
            result = result * (piece**-1 if ctx.denominator else piece)
    return result, bool(kinds) and all(k == "count" for k in kinds), ctx


def unit(text: str, expected: "Unit | None" = None, names: Names | None = None) -> Unit:
    """The :class:`Unit` of a unit text such as 'TB/s', 'FLOP/byte', 'GiB', '%', 'million'.

    ``expected`` (the question's unit) settles the ambiguous spellings: 'B' and
    'FLOPS' (see :mod:`roofkit.answers`); ``names`` reads things counted by name ('H100s').
    """
    return _parse_unit(text, expected, names)[0]


# --- expressions -------------------------------------------------------------------------
_NUMBER = re.compile(r"(?:\d{1,3}(?:,\d{3})+(?![\d,])|\d+(?:_\d+)*)(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?")
_OPERATORS = {"**": "**", "^": "**", "*": "*", "×": "*", "·": "*", "/": "/", "÷": "/", "+": "+", "-": "-",
              "−": "-", "(": "(", ")": ")"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FUNCTIONS = ("sqrt", "log", "exp")


def _tokens(text: str, names: tuple[str, ...] | None) -> tuple[list[tuple[str, str]], str]:
    """Split off the arithmetic at the start of ``text``; the rest is a unit (numbers) or an error (formulas)."""
    tokens, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        match = _NUMBER.match(text, i)
        if match and names is None and tokens and (tokens[-1][0] == "num" or tokens[-1] == ("op", ")")):
            break  # '5171 1/s': a second number with no operator before it starts the unit
        if match:
            tokens.append(("num", match.group()))
            i = match.end()
            continue
        op = text[i:i + 2] if text[i:i + 2] == "**" else ch
        if op in _OPERATORS:
            tokens.append(("op", _OPERATORS[op]))
            i += len(op)
            continue
        if names is not None:
            match = _NAME.match(text, i)
            if match:
                tokens.append(("name", match.group()))
                i = match.end()
                continue
        break
    if len(tokens) > MAX_TOKENS:
        raise InvalidValue("that answer is too long to be a number or a formula.")
    return tokens, text[i:]


class _Parser:
    """Recursive descent over the tokens: expr := term (+|- term)*, term := unary (*|/ unary)*,
    unary := (+|-) unary | power, power := atom [** unary], atom := number | name | f(expr) | (expr).

    It builds nested tuples; evaluation is separate (floats for numbers, sympy for formulas).
    """

    def __init__(self, tokens, implicit: bool, tight: bool = False):
        # tight: an implicit product binds tighter than * and / ('2n/3b' as 2n/(3b)); only to say how a formula
        # could have been meant: formulas are read with it off, as (2n/3)b
        self.tokens, self.i, self.depth, self.implicit, self.tight = tokens, 0, 0, implicit, tight

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else ("end", "")

    def take(self):
        token = self.peek()
        self.i += 1
        return token

    def parse(self):
        if not self.tokens:
            raise InvalidValue("no number in the answer")
        tree = self.expr()
        if self.i != len(self.tokens):
            raise InvalidValue(f"unexpected {self.peek()[1]!r}")
        return tree

    def expr(self):
        tree = self.term()
        while self.peek() in (("op", "+"), ("op", "-")):
            tree = (self.take()[1], tree, self.term())
        return tree

    def term(self):
        operand = self.product if self.tight else self.unary
        tree = operand()
        while True:
            token = self.peek()
            if token in (("op", "*"), ("op", "/")):
                tree = (self.take()[1], tree, operand())
            elif self.implicit and not self.tight and self._juxtaposed(token):
                tree = ("*", tree, self.unary(), "implicit")  # '2n', '3(n+1)', 'n b'
            else:
                return tree

    def _juxtaposed(self, token) -> bool:
        return token[0] in ("num", "name") or token == ("op", "(")

    def product(self):
        tree = self.unary()
        while self._juxtaposed(self.peek()):
            tree = ("*", tree, self.unary(), "implicit")
        return tree

    def unary(self):
        if self.peek() in (("op", "+"), ("op", "-")):
            sign = self.take()[1]
            operand = self.unary()
            return ("neg", operand) if sign == "-" else operand
        return self.power()

    def power(self):
        base = self.atom()
        if self.peek() == ("op", "**"):
            self.take()
            return ("**", base, self.unary())  # right-associative: 2**3**2 = 2**9
        return base

    def atom(self):
        kind, value = self.take()
        if kind == "num":
            return ("num", value)
        if kind == "name":
            if value in _FUNCTIONS and self.peek() == ("op", "("):
                return ("call", value, self.atom())
            return ("name", value)
        if (kind, value) == ("op", "("):
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise InvalidValue("too many nested parentheses")
            inner = self.expr()
            if self.take() != ("op", ")"):
                raise InvalidValue("a '(' is not closed")
            self.depth -= 1
            return inner
        if kind == "end":
            raise InvalidValue("the answer ends with an operator")
        raise InvalidValue(f"unexpected {value!r}")


def _literal(text: str) -> float:
    return float(text.replace(",", "").replace("_", ""))


def _evaluate(tree) -> float:
    """The value of a parsed number expression, in floating point, refusing what is not a finite number."""
    kind = tree[0]
    if kind == "num":
        return _literal(tree[1])
    if kind == "neg":
        return -_evaluate(tree[1])
    a, b = _evaluate(tree[1]), _evaluate(tree[2])
    try:
        if kind == "+":
            value = a + b
        elif kind == "-":
            value = a - b
        elif kind == "*":
            value = a * b
        elif kind == "/":
            value = a / b
        else:
            value = math.pow(a, b)
    except ZeroDivisionError:
        raise InvalidValue("it divides by zero") from None
    except OverflowError:
        raise InvalidValue("it is too large to be an answer here") from None
    except ValueError:  # math.pow(-8, 0.5)
        raise InvalidValue("it is not a real number") from None
    if not math.isfinite(value):
        raise InvalidValue("it is too large to be an answer here")
    return value


def significant_digits(text: str) -> int | None:
    """Significant figures of a single typed number ('1.37e3' -> 3, '10500' -> 3, '0.0050' -> 1), else None."""
    found = _figures(text)
    return found[0] if found else None


def _figures(text: str) -> tuple[int, int | None] | None:
    """(significant figures, exponent of the first digit) of a single typed number, else None.

    The figures are the digits without leading and trailing zeros ('2000' and '2.000' have 1, '0.0050' has 2):
    what the number is, not how it was written, so that 0.17 in Python and '0.170' typed are one answer.
    """
    match = re.fullmatch(r"\s*[-+]?((?:\d[\d,_]*)?(?:\.\d*)?)(?:[eE]([-+]?\d+))?\s*", text)
    if not match or not any(c.isdigit() for c in match.group(1)):
        return None
    mantissa = match.group(1).replace(",", "").replace("_", "")
    exponent = int(match.group(2) or 0)
    whole, _, fraction = mantissa.partition(".")
    if whole.lstrip("0"):
        lead = len(whole.lstrip("0")) - 1
    elif fraction.strip("0"):
        lead = -(len(fraction) - len(fraction.lstrip("0")) + 1)
    else:
        return (1, None)  # zero: no place to round at
    digits = (whole + fraction).strip("0")
    return (max(len(digits), 1), lead + exponent)


@dataclass(frozen=True)
class Reading:
    """What a learner typed, read: the value in the question's unit, and what helps to explain a slip."""

    value: float
    text: str
    unit_given: bool  # a unit (or a count word) was written after the number
    digits: int | None  # significant figures typed ('2000' -> 1, '2.50' -> 2), when the answer is a single number
    bits: bool = False  # a bit unit was used (b, bit, Gb/s)
    lead: float | None = None  # the place of its first significant digit, in the question's unit (1.37e3 -> 1000)
    notes: tuple[str, ...] = ()  # how a spelling was read ('FLOPs with a small s ...'), for the feedback
    counts: tuple[tuple[str, float], ...] = ()  # count words and letters typed ('K', 1000.0)

    def tolerance(self, figures: int) -> float | None:
        """Half a unit in the last place of the number written to at least ``figures`` significant figures.

        A number that is the exact value rounded to that many figures lies within this of it. Zeros a number
        does not show count: 0.1 is 0.10 at two figures (a Python float cannot show them, nor need a learner).
        None when the answer is not a single number.
        """
        if self.digits is None or self.lead is None:
            return None
        return 0.5 * self.lead * 10.0 ** (1 - max(figures, self.digits)) * (1 + 1e-9)


def _check_text(text: str, what: str) -> str:
    if len(text) > MAX_LENGTH:
        raise InvalidValue(f"that answer is {len(text)} characters long; {what} is at most {MAX_LENGTH}.")
    return text.strip()


def _dimension_name(dims: tuple[int, int, int], noun: str | None = None) -> str:
    top = [f"{_NAMES[base]}" + (f"^{p}" if p > 1 else "") for base, p in zip((_FLOP, _BYTE, _SECOND), dims) if p > 0]
    bottom = [f"{_NAMES[base]}" + (f"^{-p}" if p < -1 else "") for base, p in zip((_FLOP, _BYTE, _SECOND), dims)
              if p < 0]
    if not top and not bottom:
        return f"a count of {noun}" if noun else "a plain number"
    return (" ".join(top) or "1") + ("/" + "/".join(bottom) if bottom else "")


def _mismatch(text: str, got: Unit, wanted: Unit, unit_text: str) -> UnitMismatch:
    shown = {"dimensionless": "a plain number", "": "a plain number", FACTOR_UNIT: "a factor"}.get(unit_text, unit_text)
    per_second = tuple(a - b for a, b in zip(got.dims, wanted.dims))
    both = not got.dimensionless and not wanted.dimensionless
    if both and per_second == (0, 0, -1):
        why = f"{text!r} is a rate (per second); the question asks for an amount in {shown}: drop the '/s'."
    elif both and per_second == (0, 0, 1):
        why = f"{text!r} is an amount, not a rate: the question asks for {shown}, so a '/s' is missing."
    elif wanted.dimensionless:
        why = f"{text!r} has a unit ({_dimension_name(got.dims)}), but the question asks for {shown}."
    elif got.dimensionless:
        what = ("a percentage" if got.scale == 0.01 and not got.noun else "an amount in USD" if got.noun == "USD"
                else _dimension_name(got.dims, got.noun))
        why = (f"{text!r} is {what}, but the question asks for {shown}: write the number in {shown}, or with a "
               f"unit of that kind.")
    else:
        why = f"{text!r} is in {_dimension_name(got.dims)}, which cannot be converted to {shown}."
    error = UnitMismatch(why)
    error.dims = per_second
    return error


def _number_text(answer) -> str:
    """A number given in Python as the text that types it: 0.17 -> '0.17', 2000.0 -> '2000', 1e22 -> '1e+22'."""
    if isinstance(answer, numbers.Integral):
        return str(int(answer))
    text = repr(float(answer))
    return text[:-2] if text.endswith(".0") else text


_APPROXIMATELY = re.compile(r"^\s*(?:~|≈|about\s|approx\.?\s*|approximately\s|roughly\s|around\s)\s*", re.I)
_CURRENCY = re.compile(r"^\s*(?:US)?\$\s*")


_RATIO = re.compile(r"([0-9][0-9,_]*(?:\.[0-9]*)?)\s*:\s*([0-9][0-9,_]*(?:\.[0-9]*)?)")  # '9:1', where a ratio is asked
# an operator between two quantities: after a unit (a letter or %), before a number: '989 TFLOP/s / 3.35 TB/s'
_BETWEEN_QUANTITIES = re.compile(r"(?<=[A-Za-z%µμ])\s*([/*×÷])\s*(?=[\d.(])")
FACTOR_UNIT = "x"  # a question's unit where it asks for a factor: 'no speedup' reads as 1 there


def _quantity_expression(body: str, wanted: Unit, names: Names | None) -> tuple[float, Unit] | None:
    """'989 TFLOP/s / 3.35 TB/s': quantities with their units, divided or multiplied, as (value in base units,
    unit); None when ``body`` is not two or more such quantities. Raises InvalidValue for a term it cannot read."""
    pieces = _BETWEEN_QUANTITIES.split(body)
    if len(pieces) < 3:
        return None
    value, result = 1.0, ONE
    for index in range(0, len(pieces), 2):
        term, op = pieces[index].strip(), ("*" if index == 0 else pieces[index - 1])
        tokens, rest = _tokens(term, None)
        if not tokens:
            raise InvalidValue(f"no number in {term[:30]!r}")
        amount = _evaluate(_Parser(tokens, implicit=False).parse())
        rest = rest.strip()
        if rest.startswith("/"):
            rest = "1" + rest
        given = _parse_unit(rest, None, names)[0] if rest else ONE
        amount, given = amount * given.scale, Unit(1.0, given.dims, given.bits, given.noun)
        if op in ("/", "÷"):
            if amount == 0:
                raise InvalidValue("it divides by zero")
            value, result = value / amount, result * given**-1
        else:
            value, result = value * amount, result * given
    if not math.isfinite(value):
        raise InvalidValue("it is too large to be an answer here")
    return value, Unit(1.0, result.dims, result.bits, wanted.noun)


def read(answer, unit_text: str = "dimensionless", names: Names | None = None) -> Reading:
    """Read a numeric answer (a number, or text such as '3.35 TB/s') as a value in ``unit_text``.

    A bare number is taken to be in ``unit_text`` already, and so is a number followed by count words only
    ('1.12 trillion', '240G' where FLOPs are asked). A number given in Python is read as the text that types
    it (0.17 as '0.17'), so that both get the same verdict. Where the question's unit is per a count of things
    ('USD per million tokens'), an amount without a 'per' is in that unit too ('$0.032', '3.2 cents'). Where a
    plain number is asked (a count, a ratio, a factor), 'nine' and '9:1' are numbers; where a factor is asked
    (unit 'x'), 'no speedup' is 1. Quantities may be divided or multiplied ('989 TFLOP/s / 3.35 TB/s'). Raises
    InvalidValue for what cannot be read and UnitMismatch for a unit of another dimension.
    """
    wanted, _, wanted_ctx = _parse_unit(unit_text, None, names)
    if not isinstance(answer, str):
        if isinstance(answer, bool) or not isinstance(answer, numbers.Real):
            raise InvalidValue(f"a number is expected; got {answer!r} ({type(answer).__name__}).")
        try:
            finite = math.isfinite(float(answer))
        except OverflowError:  # an int such as 10**400
            finite = False
        if not finite:
            raise InvalidValue(f"a finite number is expected; got {answer!r}.")
        text = _number_text(answer)
    else:
        text = _check_text(answer, "a number with its unit")
    shown = f"{text[:60]!r}"
    body = _APPROXIMATELY.sub("", text)
    if body.endswith(".") and not body.endswith("..") and len(body) > 1 and not body[-2].isdigit():
        body = body[:-1]  # '5 ms.' (a sentence's full stop)
    if unit_text.strip() == FACTOR_UNIT and _NO_CHANGE.match(body.strip()):
        return Reading(1.0, text, False, None)  # 'no speedup', 'the same': a factor of exactly one
    spelled = False  # a number written as a word is exact: it has no figures to round at
    if wanted.dimensionless:  # a count, a ratio or a factor: 'nine', 'nine times', '9:1'
        word = re.match(r"([A-Za-z]+)\b", body.strip())
        if word and word.group(1).lower() in _NUMBER_WORDS:
            body, spelled = f"{_NUMBER_WORDS[word.group(1).lower()]}{body.strip()[word.end():]}", True
        ratio = _RATIO.fullmatch(body.strip())
        if ratio:
            body = ratio.group(1) if _literal(ratio.group(2)) == 1 else f"{ratio.group(1)}/{ratio.group(2)}"
    currency = _CURRENCY.match(body)
    if currency:
        body = body[currency.end():]
    tokens, rest = _tokens(body, None)
    if tokens and tokens[-1] in (("op", "/"), ("op", "*")) and rest.strip():
        rest = ("/" if tokens.pop() == ("op", "/") else "") + rest  # '1e3/s', '3 * TB'
    if currency:
        rest = f"{rest} USD"
    if not tokens or rest.lstrip().startswith(","):
        if rest.lstrip().startswith(","):
            raise InvalidValue(f"cannot read {shown}: a comma may only group thousands (1,365); "
                               "write decimals with a point (1.4).")
        try:
            unit(rest, wanted, names)
        except InvalidValue:
            raise InvalidValue(f"cannot read {shown} as a number: write a number such as {_EXAMPLES}, "
                               f"optionally followed by a unit such as {UNIT_EXAMPLES}.") from None
        raise InvalidValue(f"no number in {shown}: write the number, then the unit ('<number> {rest.strip()[:30]}').")
    try:
        value = _evaluate(_Parser(tokens, implicit=False).parse())
    except InvalidValue as error:
        raise InvalidValue(f"cannot read {shown} as a number: {error}. Write a number such as {_EXAMPLES}.") from None
    unit_text_given = rest.strip()
    if unit_text_given.startswith("/"):
        unit_text_given = "1" + unit_text_given
    try:
        given, count_only, ctx = _parse_unit(unit_text_given, wanted, names) if unit_text_given else (wanted, False, None)
    except InvalidValue as error:
        try:  # quantities divided or multiplied: '989 TFLOP/s / 3.35 TB/s'
            expression = None if currency else _quantity_expression(body, wanted, names)
        except InvalidValue as inner:
            raise InvalidValue(f"in {shown}: {inner}") from None
        if expression is None:
            raise InvalidValue(f"in {shown}: {error}") from None
        amount, given = expression
        if given.dims != wanted.dims:
            raise _mismatch(text, given, wanted, unit_text) from None
        return Reading(amount / wanted.scale, text, True, None, given.bits)
    if count_only:  # '1.12 trillion', '8K', '240G': a number of the question's unit
        given = Unit(given.scale * wanted.scale, wanted.dims, wanted.bits)
    elif (wanted_ctx.per_thing and ctx is not None and not ctx.per_thing and given.dims == wanted.dims
          and given.noun in (None, wanted.noun)):  # '$0.032', '3.2 cents' where USD per million tokens are asked
        given = Unit(given.scale * wanted.scale, wanted.dims, wanted.bits, wanted.noun)
    if given.dims != wanted.dims:
        raise _mismatch(text, given, wanted, unit_text)
    ratio = given.scale / wanted.scale
    value = value * ratio
    if not math.isfinite(value):
        raise InvalidValue(f"cannot read {shown} as a number: it is too large to be an answer here.")
    single = len(tokens) == 1 or (len(tokens) == 2 and tokens[0] in (("op", "-"), ("op", "+")))  # '-3.5'
    figures = _figures(tokens[-1][1]) if single and not spelled else None
    digits, lead = figures if figures else (None, None)
    return Reading(value, text, bool(unit_text_given), digits, given.bits,
                   None if lead is None else 10.0**lead * ratio,
                   tuple(ctx.notes) if ctx else (), tuple(ctx.counts) if ctx else ())


def number(answer, unit_text: str = "dimensionless", names: Names | None = None) -> float:
    """The value of a numeric answer in ``unit_text``: ``number('3.35 TB/s', 'byte/s')`` -> 3.35e12."""
    return read(answer, unit_text, names).value
