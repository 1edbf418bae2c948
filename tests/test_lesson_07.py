"""Lesson 07 (MFU and HFU): the sources' published numbers replayed against the bank's keys."""

import pytest

from roofkit import formulas
from roofkit.catalogs import hardware
from roofkit.course import quiz
from roofkit.perf import training
from roofkit.course.quiz import answer_key as key

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


def test_cluster_log_is_850_tokens_per_s_per_gpu():
    # 1,740,800 tokens/s on 2,048 GPUs: 850 per GPU, not the 900 the lesson's report prints just before
    assert key("l07.mfu-cluster-log") == pytest.approx(key("l07.mfu-3000", tokens_per_s_per_gpu=850))
    assert key("l07.mfu-cluster-log") == pytest.approx(6 * 70e9 * 850 / 989e12)
    assert key("l07.mfu-cluster-log") != pytest.approx(key("l07.mfu-3000", tokens_per_s_per_gpu=900), rel=0.02)


def test_mfu_misconceptions_are_named():
    mfu = key("l07.mfu-3000")
    assert wrong("l07.mfu-3000", mfu * H100_BF16 / (2 * H100_BF16)) == "sparse-peak"  # divided by 1979
    assert wrong("l07.mfu-3000", 2 * 70e9 * 3000 / H100_BF16) == "forward-only"
    assert wrong("l07.mfu-3000", 127.4) == "percent"
    assert wrong("l07.verdict-3000", "plausible") == "accepted-over-100"
    # the cluster's total tokens/s divided by one GPU's peak: about 739 "MFU"
    assert wrong("l07.mfu-cluster-log", 6 * 70e9 * 1_740_800 / H100_BF16) == "total-as-per-gpu"


# --- seed 004: checkpointing (HFU 80%, MFU 35%) and padding (MFU = HFU x 0.131) -------


def test_seed_004_checkpointing_example():
    assert training.hfu((50 + 450 + 300) * 1e12, 10, 100e12) == pytest.approx(0.80)
    assert key("l07.checkpoint-mfu") == pytest.approx(0.35)
    assert wrong("l07.checkpoint-mfu", 0.80) == "hfu-as-mfu"
    assert wrong("l07.checkpoint-mfu", 35) == "percent"


def test_what_is_wrong_with_the_checkpointing_example():
    # its backward is 6x its forward; every matmul's backward is 2 products of the forward's size (4ND vs 2ND)
    forward, backward = training.forward_backward(1, 1)
    assert backward / forward == 2 and 300 / 50 == 3 * backward / forward
    # its recomputation is 9 forwards: what a 17-layer network pays when nothing but its input is kept
    # (recomputation grows with depth), while keeping every layer's input costs one forward
    assert training.recomputed_forwards(17, keep_every=17) == 450 / 50
    assert training.recomputed_forwards(80, keep_every=80) == 40.5
    assert training.recomputed_forwards(80, keep_every=1) == 1
    # a consistent step (backward 2x forward, one extra forward) in the same 10 s: MFU 15%, HFU 20%, ratio 8/6
    assert training.mfu(150e12, 10, 100e12) == pytest.approx(0.15)
    assert training.hfu(200e12, 10, 100e12) == pytest.approx(0.20)
    assert training.recompute_flops(1, 1) / training.training_flops(1, 1) == pytest.approx(8 / 6)


def test_hfu_below_mfu_under_palms_count_with_flashattention():
    # 8B (L = 32, H = 32, d_h = 128) at s = 8192, no activation checkpointing: executed / model FLOPs < 1
    palm = training.flops_per_token(8e9, 32, 32, 128, 8192)
    causal = training.flops_per_token(8e9, 32, 32, 128, 8192, causal=True)
    assert causal / palm == pytest.approx((6 * 8e9 + 6 * 32 * 32 * 128 * 8193) / (6 * 8e9 + 12 * 32 * 32 * 128 * 8192))
    # FlashAttention's backward pass recomputes QK^T: 7 products on half the scores, about 7 LHQT per token
    flash = training.flops_per_token(8e9, 32, 32, 128, 8192, causal=True, recompute_scores=True)
    assert flash == pytest.approx(6 * 8e9 + 7 * 32 * 32 * 128 * 8193)
    assert flash / palm == pytest.approx(0.912, abs=0.0005)  # not the 0.894 of 6 products
    assert causal / palm == pytest.approx(0.894, abs=0.0005)


def test_conventions_differ_by_more_than_a_fifth_at_long_sequences():
    # section 6: "honest conventions differ by 10-20%" was wrong for the lesson's own 8B example at 8K tokens
    six_n = training.flops_per_token(8e9)
    assert training.flops_per_token(8e9, 32, 32, 128, 8192) / six_n == pytest.approx(1.27, abs=0.005)


def test_seed_004_padding_example():
    assert formulas.gemm(130, 130, 130).flops == 4_394_000
    assert formulas.gemm_padded(130, 130, 130, tile=128) == 33_554_432
    assert key("l07.padding-mfu", m=130) == pytest.approx(0.8 * 4_394_000 / 33_554_432)
    assert key("l07.padding-mfu", m=130) == pytest.approx(0.8 * 0.131, rel=0.005)
    # the lesson prints 130's share (0.131) before asking, so the question asks for 160: (160/256)^3 of the work
    assert key("l07.padding-mfu") == pytest.approx(0.8 * (160 / 256) ** 3)
    assert not quiz.judge(quiz.get("l07.padding-mfu"), 0.8 * 0.131).correct
    assert wrong("l07.padding-mfu", 0.8) == "hfu-as-mfu"
    assert wrong("l07.padding-mfu", 0.8 * (160 / 256) ** 2) == "two-dimensions"
    # a size that fills its tiles wastes nothing
    assert key("l07.padding-mfu", m=256) == pytest.approx(0.8)


# --- seed 003, exercise 2: no model size given -----------------------------------------


def test_seed_003_exercise_2_depends_on_the_model_size():
    # "100B tokens in 30 days on 1,024 H100s: compute the MFU" has no single answer
    seven, seventy = key("l07.ex-mfu-if-7b"), key("l07.ex-mfu-if-7b", params="70B")
    assert seventy == pytest.approx(10 * seven)
    # the worked problem: N that makes it 40% is 0.4 x 1024 x 989e12 x 30 days / (6 x 100e9) ~ 1.75e12
    worked = key("l07.params-for-mfu", tokens="100B", days=30, gpus=1024, mfu=0.4)
    assert worked == pytest.approx(1.75e12, rel=0.01)
    # the question asks for another run: 300B tokens, 14 days, 512 GPUs, 45%
    assert key("l07.params-for-mfu") == pytest.approx(0.45 * 512 * 989e12 * 14 * 86400 / (6 * 300e9), rel=1e-3)
    assert key("l07.params-for-mfu") != pytest.approx(worked, rel=0.5)
    assert key("l07.ex-mfu-if-7b") == pytest.approx(0.0016, rel=0.01)  # a mostly idle cluster
    assert wrong("l07.ex-mfu-if-7b", 1024 * key("l07.ex-mfu-if-7b")) == "one-gpu"
    assert wrong("l07.params-for-mfu", key("l07.params-for-mfu") / 3600) == "hours-not-seconds"


def test_palm_attention_term():
    # PaLM appendix B: 6N + 12 L H Q T FLOPs per token (Q the head size d_h, T the sequence length s),
    # the count nanoGPT's estimate_mfu uses
    N, L, H, d_h, s = 6.7e9, 32, 32, 128, 4096
    expected = (6 * N + 12 * L * H * d_h * s) * 7000 / H100_BF16
    assert key("l07.ex-palm-mfu") == pytest.approx(expected)
    assert wrong("l07.ex-palm-mfu", 6 * N * 7000 / H100_BF16) == "no-attention"
    # a causal kernel's count (half the scores) is not PaLM's
    assert wrong("l07.ex-palm-mfu", (6 * N + 6 * L * H * d_h * (s + 1)) * 7000 / H100_BF16) == "causal-half"


def test_palms_published_mfu_and_hfu_judged():
    # PaLM 540B: 46.2% MFU, 57.8% HFU; Megatron-LM on A100s (Korthikanti et al. 2022, table 5): 56.0% (530B) and
    # 56.3% (1T) MFU, HFU 57.0%; Llama 3 405B on H100s: 38-43%. Published MFUs are plausible, a 65% is suspicious
    for published in (0.462, 0.560, 0.563, 0.38, 0.43, 0.415):
        assert training.mfu_verdict(published).level == "ok"
    assert training.MFU_SUSPICIOUS > 0.563
    assert training.mfu_verdict(0.462).level == "ok"
    assert training.mfu_verdict(0.65).level == "suspicious"
    assert training.mfu_verdict(1.27).level == "impossible"
