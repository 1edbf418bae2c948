"""Lesson 02 replays published arithmetic intensities against its question keys, and corrects a common claim.

Oracles: counts by hand; jax-ml/scaling-book "All About Rooflines" (a matmul's intensity
BDF / (BD + DF + BF) in bf16, about B when B is small; a dot product's 1/2); the
widely repeated batch-1 GEMV figure 4096 / (1 + 4096 + 4096) ~ 0.5, which is wrong.
"""

import math

import pytest
import sympy

from roofkit import formulas
from roofkit.catalogs import hardware
from roofkit.course import quiz

Q = quiz.get


def test_fp16_vector_add_is_one_sixth():
    assert math.isclose(Q("l02.vector-add").answer_key(), 1 / 6)


def test_gelu_is_two_and_independent_of_n():
    assert math.isclose(Q("l02.gelu").answer_key(), 2.0)
    for n in (1, 1000, 2**30):
        assert math.isclose(Q("l02.gelu").with_params(n=n).answer_key(), 2.0)


def test_square_matmul_is_n_over_3():
    n, b = sympy.symbols("n b", positive=True)
    assert sympy.simplify(Q("l02.square-gemm").answer_key() - 2 * n / (3 * b)) == 0
    assert sympy.simplify(formulas.gemm(n, n, n, "fp16").intensity - n / 3) == 0


def test_gemm_4096_is_about_1365():
    assert math.isclose(Q("l02.gemm-4096").answer_key(), 4096 / 3)
    assert 1365 < Q("l02.gemm-4096").answer_key() < 1366
    assert Q("l02.gemm-4096").answer_key() > hardware.get("h100").ridge("bf16")  # compute-bound


def test_gemv_is_about_1_and_the_common_half_is_wrong():
    key = Q("l02.gemv-decode").answer_key()
    assert math.isclose(key, 1, rel_tol=1e-3)
    assert math.isclose(key, 4096 / (1 + 4096 + 1))  # the correct cancellation
    claim = 4096 / (1 + 4096 + 4096)  # the common claim, ~0.5
    assert not math.isclose(claim, key, rel_tol=0.1)
    verdict = quiz.judge(Q("l02.gemv-decode"), 0.5)
    assert verdict.correct is False and verdict.misconception == "the-0.5"
    assert key < hardware.get("h100").ridge("bf16")  # memory-bound


def test_mlp_gemm_is_about_3600():
    key = Q("l02.mlp-gemm").answer_key()
    assert 3500 < key < 3700
    assert math.isclose(formulas.gemm(8192, 32768, 8192).flops, 4.4e12, rel_tol=0.01)
    assert math.isclose(formulas.gemm(8192, 32768, 8192, "bf16").bytes, 1.2e9, rel_tol=0.01)


def test_scaling_books_matmul_intensity_and_its_small_batch_limit():
    # scaling-book: bf16[B, D] @ bf16[D, F] has intensity BDF / (BD + DF + BF), about B for B << D, F
    B, D, F = 64, 8192, 28672
    assert formulas.gemm(B, F, D, "bf16").intensity == pytest.approx(B * D * F / (B * D + D * F + B * F))
    assert formulas.gemm(B, F, D, "bf16").intensity == pytest.approx(B, rel=0.01)


def test_the_smallest_dimension_sets_the_intensity():
    # 1/I = (b/2)(1/M + 1/N + 1/K), the identity the worked problem displays
    M, N, K, b = sympy.symbols("M N K b", positive=True)
    inverse = sympy.expand(1 / formulas.gemm(M, N, K, b).intensity)
    assert sympy.simplify(inverse - b / 2 * (1 / M + 1 / N + 1 / K)) == 0
    assert formulas.gemm(1, 10**6, 10**6, 2).intensity == pytest.approx(1, rel=1e-5)  # M = 1 decides


def test_worked_problem_is_not_the_question():
    import roofkit

    llama = roofkit.model("llama-3-8b")
    worked = formulas.gemm(8192, llama.d_ff, llama.d_model, "bf16").intensity
    question = Q("l02.mlp-gemm")
    assert not quiz.judge(question, worked).correct
    for m in question.variants["m"]:
        for n in question.variants["n"]:
            assert not quiz.judge(question.with_params(m=m, n=n), worked).correct


def test_batch_limit_is_2M_over_b():
    M, b = sympy.symbols("M b", positive=True)
    assert sympy.simplify(Q("l02.ex-batch-limit").answer_key() - 2 * M / b) == 0
    assert quiz.judge(Q("l02.ex-batch-limit"), "2*M/b").correct
    assert quiz.judge(Q("l02.ex-batch-limit"), "M").misconception == "slogan"


def test_symbolic_answers_as_strings():
    assert quiz.judge(Q("l02.square-gemm"), "2*n/(3*b)").correct
    assert quiz.judge(Q("l02.square-gemm"), "(2/3)*n/b").correct
    assert quiz.judge(Q("l02.square-gemm"), "n/(3*b)").misconception == "mnk"
    assert quiz.judge(Q("l02.square-gemm"), "n/b").misconception == "forgot-output-write"
    assert quiz.judge(Q("l02.square-gemm"), "2*n/3").misconception == "elements-not-bytes"


@pytest.mark.parametrize("question, answer, name", [
    ("l02.vector-add", 1 / 4, "forgot-output-write"),
    ("l02.vector-add", 1 / 3, "elements-not-bytes"),
    ("l02.vector-add", 1 / 48, "bits-not-bytes"),
    ("l02.vector-add", 6, "inverted"),
    ("l02.gelu", 4, "forgot-write-or-elements"),
    ("l02.gelu", 0.25, "bits-not-bytes"),
    ("l02.gelu", 0.5, "inverted"),
    ("l02.gemm-4096", 4096 / 6, "mnk"),
    ("l02.gemm-4096", 2048, "forgot-output-write"),
    ("l02.gemm-4096", 2 * 4096 / 3, "elements-not-bytes"),
    ("l02.gemm-4096", 4096 / 24, "bits-not-bytes"),
    ("l02.gemv-decode", 2, "elements-not-bytes"),
    ("l02.gemv-decode", 0.125, "bits-not-bytes"),
    ("l02.mlp-gemm", 8192 / 3, "square-shortcut"),
])
def test_misconceptions_by_hand(question, answer, name):
    verdict = quiz.judge(Q(question), answer)
    assert verdict.correct is False and verdict.misconception == name, verdict


def test_intensity_code_question():
    question = Q("l02.ex-intensity-code")
    assert quiz.judge(question, lambda m, n, k, b: 2 * m * n * k / ((m * k + k * n + m * n) * b)).correct
    assert quiz.judge(question, lambda m, n, k, b: m * n * k / ((m * k + k * n + m * n) * b)).correct is False
    assert quiz.judge(question, lambda m, n, k, b: 2 * m * n * k / ((m * k + k * n) * b)).correct is False
    assert quiz.judge(question, lambda m, n, k, b: 2 * m * n * k / ((m * k + k * n + m * n) * b)).correct
    # the grader's hidden cases
    assert quiz._code(question, lambda m, n, k, b: 2 * m * n * k / ((m * k + k * n + m * n) * b),
                      question.hidden_cases).correct


def test_elementwise_intensity_never_grows_gemm_does():
    sizes = [2**p for p in range(4, 17)]
    add = [formulas.elementwise(n * n, 1, 2, 1, "bf16").intensity for n in sizes]
    square = [formulas.gemm(n, n, n, "bf16").intensity for n in sizes]
    assert max(add) == min(add)
    assert all(a < b for a, b in zip(square, square[1:]))


def test_no_hint_gives_the_library_call_that_computes_the_key():
    calls = ("roofline.", "formulas.", "acc.", "hardware.", ".bandwidth", "sympy.", "roofkit.")
    for question in quiz.questions("02"):
        for hint in question.hints:
            assert not any(call in hint for call in calls), (question.id, hint)
            assert "{" not in hint, (question.id, hint)  # hints are not templates: no unfilled names


def test_intensity_belongs_to_the_kernel_only_under_the_ideal_count():
    """Section 1 says which intensity is the kernel's alone: the ideal one (each operand read once). Measured
    traffic, the roofline's 'operational intensity' (Williams, Waterman & Patterson, CACM 2009), also depends on
    tiling and caches. (Expert review F02-1: the lesson used to say any intensity was the same on every chip.)"""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "lessons" / "02-arithmetic-intensity.md").read_text("utf-8")
    section = " ".join(text[text.index("## 1. FLOPs per byte"):text.index("## 2.")].split())
    claim = section.index("belongs to the kernel")
    assert "ideal" in section[claim - 120:claim]  # the claim is about the ideal count, not any count
    assert "same kernel has the same intensity" not in section
    for needed in ("measured intensity", "caches", "tiles", "Williams"):
        assert needed in section, needed
