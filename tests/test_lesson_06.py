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
    # an update above half the gap survives, but rounded to a BF16 value: not applied as it is
    assert key("l06.why-master-weights", update=0.01) == "rounded"
    assert key("l06.why-master-weights", weight=0.02, update=1e-4) == "rounded"


def _bf16_only(weight, update):
    """The oracle: weight kept in BF16, the update added and the sum rounded to BF16 by ml_dtypes."""
    w = ml_dtypes.bfloat16(weight)
    total = ml_dtypes.bfloat16(np.float32(w) + np.float32(update))
    assert total == w + ml_dtypes.bfloat16(update)  # BF16 + BF16 in ml_dtypes agrees
    moved = float(total) - float(w)
    return "swamping" if moved == 0 else "exact" if moved == update else "rounded"


def test_master_weights_key_is_right_for_every_class_variant():
    """Expert review F06-1: the key used to be 'none' (nothing lost) on four class variants, where BF16 applies
    0.02 + 1e-4 as +1.22e-4 (+22%) and 0.3 + 1e-3 as +1.95e-3 (+95%). Every variant's key now says what BF16 does
    to the update, checked against ml_dtypes' own rounding, and every wrong choice is told why."""
    from roofkit.grading import variants

    question = quiz.get("l06.why-master-weights")
    every = [dict(question.params), *variants.combinations(question)]
    assert len(every) == 13  # the lesson's numbers and the twelve class variants
    keys = set()
    for params in every:
        asked = question.with_params(**params)
        expected = _bf16_only(params["weight"], params["update"])
        assert asked.answer_key() == expected, params
        assert expected != "exact"  # none of them is a whole number of gaps: 'nothing is lost' is never right
        keys.add(expected)
        assert quiz.judge(asked, expected).correct is True
        for other in question.choices:
            if other != expected:
                verdict = quiz.judge(asked, other)
                assert verdict.correct is False and verdict.misconception, (params, other)
        assert quiz.judge(asked, "none").correct is False  # the old key
    assert keys == {"swamping", "rounded"}  # the variants move the key
    # the review's two worst cases, by hand: one whole gap each, far from the update
    for weight, update, applied in ((0.02, 1e-4, 2.0**-13), (0.3, 1e-3, 2.0**-9)):
        w = ml_dtypes.bfloat16(weight)
        assert float(w + ml_dtypes.bfloat16(update)) - float(w) == applied
        assert key("l06.why-master-weights", weight=weight, update=update) == "rounded"
        verdict = quiz.judge(question.with_params(weight=weight, update=update), "swamping")
        assert verdict.correct is False and verdict.misconception == "survives-here"


def test_an_update_of_whole_gaps_is_exact():
    # 1 + 2^-6 is a BF16 value (neighbours of 1 are 2^-7 apart): nothing is rounded
    assert _bf16_only(1.0, 2.0**-6) == key("l06.why-master-weights", weight=1.0, update=2.0**-6) == "exact"
    verdict = quiz.judge(quiz.get("l06.why-master-weights").with_params(weight=1.0, update=2.0**-6), "rounded")
    assert verdict.correct is False and verdict.misconception == "whole-gaps"
    assert quiz.judge(quiz.get("l06.why-master-weights").with_params(weight=1.0, update=2.0**-6), "none").correct


def test_surviving_updates_are_applied_rounded_in_bf16_and_nearly_exactly_in_fp32():
    """The lesson's table at the question's weight, 0.05, where BF16 values are 2^-12 apart."""
    w = ml_dtypes.bfloat16(0.05)
    for update, whole_gaps in ((1e-4, 0), (2e-4, 1), (5e-4, 2), (1e-3, 4)):
        moved = float(ml_dtypes.bfloat16(np.float32(w) + np.float32(update))) - float(w)
        assert moved == whole_gaps * 2.0**-12
        r = precision.swamping(0.05, update, "bf16")
        assert r["result"] - r["weight"] == moved
        fp32 = precision.swamping(0.05, update, "fp32")
        assert abs((fp32["result"] - fp32["weight"]) / update - 1) < 1e-4  # a thousand times smaller and more


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

def test_optimizer_bytes_per_layout():
    """Expert review F06-2: 2 + 2 + 12 is ZeRO's count. PyTorch autocast keeps FP32 parameters (the master weights)
    and FP32 .grad: 4 + 4 + 4 + 4, the same 16. Megatron-LM with BF16 keeps FP32 gradients: 18."""
    zero = training.adam_memory_per_param()
    autocast = training.adam_memory_per_param(weights="fp32", grads="fp32", master=None)
    megatron = training.adam_memory_per_param(grads="fp32")
    assert (zero["weights"], zero["grads"], zero["master"] + zero["first_moment"] + zero["second_moment"]) == (2, 2, 12)
    assert [autocast[p] for p in ("weights", "grads", "master", "first_moment", "second_moment")] == [4, 4, 0, 4, 4]
    assert zero["total"] == autocast["total"] == 16 and megatron["total"] == 18
    text = _lesson()
    section = text[text.index("## 7."):text.index("## Exercises")]
    for needed in ("autocast", "param.grad.dtype", "torch.float32", "Megatron-LM", "ZeRO"):
        assert needed in section, needed


def test_moments_stay_fp32_only_in_the_standard_recipe():
    """Expert review F06-3: DeepSeek-V3 (arXiv:2412.19437, section 3.3.3) keeps AdamW's moments in BF16, master
    weights and gradients in FP32. Its beta2 = 0.95 (section 4.2) moves v by 5% a step, which BF16 keeps; the
    usual 0.999 moves it by 0.1%, which BF16 loses."""
    one = ml_dtypes.bfloat16(1.0)
    assert one + ml_dtypes.bfloat16(1 - 0.95) != one and one + ml_dtypes.bfloat16(1 - 0.999) == one
    assert not precision.swamping(1.0, 1 - 0.95, "bf16")["update_lost"]
    assert precision.swamping(1.0, 1 - 0.999, "bf16")["update_lost"]
    text = " ".join(_lesson().split())
    for section, end in (("## 2.", "## 3."), ("## 6.", "## 7.")):
        body = text[text.index(section):text.index(end)]
        assert "DeepSeek-V3" in body and "standard recipe" in body, section
    assert "2412.19437" in text and "3.3.3" in text


def test_ssd_is_cited_for_what_the_paper_says():
    """The mixed-precision paper (arXiv:1710.03740, section 3.2): a loss scale of 8 was enough for SSD, gradients
    below 2^-27 did not matter. The lesson's gradients are synthetic and say so; at 2^3 they still lose a good share."""
    text = " ".join(_lesson().split())
    section = text[text.index("## 3."):text.index("## 5.")]
    assert "much like the activation-gradient histogram" not in section
    assert "synthetic" in section and "scale of 8" in section and "2^{-27}" in section
    g = precision.example_gradients()
    assert precision.loss_scaling(g, 2.0**3, "fp16")["lost_after"] > 0.05
    assert precision.loss_scaling(g, 2.0**16, "fp16")["lost_after"] == 0


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


def _lesson():
    from pathlib import Path

    return (Path(__file__).resolve().parent.parent / "lessons" / "06-mixed-precision.md").read_text("utf-8")


def test_lesson_06_says_where_448_and_its_notation_come_from():
    text = _lesson()
    first_448 = text.index("448")
    assert "lesson 05" in text[first_448 - 300:first_448 + 100]
    assert "lesson 05's notation" in text[:text.index("## 1.")]
    # questions asked before the numbers that answer them
    assert text.index('ask("l06.smallest-update")') < text.index("an update must exceed about")
    assert text.index('ask("l06.bf16-loss-scaling")') < text.index("precision.underflow(g, fmt)")


# --- misconceptions --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("question_id, answer, name", [
    ("l06.why-master-weights", "underflow", "underflow"),
    ("l06.why-master-weights", "overflow", "overflow"),
    ("l06.why-master-weights", "exact", "as-in-fp32"),
    ("l06.why-master-weights", "nothing is lost", "as-in-fp32"),
    ("l06.why-master-weights", "rounded", "lost-here"),
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
