"""A mixture of experts served: the experts a batch reaches, the kernels of its layer, its steps in both modes."""

import math

import pytest
import sympy

from roofkit import routing
from roofkit.catalogs import models
from roofkit.errors import InvalidValue
from roofkit.perf import layertime
from roofkit.perf.inference import latency, serving, workload


def test_experts_touched_by_hand_and_its_limits():
    # Qwen3-235B-A22B: 128 experts, 8 per token
    assert routing.experts_touched(1, 128, 8) == pytest.approx(8)
    assert routing.experts_touched(2, 128, 8) == pytest.approx(128 * (1 - (120 / 128) ** 2))  # 8 + 8 - 0.5 shared
    assert routing.experts_touched(10_000, 128, 8) == pytest.approx(128)
    assert routing.experts_touched(10_000, 128, 8, "concentrated") == 8
    T, E, k = sympy.symbols("T E k", positive=True)
    touched = E * (1 - (1 - k / E) ** T)
    assert sympy.limit(touched.subs({E: 128, k: 8}), T, sympy.oo) == 128
    with pytest.raises(InvalidValue, match="routing must be one of uniform, concentrated; got 'random'"):
        routing.experts_touched(4, 8, 2, "random")
    with pytest.raises(InvalidValue, match="top_k"):
        routing.experts_touched(4, 8, 9)


def test_a_moe_layer_costs_two_flops_per_active_parameter_per_token():
    m = models.get("qwen3-235b-a22b")
    T = 64
    ops = m.layer_ops(1, T, None, "bf16", fused_attention=True)
    matrices = sum(c.flops for name, c in ops.items() if name in ("qkv", "out") or name.startswith("moe.")
                   and name not in ("moe.act", "moe.combine"))
    attention = 4096 * (64 * 128 + 2 * 4 * 128) + 64 * 128 * 4096
    experts = 8 * 3 * 4096 * 1536
    router = 4096 * 128
    assert matrices == pytest.approx(2 * T * (attention + experts + router))
    # the weights read: every expert the 64 tokens reach, once
    up = ops["moe.up"]
    touched = routing.experts_touched(T, 128, 8)
    assert up.bytes == pytest.approx(T * 8 * 4096 * 2 + touched * 4096 * 1536 * 2 + T * 8 * 1536 * 2)


def test_shared_experts_and_dense_layers():
    scout = models.get("llama-4-scout")
    ops = scout.layer_ops(1, 16, None, "bf16")
    assert {"shared.up", "shared.gate", "shared.act", "shared.down"} <= set(ops)
    assert ops["shared.up"].flops == 2 * 16 * 5120 * 8192
    dense = scout.layer_ops(1, 16, None, "bf16", dense=True)
    assert "mlp.up" in dense and not any(name.startswith("moe.") for name in dense)
    kinds = {k.name: k.kind for k in layertime.kernels(scout, 1, 16)}
    assert kinds["moe.act"] == kinds["moe.combine"] == "elementwise" and kinds["moe.router"] == "gemm"


def test_the_bound_reads_the_fewest_experts_and_is_faster_than_the_estimate():
    kw = dict(gpus=8, tp=8, dtype="fp8", kv_dtype="fp8")
    bound = latency.decode_step("qwen3-235b-a22b", "h200", 64, 2048, **kw)
    uniform = latency.decode_step("qwen3-235b-a22b", "h200", 64, 2048, calibrated=True, **kw)
    assert bound.time_s < uniform.time_s
    up = next(op for op in bound.layer.ops if op.name == "moe.up")
    part = latency.shard("qwen3-235b-a22b", 8)
    assert part.moe_d_ff == 1536 / 8
    # the bound: FP8 everywhere; the 64 x 8 routed rows in, the 8 experts' weights (the fewest), their outputs
    assert up.bytes == 64 * 8 * 4096 + 8 * 4096 * 192 + 64 * 8 * 192
    dense_only = latency.decode_step("llama-3-8b", "h100", 8, 2048)
    assert dense_only.time_s > 0


def test_deepseek_times_its_first_layers_dense_and_the_rest_as_a_mixture():
    m = models.get("deepseek-v3")
    assert (m.layers, m.dense_layers) == (61, 3)  # DeepSeek-V3 report, section 4.2: the first 3 layers are dense
    dense = m.layer_ops(64, 1, 2048, "fp8", dense=True)
    assert "mlp.up" in dense and not any(name.startswith("moe.") for name in dense)
    # calibrated, 64 tokens reach about 256 (1 - (1 - 8/256)^64) = 223 experts: a mixture's layer reads more
    # than a dense one, so 3 dense layers make the step cheaper than 61 mixture layers, dearer than 58
    s = latency.decode_step("deepseek-v3", "h200", 64, 2048, gpus=8, tp=8, dtype="fp8", calibrated=True)
    assert 58 * s.layer.time_s < s.layers_s < 61 * s.layer.time_s
    assert {op.name for op in s.layer.ops} >= {"moe.up", "shared.up", "attn"}
    assert serving.serve("deepseek-v3", "h200", gpus=8, context=4096, dtype="fp8").tpot_s > 0


def test_a_mixture_serves_with_a_note_and_no_critical_batch():
    s = serving.serve("qwen3-235b-a22b", "h200", gpus=8, tp=8, input_tokens=1000, output_tokens=1000, dtype="fp8")
    assert s.tokens_per_s > 0 and s.critical_batch is None
    assert any("mixture of experts" in n for n in s.notes)
    with pytest.raises(InvalidValue, match="not a line in the batch"):
        latency.critical_batch("qwen3-235b-a22b", "h200", 2048, 8)


def test_steady_state_of_a_mixture_scales_with_its_active_parameters():
    # bound, compute-bound at a large batch: tokens/s about P / (2 active params) per GPU, less attention and comms
    s = workload.steady_state("qwen3-30b-a3b", "h200", 128, 2048, gpus=1, dtype="fp8", kv_dtype="fp8")
    dense = workload.steady_state("llama-3-8b", "h200", 128, 2048, gpus=1, dtype="fp8", kv_dtype="fp8")
    ratio = s.tokens_per_s / dense.tokens_per_s
    active = models.get("qwen3-30b-a3b").active_params / models.get("llama-3-8b").active_params
    assert 1 / active * 0.5 < ratio < 1 / active * 2
    assert math.isfinite(s.ttft_s)
