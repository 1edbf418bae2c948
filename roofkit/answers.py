"""Reading a learner's answer: one reader for check(), the answer box, the command line and the grader.

A numeric answer is a short arithmetic expression followed by an optional unit:

    >>> from roofkit import answers
    >>> answers.number("3.35 TB/s", "byte/s")
    3350000000000.0
    >>> answers.number("192937984", "byte")     # a bare number is in the question's unit
    192937984.0
    >>> answers.number("93.8%", "percent"), answers.number("93.8", "percent")
    (93.8, 93.8)
    >>> answers.number("(2-2**-10)*2**15", "dimensionless")
    65504.0
    >>> answers.number("3.89 million", "dimensionless"), answers.number("1.4k", "dimensionless")
    (3890000.0, 1400.0)
    >>> answers.number("295 FLOPS/byte", "FLOP/byte"), answers.number("1232 μs", "s")
    (295.0, 0.001232)

Nothing a learner types is ever handed to ``eval``, pint or ``sympy.sympify``:
the text is tokenized and parsed here, by a grammar that knows numbers, the
four operations, powers and parentheses (and, for a formula, the question's own
symbols and sqrt/log/exp). Powers are computed in floating point, so
``10**10**10`` is refused at once as too large instead of freezing the kernel.
Every failure is a :class:`~roofkit.errors.RoofkitError` (``InvalidValue`` or
``UnitMismatch``) that says what was expected.

Units are products and quotients of FLOP, byte, bit and time units with SI or
binary prefixes, in the spellings people use (``FLOP/byte``, ``flop/B``,
``FLOPs/byte``, ``TFLOPS``, ``TB/s``, ``TBps``, ``TBytes/s``, ``GiB/s``, ``µs``,
``us``, ``ms``, ``h``, ``days``, ``%``, a trailing ``x`` for a factor) and the
count words ``k``, ``M``, ``B``/``bn``, ``T``, ``thousand``, ``million``,
``billion``, ``trillion``. Where a spelling is ambiguous the question decides:
``B`` is a byte in a question about bytes and a billion in a plain count;
``FLOPS`` is a rate where a rate is asked and a count otherwise. ``b`` is
always a bit and ``B`` a byte, as on a datasheet.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass

from .errors import InvalidValue, UnitMismatch

__all__ = ["Reading", "Unit", "read", "number", "unit", "expression", "choice", "significant_digits",
           "MAX_LENGTH", "UNIT_EXAMPLES"]

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

    def __mul__(self, other: "Unit") -> "Unit":
        return Unit(self.scale * other.scale, tuple(a + b for a, b in zip(self.dims, other.dims)),
                    self.bits or other.bits)

    def __pow__(self, power: int) -> "Unit":
        return Unit(self.scale**power, tuple(a * power for a in self.dims), self.bits)

    @property
    def dimensionless(self) -> bool:
        return self.dims == _NONE


ONE = Unit(1.0, _NONE)

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
    "percent": Unit(0.01, _NONE), "pct": Unit(0.01, _NONE), "dimensionless": ONE, "times": ONE,
    # things counted: "10695 GPUs", "7e10 parameters", "4.4e6 GPU-hours" where a count of GPU-hours is asked
    "gpu": ONE, "gpus": ONE, "token": ONE, "tokens": ONE, "element": ONE, "elements": ONE,
    "param": ONE, "params": ONE, "parameter": ONE, "parameters": ONE, "sequence": ONE, "sequences": ONE,
    "kernel": ONE, "kernels": ONE, "launch": ONE, "launches": ONE, "gpu_hours": ONE,
}
# words and letters that multiply the number: "3.89 million", "2k", "70B" (in a count)
_COUNT = {"thousand": 1e3, "thousands": 1e3, "million": 1e6, "millions": 1e6, "mn": 1e6,
          "billion": 1e9, "billions": 1e9, "bn": 1e9, "trillion": 1e12, "trillions": 1e12,
          "quadrillion": 1e15}
_COUNT_LETTERS = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
# prefixes: binary first (two letters), then SI; 'K' is tolerated for kilo, 'u' for micro
_PREFIXES = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60,
             "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
             "m": 1e-3, "µ": 1e-6, "μ": 1e-6, "u": 1e-6, "n": 1e-9, "p": 1e-12}
_EXPONENT = re.compile(r"^(.+?)(?:\^|\*\*)([-+]?\d)$")


def _atom(word: str, denominator: bool) -> Unit | None:
    """A unit word without prefix, or None."""
    if word in _EXACT:
        return _EXACT[word]
    if denominator and word == "S":  # 'TB/S': a capital S under a slash can only be seconds
        return _EXACT["s"]
    return _WORDS.get(word.lower()) if len(word) > 1 else None


def _word(word: str, denominator: bool, wants_rate: bool, alone: bool, expects_bytes: bool) -> Unit:
    """One word of a unit: 'TB', 'FLOPS', 'µs', 'GiB', 'k', 'million', 'TBps'."""
    if word.lower() in _COUNT:
        return Unit(_COUNT[word.lower()], _NONE)
    if word == "B" and not expects_bytes and not denominator:
        return Unit(1e9, _NONE)  # '70 B' where a count is asked: a billion
    if word == "m" and not denominator:
        return Unit(1e6, _NONE)  # a lone lowercase m is a million ('1.4m'); milli needs a unit after it ('ms')
    found = _atom(word, denominator)
    if found is None:
        for prefix in sorted(_PREFIXES, key=len, reverse=True):
            if word.startswith(prefix) and len(word) > len(prefix):
                rest = _atom(word[len(prefix):], denominator)
                if rest is not None and rest is not _EXACT["%"] and rest.dims != _NONE:
                    found = Unit(_PREFIXES[prefix] * rest.scale, rest.dims, rest.bits)
                    break
    if found is None and word in _COUNT_LETTERS:
        return Unit(_COUNT_LETTERS[word], _NONE)
    if found is None and len(word) > 2 and word.lower().endswith("ps") and not word.lower().endswith("ops"):
        # 'TBps', 'Gbps': per second written as a suffix
        return _word(word[:-2], denominator, False, False, True) * Unit(1.0, (0, 0, -1))
    if found is None:
        raise InvalidValue(f"cannot read {word!r} as a unit; use units such as {UNIT_EXAMPLES}.")
    if found.dims == _FLOP and word.lower().endswith(("flops", "ops")) and wants_rate and alone:
        # 'TFLOPS' where a rate is asked: FLOP per second, as on a datasheet
        found = found * Unit(1.0, (0, 0, -1))
    return found


def unit(text: str, expected: "Unit | None" = None) -> Unit:
    """The :class:`Unit` of a unit text such as 'TB/s', 'FLOP/byte', 'GiB', '%', 'million'.

    ``expected`` (the question's unit) settles the ambiguous spellings: 'B' and
    'FLOPS' (see the module's docstring).
    """
    text = text.strip()
    if not text:
        return ONE
    # 'FLOPS' alone is a count where an amount of FLOPs is asked, and a rate (as on a datasheet) anywhere else
    wants_rate = expected is None or expected.dims != _FLOP
    expects_bytes = expected is None or expected.dims[1] != 0
    normal = re.sub(r"\bper\b", "/", text, flags=re.I).replace("−", "-")
    normal = re.sub(r"\bGPU[- ]?h(?:ou)?rs?\b|\bGPUh\b", "gpu-hours", normal, flags=re.I)
    normal = re.sub(r"\s*(?:\*\*|\^)\s*", "^", normal)  # 's^-1', 's**-1'
    normal = normal.replace("·", " ").replace("⋅", " ").replace("*", " ")
    normal = re.sub(r"(?<=[A-Za-z])-(?=[A-Za-z])", " ", normal.replace("gpu-hours", "gpu_hours"))  # 'GPU-s'
    parts = normal.split("/")
    if any(not p.strip() for p in parts[1:]):
        raise InvalidValue(f"cannot read {text!r} as a unit: a '/' needs a unit after it; use units such as "
                           f"{UNIT_EXAMPLES}.")
    words_of = [p.split() for p in parts]
    alone = len(parts) == 1 and len(words_of[0]) == 1
    result = ONE
    for index, words in enumerate(words_of):
        denominator = index > 0
        for raw in words:
            power = 1
            match = _EXPONENT.match(raw)
            if match:
                raw, power = match.group(1), int(match.group(2))
            if raw == "1" and not denominator:
                continue  # '1/s'
            piece = _word(raw, denominator, wants_rate, alone, expects_bytes) ** power
            result = result * (piece ** -1 if denominator else piece)
    return result


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

    def __init__(self, tokens, implicit: bool):
        self.tokens, self.i, self.depth, self.implicit = tokens, 0, 0, implicit

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
        tree = self.unary()
        while True:
            token = self.peek()
            if token in (("op", "*"), ("op", "/")):
                tree = (self.take()[1], tree, self.unary())
            elif self.implicit and (token[0] in ("num", "name") or token == ("op", "(")):
                tree = ("*", tree, self.unary())  # '2n', '3(n+1)', 'n b'
            else:
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
    """Significant figures of a single typed number ('1.37e3' -> 3, '10500' -> 3, '0.0050' -> 2), else None."""
    match = re.fullmatch(r"\s*[-+]?((?:\d[\d,_]*)?(?:\.\d*)?)(?:[eE][-+]?\d+)?\s*", text)
    if not match or not any(c.isdigit() for c in match.group(1)):
        return None
    mantissa = match.group(1).replace(",", "").replace("_", "")
    digits = mantissa.replace(".", "").lstrip("0")
    if "." not in mantissa:
        digits = digits.rstrip("0")  # '10500': the zeros may be placeholders
    return max(len(digits), 1)


@dataclass(frozen=True)
class Reading:
    """What a learner typed, read: the value in the question's unit, and what helps to explain a slip."""

    value: float
    text: str
    unit_given: bool  # a unit (or a count word) was written after the number
    digits: int | None  # significant figures typed, when the answer is a single number
    bits: bool = False  # a bit unit was used (b, bit, Gb/s)


def _check_text(text: str, what: str) -> str:
    if len(text) > MAX_LENGTH:
        raise InvalidValue(f"that answer is {len(text)} characters long; {what} is at most {MAX_LENGTH}.")
    return text.strip()


def _dimension_name(dims: tuple[int, int, int]) -> str:
    top = [f"{_NAMES[base]}" + (f"^{p}" if p > 1 else "") for base, p in zip((_FLOP, _BYTE, _SECOND), dims) if p > 0]
    bottom = [f"{_NAMES[base]}" + (f"^{-p}" if p < -1 else "") for base, p in zip((_FLOP, _BYTE, _SECOND), dims)
              if p < 0]
    if not top and not bottom:
        return "a plain number"
    return (" ".join(top) or "1") + ("/" + "/".join(bottom) if bottom else "")


def _mismatch(text: str, got: Unit, wanted: Unit, unit_text: str) -> UnitMismatch:
    shown = unit_text if unit_text not in ("dimensionless", "") else "a plain number"
    per_second = tuple(a - b for a, b in zip(got.dims, wanted.dims))
    if per_second == (0, 0, -1):
        why = f"{text!r} is a rate (per second); the question asks for an amount in {shown}: drop the '/s'."
    elif per_second == (0, 0, 1):
        why = f"{text!r} is an amount, not a rate: the question asks for {shown}, so a '/s' is missing."
    elif wanted.dimensionless:
        why = f"{text!r} has a unit ({_dimension_name(got.dims)}), but the question asks for a plain number."
    else:
        why = f"{text!r} is in {_dimension_name(got.dims)}, which cannot be converted to {shown}."
    error = UnitMismatch(why)
    error.dims = per_second
    return error


def read(answer, unit_text: str = "dimensionless") -> Reading:
    """Read a numeric answer (a number, or text such as '3.35 TB/s') as a value in ``unit_text``.

    A bare number is taken to be in ``unit_text`` already. Raises InvalidValue
    for what cannot be read and UnitMismatch for a unit of another dimension.
    """
    wanted = unit(unit_text)
    if not isinstance(answer, str):
        if isinstance(answer, bool) or not isinstance(answer, numbers.Real):
            raise InvalidValue(f"a number is expected; got {answer!r} ({type(answer).__name__}).")
        try:
            value = float(answer)
        except OverflowError:  # an int such as 10**400
            value = math.inf
        if not math.isfinite(value):
            raise InvalidValue(f"a finite number is expected; got {answer!r}.")
        return Reading(value, repr(answer), False, None)
    text = _check_text(answer, "a number with its unit")
    tokens, rest = _tokens(text, None)
    if tokens and tokens[-1] in (("op", "/"), ("op", "*")) and rest.strip():
        rest = ("/" if tokens.pop() == ("op", "/") else "") + rest  # '1e3/s', '3 * TB'
    shown = f"{text[:60]!r}"
    if not tokens or rest.lstrip().startswith(","):
        if rest.lstrip().startswith(","):
            raise InvalidValue(f"cannot read {shown}: a comma may only group thousands (1,365); "
                               "write decimals with a point (1.4).")
        try:
            unit(rest, wanted)
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
        given = unit(unit_text_given, wanted) if unit_text_given else wanted
    except InvalidValue as error:
        raise InvalidValue(f"in {shown}: {error}") from None
    if given.dims != wanted.dims:
        raise _mismatch(text, given, wanted, unit_text)
    single = len(tokens) == 1 or (len(tokens) == 2 and tokens[0] in (("op", "-"), ("op", "+")))  # '-3.5'
    digits = significant_digits(text[: len(text) - len(rest)].replace(" ", "")) if single else None
    value = value * given.scale / wanted.scale
    if not math.isfinite(value):
        raise InvalidValue(f"cannot read {shown} as a number: it is too large to be an answer here.")
    return Reading(value, text, bool(unit_text_given), digits, given.bits)


def number(answer, unit_text: str = "dimensionless") -> float:
    """The value of a numeric answer in ``unit_text``: ``number('3.35 TB/s', 'byte/s')`` -> 3.35e12."""
    return read(answer, unit_text).value


# --- formulas and choices ------------------------------------------------------------------


def _split_name(name: str, symbols: tuple[str, ...]) -> list[str]:
    """'nb' -> ['n', 'b'] when n and b are the question's symbols; a known name stays whole."""
    if name in symbols or name in _FUNCTIONS:
        return [name]
    if all(ch in symbols for ch in name):
        return list(name)
    raise InvalidValue(f"{name!r} is not one of the question's symbols ({', '.join(symbols)})")


def _sympy(tree, names):
    import sympy

    kind = tree[0]
    if kind == "num":
        text = tree[1].replace(",", "").replace("_", "")
        return sympy.Rational(text) if "e" not in text.lower() else sympy.nsimplify(float(text), rational=True)
    if kind == "name":
        if tree[1] in _FUNCTIONS:
            raise InvalidValue(f"{tree[1]} needs its argument in parentheses, e.g. {tree[1]}(n)")
        parts = [names[p] for p in _split_name(tree[1], tuple(names))]
        return sympy.Mul(*parts)
    if kind == "neg":
        return -_sympy(tree[1], names)
    if kind == "call":
        return getattr(sympy, tree[1])(_sympy(tree[2], names))
    a, b = _sympy(tree[1], names), _sympy(tree[2], names)
    if kind == "+":
        return a + b
    if kind == "-":
        return a - b
    if kind == "*":
        return a * b
    if kind == "/":
        if b == 0:
            raise InvalidValue("it divides by zero")
        return a / b
    if b.is_number and not (b.is_Rational and b.q <= 1000 and abs(b) <= 64):
        raise InvalidValue("a power's exponent must be a small number such as 2, -1 or 1/2, or a formula in the "
                           "question's symbols")
    if a.is_number and b.is_number and abs(float(b) * math.log2(max(abs(float(a)), 2))) > 4096:
        raise InvalidValue("a power in it is too large for a formula")
    return a**b


def expression(text, symbols: tuple[str, ...]):
    """A formula in the question's symbols, as a sympy expression: expression('2n/(3b)', ('n', 'b')).

    Implicit products are read ('2n', 'n b', '3(n+1)'), as are sqrt, log and
    exp; any other name is refused with the list of the question's symbols.
    """
    import sympy

    if not isinstance(text, str):
        if type(text).__module__.startswith("sympy"):
            return text
        if isinstance(text, numbers.Real) and not isinstance(text, bool):
            return sympy.nsimplify(text)
        raise InvalidValue(f"a formula in {', '.join(symbols)} is expected; got {type(text).__name__}.")
    body = _check_text(text, "a formula")
    tokens, rest = _tokens(body, tuple(symbols))
    example = f"3*{symbols[0]}**2 + 1" if symbols else "3*2**10"  # a spelling, never a key
    expected = f"write a formula in {', '.join(symbols)} using + - * / ** and parentheses, such as {example}"
    if rest.strip():
        raise InvalidValue(f"cannot read {body[:60]!r}: unexpected {rest.strip()[:10]!r}; {expected}.")
    names = {s: sympy.Symbol(s, positive=True) for s in symbols}
    if sum(token == ("op", "**") for token in tokens) > 6:
        raise InvalidValue(f"cannot read {body[:60]!r}: it has more powers than a formula here needs; {expected}.")
    try:
        return _sympy(_Parser(tokens, implicit=True).parse(), names)
    except InvalidValue as error:
        raise InvalidValue(f"cannot read {body[:60]!r}: {error}; {expected}.") from None


def choice(text, choices: tuple[str, ...]) -> str:
    """The choice a learner meant: 'Memory-bound', 'memory bound', ' MEMORY ' -> 'memory'."""
    if not isinstance(text, str):
        raise InvalidValue(f"one of {', '.join(choices)} is expected; got {text!r}.")
    given = _check_text(text, "a choice").lower().strip(" .!'\"`")
    given = re.sub(r"[-\s]+bound$", "", given)
    by_name = {c.lower(): c for c in choices}
    if given in by_name:
        return by_name[given]
    raise InvalidValue(f"{text[:60]!r} is not one of the choices: {', '.join(choices)}.")
