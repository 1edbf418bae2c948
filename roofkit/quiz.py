"""Questions that check themselves, and name the misconception behind a wrong answer.

A question holds no typed-in answer: its key is a computation through roofkit
over the question's parameters, so the same question can be asked with other
numbers (a class variant) and the key follows. Four kinds:

* numeric   a number, or a string with a unit ("3.35 TB/s", "296 FLOP/byte"),
            read by :mod:`roofkit.answers` and compared within a relative
            tolerance (``rtol=0``: one exact whole number);
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
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidValue, RoofkitError, UnitMismatch, UnknownName

__all__ = ["Question", "Misconception", "Verdict", "register", "get", "questions", "check", "judge", "hint", "ask", "answer_key", "use_variant", "current", "close_enough", "params_digest", "NOT_ANSWERED"]

RECORD_MIME = "application/vnd.roofkit.answer+json"
NOT_ANSWERED = "not answered yet"
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
    that unit's dimension.
    """

    name: str
    feedback: str
    answer: Callable[..., Any] | None = None
    scale: float | None = None
    unit: bool | str = False

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
    choices: tuple[str, ...] = ()
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

    def with_params(self, **params) -> "Question":
        """The same question asked with other numbers (a student's variant)."""
        unknown = set(params) - set(self.params)
        if unknown:
            raise InvalidValue(f"question {self.id!r} has no parameter(s) {sorted(unknown)}; it has {sorted(self.params)}.")
        from dataclasses import replace

        return replace(self, params={**self.params, **params})

    def text(self) -> str:
        return self.prompt.format(**self.params)

    def answer_key(self):
        """The right answer for these parameters (for a code question: the reference function)."""
        return self.key if self.kind == "code" else self.key(**self.params)

    @property
    def whole(self) -> bool:
        """A numeric question whose answer is one exact whole number (rtol 0 and an integer key)."""
        return self.kind == "numeric" and self.rtol == 0 and float(self.answer_key()).is_integer()

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
        mark = {True: "✓ correct", False: "✗ not yet", None: "… " + NOT_ANSWERED}[self.correct]
        return f"[{self.question}] {mark}: {self.feedback}" if self.feedback else f"[{self.question}] {mark}"

    def record(self, params: Mapping[str, Any]) -> dict:
        """What the grader reads from the notebook (and re-checks; it trusts none of it)."""
        return {"roofkit_answer": 1, "id": self.question, "answer": _jsonable(self.answer),
                "correct": self.correct, "params": params_digest(params)}

    def to_dict(self) -> dict:
        return {"id": self.question, "correct": self.correct, "feedback": self.feedback,
                "misconception": self.misconception, "unreadable": self.unreadable}

    def __repr__(self) -> str:
        return f"Verdict({self.question!r}, correct={self.correct})"

    def _ipython_display_(self):
        """check() has already shown this verdict with its record; show nothing twice."""


_BANK: dict[str, Question] = {}
_hints_shown: dict[str, int] = {}
_variant: dict[str, dict[str, Any]] = {}  # question id -> this notebook's parameters (a class variant)


def use_variant(params_by_question: Mapping[str, Mapping[str, Any]]) -> None:
    """Ask every listed question with these parameters from now on (a release's setup cell calls this)."""
    for question_id, params in params_by_question.items():
        get(question_id).with_params(**params)  # validates ids and parameter names
    _variant.clear()
    _variant.update({k: dict(v) for k, v in params_by_question.items()})


def current(question_id: str | Question) -> Question:
    """The question as this notebook asks it: with its variant's parameters, if any."""
    question = get(question_id)
    params = _variant.get(question.id)
    return question.with_params(**params) if params else question


def register(*new: Question) -> None:
    for question in new:
        if question.id in _BANK and _BANK[question.id] != question:
            raise InvalidValue(f"two questions share the id {question.id!r}.")
        _BANK[question.id] = question


def _load_bank() -> None:
    from . import course  # noqa: F401  (importing the course registers its questions)


def get(question_id: str | Question) -> Question:
    if isinstance(question_id, Question):
        return question_id
    import sys

    release = sys.modules.get("roofkit.grading.release")  # loaded by a release's setup cell, if any
    released = getattr(release, "prompt_only", lambda _: None)(question_id)  # (a module half-imported: None)
    if released is not None:
        return released  # its prompt, without a key (see roofkit.grading.release)
    if getattr(release, "graded", lambda: False)():  # a graded kernel holds no bank: the keys stay with the grader
        raise UnknownQuestion(question_id, release.ids())
    _load_bank()
    if question_id not in _BANK:
        raise UnknownQuestion(question_id, _BANK)
    return _BANK[question_id]


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
        from dataclasses import replace

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
    import inspect
    import textwrap

    try:
        return textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        return None


def hint_text(question: Question, n: int) -> str:
    """Hint number ``n`` (from 1) of a question, without counting it as shown."""
    if not question.hints:
        return f"[{question.id}] no hints for this one: reread the prompt and the section above it."
    if not 1 <= n <= len(question.hints):
        raise InvalidValue(f"{question.id} has hints 1 to {len(question.hints)}; got {n}.")
    return question.hints[n - 1]


def hint(question_id: str) -> str:
    """The next hint of a question (one more each call); the key is never among them."""
    question = get(question_id)
    if not question.hints:
        return f"[{question.id}] no hints for this one: reread the prompt and the section above it."
    shown = min(_hints_shown.get(question.id, 0), len(question.hints) - 1)
    _hints_shown[question.id] = shown + 1
    last = " (that was the last hint)" if shown == len(question.hints) - 1 else ""
    return f"[{question.id}] hint {shown + 1}/{len(question.hints)}: {question.hints[shown]}{last}"


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
    from .answers import unit

    wanted = unit(question.unit or "dimensionless")
    for wrong in question.misconceptions:
        if wrong.unit is True and getattr(error, "dims", None) in ((0, 0, 1), (0, 0, -1)):
            return wrong
        if isinstance(wrong, Misconception) and isinstance(wrong.unit, str):
            slip = unit(wrong.unit)
            if tuple(a - b for a, b in zip(slip.dims, wanted.dims)) == getattr(error, "dims", None):
                return wrong
    return None


def _rounded_too_much(reading, key: float) -> int | None:
    """The significant figures the learner kept, when their answer is the key rounded to them."""
    if reading.digits is None or key == 0 or reading.digits >= 6:
        return None
    exponent = math.floor(math.log10(abs(key))) - reading.digits + 1
    return reading.digits if math.isclose(round(key, -exponent), reading.value, rel_tol=1e-9) else None


def _figures_needed(rtol: float) -> int:
    """Significant figures that always land within ``rtol`` of the key (half a unit in the last place)."""
    return max(2, math.ceil(math.log10(0.5 / rtol)) + 1) if rtol > 0 else 6


def _numeric(question: Question, answer) -> Verdict:
    from .answers import read

    key = float(question.answer_key())
    unit_text = question.unit or "dimensionless"
    try:
        reading = read(answer, unit_text)
    except UnitMismatch as error:
        wrong = _unit_slip(question, error)
        feedback = f"{error} {wrong.feedback}" if wrong else str(error)
        return Verdict(question.id, False, feedback, wrong.name if wrong else "unit", _jsonable(answer))
    value, shown = reading.value, _jsonable(answer)
    if close_enough(value, key, max(question.rtol, 1e-12)):  # an exact key survives a unit conversion
        return Verdict(question.id, True, "", answer=shown)
    # a misconception's value is matched loosely even where the key must be exact: 6104 is 'not a power of two'
    loose = question.rtol if question.rtol > 0 else 0.005
    wrong = _misconception(question, lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                           and close_enough(value, float(v), loose))
    if wrong:
        return Verdict(question.id, False, wrong.feedback, wrong.name, shown)
    return Verdict(question.id, False, _numeric_feedback(question, reading, key), answer=shown)


def _numeric_feedback(question: Question, reading, key: float) -> str:
    """Why a number is wrong, without giving the key away: the slip if it is a known kind, else the direction."""
    value, hint = reading.value, _hint_call(question)
    direction = "too large" if value > key else "too small"
    if reading.bits and close_enough(value * 8, key, question.rtol):
        return "b is a bit; a byte is B (8 bits). Write the unit as B or byte."
    if question.unit == "percent" and close_enough(value * 100, key, question.rtol):
        return "That looks like a fraction: the question asks for a percentage (x 100, or write it with %)."
    if question.unit in (None, "dimensionless") and close_enough(value / 100, key, question.rtol) and not reading.unit_given:
        return "That looks like a percentage: the question asks for a fraction (0.25 for 25%, or write it with %)."
    if question.whole:
        if not math.isclose(value, round(value), rel_tol=1e-12):
            return f"The answer is a whole number: round {value:g} as the question says, then check again."
        if math.isclose(abs(value - key), 1, rel_tol=1e-9):
            side = "one too few" if value < key else "one too many"
            return (f"{side.capitalize()}: the answer is the exact whole number the question asks for; "
                    f"check which way you rounded. {hint[0].upper() + hint[1:]}.")
        return f"{direction.capitalize()}: this question wants one exact whole number. {hint[0].upper() + hint[1:]}."
    figures = _rounded_too_much(reading, key)
    if figures is not None:
        return (f"Close, but rounded too much: {figures} significant figure{'s' * (figures > 1)} is not enough here. "
                f"Keep at least {_figures_needed(question.rtol)}.")
    ratio = value / key if key else math.inf
    if 0 < ratio < 1.25 and ratio > 0.8:
        return (f"Close, but {direction} by more than the {question.rtol:.1%} this question allows: "
                f"recheck the inputs and the arithmetic. {hint[0].upper() + hint[1:]}.")
    if ratio > 0:
        size = f" by about {ratio:.3g}x" if ratio > 1 else f" by about {1 / ratio:.3g}x"
    else:
        size = " (the sign is wrong)" if value < 0 < key else ""
    return f"{direction}{size}; {hint}"


def _same_formula(a, b) -> bool:
    """Whether two formulas are equal: numerically at random positive points first (fast), then exactly."""
    import random

    import sympy

    difference = a - b
    symbols = sorted(a.free_symbols | b.free_symbols, key=lambda s: s.name)
    rng = random.Random(20261130)
    for _ in range(3):
        point = {s: sympy.Rational(rng.randint(101, 997), rng.randint(7, 97)) for s in symbols}
        try:
            value = complex(difference.subs(point).evalf(30))
        except (TypeError, ValueError, OverflowError):
            return False
        scale = max(1.0, abs(complex(a.subs(point).evalf(30))))
        if not abs(value) <= 1e-12 * scale:
            return False
    return sympy.simplify(difference) == 0 if len(str(difference)) < 400 else True


def _symbolic(question: Question, answer) -> Verdict:
    import sympy

    from .answers import expression

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
    return Verdict(question.id, False, f"not equivalent to the expected expression{extra}; {_hint_call(question)}",
                   answer=shown)


def _choice(question: Question, answer) -> Verdict:
    from .answers import choice

    given = choice(answer, question.choices)
    key = str(question.answer_key()).lower()
    if given.lower() == key:
        return Verdict(question.id, True, "", answer=given)
    wrong = _misconception(question, lambda v: str(v).lower() == given.lower())
    return Verdict(question.id, False, wrong.feedback if wrong else f"not this one; {_hint_call(question)}",
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
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython comes with the course
        print(verdict)
        return
    if get_ipython() is None:
        print(verdict)
        return
    display({"text/plain": str(verdict), RECORD_MIME: record}, raw=True)


def ask(question_id: str, **params):
    """Show a question with an answer box, a Check button and a Hint button (ipywidgets).

    Outside a live notebook the widget does not render; the prompt is also shown
    as text, and ``check(id, answer)`` works everywhere.
    """
    question = current(question_id)
    if params:
        question = question.with_params(**params)
    from IPython.display import Markdown, display

    choices = f"  \n*Choices: {', '.join(question.choices)}*" if question.kind == "choice" else ""
    unit = ""
    if question.kind == "numeric":
        unit = ("  \n*Answer as a plain number.*" if question.unit in (None, "dimensionless")
                else f"  \n*Answer in {question.unit}, or with a unit of your own.*")
    display(Markdown(f"**Question `{question.id}`** · {question.points:g} pt  \n{question.text()}{choices}{unit}"))
    if question.kind == "code":
        display(Markdown(f"*Write the function, then run `check({question.id!r}, your_function)`.*"))
        return None
    if not isinstance(question, Question):  # released without its key: check() records the answer for the grader
        display(Markdown(f"*Answer with `check({question.id!r}, answer)`: it is recorded and graded.*"))
        return None
    import ipywidgets as w

    box = (w.Dropdown(options=["", *question.choices], description="answer")
           if question.kind == "choice" else w.Text(placeholder="your answer", description="answer"))
    check_button, hint_button = w.Button(description="Check", button_style="primary"), w.Button(description="Hint")
    feedback = w.HTML()
    feedback.add_class("roofkit-feedback")
    hints = w.HTML()
    hints.add_class("roofkit-hints")

    def on_check(_):
        verdict = judge(question, box.value)
        colour = {True: "green", False: "#b00", None: "#666"}[verdict.correct]
        import html

        feedback.value = f"<span style='color:{colour}'>{html.escape(str(verdict))}</span>"

    def on_hint(_):
        import html

        hints.value += f"<div>{html.escape(hint(question.id))}</div>"

    check_button.on_click(on_check)
    hint_button.on_click(on_hint)
    if hasattr(box, "on_submit"):
        box.continuous_update = False
        box.observe(lambda change: on_check(None), names="value")
    class QuestionBox(w.VBox):
        def __repr__(self):  # what a page without live widgets shows instead of the box
            return f"(answer box for {question.id}: in JupyterLab, type an answer and press Check)"

    widget = QuestionBox([w.HBox([box, check_button, hint_button]), feedback, hints])
    widget.add_class("roofkit-question")
    widget.question = question  # for tests and the browser driver
    widget.check_button, widget.answer_box, widget.feedback = check_button, box, feedback
    display(widget)
    return None
