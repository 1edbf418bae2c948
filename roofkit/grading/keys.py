"""Answer keys for the instructor: each student's key per question, and the key beside each graded answer.

``roofkit assign ... --keys`` writes ``keys.csv`` into the release folder, beside ``assignment.json``; both are
the instructor's and neither goes to a student. The grader puts the same text (``expected``) into each question
of a result record, so settling "my answer is right" is a lookup, not a computation by hand.

The key is the bank's, computed through roofkit with the student's numbers; how close an answer must come is
the question's own rule (its tolerance, or exact).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping
from typing import Any

from ..course import quiz
from . import variants

__all__ = ["expected", "accepts", "rows", "csv_text", "FILE", "COLUMNS"]

FILE = "keys.csv"
COLUMNS = ("student", "question", "points", "numbers", "key", "unit", "accepts")


def _number(value: float) -> str:
    """Six significant figures, no trailing zeros: enough to settle any tolerance the bank uses."""
    if value == 0 or not math.isfinite(value):
        return repr(value)
    return f"{value:.6g}"


def _unit(question) -> str:
    unit = getattr(question, "unit", None)
    return "" if unit in (None, "dimensionless") else unit


def expected(question) -> str:
    """The key of ``question`` (asked with its numbers) as text: a number with its unit, a choice, a formula."""
    if question.kind == "code":
        return f"a function, checked on {len(question.cases)} public and {len(question.hidden_cases)} hidden cases"
    try:
        key = question.answer_key()
    except Exception as error:  # noqa: BLE001 - a key that cannot be computed is reported, not raised at a grader
        return f"(the key could not be computed: {type(error).__name__})"
    if question.kind == "numeric":
        unit = _unit(question)
        return f"{_number(float(key))}{'' if unit == quiz.FACTOR_UNIT else ' '}{unit}".strip()
    return str(key)


def accepts(question) -> str:
    """Which answers count as right, in words."""
    if question.kind != "numeric":
        return {"choice": "this choice (or its synonyms)", "symbolic": "any equal formula",
                "code": "all cases pass"}.get(question.kind, "")
    if question.rtol == 0:
        return "exactly this"
    return f"within {question.rtol:.0%} ({question.figures} significant figures)"


def rows(questions: Iterable, numbers: Mapping[str | None, Mapping[str, Mapping[str, Any]]]) -> list[dict]:
    """One row per student and question: ``numbers`` maps a student (None: no roster) to their parameters."""
    out = []
    for student, params in numbers.items():
        for question in questions:
            mine = params.get(question.id, {})
            asked = question.with_params(**mine) if mine else question
            out.append({"student": student or "", "question": question.id, "points": f"{question.points:g}",
                        "numbers": variants.describe(mine) if mine else "the lesson's own",
                        "key": expected(asked), "unit": _unit(question), "accepts": accepts(question)})
    return out


def csv_text(table: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)
    return buffer.getvalue()


def bank_questions(ids: Iterable[str], private=None) -> list:
    """The questions with their keys: the course's from its bank, the instructor's from theirs."""
    course = quiz.by_id()
    own = {q.id: q for q in private.questions} if private is not None else {}
    return [own.get(i) or course[i] for i in ids]
