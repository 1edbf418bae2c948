"""C = 6ND, MFU/HFU, GPU-hours and cost: the seeds' published numbers, PyTorch's FLOP counter,
identities, and refusals with pinned messages."""

import json
import math
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofkit.catalogs import hardware
from roofkit.perf import training
from roofkit.errors import InvalidValue, RoofkitError, UnknownHardware, UnknownPrecision, UnsupportedPrecision

H100_BF16 = hardware.get("h100").peak("bf16")
H100_FP8 = hardware.get("h100").peak("fp8")
DAYS_30_S = 30 * 24 * 3600


# --- the 6ND rule ----------------------------------------------------------------------


def test_6nd_is_2nd_forward_plus_4nd_backward():
    N, D = 7e9, 1e12
    forward, backward = training.forward_backward(N, D)
    assert forward == 2 * N * D and backward == 4 * N * D
    assert training.training_flops(N, D) == forward + backward == 6 * N * D
    # full recomputation runs the forward twice: 8ND, and MFU/HFU = 6/8
    assert training.recompute_flops(N, D) == 8 * N * D


def test_sizes_are_read_as_people_write_them():
    assert training.training_flops("70B", "15T") == training.training_flops(70e9, 15e12)


def test_6nd_symbolically():
    sympy = pytest.importorskip("sympy")
    N, D, P, U = sympy.symbols("N D P U", positive=True)
    assert training.training_flops(N, D) == 6 * N * D
    assert sympy.simplify(training.gpu_hours(training.training_flops(N, D), P, U) - N * D / (600 * U * P)) == 0


@pytest.mark.torch
def test_6nd_matches_pytorch_flop_counter():
    """FlopCounterMode counts a matmul as 2mnk: bias-free linear layers, forward + backward, are 6N per token."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    d, f, tokens = 32, 128, 8
    model = torch.nn.Sequential(torch.nn.Linear(d, f, bias=False), torch.nn.Linear(f, d, bias=False))
    N = sum(p.numel() for p in model.parameters())
    x = torch.randn(tokens, d, requires_grad=True)  # so the first layer's input gradient is computed too
    with FlopCounterMode(display=False) as forward_only:
        y = model(x)
    with FlopCounterMode(display=False) as both:
        model(x).sum().backward()
    assert forward_only.get_total_flops() == training.forward_backward(N, tokens)[0]
    assert both.get_total_flops() == training.training_flops(N, tokens)
    del y


@pytest.mark.torch
def test_attention_term_matches_pytorch_flop_counter():
    """PaLM's 12·L·H·Q·T per token: QK^T and AV, forward and backward, for one layer of T tokens."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    H, T, Q = 4, 64, 16
    q, k, v = (torch.randn(1, H, T, Q, requires_grad=True) for _ in range(3))
    with FlopCounterMode(display=False) as counter:
        ((q @ k.transpose(-1, -2)).softmax(-1) @ v).sum().backward()
    N = 1000
    per_token = training.flops_per_token(N, n_layers=1, n_heads=H, head_dim=Q, seq_len=T)
    assert (per_token - training.flops_per_token(N)) * T == counter.get_total_flops()


def test_flashattention_recomputes_the_scores_in_its_backward_pass():
    """The FlashAttention repository's benchmark (benchmarks/benchmark_flash_attention.py) counts a forward pass
    as 4·s²·H·Q FLOPs (halved when causal), the backward as 2.5 times it: 3.5 forwards in all, against the 3 of
    PaLM's count. Per token: 14·L·H·Q·T, or half of it causal."""
    N, L, H, Q, T = 1e9, 24, 16, 128, 4096
    forward_per_token = 4 * T * H * Q * L  # 4 s^2 H Q per sequence of s = T tokens, per layer
    flash = training.flops_per_token(N, L, H, Q, T, recompute_scores=True) - 6 * N
    assert flash == pytest.approx(3.5 * forward_per_token)
    assert training.flops_per_token(N, L, H, Q, T) - 6 * N == pytest.approx(3 * forward_per_token)
    causal = training.flops_per_token(N, L, H, Q, T, causal=True, recompute_scores=True) - 6 * N
    assert causal == pytest.approx(3.5 * forward_per_token / 2, rel=1 / T)  # the benchmark halves; we count T + 1
    with pytest.raises(InvalidValue, match=r"^recompute_scores must be True or False"):
        training.flops_per_token(N, L, H, Q, T, recompute_scores=1)


def test_flashattention_backward_counted_by_running_it():
    """An independent oracle: FlashAttention-2's forward and backward passes (Dao 2023, algorithms 1 and 2)
    written with numpy, block by block, counting the FLOPs of every matrix product. The gradients match the
    textbook backward of softmax(Q K^T) V; the products add up to 14 s^2 Q per head, 14·L·H·Q·T per token."""
    import numpy as np

    rng = np.random.default_rng(0)
    s, Q, block = 64, 16, 16
    q, k, v, d_o = (rng.normal(size=(s, Q)) for _ in range(4))
    flops = [0]

    def mm(a, b):
        flops[0] += 2 * a.shape[0] * a.shape[1] * b.shape[1]
        return a @ b

    blocks = [slice(i, i + block) for i in range(0, s, block)]
    # forward (algorithm 1): online softmax per query block; keep O and the row log-sum-exp, not P
    o, lse = np.zeros((s, Q)), np.zeros(s)
    for i in blocks:
        m, l, acc = np.full(block, -np.inf), np.zeros(block), np.zeros((block, Q))
        for j in blocks:
            scores = mm(q[i], k[j].T)
            m_new = np.maximum(m, scores.max(axis=1))
            p = np.exp(scores - m_new[:, None])
            scale = np.exp(m - m_new)
            l, acc, m = l * scale + p.sum(axis=1), acc * scale[:, None] + mm(p, v[j]), m_new
        o[i], lse[i] = acc / l[:, None], m + np.log(l)
    forward = flops[0]
    # backward (algorithm 2): recompute S = Q K^T block by block from Q, K and the log-sum-exp
    dq, dk, dv = np.zeros((s, Q)), np.zeros((s, Q)), np.zeros((s, Q))
    D = (d_o * o).sum(axis=1)
    for j in blocks:
        for i in blocks:
            p = np.exp(mm(q[i], k[j].T) - lse[i][:, None])
            dv[j] += mm(p.T, d_o[i])
            dp = mm(d_o[i], v[j].T)
            ds = p * (dp - D[i][:, None])
            dq[i] += mm(ds, k[j])
            dk[j] += mm(ds.T, q[i])
    # the textbook backward of O = softmax(Q K^T) V
    P = np.exp(q @ k.T - (q @ k.T).max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    dP = d_o @ v.T
    dS = P * (dP - (dP * P).sum(axis=1, keepdims=True))
    assert np.allclose(o, P @ v) and np.allclose(dv, P.T @ d_o) and np.allclose(dq, dS @ k) and np.allclose(dk, dS.T @ q)
    assert forward == 4 * s * s * Q and flops[0] == 14 * s * s * Q
    # per token of one layer with one head: what flops_per_token adds to 6N
    N = 1000
    assert training.flops_per_token(N, 1, 1, Q, s, recompute_scores=True) - 6 * N == flops[0] / s
    assert training.flops_per_token(N, 1, 1, Q, s) - 6 * N == (flops[0] - 2 * s * s * Q) / s  # PaLM: no recompute


def test_flops_per_token_palm_appendix_b():
    # nanoGPT's GPT-2 (124M): L=12, H=12, Q=64, T=1024; its estimate_mfu uses 6N + 12LHQT
    N = 124e6
    assert training.flops_per_token(N) == 6 * N
    assert training.flops_per_token(N, 12, 12, 64, 1024) == 6 * N + 12 * 12 * 12 * 64 * 1024
    with pytest.raises(InvalidValue, match=r"got n_layers, n_heads but not head_dim, seq_len"):
        training.flops_per_token(N, n_layers=12, n_heads=12)


# --- seed 000: the 70B / 15T estimate and practice problem 2 ---------------------------


def test_seed_000_llama_scale_estimate():
    e = training.estimate(70e9, 15e12, hw="h100", dtype="bf16", mfu=0.4, gpus=8192, usd_per_gpu_hour=2)
    assert e.flops == pytest.approx(6.3e24, rel=1e-12)
    assert e.gpu_hours == pytest.approx(4.42e6, rel=2e-3)  # "about 4.4e6 GPU-hours"
    assert e.wall_clock_hours == pytest.approx(540, abs=0.5)  # "about 540 hours"
    assert e.wall_clock_days == pytest.approx(22.5, abs=0.05)  # "22.5 days"
    assert e.cost_usd == pytest.approx(8.8e6, rel=0.01)  # "about $8.8M"
    data = json.loads(json.dumps(e.to_dict()))  # the CLI's --json
    assert {"flops", "gpu_hours", "wall_clock_hours", "wall_clock_days", "cost_usd"} <= set(data)


def test_seed_000_practice_problem_2():
    fp8 = training.estimate(400e9, 8e12, hw="h100", dtype="fp8", mfu=0.35, deadline_hours=30 * 24)
    assert fp8.flops == pytest.approx(1.92e25, rel=1e-12)
    assert fp8.gpu_hours == pytest.approx(7.7e6, rel=0.005)
    assert 10_600 <= fp8.gpus_needed <= 10_800  # "about 10,700 GPUs"
    assert fp8.gpus_needed == math.ceil(fp8.gpu_hours / 720)
    bf16 = training.estimate(400e9, 8e12, hw="h100", dtype="bf16", mfu=0.35, deadline_hours=30 * 24)
    assert bf16.gpu_hours == pytest.approx(1.54e7, rel=0.005)
    assert bf16.gpu_hours / fp8.gpu_hours == pytest.approx(H100_FP8 / H100_BF16)


def test_estimate_leaves_out_what_it_cannot_know():
    e = training.estimate(70e9, 15e12)
    assert e.flops == 6.3e24 and e.gpu_hours is None and e.wall_clock_hours is None and e.cost_usd is None
    e = training.estimate(70e9, 15e12, hw="h100", usd_per_gpu_hour=2)
    assert e.gpu_hours and e.cost_usd and e.wall_clock_hours is None and e.gpus_needed is None


@pytest.mark.parametrize("accelerator", hardware.catalog(), ids=lambda a: a.key)
def test_estimate_identity_on_every_catalog_entry(accelerator):
    for precision in accelerator.precisions:
        e = training.estimate(7e9, 1e12, hw=accelerator.key, dtype=precision, mfu=0.5, gpus=64, usd_per_gpu_hour=3)
        assert e.peak_flops == accelerator.peak(precision)
        assert e.gpu_hours * 3600 * 0.5 * e.peak_flops == pytest.approx(e.flops)
        assert e.wall_clock_hours * 64 == pytest.approx(e.gpu_hours)
        assert e.cost_usd == pytest.approx(3 * e.gpu_hours)


def test_gpus_for_deadline_rounds_up_but_not_for_rounding_noise():
    assert training.gpus_for_deadline(1001, 10) == 101
    assert training.gpus_for_deadline(8192 * 540.0, 540.0) == 8192
    assert training.gpus_for_deadline(0.5, 10) == 1


# --- MFU, HFU and their plausibility ---------------------------------------------------


def test_seed_000_mfu_quiz():
    impossible = training.mfu_report(70e9, 3000, 1, "h100", "bf16")
    assert impossible["mfu"] == pytest.approx(1.27, abs=0.005)
    assert impossible["level"] == "impossible" and impossible["plausible"] is False
    assert "impossible" in impossible["warning"] and "sparse" in impossible["warning"]
    ok = training.mfu_report(70e9, 900, 1, "h100", "bf16")
    assert ok["mfu"] == pytest.approx(0.38, abs=0.005)
    assert ok["level"] == "ok" and ok["plausible"] is True and ok["warning"] is None
    # tokens/s is the total: 8 GPUs at 900 each is the same run
    assert training.mfu_report(70e9, 8 * 900, 8, "h100", "bf16")["mfu"] == pytest.approx(ok["mfu"])


def test_seed_004_checkpointing_hfu_and_mfu():
    forward, recompute, backward, seconds, peak = 50e12, 450e12, 300e12, 10, 100e12
    assert training.hfu(forward + recompute + backward, seconds, peak) == pytest.approx(0.80)
    assert training.mfu(forward + backward, seconds, peak) == pytest.approx(0.35)


def test_utilization_counts_every_gpu():
    assert training.utilization(8e15, 10, 1e14, gpus=8) == pytest.approx(1.0)
    assert training.mfu_from_throughput(1e9, 1000, 1e13, gpus=2) == pytest.approx(6e12 / 2e13)
    assert training.mfu_from_throughput(1e9, 1000, 1e13, flops_per_token=8e9) == pytest.approx(0.8)


def test_seed_004_padded_gemm():
    assert training.padding_efficiency(130, 130, 130) == pytest.approx(4_394_000 / 33_554_432)
    assert round(training.padding_efficiency(130, 130, 130), 3) == 0.131
    assert training.padding_efficiency(256, 512, 128) == 1.0
    hfu = 0.8
    assert hfu * training.padding_efficiency(130, 130, 130) == pytest.approx(0.105, abs=5e-4)


@pytest.mark.parametrize("mfu, level", [(0.05, "ok"), (0.38, "ok"), (0.6, "ok"), (0.61, "suspicious"),
                                        (1.0, "suspicious"), (1.01, "impossible"), (1.5, "impossible")])
def test_mfu_verdict_levels(mfu, level):
    verdict = training.mfu_verdict(mfu)
    assert verdict.level == level and verdict.plausible == (level == "ok")
    assert f"{mfu:.1%}" in verdict.message


def test_mfu_verdict_explains_what_to_check():
    assert "HFU" in training.mfu_verdict(0.65).message  # the 55-65% "excellent" figures
    assert "tokens/s per GPU" in training.mfu_verdict(1.27).message
    assert "below" in training.mfu_verdict(0.1).message


# --- backing a public run's MFU out of its GPU-hours -----------------------------------


def test_implied_mfu_of_public_runs():
    # Llama 3 70B: 6.4M H100-80GB GPU-hours for 15T+ tokens (meta-llama/llama3 MODEL_CARD.md, April 2024)
    assert training.implied_mfu(70e9, 15e12, 6.4e6, H100_BF16) == pytest.approx(0.277, abs=0.002)
    # DeepSeek-V3: 2.788M H800 GPU-hours for 14.8T tokens, 37B active parameters (arXiv:2412.19437,
    # Table 1). The H800 has the H100 SXM's dense math; it trained mostly in FP8.
    assert training.implied_mfu(37e9, 14.8e12, 2.788e6, H100_BF16) == pytest.approx(0.331, abs=0.002)
    assert training.implied_mfu(37e9, 14.8e12, 2.788e6, H100_FP8) == pytest.approx(0.165, abs=0.002)


def test_seed_003_exercise_2_model_size_for_40_percent():
    """100B tokens in 30 days on 1,024 H100s names no model: which size makes it 40% MFU?"""
    N = training.params_for_mfu(100e9, DAYS_30_S, 1024, H100_BF16, 0.4)
    assert N == pytest.approx(0.4 * 1024 * 989e12 * DAYS_30_S / (6 * 100e9))
    assert N == pytest.approx(1.75e12, rel=1e-3)  # a 1.75T-parameter model: most models would be far below 40%
    assert training.mfu(training.training_flops(N, 100e9), DAYS_30_S, H100_BF16, gpus=1024) == pytest.approx(0.4)
    assert training.mfu_from_throughput(N, 100e9 / DAYS_30_S, H100_BF16, gpus=1024) == pytest.approx(0.4)
    # a 7B model on that cluster and schedule: well under 1%
    assert training.mfu_from_throughput(7e9, 100e9 / DAYS_30_S, H100_BF16, gpus=1024) < 0.01


# --- memory ----------------------------------------------------------------------------


def test_adam_mixed_precision_is_16_bytes_per_param():
    parts = training.adam_memory_per_param()
    assert parts == {"weights": 2, "grads": 2, "master": 4, "first_moment": 4, "second_moment": 4, "total": 16}
    assert training.adam_memory_per_param(master=None)["total"] == 12
    assert training.adam_memory_per_param("fp32", "fp32", None, "fp32")["total"] == 16
    assert training.adam_memory_per_param(moments="bfloat16")["total"] == 12


# --- refusals --------------------------------------------------------------------------


@pytest.mark.parametrize("mfu", [1.5, 0, -0.2, math.nan])
def test_assumed_mfu_must_be_a_fraction(mfu):
    with pytest.raises(InvalidValue, match=r"^mfu must be a fraction in \(0, 1\]"):
        training.estimate(70e9, 15e12, hw="h100", mfu=mfu)
    with pytest.raises(InvalidValue, match=r"\(0, 1\]"):
        training.gpu_hours(6.3e24, H100_BF16, mfu)
    with pytest.raises(InvalidValue, match=r"\(0, 1\]"):
        training.params_for_mfu(1e11, DAYS_30_S, 1024, H100_BF16, mfu)


def test_mfu_verdict_takes_any_positive_measurement_but_not_zero():
    assert training.mfu_verdict(1.5).level == "impossible"
    with pytest.raises(InvalidValue, match=r"^mfu must be a finite number greater than 0; got 0"):
        training.mfu_verdict(0)


def test_unknown_hardware_and_unsupported_precision():
    with pytest.raises(UnknownHardware, match=r"Unknown accelerator 'h1000'\. Did you mean"):
        training.estimate(70e9, 15e12, hw="h1000")
    with pytest.raises(UnsupportedPrecision, match=r"T4 has no bf16 peak in the catalog\. Available precisions"):
        training.estimate(70e9, 15e12, hw="t4", dtype="bf16")
    with pytest.raises(UnsupportedPrecision, match=r"T4 has no bf16 peak"):
        training.mfu_report(7e9, 1000, 1, "t4", "bf16")
    with pytest.raises(UnknownPrecision, match=r"Unknown precision 'bf17'"):
        training.estimate(70e9, 15e12, dtype="bf17")


@pytest.mark.parametrize("call, name", [
    (lambda: training.training_flops(-70e9, 15e12), "params"),
    (lambda: training.training_flops(70e9, "lots"), "tokens"),
    (lambda: training.estimate(70e9, 15e12, hw="h100", gpus=0), "gpus"),
    (lambda: training.estimate(70e9, 15e12, hw="h100", usd_per_gpu_hour=-2), "usd_per_gpu_hour"),
    (lambda: training.utilization(1e15, 0, 1e14), "seconds"),
    (lambda: training.wall_clock_hours(10, 0), "gpus"),
    (lambda: training.gpus_for_deadline(10, math.inf), "hours"),
    (lambda: training.training_flops(10**400, 1), "params"),
])
def test_bad_values_name_the_argument(call, name):
    with pytest.raises(InvalidValue, match=rf"^{name}"):
        call()


def test_overflow_is_an_invalid_value_not_inf():
    with pytest.raises(InvalidValue, match="out of floating-point range"):
        training.training_flops(1e200, 1e200)
    with pytest.raises(InvalidValue, match="out of floating-point range"):
        training.utilization(1, 1e-200, 1e-200, gpus=1e-200)


# --- properties ------------------------------------------------------------------------

positives = st.floats(min_value=1e-3, max_value=1e30)
mfus = st.floats(min_value=1e-3, max_value=1.0)


@settings(max_examples=200, deadline=None)
@given(C=positives, k=st.floats(min_value=1e-3, max_value=1e3), peak=positives, mfu=mfus)
def test_gpu_hours_scale_linearly_with_flops_and_inversely_with_mfu(C, k, peak, mfu):
    assert training.gpu_hours(k * C, peak, mfu) == pytest.approx(k * training.gpu_hours(C, peak, mfu), rel=1e-9)
    assert training.gpu_hours(C, peak, mfu) * mfu == pytest.approx(training.gpu_hours(C, peak, 1.0), rel=1e-9)


@settings(max_examples=200, deadline=None)
@given(N=st.floats(1e6, 1e13), D=st.floats(1e6, 1e14), peak=st.floats(1e12, 1e16), mfu=mfus,
       gpus=st.integers(1, 100_000))
def test_round_trips(N, D, peak, mfu, gpus):
    hours = training.gpu_hours(training.training_flops(N, D), peak, mfu)
    assert training.implied_mfu(N, D, hours, peak) == pytest.approx(mfu, rel=1e-9)
    seconds = training.wall_clock_hours(hours, gpus) * 3600
    assert training.params_for_mfu(D, seconds, gpus, peak, mfu) == pytest.approx(N, rel=1e-9)
    assert training.mfu_from_throughput(N, D / seconds, peak, gpus) == pytest.approx(mfu, rel=1e-9)


anything = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6), st.sampled_from(["70B", "15T", "h100", "t4", "bf16", "fp8", "1e400", "-3"]),
)
CALLS = {
    "training_flops": (training.training_flops, 2), "forward_backward": (training.forward_backward, 2),
    "recompute_flops": (training.recompute_flops, 2), "flops_per_token": (training.flops_per_token, 6),
    "recomputed_forwards": (training.recomputed_forwards, 2),
    "utilization": (training.utilization, 4), "hfu": (training.hfu, 4), "mfu": (training.mfu, 4),
    "mfu_from_throughput": (training.mfu_from_throughput, 5),
    "padding_efficiency": (training.padding_efficiency, 4),
    "mfu_verdict": (training.mfu_verdict, 1), "mfu_report": (training.mfu_report, 5),
    "gpu_hours": (training.gpu_hours, 3), "wall_clock_hours": (training.wall_clock_hours, 2),
    "cost_usd": (training.cost_usd, 2), "gpus_for_deadline": (training.gpus_for_deadline, 2),
    "implied_mfu": (training.implied_mfu, 4), "params_for_mfu": (training.params_for_mfu, 5),
    "estimate": (training.estimate, 8), "adam_memory_per_param": (training.adam_memory_per_param, 4),
}


@settings(max_examples=400, deadline=None)
@given(name=st.sampled_from(sorted(CALLS)), data=st.data())
def test_random_inputs_raise_only_roofkit_errors(name, data):
    function, arity = CALLS[name]
    args = data.draw(st.lists(anything, min_size=arity, max_size=arity))
    try:
        function(*args)
    except RoofkitError:
        pass


# --- recomputation grows with depth; a causal kernel runs half of PaLM's attention term --------


def _layer_forwards_by_walking_the_backward(n_layers, keep_every):
    """Layer forwards rerun when the backward pass rebuilds each layer from the nearest kept input."""
    kept = [i for i in range(n_layers) if i % keep_every == 0]  # the inputs of layers 0, k, 2k, ...
    total = 0
    for layer in reversed(range(n_layers)):
        start = max(i for i in kept if i <= layer)
        total += layer - start + 1  # rerun layers start .. layer to get this layer's activations
    return total


@pytest.mark.parametrize("n_layers,keep_every", [(1, 1), (17, 1), (17, 17), (10, 3), (80, 9), (126, 126), (5, 2)])
def test_recomputed_forwards_by_walking_the_backward_pass(n_layers, keep_every):
    expected = _layer_forwards_by_walking_the_backward(n_layers, keep_every) / n_layers
    assert training.recomputed_forwards(n_layers, keep_every) == pytest.approx(expected)


def test_recomputation_grows_with_depth_when_nothing_is_kept():
    assert training.recomputed_forwards(80) == 1  # every layer's input kept: one extra forward, 8ND
    assert training.recompute_flops(1, 1) == 6 + 2 * training.recomputed_forwards(80)
    assert [training.recomputed_forwards(n, n) for n in (1, 17, 80)] == [1, 9, 40.5]  # (L + 1) / 2
    # lesson 07's example: 450 TFLOPs of recomputation for a 50 TFLOP forward is 9 forwards
    assert training.recomputed_forwards(17, 17) == 450 / 50


@pytest.mark.parametrize("args, message", [((0, 1), r"^n_layers must be"), ((3.5, 1), r"^n_layers must be a whole"),
                                            ((4, 5), r"^keep_every=5 is more than n_layers=4"),
                                            ((4, 0), r"^keep_every must be")])
def test_recomputed_forwards_bad_input(args, message):
    with pytest.raises(InvalidValue, match=message):
        training.recomputed_forwards(*args)


def test_a_causal_kernel_runs_about_half_of_palms_attention_term():
    N, L, H, Q, T = 6.7e9, 32, 32, 128, 4096
    palm = training.flops_per_token(N, L, H, Q, T)
    causal = training.flops_per_token(N, L, H, Q, T, causal=True)
    assert palm - 6 * N == 12 * L * H * Q * T
    assert causal - 6 * N == pytest.approx(12 * L * H * Q * (T + 1) / 2)  # T (T + 1) / 2 scores per sequence
    # so, with no recomputation, what the hardware executes is less than PaLM's model FLOPs: HFU < MFU
    assert causal < palm
    with pytest.raises(InvalidValue, match=r"^causal must be True or False"):
        training.flops_per_token(N, L, H, Q, T, causal="yes")


def test_import_stays_light():
    code = ("import sys, roofkit.training, roofkit.fusion; "
            "print(sorted({'sympy', 'matplotlib', 'torch'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
