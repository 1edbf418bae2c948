"""Multi-head latent attention served: DeepSeek-V2/V3 decode with W^UK and W^UV absorbed, prefill with K and V rebuilt.

Every expected figure is worked out here from the papers' equations and the models' published sizes
(DeepSeek-V3 report, arXiv:2412.19437, section 4.2: d = 7168, 128 heads, d_h = 128, d_h^R = 64, d_c = 512,
d_c' = 1536, 61 layers, 37B activated parameters; DeepSeek-V2, arXiv:2405.04434, section 2.1 and Table 1),
not read back from the code.
"""

import pytest

from roofkit import formulas
from roofkit.catalogs import hardware, models
from roofkit.errors import InvalidValue
from roofkit.perf import layertime
from roofkit.perf.inference import kvcache, latency, serving

from helpers import run

# DeepSeek-V3's attention, from the report (section 4.2)
D, H, NOPE, ROPE, V, C, CQ = 7168, 128, 128, 64, 128, 512, 1536

# DeepSeek-V2-Lite's shape (Hugging Face deepseek-ai/DeepSeek-V2-Lite, config.json): no query latent
LITE = {"name": "DeepSeek-V2-Lite-like", "layers": 27, "d_model": 2048, "heads": 16, "d_ff": 10944,
        "vocab": 102400, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "experts": 64, "experts_per_token": 6, "shared_experts": 2, "moe_d_ff": 1408, "dense_layers": 1}


def _attn_op(step):
    return next(op for op in step.layer.ops if op.name == "attn")


def test_decode_attention_reads_the_latent_cache_once_per_sequence():
    B, ctx = 4, 3000
    ops = models.get("deepseek-v3").layer_ops(B, 1, ctx, "bf16", kv_bytes="fp8")
    cache = B * ctx * (C + ROPE) * 1  # FP8: one byte per cached element, 576 elements per token, all heads
    queries_and_outputs = B * H * ((C + ROPE) + C) * 2  # absorbed queries in, latent outputs out, BF16
    assert ops["attn"].bytes == cache + queries_and_outputs
    # not per head: the 128 heads read the one latent (MHA would read 2 x 128 x 128 per token)
    assert ops["attn"].bytes < B * ctx * 2 * H * NOPE


def test_every_tensor_parallel_gpu_reads_the_whole_latent_cache():
    B, short, long_ = 8, 1000, 3000
    steps = {t: [latency.decode_step("deepseek-v3", "h200", B, c, gpus=8, tp=t, dtype="fp8") for c in (short, long_)]
             for t in (1, 8)}
    for t, (a, b) in steps.items():  # what one more cached token costs one GPU: the whole latent, FP8
        assert _attn_op(b).bytes - _attn_op(a).bytes == pytest.approx(B * (long_ - short) * (C + ROPE))
    # the heads split: 8 GPUs do 1/8 of the attention FLOPs each
    assert _attn_op(steps[8][0]).flops == pytest.approx(_attn_op(steps[1][0]).flops / 8)


def test_absorbed_decode_flops_match_the_hand_formula():
    B, ctx = 2, 4096
    ops = models.get("deepseek-v3").layer_ops(B, 1, ctx, "bf16")
    # per token: q_nope (128) of each head through its W^UK (128 x 512); then scores over 512 + 64, a softmax
    # (5 FLOPs per score, the library's convention), probabilities times the 512-wide latent; W^UV (512 x 128)
    assert ops["attn.q_absorb"].flops == B * 2 * H * NOPE * C
    assert ops["attn"].flops == B * H * ctx * (2 * (C + ROPE) + 5 + 2 * C)
    assert ops["attn.v_absorb"].flops == B * 2 * H * C * V
    # the projections around it: W^DQ, W^UQ with W^QR, W^DKV with W^KR, W^O; no K or V is rebuilt
    assert ops["q.down"].flops == B * 2 * D * CQ and ops["q.up"].flops == B * 2 * CQ * H * (NOPE + ROPE)
    assert ops["kv.down"].flops == B * 2 * D * (C + ROPE) and ops["out"].flops == B * 2 * H * V * D
    assert "attn.kv_up" not in ops
    # in the layer's kernels the absorbed GEMMs and the fused kernel are the op 'attn'
    ks = [k for k in layertime.kernels("deepseek-v3", B, 1, ctx) if k.op == "attn"]
    assert [(k.name, k.kind) for k in ks] == [("attn.q_absorb", "gemm"), ("attn", "attention"),
                                              ("attn.v_absorb", "gemm")]


def test_prefill_rebuilds_k_and_v_and_attends_causally_with_head_dims_192_and_128():
    S = 1000
    ops = models.get("deepseek-v3").layer_ops(1, S, None, "bf16")
    pairs = S * (S + 1) // 2  # causal: query i sees keys 0..i
    qk, v = NOPE + ROPE, V
    assert ops["attn"].flops == H * pairs * (2 * qk + 5 + 2 * v)
    assert ops["attn"].bytes == 2 * H * S * (qk + v + qk + v)  # read Q, K, V, write O once, BF16
    assert ops["attn.kv_up"].flops == 2 * S * C * H * (NOPE + V)  # W^UK and W^UV on every position's latent
    assert "attn.q_absorb" not in ops
    # a cached prefix of P - s tokens: the s new queries see the whole prompt; the cache's latents are rebuilt too
    P, s = 1000, 200
    ops = models.get("deepseek-v3").layer_ops(1, s, P, "bf16", causal=True)
    assert ops["attn"].flops == H * (s * P - s * (s - 1) // 2) * (2 * qk + 5 + 2 * v)
    assert ops["attn.kv_up"].flops == 2 * P * C * H * (NOPE + V)


def test_a_prefill_step_times_the_rebuilt_k_and_v_with_the_attention():
    step = latency.prefill("deepseek-v3", "h200", 2048, gpus=8, tp=8, dtype="fp8")
    attn = _attn_op(step)
    assert attn.kernels == 2  # 'attn.kv_up' and the fused kernel
    per_gpu = H // 8
    pairs = 2048 * 2049 // 2
    assert attn.flops == pytest.approx(per_gpu * pairs * (2 * (NOPE + ROPE) + 5 + 2 * V)
                                       + 2 * 2048 * C * per_gpu * (NOPE + V))


def test_mla_reads_fewer_cache_bytes_than_gqa_of_the_same_heads():
    lite = models.from_table(LITE)
    assert lite.mla and lite.q_lora_rank is None  # the full-rank query path

    def per_token(model):  # attention's bytes per more cached token of one sequence, one layer, BF16
        a, b = (latency.decode_step(model, "h200", 1, c) for c in (1000, 2000))
        return (_attn_op(b).bytes - _attn_op(a).bytes) / 1000

    assert per_token(lite) == (512 + 64) * 2
    # DeepSeek-V2, Table 1: MLA's cache is (d_c + d_h^R) = 4.5 d_h per token, GQA's 2 n_g d_h: 2.25 groups
    gqa = {g: per_token(kvcache.with_kv_heads(lite, g)) for g in (2, 4, 16)}
    assert gqa == {g: 2 * g * 128 * 2 for g in (2, 4, 16)}
    assert gqa[2] < per_token(lite) < gqa[4] < gqa[16]


def test_the_refusal_is_gone_and_bad_options_still_fail_cleanly(capsys):
    code, out, err = run(capsys, "serve", "--model", "deepseek-v3", "--hw", "h200", "--gpus", "8", "--dtype", "fp8",
                         "--input-tokens", "1000", "--output-tokens", "200", "--batch", "32")
    assert code == 0, err
    for line in ("time to first token", "time per output token", "tokens/s"):
        assert line in out
    assert "latency not modelled" not in out and "memory only" not in out
    s = serving.serve("deepseek-v2", "h200", gpus=8, context=4096, batch=16, dtype="fp8")
    assert s.ttft_s > 0 and s.tpot_s > 0 and s.tokens_per_s > 0
    assert any("whole latent cache" in n for n in s.notes)  # the cost of latent attention under tensor parallelism
    with pytest.raises(InvalidValue, match=r"tp must divide the 128 query heads of DeepSeek-V3; got 3\."):
        latency.decode_step("deepseek-v3", "h200", 8, 2048, gpus=3, tp=3, dtype="fp8")
    with pytest.raises(InvalidValue, match=r"latent attention is modelled fused only .*got fused_attention=False"):
        models.get("deepseek-v3").layer_ops(1, 16, fused_attention=False)
    code, out, err = run(capsys, "serve", "--model", "deepseek-v3", "--hw", "h200", "--gpus", "8", "--tp", "3",
                         "--context", "4096")
    assert code == 2 and out == "" and "tp" in err and len(err.strip().splitlines()) == 1


def test_the_bound_at_batch_1_is_no_faster_than_reading_the_activated_weights():
    # DeepSeek-V3 report: 37B activated parameters per token; in FP8 one byte each, split over 8 GPUs
    bandwidth = hardware.get("h200").memory_bandwidth()
    floor_s = 37e9 * 1 / (8 * bandwidth)
    tpot = latency.tpot("deepseek-v3", "h200", 1, 1024, gpus=8, tp=8, dtype="fp8")
    assert tpot >= floor_s
    assert latency.tpot("deepseek-v3", "h200", 1, 1024, gpus=8, tp=8, dtype="fp8", calibrated=True) > tpot


def test_the_bound_is_faster_than_tensorrt_llm_on_8_h200():
    """TensorRT-LLM, "How to get best performance on DeepSeek-R1 in TensorRT LLM" (docs/source/blogs/
    Best_perf_practice_on_DeepSeek-R1_in_TensorRT-LLM.md, sections "H200 min-latency" and "H200 max-throughput"):
    DeepSeek-R1 (DeepSeek-V3's architecture) in FP8 on 8 x H200, ISL 1K, OSL 2K. Min-latency, batch 1 with
    3 MTP layers drafting: 158.1 output tokens/s per user. Max-throughput, 1,024 requests in flight, attention
    data-parallel: 11,489 output tokens/s. A bound (datasheet roofs, no speculation, tensor-parallel attention
    that reads every cache on every GPU) must not be slower than either."""
    w = dict(gpus=8, dtype="fp8", kv_dtype="bf16", input_tokens=1024, output_tokens=2048)
    assert 1 / serving.serve("deepseek-v3", "h200", batch=1, **w).tpot_s > 158.1
    assert serving.serve("deepseek-v3", "h200", batch=1024, **w).tokens_per_s > 11_489


def test_latent_formulas_in_symbols_follow_the_paper():
    import sympy

    H_, s_kv, d_c, d_r, b = (sympy.Symbol(x, positive=True) for x in ("H", "s_kv", "d_c", "d_h^R", "b"))
    cost = formulas.symbolic(formulas.attention_latent, batch=1, seq=1, kv_seq=s_kv)
    assert sympy.simplify(cost.bytes - (H_ * (2 * d_c + d_r) * b + s_kv * (d_c + d_r) * b)) == 0
    # long context: one cached element serves every head, about 2 FLOPs a head: intensity ~ H (4 d_c + 2 d_h^R) / ...
    limit = sympy.limit(cost.intensity, s_kv, sympy.oo)
    assert sympy.simplify(limit - H_ * (4 * d_c + 2 * d_r + 5) / ((d_c + d_r) * b)) == 0
    assert kvcache.latent_cache_bytes is formulas.latent_cache_bytes  # one home
