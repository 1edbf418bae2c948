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
    >>> answers.number("1.12 trillion", "byte"), answers.number("240G", "FLOP")  # count words only: the question's unit
    (1120000000000.0, 240000000000.0)
    >>> answers.number("282 TF/s", "TFLOP/s"), answers.number("$3.89M", "dimensionless")
    (282.0, 3890000.0)

A number given in Python is read as the text that types it (0.17 as
``'0.17'``), so that it gets the same verdict and message as the text.

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
``us``, ``ms``, ``milliseconds``, ``megabytes``, ``TF/s``, ``tflops``,
``teraflops``, ``Hz``, ``h``, ``days``, ``years``, ``%``, a trailing ``x`` for a
factor, ``MAC`` for a multiply-accumulate), things counted (``GPUs``,
``H100s``, ``tokens``, ``Mtok``, ``tok/s``, ``tps``, ``steps``,
``micro-batches``, ``switches``, ``$``, ``USD`` and ``cents``) and the count
words ``k``, ``M``, ``B``/``bn``, ``T``, ``Ki`` (not on a time or a rate),
``thousand``, ``million``, ``billion``, ``trillion``. Where a spelling is
ambiguous the question decides: ``B`` is a byte in a question about bytes and a
billion in a plain count; ``FLOPS`` is a rate where a rate is asked and a count
otherwise (a :class:`Reading` notes how such a spelling was read); a lone ``m``
is a million, except on a question about time, where it is refused (``ms`` or
``min``?). ``b`` is always a bit and ``B`` a byte, as on a datasheet.

Quantities may be divided or multiplied (``989 TFLOP/s / 3.35 TB/s``). Where a
plain number is asked, ``nine`` and ``9:1`` are numbers; where a factor is
asked (unit ``x``), ``no speedup`` is 1; where the unit is per a count of
things (``USD per million tokens``), ``$0.032``, ``3.2 cents`` and ``$0.032/M
tokens`` are one answer:

    >>> answers.number("9:1", "dimensionless"), answers.number("989 TFLOP/s / 3.35 TB/s", "FLOP/byte")
    (9.0, 295.2238805970149)
    >>> answers.number("3.2 cents", "USD per million tokens"), answers.number("$0.032/M tokens", "USD per million tokens")
    (0.032, 0.032)

docs/answers.md lists all of it, with examples.
"""

from __future__ import annotations

import math
import numbers
import re

from ..errors import InvalidValue, RoofkitError
from ..quantities import (  # the reader itself is a foundation (roofkit.units.quantity reads through it too)
    FACTOR_UNIT, MAX_LENGTH, UNIT_EXAMPLES, Reading, Unit, _check_text, _FUNCTIONS, _Parser, _tokens,
    significant_digits,
)
from .. import quantities

__all__ = ["Reading", "Unit", "read", "number", "unit", "expression", "formula_reading", "choice",
           "significant_digits", "MAX_LENGTH", "UNIT_EXAMPLES", "FACTOR_UNIT"]


# --- numbers with units: roofkit.quantities, with the accelerators of the catalog as things counted ----------


def _accelerator(word: str) -> str | None:
    """'H100s', 'a100', 'MI300X': the name of an accelerator of roofkit's catalog, as a thing counted."""
    if not (any(c.isdigit() for c in word) and any(c.isalpha() for c in word)) or len(word) > 24:
        return None
    from ..catalogs import hardware  # deferred: catalogs.hardware pulls in numpy (through formulas)

    for name in (word, word[:-1] if word.endswith("s") else None):
        if name:
            try:
                return f"{hardware.get(name).key} GPUs"
            except RoofkitError:
                continue
    return None


def read(answer, unit_text: str = "dimensionless") -> Reading:
    """Read a numeric answer (a number, or text such as '3.35 TB/s') as a value in ``unit_text``.

    :func:`roofkit.quantities.read`, where an accelerator of the catalog is a thing counted ('8 H100s'). A bare
    number is taken to be in ``unit_text`` already, and so is a number followed by count words only ('1.12
    trillion', '240G' where FLOPs are asked). A number given in Python is read as the text that types it (0.17 as
    '0.17'), so that both get the same verdict. Raises InvalidValue for what cannot be read and UnitMismatch for
    a unit of another dimension.
    """
    return quantities.read(answer, unit_text, _accelerator)


def number(answer, unit_text: str = "dimensionless") -> float:
    """The value of a numeric answer in ``unit_text``: ``number('3.35 TB/s', 'byte/s')`` -> 3.35e12."""
    return read(answer, unit_text).value


def unit(text: str, expected: Unit | None = None) -> Unit:
    """The :class:`Unit` of a unit text such as 'TB/s', 'FLOP/byte', 'GiB', '%', 'million', 'H100s'.

    ``expected`` (the question's unit) settles the ambiguous spellings: 'B' and 'FLOPS' (see above).
    """
    return quantities.unit(text, expected, _accelerator)



# --- formulas and choices ------------------------------------------------------------------


def _split_name(name: str, symbols: tuple[str, ...]) -> list[str]:
    """'nb' -> ['n', 'b'] when n and b are the question's symbols; a known name stays whole."""
    if name in symbols or name in _FUNCTIONS:
        return [name]
    if all(ch in symbols for ch in name):
        return list(name)
    raise InvalidValue(f"{name!r} is not one of the question's symbols ({', '.join(symbols)})")


def _sympy(tree, names):
    import sympy  # deferred: sympy costs ~0.25 s at import

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


_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "neg": 3, "**": 4}


def _written(tree) -> str:
    """A parsed formula written out with its operators and the parentheses it needs: (2*n/3)*b."""
    kind = tree[0]
    if kind in ("num", "name"):
        return tree[1].replace(",", "").replace("_", "")
    if kind == "call":
        return f"{tree[1]}({_written(tree[2])})"

    def wrap(child, strict: bool, force: bool = False) -> str:
        text = _written(child)
        level = _PRECEDENCE.get(child[0], 9)
        mine = _PRECEDENCE[kind]
        return f"({text})" if force or level < mine or (strict and level == mine) else text

    if kind == "neg":
        return "-" + wrap(tree[1], False)
    implicit_after_division = len(tree) > 3 and tree[1][0] == "/"
    left = wrap(tree[1], kind == "**", force=implicit_after_division)
    right = wrap(tree[2], kind in ("-", "/", "**") or (kind == "*" and tree[2][0] == "/"))
    return f"{left}{kind}{right}"


def _has_implicit_after_division(tree) -> bool:
    if tree[0] in ("num", "name"):
        return False
    if tree[0] == "*" and len(tree) > 3 and tree[1][0] == "/":
        return True
    return any(_has_implicit_after_division(child) for child in tree[1:] if isinstance(child, tuple))


def formula_reading(text, symbols: tuple[str, ...]) -> str | None:
    """How a formula with an implicit product after a division was read, and how to write the other reading.

    >>> formula_reading("2n/3b", ("n", "b"))
    "'2n/3b' was read as (2*n/3)*b: a product written without * binds like * and /, left to right. If you meant 2*n/(3*b), write the parentheses."

    None when nothing in the formula is ambiguous that way (or it cannot be read).
    """
    if not isinstance(text, str) or len(text) > MAX_LENGTH:
        return None
    try:
        tokens, rest = _tokens(text.strip(), tuple(symbols))
        if rest.strip():
            return None
        tree = _Parser(tokens, implicit=True).parse()
        if not _has_implicit_after_division(tree):
            return None
        other = _written(_Parser(tokens, implicit=True, tight=True).parse())
    except InvalidValue:
        return None
    read_as = _written(tree)
    return (f"{text.strip()[:60]!r} was read as {read_as}: a product written without * binds like * and /, left "
            f"to right. If you meant {other}, write the parentheses.")


def expression(text, symbols: tuple[str, ...]):
    """A formula in the question's symbols, as a sympy expression: expression('2n/(3b)', ('n', 'b')).

    Implicit products are read ('2n', 'n b', '3(n+1)'), as are sqrt, log and
    exp; any other name is refused with the list of the question's symbols.
    """
    if not isinstance(text, str):
        if type(text).__module__.startswith("sympy"):
            return text
        if isinstance(text, numbers.Real) and not isinstance(text, bool):
            import sympy  # deferred: sympy costs ~0.25 s at import

            return sympy.nsimplify(text)
        raise InvalidValue(f"a formula in {', '.join(symbols)} is expected; got {type(text).__name__}.")
    body = _check_text(text, "a formula")
    tokens, rest = _tokens(body, tuple(symbols))
    example = f"3*{symbols[0]}**2 + 1" if symbols else "3*2**10"  # a spelling, never a key
    expected = f"write a formula in {', '.join(symbols)} using + - * / ** and parentheses, such as {example}"
    if rest.strip():
        raise InvalidValue(f"cannot read {body[:60]!r}: unexpected {rest.strip()[:10]!r}; {expected}.")
    import sympy  # only once the text reads as a formula: the import alone takes about a second

    names = {s: sympy.Symbol(s, positive=True) for s in symbols}
    if sum(token == ("op", "**") for token in tokens) > 6:
        raise InvalidValue(f"cannot read {body[:60]!r}: it has more powers than a formula here needs; {expected}.")
    try:
        return _sympy(_Parser(tokens, implicit=True).parse(), names)
    except InvalidValue as error:
        raise InvalidValue(f"cannot read {body[:60]!r}: {error}; {expected}.") from None


# terms the course uses for its recurring choices (a question adds its own with Question.synonyms)
COMMON_SYNONYMS = {
    "memory": ("bandwidth", "bandwidth-bound", "bound by memory", "bound by bandwidth", "memory bandwidth", "mem",
               "hbm", "hbm-bound", "io-bound", "i/o-bound"),
    "compute": ("math", "math-bound", "flops", "flop-bound", "bound by compute", "compute throughput",
                "tensor-core-bound"),
    "yes": ("y", "yep", "yeah", "true", "needed", "it does", "yes it does", "yes, it does"),
    "no": ("n", "nope", "false", "not needed", "no need", "it does not", "no, it does not", "no it does not"),
}
_FILLER = re.compile(r"^(?:the|a|an|option|choice|answer|kernel|kernels|layout|group)\s+")


def _choice_words(text: str) -> str:
    """A choice as compared: lower case, no quotes or full stop, no leading 'the'/'option', no '-bound'."""
    given = text.lower().strip().strip(" .!?'\"`")
    given = re.sub(r"\s+", " ", re.sub(r"[,;:()]", " ", given)).strip()
    for _ in range(3):
        given = _FILLER.sub("", given)
    given = re.sub(r"[-_\s]+bound$", "", given)
    return given


def _compact(text: str) -> str:
    """'> LLC' -> '>llc', 'element-wise' -> 'elementwise', 'same FLOPs but fewer bytes' -> 'sameflopsfewerbytes'."""
    return re.sub(r"[\s\-_]+|\b(?:but|and|with|then)\b", "", text)


def choice(text, choices: tuple[str, ...], synonyms=None) -> str:
    """The choice a learner meant: 'Memory-bound', 'memory bound', ' MEMORY ' -> 'memory'.

    ``synonyms`` maps a choice to other terms for it (the lesson's own words: 'update swamping' for
    'swamping'); COMMON_SYNONYMS holds the course's recurring ones. Case, spaces, hyphens, a leading 'the'
    and a plural s do not matter:

    >>> choice("> LLC", ("L2", "LLC", ">LLC", "DRAM")), choice("the GEMMs", ("gemm", "attention"))
    ('>LLC', 'gemm')
    """
    if not isinstance(text, str):
        raise InvalidValue(f"one of {', '.join(choices)} is expected; got {text!r}.")
    given = _choice_words(_check_text(text, "a choice"))
    terms: dict[str, set[str]] = {}
    for c in choices:
        for term in (c, *(COMMON_SYNONYMS.get(c.lower(), ())), *((synonyms or {}).get(c, ()))):
            for form in (_choice_words(term), _compact(_choice_words(term))):
                terms.setdefault(form, set()).add(c)
    for form in (given, _compact(given), _compact(given[:-1]) if given.endswith("s") else None,
                 _compact(given[:-2]) if given.endswith("es") else None):
        if form and len(terms.get(form, ())) == 1:
            return next(iter(terms[form]))
    raise InvalidValue(f"{text[:60]!r} is not one of the choices: {', '.join(choices)}.")
