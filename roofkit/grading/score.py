"""One question's points from one answer record, judged by the grader's own keys.

The record says what the student answered; everything else in it (its verdict,
its parameters) is ignored. The answer is judged with :func:`roofkit.quiz.judge`
on the question asked with *this student's* numbers, through the same reader
(:mod:`roofkit.answers`) that checks answers in the notebook and on the command
line. That reader parses text with its own grammar and never evaluates it, so
``__import__(...)`` or ``10**10**10`` is refused as unreadable, not run.

Code questions are scored per case: the function's results come back from the
clean process of :mod:`roofkit.grading.cases` and are compared here with the
keys; public cases say what the function returned, hidden ones only that they
failed (never an exception's name or text: the student's code can build those
from the hidden case's arguments).

Each reason carries the feedback level it needs (:data:`LEVELS`): a wrong
number's size and direction ("too large by about 3x") is ``ratio``, the text of
a known misconception is ``misconception``, everything else ``verdict``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..course import quiz
from ..course.answers import MAX_LENGTH as MAX_TEXT
from .files import text as valid

__all__ = ["Score", "judge_answer", "score_code", "answer_text", "LEVELS", "HIDDEN_DETAILS", "default_level"]

LEVELS = ("none", "verdict", "misconception", "ratio")  # how much a feedback page says, least first
HIDDEN_DETAILS = ("wrong", "did not finish in time", "did not run", "raised an exception", "not a number")


def default_level(private: bool) -> str:
    """A course question's feedback shows how far off a number is; a private question's does not (it would give
    its key away over a few resubmissions)."""
    return "misconception" if private else "ratio"


@dataclass
class Score:
    points: float
    verdict: str  # correct | wrong | partial | not answered
    reason: str = ""
    misconception: str | None = None
    cases: list[dict] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    reason_level: str = "verdict"  # the feedback level from which ``reason`` may be shown to the student


def answer_text(answer) -> str:
    try:
        text = answer if isinstance(answer, str) else repr(answer)
    except (RecursionError, ValueError, TypeError):  # a structure nested past repr's limits
        text = f"({type(answer).__name__}, nested too deeply to show)"
    return valid(text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "...")


def _unreadable(question, why: str) -> Score:
    return Score(0.0, "wrong", f"could not read your answer: {why}")


def judge_answer(question, answer) -> Score:
    """Points for a numeric, symbolic or choice answer to ``question`` (already asked with the student's numbers)."""
    if answer is None or answer == "Ellipsis" or (isinstance(answer, str) and not answer.strip()):
        return Score(0.0, "not answered", "not answered")
    if isinstance(answer, bool) or not isinstance(answer, (int, float, str)):
        return _unreadable(question, f"expected a number or a short text, got {type(answer).__name__}")
    if isinstance(answer, float) and not math.isfinite(answer):
        return _unreadable(question, f"{answer!r} is not a finite number")
    if isinstance(answer, str) and len(answer) > MAX_TEXT:
        return _unreadable(question, "the answer is too long")
    try:
        verdict = quiz.judge(question, answer)
    except Exception as error:  # noqa: BLE001 - any answer the checker cannot digest is wrong, not a crash
        return _unreadable(question, f"{type(error).__name__}")
    if verdict.unreadable:
        return _unreadable(question, verdict.feedback)
    if verdict.correct is None:
        return Score(0.0, "not answered", verdict.feedback)
    if verdict.correct:
        return Score(float(question.points), "correct")
    if verdict.misconception:
        level = "misconception"
    else:
        level = "ratio" if question.kind == "numeric" else "verdict"
    return Score(0.0, "wrong", verdict.feedback, verdict.misconception, reason_level=level)


def score_code(question, results: dict[int, dict], public: int) -> Score:
    """Points for a function from its per-case results ({case index: line from the case runner})."""
    all_cases = list(question.cases) + list(question.hidden_cases)
    if not all_cases:
        return Score(0.0, "wrong", "this question has no cases to run")
    if results and all(results.get(i, {}).get("none") for i in range(len(all_cases))):
        return Score(0.0, "not answered", "the function returns nothing yet: write its body in place of ...")
    cases, passed = [], 0
    for i, args in enumerate(all_cases):
        hidden = i >= public
        line = results.get(i)
        label = f"hidden case {i - public + 1}" if hidden else f"case {args}"
        if line is None:
            ok, detail = False, "did not run (the time limit for your function ran out, or it crashed the process)"
        elif "error" in line:
            ok, detail = False, str(line["error"])[:200]
            if hidden:  # the grader's own words only: the name and text are the student's code's
                detail = "did not finish in time" if detail.startswith("took longer than") else "raised an exception"
        elif "value" in line and isinstance(line["value"], (int, float)):
            try:
                ok = quiz.close_enough(float(line["value"]), float(question.key(*args)), question.rtol)
            except (TypeError, ValueError, OverflowError):
                ok = False
            detail = "" if ok else f"returned {line['value']!r}"
        else:
            ok, detail = False, f"returned {line.get('repr', line.get('value'))}, not a number"
        if hidden and not ok and detail not in HIDDEN_DETAILS:
            detail = "did not run" if line is None else "wrong"
        passed += ok
        cases.append({"case": label, "hidden": hidden, "passed": ok, "detail": detail})
    points = float(question.points) * passed / len(all_cases)
    if passed == len(all_cases):
        return Score(points, "correct", f"passed all {len(all_cases)} cases", cases=cases)
    first = next(c for c in cases if not c["passed"])
    reason = f"{passed} of {len(all_cases)} cases passed; {first['case']}: {first['detail']}"
    return Score(points, "partial" if passed else "wrong", reason, cases=cases,
                 reason_level="verdict" if first["hidden"] else "misconception")
