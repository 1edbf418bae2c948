"""Lesson 13, serving a model: replay the lesson's numbers, its misconceptions and every class variant.

Oracles: hand derivations from each model's config.json; the JAX scaling book's inference chapters
(jax-ml/scaling-book, inference.md and applied-inference.md); the DeepSeek-V2 paper (arXiv:2405.04434);
Leviathan et al. 2023 (arXiv:2211.17192); Kwon et al. 2023 (vLLM, arXiv:2309.06180). Typed numbers here are
those oracles; the keys come from the bank.
"""

import itertools
import math
import random

import pytest

import roofkit
from roofkit import quiz
from roofkit.inference import kvcache, latency, memory, paged, speculative
from roofkit.quiz import answer_key as key

from helpers import verdict


def test_bank_has_the_issues_questions():
    ids = {q.id for q in quiz.questions("13")}
    assert {"l13.ttft", "l13.kv-sequence", "l13.max-batch", "l13.attention-intensity", "l13.throughput",
            "l13.int4-speedup", "l13.spec-tokens", "l13.paged-waste", "l13.worked-throughput", "l13.ex-min-gpus",
            "l13.ex-max-context", "l13.ex-spec-speedup"} <= ids
    assert sum(q.points == 2 for q in quiz.questions("13")) >= 3


# --- the KV cache and its four misconceptions ------------------------------------------------------------


def test_kv_sequence_by_hand():
    # Llama 3 70B config.json: 80 layers, 8 K/V heads of 128; BF16; 8,192 tokens
    assert key("l13.kv-sequence") == 2 * 80 * 8 * 128 * 2 * 8192 == 2_684_354_560
    assert key("l13.kv-sequence", context=32768) == 4 * 2_684_354_560
    assert verdict("l13.kv-sequence", "2.68 GB").correct
    assert verdict("l13.kv-sequence", "2.5 GiB").correct  # the same bytes, said right


@pytest.mark.parametrize("answer, name", [
    (80 * 8 * 128 * 2 * 8192, "k-or-v-once"),           # K or V only
    (2 * 8 * 128 * 2 * 8192, "one-layer"),              # one layer
    (2 * 80 * 64 * 128 * 2 * 8192, "gqa-ignored"),      # 64 query heads cached
    ("2.5 GB", "gib-as-gb"),                            # GiB typed as GB
])
def test_kv_sequence_misconceptions_are_named(answer, name):
    v = verdict("l13.kv-sequence", answer)
    assert v.correct is False and v.misconception == name


# --- memory ---------------------------------------------------------------------------------------------------


def test_max_batch_by_hand():
    h100 = roofkit.hw("h100")
    free = 0.9 * h100.capacity_bytes - 2 * roofkit.model("llama-3-8b").params
    assert key("l13.max-batch") == math.floor(free / (2 * 32 * 8 * 128 * 2 * 32768)) == 14
    assert key("l13.max-batch", hw="h200") == 27
    assert verdict("l13.max-batch", 13).correct is False and verdict("l13.max-batch", "14").correct


def test_max_batch_misconceptions():
    capacity = roofkit.hw("h100").capacity_bytes
    free = 0.9 * capacity - 2 * roofkit.model("llama-3-8b").params
    assert verdict("l13.max-batch", math.floor(2 * free / 4.294967296e9)).misconception == "k-or-v-once"
    assert verdict("l13.max-batch", math.floor(free / (4 * 4.294967296e9))).misconception == "gqa-ignored"
    assert verdict("l13.max-batch", math.floor((capacity - 2 * 8.03e9) / 4.294967296e9)).misconception == "no-reserve"


def test_fewest_gpus_for_llama_405b():
    # 405.85B parameters: 811.7 GB in BF16; 0.9 x 85.5 GB = 77.0 GB usable per H100 -> 11
    assert key("l13.ex-min-gpus") == 11 == math.ceil(2 * roofkit.model("llama-3.1-405b").params / (0.9 * 81559 * 2**20))
    assert verdict("l13.ex-min-gpus", 10).misconception == "no-reserve"
    assert key("l13.ex-min-gpus", weights_dtype="fp8") == 6


def test_max_context_with_int4_weights():
    p = memory.plan("llama-3-70b", "h100", 2, 4096, 16, "int4")
    assert key("l13.ex-max-context") == math.floor(p.free_bytes / (16 * 327_680))
    assert verdict("l13.ex-max-context", key("l13.ex-max-context") + 1).correct is False


# --- latency and throughput ---------------------------------------------------------------------------------------


def test_ttft_is_a_compute_bound_prefill():
    ttft = key("l13.ttft")
    # 2 N P FLOPs at the BF16 peak is a lower bound; attention and the memory-bound glue add a little
    floor = 2 * roofkit.model("llama-3-8b").params * 2048 / roofkit.hw("h100").peak("bf16")
    assert 1 < ttft / floor < 1.3
    assert verdict("l13.ttft", 2048 * latency.tpot("llama-3-8b", "h100", 1, 2048)).misconception == \
        "prompt-as-decode-steps"


def test_attention_intensity_is_the_group_size():
    # Llama 3 70B: 64 query heads per 8 K/V heads; (4 d_h + 5) FLOPs per score over 4 d_h bytes of K and V per group
    assert key("l13.attention-intensity") == pytest.approx(8 * (1 + 5 / 512), rel=0.01)
    assert key("l13.attention-intensity", kv_dtype="fp8") == pytest.approx(2 * key("l13.attention-intensity"),
                                                                           rel=0.01)
    assert verdict("l13.attention-intensity", 1.0).misconception == "gqa-ignored"


def test_throughput_and_its_misconceptions():
    tpot = latency.tpot("llama-3-8b", "h100", 32, 4096)
    assert key("l13.throughput") == pytest.approx(32 / tpot)
    assert verdict("l13.throughput", 32 * key("l13.throughput", batch=1)).misconception == "linear-in-batch"
    assert verdict("l13.throughput", 1 / tpot).misconception == "per-user"


def test_int4_buys_less_than_its_bytes():
    s = key("l13.int4-speedup")
    assert 2 < s < 2 / 0.515625
    assert verdict("l13.int4-speedup", 4).correct is False
    assert verdict("l13.int4-speedup", 1).misconception == "no-gain"


def test_worked_problem_llama_3_70b_on_8_h100():
    plan = memory.plan("llama-3-70b", "h100", 8, 8192)
    assert plan.weights_fit and plan.max_batch == 176
    tpot = latency.tpot("llama-3-70b", "h100", 176, 8192, gpus=8)
    assert key("l13.worked-throughput") == pytest.approx(176 / tpot)
    # the JAX scaling book's envelope for the same step: (W + B s c) / BW on 8 GPUs, the math well below
    envelope = latency.step_time_bound(176, roofkit.model("llama-3-70b").params, plan.weights_bytes,
                                       plan.kv_bytes_per_sequence, 8 * 989e12, 8 * 3.35e12)
    assert 1 < tpot / envelope < 1.25  # activations and all-reduces on top
    assert verdict("l13.worked-throughput", key("l13.worked-throughput") / 8).misconception == "per-gpu"


# --- speculative decoding and paging ---------------------------------------------------------------------------------


def test_speculative_tokens_by_hand():
    assert key("l13.spec-tokens") == pytest.approx(1 + 0.7 + 0.49 + 0.343)  # Leviathan et al., equation 1
    assert verdict("l13.spec-tokens", 0.7 + 0.49 + 0.343).misconception == "no-bonus-token"
    assert verdict("l13.spec-tokens", 2.1).misconception == "independent-acceptance"
    assert key("l13.ex-spec-speedup") == pytest.approx((1 - 0.8**5) / 0.2 / (4 * 0.1 + 1))
    assert speculative.expected_tokens(0.8, 4) == pytest.approx(3.3616)


def test_paged_waste_by_hand():
    assert key("l13.paged-waste") == pytest.approx(100 * (1 - 420 / 2048))
    assert verdict("l13.paged-waste", "79.5%").correct
    assert verdict("l13.paged-waste", 100 * 420 / 2048).misconception == "used-share"
    # paging the same sequences: 27 blocks of 16 for 420 tokens, 12 slots wasted each
    assert paged.fragmentation([420] * 64, 2048).paged_waste == pytest.approx(12 / 432)


def test_lesson_claims():
    # section 2: MLA keeps less per token than a GQA 8B model; the DeepSeek-V2 paper's 93.3% with a 6-bit cache
    assert kvcache.bytes_per_token("deepseek-v3") < kvcache.bytes_per_token("llama-3-8b")
    # section 3: Llama 3 70B in BF16 fits neither one H100 nor one H200, fits the node
    assert not memory.plan("llama-3-70b", "h200", 1, 4096).weights_fit
    assert memory.plan("llama-3-70b", "h100", 8, 32768).max_batch * 8 == pytest.approx(
        memory.plan("llama-3-70b", "h100", 8, 4096).max_batch, abs=8)
    # section 4: at an 8k context Llama 3 8B's decode never turns compute-bound; without the cache, above the ridge
    assert latency.critical_batch("llama-3-8b", "h100", context=8192) is None
    assert latency.critical_batch("llama-3-8b", "h100") > roofkit.hw("h100").ridge("bf16")
    # section 5: INT4 more than halves batch-1 TPOT on the node, and barely moves it at 256
    at = lambda b, wd: latency.tpot("llama-3-70b", "h100", b, 4096, gpus=8, weights_dtype=wd)  # noqa: E731
    assert at(1, "bf16") / at(1, "int4") > 2 and at(256, "bf16") / at(256, "int4") < 1.15
    # section 1: a 1,024-token prefill costs a few decode steps
    ratio = latency.ttft("mistral-7b", "h100", 1024) / latency.tpot("mistral-7b", "h100", 1, 1024)
    assert 2 < ratio < 10


# --- class variants ------------------------------------------------------------------------------------------------------


def _combinations(question, sample=40):
    names = sorted(question.variants)
    combos = [dict(zip(names, values)) for values in itertools.product(*(question.variants[n] for n in names))]
    combos = [c for c in combos if any(question.params[n] != v for n, v in c.items())]
    return random.Random(question.id).sample(combos, min(sample, len(combos)))


@pytest.mark.parametrize("question", [q for q in quiz.questions("13") if q.variants], ids=lambda q: q.id)
def test_every_variant_is_a_valid_question(question):
    assert set(question.variants) <= set(question.params)
    default = float(question.answer_key())
    for params in _combinations(question):
        asked = question.with_params(**params)
        text, k = asked.text(), float(asked.answer_key())
        assert "{" not in text and math.isfinite(k)
        assert not math.isclose(k, default, rel_tol=max(question.rtol, 1e-9)), (question.id, params)
        assert quiz.judge(asked, k).correct
        for m in asked.misconceptions:
            value = m.value(asked)
            if value is not None:
                assert quiz.judge(asked, value).correct is False, (question.id, params, m.name)


def test_every_question_has_variants():
    assert all(q.variants for q in quiz.questions("13"))
