"""Class variants of lessons 01-06: every combination of the listed values gives a valid question.

For each question of these lessons with ``variants``, every combination (or a seeded sample of 50
when there are more) must format its prompt, compute a finite key that judges correct, keep each
misconception's wrong value distinct from the key (and named as that misconception), keep a
choice key among the choices, and, for a numeric key, move it away from the lesson's own answer.
"""

import itertools
import math
import random
import re

import pytest

from roofkit.course import quiz
from roofkit.grading import variants

LESSONS = ("01", "02", "03", "04", "05", "06")
VARIED = [q for lesson in LESSONS for q in quiz.questions(lesson) if q.variants]
SAMPLE = 50


def _key_texts(key) -> list[str]:
    """The ways a numeric key could be written in a message (as tests/test_course.py checks)."""
    if not isinstance(key, (int, float)) or key == 0:
        return []
    texts = {f"{key:.3g}", f"{key:.4g}", f"{key:,.0f}", f"{key:.2e}", f"{key:.3e}"}
    return [t for t in texts if len(t.strip("0.,e+-")) >= 2]


def _shows(text: str, number: str) -> bool:
    """``number`` written on its own in ``text`` (not inside a word such as bf16, or a longer number)."""
    return re.search(rf"(?<![\w.]){re.escape(number)}(?![\w]|\.\d)", text) is not None


def _combinations(question):
    names = sorted(question.variants)
    every = [dict(zip(names, values)) for values in itertools.product(*(question.variants[n] for n in names))]
    every = [c for c in every if not all(question.params[n] == v for n, v in c.items())]
    if len(every) > SAMPLE:
        every = random.Random(question.id).sample(every, SAMPLE)
    return every


def test_these_lessons_have_variants():
    assert len(VARIED) >= 20, [q.id for q in VARIED]
    for lesson in LESSONS:
        assert any(q.lesson == lesson for q in VARIED), f"lesson {lesson} has no question with variants"


@pytest.mark.parametrize("question", VARIED, ids=lambda q: q.id)
def test_variant_values_are_modest_and_known_parameters(question):
    assert set(question.variants) <= set(question.params), question.id
    for name, values in question.variants.items():
        assert 2 <= len(values) <= 6, (question.id, name, values)
        assert len(set(values)) == len(values), (question.id, name, values)


@pytest.mark.parametrize("question", VARIED, ids=lambda q: q.id)
def test_every_combination_is_a_valid_question(question):
    default_key = question.answer_key()
    combos = _combinations(question)
    assert combos, question.id
    for params in combos:
        asked = question.with_params(**params)
        where = f"{question.id} {params}"
        text = asked.text()
        assert text.strip() and "{" not in text, where
        key = asked.answer_key()
        if question.kind == "numeric":
            assert math.isfinite(float(key)), where
            assert not math.isclose(float(key), float(default_key), rel_tol=max(question.rtol, 1e-9)), \
                f"{where}: the key {key} is the lesson's own answer {default_key}"
            wrong = quiz.judge(asked, float(key) * 1.37 + 1)
            assert wrong.correct is False, where
            for shown in _key_texts(float(key)):
                assert not _shows(wrong.feedback, shown), f"{where}: feedback reveals the key ({shown})"
                assert not any(_shows(hint, shown) for hint in asked.hints), \
                    f"{where}: a hint reveals the key ({shown})"
        if question.kind == "choice":
            assert key in question.choices, where
        assert quiz.judge(asked, key).correct is True, where
        for wrong in asked.misconceptions:
            if wrong.unit:
                continue
            value = wrong.value(asked)
            if value is None:  # it does not apply to these numbers (there it would be the key)
                continue
            if question.kind == "numeric":
                assert not math.isclose(float(value), float(key), rel_tol=question.rtol), \
                    f"{where}: misconception {wrong.name} gives the key {key}"
            verdict = quiz.judge(asked, value)
            assert verdict.correct is False and verdict.misconception == wrong.name, (where, wrong.name, verdict)
            assert wrong.feedback in verdict.feedback, (where, wrong.name)


@pytest.mark.parametrize("question", [q for q in VARIED if q.kind == "choice"], ids=lambda q: q.id)
def test_choice_variants_sometimes_change_the_answer(question):
    keys = {question.with_params(**c).answer_key() for c in _combinations(question)}
    assert len(keys | {question.answer_key()}) >= 2, f"{question.id}: every variant has the same answer"


@pytest.mark.parametrize("question", VARIED, ids=lambda q: q.id)
def test_assign_keeps_several_variants(question):
    """`roofkit assign` keeps the combinations whose keys differ from the lesson's and from each other."""
    kept = variants.combinations(question)
    assert len(kept) >= 2, (question.id, kept)
    assert all(not all(question.params[n] == v for n, v in c.items()) for c in kept), question.id
