"""Lesson 15 (a frontier run) against DeepSeek-V3's report (arXiv:2412.19437) and independent arithmetic.

The report's figures are typed here as the oracle: 37B activated parameters, 14.8T tokens, 180K H800 GPU-hours per
trillion tokens, 15,360 sequences of 4,096 tokens on 2,048 GPUs, 8 of 256 routed experts, at most 4 of 8 nodes,
d_model 7,168, a latent of 512 + 64 per layer. Calibrated figures are never typed: they are refitted; where the
lesson compares with them, the comparison is computed.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

import roofkit
from roofkit import parallel, recipe, routing, steptime
from roofkit.course import quiz
from roofkit.course.bank import lesson_15 as bank
from roofkit.inference import kvcache, latency
from roofkit.parallel import experts, published

ROOT = Path(__file__).resolve().parents[1]
LESSON = ROOT / "lessons" / "15-a-frontier-run.md"

# the report's figures (the oracle)
ACTIVE, TOKENS = 37e9, 14.8e12
GPU_HOURS_PER_T, GPUS = 180e3, 2048
SEQUENCES, SEQ = 15360, 4096
K, EXPERTS, NODES, M, D_MODEL = 8, 256, 8, 4, 7168


def key(question_id):
    return quiz.get(question_id).answer_key()


def _text() -> str:
    return LESSON.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def plans():
    return bank.deepseek_plan(), bank.deepseek_plan(calibrated=True)


# --- section 1: the run's own arithmetic ---------------------------------------------------------------------


def test_training_compute_is_6_n_active_d():
    assert key("l15.train-compute") == pytest.approx(6 * ACTIVE * TOKENS, rel=0.015)  # 36.6B in the catalog
    assert roofkit.model("deepseek-v3").params == pytest.approx(671e9, rel=0.001)


def test_throughput_step_and_gpu_hours():
    per_gpu = 1e12 / (GPU_HOURS_PER_T * 3600)
    assert key("l15.tokens-per-gpu") == pytest.approx(per_gpu) == pytest.approx(1543.2, abs=0.1)
    assert key("l15.step-time") == pytest.approx(SEQUENCES * SEQ / (per_gpu * GPUS)) == pytest.approx(19.9, abs=0.01)
    assert 14.8 * 180e3 == pytest.approx(2.664e6)  # Table 1: 2,664K GPU-hours of pre-training
    run = next(r for r in published.load("held-out") if r.hw == "h800" and r.model.key == "deepseek-v3")
    assert published.published_step_s(run) == pytest.approx(key("l15.step-time"), rel=1e-6)  # the shipped record


def test_mfu_against_each_peak():
    per_gpu = 1e12 / (GPU_HOURS_PER_T * 3600)
    h800 = roofkit.hw("h800")
    assert key("l15.mfu-peak") == pytest.approx(6 * ACTIVE * per_gpu / h800.peak("fp8"), rel=0.015)
    bf16 = quiz.get("l15.mfu-peak").with_params(dtype="bf16").answer_key()
    assert bf16 / key("l15.mfu-peak") == pytest.approx(h800.peak("fp8") / h800.peak("bf16"))
    assert "the precision the linear layers' GEMMs run in" in bank.deepseek_plan().to_dict()["mfu_convention"]


# --- section 2: FP8 per operation ------------------------------------------------------------------------------


def test_the_recipe_keeps_what_the_report_keeps():
    # section 3.3.1: embedding, output head, MoE gating, normalization and attention stay BF16/FP32; 3.3.3: FP32
    # master weights; the linear layers' Fprop, Dgrad and Wgrad in FP8; dispatch in FP8
    r = recipe.get("fp8-blockwise")
    assert (r.linear, r.dgrad, r.wgrad) == ("fp8",) * 3
    assert (r.attention, r.router, r.head, r.base, r.master_dtype) == ("bf16", "bf16", "bf16", "bf16", "fp32")
    assert r.block == 128 and r.dispatch_dtype == "fp8"
    assert key("l15.fp8-where") == "dgrad"


def test_fp8_speeds_a_layer_up_by_amdahl_not_2x():
    speedup = key("l15.fp8-layer-speedup")
    assert 1.5 < speedup < 1.9
    layer = {n: steptime.layer_kernels("deepseek-v3", 1, 4096, ep=64, moe=True, recipe=n)
             for n in ("bf16", "fp8-blockwise")}
    r = steptime.roofs("h800")
    names = {k.name for k in layer["fp8-blockwise"] if k.precision == "fp8"}
    total = steptime.kernels_time(layer["bf16"], r)
    p = sum(steptime.kernel_time(k, r) for k in layer["bf16"] if k.name in names) / total
    amdahl = 1 / ((1 - p) + p / 2)
    assert speedup <= amdahl and speedup == pytest.approx(amdahl, rel=0.02)  # "a little lower", "closely"
    stays = [k for k in layer["bf16"] if k.name not in names]
    assert max(stays, key=lambda k: steptime.kernel_time(k, r)).name == "attn"  # the largest kernel that stays
    longer = quiz.get("l15.fp8-layer-speedup").with_params(seq=16384).answer_key()
    assert longer < speedup  # "at longer sequences ... FP8 buys less"


# --- section 3: dispatch ---------------------------------------------------------------------------------------


def test_nodes_a_token_reaches():
    g = EXPERTS // NODES

    def hits(pool):
        return pool // g * (1 - math.comb(pool - g, K) / math.comb(pool, K))

    assert experts.expected_hits(K, M * g, g) == pytest.approx(hits(M * g)) == pytest.approx(3.629, abs=0.001)
    assert experts.expected_hits(K, EXPERTS, g) == pytest.approx(hits(EXPERTS)) == pytest.approx(5.295, abs=0.001)


def test_infiniband_bytes_of_one_dispatch():
    g = EXPERTS // NODES
    nodes = M * (1 - math.comb((M - 1) * g, K) / math.comb(M * g, K))
    other = nodes * (NODES - 1) / NODES  # its own node is one of the 8 alike
    assert key("l15.dispatch-ib-bytes") == pytest.approx(other * D_MODEL * (1 + 4 / 128))  # FP8 + an FP32 per 128
    plain = K * (NODES - 1) / NODES * D_MODEL * 2  # NCCL's all-to-all, a BF16 row per (token, expert)
    assert plain / key("l15.dispatch-ib-bytes") > 4


def test_the_dispatch_does_not_hide_behind_its_own_layer():
    # 4,096 tokens x the bytes per token over one 400 Gb/s port (50 GB/s per direction)
    assert key("l15.dispatch-time") == pytest.approx(4096 * key("l15.dispatch-ib-bytes") / 50e9 * 1e3)
    combine = key("l15.dispatch-time") * 2 / (1 + 4 / 128)  # the same copies in BF16
    forward = steptime.kernels_time(steptime.layer_kernels("deepseek-v3", 1, 4096, ep=64, moe=True,
                                                           recipe="fp8-blockwise"),
                                    steptime.roofs("h800", recipe="fp8-blockwise")) * 1e3
    assert key("l15.dispatch-time") + combine > forward  # "longer on the NIC than the layer's forward pass"


# --- section 4: the step ---------------------------------------------------------------------------------------


def test_the_bound_never_exceeds_the_published_step(plans):
    bound, estimate = plans
    pub = key("l15.step-time")
    assert bound.step_time_s <= pub
    assert abs(math.log(estimate.step_time_s / pub)) < abs(math.log(bound.step_time_s / pub))  # "far closer"
    assert bound.step_time_s <= estimate.step_time_s


def test_the_bound_keeps_the_experts_at_home_and_the_estimate_crosses_infiniband(plans):
    bound, estimate = plans
    assert bound.communication["ep"]["network_bytes_per_dispatch"] == 0

    def busiest(plan):
        busy = {}
        for c in plan.communication.values():
            busy[c["level"]] = busy.get(c["level"], 0.0) + c["time_s"]
        return max(busy, key=busy.get)

    assert busiest(bound) == "intra" and busiest(estimate) == "inter"
    busy = sum(c["time_s"] for c in bound.communication.values() if c["level"] == "intra")
    assert bound.step_time_s >= busy  # traffic never hides behind itself
    assert estimate.communication["ep"]["exposed_s"] == max(c["exposed_s"] for c in estimate.communication.values())


def test_hiding_the_all_to_alls_shrinks_the_bubble_too(plans):
    _, estimate = plans
    hidden = key("l15.hidden-a2a-step")
    waits = estimate.communication["ep"]["exposed_s"]
    assert hidden < estimate.step_time_s - waits < estimate.step_time_s
    assert hidden > estimate.compute_s
    text = f"{hidden:.3g} s"
    assert quiz.judge(quiz.get("l15.hidden-a2a-step"), text).correct, text  # a calibrated key, typed as text
    wrong = f"{estimate.step_time_s - waits:.3g} s"
    assert quiz.judge(quiz.get("l15.hidden-a2a-step"), wrong).misconception == "bubble-unchanged"


# --- section 5: serving ----------------------------------------------------------------------------------------


def test_experts_a_decode_step_reads():
    assert key("l15.experts-read") == pytest.approx(EXPERTS * (1 - (1 - K / EXPERTS) ** 64))
    assert routing.experts_touched(512, EXPERTS, K) == pytest.approx(EXPERTS, rel=1e-3)


def test_the_latent_cache_and_what_the_lesson_says_of_it():
    ds = roofkit.model("deepseek-v3")
    latent = kvcache.bytes_per_token(ds)
    assert latent == (512 + 64) * 61 * 2
    assert latent < kvcache.bytes_per_token(kvcache.with_kv_heads(ds, 8))
    assert latent < kvcache.bytes_per_token(kvcache.with_kv_heads(ds, ds.heads)) / 50  # "less than a fiftieth"


def test_decode_on_eight_h200s_as_the_lesson_describes_it():
    ds = roofkit.model("deepseek-v3")
    steps = {(b, c): latency.decode_step(ds, "h200", batch=b, context=4096, gpus=8, dtype="fp8", calibrated=c)
             for b in (1, 64) for c in (False, True)}

    def cache_share(s):
        return next(op for op in s.layer.ops if op.name == "attn").time_s / s.layer.time_s

    assert cache_share(steps[64, False]) > 0.5 > cache_share(steps[1, False])  # "what grows ... is the cache"
    for b in (1, 64):
        assert steps[b, True].time_s > 3 * steps[b, False].time_s  # "several times the bound at both batches"
    assert 8 * roofkit.hw("h200").capacity_bytes > roofkit.inference.weights_bytes(ds, "fp8")


# --- exercises -------------------------------------------------------------------------------------------------


def test_the_batch_ramp_bubble():
    m = 3072 // (2048 // 16)
    assert m == 24 and key("l15.ex-ramp-bubble") == pytest.approx(15 / (24 + 15))
    small = bank.deepseek_plan(3072)
    full = bank.deepseek_plan()
    assert small.bubble_s / small.step_time_s == pytest.approx(key("l15.ex-ramp-bubble"), rel=0.01)
    assert full.step_time_s < 5 * small.step_time_s  # "the step grows less than fivefold"
    assert full.bubble_s / full.step_time_s < small.bubble_s / small.step_time_s


def test_the_qwen_bound_is_above_its_published_rate():
    run = next(r for r in published.load("fitting") if r.model.key == "qwen3-235b-a22b" and r.hw == "h100")
    assert run.case == "Megatron-Bridge 25.11 Qwen3-235B-A22B on 256 H100, FP8-CS"
    reported = run.tokens / published.published_step_s(run) / run.gpus
    assert reported == pytest.approx(1575, rel=1e-3)  # the table's tokens/s per GPU
    assert key("l15.ex-qwen-throughput") >= reported  # no run beats its bound
    q = quiz.get("l15.ex-qwen-throughput")
    assert q.misconceptions[0].value(q) < key("l15.ex-qwen-throughput")  # BF16 is slower


# --- the lesson's prose ---------------------------------------------------------------------------------------


def test_the_links_ratio_the_lesson_quotes():
    nvlink, ib = roofkit.links.get("nvlink4-h800"), roofkit.links.get("ib-ndr")
    assert nvlink.nccl_bandwidth == pytest.approx(160e9) and ib.bandwidth == pytest.approx(50e9)
    assert nvlink.nccl_bandwidth / ib.bandwidth == pytest.approx(3.2)
    assert roofkit.links.get("nvlink4").bandwidth / ib.bandwidth == pytest.approx(9)  # "nine times"
    assert experts.grouped_gemm_share(experts.tokens_per_expert(4096, K, EXPERTS, ep=64)) == 1.0  # "full rate"


def test_the_lesson_cites_what_a_learner_can_look_up():
    text = _text()
    for source in ("arXiv:2412.19437", "arXiv:2405.04434", "arXiv:2505.09343", "Transformer Engine", "DeepEP",
                   "DeepGEMM", "megatron/core/transformer/moe/README.md", "section 3.3.1", "section 2.1.2",
                   "section 3.2.2", "section 3.2.1", "section 3.4", "section 4.2", "Table 1"):
        assert source in text, source
    assert not re.search(r"\b(seed|review|issue)s?\b", text, re.I)


def test_every_question_is_asked_before_its_answer_cell():
    text = _text()
    for q in quiz.questions("15"):
        assert text.index(f'ask("{q.id}")') < text.index(f'check("{q.id}"'), q.id


_SPELLED = {"FLOP": ("{:.3g} FLOP", 1), "tokens/s": ("{:.3g} tokens/s", 1), "s": ("{:.3g} s", 1),
            "ms": ("{:.3g} ms", 1), "x": ("{:.3g}x", 1), "byte": ("{:.3g} kB", 1e-3), "dimensionless": ("{:.3g}", 1)}


@pytest.mark.parametrize("question", quiz.questions("15"), ids=lambda q: q.id)
def test_every_key_typed_as_text_is_accepted(question):
    k = question.answer_key()
    if question.kind == "choice":
        typed = [k, k.upper()]
    else:
        form, scale = _SPELLED[question.unit]
        typed = [form.format(k * scale), f"{k:.4g}"]
    for text in typed:
        verdict = quiz.judge(question, text)
        assert verdict.correct, (question.id, text, verdict.feedback)
