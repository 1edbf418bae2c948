"""Class variants of lessons 07-12: every combination a student may draw gives a valid question.

For each question with ``variants``, every combination (or a seeded sample of 50
when there are more) must format its prompt, compute a key (finite, for a
numeric question) that the judge accepts, keep each misconception's wrong value
wrong and named, keep a choice key among the choices, and, for a numeric
question, move the key away from the lesson's own.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest

from roofkit.course import quiz

LESSONS = ("07", "08", "09", "10", "11", "12")
SAMPLE = 50


def _with_variants():
    return [q for lesson in LESSONS for q in quiz.questions(lesson) if q.variants]


def _combinations(question):
    names = sorted(question.variants)
    combos = [dict(zip(names, values)) for values in itertools.product(*(question.variants[n] for n in names))]
    combos = [c for c in combos if any(question.params[n] != v for n, v in c.items())]  # not the lesson's own
    if len(combos) > SAMPLE:
        combos = random.Random(question.id).sample(combos, SAMPLE)
    return combos


def test_lessons_have_variants():
    ids = {q.id for q in _with_variants()}
    for lesson in LESSONS:
        assert any(i.startswith(f"l{lesson}.") for i in ids), f"lesson {lesson} has no question with variants"


@pytest.mark.parametrize("question", _with_variants(), ids=lambda q: q.id)
def test_every_variant_is_a_valid_question(question):
    assert set(question.variants) <= set(question.params), question.id
    default_key = question.answer_key()
    combos = _combinations(question)
    assert combos, f"{question.id}: no combination other than the lesson's own numbers"
    for params in combos:
        asked = question.with_params(**params)
        where = f"{question.id} {params}"
        text = asked.text()
        assert text and "{" not in text, where
        key = asked.answer_key()
        if question.kind == "numeric":
            assert math.isfinite(float(key)), where
            assert not math.isclose(float(key), float(default_key), rel_tol=max(question.rtol, 1e-9)), \
                f"{where}: the key {key} does not move from the lesson's {default_key}"
        if question.kind == "choice":
            assert str(key) in question.choices, where
        verdict = quiz.judge(asked, key)
        assert verdict.correct is True, f"{where}: {verdict}"
        for wrong in question.misconceptions:
            if wrong.unit:
                continue
            value = wrong.value(asked)
            if value is None:  # this misconception does not apply to these numbers
                continue
            verdict = quiz.judge(asked, value)
            assert verdict.correct is False, f"{where}: misconception {wrong.name} gives the key {key}"
            assert verdict.misconception == wrong.name, \
                f"{where}: {wrong.name}'s value {value} is judged as {verdict.misconception}"


@pytest.mark.parametrize("question", [q for q in _with_variants() if q.kind == "choice"], ids=lambda q: q.id)
def test_choice_variants_move_the_answer(question):
    keys = {str(question.with_params(**c).answer_key()) for c in _combinations(question)}
    assert keys - {str(question.answer_key())}, f"{question.id}: no variant changes the answer"
