"""Lesson 05 replays the numbers the sources publish (seed 000's format table and H100 throughput,
the FP8 formats paper, ml_dtypes' finfo) against its question keys, checks every misconception's
feedback, and pins the lesson's corrections (TF32 occupies 32 bits; FP8 GEMMs keep their crossing size)."""

import math

import ml_dtypes
import numpy as np
import pytest
import sympy

import roofkit
from roofkit import formulas, precision, quiz, roofline
from roofkit.quiz import answer_key as key
from roofkit.course import lesson_05

H100 = roofkit.hw("h100")




def test_lesson_has_its_questions():
    ids = {q.id for q in quiz.questions("05")}
    assert ids == {"l05.bf16-or-fp16", "l05.fp16-max", "l05.tf32-intensity", "l05.bf16-accumulator",
                   "l05.fp8-gemm-crossing", "l05.ex-e4m3-max", "l05.ex-gradient-format"}
    assert all(q.points == 2 for q in quiz.questions("05") if ".ex-" in q.id)


# --- seed 000, section 5: the format table -----------------------------------------------------------

@pytest.mark.parametrize("name, bits, exponent, mantissa", [
    ("fp32", 32, 8, 23), ("tf32", 19, 8, 10), ("fp16", 16, 5, 10), ("bf16", 16, 8, 7),
    ("e4m3", 8, 4, 3), ("e5m2", 8, 5, 2),
])
def test_seed_table_layouts(name, bits, exponent, mantissa):
    f = precision.get(name)
    assert (f.bits, f.exponent_bits, f.mantissa_bits) == (bits, exponent, mantissa)


def test_seed_table_ranges():
    # "FP16 ... dynamic range ~6e-5 to 65504"; "E4M3 ~±448"; "E5M2 ~±57344"; INT8 [-128, 127]
    assert key("l05.fp16-max") == 65504 == float(np.finfo(np.float16).max)
    assert precision.get("fp16").min_normal == pytest.approx(6.1e-5, rel=0.01)
    assert key("l05.ex-e4m3-max") == 448 == float(ml_dtypes.finfo(ml_dtypes.float8_e4m3fn).max)
    assert key("l05.fp16-max", E=5, M=2) == 57344 == float(ml_dtypes.finfo(ml_dtypes.float8_e5m2).max)
    assert (precision.get("int8").min, precision.get("int8").max) == (-128, 127)
    # FP32, TF32 and BF16: "~10^±38"
    for name in ("fp32", "tf32", "bf16"):
        assert 38 <= math.log10(precision.get(name).max) < 39


def test_correction_tf32_occupies_32_bits():
    """Seed 000 lists TF32 as '19*' bits: 19 carry information, but a value occupies 4 bytes."""
    assert precision.get("tf32").bits == 19 and precision.get("tf32").storage_bytes == 4
    n = 4096
    assert key("l05.tf32-intensity") == pytest.approx(2 * n / (3 * 4))
    assert key("l05.tf32-intensity") == pytest.approx(formulas.gemm(n, n, n, "fp32").intensity)


def test_ieee_max_rule_matches_an_independent_derivation():
    """(2 - 2^-M) * 2^(2^E - 2 - bias), written here from IEEE 754 itself, for several layouts."""
    for E, M in [(5, 10), (8, 7), (8, 23), (5, 2), (11, 52)]:
        bias = 2 ** (E - 1) - 1
        assert key("l05.fp16-max", E=E, M=M) == (2 - 2.0**-M) * 2.0 ** (2**E - 2 - bias)
    E, M = sympy.symbols("E M", integer=True, positive=True)
    rule = precision.get("fp16").derive(symbolic=True)["max"]
    assert sympy.simplify(rule - (2 - 2**-M) * 2 ** (2**E - 2 - (2 ** (E - 1) - 1))) == 0


def test_bf16_has_less_precision_than_fp16():
    assert key("l05.bf16-or-fp16") == "fp16"
    assert float(ml_dtypes.finfo(ml_dtypes.bfloat16).eps) == 8 * float(np.finfo(np.float16).eps)


# --- overflow: 1e9 -> NaN in E4M3, inf in E5M2 --------------------------------------------------------

def test_overflow_of_1e9():
    assert math.isnan(precision.round_to(1e9, "e4m3"))
    assert precision.round_to(1e9, "e5m2") == math.inf
    assert math.isnan(float(np.float32(1e9).astype(ml_dtypes.float8_e4m3fn)))
    assert float(np.float32(1e9).astype(ml_dtypes.float8_e5m2)) == math.inf


# --- throughput and ridge per precision (seed 000: ~990 / ~1979 dense, ridges 296 and 591) ---------------

def test_h100_peaks_double_per_halving():
    assert H100.peak("fp8") == pytest.approx(2 * H100.peak("bf16"), rel=1e-3)  # 1979 vs 2 x 989
    assert H100.peak("bf16") == 2 * H100.peak("tf32")
    assert H100.ridge("bf16") == pytest.approx(296, rel=0.005)
    assert H100.ridge("fp8") == pytest.approx(591, rel=0.005)


def test_fp8_gemm_keeps_its_crossing_size():
    """Seed 004's balance-point dimension is 3 I* in 16-bit; in FP8 with 1-byte operands it is the same n."""
    # n = 3 b I* / 2: b halves and I* doubles (1979 / 989 is 2 to 0.1%)
    assert key("l05.fp8-gemm-crossing") == pytest.approx(3 * 1 * H100.ridge("fp8") / 2, rel=1e-6)
    assert key("l05.fp8-gemm-crossing") == pytest.approx(roofline.balance_point_matrix_size("h100", "bf16"), rel=1e-3)
    assert key("l05.fp8-gemm-crossing", dtype="bf16") == pytest.approx(886, abs=1)


# --- accumulation ---------------------------------------------------------------------------------------

def test_bf16_accumulator_stalls_at_4():
    """The oracle is ml_dtypes' own BF16 arithmetic, one addition at a time."""
    x = np.full(4096, 0.01, dtype=ml_dtypes.bfloat16)
    oracle = float(np.cumsum(x, dtype=ml_dtypes.bfloat16)[-1])
    assert key("l05.bf16-accumulator") == oracle == 4.0
    assert float(np.cumsum(x, dtype=np.float32)[-1]) == pytest.approx(41.0, rel=1e-3)
    # a smaller addend stalls earlier, a bigger one later: the key follows the spacing argument
    for addend in (0.001, 0.1):
        xs = np.full(4096, addend, dtype=ml_dtypes.bfloat16)
        assert key("l05.bf16-accumulator", addend=addend) == float(np.cumsum(xs, dtype=ml_dtypes.bfloat16)[-1])


def test_running_sum_with_fp32_does_not_stall():
    assert lesson_05.running_sum(0.01, 4096, "fp32") == pytest.approx(40.96, rel=1e-4)


# --- FP8 for gradients --------------------------------------------------------------------------------------

def test_gradient_format_by_range():
    assert key("l05.ex-gradient-format") == "e5m2"
    assert key("l05.ex-gradient-format", decades=4) == "e4m3"
    assert key("l05.ex-gradient-format", decades=12) == "neither"
    e4m3, e5m2 = (ml_dtypes.finfo(t) for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2))
    assert math.log10(float(e4m3.max) / float(e4m3.smallest_subnormal)) < 7
    assert math.log10(float(e5m2.max) / float(e5m2.smallest_subnormal)) > 9


# --- misconceptions -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("question_id, answer, name", [
    ("l05.bf16-or-fp16", "bf16", "bf16-more-precise"),
    ("l05.fp16-max", 131008, "used-inf-exponent"),
    ("l05.fp16-max", 32768, "forgot-mantissa"),
    ("l05.tf32-intensity", 2 * 4096**3 / (3 * 4096**2 * 19 / 8), "tf32-19-bits"),
    ("l05.tf32-intensity", 4096 / 3, "tf32-16-bits"),
    ("l05.bf16-accumulator", 40.96, "exact-sum"),
    ("l05.fp8-gemm-crossing", 1772, "kept-2-bytes"),
    ("l05.fp8-gemm-crossing", 443, "bf16-ridge"),
    ("l05.ex-e4m3-max", 240, "ieee-rules"),
    ("l05.ex-e4m3-max", 480, "nan-code-used"),
    ("l05.ex-gradient-format", "e4m3", "e4m3-for-gradients"),
])
def test_published_wrong_answers_get_their_feedback(question_id, answer, name):
    verdict = quiz.judge(quiz.get(question_id), answer)
    assert verdict.correct is False and verdict.misconception == name


@pytest.mark.parametrize("question_id, answer", [
    ("l05.fp16-max", 65504), ("l05.fp16-max", "65504"), ("l05.tf32-intensity", "682.7 FLOP/byte"),
    ("l05.bf16-accumulator", 4), ("l05.fp8-gemm-crossing", 886), ("l05.fp8-gemm-crossing", 887),
    ("l05.ex-e4m3-max", 448), ("l05.ex-gradient-format", "E5M2"), ("l05.bf16-or-fp16", "FP16"),
])
def test_right_answers_as_a_learner_types_them(question_id, answer):
    assert quiz.judge(quiz.get(question_id), answer).correct is True
