"""Lesson 01 replays the sources' FLOP and byte counts against its question keys."""

import math

import pytest
import sympy

from roofkit import formulas, quiz

Q = quiz.get


def test_an_fma_is_two_flops():
    # seed 000 and 004: "1 FMA equals 2 FLOPs"; the course's convention
    from roofkit.course.lesson_01 import FLOPS_PER_FMA

    assert FLOPS_PER_FMA == 2


def test_gemm_flops_is_the_sum_over_dot_products():
    M, N, K = sympy.symbols("M N K", positive=True)
    i, j, k = sympy.symbols("i j k", integer=True)
    summed = sympy.Sum(2, (k, 1, K), (j, 1, N), (i, 1, M)).doit()
    assert sympy.simplify(summed - formulas.symbolic(formulas.gemm).flops) == 0


def test_seed_004_square_matmul_is_2n3():
    # seed 004's FlopCounterMode snippet asserts 2 * n**3 for n = 1024
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
