"""Questions that check themselves, and name the misconception behind a wrong answer.

A question holds no typed-in answer: its key is a computation through roofkit
over the question's parameters, so the same question can be asked with other
numbers (a class variant) and the key follows. Four kinds:

* numeric   a number, or a string with a unit ("3.35 TB/s", "296 FLOP/byte"),
            converted with pint and compared within a relative tolerance;
* symbolic  a sympy expression such as ``2*n/(3*b)``, checked for equivalence;
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
    ``scale`` (forgot the factor 2: scale=0.5), or, with ``unit=True``, an answer
    in a unit of another dimension (FLOP/s where FLOPs were asked).
    """

    name: str
    feedback: str
    answer: Callable[..., Any] | None = None
    scale: float | None = None
    unit: bool = False

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
    rtol: float = 0.02
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

    def to_dict(self) -> dict:
        return {"id": self.id, "lesson": self.lesson, "kind": self.kind, "points": self.points}


@dataclass(frozen=True)
class Verdict:
    question: str
    correct: bool | None  # None: not answered yet
    feedback: str
    misconception: str | None = None
    answer: Any = None

    def __str__(self) -> str:
        mark = {True: "✓ correct", False: "✗ not yet", None: "… " + NOT_ANSWERED}[self.correct]
        return f"[{self.question}] {mark}: {self.feedback}" if self.feedback else f"[{self.question}] {mark}"

    def record(self, params: Mapping[str, Any]) -> dict:
        """What the grader reads from the notebook (and re-checks; it trusts none of it)."""
        return {"roofkit_answer": 1, "id": self.question, "answer": _jsonable(self.answer),
                "correct": self.correct, "params": params_digest(params)}

    def to_dict(self) -> dict:
        return {"id": self.question, "correct": self.correct, "feedback": self.feedback,
                "misconception": self.misconception}

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
        return Verdict(question.id, False, str(error), answer=answer)
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
    verdict = judge(question, answer)
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


def _numeric(question: Question, answer) -> Verdict:
    from .units import quantity

    key = float(question.answer_key())
    try:
        value = quantity(answer, question.unit or "dimensionless", "your answer") if isinstance(answer, str) \
            else float(answer)
    except UnitMismatch as error:
        wrong = next((m for m in question.misconceptions if m.unit), None)
        return Verdict(question.id, False, f"{error} {wrong.feedback if wrong else ''}".strip(),
                       wrong.name if wrong else "unit", answer)
    except RoofkitError:
        raise
    except (TypeError, ValueError):
        raise InvalidValue(f"a number is expected for {question.id}; got {answer!r}.") from None
    if close_enough(value, key, question.rtol):
        return Verdict(question.id, True, "", answer=answer)
    wrong = _misconception(question, lambda v: isinstance(v, (int, float)) and close_enough(value, float(v), question.rtol))
    if wrong:
        return Verdict(question.id, False, wrong.feedback, wrong.name, answer)
    direction = "too large" if value > key else "too small"
    ratio = value / key if key else math.inf
    scale = f" by about {ratio:.3g}x" if ratio > 1 else f" by about {1 / ratio:.3g}x" if ratio > 0 else ""
    return Verdict(question.id, False, f"{direction}{scale}; try `hint('{question.id}')`", answer=answer)


def _symbolic(question: Question, answer) -> Verdict:
    import sympy

    names = {s: sympy.Symbol(s, positive=True) for s in question.symbols}
    try:
        expr = sympy.sympify(answer, locals=names) if isinstance(answer, str) else sympy.sympify(answer)
    except (sympy.SympifyError, SyntaxError, TypeError):
        raise InvalidValue(f"cannot read {answer!r} as an expression in {', '.join(question.symbols)}.") from None
    # symbols created elsewhere without assumptions are matched by name
    expr = expr.subs({s: names[s.name] for s in expr.free_symbols if s.name in names})
    key = question.answer_key()
    if sympy.simplify(expr - key) == 0:
        return Verdict(question.id, True, "", answer=str(answer))
    wrong = _misconception(question, lambda v: sympy.simplify(expr - v) == 0)
    if wrong:
        return Verdict(question.id, False, wrong.feedback, wrong.name, str(answer))
    unknown = {s.name for s in expr.free_symbols} - set(question.symbols)
    extra = f" (it uses {', '.join(sorted(unknown))}; the question's symbols are {', '.join(question.symbols)})" if unknown else ""
    return Verdict(question.id, False, f"not equivalent to the expected expression{extra}", answer=str(answer))


def _choice(question: Question, answer) -> Verdict:
    given = str(answer).strip().lower().removesuffix("-bound").removesuffix(" bound")
    choices = {c.lower(): c for c in question.choices}
    if given not in choices:
        raise InvalidValue(f"{answer!r} is not one of the choices: {', '.join(question.choices)}.")
    key = str(question.answer_key()).lower()
    if given == key:
        return Verdict(question.id, True, "", answer=choices[given])
    wrong = _misconception(question, lambda v: str(v).lower() == given)
    return Verdict(question.id, False, wrong.feedback if wrong else "not this one; try `hint('" + question.id + "')`",
                   wrong.name if wrong else None, choices[given])


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
