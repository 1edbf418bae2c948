"""Lesson 03 replays the sources' roofline numbers against its question keys.

Oracles: seed 000 (ridges 296 BF16 and 591 FP8 on an H100; the 4096^3 GEMM at
about 1365 FLOP/byte, compute-bound; the decode GEMV at about 1, memory-bound),
seed 003 (ridge 295; exercise 1, a 4096 x 4096 GEMM at batch 1 is memory-bound;
its "0.5" intensity is wrong), seed 004 (horizontal vs vertical moves; the % of
roofline bands) and scaling-book's GPU chapter, quiz 1 question 7 (c = a + b over
2^30 FP32 elements on an H100: about 3.84 ms predicted, 4.1 ms measured).
"""

import pytest

from roofkit import formulas, fusion, hardware, quiz, roofline
from roofkit.quiz import answer_key as key

H100 = hardware.get("h100")




def test_ridges_match_seed_000_and_seed_003():
    assert key("l03.ridge-bf16") == pytest.approx(295, abs=1)  # seed 003: 295; seed 000: 296
    assert key("l03.ridge-fp8") == pytest.approx(591, abs=1)  # seed 000: 591
    # seed 000 rounds the peak to 9.9e14 before dividing: 295.5, which it writes as 296
    assert roofline.ridge_point(9.9e14, 3.35e12) == pytest.approx(295.5, abs=0.05)
    assert quiz.judge(quiz.get("l03.ridge-bf16"), 296).correct
    assert quiz.judge(quiz.get("l03.ridge-bf16"), "296 FLOP/byte").correct
    assert quiz.judge(quiz.get("l03.ridge-fp8"), 591).correct


def test_the_sparse_peak_gives_a_ridge_twice_too_large():
    sparse = roofline.ridge_point(1979e12, 3.35e12)  # NVIDIA's headline "BF16" figure
    verdict = quiz.judge(quiz.get("l03.ridge-bf16"), sparse)
    assert not verdict.correct and verdict.misconception == "sparse-peak"
    verdict = quiz.judge(quiz.get("l03.ridge-fp8"), roofline.ridge_point(3958e12, 3.35e12))
    assert not verdict.correct and verdict.misconception == "sparse-peak"
    assert quiz.judge(quiz.get("l03.ridge-fp8"), 295).misconception == "same-as-bf16"
    assert quiz.judge(quiz.get("l03.ridge-bf16"), "295 TFLOP/s").misconception == "unit"


def test_seed_000_quiz_gemm_compute_bound_gemv_memory_bound():
    big = roofline.analyze(formulas.gemm(4096, 4096, 4096, "bf16"), "h100", "bf16")
    assert big.intensity == pytest.approx(1365, abs=1) and big.bound == "compute"
    assert big.time_s == pytest.approx(139e-6, rel=0.01) and big.time_upper_s == pytest.approx(169e-6, rel=0.01)
    gemv = roofline.analyze(formulas.gemm(1, 4096, 4096, "bf16"), "h100", "bf16")
    assert gemv.intensity == pytest.approx(1, rel=1e-3) and gemv.bound == "memory"


def test_pessimistic_bound_is_the_sum_and_the_max_is_recognised():
    n = 8192
    placed = roofline.analyze(formulas.gemm(n, n, n, "bf16"), "h100", "bf16")
    assert key("l03.gemm-time-upper") == pytest.approx((placed.t_math_s + placed.t_mem_s) * 1e6)
    # 2 * 8192^3 / 989e12 = 1111.7 µs of math, 3 * 8192^2 * 2 / 3.35e12 = 120.2 µs of memory
    assert key("l03.gemm-time-upper") == pytest.approx(1111.7 + 120.2, rel=1e-3)
    question = quiz.get("l03.gemm-time-upper")
    assert quiz.judge(question, "1.232 ms").correct
    assert quiz.judge(question, placed.time_s * 1e6).misconception == "optimistic-bound"
    assert quiz.judge(question, placed.t_mem_s * 1e6).misconception == "memory-time-only"


def test_more_flops_do_not_speed_up_a_memory_bound_kernel():
    assert key("l03.more-flops") == pytest.approx(1.0, abs=1e-3)
    assert key("l03.more-flops", factor=10) == pytest.approx(1.0, abs=1e-3)
    verdict = quiz.judge(quiz.get("l03.more-flops"), 2)
    assert not verdict.correct and verdict.misconception == "flops-help-memory-bound"
    # the H200 has the H100's compute and more bandwidth: the GEMV does get faster there
    gemv = formulas.gemv(4096, 4096, "bf16")
    ratio = roofline.analyze(gemv, "h100", "bf16").time_s / roofline.analyze(gemv, "h200", "bf16").time_s
    assert ratio == pytest.approx(4.8 / 3.35, rel=1e-3)


def test_batching_moves_the_point_horizontally():
    assert key("l03.batch-move") == "horizontal"
    assert key("l03.batch-move", batch=1) == "vertical"  # no batching, no move along the intensity axis
    assert quiz.judge(quiz.get("l03.batch-move"), "vertical").misconception == "batching-is-vertical"
    # seed 004: fusion and lower-precision storage are horizontal moves too
    chain = fusion.chain(["bias_add", "gelu"], n=2**20)
    assert chain.fused.intensity == pytest.approx(2 * chain.unfused.intensity)
    assert formulas.gemv(4096, 4096, "fp8").intensity == pytest.approx(2 * formulas.gemv(4096, 4096, "bf16").intensity)


def test_seed_003_exercise_1_and_its_wrong_intensity():
    assert key("l03.ex-batch1-bound") == "memory"
    assert key("l03.ex-batch1-bound", batch=512) == "compute"  # past the decode crossing batch
    # seed 003 writes 4096 / (1 + 4096 + 4096) ~ 0.5; at 2 bytes per element it is about 1
    intensity = formulas.gemm(1, 4096, 4096, "bf16").intensity
    assert intensity == pytest.approx(1.0, rel=1e-3)
    seed_003 = 4096 / (1 + 4096 + 4096)
    assert seed_003 == pytest.approx(0.5, rel=1e-3) and intensity / seed_003 == pytest.approx(2, rel=1e-3)
    assert quiz.judge(quiz.get("l03.ex-batch1-bound"), "compute").misconception == "big-matrix-is-compute-bound"


def test_scaling_book_fp32_add_predicted_and_measured():
    add = formulas.elementwise(2**30, 1, 2, 1, "fp32")
    placed = roofline.analyze(add, "h100", "fp32")
    assert placed.bound == "memory"
    assert placed.time_s == pytest.approx(3.84e-3, rel=2e-3)  # scaling-book: "about 3.84ms"
    percent = key("l03.ex-add-percent")
    assert percent == pytest.approx(100 * placed.time_s / 4.1e-3, rel=1e-9)
    assert 90 < percent < 95  # seed 004's top band: essentially optimal
    question = quiz.get("l03.ex-add-percent")
    assert quiz.judge(question, "93.8 %").correct
    assert quiz.judge(question, 0.938).misconception == "fraction-not-percent"
    assert quiz.judge(question, 106.6).misconception == "inverted"
    assert quiz.judge(question, 100).misconception == "roof-is-achieved"  # the roof is an asymptote


def test_the_lesson_uses_the_explorer():
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "lessons" / "03-the-roofline.md").read_text("utf-8")
    assert "roofline_explorer(" in text
