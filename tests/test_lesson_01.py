"""Lesson 01 replays the published FLOP and byte counts against its question keys.

Oracles: counts by hand (2MNK; the ideal traffic model), PyTorch's FlopCounterMode
(2 FLOPs per multiply-add, 0 for elementwise ops), fvcore's convention (one per
multiply-add), and jax-ml/scaling-book's "All About Rooflines" (a bf16 dot product:
2N - 1 FLOPs for 4N + 2 bytes, intensity -> 1/2).
"""

import itertools
import math

import pytest
import sympy

from roofkit import formulas
from roofkit.course import quiz

Q = quiz.get


def test_an_fma_is_two_flops():
    # every datasheet peak counts a multiply-add as 2 FLOPs; so does PyTorch's FlopCounterMode
    from roofkit.course.bank.lesson_01 import FLOPS_PER_FMA

    assert FLOPS_PER_FMA == 2


def test_gemm_flops_is_the_sum_over_dot_products():
    M, N, K = sympy.symbols("M N K", positive=True)
    i, j, k = sympy.symbols("i j k", integer=True)
    summed = sympy.Sum(2, (k, 1, K), (j, 1, N), (i, 1, M)).doit()
    assert sympy.simplify(summed - formulas.symbolic(formulas.gemm).flops) == 0


def test_square_matmul_is_2n3():
    # what FlopCounterMode reports for a 1024^3 matmul (see test_flop_counter_mode_agrees)
    n = 1024
    assert formulas.gemm(n, n, n).flops == 2 * n**3 == 2_147_483_648


def test_keys():
    assert Q("l01.gemm-flops").answer_key() == 2 * 2048 * 14336 * 4096
    assert Q("l01.gemm-bytes").answer_key() == (2048 * 4096 + 4096 * 14336 + 2048 * 14336) * 2
    assert math.isclose(Q("l01.achieved-rate").answer_key(), 2 * 8192**3 / 1.6e-3)  # ~687 TFLOP/s
    assert Q("l01.fvcore-macs").answer_key() == 2048 * 14336 * 4096
    assert Q("l01.decode-traffic").answer_key() == 32 * (4096 + 4096 * 14336 + 14336) * 2
    # three kernels: up (x, W_up, h), GELU (h, g), down (g, W_down, y)
    T, d, f = 2048, 4096, 14336
    assert Q("l01.ex-mlp-bytes").answer_key() == 2 * ((T * d + d * f + T * f) + 2 * T * f + (T * f + f * d + T * d))
    assert Q("l01.ex-lora-flops").key(2048, 4096, 16) == 2 * 2048 * 16 * 4096 * 2
    assert Q("l01.reduction-flops").answer_key() == 8192 * 4096  # one add per element
    assert Q("l01.reduction-bytes").answer_key() == (8192 * 4096 + 8192) * 2  # read x, write one value per row


def test_a_reduction_moves_half_a_flop_per_byte_like_scaling_books_dot_product():
    # scaling-book: a bf16 dot product does 2N - 1 FLOPs for 4N + 2 bytes -> 1/2; a bf16 row sum does C adds
    # for about 2C bytes per row: the same 1/2, because one read element feeds one FLOP
    rows, cols = 8192, 4096
    flops, nbytes = Q("l01.reduction-flops").answer_key(), Q("l01.reduction-bytes").answer_key()
    assert flops / nbytes == pytest.approx(0.5, rel=1e-3)
    dot = (2 * cols - 1) / (4 * cols + 2)
    assert flops / nbytes == pytest.approx(dot, rel=1e-3)
    # the output is negligible: forgetting it is within the tolerance, so it is not flagged as a mistake
    assert quiz.judge(Q("l01.reduction-bytes"), rows * cols * 2).correct
    # the strict count, C - 1 adds per row, is within one part in C of the convention
    assert quiz.judge(Q("l01.reduction-flops"), rows * (cols - 1)).correct


def test_worked_problem_uses_other_numbers_than_the_question():
    from pathlib import Path

    import roofkit

    text = (Path(__file__).resolve().parent.parent / "lessons" / "01-counting-flops-and-bytes.md").read_text("utf-8")
    assert 'roofkit.model("llama-2-13b")' in text
    llama = roofkit.model("llama-2-13b")
    question = Q("l01.decode-traffic")
    assert (llama.d_model, llama.d_ff) != (question.params["d_model"], question.params["d_ff"])
    worked = formulas.gemv(llama.d_ff, llama.d_model, "bf16").scale(16).bytes
    assert not quiz.judge(question, worked).correct
    for values in itertools.product(*question.variants.values()):
        combination = dict(zip(question.variants, values))
        assert not quiz.judge(question.with_params(**combination), worked).correct


def test_answers_with_units():
    assert quiz.judge(Q("l01.achieved-rate"), "687 TFLOP/s").correct
    assert quiz.judge(Q("l01.gemm-bytes"), "193.0 MB").correct
    assert quiz.judge(Q("l01.decode-traffic"), "3.76 GB").correct


@pytest.mark.parametrize("question, answer, name", [
    ("l01.gemm-flops", 2048 * 14336 * 4096, "mnk"),
    ("l01.gemm-flops", "240 TFLOP/s", "rate-for-work"),
    ("l01.gemm-bytes", (2048 * 4096 + 4096 * 14336) * 2, "forgot-output-write"),
    ("l01.gemm-bytes", (2048 * 4096 + 4096 * 14336 + 2048 * 14336) * 16, "bits-not-bytes"),
    ("l01.gemm-bytes", 2048 * 4096 + 4096 * 14336 + 2048 * 14336, "elements-not-bytes"),
    ("l01.achieved-rate", "1.1e12 FLOP", "work-for-rate"),
    ("l01.achieved-rate", 8192**3 / 1.6e-3, "mnk"),
    ("l01.achieved-rate", 2 * 8192**3 / 1.6, "ms-as-s"),
    ("l01.fvcore-macs", 2 * 2048 * 14336 * 4096, "reported-flops"),
    ("l01.decode-traffic", 4096 * 14336 * 2, "footprint"),  # W counted once
    ("l01.ex-mlp-bytes", 2 * (2048 * 4096 + 2 * 4096 * 14336 + 2048 * 4096), "intermediates-free"),
    ("l01.reduction-flops", 2 * 8192 * 4096, "fma-in-a-sum"),
    ("l01.reduction-flops", 8192, "one-per-row"),
    ("l01.reduction-flops", "33.5 GFLOP/s", "rate-for-work"),
    ("l01.reduction-bytes", 2 * 8192 * 4096 * 2, "output-full-size"),
    ("l01.reduction-bytes", (8192 * 4096 + 8192) * 16, "bits-not-bytes"),
    ("l01.reduction-bytes", 8192 * 4096 + 8192, "elements-not-bytes"),
])
def test_misconceptions_by_hand(question, answer, name):
    verdict = quiz.judge(Q(question), answer)
    assert verdict.correct is False and verdict.misconception == name, verdict


def test_lora_code_question_catches_mnk():
    wrong = quiz.judge(Q("l01.ex-lora-flops"), lambda T, d, r: T * d * r * 2)
    assert wrong.correct is False
    right = quiz.judge(Q("l01.ex-lora-flops"), lambda T, d, r: 4 * T * d * r)
    assert right.correct is True
    # the hidden cases pass too
    assert all(Q("l01.ex-lora-flops").key(*c) == 4 * c[0] * c[1] * c[2] for c in Q("l01.ex-lora-flops").hidden_cases)


def test_batching_cuts_traffic_not_work():
    one_by_one = formulas.gemv(14336, 4096, "bf16").scale(32)
    batched = formulas.gemm(32, 14336, 4096, "bf16")
    assert one_by_one.flops == batched.flops
    assert 30 < one_by_one.bytes / batched.bytes < 32


@pytest.mark.torch
def test_flop_counter_mode_agrees():
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    def counted(fn, *shapes):
        tensors = [torch.empty(s, dtype=torch.bfloat16, device="meta") for s in shapes]
        with FlopCounterMode(display=False) as counter:
            fn(*tensors)
        return counter.get_total_flops()

    assert counted(torch.matmul, (1024, 1024), (1024, 1024)) == formulas.gemm(1024, 1024, 1024).flops
    assert counted(torch.nn.functional.linear, (2048, 4096), (14336, 4096)) == Q("l01.gemm-flops").answer_key()
    assert counted(torch.nn.functional.gelu, (2048, 14336)) == 0


def test_no_hint_gives_the_library_call_that_computes_the_key():
    calls = ("roofline.", "formulas.", "acc.", "hardware.", ".bandwidth", "sympy.", "roofkit.")
    for question in quiz.questions("01"):
        for hint in question.hints:
            assert not any(call in hint for call in calls), (question.id, hint)
            assert "{" not in hint, (question.id, hint)  # hints are not templates: no unfilled names


def test_terms_are_defined_before_they_are_used():
    """Issue 18: BLAS, the number formats and the running example's linear layer are introduced in the text
    before the lesson uses them (they were left to lesson 05, or to a question's prompt)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "lessons" / "01-counting-flops-and-bytes.md").read_text("utf-8")
    text = " ".join(text.split())  # as read, whatever the line breaks
    assert "Basic Linear Algebra Subprograms" in text[:text.index("BLAS") + 200]
    first_format = min(text.index(name) for name in ("BF16", "FP32", "FP8", "FP4"))
    assert text.index("**number format**") < first_format + 400
    assert text.index("**linear layer**") < text.index('ask("l01.gemm-flops")')
    assert "the linear layer above" not in text
    assert "sits near 1 FLOP/byte" not in text  # lesson 02 asks for the GEMV's intensity

