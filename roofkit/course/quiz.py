"""Questions that check themselves, and name the misconception behind a wrong answer.

A question holds no typed-in answer: its key is a computation through roofkit
over the question's parameters, so the same question can be asked with other
numbers (a class variant) and the key follows. Four kinds:

* numeric   a number, or a string with a unit ("3.35 TB/s", "296 FLOP/byte"),
            read by :mod:`roofkit.answers`. Right when it is the key rounded
            to at least ``figures`` significant figures (two unless the
            question needs more), or within ``rtol`` of the key (another
            honest path, a catalog figure rounded); ``rtol=0``: the exact
            value only (a whole number such as "the smallest n", or 65504).
            The prompt says which (:meth:`Question.precision`);
* symbolic  a formula such as ``2*n/(3*b)``, read by :mod:`roofkit.answers`
            (never by ``sympify``) and checked for equivalence;
* choice    one of a few words ("memory" or "compute");
* code      a function, run on cases and compared with the key function.

``check(id, answer)`` returns a :class:`Verdict` and, in a notebook, shows it
with an answer record (a JSON output the grader reads). A wrong answer that
matches a known misconception gets that misconception's feedback; the key is
never shown for a wrong answer. Hints come one at a time from ``hint(id)``.
"""

from __future__ import annotations

import hashlib
import html
import inspect
import json
import math
import random
import sys
import textwrap
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction as _Fraction
from typing import Any

from ..errors import InvalidValue, RoofkitError, UnitMismatch, UnknownName
from .answers import FACTOR_UNIT, choice, expression, formula_reading, read, unit

__all__ = ["Question", "Misconception", "Verdict", "register", "get", "questions", "check", "judge", "hint", "ask",
           "answer_key", "use_variant", "current", "close_enough", "params_digest", "NOT_ANSWERED", "RENAMED",
           "by_id"]

RECORD_MIME = "application/vnd.roofkit.answer+json"
# the answer box's classes: JupyterLab saves the box's answer with the notebook (widget state, saveState in
# jupyterlab-settings/overrides.json), and the grader finds each question's box by them (roofkit.grading.boxes)
BOX_CLASS, BOX_ID_PREFIX, BOX_PARAMS_PREFIX = "roofkit-answer", "roofkit-q-", "roofkit-p-"
NOT_ANSWERED = "not answered yet"
UNREADABLE = "? could not read this answer"  # neither right nor wrong: the verdict says what was expected
KINDS = ("numeric", "symbolic", "choice", "code")


class UnknownQuestion(UnknownName):
    kind = "question"


@dataclass(frozen=True)
class Misconception:
    """A wrong answer people give, and what to tell them.

    The wrong value is a computation too: ``answer(**params)``, or the key times
    ``scale`` (forgot the factor 2: scale=0.5). A misconception about units
    names no value: ``unit=True`` is the per-second slip (a rate given where an
    amount is asked, or the other way round), and ``unit="FLOP/s"`` an answer in
    that unit's dimension. ``above=1.0`` is every answer past a bound that no
    right answer can pass (an MFU above 1), said when no named value matches.
    """

    name: str
    feedback: str
    answer: Callable[..., Any] | None = None
    scale: float | None = None
    unit: bool | str = False
    above: float | None = None

    def value(self, question: "Question"):
        if self.answer is not None:
            return self.answer(**question.params)
        if self.scale is not None:
            return question.answer_key() * self.scale
        return None


@dataclass(frozen=True)
class Question:
    id: str
    lesson: str
    kind: str
    prompt: str  # a str.format template over params
    key: Callable[..., Any]  # params -> the right answer, computed through roofkit
    params: Mapping[str, Any] = field(default_factory=dict)
    unit: str | None = None  # numeric: the unit the key is in, e.g. "FLOP/byte", "byte/s", "hour"
    rtol: float = 0.02  # 0: only the exact key (a whole number such as 'the smallest n', or 65504)
    figures: int = 2  # numeric: the significant figures a right answer needs (the prompt says so); not with rtol=0
    choices: tuple[str, ...] = ()
    synonyms: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # choice -> the lesson's other terms for it
    symbols: tuple[str, ...] = ()  # symbolic: names the learner may use
    cases: tuple[tuple, ...] = ()  # code: argument tuples the function is checked on
    hidden_cases: tuple[tuple, ...] = ()  # code: cases only the grader runs
    hints: tuple[str, ...] = ()
    misconceptions: tuple[Misconception, ...] = ()
    points: float = 1.0
    # class variants: parameter -> the values a student's variant may draw from
    variants: Mapping[str, tuple] = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise InvalidValue(f"question {self.id!r}: unknown kind {self.kind!r}; expected one of {', '.join(KINDS)}.")
        if self.kind == "choice" and not self.choices:
            raise InvalidValue(f"question {self.id!r}: a choice question needs choices.")
        if set(self.synonyms) - set(self.choices):
            raise InvalidValue(f"question {self.id!r}: synonyms for {sorted(set(self.synonyms) - set(self.choices))}, "
                               f"which are not among its choices {self.choices}.")
        if not isinstance(self.figures, int) or not 1 <= self.figures <= 6:
            raise InvalidValue(f"question {self.id!r}: figures must be a whole number from 1 to 6; got {self.figures!r}.")

    def with_params(self, **params) -> "Question":
        """The same question asked with other numbers (a student's variant)."""
        unknown = set(params) - set(self.params)
        if unknown:
            raise InvalidValue(f"question {self.id!r} has no parameter(s) {sorted(unknown)}; it has {sorted(self.params)}.")

        return replace(self, params={**self.params, **params})

    def precision(self) -> str:
        """What the prompt says of the answer's precision (numeric questions; '' for the others)."""
        if self.kind != "numeric":
            return ""
        if self.exact:
            return ("The answer is an exact whole number." if self.whole else
                    "Give the exact value: a decimal, a fraction or arithmetic such as 3/512 or 2**-9.")
        words = {1: "One significant figure is", 2: "Two significant figures are", 3: "Three significant figures are",
                 4: "Four significant figures are", 5: "Five significant figures are", 6: "Six significant figures are"}
        return f"{words[self.figures]} enough."

    def template(self) -> str:
        """The prompt as a release stores it: the bank's text and its precision, a str.format template."""
        precision = self.precision().replace("{", "{{").replace("}", "}}")
        return f"{self.prompt} {precision}" if precision else self.prompt

    def text(self) -> str:
        return self.template().format(**self.params)

    def answer_key(self):
        """The right answer for these parameters (for a code question: the reference function)."""
        return self.key if self.kind == "code" else self.key(**self.params)

    @property
    def exact(self) -> bool:
        """A numeric question that takes only the exact key (rtol 0): no rounding, no tolerance."""
        return self.kind == "numeric" and self.rtol == 0

    @property
    def whole(self) -> bool:
        """A numeric question whose answer is one exact whole number (rtol 0 and an integer key)."""
        return self.exact and float(self.answer_key()).is_integer()

    def to_dict(self) -> dict:
        return {"id": self.id, "lesson": self.lesson, "kind": self.kind, "points": self.points}


@dataclass(frozen=True)
class Verdict:
    question: str
    correct: bool | None  # None: not answered yet
    feedback: str
    misconception: str | None = None
    answer: Any = None
    unreadable: bool = False  # the answer could not be read at all (not a number, an unknown unit)

    def __str__(self) -> str:
        mark = UNREADABLE if self.unreadable else \
            {True: "✓ correct", False: "✗ not yet", None: "… " + NOT_ANSWERED}[self.correct]
        return f"[{self.question}] {mark}: {self.feedback}" if self.feedback else f"[{self.question}] {mark}"

    def record(self, params: Mapping[str, Any]) -> dict:
        """What the grader reads from the notebook (and re-checks; it trusts none of it).

        An answer that could not be read is recorded as neither right nor wrong: ``"correct": null`` with
        ``"unreadable": true``.
        """
        record = {"roofkit_answer": 1, "id": self.question, "answer": _jsonable(self.answer),
                  "correct": None if self.unreadable else self.correct, "params": params_digest(params)}
        if self.unreadable:
            record["unreadable"] = True
        return record

    def to_dict(self) -> dict:
        return {"id": self.question, "correct": self.correct, "feedback": self.feedback,
                "misconception": self.misconception, "unreadable": self.unreadable}

    def __repr__(self) -> str:
        return f"Verdict({self.question!r}, correct={self.correct})"

    def _ipython_display_(self):
        """check() has already shown this verdict with its record; show nothing twice."""


_BANK: dict[str, Question] = {}
# question ids renamed since a release may have handed them out: old id -> the id the bank has now. A past
# release's notebooks and answer records keep the old id, and the grader still reads and grades them.
RENAMED: dict[str, str] = {
    "l07.params-for-40": "l07.params-for-mfu",  # it asks for the size at 45% MFU (and a variant's MFU)
    "l08.gpus-30-days": "l08.gpus-for-deadline",  # it asks for 45 days (and a variant's deadline)
    "l03.ex-batch1-bound": "l03.ex-decode-batch-bound",  # it asks about a decode at batch 320 (or a variant's)
}
_hints_shown: dict[str, int] = {}
_variant: dict[str, dict[str, Any]] = {}  # question id -> this notebook's parameters (a class variant)
_handed_in: set[str] = set()  # the questions of a release: graded from what the notebook holds when handed in
_boxes: dict[str, Any] = {}  # question id -> its live question widget (asking again closes the old answer box)


def use_variant(params_by_question: Mapping[str, Mapping[str, Any]], handed_in: Iterable[str] = ()) -> None:
    """Ask every listed question with these parameters from now on (a release's setup cell calls this).

    ``handed_in``: the questions this notebook hands in for a grade (a release's): their answer boxes say that
    what the box holds when the notebook is saved is what is graded.
    """
    _handed_in.clear()
    _handed_in.update(handed_in)
    for question_id, params in params_by_question.items():
        get(question_id).with_params(**params)  # validates ids and parameter names
    _variant.clear()
    _variant.update({k: dict(v) for k, v in params_by_question.items()})
    _variant.update({RENAMED[k]: dict(v) for k, v in params_by_question.items() if k in RENAMED})  # a past release


def current(question_id: str | Question) -> Question:
    """The question as this notebook asks it: with its variant's parameters, if any."""
    question = get(question_id)
    params = _variant.get(question.id)
    return question.with_params(**params) if params else question


def register(*new: Question) -> None:
    for question in new:
        if question.id in RENAMED:
            raise InvalidValue(f"{question.id!r} is the old id of {RENAMED[question.id]!r}: choose another id.")
        if question.id in _BANK and _BANK[question.id] != question:
            raise InvalidValue(f"two questions share the id {question.id!r}.")
        _BANK[question.id] = question


def _load_bank() -> None:
    from . import bank as course  # noqa: F401 - deferred: a cycle (its lessons import quiz); registers the questions


def get(question_id: str | Question) -> Question:
    if isinstance(question_id, Question):
        return question_id

    release = sys.modules.get("roofkit.grading.release")  # loaded by a release's setup cell, if any
    released = getattr(release, "prompt_only", lambda _: None)(question_id)  # (a module half-imported: None)
    if released is not None:
        return released  # its prompt, without a key (see roofkit.grading.release)
    if getattr(release, "graded", lambda: False)():  # a graded kernel holds no bank: the keys stay with the grader
        raise UnknownQuestion(question_id, release.ids())
    _load_bank()
    if question_id not in _BANK and RENAMED.get(question_id) in _BANK:
        return _BANK[RENAMED[question_id]]  # an id a past release handed out
    if question_id not in _BANK:
        raise UnknownQuestion(question_id, _BANK)
    return _BANK[question_id]


def by_id() -> dict[str, Question]:
    """Every question by its id, and by the old id of a renamed one (what a past release recorded)."""
    _load_bank()
    bank = dict(_BANK)
    bank.update({old: _BANK[new] for old, new in RENAMED.items() if new in _BANK and old not in _BANK})
    return bank


def answer_key(question_id: str | Question, **params):
    """The key of a question, asked with its lesson's numbers or with ``params`` (a variant's)."""
    return get(question_id).with_params(**params).answer_key()


def questions(lesson: str | None = None) -> list[Question]:
    _load_bank()
    return [q for q in _BANK.values() if lesson is None or q.lesson == lesson]


# --- checking ------------------------------------------------------------------------


def judge(question: Question, answer, where: str = "python") -> Verdict:
    """The verdict on ``answer``, without printing anything.

    ``where`` says how the learner asks for a hint in the feedback:
    ``hint('id')`` from Python, ``roofkit quiz hint id`` from a terminal.
    """
    if answer is None or answer is Ellipsis or (isinstance(answer, str) and not answer.strip()):
        return Verdict(question.id, None, "write your answer in place of ... and run the cell again")
    checker = {"numeric": _numeric, "symbolic": _symbolic, "choice": _choice, "code": _code}[question.kind]
    try:
        verdict = checker(question, answer)
    except RoofkitError as error:
        return Verdict(question.id, False, str(error), answer=_jsonable(answer), unreadable=True)
    if where == "cli":
        verdict = replace(verdict, feedback=verdict.feedback.replace(
            f"`hint('{question.id}')`", f"`roofkit quiz hint {question.id}`"))
    return verdict


def check(question_id: str | Question, answer=None, **params) -> Verdict:
    """Check ``answer`` to a question; show the verdict and leave an answer record.

    ``params`` asks the question with other numbers (the grader does this for
    each student's variant).
    """
    question = current(question_id)
    if params:
        question = question.with_params(**params)
    # a released question without its key here: check the answer's form, record it for the grader
    verdict = judge(question, answer) if isinstance(question, Question) else question.recorded(answer)
    record = verdict.record(question.params)
    if callable(answer):  # the grader re-runs a function from its source, in a clean process
        record["source"] = _source(answer)
    _show(verdict, record)
    return verdict


def _source(function) -> str | None:
    try:
        return textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        return None


class Hint(str):
    """A hint: a string that :func:`hint` has already shown as text in a notebook, wherever in a cell it was
    called (not only as the cell's last line); IPython shows nothing more for it."""

    def _ipython_display_(self):
        """hint() showed it already: the value a cell ends with is not shown twice."""

    def _repr_pretty_(self, printer, cycle):  # pretty-printed elsewhere (in a list, a repr): as text, no quotes
        printer.text(str(self))


def hint_text(question: Question, n: int) -> str:
    """Hint number ``n`` (from 1) of a question, without counting it as shown."""
    if not question.hints:
        return f"[{question.id}] no hints for this one: reread the prompt and the section above it."
    if not 1 <= n <= len(question.hints):
        raise InvalidValue(f"{question.id} has hints 1 to {len(question.hints)}; got {n}.")
    return question.hints[n - 1]


def hint(question_id: str) -> Hint:
    """The next hint of a question (one more each call), then word that there are no more; never the key.

    In a notebook it shows as text: ``hint('l03.ridge-bf16')``.
    """
    question = get(question_id)
    if not question.hints:
        return _shown(Hint(f"[{question.id}] no hints for this one: reread the prompt and the section above it."))
    shown = _hints_shown.get(question.id, 0)
    total = len(question.hints)
    if shown >= total:
        return _shown(Hint(f"[{question.id}] no more hints: you have seen all {total}. Reread them and the section "
                           "above the question."))
    _hints_shown[question.id] = shown + 1
    last = " (that was the last hint)" if shown == total - 1 else ""
    return _shown(Hint(f"[{question.id}] hint {shown + 1}/{total}: {question.hints[shown]}{last}"))


def _shown(text: Hint) -> Hint:
    """Show ``text`` in a notebook now (a hint() in the middle of a cell is seen too); return it."""
    try:
        from IPython import get_ipython  # deferred: IPython costs ~70 ms at import
        from IPython.display import display  # deferred: IPython costs ~70 ms at import
    except ImportError:  # pragma: no cover - IPython comes with the course
        return text
    if get_ipython() is not None:
        display({"text/plain": str(text)}, raw=True)
    return text


def close_enough(a: float, b: float, rtol: float) -> bool:
    return math.isclose(a, b, rel_tol=rtol, abs_tol=0)


def _misconception(question: Question, matches: Callable[[Any], bool]) -> Misconception | None:
    for wrong in question.misconceptions:
        value = wrong.value(question)
        if value is not None and matches(value):
            return wrong
    return None


def _hint_call(question: Question) -> str:
    return f"try `hint('{question.id}')`"


def _unit_slip(question: Question, error: UnitMismatch) -> Misconception | None:
    """The unit misconception that matches this mismatch: the per-second slip, or a named unit's dimension."""
    wanted = unit(question.unit or "dimensionless")
    for wrong in question.misconceptions:
        if wrong.unit is True and getattr(error, "dims", None) in ((0, 0, 1), (0, 0, -1)):
            return wrong
        if isinstance(wrong, Misconception) and isinstance(wrong.unit, str):
            slip = unit(wrong.unit)
            if tuple(a - b for a, b in zip(slip.dims, wanted.dims)) == getattr(error, "dims", None):
                return wrong
    return None


def accepts(question: Question, reading, key: float | None = None) -> bool:
    """Whether a numeric answer, as read, is right: within ``rtol`` of the key, or (unless the question is
    exact) the key rounded to at least ``question.figures`` significant figures."""
    key = float(question.answer_key()) if key is None else key
    if abs(reading.value - key) <= max(question.rtol, 1e-12) * abs(key):  # an exact key survives a conversion
        return True
    if question.exact:
        return False
    tolerance = reading.tolerance(question.figures)
    return tolerance is not None and abs(reading.value - key) <= tolerance


def _numeric(question: Question, answer) -> Verdict:
    key = float(question.answer_key())
    unit_text = question.unit or "dimensionless"
    try:
        reading = read(answer, unit_text)
    except UnitMismatch as error:
        wrong = _unit_slip(question, error)
        feedback = f"{error} {wrong.feedback}" if wrong else str(error)
        return Verdict(question.id, False, feedback, wrong.name if wrong else "unit", _jsonable(answer))
    shown = _jsonable(answer)
    notes = "; ".join(reading.notes)
    notes = notes[0].upper() + notes[1:] + "." if notes else ""
    if accepts(question, reading, key):
        return Verdict(question.id, True, notes, answer=shown)
    feedback, wrong = _numeric_feedback(question, reading, key)
    return Verdict(question.id, False, f"{feedback} {notes}".strip(), wrong.name if wrong else None, shown)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


def _number(value: float) -> str:
    """A value as a message shows it: 8000 -> '8,000', 33.6 -> '33.6', 1.2e-05 -> '1.2e-05'."""
    return f"{value:,.10g}"


# units a bare number may have been meant in, by the question's unit: (name, how many base units one of it is)
_ALTERNATIVES = {
    (0, 0, 1): [("ns", 1e-9), ("µs", 1e-6), ("ms", 1e-3), ("s", 1.0), ("min", 60.0), ("hours", 3600.0),
                ("days", 86400.0), ("weeks", 604800.0)],
    (0, 1, 0): [("byte", 1.0), ("KB", 1e3), ("MB", 1e6), ("GB", 1e9), ("TB", 1e12)],
    (1, 0, 0): [("FLOP", 1.0), ("MFLOP", 1e6), ("GFLOP", 1e9), ("TFLOP", 1e12), ("PFLOP", 1e15)],
    (1, 0, -1): [("FLOP/s", 1.0), ("GFLOP/s", 1e9), ("TFLOP/s", 1e12), ("PFLOP/s", 1e15)],
    (0, 1, -1): [("byte/s", 1.0), ("MB/s", 1e6), ("GB/s", 1e9), ("TB/s", 1e12)],
}
# relative slips that are a unit's, not the arithmetic's: (ratio, what it is)
_UNIT_RATIOS = [  # (ratio, what it is, whether a plain count can have it: a count of Ki, never of GiB)
    (2.0**30 / 1e9, "the gap between a GiB (2^30 bytes) and a GB (10^9 bytes): check which one you used", False),
    (2.0**20 / 1e6, "the gap between a MiB (2^20 bytes) and an MB (10^6 bytes): check which one you used", False),
    (1.024, "the gap between 1,024 and 1,000 (Ki and k): check which one you used", True),
    (2.0**40 / 1e12, "the gap between a TiB (2^40 bytes) and a TB (10^12 bytes): check which one you used", False),
]


def _numeric_feedback(question: Question, reading, key: float) -> tuple[str, Misconception | None]:
    """Why a number is wrong, without giving the key away: a misconception, a known slip, or how far off it is."""
    value, hint = reading.value, _hint_call(question)
    try_hint = hint[0].upper() + hint[1:]
    typed = reading.tolerance(reading.digits) if reading.digits else None  # the typed number's own rounding
    slack = max(question.rtol, 0.005)

    def near(x: float, target: float, factor: float = 1.0) -> bool:
        """x (the answer times ``factor``) is ``target``, within the tolerance or the answer's own rounding."""
        return abs(x - target) <= max(slack * abs(target), (typed or 0) * abs(factor))

    wanted = unit(question.unit or "dimensionless")
    # where a binary prefix can be meant: bytes, or a plain count that is a whole number of Ki (8192 = 8 Ki)
    binary_bytes = wanted.dims[1] != 0
    binary_count = wanted.dimensionless and not wanted.noun and key >= 1024 and float(key) % 1024 == 0
    read_as = ""
    letters = [(word, factor) for word, factor in reading.counts if len(word) == 1]
    if letters and (binary_bytes or binary_count):  # '8K' where 8192 is meant: say how a letter was read
        word, factor = letters[-1]
        read_as = f"Read as {_number(value)}: {word} is {_number(factor)}. "
        binary = {"k": 1, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5}.get(word)
        if binary and near(value * 1.024**binary, key, 1.024**binary):
            prefix = {1: "Ki", 2: "Mi", 3: "Gi", 4: "Ti", 5: "Pi"}[binary]
            return f"{read_as}For {_number(1024**binary)} write {prefix} ({prefix}B for bytes). {try_hint}.", None
    # 1. a misconception: the answer is its value (to the figures typed), and nearer to it than to the key
    found = []
    for wrong in question.misconceptions:
        v = wrong.value(question)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            v = float(v)
            if abs(value - v) <= max(slack * abs(v), typed or 0) and abs(value - v) < abs(value - key):
                found.append((abs(value - v), wrong))
    if found:
        wrong = min(found, key=lambda pair: pair[0])[1]  # the nearest, where two round to the same figures
        return wrong.feedback, wrong
    for wrong in question.misconceptions:  # past a bound no right answer passes: an MFU above 1
        if wrong.above is not None and value > wrong.above >= key:
            return wrong.feedback, wrong
    # 2. the key, rounded too much ('6.55e4' where the exact 65504 is asked)
    if typed is not None and abs(value - key) <= typed:
        return _rounding(question, reading), None
    # 3. slips of notation
    if reading.bits and near(value * 8, key, 8):
        return "b is a bit; a byte is B (8 bits). Write the unit as B or byte.", None
    if question.unit == "percent" and near(value * 100, key, 100):
        return "That looks like a fraction: the question asks for a percentage (x 100, or write it with %).", None
    if question.unit in (None, "dimensionless", FACTOR_UNIT) and near(value / 100, key, 0.01) and not reading.unit_given:
        return "That looks like a percentage: the question asks for a fraction (0.25 for 25%, or write it with %).", None
    # 4. a whole number asked for
    if question.whole:
        if not math.isclose(value, round(value), rel_tol=1e-12, abs_tol=1e-12):
            return (f"{read_as}The answer is a whole number: round {_number(value)} as the question says (which way?), "
                    "then check again.", None)
        if math.isclose(abs(value - key), 1, rel_tol=1e-9):
            side = "one too few" if value < key else "one too many"
            return (f"{side.capitalize()}: the answer is the exact whole number the question asks for; "
                    f"check which way you rounded, and that no input was rounded before the last step. {try_hint}.",
                    None)
    # 5. the right number in another unit: 33.6 read as seconds where milliseconds were meant
    if key and value:
        for name, scale in _ALTERNATIVES.get(wanted.dims, []):
            if not math.isclose(scale, wanted.scale, rel_tol=1e-9) and near(value * scale / wanted.scale, key,
                                                                             scale / wanted.scale):
                return (f"Read as {_number(value)} {question.unit}; did you mean {name}? A bare number is in the "
                        f"question's unit ({question.unit}): write the unit, or convert. {try_hint}.", None)
    # 6. how far off it is
    direction = "too large" if value > key else "too small"
    if typed is not None and value * key > 0 and 0 < abs(key) - abs(value) < 2 * typed and not question.exact:
        return (f"Cut off at {_plural(reading.digits, 'significant figure')} rather than rounded: round to the "
                "nearest instead.", None)
    ratio = value / key if key else math.inf
    if ratio > 0 and math.isfinite(ratio):
        for slip, why, counts in _UNIT_RATIOS:  # only where the question's unit can have that gap
            if not (binary_bytes or (counts and binary_count)):
                continue
            for r in (slip, 1 / slip):
                if abs(ratio / r - 1) <= max(0.002, min(slack, 0.005)):
                    return f"{read_as}Off by {abs(ratio - 1):.1%} ({direction}): {why}. {try_hint}.", None
        off = abs(ratio - 1)
        if off <= max(2 * question.rtol, 0.03):
            return (f"{read_as}Close, but {direction} by {100 * off:.2g}%: more than rounding explains. Recheck the "
                    f"inputs and the arithmetic. {try_hint}.", None)
        if 2 / 3 <= ratio <= 1.5:
            return (f"{read_as}Off by {100 * off:.2g}% ({direction}): too far for rounding, so an input or a step "
                    f"differs. Recheck each number you used and each factor. {try_hint}.", None)
        factor = ratio if ratio > 1 else 1 / ratio
        # a factor past 10 is said as its order: 'by about 4,500x' on an answer of 1 would give the key away
        size = f"about {factor:.2g}x" if float(f"{factor:.2g}") <= 10 else \
            f"more than {10 ** math.floor(math.log10(factor)):,}x"
        return f"{read_as}{direction.capitalize()} by {size}. {try_hint}.", None
    sign = " (the sign is wrong)" if value < 0 < key or key < 0 < value else ""
    return f"{read_as}{direction.capitalize()}{sign}. {try_hint}.", None


def _rounding(question: Question, reading) -> str:
    figures = _plural(reading.digits, "significant figure")
    if question.exact:
        what = "the exact whole number" if question.whole else "the exact value"
        return f"That is the answer rounded to {figures}; this question asks for {what}."
    return f"Rounded too much: {figures} {'is' if reading.digits == 1 else 'are'} not enough here; give {question.figures}."


# Formulas are compared by evaluating both at a few random positive points, in bounded time and memory whatever
# the answer: exactly (fractions) while the numbers stay small, else with mpmath at a fixed precision; no symbolic
# simplification, whose cost has no bound (an exact power (n+1)**(64**6) never finishes).
_FORMULA_POINTS = 5  # points where both formulas must agree
_FORMULA_NODES = 1000  # a larger formula is not judged (an answer is at most 200 characters: about 150 nodes)
_FORMULA_DEPTH = 200
_EXACT_BITS = 4096  # an exact intermediate larger than this is computed with mpmath instead
_PRECISION_BITS = (128, 1024)  # mpmath precision: enough to see every constant written in the formulas, capped
_RANGE_BITS = 1000  # |value| outside [2**-1000, 2**1000] (about 1e±301) is not a finite value of a formula here


class _OutOfBudget(Exception):
    """A formula whose value at a point is not a finite real number of sensible size, or costs too much."""


def _same_formula(a, b) -> bool:
    """Whether formula ``a`` (an answer) equals formula ``b`` (a key), judged in bounded time and memory.

    Both are evaluated at :data:`_FORMULA_POINTS` random positive rational points (the symbols are positive).
    Where both values are exact (only + - * / and whole powers of small numbers) they must be equal; otherwise
    they must agree to the precision used. An answer that is not a finite real number at a point (an infinite
    term such as exp(9999), a log of a negative number, a division by zero, a value past about 1e301) is wrong.
    """
    try:
        symbols = sorted(_formula_symbols(a) | _formula_symbols(b), key=lambda s: s.name)
        bits = _formula_bits(a) + _formula_bits(b)
    except _OutOfBudget:
        return False
    prec = min(max(_PRECISION_BITS[0], 64 + bits), _PRECISION_BITS[1])
    rng = random.SystemRandom()  # points nobody can aim at in advance
    agreed = tries = 0
    while agreed < _FORMULA_POINTS and tries < 4 * _FORMULA_POINTS:
        tries += 1
        point = {s: _Fraction(rng.randint(101, 997), rng.randint(7, 97)) for s in symbols}
        try:
            key = _FormulaValue(point, prec).of(b)
        except _OutOfBudget:
            continue  # the key is not defined here: another point
        try:
            answer = _FormulaValue(point, prec).of(a)
        except _OutOfBudget:
            return False
        if not _agree(answer, key):
            return False
        agreed += 1
    return agreed == _FORMULA_POINTS or (agreed == 0 and a == b)


def _formula_symbols(expr) -> set:
    nodes = 0
    for node in _preorder(expr):
        nodes += 1
        if nodes > _FORMULA_NODES:
            raise _OutOfBudget("too large")
    return set(getattr(expr, "free_symbols", set()))


def _preorder(expr):
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(getattr(node, "args", ()))


def _formula_bits(expr) -> int:
    """The bits of the constants written in a formula: the precision must see a term scaled by any of them."""
    total = 0
    for node in _preorder(expr):
        if getattr(node, "is_Rational", False):
            total += int(node.p).bit_length() + int(node.q).bit_length()
        elif getattr(node, "is_Float", False):
            total += node._prec
    return total


def _agree(x, y) -> bool:
    """Two values at one point agree: exactly when both are exact, else within their error bounds."""
    (vx, ex), (vy, ey) = x, y
    if ex == 0 and ey == 0 and isinstance(vx, _Fraction) and isinstance(vy, _Fraction):
        return vx == vy
    return _close(vx, vy, ex + ey)


def _close(vx, vy, tolerance) -> bool:
    """|vx - vy| <= tolerance, for exact fractions and mpmath numbers alike (the error bounds are mpmath numbers)."""
    x, y = _to_mp(vx), _to_mp(vy)
    return abs(x - y) <= tolerance + (abs(x) + abs(y)) * _mp_context().ldexp(1, 4 - _mp_context().prec)


def _to_mp(value):
    return _mp_context().mpf(value.numerator) / value.denominator if isinstance(value, _Fraction) else value


def _mp_context():
    """A thread's own mpmath context: the grader judges in several threads, and mpmath's global one is shared."""
    local = _mp_context.__dict__.setdefault("local", threading.local())
    if not hasattr(local, "context"):
        import mpmath  # deferred: mpmath costs ~20 ms at import

        local.context = mpmath.MPContext()
    return local.context


class _FormulaValue:
    """A formula's value at one point: (exact Fraction, 0) or (mpmath number, error bound), within budget."""

    _FUNCTIONS = ("exp", "log", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "Abs")

    def __init__(self, point: dict, prec: int):
        self.point, self.prec, self.ctx = point, prec, _mp_context()
        self.ctx.prec = prec

    def of(self, expr, depth: int = 0):
        if depth > _FORMULA_DEPTH:
            raise _OutOfBudget("too deep")
        value, error = self._node(expr, depth)
        return self._checked(value, error)

    def _checked(self, value, error):
        ctx = self.ctx
        if isinstance(value, _Fraction):
            if value and not -_RANGE_BITS <= value.numerator.bit_length() - value.denominator.bit_length() <= _RANGE_BITS:
                raise _OutOfBudget("out of range")
            return value, 0
        if not isinstance(value, type(ctx.mpf(0))) or not ctx.isfinite(value):
            raise _OutOfBudget("not a finite real number")
        if value and not -_RANGE_BITS <= ctx.mag(value) <= _RANGE_BITS:
            raise _OutOfBudget("out of range")
        return value, error

    def _mp(self, value, error=0):
        """(mpmath number, error bound) from an exact or approximate value."""
        if isinstance(value, _Fraction):
            number = self.ctx.mpf(value.numerator) / value.denominator
            return number, abs(number) * self.ctx.ldexp(1, 2 - self.prec)
        return value, error

    def _rounding(self, value):
        return abs(value) * self.ctx.ldexp(1, 2 - self.prec)

    def _node(self, expr, depth):
        ctx = self.ctx
        if getattr(expr, "is_Symbol", False):
            if expr not in self.point:
                raise _OutOfBudget("an unknown symbol")
            return self.point[expr], 0
        if getattr(expr, "is_Rational", False):
            return _Fraction(int(expr.p), int(expr.q)), 0
        if getattr(expr, "is_Float", False):
            return ctx.make_mpf(expr._mpf_), 0
        if expr is None or not hasattr(expr, "func"):
            raise _OutOfBudget("not a formula")
        name = expr.func.__name__
        if name in ("Pi", "Exp1"):
            value = ctx.pi if name == "Pi" else ctx.e
            return +value, self._rounding(value)
        args = [self.of(arg, depth + 1) for arg in expr.args]
        if getattr(expr, "is_Add", False) or getattr(expr, "is_Mul", False):
            adding = expr.is_Add
            total, error = args[0]
            for value, err in args[1:]:
                if isinstance(total, _Fraction) and isinstance(value, _Fraction):
                    total = total + value if adding else total * value
                    if max(total.numerator.bit_length(), total.denominator.bit_length()) > _EXACT_BITS:
                        total, error = self._mp(total)
                    continue
                (x, ex), (y, ey) = self._mp(total, error), self._mp(value, err)
                total = x + y if adding else x * y
                error = (ex + ey if adding else abs(x) * ey + abs(y) * ex + ex * ey) + self._rounding(total)
                total, error = self._checked(total, error)
            return total, error
        if getattr(expr, "is_Pow", False):
            return self._power(args[0], args[1])
        if name in self._FUNCTIONS and len(args) == 1:
            x, ex = self._mp(*args[0])
            if name == "exp" and x > 710:
                raise _OutOfBudget("out of range")
            if name == "log" and x <= 0 or name in ("asin", "acos") and abs(x) > 1:
                raise _OutOfBudget("not a real number")
            function = abs if name == "Abs" else getattr(ctx, name)
            value = function(x)
            slope = {"exp": value, "log": 1 / x if x else ctx.inf, "Abs": 1}.get(name)
            if slope is None:  # the other functions: bound their slope numerically near x
                step = max(ex, ctx.ldexp(abs(x) + 1, -self.prec // 2))
                slope = abs(function(x + step) - value) / step + 1
            return value, abs(slope) * ex + self._rounding(value)
        raise _OutOfBudget(f"{name} is not a function a formula here uses")

    def _power(self, base, exponent):
        (x, ex), (y, ey) = base, exponent
        if isinstance(y, _Fraction) and y.denominator == 1:
            n = y.numerator
            if isinstance(x, _Fraction):
                if x == 0:
                    if n < 0:
                        raise _OutOfBudget("a division by zero")
                    return _Fraction(0 if n else 1), 0
                size = abs(x.numerator.bit_length() - x.denominator.bit_length())
                if size * abs(n) > 2 * _RANGE_BITS:
                    raise _OutOfBudget("out of range")
                if max(x.numerator.bit_length(), x.denominator.bit_length()) * abs(n) <= _EXACT_BITS:
                    return x**n, 0
            mx, mex = self._mp(x, ex)
            if mx == 0 and n < 0:
                raise _OutOfBudget("a division by zero")
            value = mx**n
            if mx and abs(self.ctx.mag(mx) * n) > 2 * _RANGE_BITS:
                raise _OutOfBudget("out of range")
            relative = abs(n) * mex / abs(mx) if mx else 0
            return value, abs(value) * relative * 2 + self._rounding(value)
        (mx, mex), (my, mey) = self._mp(x, ex), self._mp(y, ey)
        if mx <= 0:
            raise _OutOfBudget("not a real number")
        log = self.ctx.log(mx)
        if abs(my * log) > 710:
            raise _OutOfBudget("out of range")
        value = self.ctx.exp(my * log)
        return value, abs(value) * (abs(my) * mex / mx + abs(log) * mey) * 2 + self._rounding(value)


def _symbolic(question: Question, answer) -> Verdict:
    import sympy  # deferred: sympy costs ~0.25 s at import

    expr = expression(answer, question.symbols)
    names = {s: sympy.Symbol(s, positive=True) for s in question.symbols}
    # symbols created elsewhere without assumptions are matched by name
    expr = expr.subs({s: names[s.name] for s in expr.free_symbols if s.name in names})
    shown = str(answer)
    if _same_formula(expr, question.answer_key()):
        return Verdict(question.id, True, "", answer=shown)
    wrong = _misconception(question, lambda v: _same_formula(expr, sympy.sympify(v)))
    if wrong:
        return Verdict(question.id, False, wrong.feedback, wrong.name, shown)
    unknown = {s.name for s in expr.free_symbols} - set(question.symbols)
    extra = f" (it uses {', '.join(sorted(unknown))}; the question's symbols are {', '.join(question.symbols)})" if unknown else ""

    parsed = formula_reading(answer, question.symbols)  # '2n/3b' was read as (2*n/3)*b
    return Verdict(question.id, False, f"not equivalent to the expected expression{extra}; {_hint_call(question)}"
                   + (f". {parsed}" if parsed else ""), answer=shown)


def _choice(question: Question, answer) -> Verdict:
    given = choice(answer, question.choices, question.synonyms)
    key = str(question.answer_key()).lower()
    if given.lower() == key:
        return Verdict(question.id, True, "", answer=given)

    wrong = _misconception(question, lambda v: str(v).lower() == given.lower())
    return Verdict(question.id, False, wrong.feedback if wrong else
                   f"Not {given}: reread the question and weigh each choice. T{_hint_call(question)[1:]}.",
                   wrong.name if wrong else None, given)


def _code(question: Question, answer, cases: tuple[tuple, ...] | None = None) -> Verdict:
    if not callable(answer):
        raise InvalidValue(f"{question.id} expects a function; got {type(answer).__name__}.")
    cases = question.cases if cases is None else cases
    results = []
    for args in cases:
        try:
            results.append(answer(*args))
        except NotImplementedError:
            results.append(None)
        except Exception:  # the learner's code may raise anything; judged below
            results.append(Ellipsis)
    if all(r is None for r in results):  # the stub `...  # your code here` returns None
        return Verdict(question.id, None, "write the function body in place of ... and run the cell again")
    failed = 0
    first = ""
    for args in cases:
        expected = question.key(*args)
        try:
            got = answer(*args)
            ok = close_enough(float(got), float(expected), question.rtol)
        except Exception as error:  # the learner's code may raise anything
            ok, got = False, f"{type(error).__name__}: {error}"
        if not ok:
            failed += 1
            first = first or f"for input {args} your function returned {got!r}"
    if not failed:
        return Verdict(question.id, True, f"passed all {len(cases)} cases", answer=getattr(answer, "__name__", "function"))
    return Verdict(question.id, False, f"{failed} of {len(cases)} cases wrong; {first}", answer=getattr(answer, "__name__", "function"))


# --- output ----------------------------------------------------------------------------


def _jsonable(value):
    try:
        json.dumps(value)
        return value
    except TypeError:
        return str(value)


def params_digest(params: Mapping[str, Any]) -> str:
    text = json.dumps({k: _jsonable(v) for k, v in sorted(params.items())}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _show(verdict: Verdict, record: dict) -> None:
    """In IPython: the verdict as text plus the answer record; elsewhere: print the verdict."""
    try:
        from IPython import get_ipython  # deferred: IPython costs ~70 ms at import
        from IPython.display import display  # deferred: IPython costs ~70 ms at import
    except ImportError:  # pragma: no cover - IPython comes with the course
        print(verdict)
        return
    if get_ipython() is None:
        print(verdict)
        return
    display({"text/plain": str(verdict), RECORD_MIME: record}, raw=True)


def _close_all(widget) -> None:
    """Close a widget and everything inside it (a closed model is not saved with the notebook)."""
    for child in getattr(widget, "children", ()):
        _close_all(child)
    widget.close()


def _box_is_graded(question_id: str, answer) -> str:
    return ("Graded: JupyterLab saves this box's answer with the notebook, and the grader judges it (the answer "
            "cell may stay as it is). In an editor that saves no widgets (VS Code, Colab), write it in the answer "
            f"cell instead: check({question_id!r}, {str(answer)!r}).")


def how_to_answer(question: Question) -> str:
    """The line under a numeric question's prompt that says in what unit to answer ("" for other kinds)."""
    if question.kind != "numeric":
        return ""
    if question.unit in (None, "dimensionless"):
        return "Answer as a plain number."
    if question.unit == FACTOR_UNIT:
        return "Answer as a factor: a plain number, or with x (1.5x)."
    return f"Answer in {question.unit}, or with a unit of your own."


def ask(question_id: str, **params):
    """Show a question with an answer box, a Check button and a Hint button (ipywidgets).

    Outside a live notebook the widget does not render; the prompt is also shown
    as text, and ``check(id, answer)`` works everywhere.
    """
    question = current(question_id)
    if params:
        question = question.with_params(**params)
    from IPython.display import Markdown, display  # deferred: IPython costs ~70 ms at import

    choices = f"  \n*Choices: {', '.join(question.choices)}*" if question.kind == "choice" else ""
    unit = f"  \n*{how_to_answer(question)}*" if how_to_answer(question) else ""
    display(Markdown(f"**Question `{question.id}`** · {question.points:g} pt  \n{question.text()}{choices}{unit}"))
    if question.kind == "code":
        display(Markdown(f"*Write the function, then run `check({question.id!r}, your_function)`.*"))
        return None
    if not isinstance(question, Question):  # released without its key: check() records the answer for the grader
        display(Markdown(f"*Answer with `check({question.id!r}, answer)`: it is recorded and graded.*"))
        return None
    import ipywidgets as w  # deferred: ipywidgets costs ~0.12 s at import

    box = (w.Dropdown(options=["", *question.choices], description="answer")
           if question.kind == "choice" else w.Text(placeholder="your answer", description="answer"))
    check_button, hint_button = w.Button(description="Check", button_style="primary"), w.Button(description="Hint")
    feedback = w.HTML()
    feedback.add_class("roofkit-feedback")
    hints = w.HTML()
    hints.add_class("roofkit-hints")

    def on_check(_):
        verdict = judge(question, box.value)
        colour = "#8a5a00" if verdict.unreadable else {True: "green", False: "#b00", None: "#666"}[verdict.correct]
        said = f"<span style='color:{colour}'>{html.escape(str(verdict))}</span>"
        if question.id in _handed_in and verdict.correct is not None:
            said += f"<div style='color:#666'>{html.escape(_box_is_graded(question.id, box.value))}</div>"
        feedback.value = said

    shown = [0]  # this box's own count: hint() cells of the lesson do not use up the button's hints

    def on_hint(_):
        total = len(question.hints)
        if not total:
            text = hint_text(question, 1)
        else:
            shown[0] += 1
            last = " (that was the last hint)" if shown[0] == total else ""
            text = f"[{question.id}] hint {shown[0]}/{total}: {hint_text(question, shown[0])}{last}"
        hints.value += f"<div>{html.escape(text)}</div>"
        if not total or shown[0] == total:
            hint_button.disabled = True  # says so once, instead of repeating the last hint
            hint_button.description = "No more hints"

    check_button.on_click(on_check)
    hint_button.on_click(on_hint)
    if hasattr(box, "on_submit"):
        box.continuous_update = False  # the value changes on Enter (or leaving the box), not per key
    # a new answer is judged at once (Enter, or a choice picked): what the box holds is what it last judged
    box.observe(lambda change: on_check(None), names="value")

    class QuestionBox(w.VBox):
        def __repr__(self):  # what a page without live widgets shows instead of the box
            return f"(answer box for {question.id}: in JupyterLab, type an answer and press Check)"

    box.add_class(BOX_CLASS)
    box.add_class(BOX_ID_PREFIX + question.id)
    box.add_class(BOX_PARAMS_PREFIX + params_digest(question.params))
    if question.id in _boxes:  # asked again: the old box goes, so the notebook saves one answer per question
        _close_all(_boxes[question.id])
    widget = QuestionBox([w.HBox([box, check_button, hint_button]), feedback, hints])
    widget.add_class("roofkit-question")
    widget.question = question  # for tests and the browser driver
    widget.check_button, widget.answer_box, widget.feedback = check_button, box, feedback
    widget.hint_button, widget.hints = hint_button, hints
    _boxes[question.id] = widget
    display(widget)
    return None
