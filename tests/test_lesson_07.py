"""Lesson 07 (MFU and HFU): the sources' published numbers replayed against the bank's keys."""

import pytest

from roofkit import formulas, hardware, quiz, training
from roofkit.quiz import answer_key as key

H100_BF16 = hardware.get("h100").peak("bf16")




def wrong(question_id, answer):
    """The misconception a wrong answer is recognised as."""
    verdict = quiz.judge(quiz.get(question_id), answer)
    assert verdict.correct is False
    return verdict.misconception


# --- seed 000: MFU from tokens/s, 3,000 vs 900 tokens/s per GPU -----------------------


def test_seed_000_quiz_3000_tokens_per_s_is_127_percent():
    # 6 x 70e9 x 3000 = 1.26e15 FLOP/s against about 9.9e14: "127%?!"
    assert key("l07.mfu-3000") == pytest.approx(1.27, abs=0.01)
    assert key("l07.verdict-3000") == "impossible"


def test_seed_000_quiz_900_tokens_per_s_is_about_38_percent():
    assert key("l07.mfu-3000", tokens_per_s_per_gpu=900) == pytest.approx(0.38, abs=0.005)
    assert key("l07.verdict-3000", tokens_per_s_per_gpu=900) == "plausible"
    # between 60% and 100%: suspicious
    assert key("l07.verdict-3000", tokens_per_s_per_gpu=2000) == "suspicious"


def test_cluster_log_is_900_tokens_per_s_per_gpu():
    assert key("l07.mfu-cluster-log") == pytest.approx(key("l07.mfu-3000", tokens_per_s_per_gpu=900))
    assert key("l07.mfu-cluster-log") == pytest.approx(0.38, abs=0.005)


def test_mfu_misconceptions_are_named():
    mfu = key("l07.mfu-3000")
    assert wrong("l07.mfu-3000", mfu * H100_BF16 / (2 * H100_BF16)) == "sparse-peak"  # divided by 1979
    assert wrong("l07.mfu-3000", 2 * 70e9 * 3000 / H100_BF16) == "forward-only"
    assert wrong("l07.mfu-3000", 127.4) == "percent"
    assert wrong("l07.verdict-3000", "plausible") == "accepted-over-100"
    # the cluster's total tokens/s divided by one GPU's peak: about 391 "MFU"
    assert wrong("l07.mfu-cluster-log", 6 * 70e9 * 921_600 / H100_BF16) == "total-as-per-gpu"


# --- seed 004: checkpointing (HFU 80%, MFU 35%) and padding (MFU = HFU x 0.131) -------


def test_seed_004_checkpointing_example():
    assert training.hfu((50 + 450 + 300) * 1e12, 10, 100e12) == pytest.approx(0.80)
    assert key("l07.checkpoint-mfu") == pytest.approx(0.35)
    assert wrong("l07.checkpoint-mfu", 0.80) == "hfu-as-mfu"
    assert wrong("l07.checkpoint-mfu", 35) == "percent"


def test_realistic_recompute_is_one_extra_forward():
    # the lesson's correction: full recomputation costs about one forward pass, not 9 of them
    assert training.hfu((50 + 50 + 300) * 1e12, 10, 100e12) == pytest.approx(0.40)
    assert training.recompute_flops(1, 1) / training.training_flops(1, 1) == pytest.approx(8 / 6)


def test_seed_004_padding_example():
    assert formulas.gemm(130, 130, 130).flops == 4_394_000
    assert formulas.gemm_padded(130, 130, 130, tile=128) == 33_554_432
    assert key("l07.padding-mfu") == pytest.approx(0.8 * 4_394_000 / 33_554_432)
    assert key("l07.padding-mfu") == pytest.approx(0.8 * 0.131, rel=0.005)
    assert wrong("l07.padding-mfu", 0.8) == "hfu-as-mfu"
    assert wrong("l07.padding-mfu", 0.8 * (130 / 256) ** 2) == "two-dimensions"
    # a size that fills its tiles wastes nothing
    assert key("l07.padding-mfu", m=256) == pytest.approx(0.8)


# --- seed 003, exercise 2: no model size given -----------------------------------------


def test_seed_003_exercise_2_depends_on_the_model_size():
    # "100B tokens in 30 days on 1,024 H100s: compute the MFU" has no single answer
    seven, seventy = key("l07.ex-mfu-if-7b"), key("l07.ex-mfu-if-7b", params="70B")
    assert seventy == pytest.approx(10 * seven)
    # N that makes it 40%: 0.4 x 1024 x 989e12 x 30 days / (6 x 100e9) ~ 1.75e12
    assert key("l07.params-for-40") == pytest.approx(0.4 * 1024 * 989e12 * 30 * 86400 / (6 * 100e9), rel=1e-3)
    assert key("l07.params-for-40") == pytest.approx(1.75e12, rel=0.01)
    assert key("l07.ex-mfu-if-7b") == pytest.approx(0.0016, rel=0.01)  # a mostly idle cluster
    assert wrong("l07.ex-mfu-if-7b", 1024 * key("l07.ex-mfu-if-7b")) == "one-gpu"
    assert wrong("l07.params-for-40", key("l07.params-for-40") / 3600) == "hours-not-seconds"


def test_palm_attention_term():
    # PaLM appendix B: 6N + 12 L H Q T FLOPs per token, the count nanoGPT's estimate_mfu uses
    N, L, H, Q, T = 6.7e9, 32, 32, 128, 4096
    expected = (6 * N + 12 * L * H * Q * T) * 8000 / H100_BF16
    assert key("l07.ex-palm-mfu") == pytest.approx(expected)
    assert wrong("l07.ex-palm-mfu", 6 * N * 8000 / H100_BF16) == "no-attention"


def test_palms_published_mfu_and_hfu_judged():
    # PaLM 540B: 46.2% MFU, 57.8% HFU; "excellent 55-65%" is an HFU-sized band
    assert training.mfu_verdict(0.462).level == "ok"
    assert training.mfu_verdict(0.65).level == "suspicious"
    assert training.mfu_verdict(1.27).level == "impossible"
