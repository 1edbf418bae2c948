"""Lesson 06 replays the sources' numbers (the classic swamping quiz, 1 + 1e-4 in BF16; the
mixed-precision paper's recipe; GradScaler's defaults; ZeRO's 16 bytes per parameter) against its
question keys, with ml_dtypes and numpy as independent oracles, and checks every misconception's feedback."""

import inspect
import math

import ml_dtypes
import numpy as np
import pytest

import roofkit
from roofkit.perf import precision, training
from roofkit.course import quiz
from roofkit.course.quiz import answer_key as key
from roofkit.course.bank import lesson_06




def test_lesson_has_its_questions():
    ids = {q.id for q in quiz.questions("06")}
    assert ids == {"l06.why-master-weights", "l06.smallest-update", "l06.loss-scale-normal",
                   "l06.bf16-loss-scaling", "l06.dynamic-skips", "l06.ex-adam-70b", "l06.ex-fp8-scale"}
    assert all(q.points == 2 for q in quiz.questions("06") if ".ex-" in q.id)


# --- "why can't you keep the weights in BF16 and skip the FP32 copy?" ------------------------

def test_update_swamping_in_real_bf16():
    one, update = ml_dtypes.bfloat16(1.0), ml_dtypes.bfloat16(1e-4)
    assert one + update == one  # the oracle: ml_dtypes' own BF16 addition
    assert np.float32(1.0) + np.float32(1e-4) != np.float32(1.0)
    # the question's weight, 0.05, sits in [2^-5, 2^-4): half the gap is 2^-13 = 1.22e-4, just above 1e-4
    w = ml_dtypes.bfloat16(0.05)
    assert w + ml_dtypes.bfloat16(1e-4) == w and w + ml_dtypes.bfloat16(2e-4) != w
    assert key("l06.why-master-weights") == "swamping"
    assert key("l06.why-master-weights", weight=1.0) == "swamping"  # the lesson's printed example
    # an update above half the gap survives, and the question says so
    assert key("l06.why-master-weights", update=0.01) == "none"
    assert key("l06.why-master-weights", weight=0.02, update=1e-4) == "none"


def test_resolution_2_to_the_minus_8():
    """A common claim, BF16's 'relative resolution ~2^-8 ~ 0.4%': half the gap eps = 2^-7, the swamping threshold."""
    smallest = key("l06.smallest-update", weight=1.0)
    assert 2.0**-8 < smallest < 2.0**-8 * (1 + 2.0**-6)
    assert quiz.judge(quiz.get("l06.smallest-update").with_params(weight=1.0), 2.0**-8).correct is True
    one = ml_dtypes.bfloat16(1.0)
    assert one + ml_dtypes.bfloat16(2.0**-8) == one  # the tie rounds to even: lost
    assert one + ml_dtypes.bfloat16(smallest) > one
    assert key("l06.smallest-update", weight=1.0, fmt="float16") == pytest.approx(2.0**-11, rel=0.01)


def test_smallest_update_at_the_questions_weight():
    """0.2 lies in [2^-3, 2^-2): BF16 neighbours are 2^-10 apart there, so about 2^-11 = 4.9e-4 survives. BF16's
    0.2 is 0.2001953125, whose last mantissa bit is 1: the tie at exactly 2^-11 rounds up, to the even neighbour."""
    w = ml_dtypes.bfloat16(0.2)
    assert float(w) == 0.2001953125
    assert key("l06.smallest-update") == 2.0**-11
    assert w + ml_dtypes.bfloat16(2.0**-11) > w and w + ml_dtypes.bfloat16(2.0**-12) == w
    assert quiz.judge(quiz.get("l06.smallest-update"), "4.9e-4").correct
    assert quiz.judge(quiz.get("l06.smallest-update"), 0.0039).correct is False  # the weight-1 figure


# --- FP16 underflow and loss scaling --------------------------------------------------------------------

def test_fp16_flushes_1e_8_and_bf16_keeps_it():
    assert float(np.float16(1e-8)) == 0.0 and float(np.float16(1e-9)) == 0.0
    assert float(ml_dtypes.bfloat16(1e-8)) != 0.0 and float(ml_dtypes.bfloat16(1e-9)) != 0.0
    assert key("l06.bf16-loss-scaling") == "no"
    assert key("l06.bf16-loss-scaling", fmt="float16") == "yes"
    assert key("l06.bf16-loss-scaling", smallest=1e-7, fmt="float16") == "no"  # a subnormal, not zero
    # the gradients the lesson casts agree: none of them is zero in BF16, half are in FP16
    g = precision.example_gradients()
    assert precision.underflow(g, "bf16")["underflow_fraction"] == 0
    assert precision.underflow(g, "fp16")["underflow_fraction"] > 0.4


def test_loss_scale_for_the_normal_range():
    S = key("l06.loss-scale-normal")
    assert S == 8192 == 2 ** math.ceil(math.log2(float(np.finfo(np.float16).smallest_normal) / 1e-8))
    assert abs(float(np.float16(1e-8 * S))) >= float(np.finfo(np.float16).smallest_normal)
    assert abs(float(np.float16(1e-8 * S / 2))) < float(np.finfo(np.float16).smallest_normal)


def test_dynamic_loss_scaling_skips():
    # the worked example: 65536 * 10 overflows FP16 (max 65504); 4096 * 10 is the first that fits: 4 halvings
    assert key("l06.dynamic-skips", max_gradient=10.0) == 4
    with np.errstate(over="ignore"):
        assert float(np.float16(65536 * 10.0)) == math.inf and float(np.float16(4096 * 10.0)) == 40960
    # the question: 128 * 300 = 38400 fits, 256 * 300 = 76800 does not: 2^16 -> 2^7, 9 halvings
    assert key("l06.dynamic-skips") == 9
    with np.errstate(over="ignore"):
        assert float(np.float16(256 * 300.0)) == math.inf and float(np.float16(128 * 300.0)) == 38400
    assert key("l06.dynamic-skips", max_gradient=0.5) == 0
    question = quiz.get("l06.dynamic-skips")
    assert not quiz.judge(question, 8).correct and not quiz.judge(question, 10).correct


def test_gradscaler_defaults_are_the_lessons():
    torch = pytest.importorskip("torch")
    defaults = {k: v.default for k, v in inspect.signature(torch.amp.GradScaler.__init__).parameters.items()}
    assert defaults["init_scale"] == 2.0**16 and defaults["growth_interval"] == 2000
    assert defaults["growth_factor"] == 2.0 and defaults["backoff_factor"] == 0.5


# --- memory: ZeRO's 2 + 2 + 12 = 16 bytes per parameter ------------------------------------------------------

def test_adam_70b():
    assert training.adam_memory_per_param()["total"] == 16
    assert key("l06.ex-adam-70b") == pytest.approx(70e9 * 16)
    assert math.ceil(key("l06.ex-adam-70b") / roofkit.hw("h100").memory_bytes) == 14
    assert math.ceil(key("l06.ex-adam-70b") / roofkit.hw("h100").capacity_bytes) == 14  # 85.5e9 as the card reports


# --- FP8 per-tensor scaling ----------------------------------------------------------------------------------

def test_fp8_scale_maps_amax_to_448():
    S = key("l06.ex-fp8-scale")
    assert S == pytest.approx(448 / 0.002)
    assert float(ml_dtypes.float8_e4m3fn(0.002 * S)) == 448.0
    assert float(ml_dtypes.finfo(ml_dtypes.float8_e4m3fn).max) == precision.get("e4m3").max == 448
    # the question names the format as the lesson's code does, and says which OCP / ml_dtypes format it is
    question = quiz.get("l06.ex-fp8-scale")
    assert question.params["fmt"] == "e4m3" and "float8_e4m3fn" in question.text()


def test_lesson_06_says_where_448_and_its_notation_come_from():
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "lessons" / "06-mixed-precision.md").read_text("utf-8")
    first_448 = text.index("448")
    assert "lesson 05" in text[first_448 - 300:first_448 + 100]
    assert "lesson 05's notation" in text[:text.index("## 1.")]
    # questions asked before the numbers that answer them
    assert text.index('ask("l06.smallest-update")') < text.index("an update must exceed about")
    assert text.index('ask("l06.bf16-loss-scaling")') < text.index("precision.underflow(g, fmt)")


# --- misconceptions --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("question_id, answer, name", [
    ("l06.why-master-weights", "underflow", "underflow"),
    ("l06.why-master-weights", "speed", "speed"),
    ("l06.why-master-weights", "overflow", "overflow"),
    ("l06.smallest-update", 2.0**-10, "whole-gap"),
    ("l06.smallest-update", 7.45e-9, "fp32-threshold"),
    ("l06.loss-scale-normal", 4, "nonzero-only"),
    ("l06.loss-scale-normal", 6104, "not-a-power-of-two"),
    ("l06.bf16-loss-scaling", "yes", "bf16-like-fp16"),
    ("l06.dynamic-skips", 10, "counted-good-step"),
    ("l06.ex-adam-70b", "140 GB", "weights-only"),
    ("l06.ex-adam-70b", 70e9 * 12, "no-master-copy"),
    ("l06.ex-fp8-scale", 57344 / 0.002, "e5m2-max"),
    ("l06.ex-fp8-scale", 0.002 / 448, "inverted"),
])
def test_wrong_answers_get_their_feedback(question_id, answer, name):
    verdict = quiz.judge(quiz.get(question_id), answer)
    assert verdict.correct is False and verdict.misconception == name


@pytest.mark.parametrize("question_id, answer", [
    ("l06.why-master-weights", "Swamping"), ("l06.smallest-update", 0.00049), ("l06.loss-scale-normal", 8192),
    ("l06.bf16-loss-scaling", "no"), ("l06.dynamic-skips", 9), ("l06.ex-adam-70b", "1.12 TB"),
    ("l06.ex-adam-70b", "1120 GB"), ("l06.ex-fp8-scale", 224000),
])
def test_right_answers_as_a_learner_types_them(question_id, answer):
    assert quiz.judge(quiz.get(question_id), answer).correct is True


def test_helpers_refuse_bad_input():
    with pytest.raises(roofkit.InvalidValue, match="gradient"):
        lesson_06.smallest_power_of_two_scale(0)
    assert lesson_06.smallest_power_of_two_scale(-1e-8) == 8192  # the sign does not matter


def test_hints_do_not_hand_over_the_key():
    for question in quiz.questions("06"):
        for hint in question.hints:
            for call in ("swamping(", "underflow(", "loss_scaling(", "dynamic_loss_scale(", "adam_memory_per_param",
                         "skipped_steps", "smallest_power_of_two_scale"):
                assert call not in hint, (question.id, hint)


def test_fp8_per_tensor_scaling_leaves_few_subnormals():
    """The lesson's claim: with S = 448 / amax nothing flushes to zero and almost every value is normal."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(10_000) * 1e-3).astype(np.float32)
    scaled = x * (448 / float(np.abs(x).max()))
    u = precision.underflow(scaled, "e4m3")
    assert u["underflow_fraction"] == 0 and u["subnormal_fraction"] < 0.01
    assert precision.underflow(x, "e4m3")["underflow_fraction"] > 0.5  # unscaled: most become zero
