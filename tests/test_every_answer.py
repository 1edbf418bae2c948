"""Every question of the course, answered the way learners answer it.

For each numeric question: its key, rounded to the figures the prompt asks
for, is typed five ways (bare, with the question's unit, with a count word,
in scientific notation, with thousands separators) and given as the Python
number those spell; all ten are right, with the same verdict and message. The
same holds for wrong answers (rounded too far, a misconception's value, a
x1000 slip): text and Python get one verdict and one message. The key is also
accepted in another unit of the same dimension; every misconception's value
and every common slip (x2, x8, x1000, x100, and GB for GiB where bytes are
asked) is rejected, at the figures the prompt asks for too. For symbolic and
choice questions: the key, and every term the lesson teaches for it, is
accepted as text, and every wrong choice is told why. The examples of
docs/answers.md are run as written. Keys come from the bank (computations
through roofkit), never from this file.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import pytest

from roofkit.course import answers, quiz
from roofkit.course.answers import significant_digits

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = [q for q in quiz.questions() if q.kind != "code"]
NUMERIC = [q for q in QUESTIONS if q.kind == "numeric"]

# The slips every numeric answer must not absorb: (name, factor on the key); GB for GiB only where bytes are asked.
SLIPS = [("x2", 2), ("half", 0.5), ("bits for bytes", 8), ("bytes for bits", 1 / 8), ("x1000", 1e3),
         ("/1000", 1e-3), ("x100", 100), ("/100", 0.01)]
BYTE_SLIPS = [("GiB for GB", 2**30 / 1e9), ("GB for GiB", 1e9 / 2**30)]

# Another spelling of each unit the bank uses: (unit text, how many of the question's unit one of it is).
OTHER_UNIT = {
    "FLOP": ("TFLOP", 1e12), "byte": ("GB", 1e9), "byte/s": ("TB/s", 1e12), "FLOP/s": ("TFLOP/s", 1e12),
    "TFLOP/s": ("PFLOP/s", 1e3), "FLOP/byte": ("flop/B", 1), "s": ("ms", 1e-3), "ms": ("µs", 1e-3),
    "µs": ("μs", 1), "day": ("hours", 1 / 24), "percent": ("%", 1), "1/s": ("per second", 1),
    "tokens/s": ("per second", 1), "dimensionless": ("x", 1), "x": ("times", 1), "USD per million tokens": ("USD per billion tokens", 1e-3),
}
# The question's own unit, as a learner writes it after the number.
WRITTEN_UNIT = {"percent": "%", "dimensionless": "x", "1/s": "tokens/s", "tokens/s": "tokens/s"}


def _ids(questions):
    return [q.id for q in questions]


def _slips(question) -> list[tuple[str, float]]:
    byte_question = answers.unit(question.unit or "dimensionless").dims[1] != 0
    return SLIPS + (BYTE_SLIPS if byte_question else [])


def _decimal(value: float, figures: int | None) -> Decimal:
    """``value`` rounded to ``figures`` significant figures (None: as it is, for an exact key)."""
    d = Decimal(repr(float(value)))
    if figures is None or d == 0:
        return d.normalize() if d == d.to_integral_value() else d
    return d.quantize(Decimal(1).scaleb(d.adjusted() - figures + 1), rounding=ROUND_HALF_EVEN)


def _plain(d: Decimal, separators: bool = False) -> str:
    text = f"{d:,f}" if separators else f"{d:f}"
    return text


def _scientific(d: Decimal) -> str:
    digits = len(d.as_tuple().digits)
    return f"{d:.{max(digits - 1, 0)}e}".replace("e+", "e")


def spellings(question, d: Decimal) -> dict[str, str]:
    """The number ``d`` (in the question's unit) typed five ways."""
    unit = question.unit or "dimensionless"
    magnitude = abs(d)
    word, size = next(((w, s) for w, s in (("trillion", 12), ("billion", 9), ("million", 6)) if magnitude >= 10**s),
                      ("thousand", 3))
    if magnitude >= 1000:
        separated = _plain(d, separators=True)
    else:  # a mantissa of a thousand or more, with its exponent: 0.17 as '1,700e-4'
        shift = 3 - d.adjusted()
        separated = f"{_plain(d.scaleb(shift), separators=True)}e-{shift}"
    return {"bare": _plain(d), "with unit": f"{_plain(d)} {WRITTEN_UNIT.get(unit, unit)}",
            "count word": f"{_plain(d.scaleb(-size))} {word}", "scientific": _scientific(d),
            "thousands separators": separated}


def _same(text_verdict, python_verdict) -> bool:
    return (text_verdict.correct, text_verdict.misconception, text_verdict.feedback) == \
        (python_verdict.correct, python_verdict.misconception, python_verdict.feedback)


def test_the_bank_uses_only_units_this_file_knows():
    assert {q.unit or "dimensionless" for q in NUMERIC} <= set(OTHER_UNIT)


@pytest.mark.parametrize("question", NUMERIC, ids=_ids(NUMERIC))
def test_the_key_typed_five_ways_and_given_in_python_gets_one_verdict(question):
    key = float(question.answer_key())
    d = _decimal(key, None if question.exact else question.figures)
    python = float(d)
    typed = spellings(question, d)
    assert len(typed) >= 5
    for how, text in typed.items():
        assert answers.number(text, question.unit or "dimensionless") == pytest.approx(python, rel=1e-12), (how, text)
        by_text, by_python = quiz.judge(question, text), quiz.judge(question, python)
        assert by_text.correct is True, f"{question.id}: the key typed {how} as {text!r} was judged: {by_text.feedback}"
        assert _same(by_text, by_python), (question.id, how, text, by_text.feedback, by_python.feedback)
        assert by_text.feedback == "", (question.id, text, by_text.feedback)  # nothing to say about these spellings
    if question.whole:
        assert quiz.judge(question, int(key)).correct is True


@pytest.mark.parametrize("question", NUMERIC, ids=_ids(NUMERIC))
def test_a_wrong_answer_gets_one_verdict_whether_typed_or_given_in_python(question):
    key = float(question.answer_key())
    wrong = [key * 1e3, key * 1.37]
    if not question.exact and question.figures > 1:
        wrong.append(float(_decimal(key, question.figures - 1)))  # rounded too far
    wrong += [float(m.value(question)) for m in question.misconceptions if isinstance(m.value(question), (int, float))]
    for value in wrong:
        d = _decimal(value, None if question.exact else question.figures + 1)
        by_python = quiz.judge(question, float(d))
        for how, text in spellings(question, d).items():
            by_text = quiz.judge(question, text)
            assert _same(by_text, by_python), (question.id, how, text, by_text.feedback, by_python.feedback)


@pytest.mark.parametrize("question", NUMERIC, ids=_ids(NUMERIC))
def test_numeric_key_is_accepted_in_another_unit(question):
    key = float(question.answer_key())
    unit = question.unit or "dimensionless"
    other, size = OTHER_UNIT[unit]
    for answer in (key, repr(key), f"{key:.10g}", f"{key / size:.10g} {other}"):
        verdict = quiz.judge(question, answer)
        assert verdict.correct is True, f"{question.id}: the key typed as {answer!r} was judged: {verdict.feedback}"
    if question.whole:
        for answer in (int(key), f"{int(key)}", f"{int(key):,}", f"{key:.0f}.0"):
            assert quiz.judge(question, answer).correct is True, (question.id, answer)


def _rounded(value: float, figures: int) -> str:
    return f"{value:.{figures - 1}e}"


@pytest.mark.parametrize("question", NUMERIC, ids=_ids(NUMERIC))
def test_numeric_slips_and_misconceptions_are_rejected(question):
    key = float(question.answer_key())
    wrong = [(name, key * factor) for name, factor in _slips(question)]
    if question.whole:
        wrong += [("one less", key - 1), ("one more", key + 1)]
    for m in question.misconceptions:
        value = m.value(question)
        if value is not None:
            assert not quiz.close_enough(float(value), key, max(question.rtol, 1e-9)), (
                f"{question.id}: misconception {m.name!r} has the key's own value")
            wrong.append((m.name, float(value)))
    for name, value in wrong:
        answers_typed = [value, f"{value:.12g}"]
        if not question.exact:  # and at the figures the prompt asks for
            answers_typed.append(_rounded(value, question.figures))
        for answer in answers_typed:
            verdict = quiz.judge(question, answer)
            assert verdict.correct is False, f"{question.id}: the slip {name!r} ({answer!r}) was accepted"
            assert "by about 1x" not in verdict.feedback and "by about 1.0" not in verdict.feedback


def _asked(question, most: int = 4):
    """The question with the lesson's numbers, and a few of its class variants (evenly spread)."""
    from roofkit.grading import variants

    yield question
    combos = variants.combinations(question)
    for index in sorted({round(i * (len(combos) - 1) / max(most - 1, 1)) for i in range(most)} if combos else ()):
        yield question.with_params(**combos[index])


@pytest.mark.parametrize("question", [q for q in NUMERIC if not q.exact], ids=_ids([q for q in NUMERIC if not q.exact]))
def test_the_figures_asked_for_tell_the_key_from_every_slip_in_every_variant(question):
    """At the figures the prompt asks for, no misconception or slip rounds to a right answer (a variant's too)."""
    for asked in _asked(question):
        key = float(asked.answer_key())
        wrong = [(m.name, m.value(asked)) for m in asked.misconceptions]
        wrong = [(n, float(v)) for n, v in wrong if isinstance(v, (int, float)) and not isinstance(v, bool)]
        wrong += [(name, key * factor) for name, factor in _slips(asked)]
        for name, value in wrong:
            for figures in (asked.figures, asked.figures + 1):
                answer = _rounded(value, figures)
                assert quiz.judge(asked, answer).correct is False, (asked.id, dict(asked.params), name, answer)


@pytest.mark.parametrize("question", NUMERIC, ids=_ids(NUMERIC))
def test_each_misconception_is_named_when_its_value_is_given(question):
    key = float(question.answer_key())
    for m in question.misconceptions:
        value = m.value(question)
        if value is None:
            continue
        same = [other.name for other in question.misconceptions if other.value(question) is not None
                and quiz.close_enough(float(other.value(question)), float(value), max(question.rtol, 1e-9))]
        typed = [f"{float(value):.12g}"] + ([] if question.exact else [_rounded(float(value), question.figures)])
        for answer in typed:
            verdict = quiz.judge(question, answer)
            assert verdict.misconception in same, f"{question.id}: {m.name} typed {answer!r} gave {verdict.feedback!r}"
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
    if unit in ("byte/s", "FLOP/s", "TFLOP/s", "1/s", "tokens/s"):
        amount = {"byte/s": "TB", "FLOP/s": "TFLOP", "TFLOP/s": "PFLOP", "1/s": "tokens", "tokens/s": "tokens"}[unit]
        verdict = quiz.judge(question, f"{key:.6g} {amount}")
        if unit not in ("1/s", "tokens/s"):
            assert "'/s' is missing" in verdict.feedback


@pytest.mark.parametrize("question", [q for q in NUMERIC if not q.exact], ids=_ids([q for q in NUMERIC if not q.exact]))
def test_the_figures_the_prompt_asks_for_are_enough_and_fewer_are_told_to_round_less(question):
    key = float(question.answer_key())
    assert quiz.judge(question, _rounded(key, question.figures)).correct is True
    for figures in range(1, question.figures):
        answer = _rounded(key, figures)
        verdict = quiz.judge(question, answer)
        if verdict.correct is False and verdict.misconception is None:
            assert "Rounded too much" in verdict.feedback and f"give {question.figures}" in verdict.feedback, (
                question.id, answer, verdict.feedback)
            assert significant_digits(answer) <= figures  # "1.0e-03" is one figure: what it is, not how written


@pytest.mark.parametrize("question", NUMERIC, ids=_ids(NUMERIC))
def test_every_numeric_prompt_says_its_precision(question):
    text = question.text()
    assert text.endswith(question.precision()) and question.precision()
    assert ("whole number" in question.precision()) == question.whole
    assert question.prompt.count("significant figure") == 0, "the precision is said once, by roofkit.quiz"
    if question.whole:
        assert question.rtol == 0


def test_the_bank_has_whole_number_questions_and_they_are_exact():
    whole = [q for q in NUMERIC if q.whole]
    assert {"l04.ex-crossover", "l08.gpus-for-deadline", "l11.decode-batch", "l05.fp16-max"} <= {q.id for q in whole}
    for q in whole:
        assert math.isclose(float(q.answer_key()) % 1, 0)
    assert not quiz.get("l03.more-flops").whole  # a factor of 1 happens to be whole; exactness is not the point


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
def test_choice_key_is_accepted_in_any_case_and_by_the_lessons_terms(question):
    key = str(question.answer_key())
    for answer in (key, key.upper(), f"  {key.capitalize()} ", f"the {key}"):
        assert quiz.judge(question, answer).correct is True, (question.id, answer)
    for choice, terms in question.synonyms.items():
        for term in terms:
            verdict = quiz.judge(question, term)
            assert verdict.answer == choice, (question.id, term, verdict.feedback)


@pytest.mark.parametrize("question", CHOICE, ids=_ids(CHOICE))
def test_every_wrong_choice_is_told_why(question):
    key = str(question.answer_key())
    for other in question.choices:
        if other.lower() != key.lower():
            verdict = quiz.judge(question, other)
            assert verdict.correct is False and verdict.misconception, (question.id, other, verdict.feedback)


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


# --- docs/answers.md ---------------------------------------------------------------------------

_ROW = re.compile(r"^\| (l\d\d\.[\w.-]+) \| `(.*)` \| (right|wrong|unreadable) \| (.*?) *\|$")


def _documented():
    rows = [m.groups() for line in (ROOT / "docs" / "answers.md").read_text(encoding="utf-8").splitlines()
            if (m := _ROW.match(line))]
    table_rows = [line for line in (ROOT / "docs" / "answers.md").read_text(encoding="utf-8").splitlines()
                  if line.startswith("| l")]
    assert len(rows) == len(table_rows), "a row of docs/answers.md is not in the examples' form"
    return rows


DOCUMENTED = _documented()


@pytest.mark.parametrize("question_id, answer, verdict, text", DOCUMENTED,
                         ids=[f"{q}:{a}" for q, a, _, _ in DOCUMENTED])
def test_the_documented_examples(question_id, answer, verdict, text):
    judged = quiz.judge(quiz.get(question_id), answer)
    got = "unreadable" if judged.unreadable else "right" if judged.correct else "wrong"
    assert got == verdict, (question_id, answer, judged.feedback)
    if text:
        assert text in judged.feedback, (question_id, answer, judged.feedback)
    elif verdict == "right":
        assert judged.feedback == ""
    else:
        pytest.fail("a wrong or unreadable example says what its feedback includes")


def test_the_documentation_shows_every_kind_of_spelling():
    answers_shown = {a for _, a, _, _ in DOCUMENTED}
    for spelling in ("1.12 trillion", "240G", "8K", "285 TF/s", "285 tflops", "285 teraflops", "16.7 milliseconds",
                     "13,200 tok/s", "13200 Hz", "285 micro-batches", "6,239 H100s", "9 steps", "$3.89M",
                     "$3,888,889", "1.2e11 MACs", "120 GMAC", "0.073 years", "> LLC", "75.4%", "6.55e4", "65500",
                     "6.87e14 FLOPs", "2.4e11 FLOPS", "update swamping", "2n/3b", "201", "0.17"):
        assert spelling in answers_shown, spelling
