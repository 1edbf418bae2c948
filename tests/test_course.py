"""Every question in the bank is well formed, every lesson names only real questions, and the notebooks are fresh."""

import math
import re
from pathlib import Path

import pytest

from roofkit.course import build, quiz
from roofkit.catalogs import hardware

ROOT = Path(__file__).resolve().parent.parent
LESSONS = sorted((ROOT / "lessons").glob("[0-9][0-9]-*.md"))
QUESTIONS = quiz.questions()
IDS = [q.id for q in QUESTIONS]


def _key_texts(key) -> list[str]:
    """The ways a numeric key could be written in a feedback message."""
    if not isinstance(key, (int, float)) or key == 0:
        return []
    texts = {f"{key:.3g}", f"{key:.4g}", f"{key:,.0f}", f"{key:.2e}", f"{key:.3e}"}
    return [t for t in texts if len(t.strip("0.,e+-")) >= 2]


def test_every_lesson_has_at_least_four_questions():
    assert LESSONS, "no lessons found"
    for lesson in LESSONS:
        number = lesson.stem[:2]
        assert len(quiz.questions(number)) >= 4, f"lesson {lesson.name} has fewer than 4 questions in its bank"


@pytest.mark.parametrize("question", QUESTIONS, ids=IDS)
def test_question_is_well_formed(question):
    assert re.fullmatch(rf"l{question.lesson}\.[a-z0-9][a-z0-9.\-]*", question.id), question.id
    assert question.points > 0
    assert question.text().strip()
    assert question.hints, f"{question.id} has no hints"
    key = question.answer_key()
    assert quiz.judge(question, key).correct is True, f"{question.id}: its own key is not judged correct"
    if question.kind == "numeric":
        assert math.isfinite(float(key)) and question.unit
        wrong = quiz.judge(question, float(key) * 1.37 + 1)
        assert wrong.correct is False
        for text in _key_texts(float(key)):
            assert text not in wrong.feedback, f"{question.id}: feedback reveals the key ({text})"
    for hint in question.hints:
        for text in _key_texts(key if question.kind == "numeric" else None):
            assert text not in hint, f"{question.id}: a hint reveals the key ({text})"


@pytest.mark.parametrize("question", [q for q in QUESTIONS if q.misconceptions], ids=lambda q: q.id)
def test_misconceptions_are_recognised(question):
    for wrong in question.misconceptions:
        if wrong.unit:
            continue
        value = wrong.value(question)
        if value is None:  # it does not apply to these numbers (a variant's, where it would be the key)
            continue
        if question.kind == "numeric" and math.isclose(float(value), float(question.answer_key()), rel_tol=question.rtol):
            pytest.fail(f"{question.id}: misconception {wrong.name} gives the right answer")
        verdict = quiz.judge(question, value)
        assert verdict.correct is False and verdict.misconception == wrong.name, (question.id, wrong.name, verdict)
        assert wrong.feedback in verdict.feedback


def _calls(text: str, function: str) -> set[str]:
    return set(re.findall(rf"\b{function}\(\s*[\"']([^\"']+)[\"']", text))


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_lessons_ask_and_check_exactly_their_questions(lesson):
    text = lesson.read_text(encoding="utf-8")
    bank = {q.id for q in quiz.questions(lesson.stem[:2])}
    checked, asked = _calls(text, "check"), _calls(text, "ask")
    assert checked <= set(IDS), f"{lesson.name} checks unknown questions: {checked - set(IDS)}"
    assert asked <= set(IDS), f"{lesson.name} asks unknown questions: {asked - set(IDS)}"
    assert bank <= checked, f"{lesson.name} never checks: {bank - checked}"
    assert bank <= asked, f"{lesson.name} never asks: {bank - asked}"


def _catalog_literals() -> set[float]:
    values = set()
    for acc in hardware.catalog():
        values |= set(acc.peak_flops.values()) | {acc.bandwidth}
    return values


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_lessons_type_no_hardware_figure_in_code(lesson):
    figures = _catalog_literals()
    code = "\n".join(re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", lesson.read_text(encoding="utf-8"), re.S))
    for literal in re.findall(r"(?<![\w.])\d+(?:\.\d+)?e\d+", code):
        assert float(literal) not in figures, f"{lesson.name} types the catalog figure {literal}: use roofkit.hw(...)"


# what is left of a LaTeX command whose backslash an edit read as a Python escape (\r, \t, \n, \b, \f, \a, \v):
# '\rceil' becomes a line break and 'ceil', '\times' a tab and 'imes'
_EATEN = ("ceil", "floor", "ight", "ho", "angle", "imes", "heta", "ext", "frac", "abla", "eq", "eta", "lpha",
          "ec", "arphi", "pprox", "ot")


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_lessons_math_keeps_its_backslashes(lesson):
    text = lesson.read_text(encoding="utf-8")
    assert not re.search(r"[\x07\x08\x09\x0b\x0c\r]", text), f"{lesson.name} holds a control character"
    prose = re.sub(r"```.*?```", "", text, flags=re.S).replace("$$", "")
    for span in re.findall(r"\$([^$]+)\$", prose):  # inline math that runs over a line break
        for line in span.split("\n")[1:]:
            assert not re.match(rf"(?:{'|'.join(_EATEN)})(?![a-z])", line), f"{lesson.name}: ${span}$"


def test_generated_notebooks_are_fresh():
    report = build.build(ROOT, check=True)
    assert report.ok, f"stale: {report.stale}, without a lesson: {report.orphans}; run `roofkit build`"
