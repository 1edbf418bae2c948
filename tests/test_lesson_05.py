"""Lesson 05 replays the numbers the sources publish (the common format table and the H100 datasheet's
throughput, the FP8 formats paper and the OCP OFP8 spec, ml_dtypes' finfo, views and spacing) against
its question keys, checks every misconception's feedback, and pins the lesson's corrections (TF32
occupies 32 bits; FP8 GEMMs keep their crossing size; an addend below half the gap is lost)."""

import math

import ml_dtypes
import numpy as np
import pytest
import sympy

import roofkit
from roofkit import formulas
from roofkit import roofline
from roofkit.perf import precision
from roofkit.course import quiz
from roofkit.course.quiz import answer_key as key
from roofkit.course.bank import lesson_05

H100 = roofkit.hw("h100")




def test_lesson_has_its_questions():
    ids = {q.id for q in quiz.questions("05")}
    assert ids == {"l05.decode-bf16", "l05.bf16-or-fp16", "l05.fp16-max", "l05.e4m3-max", "l05.tf32-intensity",
                   "l05.bf16-accumulator", "l05.fp8-gemm-crossing", "l05.ex-decode-e4m3",
                   "l05.ex-gradient-format"}
    assert all(q.points == 2 for q in quiz.questions("05") if ".ex-" in q.id)


# --- the format table -----------------------------------------------------------

@pytest.mark.parametrize("name, bits, exponent, mantissa", [
    ("fp32", 32, 8, 23), ("tf32", 19, 8, 10), ("fp16", 16, 5, 10), ("bf16", 16, 8, 7),
    ("e4m3", 8, 4, 3), ("e5m2", 8, 5, 2),
])
def test_table_layouts(name, bits, exponent, mantissa):
    f = precision.get(name)
    assert (f.bits, f.exponent_bits, f.mantissa_bits) == (bits, exponent, mantissa)


def test_table_ranges():
    # "FP16 ... dynamic range ~6e-5 to 65504"; "E4M3 ~±448"; "E5M2 ~±57344"; INT8 [-128, 127]
    assert key("l05.fp16-max") == 65504 == float(np.finfo(np.float16).max)
    assert precision.get("fp16").min_normal == pytest.approx(6.1e-5, rel=0.01)
    assert key("l05.e4m3-max") == 448 == float(ml_dtypes.finfo(ml_dtypes.float8_e4m3fn).max)
    assert key("l05.fp16-max", E=5, M=2) == 57344 == float(ml_dtypes.finfo(ml_dtypes.float8_e5m2).max)
    assert (precision.get("int8").min, precision.get("int8").max) == (-128, 127)
    # FP32, TF32 and BF16: "~10^±38"
    for name in ("fp32", "tf32", "bf16"):
        assert 38 <= math.log10(precision.get(name).max) < 39


def test_correction_tf32_occupies_32_bits():
    """Format tables list TF32 as 19 bits: 19 carry information, but a value occupies 4 bytes."""
    assert precision.get("tf32").bits == 19 and precision.get("tf32").storage_bytes == 4
    n = 5120
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


# --- decoding a bit pattern -----------------------------------------------------------------------------

@pytest.mark.parametrize("name, dtype, word", [
    ("bf16", ml_dtypes.bfloat16, np.uint16), ("fp16", np.float16, np.uint16), ("fp32", np.float32, np.uint32),
    ("e4m3", ml_dtypes.float8_e4m3fn, np.uint8), ("e5m2", ml_dtypes.float8_e5m2, np.uint8),
    ("e4m3fnuz", ml_dtypes.float8_e4m3fnuz, np.uint8),
])
def test_from_bits_inverts_bits(name, dtype, word):
    rng = np.random.default_rng(0)
    for value in [*rng.standard_normal(50) * 10.0 ** rng.integers(-3, 4, 50), 0.0, 1.0, -6.5]:
        stored = precision.round_to(value, name)
        back = precision.from_bits(precision.bits(value, name), name)
        assert back == stored or (math.isnan(back) and math.isnan(stored)), (name, value)
    bits = np.dtype(word).itemsize * 8
    for code in (0, 1, 0x3F, 0x7F, 0xFF if bits == 8 else 0x3F80):  # the hardware type is the oracle
        oracle = float(np.array([code], word).view(dtype)[0])
        got = precision.from_bits(format(code, f"0{bits}b"), name)
        assert got == oracle or (math.isnan(got) and math.isnan(oracle)), (name, code)


def test_from_bits_tf32_int8_fp4_and_bad_patterns():
    assert precision.from_bits("0 01111111 1000000000", "tf32") == 1.5
    assert precision.from_bits("1000 0000", "int8") == -128 and precision.from_bits("0111 1111", "int8") == 127
    assert precision.from_bits("0 11 1", "fp4") == 6.0 == float(ml_dtypes.finfo(ml_dtypes.float4_e2m1fn).max)
    assert precision.from_bits("0b0100011010000000", "fp16") == 6.5
    for bad in ("0 1111 11", "0 1111 1112", "", 7):
        with pytest.raises(roofkit.InvalidValue, match="bits|pattern"):
            precision.from_bits(bad, "e4m3")


def test_decode_bf16_question():
    # 0 10000010 0101100: sign 0, exponent 130 - 127 = 3, significand 1 + 44/128 = 1.34375
    assert key("l05.decode-bf16") == 1.34375 * 8 == 10.75
    word = int("0100000100101100", 2)
    assert key("l05.decode-bf16") == float(np.array([word], np.uint16).view(ml_dtypes.bfloat16)[0])
    question = quiz.get("l05.decode-bf16")
    for bits in question.variants["bits"]:
        oracle = float(np.array([int(bits.replace(" ", ""), 2)], np.uint16).view(ml_dtypes.bfloat16)[0])
        assert key("l05.decode-bf16", bits=bits) == oracle


def test_decode_e4m3_subnormal_exercise():
    # 0 0000 101: a subnormal, 5/8 x 2^(1 - 7)
    assert key("l05.ex-decode-e4m3") == 5 / 8 * 2.0**-6 == 0.009765625
    question = quiz.get("l05.ex-decode-e4m3")
    for bits in [question.params["bits"], *question.variants["bits"]]:
        oracle = float(np.array([int(bits.replace(" ", ""), 2)], np.uint8).view(ml_dtypes.float8_e4m3fn)[0])
        assert key("l05.ex-decode-e4m3", bits=bits) == oracle
        assert int(bits.replace(" ", "")[1:5], 2) == 0  # every variant is a subnormal


# --- overflow: 1e9 -> NaN in E4M3, inf in E5M2 --------------------------------------------------------

def test_overflow_of_1e9():
    assert math.isnan(precision.round_to(1e9, "e4m3"))
    assert precision.round_to(1e9, "e5m2") == math.inf
    assert math.isnan(float(np.float32(1e9).astype(ml_dtypes.float8_e4m3fn)))
    assert float(np.float32(1e9).astype(ml_dtypes.float8_e5m2)) == math.inf


# --- throughput and ridge per precision (H100 datasheet: 989 / 1979 dense, ridges 295 and 591) ---------------

def test_h100_peaks_double_per_halving():
    assert H100.peak("fp8") == pytest.approx(2 * H100.peak("bf16"), rel=1e-3)  # 1979 vs 2 x 989
    assert H100.peak("bf16") == 2 * H100.peak("tf32")
    assert H100.ridge("bf16") == pytest.approx(296, rel=0.005)
    assert H100.ridge("fp8") == pytest.approx(591, rel=0.005)


def test_fp32_tf32_bf16_do_not_reach_equally_far_down():
    """Issue 18: the three share their smallest normal number (2^-126) and nearly their largest, but their
    smallest subnormals are 2^-149 = 1.4e-45, 2^-136 = 1.15e-41 and 2^-133 = 9.2e-41 (ml_dtypes' finfo for the
    two it has)."""
    low = {name: precision.get(name).min_subnormal for name in ("fp32", "tf32", "bf16")}
    assert low == {"fp32": 2.0**-149, "tf32": 2.0**-136, "bf16": 2.0**-133}
    assert low["fp32"] == float(np.finfo(np.float32).smallest_subnormal)
    assert low["bf16"] == float(ml_dtypes.finfo(ml_dtypes.bfloat16).smallest_subnormal)
    assert {precision.get(name).min_normal for name in low} == {2.0**-126}
    spans = [math.log10(precision.get(name).max / low[name]) for name in ("fp32", "tf32", "bf16")]
    assert spans[0] > spans[1] > spans[2] and spans[0] - spans[2] > 4  # 83.4, 79.5, 78.6 decades


def test_the_halving_rule_is_stated_where_it_holds():
    """The lesson checks 'halve the bits, double the rate' across the catalog instead of stating it as a law:
    the TPU v4 runs INT8 at its BF16 rate (Google's TPU v4 page: 275 and 275)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "lessons" / "05-number-formats.md").read_text("utf-8")
    text = " ".join(text.split())  # as read, whatever the line breaks
    assert "reach equally far." not in text and "reach equally far:" not in text
    assert "Each halving of the operand width doubles" not in text
    assert "TPU v4" in text and "2:4 structured sparsity" in text
    v4 = roofkit.hw("tpu-v4")
    assert v4.peak("int8") == v4.peak("bf16")


def test_fp8_gemm_keeps_its_crossing_size():
    """The balance-point dimension is 3 I* in 16-bit; in FP8 with 1-byte operands it is the same n."""
    # n = 3 b I* / 2: b halves and I* doubles. B200: 4500 / 2250 is exactly 2, so the FP8 answer is the
    # BF16 one: the smallest whole n at or above 3 x 2250 / 8 = 843.75
    assert key("l05.fp8-gemm-crossing") == 844 == math.ceil(3 * 1 * 4500e12 / 8e12 / 2)
    assert key("l05.fp8-gemm-crossing", dtype="bf16") == 844
    ridge = roofkit.hw("b200").ridge("fp8")
    assert formulas.gemm(844, 844, 844, "fp8").intensity >= ridge > formulas.gemm(843, 843, 843, "fp8").intensity
    assert key("l05.fp8-gemm-crossing", hw="h100 pcie") == math.ceil(3 * 1513e12 / 2e12 / 2)  # 1135
    # the worked example's H100 (1979 / 989 is 2 to 0.1%)
    assert roofline.balance_point_matrix_size("h100", "fp8") == pytest.approx(
        roofline.balance_point_matrix_size("h100", "bf16"), rel=1e-3)


# --- accumulation ---------------------------------------------------------------------------------------

def test_gap_ladder_matches_ml_dtypes():
    """precision.spacing against ml_dtypes' np.spacing: 2^(k-7) on [2^k, 2^(k+1)) for BF16."""
    for k in range(-20, 30):
        for x in (2.0**k, 1.5 * 2.0**k):
            assert precision.spacing(x, "bf16") == float(np.spacing(ml_dtypes.bfloat16(x))) == 2.0 ** (k - 7)
    for name, dtype in (("fp16", np.float16), ("e4m3", ml_dtypes.float8_e4m3fn), ("e5m2", ml_dtypes.float8_e5m2)):
        for x in (1.0, 3.0, 100.0, 1e-3):
            assert precision.spacing(x, name) == float(np.spacing(np.array(x, dtype=dtype))), (name, x)
    assert precision.spacing(1e-40, "bf16") == precision.get("bf16").min_subnormal  # subnormals: a fixed step
    assert precision.spacing(-3.0, "bf16") == precision.spacing(3.0, "bf16")
    with pytest.raises(roofkit.InvalidValue, match="finite"):
        precision.spacing(1e9, "e4m3")  # NaN in E4M3


def test_counting_by_one_in_bf16_stops_at_256():
    """The lesson's worked example: at 256 the gap is 2, so + 1 is a tie, and ties go to the even 256."""
    count = np.cumsum(np.ones(1000, dtype=ml_dtypes.bfloat16), dtype=ml_dtypes.bfloat16)
    assert float(count[-1]) == 256 == lesson_05.running_sum(1, 1000) == lesson_05.stall_point(1)


def test_bf16_accumulator_stalls_at_4():
    """The oracle is ml_dtypes' own BF16 arithmetic, one addition at a time."""
    x = np.full(4096, 0.01, dtype=ml_dtypes.bfloat16)
    oracle = float(np.cumsum(x, dtype=ml_dtypes.bfloat16)[-1])
    assert key("l05.bf16-accumulator") == oracle == 4.0
    assert float(np.cumsum(x, dtype=np.float32)[-1]) == pytest.approx(41.0, rel=1e-3)
    # a smaller addend stalls earlier, a bigger one later: the key follows the spacing argument
    for addend in (0.001, 0.003, 0.005, 0.02, 0.05, 0.1):
        xs = np.full(4096, addend, dtype=ml_dtypes.bfloat16)
        assert key("l05.bf16-accumulator", addend=addend) == float(np.cumsum(xs, dtype=ml_dtypes.bfloat16)[-1])
        assert key("l05.bf16-accumulator", addend=addend) == lesson_05.stall_point(addend)  # the half-gap rule


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
    ("l05.fp16-max", 65536, "significand-two"),
    ("l05.decode-bf16", -10.75, "sign"),
    ("l05.decode-bf16", 2.75, "no-implicit-one"),
    ("l05.decode-bf16", 5.375, "bias-128"),
    ("l05.ex-decode-e4m3", 1.625 * 2.0**-7, "normal-rule"),
    ("l05.ex-decode-e4m3", 5 / 8 * 2.0**-7, "exponent-minus-bias"),
    ("l05.ex-decode-e4m3", 0, "zero"),
    ("l05.tf32-intensity", 2 * 5120**3 / (3 * 5120**2 * 19 / 8), "tf32-19-bits"),
    ("l05.tf32-intensity", 5120 / 3, "tf32-16-bits"),
    ("l05.bf16-accumulator", 40.96, "exact-sum"),
    ("l05.bf16-accumulator", 2, "whole-gap"),
    ("l05.fp8-gemm-crossing", 1688, "kept-2-bytes"),
    ("l05.fp8-gemm-crossing", 422, "bf16-ridge"),
    ("l05.e4m3-max", 240, "ieee-rules"),
    ("l05.e4m3-max", 480, "nan-code-used"),
    ("l05.e4m3-max", 512, "significand-two"),
    ("l05.ex-gradient-format", "e4m3", "e4m3-for-gradients"),
])
def test_published_wrong_answers_get_their_feedback(question_id, answer, name):
    verdict = quiz.judge(quiz.get(question_id), answer)
    assert verdict.correct is False and verdict.misconception == name


@pytest.mark.parametrize("question_id, answer", [
    ("l05.fp16-max", 65504), ("l05.fp16-max", "65504"), ("l05.tf32-intensity", "853.3 FLOP/byte"),
    ("l05.bf16-accumulator", 4), ("l05.fp8-gemm-crossing", 844), ("l05.fp8-gemm-crossing", "844"),
    ("l05.e4m3-max", 448), ("l05.ex-gradient-format", "E5M2"), ("l05.bf16-or-fp16", "FP16"),
    ("l05.decode-bf16", 10.75), ("l05.decode-bf16", "10.8"), ("l05.ex-decode-e4m3", "5/8 * 2**-6"),
])
def test_right_answers_as_a_learner_types_them(question_id, answer):
    assert quiz.judge(quiz.get(question_id), answer).correct is True


@pytest.mark.parametrize("question_id, answer", [
    ("l05.fp16-max", 65503), ("l05.fp16-max", 65505), ("l05.e4m3-max", 447), ("l05.fp8-gemm-crossing", 843),
    ("l05.fp8-gemm-crossing", 845), ("l05.bf16-accumulator", 3.99),
])
def test_exact_answers_reject_their_neighbours(question_id, answer):
    assert quiz.judge(quiz.get(question_id), answer).correct is False


def test_hints_do_not_hand_over_the_key():
    for question in quiz.questions("05"):
        for hint in question.hints:
            for call in ("from_bits", "balance_point_matrix_size", "crossing_size", "running_sum", ".spacing("):
                assert call not in hint, (question.id, hint)
