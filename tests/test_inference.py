"""roofkit.inference against hand-derived and published figures, and properties that must hold for any input.

The oracles:
- hand derivations from each model's config.json (typed here, not taken from roofkit's formulas);
- the JAX scaling book, jax-ml/scaling-book: inference.md ("Transformer Inference") and
  applied-inference.md ("Serving LLaMA"), whose worked numbers are quoted where they are tested;
- the DeepSeek-V2 paper (arXiv:2405.04434): MLA caches (d_c + d_h^R) l elements per token, as much as
  GQA with 2.25 groups, and with a 6-bit cache, 93.3% less than DeepSeek 67B;
- Leviathan et al. 2023 (arXiv:2211.17192): expected tokens per step and the speed-up;
- Kwon et al. 2023 (vLLM, arXiv:2309.06180): existing systems waste 60 to 80% of their KV cache memory,
  paging under 4% (a plausibility check on lengths of our choosing);
- GPTQ (arXiv:2210.17323) and AWQ (arXiv:2306.00978): groups of 128 weights share one FP16 scale.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import roofkit
from roofkit import formulas
from roofkit.catalogs import hardware, models
from roofkit.perf import layertime
from roofkit.errors import InvalidValue, RoofkitError
from roofkit.perf.inference import kvcache, latency, memory, paged, serving, speculative, weights

V5E = hardware.get("tpu-v5e")
DENSE = [m.key for m in models.catalog() if not (m.mla or m.moe)]


# --- the KV cache -----------------------------------------------------------------------------------


@pytest.mark.parametrize("key, layers, kv_heads, head_dim", [
    # typed from each config.json: num_hidden_layers, num_key_value_heads, hidden_size / num_attention_heads
    ("llama-2-7b", 32, 32, 128), ("llama-2-13b", 40, 40, 128), ("llama-2-70b", 80, 8, 128),
    ("llama-3-8b", 32, 8, 128), ("llama-3-70b", 80, 8, 128), ("llama-3.1-405b", 126, 8, 128),
    ("mistral-7b", 32, 8, 128), ("gpt-3-175b", 96, 96, 128),
])
def test_kv_bytes_per_token_is_2_layers_kv_heads_head_dim_bytes(key, layers, kv_heads, head_dim):
    for dtype, b in (("bf16", 2), ("fp8", 1), ("fp32", 4), ("int4", 0.5)):
        assert kvcache.bytes_per_token(key, dtype) == 2 * layers * kv_heads * head_dim * b
    assert kvcache.bytes_per_layer(key) * layers == kvcache.bytes_per_token(key)


def test_llama_2_70b_keeps_327680_bytes_per_token():
    assert kvcache.bytes_per_token("llama-2-70b") == 2 * 80 * 8 * 128 * 2 == 327_680


def test_scaling_book_llama_2_13b_sequence_of_8192_tokens_is_6_7_gb():
    # inference.md: "8192 (T) x 40 (K) x 128 (H) x 40 (L) x 2 (bytes) x 2 = 6.7GB"
    assert kvcache.bytes_per_sequence("llama-2-13b", 8192) == 8192 * 40 * 128 * 40 * 2 * 2
    assert kvcache.bytes_per_sequence("llama-2-13b", 8192) / 1e9 == pytest.approx(6.7, abs=0.05)
    # ... and with 8 KV heads ("1:5 GMQA"), the book's second table: 1.34 GB per sequence
    assert kvcache.bytes_per_sequence(kvcache.with_kv_heads("llama-2-13b", 8), 8192) / 1e9 == pytest.approx(1.34, abs=0.005)


def test_scaling_book_llama_3_70b_int8_cache():
    # applied-inference.md: "2 * K * H * L = 2 * 8 * 128 * 80 = 160kB" per token in int8: 160 KiB exactly
    assert kvcache.bytes_per_token("llama-3-70b", "int8") == 163_840 == 160 * 1024
    # "32k tokens ... 5.3GB / sequence"
    assert kvcache.bytes_per_sequence("llama-3-70b", 32768, "int8") / 1e9 == pytest.approx(5.3, abs=0.1)
    # "160e3 * 8192 * 32 = 41.9e9 bytes": the book multiplies 160 (KiB) as 160e3; with 160 KiB it is 42.9e9
    cache = kvcache.batch_bytes("llama-3-70b", 32, 8192, "int8")
    assert cache == 160 * 1024 * 8192 * 32
    assert cache / (160e3 * 8192 * 32) == pytest.approx(1.024)  # the KiB-for-kB slip, 2.4%


def test_mla_caches_the_latent_and_the_rope_key():
    # DeepSeek-V2, Table 1: (d_c + d_h^R) l elements per token; d_c = 512, d_h^R = 64 (config.json)
    assert kvcache.bytes_per_token("deepseek-v2") == 60 * (512 + 64) * 2
    assert kvcache.bytes_per_token("deepseek-v3") == 61 * (512 + 64) * 2 == 70_272
    # "equal to GQA with only 2.25 groups": (d_c + d_h^R) = 4.5 d_h = 2 x 2.25 d_h
    v2 = models.get("deepseek-v2")
    assert kvcache.bytes_per_token(v2) / (2 * v2.layers * v2.head_dim * 2) == 2.25
    assert kvcache.kind(v2) == "MLA"


def test_deepseek_v2_cache_is_93_percent_smaller_than_deepseek_67b():
    # DeepSeek-V2's abstract: "reduces the KV cache by 93.3%" against DeepSeek 67B (95 layers, 64 heads,
    # 8 KV heads of 128: the DeepSeek LLM paper, arXiv:2401.02954, Table 2), its cache in BF16, V2's in
    # 6 bits per element on average (DeepSeek-V2, section 3.2.3)
    dense_67b = dataclasses.replace(models.get("llama-2-70b"), layers=95, heads=64, kv_heads=8, head_dim=128)
    reduction = 1 - kvcache.bytes_per_token("deepseek-v2", 6 / 8) / kvcache.bytes_per_token(dense_67b, "bf16")
    assert round(reduction, 3) == 0.933


def test_gqa_divides_the_cache_by_the_group_size():
    for key in DENSE:
        m = models.get(key)
        mha = kvcache.with_kv_heads(m, m.heads)
        assert kvcache.bytes_per_token(mha) == kvcache.bytes_per_token(m) * kvcache.group_size(m)
        assert kvcache.kind(kvcache.with_kv_heads(m, 1)) == "MQA"
    assert [kvcache.kind(k) for k in ("llama-2-7b", "llama-3-8b", "deepseek-v3")] == ["MHA", "GQA", "MLA"]


def test_symbolic_cache_formulas():
    L, s, H_kv, d_h, b = sympy.symbols("L s H_kv d_h b", positive=True)
    forms = kvcache.symbolic()
    assert sympy.simplify(forms["attention"] - 2 * L * s * H_kv * d_h * b) == 0
    value = forms["attention"].subs({L: 80, s: 1, H_kv: 8, d_h: 128, b: 2})
    assert value == kvcache.bytes_per_token("llama-2-70b")


def test_cache_rejects_bad_input():
    with pytest.raises(InvalidValue, match="context must be a whole number of tokens"):
        kvcache.bytes_per_sequence("llama-3-8b", 10.5)
    with pytest.raises(InvalidValue, match="kv_heads must divide the 32 query heads"):
        kvcache.with_kv_heads("llama-3-8b", 5)
    with pytest.raises(RoofkitError, match="Unknown precision"):
        kvcache.bytes_per_token("llama-3-8b", "bf17")


# --- weights ------------------------------------------------------------------------------------------


def test_group_quantized_formats_count_their_scales():
    assert weights.weight_format("int4").bytes_per_weight == 0.5 + 2 / 128 == 0.515625
    assert weights.weight_format("int8").bytes_per_weight == 1 + 2 / 128
    assert weights.weight_format("int4", group=64).bytes_per_weight == 0.5 + 2 / 64
    assert weights.weight_format("bf16").bytes_per_weight == 2 and weights.weight_format("fp8").bytes_per_weight == 1
    with pytest.raises(InvalidValue, match="no per-group scales"):
        weights.weight_format("bf16", group=128)
    from roofkit import dtypes

    assert set(weights.FORMATS) == set(dtypes.PRECISIONS)  # every precision can store weights


@pytest.mark.parametrize("key", DENSE)
def test_weights_bytes_split_layers_from_the_rest(key):
    m = models.get(key)
    assert weights.weights_bytes(m, "bf16") == 2 * m.params
    layers, rest = m.layer_matrix_params, m.params - m.layer_matrix_params
    assert weights.weights_bytes(m, "int4") == pytest.approx(layers * 0.515625 + rest * 2, rel=1e-12)
    assert weights.weights_bytes(m, "fp8") == pytest.approx(layers + rest * 2, rel=1e-12)


def test_scaling_book_param_bytes():
    # inference.md: LLaMA 2-13B in bf16 "uses 26GB"; applied-inference.md: LLaMA 3-70B "140GB" in bf16
    assert weights.weights_bytes("llama-2-13b") / 1e9 == pytest.approx(26, rel=0.01)
    assert weights.weights_bytes("llama-3-70b") / 1e9 == pytest.approx(140, rel=0.01)


# --- memory plans -----------------------------------------------------------------------------------------


def test_llama_3_70b_on_8_h100_at_8k_by_hand():
    h100 = hardware.get("h100")
    p = memory.plan("llama-3-70b", "h100", gpus=8, context=8192)
    free = 8 * h100.capacity_bytes * 0.9 - 2 * models.get("llama-3-70b").params  # 81,559 MiB as nvidia-smi reports
    assert p.max_batch == math.floor(free / (327_680 * 8192)) == 176
    assert (p.tp, p.pp, p.kv_replication) == (8, 1, 1.0) and p.fits and p.weights_fit
    assert p.reserve_bytes == pytest.approx(0.1 * 8 * h100.capacity_bytes)


def test_weights_that_do_not_fit_get_a_verdict_and_the_fewest_gpus():
    p = memory.plan("llama-3-70b", "h100", gpus=1, context=8192)
    assert (p.max_batch, p.max_context, p.fits, p.weights_fit) == (0, 0, False, False)
    assert p.min_gpus == 2 == math.ceil(2 * models.get("llama-3-70b").params / (0.9 * 81559 * 2**20))
    assert "do not fit" in p.verdict and "2 GPUs at least" in p.verdict
    v3 = memory.plan("deepseek-v3", "h100", gpus=8, context=4096, weights_dtype="fp8")
    assert not v3.weights_fit and v3.min_gpus == 9  # 673 GB of FP8 weights, 77 GB usable per H100
    assert memory.plan("deepseek-v3", "h200", gpus=8, context=4096, weights_dtype="fp8").weights_fit


def test_scaling_book_smallest_slice_for_llama_3_70b_int8():
    # applied-inference.md: batch 32 at 8192 tokens, int8 params and KVs: "112e9 / 16e9 = 7 TPUs" (no reserve);
    # roofkit's int8 weights carry their scales and keep BF16 embeddings, so a little more
    p = memory.plan("llama-3-70b", "tpu-v5e", gpus=8, context=8192, batch=32, weights_dtype="int8",
                    kv_dtype="int8", reserve=0)
    total = p.weights_bytes + p.kv_bytes
    assert total / 112e9 == pytest.approx(1, abs=0.06)
    assert math.ceil(total / V5E.memory_bytes) in (7, 8)
    assert p.fits


def test_tensor_parallelism_beyond_the_kv_heads_copies_the_cache():
    assert memory.kv_replication("llama-3-70b", 8) == 1 and memory.kv_replication("llama-3-70b", 16) == 2
    assert memory.kv_replication("deepseek-v3", 8) == 8  # the latent is on every GPU
    assert memory.layout("llama-3.1-405b", "h100", 16) == memory.Layout(16, 8, 2, "hgx-h100")
    assert memory.layout("llama-3-8b", "mi300x", 4) == memory.Layout(4, 4, 1, "mi300x-xgmi")  # one xGMI platform of 8


@settings(max_examples=60, deadline=None)
@given(key=st.sampled_from(DENSE + ["deepseek-v3"]), gpus=st.sampled_from([1, 2, 4, 8]),
       context=st.integers(1, 200_000), hw=st.sampled_from(["h100", "h200", "a100", "mi300x", "b200"]))
def test_max_batch_is_the_largest_that_fits(key, gpus, context, hw):
    p = memory.plan(key, hw, gpus, context)
    if not p.weights_fit:
        assert p.max_batch == 0
        return
    need = lambda B: B * context * p.kv_bytes_per_token * p.kv_replication  # noqa: E731
    assert need(p.max_batch) <= p.free_bytes < need(p.max_batch + 1)
    assert memory.plan(key, hw, gpus, context, batch=max(1, p.max_batch)).fits == (p.max_batch >= 1)
    assert memory.plan(key, hw, gpus, context, batch=p.max_batch + 1).fits is False
    assert memory.plan(key, hw, gpus, context * 2).max_batch <= p.max_batch
    assert memory.plan(key, hw, gpus, batch=max(1, p.max_batch)).max_context >= context or p.max_batch == 0


def test_bad_plans_name_the_value():
    with pytest.raises(InvalidValue, match="gpus must be a whole number of at least 1; got 0"):
        memory.plan("llama-3-8b", "h100", gpus=0)
    with pytest.raises(InvalidValue, match=r"reserve must be a fraction .* got 1\.5"):
        memory.plan("llama-3-8b", "h100", reserve=1.5)
    with pytest.raises(InvalidValue, match="context must be a whole number"):
        memory.plan("llama-3-8b", "h100", context=-4)


# --- latency and throughput --------------------------------------------------------------------------------


def test_decode_step_is_the_layer_model_times_the_layers_plus_the_output_layer():
    s = latency.decode_step("llama-3-8b", "h100", batch=4, context=2048)
    layer = layertime.predict("llama-3-8b", 4, 1, 2048, "h100")
    assert s.layers_s == pytest.approx(32 * layer.time_s, rel=1e-12)
    head = formulas.gemm(4, 128256, 4096, "bf16")
    assert s.output_s == pytest.approx(max(head.flops / 989e12, head.bytes / 3.35e12), rel=1e-12)
    assert s.communication_s == 0 and s.time_s == pytest.approx(s.layers_s + s.output_s)


def test_batch_1_decode_reads_the_weights_and_the_cache():
    # memory-bound: TPOT ~ (weights + one sequence's cache) / bandwidth, a few percent more for activations;
    # the input embedding table is a lookup of one row, not a read of the table
    for key, context in (("llama-3-8b", 4096), ("mistral-7b", 8192), ("llama-2-7b", 2048)):
        m = models.get(key)
        read = weights.weights_bytes(m) - 2 * m.vocab * m.d_model + kvcache.bytes_per_sequence(m, context)
        bound = read / 3.35e12
        assert latency.tpot(key, "h100", 1, context) / bound == pytest.approx(1, abs=0.03)


def test_scaling_book_llama_2_13b_step_times_on_8_v5e():
    # inference.md, "Modeling throughput and latency for LLaMA 2-13B": 8 x TPU v5e, 8192-token caches
    table = {1: 4.98, 8: 12.13, 16: 20.30, 32: 36.65, 64: 69.33, 240: 249.09}  # ms
    m = models.get("llama-2-13b")
    for batch, published in table.items():
        envelope = latency.step_time_bound(batch, m.params, weights.weights_bytes(m),
                                           kvcache.bytes_per_sequence(m, 8192), 8 * V5E.peak("bf16"), 8 * V5E.bandwidth)
        assert envelope * 1e3 == pytest.approx(published, rel=0.01)
        # the layer model (activations, the ICI all-reduces) stays within a fifth of the envelope
        step = latency.decode_step(m, "tpu-v5e", batch, 8192, gpus=8)
        assert 1 < step.time_s / envelope < 1.25
    gqa = kvcache.with_kv_heads(m, 8)  # the book's second table: 4.17 ms at batch 1, 52.99 at 240
    for batch, published in {1: 4.17, 240: 52.99}.items():
        envelope = latency.step_time_bound(batch, m.params, weights.weights_bytes(m),
                                           kvcache.bytes_per_sequence(gqa, 8192), 8 * V5E.peak("bf16"), 8 * V5E.bandwidth)
        assert envelope * 1e3 == pytest.approx(published, rel=0.01)


def test_scaling_book_pop_quiz_step_times():
    # inference.md: 30B params in int8, 100 kB/token at 8192 tokens, 16 v5e (8.1e11 B/s, 1.97e14 FLOP/s each):
    # "(4 * 819e6 + 30e9) / (16 * 8.1e11) = 2.5 ms" and at 256 "21ms"
    kv = 100e3 * 8192  # the book rounds 2.568 ms down to 2.5
    assert latency.step_time_bound(4, 30e9, 30e9, kv, 16 * 1.97e14, 16 * 8.1e11) * 1e3 == pytest.approx(2.5, abs=0.1)
    assert latency.step_time_bound(256, 30e9, 30e9, kv, 16 * 1.97e14, 16 * 8.1e11) * 1e3 == pytest.approx(21, abs=0.5)


def test_scaling_book_llama_3_70b_int8_step_on_8_v5e():
    # applied-inference.md: batch 32, 8192 tokens, int8 params and KVs, bf16 FLOPs, 4x2 v5e:
    # "112e9 / (8 * 8.1e11) = 17ms", "1882 tokens / sec". The layer model, communication left out (the book
    # leaves it out), reads the scales and BF16 embeddings too: within 10%.
    s = latency.decode_step("llama-3-70b", "tpu-v5e", 32, 8192, gpus=8, weights_dtype="int8", kv_dtype="int8")
    assert (s.time_s - s.communication_s) / 17e-3 == pytest.approx(1, abs=0.1)
    assert s.communication_s > 0  # eight chips all-reduce twice per layer over ICI


def test_scaling_book_critical_batch_240_and_120_on_v5e():
    # applied-inference.md: bf16 weights and FLOPs: B > 240; int8 weights, bf16 FLOPs: B > 120. roofkit also
    # counts the activations' bytes, which raise it a little; int8 weights still halve it.
    bf16 = latency.critical_batch("llama-3-70b", "tpu-v5e")
    int8 = latency.critical_batch("llama-3-70b", "tpu-v5e", weights_dtype="int8")
    assert bf16 == pytest.approx(240, rel=0.15) and int8 == pytest.approx(120, rel=0.15)
    assert int8 / bf16 == pytest.approx(0.5, abs=0.03)


def test_critical_batch_is_where_math_time_reaches_memory_time():
    B = latency.critical_batch("llama-3-8b", "h100")
    ops = lambda b: {n: c for n, c in models.get("llama-3-8b").layer_ops(b, 1, 1).items() if n != "attn"}  # noqa: E731
    head = lambda b: formulas.gemm(b, 128256, 4096)  # noqa: E731
    ratio = lambda b: ((32 * sum(ops(b).values()).flops + head(b).flops) / 989e12) / (  # noqa: E731
        (32 * sum(ops(b).values()).bytes + head(b).bytes) / 3.35e12)
    assert ratio(B) >= 1 > ratio(B - 1)
    # at a real context, with GQA (4 query heads per K/V head), the cache reads keep decode memory-bound
    assert latency.critical_batch("llama-3-8b", "h100", context=4096) is None


def test_decode_attention_intensity_is_the_gqa_group():
    for key in DENSE:
        m = models.get(key)
        group = m.heads // m.kv_heads
        # FLOPs H (4 d_h + 5) per cached token, bytes 2 H_kv d_h x 2: I = group (1 + 5/(4 d_h)), Q and O aside
        assert latency.attention_intensity(key, 8192) == pytest.approx(group * (1 + 5 / (4 * m.head_dim)), rel=0.01)
    assert latency.attention_intensity("llama-3-70b", 8192, kv_dtype="fp8") == pytest.approx(
        2 * latency.attention_intensity("llama-3-70b", 8192), rel=0.01)


def test_weight_only_int4_pays_at_batch_1_not_at_large_batch():
    at = lambda batch, wd: latency.tpot("llama-3-70b", "h100", batch, 2048, gpus=8, weights_dtype=wd)  # noqa: E731
    small = at(1, "bf16") / at(1, "int4")
    large = at(256, "bf16") / at(256, "int4")
    assert 2 < small < 4  # the weights dominate: nearly their 2 / 0.516 = 3.9x
    assert 1 < large < small  # the caches and the math do not shrink


def test_per_op_bytes_with_int4_weights_and_an_fp8_cache():
    m = models.get("llama-3-70b")
    base = m.layer_ops(8, 1, 4096, "bf16")
    mixed = m.layer_ops(8, 1, 4096, "bf16", weight_bytes=0.515625, kv_bytes="fp8")
    for name in ("qkv", "out", "mlp.up", "mlp.gate", "mlp.down"):
        k, n = {"qkv": (8192, 10240), "out": (8192, 8192), "mlp.up": (8192, 28672), "mlp.gate": (8192, 28672),
                "mlp.down": (28672, 8192)}[name]
        assert base[name].bytes - mixed[name].bytes == pytest.approx(k * n * (2 - 0.515625))
        assert base[name].flops == mixed[name].flops
    assert base["attn"].bytes - mixed["attn"].bytes == 8 * 2 * 8 * 128 * 4096 * (2 - 1)  # K and V read at 1 byte
    assert mixed["norm1"] == base["norm1"] and mixed["mlp.act"] == base["mlp.act"]


def test_latency_grows_and_throughput_saturates_with_batch():
    steps = [latency.decode_step("llama-3-8b", "h100", B, 4096) for B in (1, 2, 4, 8, 16, 32, 64, 128)]
    times = [s.time_s for s in steps]
    rates = [s.tokens_per_s for s in steps]
    assert times == sorted(times) and rates == sorted(rates)
    assert rates[-1] / rates[-2] < rates[1] / rates[0]  # diminishing returns


def test_prefill_is_compute_bound_and_ttft_grows_with_the_prompt():
    p = latency.prefill("llama-3-8b", "h100", prompt=4096)
    assert p.phase == "prefill" and p.context == 0
    gemms = [op for op in p.layer.ops if op.name in ("qkv", "out", "mlp.up", "mlp.gate", "mlp.down")]
    assert all(op.bound == "compute" for op in gemms)
    assert latency.ttft("llama-3-8b", "h100", 1024) < latency.ttft("llama-3-8b", "h100", 4096)


def test_tensor_parallel_decode_pays_its_all_reduces():
    from roofkit.perf import comms

    s = latency.decode_step("llama-3-70b", "h100", 1, 8192, gpus=8)
    # the bound: a one-shot all-reduce of one token's 8,192 BF16 activations, one round of NVLink's 0.6 µs (NCCL's
    # LL step) and 7 peers' 16,384 bytes read at 450 GB/s each way; 80 layers x 2 (not the ring's 14 steps)
    one = 0.6e-6 + 7 * 8192 * 2 / 450e9
    assert s.communication_s == pytest.approx(80 * 2 * one)
    assert s.communication_s < 80 * 2 * comms.all_reduce(8192 * 2, 8, "hgx-h100", "ring").latency_s / 5
    assert s.layer.model == "llama-3-70b" and s.tp == 8


def test_calibrated_on_the_h200_is_slower_than_the_roofline():
    plain = latency.tpot("llama-3-8b", "h200", 1, 4096)
    calibrated = latency.tpot("llama-3-8b", "h200", 1, 4096, calibrated=True)
    assert 1.05 < calibrated / plain < 2


# --- speculative decoding ----------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(alpha=st.floats(0, 1), k=st.integers(0, 30))
def test_expected_tokens_is_the_geometric_sum(alpha, k):
    E = speculative.expected_tokens(alpha, k)
    assert E == pytest.approx(sum(alpha**i for i in range(k + 1)), rel=1e-9)
    assert 1 <= E <= k + 1 + 1e-12
    assert speculative.expected_tokens(min(1.0, alpha + 0.01), k) >= E - 1e-12


def test_leviathan_closed_form_and_edges():
    a, k = sympy.symbols("alpha k", positive=True)
    E = speculative.expected_tokens(a, k)  # sympy's sum of alpha^i for i = 0 .. k
    assert isinstance(E, sympy.Piecewise) and E.args[0][0] == k + 1  # alpha = 1: every drafted token accepted
    assert sympy.simplify(E.args[1][0] - (1 - a**(k + 1)) / (1 - a)) == 0  # Leviathan et al., equation 1
    assert isinstance(speculative.derivation()["sum"], sympy.Sum)
    assert speculative.expected_tokens(1, 4) == 5 and speculative.expected_tokens(0, 4) == 1
    assert speculative.expected_tokens(0.8, 4) == pytest.approx((1 - 0.8**5) / 0.2)
    # the speed-up with a draft that costs c of a target step: E / (k c + 1); free drafts: the expected tokens
    assert speculative.speedup(0.8, 4, 0) == pytest.approx(speculative.expected_tokens(0.8, 4))
    assert speculative.speedup(0.8, 4, 0.05) == pytest.approx(3.3616 / 1.2)
    assert speculative.best_k(0.9, 0.02) > speculative.best_k(0.5, 0.02)
    symbolic = speculative.expected_tokens(sympy.Symbol("a"), 3)
    assert sympy.simplify(symbolic - sum(sympy.Symbol("a")**i for i in range(4))) == 0


def test_speculation_plan_from_the_layer_model():
    s = speculative.plan("llama-3-70b", "llama-3-8b", "h100", k=4, alpha=0.8, context=4096, gpus=8)
    assert s.verify_step_s >= s.target_step_s  # verifying 5 tokens costs a little more than making one
    assert s.speedup == pytest.approx(s.target_step_s * s.expected_tokens / (4 * s.draft_step_s + s.verify_step_s))
    assert 1 < s.speedup < s.paper_speedup * 1.01  # the paper's form ignores the verification's extra cost
    with pytest.raises(InvalidValue, match="alpha, the acceptance rate"):
        speculative.expected_tokens(1.5, 4)
    with pytest.raises(InvalidValue, match="k, the drafted tokens"):
        speculative.expected_tokens(0.5, 2.5)


# --- paged KV cache ------------------------------------------------------------------------------------------


def test_blocks_and_waste_by_hand():
    assert [paged.blocks(n) for n in (0, 1, 16, 17, 100)] == [0, 1, 1, 2, 7]
    f = paged.fragmentation([100, 500, 2000], reserve=2048, block=16)
    assert f.used_tokens == 2600 and f.contiguous_tokens == 3 * 2048
    assert f.paged_tokens == (7 + 32 + 125) * 16


def test_vllm_paper_waste_is_plausible():
    # Kwon et al. 2023: existing systems keep real tokens in 20.4-38.2% of the KV cache (60-80% wasted),
    # vLLM wastes under 4%. Requests reserving a 2,048-token maximum but averaging a quarter of it:
    lengths = [int(2048 * (0.05 + 0.4 * ((i * 0.618034) % 1))) for i in range(1000)]  # spread over 5-45%
    f = paged.fragmentation(lengths, reserve=2048)
    assert 0.6 <= f.contiguous_waste <= 0.8
    assert f.paged_waste < 0.04
    assert f.ratio > 2  # more than twice the sequences fit


@settings(max_examples=80, deadline=None)
@given(lengths=st.lists(st.integers(0, 4096), min_size=1, max_size=50), block=st.sampled_from([1, 8, 16, 32]))
def test_paging_never_wastes_more_than_a_block_per_sequence(lengths, block):
    f = paged.fragmentation(lengths, reserve=4096, block=block)
    assert 0 <= f.paged_tokens - f.used_tokens <= len(lengths) * (block - 1)
    assert f.paged_tokens <= f.contiguous_tokens + len(lengths) * block
    assert f.paged_waste <= f.contiguous_waste + 1e-12 or f.paged_tokens > f.contiguous_tokens


def test_fragmentation_rejects_bad_input():
    with pytest.raises(InvalidValue, match="does not fit a reservation of 100"):
        paged.fragmentation([50, 200], reserve=100)
    with pytest.raises(InvalidValue, match="at least one sequence"):
        paged.fragmentation([], reserve=100)
    with pytest.raises(InvalidValue, match="lengths must be a list"):
        paged.fragmentation(12, reserve=100)


# --- the whole estimate -----------------------------------------------------------------------------------------


def test_serve_puts_it_together():
    s = serving.serve("llama-3-70b", "h100", gpus=8, context=8192, batch=64)
    d = s.to_dict()
    assert d["max_batch"] == 176 and d["fits"] is True
    assert d["tokens_per_s"] == pytest.approx(64 / d["tpot_s"])
    assert d["tpot_s"] == latency.tpot("llama-3-70b", "h100", 64, 8192, gpus=8)
    assert d["ttft_s"] == latency.ttft("llama-3-70b", "h100", 8192, gpus=8)
    assert d["reserve_bytes"] == pytest.approx(0.1 * 8 * 81559 * 2**20)


def test_import_roofkit_stays_light():
    import subprocess
    import sys

    code = ("import sys, roofkit; roofkit.inference.serve('llama-3-8b', 'h100', context=4096); "
            "assert 'sympy' not in sys.modules and 'matplotlib' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert "inference" in dir(roofkit)


# --- a mixed step: continuous batching's decode and prefill through the same weights --------------------------


def test_a_mixed_step_reads_the_weights_once_for_decode_and_prefill():
    # the mixed step's layer = the decode layer + the prefill layer, less one read of the layer's weights
    m = models.get("llama-3-8b")
    mixed = latency.step(m, "h100", 64, 1000, 2.0, 512)
    decode, prompt = m.layer_ops(64, 1, 1000), m.layer_ops(2, 512)  # the prefill is causal
    # BF16 weights, typed from the shapes: QKV 4096 x 6144, out 4096 x 4096, up, gate and down 4096 x 14336, and
    # the two norms' gains of 4096
    weights_per_layer = 2 * (4096 * 6144 + 4096 * 4096 + 3 * 4096 * 14336 + 2 * 4096)
    assert weights_per_layer == 2 * (m.layer_matrix_params / m.layers + 2 * m.d_model)
    flops = sum(op.flops for op in mixed.layer.ops)
    nbytes = sum(op.bytes for op in mixed.layer.ops)
    assert flops == pytest.approx(sum(decode.values()).flops + sum(prompt.values()).flops, rel=1e-9)
    assert nbytes == pytest.approx(sum(decode.values()).bytes + sum(prompt.values()).bytes - weights_per_layer,
                                   rel=1e-9)
    assert mixed.phase == "mixed" and mixed.prefill_tokens == 1024
    # decode alone and prefill alone are the old steps
    assert latency.step(m, "h100", 64, 1000).time_s == latency.decode_step(m, "h100", 64, 1000).time_s
    assert latency.step(m, "h100", 0, None, 1, 512).time_s == latency.prefill(m, "h100", 512).time_s
    with pytest.raises(InvalidValue, match="needs a batch to decode or a prompt to prefill"):
        latency.step(m, "h100")


def test_the_bound_is_the_roofline_sum_and_calibrated_adds_what_engines_pay():
    from roofkit.perf.inference import engine

    b = engine.roofs("h100", "fp8")
    assert (b.peak_flops, b.bandwidth, b.floor_s, b.step_s, b.overlap) == (1979e12, 3.35e12, 0, 0, True)
    assert b.time(2e12, 1e9) == max(2e12 / 1979e12, 1e9 / 3.35e12)
    cal = engine.EngineCalibration(floor_s=5e-6, step_s=1e-3)
    c = engine.roofs("h100", "fp8", True, cal)
    assert (c.peak_flops, c.bandwidth) == (1402.6e12, 2.90e12)  # ml-engineering's FP8 matmul, Azure's copy
    assert c.time(2e12, 1e9) == pytest.approx(2e12 / 1402.6e12 + 1e9 / 2.90e12 + 5e-6)  # no overlap, a floor
    s0 = latency.decode_step("llama-3-8b", "h100", 8, 2048, dtype="fp8", calibrated=True,
                             calibration=engine.EngineCalibration(5e-6, 0.0))
    s1 = latency.decode_step("llama-3-8b", "h100", 8, 2048, dtype="fp8", calibrated=True, calibration=cal)
    assert s1.time_s - s0.time_s == pytest.approx(1e-3) and s1.engine_s == 1e-3
    assert engine.activation_dtype("fp8", True) == "bf16" and engine.activation_dtype("fp8", False) == "fp8"
    with pytest.raises(InvalidValue, match="used only with calibrated=True"):
        engine.roofs("h100", "bf16", False, cal)


def test_achievable_figures_of_the_catalog_are_the_published_measurements():
    # Azure/AI-benchmarking-guide: BabelStream copy (H100 2.90, A100 1.61 TB/s), cuBLASLt A100 FP16 256.5 TFLOP/s;
    # its MI300X results (a fork of it): copy 4.11 TB/s, hipBLASLt FP8 1,159.5 TFLOP/s (6144 x 12288 x 12288)
    typed = {"h100": (2.90e12, {}), "a100": (1.61e12, {"fp16": 256.5e12}), "mi300x": (4.11e12, {"fp8": 1159.5e12})}
    for key, (copy, rates) in typed.items():
        acc = hardware.get(key)
        assert acc.memory_bandwidth(achievable=True) == pytest.approx(copy)
        assert "AI-benchmarking-guide" in acc.source("achievable_bandwidth")
        for precision, rate in rates.items():
            assert acc.peak(precision, achievable=True) == pytest.approx(rate)
            assert "AI-benchmarking-guide" in acc.source(f"achievable.{precision}")


# --- sharded serving --------------------------------------------------------------------------------------------


def test_replicas_multiply_the_throughput_of_one():
    from roofkit.perf.inference import workload

    one = workload.steady_state("llama-3-70b", "h100", 1000, 1000, gpus=2, tp=2, dtype="fp8")
    four = workload.steady_state("llama-3-70b", "h100", 1000, 1000, gpus=8, tp=2, dtype="fp8")
    assert four.replicas == 4 and four.batch == one.batch
    assert four.tokens_per_s == pytest.approx(4 * one.tokens_per_s)
    assert memory.layout("llama-3-70b", "h100", 8, tp=2) == memory.Layout(8, 2, 1, "hgx-h100", 4)
    with pytest.raises(InvalidValue, match=r"gpus \(8\) must be a multiple of tp x pp \(3 x 1 = 3\)"):
        memory.layout("llama-3-70b", "h100", 8, tp=3)
    with pytest.raises(InvalidValue, match="spans more than one scale-up domain"):
        memory.layout("llama-3-70b", "h100", 16, tp=16)


def test_sharded_decode_has_a_latency_floor_the_all_reduces():
    from roofkit.perf import comms

    # each layer's two all-reduces cost at least one round of the link's latency, whatever the batch: the bound
    # takes an engine's one-shot kernel (one round, t - 1 peers' buffers read), not NCCL's ring of 2 (t - 1) steps
    alpha = 0.6e-6  # NCCL's NVLink latency per step (src/graph/tuning.cc, LL), the catalog's hgx-h100 latency
    times = {t: latency.decode_step("llama-3-70b", "h100", 1, 4096, gpus=t, tp=t) for t in (2, 4, 8)}
    for t, s in times.items():
        assert s.communication_s == pytest.approx(80 * 2 * (alpha + (t - 1) * 8192 * 2 / 450e9))
        assert s.communication_s < 80 * 2 * 2 * (t - 1) * alpha or t == 2  # below the ring's latency alone
        ring = comms.all_reduce(8192 * 2, t, "hgx-h100", "ring").time_s
        assert s.communication_s < 80 * 2 * ring
    # calibrated: the engine's one-shot at a measured round, still about t-independent (8 GPUs within 1.1x of 2)
    real = {t: latency.decode_step("llama-3-70b", "h100", 1, 4096, gpus=t, tp=t, calibrated=True).communication_s
            for t in (2, 8)}
    assert real[2] > times[2].communication_s and real[8] / real[2] < 1.1
    gains = [times[2].time_s / times[4].time_s, times[4].time_s / times[8].time_s]
    assert gains[1] < gains[0] < 2  # halving each GPU's reads gains less and less
    assert times[8].communication_s / times[8].time_s > times[2].communication_s / times[2].time_s
    # the fewest GPUs for a latency target: a tighter target needs more, below the floor none will do
    assert latency.fewest_gpus("llama-3-70b", "h100", 50e-3, batch=8) == 2  # 141 GB of weights need two
    assert latency.fewest_gpus("llama-3-70b", "h100", 10e-3, batch=8) == 8
    assert latency.fewest_gpus("llama-3-70b", "h100", 5e-3, batch=8) is None


def test_critical_batch_derived_and_halved_by_int8_weights():
    import sympy

    d = latency.critical_batch_symbolic()
    B, N, b_w, P, BW = d["symbols"]
    assert sympy.simplify(d["B*"] - P * b_w / (2 * BW)) == 0
    h100 = hardware.get("h100")
    bf16 = d["B*"].subs({P: h100.peak("bf16"), BW: h100.bandwidth, b_w: 2})
    int8 = d["B*"].subs({P: h100.peak("bf16"), BW: h100.bandwidth, b_w: 1})
    assert float(bf16) == pytest.approx(h100.ridge("bf16")) and float(int8) == pytest.approx(float(bf16) / 2)


# --- continuous batching's steady state --------------------------------------------------------------------------


def test_workload_average_context_and_paged_footprint_by_hand():
    from roofkit.perf.inference import workload

    assert workload.Workload(128, 2048).average_context == 1152 and workload.Workload(128, 2048).footprint == 1152
    assert workload.Workload(2048, 128).footprint == 2112 and workload.Workload(1000, 1000).footprint == 1504
    assert workload.Workload(100, 1).footprint == 112  # 100.5 tokens -> 7 blocks of 16
    with pytest.raises(InvalidValue, match="output tokens must be a whole number"):
        workload.Workload(128, 0)


def test_steady_state_by_hand_llama_3_8b_fp8_on_h100():
    from roofkit.perf.inference import workload

    s = workload.steady_state("llama-3-8b", "h100", 128, 2048, dtype="fp8", kv_dtype="fp8")
    free = 0.9 * 81559 * 2**20 - weights.weights_bytes("llama-3-8b", "fp8")
    assert s.batch == math.floor(free / (1152 * 2 * 32 * 8 * 128 * 1)) == 899  # FP8 cache: 64 KiB per token
    # each step decodes B and prefills B / (O - 1) prompts of I tokens; B O / (O - 1) output tokens per step
    step = latency.step("llama-3-8b", "h100", 899, 128 + 1024, 899 / 2047, 128, dtype="fp8", kv_dtype="fp8")
    assert s.step.time_s == step.time_s and s.tpot_s == step.time_s
    assert s.tokens_per_s == pytest.approx(899 * 2048 / 2047 / step.time_s)
    assert s.prefill_tokens_per_step == pytest.approx(899 * 128 / 2047)
    # TTFT: its prompt in one chunk, in a step that decodes the 899 in flight; 0.44 prompts a step on average, so
    # the step that carries this one carries a whole prompt (max(p, 1 / chunks) = 1)
    first = latency.step("llama-3-8b", "h100", 899, 1152, 1, 128, dtype="fp8", kv_dtype="fp8")
    assert s.ttft_s == first.time_s and s.chunks == 1 and s.ttft_s > s.tpot_s
    # 20,000 tokens in chunks of the 8,192-token budget: 3 steps, each as full as the budget lets it be
    alone = workload.steady_state("llama-3-8b", "h100", 20000, 2, batch=1)
    assert alone.chunks == 3 and alone.ttft_s == pytest.approx(3 * latency.step(
        "llama-3-8b", "h100", 1, 20001, 8192 / 20000, 20000).time_s)


def test_a_prefill_heavy_workload_is_slower_than_decode_alone_predicts():
    # issue 20: tokens/s at the worst-case context ignored prefill; 2,048 in, 128 out spends most of its steps on it
    from roofkit.perf.inference import workload

    s = workload.steady_state("llama-3-8b", "h100", 2048, 128, dtype="fp8")
    decode_only = s.batch / latency.tpot("llama-3-8b", "h100", s.batch, 2048 + 64, dtype="fp8")
    assert s.tokens_per_s < decode_only / 2
    assert s.prefill_tokens_per_step > 10 * s.batch  # more prompt tokens than output tokens in each step


def test_cost_per_million_tokens_by_hand():
    s = serving.serve("llama-3-8b", "h100", gpus=8, tp=1, input_tokens=1000, output_tokens=1000, dtype="fp8",
                      usd_per_gpu_hour=2.5)
    assert s.usd_per_million_tokens == pytest.approx(8 * 2.5 / (3600 * s.tokens_per_s) * 1e6)
    assert serving.usd_per_million_tokens(1000, 1, 3.6) == pytest.approx(1.0)  # $3.60 an hour, 3.6M tokens an hour
    with pytest.raises(InvalidValue, match="usd_per_gpu_hour must be"):
        serving.serve("llama-3-8b", "h100", context=4096, usd_per_gpu_hour=-1)


# --- against published serving runs ----------------------------------------------------------------------------------


def test_the_bound_never_loses_to_a_published_run():
    from roofkit.perf.inference import published

    for run in published.runs() + published.heldout():
        assert published.speed(run, published.predict(run)) >= 1, run.case


def test_calibrated_is_within_its_targets_on_the_fitting_set():
    from roofkit.perf.inference import engine, published

    cal = engine.default()
    assert 0 < cal.step_s < 5e-3 and cal.floor_s == layertime.default_calibration().floor_s and cal.runs == 8
    for row in published.compare():
        assert 1 / 1.2 <= row["calibrated_speed"] <= 1.2, row["case"]


def test_calibrated_holds_on_tensorrt_llm_runs_it_never_saw():
    from roofkit.perf.inference import published

    rows = published.compare([r for r in published.heldout() if r.engine.startswith("TensorRT-LLM")
                              and r.hw != "l40s"])
    off = [max(r["calibrated_speed"], 1 / r["calibrated_speed"]) for r in rows]
    assert len(rows) >= 50 and max(off) < 1.6
    assert sum(x <= 1.3 for x in off) >= 0.9 * len(off)
    assert all(x <= 1.5 for r, x in zip(rows, off) if r["kind"] == "ttft")


def test_azure_tensorrt_llm_rows_hold_the_batch_trtllm_bench_built_their_engine_for():
    # The guide builds one engine per model with `trtllm-bench build` on its 2,048 / 2,048 dataset; TensorRT-LLM's
    # heuristic (tensorrt_llm/bench/build/tuning.py, calc_engine_setting and finetune_setting) sizes max_batch_size
    # from the KV cache in 95% of the memory left beside the weights, at 4,096 tokens a request, rounded up to 32s
    # below 256 requests, 128s below 1,024, 256s above, at most 4,096
    import json
    import math
    from importlib import resources

    from roofkit.catalogs import hardware, models

    def engine_batch(model, hw, tp):
        m = models.get(model)
        token_gib = 2 * m.layers * max(tp, m.kv_heads) * m.head_dim * 1 / 1024**3  # FP8 cache: a byte an element
        free_gib = hardware.get(hw).capacity_bytes / 1024**3 * tp - m.params / 1000**3  # FP8 weights, 1 byte each
        raw = min(free_gib * 0.95 / token_gib / (2048 + 2048), 4096)
        step = 32 if raw < 256 else 128 if raw < 1024 else 256
        return max(64, step * math.ceil(raw / step))

    text = resources.files("roofkit").joinpath("data/published/serving_heldout.json").read_text(encoding="utf-8")
    azure = [r for r in json.loads(text) if r["case"].endswith("(Azure)")]
    assert len(azure) == 36 and {r["hw"] for r in azure} == {"h100", "h200"}
    for row in azure:
        assert row["batch"] == min(1000, engine_batch(row["model"], row["hw"], row["tp"])), row["case"]
        assert f"max_batch_size, {engine_batch(row['model'], row['hw'], row['tp'])}:" in row["batch_source"]
    assert engine_batch("llama-3-8b", "h100", 1) == 384 and engine_batch("llama-3.1-405b", "h200", 8) == 768


def test_the_fit_generalizes_leave_one_out():
    from roofkit.perf.inference import engine, published

    runs = published.runs()
    for i, run in enumerate(runs):
        cal = published.fit(runs[:i] + runs[i + 1:])
        assert 1 / 1.25 <= published.speed(run, published.predict(run, True, cal)) <= 1.25, run.case
    # the shipped t_step (data/published/serving_calibration.json) is the fit on the shipped runs, to the last bit:
    # a change to the model or the runs that moves it fails here (benchmarks/published_serving.py --write refits)
    fitted, shipped = published.fit(runs), engine.default()
    assert fitted.step_s == shipped.step_s, (fitted.step_s, shipped.step_s)
    assert (fitted.floor_s, fitted.runs, fitted.source) == (shipped.floor_s, shipped.runs, shipped.source)


@pytest.mark.parametrize("batch", [1, 7, 64, 10_000])
def test_a_plan_with_another_batch_is_the_plan_computed_for_that_batch(batch):
    base = memory.plan("llama-3-70b", "h100", 8, 3000, 1, "fp8", "fp8", tp=2, shared=500)
    assert base.with_batch(batch) == memory.plan("llama-3-70b", "h100", 8, 3000, batch, "fp8", "fp8", tp=2,
                                                 shared=500)


def test_serve_computes_its_memory_plan_once(monkeypatch):
    calls = []
    real = memory.plan
    monkeypatch.setattr(memory, "plan", lambda *a, **k: calls.append(a) or real(*a, **k))
    serving.serve("llama-3-70b", "h100", gpus=8, tp=2, input_tokens=1000, output_tokens=1000)
    assert len(calls) == 1
    calls.clear()
    serving.serve("llama-3-70b", "h100", gpus=8, context=8192)
    assert len(calls) == 1
