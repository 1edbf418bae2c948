"""Lesson 04 replays the sources' accelerator numbers against its question keys.

Oracles: seed 004 (the T4's balance point "approximately 201 FLOP/byte"; a square
FP16 matmul crosses it at n = 3 x I*), the datasheets behind the catalog (T4
65 TFLOP/s FP16 at 320 GB/s; A100 312 TFLOP/s with 108 SMs x 4 tensor cores x 256
FMA x 2 at 1.41 GHz; H100 989 TFLOP/s with 132 SMs x 4 x 512 x 2 at 1.83 GHz),
Google's two TPU v5e bandwidth figures (819 GB/s and 800 GiB/s), and the catalog's
notes on where its sources disagree (B200 8.0 vs 7.7 TB/s, 180 vs 192 GB; MI300X
1307.4 vs 1336 TFLOP/s).
"""

import math

import pytest

from roofkit import formulas, hardware, quiz, roofline
from roofkit.quiz import answer_key as key
from roofkit.course.lesson_04 import peak_from_parts




def test_t4_balance_point_seed_004_vs_datasheet():
    assert key("l04.ridge-t4") == pytest.approx(65e12 / 320e9)  # 203.1, the datasheet's
    assert key("l04.ridge-t4") == pytest.approx(201, rel=0.015)  # seed 004's "approximately 201"
    assert quiz.judge(quiz.get("l04.ridge-t4"), 201).correct  # both are accepted
    assert 201 * 320e9 == pytest.approx(64.3e12, rel=1e-3)  # what the seed's figure implies
    assert any("201" in note and "203" in note for note in hardware.get("t4").notes)


def test_square_gemm_crosses_the_ridge_at_three_times_it():
    assert key("l04.balance-n-t4") == pytest.approx(3 * key("l04.ridge-t4"), rel=1e-9)
    assert key("l04.balance-n-t4") == pytest.approx(3 * 201, rel=0.015)  # the seed's 603 is accepted
    question = quiz.get("l04.balance-n-t4")
    assert quiz.judge(question, key("l04.ridge-t4")).misconception == "n-equals-ridge"
    for acc in hardware.catalog():
        p = "bf16" if "bf16" in acc.peak_flops else "fp16"
        assert roofline.balance_point_matrix_size(acc, p) == pytest.approx(3 * acc.ridge(p), rel=1e-9)


def test_fp8_data_leave_the_crossing_size_unchanged():
    bf16 = roofline.balance_point_matrix_size("h100", "bf16")
    fp8 = roofline.balance_point_matrix_size("h100", "fp8")
    assert fp8 == pytest.approx(bf16, rel=2e-3)  # 1979/989 is not exactly 2
    assert key("l04.ex-crossover") == 886 == math.ceil(bf16)


def test_same_gemm_is_memory_bound_on_h100_and_compute_bound_elsewhere():
    assert formulas.gemm(768, 768, 768, "bf16").intensity == 256
    assert key("l04.same-gemm") == "memory"
    for hw in ("b200",):
        assert key("l04.same-gemm", hw=hw) == "memory"
    for hw in ("a100", "h200", "mi300x", "tpu-v5e"):
        assert key("l04.same-gemm", hw=hw) == "compute"
    assert key("l04.same-gemm", hw="t4", dtype="fp16") == "compute"
    assert quiz.judge(quiz.get("l04.same-gemm"), "compute").misconception == "another-chips-ridge"


def test_tpu_v5e_gib_versus_gb():
    question = quiz.get("l04.v5e-gib")
    assert key("l04.v5e-gib") == pytest.approx(197e12 / (800 * 2**30))
    assert quiz.judge(question, 197e12 / 800e9).misconception == "gib-as-gb"
    assert quiz.judge(question, 197e12 / 819e9).misconception == "catalog-bandwidth"
    assert hardware.get("tpu-v4").memory_bytes == 32 * 2**30  # Google quotes GiB


def test_peaks_multiply_out_from_their_parts():
    a100, h100 = hardware.get("a100"), hardware.get("h100")
    assert peak_from_parts(a100.compute_units, 4, 256, 1.41e9) == pytest.approx(a100.peak("bf16"), rel=1e-3)
    assert peak_from_parts(h100.compute_units, 4, 512, 1.83e9) == pytest.approx(h100.peak("bf16"), rel=1e-3)
    assert key("l04.ex-h100-peak") == pytest.approx(989.4, rel=1e-3)
    question = quiz.get("l04.ex-h100-peak")
    assert quiz.judge(question, "989 TFLOP/s").correct
    assert quiz.judge(question, 494.7).misconception == "fma-one-flop"
    assert quiz.judge(question, 1070.5).misconception == "max-boost-clock"
    # scaling-book's 1.76 GHz with 1,024 FLOPs per tensor core per clock falls short of 989
    assert h100.compute_units * 4 * 1024 * 1.76e9 == pytest.approx(951.6e12, rel=1e-3)


def test_the_catalog_keeps_its_disagreements():
    b200, mi300x = hardware.get("b200"), hardware.get("mi300x")
    notes = " ".join(b200.notes)
    for figure in ("180 GB", "192 GB", "8.0 TB/s", "7.7 TB/s"):
        assert figure in notes
    assert "1,307.4" in " ".join(mi300x.notes) and "1,336" in " ".join(mi300x.notes)
    assert b200.peak("bf16") / 7.7e12 / b200.ridge("bf16") == pytest.approx(8.0 / 7.7)
