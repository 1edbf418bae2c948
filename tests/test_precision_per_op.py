"""Precision per operation (roofkit.perf.recipe): FP8 training as Transformer Engine and torchao run it.

Checked against independent arithmetic (the casts' and the FP8 GEMMs' bytes from the model's shape)
and against published speedups of FP8 over BF16 training on H100:

* torchao's README (pytorch/ao, torchao/float8/README.md at commit 49cb18a6, "e2e training benchmarks"):
  Llama3-8B on 8 H100, batch 1, sequence 8192, torch.compile, FSDP2, per-op SAC: 6,150 tokens/s in BF16,
  7,689.5 with tensorwise float8 (per-tensor dynamic scales, i.e. current scaling): 1.25x.
* PyTorch dev-discuss, "Enabling Float8 All-Gather in FSDP2" (Gu, Liang, Guessous, Kuznetsov, Hirsh):
  Llama3-70B on 128 H100, 1.50x over BF16, a fifth of the gain from the float8 all-gather.
"""

import json
import math

import pytest

import roofkit

from roofkit import dtypes
from roofkit.catalogs import hardware, models
from roofkit.errors import InvalidValue
from roofkit.perf import parallel, recipe, steptime

from helpers import run

H100 = "h100"
# torchao's Llama3-8B benchmark: 8 GPUs, one sequence of 8,192 tokens each, FSDP2 (ZeRO-3), per-op SAC (selective)
TORCHAO_8B = dict(model="llama-3-8b", hw=H100, gpus=8, global_batch_tokens=8 * 8192, seq=8192, zero=3,
                  recompute="selective")
TORCHAO_8B_SPEEDUP = 7689.5 / 6150  # tokens/s, tensorwise float8 over bfloat16
# dev-discuss: Llama3-70B pretraining on 128 H100 with FSDP2; the 70B needs its activations recomputed there
FSDP_70B = dict(model="llama-3-70b", hw=H100, gpus=128, global_batch_tokens=128 * 8192, seq=8192, zero=3,
                recompute="full")
FSDP_70B_SPEEDUP = 1.50


def by_name(ks):
    return {k.name: k for k in ks}


# --- which kernel runs in which precision -----------------------------------------------------------


def test_the_fp8_layer_runs_its_linear_gemms_in_fp8_and_attention_norms_and_the_head_in_bf16():
    ks = steptime.layer_kernels("llama-3-8b", 1, 8192, dtype="fp8")
    gemms = [k for k in ks if k.kind == "gemm"]
    assert {k.name for k in gemms} == {"qkv", "out", "mlp.up", "mlp.gate", "mlp.down"}
    assert {k.precision for k in gemms} == {"fp8"}
    assert {k.precision for k in ks if k.kind != "gemm"} == {"bf16"}  # attention, norms, activations, casts
    assert by_name(ks)["attn"].precision == "bf16"
    head = steptime.head_kernels("llama-3-8b", 1, 8192, dtype="fp8")
    assert {k.precision for k in head} == {"bf16"}  # the output layer stays BF16 (DeepSeek-V3, section 3.3.1)
    bwd = by_name(steptime.backward_kernels(ks, "fp8"))
    assert bwd["qkv.bwd"].precision == "fp8" and bwd["attn.bwd"].precision == "bf16"


def test_dtype_fp8_means_transformer_engine_s_recipe_and_agrees_with_recipe_fp8():
    assert recipe.from_dtype("fp8") is recipe.get("fp8")
    assert recipe.get("fp8").scaling == "delayed"  # TE's DelayedScaling, its default on Hopper
    a = parallel.plan(**TORCHAO_8B, dtype="fp8", calibrated=True).to_dict()
    b = parallel.plan(**TORCHAO_8B, recipe="fp8", calibrated=True).to_dict()
    assert a == b and a["recipe"] == "fp8" and a["precision"] == "fp8"
    assert a["precisions"] == {"linear": "fp8", "dgrad": "fp8", "wgrad": "fp8", "attention": "bf16",
                               "attention_backward": "bf16", "head": "bf16", "router": "bf16", "base": "bf16",
                               "dp_grad": "bf16", "dispatch": "bf16"}


def test_moe_experts_run_in_fp8_and_the_router_stays_bf16():
    ks = by_name(steptime.layer_kernels("deepseek-v3", 1, 4096, ep=8, moe=True, recipe="fp8"))
    assert ks["router"].precision == "bf16"  # DeepSeek-V3, section 3.3.1: MoE gating in its original precision
    assert {ks[n].precision for n in ("experts.up", "experts.gate", "experts.down", "kv.up", "out")} == {"fp8"}


# --- bytes: independent arithmetic --------------------------------------------------------------------


def test_casts_read_bf16_once_and_write_the_fp8_copy_and_its_transpose():
    m = models.get("llama-3-8b")
    T, d, f = 8192, m.d_model, m.d_ff
    qkv = (m.heads + 2 * m.kv_heads) * m.head_dim
    ks = by_name(steptime.layer_kernels(m, 1, T, dtype="fp8"))
    # a cast: read 2 bytes, write 1 (the FP8 copy) + 1 (its transpose, for dgrad and wgrad) per element
    cast = lambda n: (2 + 1) * n + 1 * n  # noqa: E731
    inputs = {"qkv": T * d, "out": T * m.heads * m.head_dim, "mlp.up": T * d, "mlp.down": T * f}
    for gemm, n in inputs.items():
        assert ks[f"cast.{gemm}.input"].bytes == cast(n)
        assert ks[f"cast.{gemm}.input"].kind == "elementwise"
    assert "cast.mlp.gate.input" not in ks  # the gate reads the same normed input as the up projection
    grads = {"qkv": T * qkv, "out": T * d, "mlp.up": T * f, "mlp.gate": T * f, "mlp.down": T * d}
    bwd = by_name(steptime.backward_kernels(list(ks.values()), "fp8"))
    assert {g: bwd[f"cast.{g}.grad"].bytes for g in grads} == {g: cast(n) for g, n in grads.items()}
    weights = {"qkv": d * qkv, "out": m.heads * m.head_dim * d, "mlp.up": d * f, "mlp.gate": d * f, "mlp.down": f * d}
    once = by_name(steptime.weight_cast_kernels(list(ks.values()), "fp8"))
    assert {g: once[f"cast.{g}.weight"].bytes for g in weights} == {g: cast(n) for g, n in weights.items()}


def test_an_fp8_gemm_reads_its_operands_at_one_byte_and_writes_bf16():
    m = models.get("llama-3-8b")
    T, d = 8192, m.d_model
    n = (m.heads + 2 * m.kv_heads) * m.head_dim
    ks = by_name(steptime.layer_kernels(m, 1, T, dtype="fp8"))
    assert ks["qkv"].bytes == (T * d + d * n) * 1 + T * n * 2
    assert ks["qkv"].flops == 2 * T * n * d
    bwd = by_name(steptime.backward_kernels(list(ks.values()), "fp8"))
    dgrad = (T * n + n * d) * 1 + T * d * 2  # dY and W in FP8, dX written in BF16
    wgrad = (d * T + T * n) * 1 + d * n * 2  # X^T and dY in FP8, dW written in BF16
    assert bwd["qkv.bwd"].bytes == dgrad + wgrad and bwd["qkv.bwd"].flops == 2 * ks["qkv"].flops


def test_current_scaling_reads_each_cast_tensor_once_more_for_its_amax():
    T, d = 8192, models.get("llama-3-8b").d_model
    ks = by_name(steptime.layer_kernels("llama-3-8b", 1, T, recipe="fp8-current"))
    assert ks["cast.qkv.input.amax"].bytes == 2 * T * d  # TE: "two tensor reads per quantization"
    assert "cast.qkv.input.amax" not in by_name(steptime.layer_kernels("llama-3-8b", 1, T, recipe="fp8"))
    slow, fast = (parallel.plan(**TORCHAO_8B, recipe=r, calibrated=True).step_time_s for r in ("fp8-current", "fp8"))
    assert slow > fast


def test_mxfp8_writes_one_e8m0_scale_per_32_values_and_needs_blackwell():
    r = recipe.get("mxfp8")
    assert r.element_bytes("fp8") == 1 + 1 / 32
    T, d = 8192, models.get("llama-3-8b").d_model
    ks = by_name(steptime.layer_kernels("llama-3-8b", 1, T, recipe="mxfp8"))
    assert ks["cast.qkv.input"].bytes == 2 * T * d + 2 * (1 + 1 / 32) * T * d
    assert parallel.plan(**(TORCHAO_8B | {"hw": "b200"}), recipe="mxfp8").recipe == "mxfp8"
    with pytest.raises(InvalidValue, match="H100.*recipes it can run: bf16, fp16, fp32, fp8"):
        parallel.plan(**TORCHAO_8B, recipe="mxfp8")


def test_fp8_attention_runs_flashattention_3_s_fp8_forward_and_a_bf16_backward():
    m = models.get("llama-3-8b")
    T = 8192
    ks = by_name(steptime.layer_kernels(m, 1, T, recipe="fp8-attention"))
    bf16 = by_name(steptime.layer_kernels(m, 1, T, recipe="fp8"))
    assert ks["attn"].precision == "fp8" and ks["attn"].bytes == bf16["attn"].bytes / 2
    qkv = T * (m.heads + 2 * m.kv_heads) * m.head_dim
    assert ks["cast.attn.qkv"].bytes == (2 + 1) * qkv  # FA3 transposes V itself: one copy
    bwd = by_name(steptime.backward_kernels(list(ks.values()), "fp8-attention"))
    assert bwd["attn.bwd"] == by_name(steptime.backward_kernels(list(bf16.values()), "fp8"))["attn.bwd"]
    with pytest.raises(InvalidValue, match="attention='flash'"):
        steptime.layer_kernels(m, 1, T, recipe="fp8-attention", attention="unfused")


# --- the step: published speedups, the bound, MFU ---------------------------------------------------


def speedup(args, calibrated, fp8="fp8"):
    bf16 = parallel.plan(**args, calibrated=calibrated)
    return bf16.step_time_s / parallel.plan(**args, calibrated=calibrated, recipe=fp8).step_time_s


def test_fp8_over_bf16_on_h100_matches_torchao_s_llama3_8b():
    got = speedup(TORCHAO_8B, True, "fp8-current")  # torchao's tensorwise: per-tensor current scaling
    assert 1.15 <= got <= 1.45
    assert got == pytest.approx(TORCHAO_8B_SPEEDUP, rel=0.10)
    assert 1.15 <= speedup(TORCHAO_8B, True) <= 1.45  # Transformer Engine's delayed scaling
    # the bound's speedup stays below the peaks' ratio: attention, norms and the head stay in BF16 (Amdahl)
    h100 = roofkit.hw("h100")
    assert 1 < speedup(TORCHAO_8B, False) < h100.peak("fp8") / h100.peak("bf16")


def test_casts_are_free_in_the_bound_and_paid_in_the_estimate():
    """At best a cast is fused into the kernel that produced its tensor; the estimate runs it on its own."""
    ks = steptime.layer_kernels("llama-3-8b", 1, 8192, recipe="fp8")
    casts = [k for k in ks if k.name.startswith("cast.")]
    assert casts
    bound, estimate = steptime.roofs("h100", recipe="fp8"), steptime.roofs("h100", recipe="fp8", calibrated=True)
    assert all(steptime.kernel_time(k, bound) == 0.0 for k in casts)
    assert all(steptime.kernel_time(k, estimate) >= k.bytes / estimate.bandwidth > 0 for k in casts)


def test_fp8_over_bf16_on_h100_for_llama3_70b_is_near_the_published_one_and_a_half():
    got = speedup(FSDP_70B, True, "fp8-current")
    assert got == pytest.approx(FSDP_70B_SPEEDUP, rel=0.10)


@pytest.mark.parametrize("hw, name", [(H100, "fp8"), (H100, "fp8-current"), (H100, "fp8-attention"),
                                      ("b200", "mxfp8"), ("b200", "nvfp4")])
def test_the_low_precision_bound_stays_below_the_calibrated_estimate(hw, name):
    args = TORCHAO_8B | {"hw": hw}
    bound, estimate = (parallel.plan(**args, recipe=name, calibrated=c) for c in (False, True))
    assert bound.step_time_s < estimate.step_time_s
    assert bound.compute_s < parallel.plan(**args).compute_s  # and below the BF16 bound


def test_mfu_counts_model_flops_against_the_peak_of_the_gemms_precision():
    p = parallel.plan(**TORCHAO_8B, dtype="fp8", calibrated=True)
    assert p.mfu_peak_precision == "fp8"
    assert p.mfu == pytest.approx(p.model_flops / (p.step_time_s * p.gpus * hardware.get(H100).peak("fp8")))
    for name in ("fp8", "fp8-attention"):  # so that no FP8 bound prints an MFU above 1
        assert parallel.plan(**TORCHAO_8B, recipe=name).mfu < 1
    fp16 = parallel.plan(**TORCHAO_8B, dtype="fp16")  # one precision throughout: its own peak, as before
    assert fp16.mfu_peak_precision == "fp16" and fp16.recipe == "fp16"


# --- errors -------------------------------------------------------------------------------------------


def test_a_bad_recipe_names_it_and_the_choices():
    with pytest.raises(InvalidValue) as e:
        parallel.plan(**TORCHAO_8B, recipe="fp9")
    assert "'fp9'" in str(e.value) and all(n in str(e.value) for n in recipe.NAMES)
    with pytest.raises(InvalidValue, match="dtype 'fp16' disagrees with recipe 'fp8'"):
        parallel.plan(**TORCHAO_8B, dtype="fp16", recipe="fp8")
    assert parallel.plan(**TORCHAO_8B, recipe="fp16").recipe == "fp16"  # the default dtype gives way


def test_fp8_needs_a_part_with_an_fp8_rate_and_calibrated_an_achievable_one():
    with pytest.raises(InvalidValue, match="A100.*no fp8 peak.*recipes it can run: bf16, fp16, fp32"):
        parallel.plan(**(TORCHAO_8B | {"hw": "a100"}), dtype="fp8")
    mi325x = hardware.get("mi325x")  # an achievable BF16 rate in the catalog, no achievable FP8 one
    assert "fp8" in mi325x.peak_flops and not mi325x.has_achievable("fp8")
    assert steptime.roofs("mi325x", "fp8").peak("fp8") == mi325x.peak("fp8")  # the bound: the datasheet's
    with pytest.raises(InvalidValue, match="achievable fp8 matmul rate of the AMD Instinct MI325X"):
        steptime.roofs("mi325x", "fp8", calibrated=True)


def test_the_command_line_takes_dtype_fp8_and_recipe(capsys):
    argv = ["parallel", "--model", "llama-3-8b", "--hw", "h100", "--gpus", 8, "--global-batch-tokens", 65536,
            "--seq", 8192, "--zero", 3]
    code, out, _ = run(capsys, *argv, "--dtype", "fp8", "--json")
    data = json.loads(out)
    assert code == 0 and data["recipe"] == "fp8" and data["precisions"]["attention"] == "bf16"
    assert data["mfu_peak_precision"] == "fp8" and "step_time_s" in data
    code, out, _ = run(capsys, *argv, "--recipe", "fp8-current")
    assert code == 0 and "recipe fp8-current: linear GEMMs fp8" in out
    code, _, err = run(capsys, *argv, "--recipe", "fp9")
    assert code != 0 and "fp9" in err and all(n in err for n in recipe.NAMES)


# --- one precision throughout: as before, bit for bit ------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
def test_one_precision_throughout_has_no_casts_and_times_kernels_as_before(dtype):
    args = dict(model="llama-3-70b", hw=H100, gpus=64, global_batch_tokens=64 * 8192, seq=8192, tp=8, pp=2)
    b = dtypes.bytes_per_element(dtype)
    for calibrated in (False, True) if dtype == "bf16" else (False,):  # H100: an achievable BF16 rate only
        p = parallel.plan(**args, dtype=dtype, calibrated=calibrated)
        assert p.recipe == dtype == p.precision == p.mfu_peak_precision and p.roofs["peaks"] == {}
        ks = steptime.layer_kernels("llama-3-70b", p.microbatch_tokens / 8192, 8192, tp=8, dtype=dtype)
        assert all(k.precision is None and not k.name.startswith("cast.") for k in ks)
        # the old formula: every kernel at the one peak of the roofs
        r = p.roofs
        def old_time(kernels):
            return sum(r["floor_s"] + max(k.flops / r["peak_flops"], k.bytes / r["bandwidth"]) for k in kernels)
        old = old_time(ks) + old_time(steptime.backward_kernels(ks)) + 0
        t = steptime.microbatch("llama-3-70b", H100, p.microbatch_tokens / 8192, 8192, tp=8, dtype=dtype,
                                roofs_=steptime.Roofs(**p.roofs))
        assert t.layer_s == old and t.weight_cast_s == 0
        qkv = by_name(ks)["qkv"]
        assert qkv.bytes == qkv.bytes // b * b  # whole elements of b bytes


def test_bf16_compute_of_a_pinned_layout_is_unchanged():
    # llama-3-70b, 64 H100, TP 8 x PP 2, 64 sequences of 8,192 tokens: the compute the step model gave before
    # recipes existed (the bound: datasheet roofs, no floor)
    p = parallel.plan(model="llama-3-70b", hw=H100, gpus=64, global_batch_tokens=64 * 8192, seq=8192, tp=8, pp=2)
    assert p.compute_s == 4.642744104188279
    assert math.isclose(p.mfu, p.model_flops / (p.step_time_s * 64 * 989e12), rel_tol=1e-12)


def test_the_recipe_is_exposed_for_communication_and_serving():
    r = recipe.get("fp8")
    assert r.dp_grad_dtype == "bf16" and r.master_dtype == "fp32" and r.dispatch_dtype == "bf16"
    assert recipe.get("fp8-blockwise").dispatch_dtype == "fp8"  # DeepSeek-V3, section 3.3.3
    assert recipe.from_run("fp8", "current").name == "fp8-current"
    assert set(recipe.supported(hardware.get("a100"))) == {"bf16", "fp16", "fp32"}
