"""The quiz engine: four kinds of question, misconception feedback, hints, records, and no leaked keys."""

import math

import pytest
import sympy

from roofkit import formulas, quiz
from roofkit.errors import InvalidValue, UnknownName
from roofkit.quiz import Misconception, Question

GEMM = Question(
    id="test.gemm-intensity", lesson="99", kind="numeric",
    prompt="Intensity of a {n}^3 GEMM in {dtype}?", params={"n": 4096, "dtype": "bf16"},
    key=lambda n, dtype: formulas.gemm(n, n, n, dtype).intensity, unit="FLOP/byte", rtol=0.01,
    hints=("FLOPs over bytes.", "2n^3 over 3n^2 b."),
    misconceptions=(
        Misconception("forgot-fma-2", "An FMA is 2 FLOPs.", scale=0.5),
        Misconception("bits-not-bytes", "Bytes, not bits.", scale=1 / 8),
        Misconception("flop-rate", "A rate is not an intensity.", unit="FLOP/s"),
    ),
)
BOUND = Question(id="test.bound", lesson="99", kind="choice", prompt="GEMV: memory or compute?", params={},
                 key=lambda: "memory", choices=("memory", "compute"),
                 misconceptions=(Misconception("more-flops", "More FLOP/s cannot help a memory-bound kernel.",
                                               answer=lambda: "compute"),))
SQUARE = Question(id="test.square", lesson="99", kind="symbolic", prompt="Intensity of a square GEMM in n and b?",
                  key=lambda: formulas.gemm(*sympy.symbols("n n n b", positive=True)).intensity, symbols=("n", "b"),
                  misconceptions=(Misconception("no-output", "The output C is written too.",
                                                answer=lambda: sympy.Symbol("n", positive=True) / sympy.Symbol("b", positive=True)),))
@pytest.fixture(autouse=True)
def forget_test_questions():
    """Questions registered here must not leak into the course's bank checks."""
    yield
    for qid in [q for q in quiz._BANK if q.startswith("test.")]:
        del quiz._BANK[qid]


CODE = Question(id="test.code", lesson="99", kind="code", prompt="Write intensity(flops, nbytes).",
                key=lambda flops, nbytes: flops / nbytes, cases=((10, 5), (1, 4)), hidden_cases=((3, 7),))


def test_numeric_right_with_and_without_units():
    assert quiz.judge(GEMM, 4096 / 3).correct
    assert quiz.judge(GEMM, "1365 FLOP/byte").correct
    assert quiz.judge(GEMM, "1365").correct
    assert quiz.judge(GEMM, 1366).correct  # within 1%


def test_numeric_misconceptions_are_named():
    half = quiz.judge(GEMM, 4096 / 6)
    assert half.correct is False and half.misconception == "forgot-fma-2" and "FMA" in half.feedback
    assert quiz.judge(GEMM, 4096 / 24).misconception == "bits-not-bytes"
    rate = quiz.judge(GEMM, "1365 TFLOPS")
    assert rate.correct is False and rate.misconception == "flop-rate" and "cannot be converted" in rate.feedback


@pytest.mark.parametrize("wrong", [1.5 * 4096 / 3, 1, 1e9, "12 FLOP/byte"])
def test_wrong_answers_never_reveal_the_key(wrong):
    verdict = quiz.judge(GEMM, wrong)
    assert verdict.correct is False
    for shown in ("1365", "1,365", "1.365", "1366", "4096/3"):
        assert shown not in verdict.feedback


def test_not_answered_yet():
    for nothing in (None, ..., "", "  "):
        verdict = quiz.judge(GEMM, nothing)
        assert verdict.correct is None and quiz.NOT_ANSWERED in str(verdict)


def test_unreadable_answer_is_a_verdict_not_a_crash():
    verdict = quiz.judge(GEMM, "lots")
    assert verdict.correct is False and "cannot read 'lots'" in verdict.feedback


def test_choice():
    assert quiz.judge(BOUND, "Memory").correct
    assert quiz.judge(BOUND, "memory-bound").correct
    wrong = quiz.judge(BOUND, "compute")
    assert wrong.misconception == "more-flops"
    assert "not one of the choices: memory, compute" in quiz.judge(BOUND, "both").feedback


def test_symbolic_equivalence():
    assert quiz.judge(SQUARE, "2*n/(3*b)").correct
    assert quiz.judge(SQUARE, "(n + n)/(b*3)").correct
    n, b = sympy.symbols("n b")
    assert quiz.judge(SQUARE, 2 * n / (3 * b)).correct  # symbols without assumptions match by name
    assert quiz.judge(SQUARE, "n/b").misconception == "no-output"
    assert "'m' is not one of the question's symbols (n, b)" in quiz.judge(SQUARE, "2*m/(3*b)").feedback


def test_code_questions_run_cases():
    assert quiz.judge(CODE, lambda flops, nbytes: flops / nbytes).correct
    wrong = quiz.judge(CODE, lambda flops, nbytes: nbytes / flops)
    assert wrong.correct is False and "2 of 2 cases wrong" in wrong.feedback
    crash = quiz.judge(CODE, lambda flops, nbytes: 1 / 0)
    assert "ZeroDivisionError" in crash.feedback
    assert "expects a function" in quiz.judge(CODE, 3).feedback


def test_variants_change_the_key():
    other = GEMM.with_params(n=1024)
    assert quiz.judge(other, 1024 / 3).correct and not quiz.judge(other, 4096 / 3).correct
    assert "1024^3" in other.text()
    with pytest.raises(InvalidValue, match=r"has no parameter\(s\) \['m'\]"):
        GEMM.with_params(m=3)


def test_hints_one_at_a_time():
    quiz.register(GEMM)
    quiz._hints_shown.pop(GEMM.id, None)
    first, second, third = (quiz.hint(GEMM.id) for _ in range(3))
    assert "hint 1/2: FLOPs over bytes." in first
    assert "hint 2/2" in second and "last hint" in second
    assert third == second


def test_record_for_the_grader(capsys):
    quiz.register(GEMM)
    verdict = quiz.check(GEMM.id, 1365)
    record = verdict.record(GEMM.params)
    assert record["id"] == GEMM.id and record["correct"] is True and record["answer"] == 1365
    assert record["params"] == quiz.params_digest(GEMM.params) != quiz.params_digest({"n": 1024, "dtype": "bf16"})
    assert "✓ correct" in capsys.readouterr().out


def test_unknown_question():
    with pytest.raises(UnknownName, match=r"Unknown question 'nope'"):
        quiz.get("nope")


def test_bad_question_definitions():
    with pytest.raises(InvalidValue, match="unknown kind 'essay'"):
        Question(id="x", lesson="99", kind="essay", prompt="", key=lambda: 1)
    with pytest.raises(InvalidValue, match="needs choices"):
        Question(id="x", lesson="99", kind="choice", prompt="", key=lambda: 1)
    assert math.isfinite(GEMM.answer_key())
