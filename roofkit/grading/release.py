"""Questions as a release hands them out: the prompt with the student's numbers, and no key.

A release notebook's setup cell calls :func:`use_release` with, for each of its
questions, what the student may see (:func:`spec`): the prompt as text with
their numbers, the kind, the unit, the choices, the symbols, the hints, the
public cases of a code question, the points. Never the key, a hidden case or a
misconception's value.

* On a learner's laptop, a question the installed roofkit knows (the course's
  own) is checked as always, with the student's numbers (``use_variant``). A
  question it does not know (an instructor's private one) becomes a
  :class:`Released` question: ``ask`` shows its stored prompt and ``check``
  checks the answer's form (a number, a unit of the right kind, one of the
  choices, a function returning numbers), then records it for the grader.
* In a graded kernel, :func:`arm` runs before any student code (the sandbox
  calls it) and every question is a :class:`Released` one: that kernel's
  roofkit has no question bank at all (see :mod:`roofkit.grading.stripped`).
  Whatever reaches for a key there (``answer_key``, ``.key``, the bank, the
  ``roofkit.course.bank`` package) gets :class:`KeysWithheld` or nothing, and
  raises the audit event ``roofkit.keys``, which the grader's watch
  (:mod:`roofkit.grading.probe`) reports as a flag.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..course import answers, quiz
from ..errors import InvalidValue, RoofkitError, UnitMismatch
from ..course.quiz import Verdict

__all__ = ["use_release", "spec", "public", "Released", "Recorded", "KeysWithheld", "arm", "graded", "prompt_only", "ids",
           "withheld", "AUDIT_EVENT"]

AUDIT_EVENT = "roofkit.keys"
KEYS_LOG = "keys.log"  # in the sandbox folder: what processes started by a graded notebook reached for
RECORDED = "answer recorded: the grader checks its value (the key is not in this notebook)"

_GRADED = False
_PROMPT_ONLY: dict[str, "Released"] = {}


class KeysWithheld(PermissionError, RoofkitError):
    """An answer key asked for where keys are not kept (a graded kernel, or a private question)."""


def withheld(what: str, question: str | None = None):
    """Report a reach for a key (an audit event the grader's watch records), then refuse it."""
    report(what)
    about = f" of {question}" if question else ""
    raise KeysWithheld(f"the answer key{about} is not in this notebook: the grader holds it and checks "
                       "your recorded answer when it grades.")


def report(what: str) -> None:
    """Tell the grader's watch (an audit hook in a graded kernel; in a process the notebook started, a file)."""
    try:
        sys.audit(AUDIT_EVENT, str(what)[:300])

        folder = os.environ.get("ROOFKIT_SANDBOX_FOLDER")
        if folder and not _GRADED:  # a child process of a graded kernel: no hook here, leave a line instead
            with open(os.path.join(folder, KEYS_LOG), "a", encoding="utf-8") as file:
                file.write(str(what)[:300].replace("\n", " ") + "\n")
    except Exception:  # noqa: BLE001 - a watch that fails must not break the notebook
        pass


def graded() -> bool:
    """True in a graded kernel (after :func:`arm`)."""
    return _GRADED


def prompt_only(question_id: str) -> "Released | None":
    """The released question ``question_id`` when this roofkit has no key for it."""
    return _PROMPT_ONLY.get(question_id) if isinstance(question_id, str) else None


def ids() -> list[str]:
    return sorted(_PROMPT_ONLY)


# --- what a release stores ----------------------------------------------------------------


def _jsonable(value):
    try:
        return json.loads(json.dumps(value))
    except TypeError:
        return str(value)


def public(question) -> dict:
    """What a release records of ``question`` (no key): its prompt template, default numbers, form and hints.

    A release keeps this in its manifest, so that the notebooks it handed out can be rebuilt exactly, prompts
    included, even after the bank changes (a new roofkit, a fixed key).
    """
    out = {"kind": question.kind, "lesson": question.lesson, "points": float(question.points),
           "prompt": getattr(question, "template", lambda: question.prompt)(),  # with its precision sentence
           "params": {k: _jsonable(v) for k, v in sorted(question.params.items())}}
    if question.kind == "numeric":
        out["unit"] = question.unit
    if question.kind == "choice":
        out["choices"] = list(question.choices)
        if getattr(question, "synonyms", None):
            out["synonyms"] = {k: list(v) for k, v in question.synonyms.items()}
    if question.kind == "symbolic":
        out["symbols"] = list(question.symbols)
    if question.kind == "code":
        out["cases"] = [list(c) for c in question.cases]
    if question.hints:
        out["hints"] = list(question.hints)
    return out


def spec(question, points: float | None = None, variant: Mapping[str, Any] | None = None) -> dict:
    """What a student may see of ``question`` (a Question, or what :func:`public` recorded) asked with ``variant``.

    The prompt as text with the student's numbers, the form and the hints: never a key.
    """
    recorded = question if isinstance(question, Mapping) else public(question)
    variant = {k: _jsonable(v) for k, v in sorted((variant or {}).items())}
    params = {**recorded["params"], **variant}
    out = {k: v for k, v in recorded.items() if k not in ("prompt", "params", "combinations")}
    out.update(points=float(recorded["points"] if points is None else points),
               prompt=recorded["prompt"].format(**params), params=dict(sorted(params.items())), variant=variant)
    return out


class Released:
    """A question as its release stores it: prompt, form and hints; the key stays with the grader."""

    def __init__(self, question_id: str, data: Mapping[str, Any]):
        self.id = question_id
        self.kind = str(data.get("kind", "numeric"))
        self.lesson = str(data.get("lesson", ""))
        self.points = float(data.get("points", 1.0))
        self.prompt = str(data.get("prompt", ""))
        self.params = dict(data.get("params") or {})
        self.unit = data.get("unit")
        self.choices = tuple(data.get("choices") or ())
        synonyms = data.get("synonyms") if isinstance(data.get("synonyms"), dict) else {}
        self.synonyms = {str(k): tuple(t for t in v if isinstance(t, str)) for k, v in synonyms.items()
                         if isinstance(v, (list, tuple))}
        self.symbols = tuple(data.get("symbols") or ())
        self.hints = tuple(data.get("hints") or ())
        self.cases = tuple(tuple(c) for c in data.get("cases") or ())
        self.variants: dict = {}
        self._data = dict(data)

    def __repr__(self) -> str:
        return f"Released({self.id!r}, kind={self.kind!r})"

    def text(self) -> str:
        return self.prompt

    def with_params(self, **params) -> "Released":
        other = Released(self.id, self._data)
        other.params = {**self.params, **params}
        return other

    def to_dict(self) -> dict:
        return {"id": self.id, "lesson": self.lesson, "kind": self.kind, "points": self.points}

    # what a key lookup would want: reported, and refused or empty
    def answer_key(self):
        withheld(f"{self.id}: answer_key()", self.id)

    @property
    def key(self):
        withheld(f"{self.id}: .key", self.id)

    @property
    def hidden_cases(self) -> tuple:
        report(f"{self.id}: .hidden_cases")
        return ()

    @property
    def misconceptions(self) -> tuple:
        report(f"{self.id}: .misconceptions")
        return ()

    # checking the form of an answer, without the key
    def recorded(self, answer):
        """The verdict ``check`` shows: the answer's form checked here, its value checked by the grader."""
        if answer is None or answer is Ellipsis or (isinstance(answer, str) and not answer.strip()):
            return Verdict(self.id, None, "write your answer in place of ... and run the cell again")
        try:
            shown = self._form(answer)
        except RoofkitError as error:
            # a number in the wrong unit was read, and is wrong; anything else could not be read at all
            return Verdict(self.id, False, str(error), answer="function" if callable(answer) else _jsonable(answer),
                           unreadable=not callable(answer) and not isinstance(error, UnitMismatch))
        if shown is None:  # the stub `...  # your code here` returns None
            return Verdict(self.id, None, "write the function body in place of ... and run the cell again")
        return Recorded(self.id, None, RECORDED, answer=shown)

    def _form(self, answer):
        """The answer as the grader will read it (roofkit.answers, the one reader), or the reader's error."""
        if self.kind == "numeric":
            answers.read(answer, self.unit or "dimensionless")  # UnitMismatch names both units
            return answer
        if self.kind == "choice":
            return answers.choice(answer, self.choices, self.synonyms)
        if self.kind == "symbolic":
            answers.expression(answer, self.symbols)
            return str(answer)
        if not callable(answer):
            raise InvalidValue(f"{self.id} expects a function; got {type(answer).__name__}.")
        values = []
        for args in self.cases:
            try:
                values.append(answer(*args))
            except NotImplementedError:
                values.append(None)
            except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
                raise InvalidValue(f"for input {args} your function raised {type(error).__name__}: {error}") from None
        if values and all(v is None for v in values):
            return None
        for args, value in zip(self.cases, values):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidValue(f"for input {args} your function returned {value!r}, not a number.")
        return getattr(answer, "__name__", "function")


@dataclass(frozen=True, repr=False)
class Recorded(Verdict):
    """An answer whose form is right, recorded for the grader (``correct`` is None: not judged here)."""

    def __str__(self) -> str:
        return f"[{self.question}] ✓ {self.feedback}"


# --- the setup cell, and the graded kernel -------------------------------------------------


def use_release(specs: Mapping[str, Mapping[str, Any]]) -> None:
    """Ask this notebook's questions as the release says (a release's setup cell calls this)."""
    known = set() if _GRADED else {q.id for q in quiz.questions()}
    released, numbers = {}, {}
    for question_id, data in specs.items():
        if not isinstance(data, Mapping):
            raise InvalidValue(f"the setup of question {question_id!r} is damaged: re-run the setup cell as it was "
                               "handed out.")
        if question_id in known:
            if data.get("variant"):
                numbers[question_id] = dict(data["variant"])
        else:
            released[question_id] = Released(question_id, data)
    _PROMPT_ONLY.clear()
    _PROMPT_ONLY.update(released)
    if not _GRADED:
        quiz.use_variant(numbers, handed_in=specs.keys() & known)


class _WithheldBank(dict):
    """What a graded kernel has in place of the question bank: empty, and every read of it is reported."""

    def _peek(self, how: str):
        report(f"the question bank ({how})")

    def __getitem__(self, key):
        self._peek(f"[{key!r}]")
        return super().__getitem__(key)

    def get(self, *args):
        self._peek("get")
        return super().get(*args)

    def values(self):
        self._peek("values")
        return super().values()

    def items(self):
        self._peek("items")
        return super().items()

    def keys(self):
        self._peek("keys")
        return super().keys()

    def __iter__(self):
        self._peek("iteration")
        return super().__iter__()

    def __len__(self):
        self._peek("len")
        return super().__len__()

    def copy(self):
        self._peek("copy")
        return dict(self)


def arm() -> None:
    """Make this process a graded kernel: no bank, every question released, reaches for keys reported.

    Called by :mod:`roofkit.grading.sandbox` before any student code runs, in a kernel whose roofkit is the
    copy without the question bank.
    """
    global _GRADED

    _GRADED = True
    quiz._BANK = _WithheldBank()
    # an editable install's finder could map `roofkit` back to the real package: graded kernels use the copy only
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
