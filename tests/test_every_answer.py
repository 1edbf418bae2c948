"""Every question of the course, answered the way learners answer it.

For each numeric question: its key is accepted as a Python number and as the
text a learner types (bare, with the question's unit, in another unit of the
same dimension, rounded to as many figures as the feedback asks for); every
misconception's value and every common slip (x2, x8, x1000, x100, GB for GiB,
a neighbouring whole number where one exact whole number is asked) is
rejected. For symbolic and choice questions: the key is accepted as text and
every misconception is rejected. Keys come from the bank (computations through
roofkit), never from this file.
"""

from __future__ import annotations

import math

import pytest

from roofkit import quiz
from roofkit.answers import significant_digits

QUESTIONS = [q for q in quiz.questions() if q.kind != "code"]
NUMERIC = [q for q in QUESTIONS if q.kind == "numeric"]

# The slips every numeric answer must not absorb: (name, factor on the key).
SLIPS = [("x2", 2), ("half", 0.5), ("bits for bytes", 8), ("bytes for bits", 1 / 8), ("x1000", 1e3),
         ("/1000", 1e-3), ("x100", 100), ("/100", 0.01), ("GiB for GB", 2**30 / 1e9), ("GB for GiB", 1e9 / 2**30)]

# Another spelling of each unit the bank uses: (unit text, how many of the question's unit one of it is).
OTHER_UNIT = {
    "FLOP": ("TFLOP", 1e12), "byte": ("GB", 1e9), "byte/s": ("TB/s", 1e12), "FLOP/s": ("TFLOP/s", 1e12),
    "TFLOP/s": ("PFLOP/s", 1e3), "FLOP/byte": ("flop/B", 1), "s": ("ms", 1e-3), "ms": ("µs", 1e-3),
    "µs": ("μs", 1), "day": ("hours", 1 / 24), "percent": ("%", 1), "1/s": ("per second", 1),
    "dimensionless": ("x", 1),
}


def _figures(rtol: float) -> int:
    return quiz._figures_needed(rtol)


def _rounded(value: float, figures: int) -> str:
    return f"{value:.{figures - 1}e}"


def _ids(questions):
    return [q.id for q in questions]


def test_the_bank_uses_only_units_this_file_knows():
    assert {q.unit or "dimensionless" for q in NUMERIC} <= set(OTHER_UNIT)


@pytest.mark.parametrize("question", NUMERIC, ids=_ids(NUMERIC))
def test_numeric_key_is_accepted_however_it_is_typed(question):
    key = float(question.answer_key())
    unit = question.unit or "dimensionless"
    other, size = OTHER_UNIT[unit]
    typed = [key, repr(key), f"{key:.10g}", f"{key / size:.10g} {other}"]
    if unit not in ("dimensionless",):
        typed.append(f"{key:.10g} {'%' if unit == 'percent' else unit}")
    if question.whole:
        typed += [int(key), f"{int(key)}", f"{int(key):,}", f"{key:.0f}.0"]
    else:
        typed.append(_rounded(key, _figures(question.rtol)))
    for answer in typed:
        verdict = quiz.judge(question, answer)
        assert verdict.correct is True, f"{question.id}: the key typed as {answer!r} was judged: {verdict.feedback}"


@pytest.mark.parametrize("question", NUMERIC, ids=_ids(NUMERIC))
def test_numeric_slips_and_misconceptions_are_rejected(question):
    key = float(question.answer_key())
    wrong = [(name, key * factor) for name, factor in SLIPS]
    if question.whole:
        wrong += [("one less", key - 1), ("one more", key + 1)]
    for m in question.misconceptions:
        value = m.value(question)
        if value is not None:
            assert not quiz.close_enough(float(value), key, max(question.rtol, 1e-9)), (
                f"{question.id}: misconception {m.name!r} has the key's own value")
            wrong.append((m.name, float(value)))
    for name, value in wrong:
        for answer in (value, f"{value:.12g}"):
            verdict = quiz.judge(question, answer)
            assert verdict.correct is False, f"{question.id}: the slip {name!r} ({answer!r}) was accepted"
            assert "by about 1x" not in verdict.feedback and "by about 1.0" not in verdict.feedback


@pytest.mark.parametrize("question", NUMERIC, ids=_ids(NUMERIC))
def test_each_misconception_is_named_when_its_value_is_given(question):
    key = float(question.answer_key())
    for m in question.misconceptions:
        value = m.value(question)
        if value is None:
            continue
        verdict = quiz.judge(question, f"{float(value):.12g}")
        same = [other.name for other in question.misconceptions if other.value(question) is not None
                and quiz.close_enough(float(other.value(question)), float(value), max(question.rtol, 1e-9))]
        assert verdict.misconception in same, f"{question.id}: {m.name} gave {verdict.misconception!r}"
        if (significant_digits(f"{key:.4g}") or 0) >= 3:  # the key is never shown for a wrong answer
            assert f"{key:.4g}" not in verdict.feedback


@pytest.mark.parametrize("question", NUMERIC, ids=_ids(NUMERIC))
def test_a_unit_of_the_wrong_dimension_is_named(question):
    unit = question.unit or "dimensionless"
    key = float(question.answer_key())
    strange = "FLOP/byte" if unit != "FLOP/byte" else "byte/s"
    verdict = quiz.judge(question, f"{key:.6g} {strange}")
    assert verdict.correct is False and verdict.unreadable is False
    assert verdict.misconception is not None  # 'unit' or the question's own unit misconception
    if unit in ("byte/s", "FLOP/s", "TFLOP/s", "1/s"):
        amount = {"byte/s": "TB", "FLOP/s": "TFLOP", "TFLOP/s": "PFLOP", "1/s": "tokens"}[unit]
        verdict = quiz.judge(question, f"{key:.6g} {amount}")
        if unit != "1/s":
            assert "'/s' is missing" in verdict.feedback


@pytest.mark.parametrize("question", [q for q in NUMERIC if not q.whole], ids=_ids([q for q in NUMERIC if not q.whole]))
def test_too_few_figures_are_told_to_round_less(question):
    key = float(question.answer_key())
    figures = 1
    while figures < _figures(question.rtol):
        answer = _rounded(key, figures)
        verdict = quiz.judge(question, answer)
        if verdict.correct is False and verdict.misconception is None:
            assert "rounded too much" in verdict.feedback, (question.id, answer, verdict.feedback)
            assert significant_digits(answer) == figures
        figures += 1


SYMBOLIC = [q for q in QUESTIONS if q.kind == "symbolic"]


@pytest.mark.parametrize("question", SYMBOLIC, ids=_ids(SYMBOLIC))
def test_symbolic_key_is_accepted_as_text_and_misconceptions_rejected(question):
    key = question.answer_key()
    for answer in (str(key), str(key).replace("*", " * "), key):
        assert quiz.judge(question, answer).correct is True, (question.id, answer)
    for m in question.misconceptions:
        value = m.value(question)
        if value is not None:
            verdict = quiz.judge(question, str(value))
            assert verdict.correct is False and verdict.misconception == m.name, (question.id, m.name)


CHOICE = [q for q in QUESTIONS if q.kind == "choice"]


@pytest.mark.parametrize("question", CHOICE, ids=_ids(CHOICE))
def test_choice_key_is_accepted_in_any_case_and_others_rejected(question):
    key = str(question.answer_key())
    for answer in (key, key.upper(), f"  {key.capitalize()} "):
        assert quiz.judge(question, answer).correct is True, (question.id, answer)
    for other in question.choices:
        if other.lower() != key.lower():
            assert quiz.judge(question, other).correct is False


def test_the_bank_has_whole_number_questions_and_they_are_exact():
    whole = [q for q in NUMERIC if q.whole]
    assert {"l04.ex-crossover", "l08.gpus-30-days", "l11.decode-batch", "l05.fp16-max"} <= {q.id for q in whole}
    for q in whole:
        assert math.isclose(float(q.answer_key()) % 1, 0)


UNREADABLE = ["??", "1 foo", "FLOP/byte", "n +", "__import__('os')", "1,4", "(", "10**10**10"]


@pytest.mark.parametrize("question", QUESTIONS, ids=_ids(QUESTIONS))
def test_an_unreadable_answer_says_what_is_expected_and_never_shows_the_key(question):
    key = question.answer_key()
    shown = [str(key)] if question.kind == "symbolic" else []
    if question.kind == "numeric" and (significant_digits(f"{float(key):.4g}") or 0) >= 3:
        shown += [t for t in (f"{float(key):.4g}", f"{float(key):.3g}") if (significant_digits(t) or 0) >= 3]
    for answer in UNREADABLE:
        verdict = quiz.judge(question, answer)
        if verdict.correct is True:  # a choice or formula that happens to read
            continue
        assert verdict.feedback, (question.id, answer)
        for text in shown:
            assert text not in verdict.feedback, (question.id, answer, verdict.feedback)
