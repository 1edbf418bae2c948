"""roofkit.steptime: a training micro-batch kernel by kernel, against FlashAttention's and Megatron-LM's counts
and Korthikanti et al.'s measured layer (Table 4: the 22B layer's backward and recomputation)."""

import pytest

from roofkit import formulas
from roofkit.perf import layertime, steptime, training
from roofkit.catalogs import models
from roofkit.errors import InvalidValue


def test_backward_is_twice_the_forward_s_gemms_and_two_and_a_half_its_flash_attention():
    fwd = steptime.layer_kernels("llama-3-8b", 1, 4096)
    bwd = steptime.backward_kernels(fwd)
    gemm = lambda ks: sum(k.flops for k in ks if k.kind == "gemm")  # noqa: E731
    attn = lambda ks: sum(k.flops for k in ks if k.op == "attn")  # noqa: E731
    assert gemm(bwd) == pytest.approx(2 * gemm(fwd)) and attn(bwd) == pytest.approx(2.5 * attn(fwd))


def test_a_layer_s_flops_are_6n_per_token_plus_causal_attention():
    m = models.get("llama-3-8b")
    fwd = steptime.layer_kernels(m, 1, 4096)
    ks = fwd + steptime.backward_kernels(fwd)
    matrices = m.layers and (m.params_per_layer - 2 * m.d_model)  # a layer's matrix weights
    gemms = sum(k.flops for k in ks if k.kind == "gemm")
    assert gemms == pytest.approx(training.FLOPS_PER_PARAM_TOKEN * matrices * 4096)
    # attention: FlashAttention's forward counts the causal pairs (formulas.attention_fused)
    attention_fwd = formulas.attention_fused(1, m.heads, 4096, m.head_dim, kv_heads=m.kv_heads, causal=True).flops
    assert sum(k.flops for k in fwd if k.op == "attn") == pytest.approx(attention_fwd)


def test_tensor_context_and_sequence_parallelism_split_the_layer():
    whole = steptime.layer_kernels("llama-3-70b", 1, 8192)
    tp = steptime.layer_kernels("llama-3-70b", 1, 8192, tp=8, sequence_parallel=False)
    sp = steptime.layer_kernels("llama-3-70b", 1, 8192, tp=8, sequence_parallel=True)
    cp = steptime.layer_kernels("llama-3-70b", 1, 8192, cp=4)
    flops = lambda ks, kind: sum(k.flops for k in ks if k.kind == kind)  # noqa: E731
    nbytes = lambda ks, kind: sum(k.bytes for k in ks if k.kind == kind)  # noqa: E731
    assert flops(tp, "gemm") == pytest.approx(flops(whole, "gemm") / 8)
    assert nbytes(tp, "norm") == pytest.approx(nbytes(whole, "norm"))  # TP alone repeats the norms on every rank
    assert nbytes(sp, "norm") == pytest.approx(nbytes(whole, "norm") / 8)  # sequence parallelism splits them
    assert flops(cp, "gemm") == pytest.approx(flops(whole, "gemm") / 4)
    with pytest.raises(InvalidValue, match="not a multiple of tp = 3"):
        steptime.layer_kernels("llama-3-70b", 1, 8192, tp=3)


def test_recomputation_reruns_all_or_the_attention_core():
    fwd = steptime.layer_kernels("gpt-3-175b", 1, 2048, tp=8, attention="unfused")
    assert steptime.recompute_kernels(fwd, "full") == fwd
    assert {k.op for k in steptime.recompute_kernels(fwd, "selective")} == {"attn"}
    assert steptime.recompute_kernels(fwd, "none") == [] == steptime.recompute_kernels(fwd, False)
    with pytest.raises(InvalidValue, match="recompute must be one of"):
        steptime.recompute_mode("some")


def test_korthikanti_s_22b_layer():
    # Korthikanti et al. 2022, Table 4: one layer of the 22B model (h 6144, 64 heads, TP 8, micro-batch 4 of 2048):
    # forward 7.7 ms, backward 11.9 ms without recomputation; full recomputation adds the forward again
    # (27.2 ms in all); selective recomputation only the attention core (20.9 ms). Compute only, on an A100,
    # calibrated: the measured times include the TP all-reduces, which roofkit adds in parallel.plan.
    m = models.from_table({"layers": 48, "d_model": 6144, "heads": 64, "d_ff": 4 * 6144, "vocab": 51200,
                           "mlp": "gelu", "norm": "layernorm", "bias": True})
    args = dict(model=m, hw="a100", batch=4, seq=2048, tp=8, attention="unfused", calibrated=True,
                matmul_efficiency=0.7)
    none, full, sel = (steptime.microbatch(**args, recompute=r) for r in ("none", "full", "selective"))
    assert full.recompute_s == pytest.approx(none.forward_s)
    assert 0 < sel.recompute_s < 0.3 * none.forward_s
    assert 5e-3 < none.forward_s < 7.7e-3 and 9e-3 < none.backward_s < 11.9e-3  # the all-reduces not counted
    assert (full.layer_s - none.layer_s) / none.layer_s == pytest.approx((27.2 - 19.6) / 19.6, abs=0.08)


def test_the_bound_uses_the_datasheet_and_calibrated_the_measured_roofs():
    bound, real = steptime.roofs("h100"), steptime.roofs("h100", calibrated=True)
    assert bound.floor_s == 0 and bound.peak_flops == 989e12
    assert real.peak_flops < bound.peak_flops and real.bandwidth < bound.bandwidth
    assert real.floor_s == pytest.approx(layertime.default_calibration().floor_s)
    t_b = steptime.microbatch("llama-3-8b", "h100", 1, 4096)
    t_c = steptime.microbatch("llama-3-8b", "h100", 1, 4096, calibrated=True)
    assert t_c.layer_s > t_b.layer_s


def test_moe_and_latent_attention_layers():
    t = steptime.microbatch("deepseek-v3", "h100", 1, 4096, ep=8)
    assert t.moe_layer_s > 0 and t.layer_s > 0
    m = models.get("deepseek-v3")
    fwd = steptime.layer_kernels(m, 1, 4096, ep=8, moe=True)
    routed = sum(k.flops for k in fwd if k.op == "experts" and k.kind == "gemm")
    # each token visits k experts: 3 matmuls of d x moe_d_ff each, 2 FLOPs a multiply-add
    assert routed == pytest.approx(4096 * m.experts_per_token * 3 * 2 * m.d_model * m.moe_d_ff)


def test_optimizer_step_reads_and_writes_adam_s_bytes():
    assert steptime.optimizer_s(1e9, "h100") == pytest.approx(1e9 * steptime.ADAM_BYTES_PER_PARAM / 3.35e12)
