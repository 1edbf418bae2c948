"""Lesson 11, the capstone: replay the lesson's numbers and its corrections of the sources."""

import math

import pytest

import roofkit
from roofkit import formulas, fusion, quiz, roofline
from roofkit.quiz import answer_key as key

LLAMA2_7B = dict(d_model=4096, n_heads=32, d_ff=11008, gated=True)
GEMMS = ("qkv", "out", "mlp.up", "mlp.gate", "mlp.down")




def verdict(qid, answer):
    return quiz.judge(quiz.get(qid), answer)


def test_bank_has_the_briefs_questions():
    ids = {q.id for q in quiz.questions("11")}
    assert {"l11.classify-attn", "l11.layer-time", "l11.memory-fraction", "l11.fp8-speedup",
            "l11.decode-batch", "l11.fuse-first"} <= ids
    assert sum(q.points == 2 for q in quiz.questions("11")) >= 3


# --- the model: Llama 2 7B ----------------------------------------------------------------

def test_llama2_7b_parameter_count_from_the_gemms():
    # Meta's released Llama-2-7b has 6,738,415,616 parameters (Hugging Face model page), of which
    # 2 x 32,000 x 4096 are the embedding and output matrices and 65 x 4096 are norm weights.
    ops = formulas.transformer_layer_ops(1, 1, **LLAMA2_7B, kv_seq=1)
    per_layer = sum(ops[name].flops for name in GEMMS) / 2
    published_layers = 6_738_415_616 - 2 * 32_000 * 4096 - 65 * 4096
    assert 32 * per_layer == published_layers


# --- prefill -------------------------------------------------------------------------------

def test_fused_attention_is_compute_bound_in_prefill():
    assert key("l11.classify-attn") == "compute"
    assert verdict("l11.classify-attn", "memory").misconception == "attention-is-memory-bound"
    # a variant that names a memory-bound op has that op's bound as key, and no misleading feedback
    assert key("l11.classify-attn", op="mlp.act") == "memory"
    assert quiz.judge(quiz.get("l11.classify-attn").with_params(op="mlp.act"), "compute").misconception is None


def test_layer_time_and_its_wrong_versions():
    t = key("l11.layer-time")
    assert 2.1e-3 < t < 2.2e-3  # about 2.14 ms on an H100 in BF16
    assert verdict("l11.layer-time", "2.14 ms").correct
    ops = formulas.transformer_layer_ops(1, 4096, **LLAMA2_7B)
    flops_only = sum(ops.values()).flops / roofkit.hw("h100").peak("bf16")
    assert verdict("l11.layer-time", flops_only).misconception == "flops-only"
    upper = sum(roofline.analyze(c, "h100", "bf16").time_upper_s for c in ops.values())
    assert t < upper and verdict("l11.layer-time", upper).misconception == "pessimistic-bound"


def test_memory_bound_ops_take_time_not_flops():
    share = key("l11.memory-fraction")
    assert 0.08 < share < 0.09
    flops_share = verdict("l11.memory-fraction", 0.0002)
    assert flops_share.misconception == "flops-share"
    assert verdict("l11.memory-fraction", 5 / 11).misconception == "count-share"


def test_mfu_at_the_roofline_is_the_gemms_share_of_time():
    ops = formulas.transformer_layer_ops(1, 4096, **LLAMA2_7B)
    t = {name: roofline.analyze(c, "h100", "bf16").time_s for name, c in ops.items()}
    gemm_share = sum(t[name] for name in GEMMS) / sum(t.values())
    assert math.isclose(key("l11.mfu"), gemm_share, rel_tol=1e-9)
    assert 0.75 < key("l11.mfu") < 0.8
    # the layer counts about 17% more FLOPs than 2N per token: attention's PaLM term
    per_token = sum(ops.values()).flops / 4096
    params = sum(ops[name].flops for name in GEMMS) / (2 * 4096)
    assert 1.16 < per_token / (2 * params) < 1.18


def test_flash_attention_is_the_fusion_to_do_first():
    assert key("l11.fuse-first") == "flash-attention"
    assert verdict("l11.fuse-first", "residual-rmsnorm").misconception == "residual-norm-first"
    assert verdict("l11.fuse-first", "swiglu-epilogue").misconception == "swiglu-first"
    # fused residual + RMSNorm must still write the residual stream: 5 T d -> 4 T d elements
    pair = fusion.chain(["residual_add", "rmsnorm"], n=4096 * 4096, keep=("residual_add",))
    assert pair.traffic_ratio == pytest.approx(1.25)


def test_fp8_speeds_up_the_layer_by_less_than_2x():
    s = key("l11.fp8-speedup")
    assert 1.6 < s < 1.7
    ops = formulas.transformer_layer_ops(1, 4096, **LLAMA2_7B)
    t = {name: roofline.analyze(c, "h100", "bf16").time_s for name, c in ops.items()}
    p = sum(t[name] for name in GEMMS) / sum(t.values())
    assert s == pytest.approx(fusion.amdahl(p, 2), rel=0.005)
    assert verdict("l11.fp8-speedup", 2).misconception == "fp8-halves-everything"
    assert verdict("l11.fp8-speedup", key("l11.fp8-speedup") * 1.12).correct is False
    # with every tensor in FP8 every time would halve: the recipe, not the format, limits the gain
    all_fp8 = formulas.transformer_layer_ops(1, 4096, **LLAMA2_7B, bytes_per_element="fp8")
    t8 = sum(roofline.analyze(c, "h100", "fp8").time_s for c in all_fp8.values())
    assert sum(t.values()) / t8 == pytest.approx(2, rel=0.001)


# --- decode -------------------------------------------------------------------------------

def test_decode_is_memory_bound_at_batch_1():
    ops = formulas.transformer_layer_ops(1, 1, **LLAMA2_7B, kv_seq=4096)
    assert {roofline.analyze(c, "h100", "bf16").bound for c in ops.values()} == {"memory"}
    # about 222 tokens/s for 32 layers, the weights and KV cache over 3.35 TB/s
    t = sum(roofline.analyze(c, "h100", "bf16").time_s for c in ops.values())
    assert 215 < 1 / (32 * t) < 230


@pytest.mark.parametrize("batch", [1, 64, 512])
def test_decode_attention_stays_memory_bound_at_any_batch(batch):
    assert key("l11.decode-attn-bound", batch=batch) == "memory"
    assert verdict("l11.decode-attn-bound", "compute").misconception == "batching-fixes-attention"


def test_kv_cache_is_half_a_megabyte_per_token():
    # 2 (K and V) x 32 layers x 4096 x 2 bytes = 524,288 bytes per token of context
    attn = formulas.transformer_layer_ops(1, 1, **LLAMA2_7B, kv_seq=4096)["attn"]
    assert 32 * attn.bytes / 4096 == pytest.approx(2 * 32 * 4096 * 2, rel=0.01)


def test_fp8_helps_decode_through_bytes_not_flops():
    s = key("l11.decode-fp8-speedup")
    assert 1.7 < s < 1.8
    assert verdict("l11.decode-fp8-speedup", 2).misconception == "fp8-halves-everything"
    assert verdict("l11.decode-fp8-speedup", 1).misconception == "peak-cannot-help"


def test_seed_003_exercise_4_decode_batch_is_345_not_about_300():
    assert key("l11.decode-batch") == 345
    ridge = roofkit.hw("h100").ridge("bf16")
    d = 4096
    assert math.ceil(ridge * d / (d - 2 * ridge)) == 345  # B* = I* d / (d - 2 I*)
    # "intensity = batch" overestimates: at B = I* the GEMM is still memory-bound
    assert formulas.gemm(round(ridge), d, d).intensity < ridge
    assert verdict("l11.decode-batch", ridge).misconception == "intensity-equals-batch"
    assert verdict("l11.decode-batch", 300).correct is False


def test_seed_003_pitfall_batch_64_is_not_compute_bound():
    assert formulas.gemm(64, 4096, 4096).intensity < roofkit.hw("h100").ridge("bf16") / 4
    assert verdict("l11.decode-batch", 64).misconception == "claim-batch-64"


def test_decode_throughput_saturates_with_batch():
    q = quiz.get("l11.decode-throughput")
    rates = {b: q.with_params(batch=b).answer_key() for b in (1, 8, 32, 128)}
    assert rates[1] < rates[8] < rates[32] < rates[128]
    assert rates[128] / rates[1] < 128 / 4  # far from linear: the KV-cache reads dominate
    assert 5000 < rates[128] < 5400
    no_kv = verdict("l11.decode-throughput", 30_344)
    assert no_kv.misconception == "ignored-kv-cache"


# --- across GPUs ----------------------------------------------------------------------------

def test_highest_ridge_spends_most_time_in_memory_bound_ops():
    assert key("l11.gpu-memory-share") == "l4"
    ridges = {g: roofkit.hw(g).ridge("bf16") for g in ("h100", "a100", "mi300x", "l4")}
    assert max(ridges, key=ridges.get) == "l4"
    assert verdict("l11.gpu-memory-share", "a100").misconception == "oldest-is-most-memory-bound"


def test_a_256_token_prompt_sits_between_the_a100_and_h100_ridges():
    gemm = formulas.transformer_layer_ops(1, 256, **LLAMA2_7B)["mlp.up"]
    assert roofline.analyze(gemm, "a100", "bf16").bound == "compute"
    assert roofline.analyze(gemm, "h100", "bf16").bound == "memory"


@pytest.mark.parametrize("qid", ["l11.layer-time", "l11.memory-fraction", "l11.fp8-speedup", "l11.mfu"])
def test_variants_on_another_chip_work(qid):
    assert key(qid, hw="mi300x") > 0
