"""Lesson 10 replays seed 004's Amdahl example, the profile ranking and the batch-size pitfall against its keys."""

import math

import pytest

from roofkit import formulas, fusion, quiz, roofline
from roofkit.quiz import answer_key as key
from roofkit.course import lesson_10




def verdict(question_id, answer):
    return quiz.judge(quiz.get(question_id), answer)


def test_seed_004_amdahl_example():
    # halving a 10 ms part of a 100 ms step saves about 5%; an infinitely fast part at most 10%
    assert fusion.amdahl_time_saved(0.1, 2) == pytest.approx(0.05)
    assert fusion.amdahl_time_saved(0.1, math.inf) == pytest.approx(0.10)
    assert key("l10.amdahl-step-saving") == pytest.approx(5e-3)
    assert verdict("l10.amdahl-step-saving", "5 ms").correct
    # expecting a 2x step from a 2x kernel: 50 ms
    assert verdict("l10.amdahl-step-saving", "50 ms").misconception == "whole-step-sped-up"
    assert verdict("l10.amdahl-step-saving", "10 ms").misconception == "part-vanished"


def test_sol_reading():
    assert lesson_10.sol_bound(88, 31) == "compute"
    assert lesson_10.sol_bound(19, 86) == "memory"
    assert lesson_10.sol_bound(9, 7) == "latency"
    assert key("l10.sol-which-latency") == "C"
    assert verdict("l10.sol-which-latency", "B").misconception == "memory-bound-one"


def test_percent_of_roofline_of_a_memory_bound_kernel():
    pct = key("l10.softmax-pct-roofline")
    predicted = roofline.analyze(formulas.softmax(32 * 4096, 4096, "bf16"), "h100", "bf16").time_s
    assert pct == pytest.approx(100 * predicted / 820e-6)  # % of roofline = predicted time / measured time
    assert 70 < pct < 90
    # against the peak FLOP/s the same kernel looks hopeless: under 1%
    assert verdict("l10.softmax-pct-roofline", 0.331).misconception == "percent-of-peak-flops"


def test_ranking_by_expected_saving():
    assert key("l10.rank-first") == "attention"
    profile = {"gemm": (480, 78), "attention": (160, 35), "elementwise": (96, 85), "optimizer": (48, 20),
               "rotary": (16, 10)}
    savings = lesson_10.expected_savings_ms(profile, 80)
    assert savings["attention"] == pytest.approx(160 * (1 - 35 / 80))  # 90 ms of an 800 ms step
    assert savings["elementwise"] == 0  # already above the target: tuning gains nothing
    assert savings["rotary"] < savings["optimizer"]  # the worst-looking kernel is not the best bet
    assert verdict("l10.rank-first", "rotary").misconception == "worst-looking-kernel"
    # after the first fix the step is 710 ms and the optimizer's 36 ms are 5.07% of it
    assert key("l10.ex-rank-next-saving") == pytest.approx(36 / 710)
    assert verdict("l10.ex-rank-next-saving", 36 / 800).misconception == "old-step-time"


def test_removing_gaps_is_bounded_by_amdahl():
    assert key("l10.ex-gaps-speedup") == pytest.approx(1 / 0.7)
    assert verdict("l10.ex-gaps-speedup", 1.3).misconception == "added-the-share"


def test_profiling_at_the_wrong_batch():
    assert roofline.analyze(formulas.gemm(1, 4096, 4096, "bf16"), "h100", "bf16").bound == "memory"
    assert key("l10.ex-wrong-batch") == "compute"
    # seed 003 says decode turns compute-bound around batch 64; on the H100 in BF16 it is in the hundreds
    assert roofline.analyze(formulas.gemm(64, 4096, 4096, "bf16"), "h100", "bf16").bound == "memory"
    assert 256 < roofline.decode_batch_to_compute_bound(4096, "h100", "bf16") < 512
