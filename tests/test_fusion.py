"""Fusion's HBM traffic, counted tensor by tensor in the tests; the decoder-layer grouping; Amdahl's law."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofkit.perf import fusion
from roofkit.catalogs import hardware
from roofkit.errors import InvalidValue, RoofkitError, UnknownHardware, UnknownPrecision
from roofkit.perf.fusion import OPS, Op

N = 4096 * 4096  # elements of one activation: 4,096 tokens x d_model 4,096


# --- chains of elementwise ops ----------------------------------------------------------


def test_bias_gelu_chain_counted_by_hand():
    b = 2
    c = fusion.chain(["bias_add", "gelu"], N, bytes_per_element=b)
    # unfused: bias_add reads x, writes y1; gelu reads y1, writes y2: four tensors of N elements
    assert c.unfused.bytes == 4 * N * b
    # fused: read x, write y2
    assert c.fused.bytes == 2 * N * b
    assert c.unfused.flops == c.fused.flops == (1 + 8) * N
    assert c.bytes_saved == 2 * N * b and c.traffic_ratio == 2
    assert (c.launches_unfused, c.launches_fused) == (2, 1)
    assert c.fused.intensity == pytest.approx(9 / 4)  # FLOP/byte, still far below any ridge


def test_residual_rmsnorm_chain_counted_by_hand():
    b = 2
    c = fusion.chain(["residual_add", "rmsnorm"], N, bytes_per_element=b)
    # unfused: add reads x and r, writes h; rmsnorm reads h, writes y: 5 tensors
    assert c.unfused.bytes == 5 * N * b
    # fused, h never leaves the chip: read x and r, write y
    assert c.fused.bytes == 3 * N * b
    # the residual stream h is needed by the next residual add: a real kernel writes it too
    kept = fusion.chain(["residual_add", "rmsnorm"], N, bytes_per_element=b, keep=["residual_add"])
    assert kept.fused.bytes == 4 * N * b and kept.unfused.bytes == 5 * N * b


def test_a_longer_chain_with_two_input_ops():
    # bias_add -> gelu -> dropout -> residual_add -> scale, in FP32
    b = 4
    c = fusion.chain(["bias_add", "gelu", "dropout", "residual_add", "scale"], N, bytes_per_element="fp32")
    tensors_unfused = 2 + 2 + 2 + 3 + 2
    tensors_fused = 1 + 1 + 1  # x and the residual in, the result out
    assert c.unfused.bytes == tensors_unfused * N * b and c.fused.bytes == tensors_fused * N * b
    assert c.traffic_ratio == pytest.approx(11 / 3)
    assert c.launches_unfused == 5


def test_one_op_gains_nothing_from_fusion():
    c = fusion.chain(["gelu"], N)
    assert c.unfused == c.fused and c.traffic_ratio == 1 and c.bytes_saved == 0
    assert c.fused.intensity == 2  # seed 000's GELU quiz: 8 FLOPs over 4 bytes, independent of n


def test_custom_ops_and_names_mix():
    swish_beta = Op("swish_beta", 5)
    c = fusion.chain([swish_beta, "mul"], 1000, bytes_per_element=1)
    assert c.unfused.bytes == (2 + 3) * 1000 and c.fused.bytes == (2 + 1) * 1000
    assert c.ops == ("swish_beta", "mul")


def test_time_is_the_larger_of_cpu_issue_and_gpu_time():
    h100 = hardware.get("h100")
    c = fusion.chain(["bias_add", "gelu"], N)
    assert c.fused.intensity < h100.ridge("bf16")  # memory-bound, so each kernel's roofline time = bytes / bandwidth
    no_overhead = c.time("h100", "bf16", launch_overhead_s=0)
    assert no_overhead["unfused_s"] == pytest.approx(c.unfused.bytes / h100.bandwidth)
    assert no_overhead["fused_s"] == pytest.approx(c.fused.bytes / h100.bandwidth)
    assert no_overhead["speedup"] == pytest.approx(c.traffic_ratio)
    # launches are asynchronous: behind 40 µs of memory traffic, two launches of 3.6 µs cost nothing
    default = c.time("h100", "bf16")
    assert default["launch_overhead_s"] == fusion.DEFAULT_LAUNCH_OVERHEAD_S == pytest.approx(1 / 280e3)
    assert default["unfused_s"] == no_overhead["unfused_s"] and default["unfused_bound"] == "gpu"
    assert default["unfused_cpu_s"] == pytest.approx(2 / 280e3)
    # the GPU's floor is paid by every kernel: two floors unfused, one fused
    floored = c.time("h100", "bf16", kernel_floor_s=5e-6)
    assert floored["unfused_s"] == pytest.approx(no_overhead["unfused_s"] + 2 * 5e-6)
    assert floored["fused_s"] == pytest.approx(no_overhead["fused_s"] + 5e-6)
    # tiny tensors: the fixed costs are everything and the speed-up tends to the kernel ratio
    tiny = fusion.chain(["bias_add", "gelu", "scale"], 1024).time("h100", "bf16")
    assert tiny["unfused_bound"] == tiny["fused_bound"] == "cpu"
    assert tiny["unfused_s"] == pytest.approx(3 / 280e3, rel=1e-9) and tiny["speedup"] == pytest.approx(3)
    # a slow host against a small floor: the CPU sets the pace; a fast host: the GPU
    assert fusion.chain(["gelu"], 1024).time("h100", "bf16", 20e-6, 5e-6)["fused_s"] == pytest.approx(20e-6)
    assert fusion.chain(["gelu"], 1024).time("h100", "bf16", 1e-6, 5e-6)["fused_bound"] == "gpu"


def test_stream_time_is_a_max_not_a_sum():
    t = fusion.stream_time(17, 100e-6, launch_overhead_s=4e-6, kernel_floor_s=5e-6)
    assert (t["cpu_s"], t["gpu_s"]) == (pytest.approx(68e-6), pytest.approx(185e-6))
    assert t["time_s"] == t["gpu_s"] and t["bound"] == "gpu"
    slow_host = fusion.stream_time(17, 100e-6, launch_overhead_s=20e-6, kernel_floor_s=5e-6)
    assert slow_host["time_s"] == pytest.approx(340e-6) and slow_host["bound"] == "cpu"
    # never less than either side, never more than their sum
    for k, R, c, t0 in [(1, 0, 1e-6, 0), (5, 1e-3, 1e-5, 1e-6), (40, 1e-6, 3e-6, 5e-6)]:
        r = fusion.stream_time(k, R, c, t0)
        assert max(k * c, k * t0 + R) == pytest.approx(r["time_s"]) and r["time_s"] <= k * c + k * t0 + R


def test_the_max_model_against_an_h200_host():
    """The measured launch figures of roofkit's H200 dataset: the CPU's launch, a kernel inside a CUDA graph,
    and a long stream of tiny kernels the CPU launched. The stream runs at the slower side's pace; adding the
    two would be off by the whole GPU time."""
    from roofkit.measure import layers

    launch = layers.load_layers().launch
    model = fusion.stream_time(1, launch["graph_per_kernel_s"], launch["host_per_launch_s"])
    assert model["bound"] == "cpu"
    assert model["time_s"] == pytest.approx(launch["gpu_stream_per_kernel_s"], rel=0.02)
    additive = launch["graph_per_kernel_s"] + launch["host_per_launch_s"]
    assert additive / launch["gpu_stream_per_kernel_s"] > 1.1


def test_the_critical_path_counted_by_hand():
    """F09-1: kernel i is issued at i c and runs in order; the stream ends at max_i (i c + sum_{j >= i} g_j)."""
    # three kernels of 5, 1 and 10 µs, launches of 4 µs: issued at 4, 8, 12; run 4-9, 9-10, 12-22
    r = fusion.stream_critical_path([5e-6, 1e-6, 10e-6], 4e-6)
    assert r["time_s"] == pytest.approx(22e-6)
    assert (r["cpu_s"], r["gpu_s"]) == (pytest.approx(12e-6), pytest.approx(16e-6))
    assert r["max_s"] == pytest.approx(16e-6) and r["sum_s"] == pytest.approx(28e-6)
    assert r["launches_on_path"] == 3 and r["gpu_on_path_s"] == pytest.approx(10e-6)
    assert r["gpu_idle_s"] == pytest.approx(6e-6)  # 0-4 waiting for the first launch, 10-12 for the third
    # the floor is added to every kernel
    floored = fusion.stream_critical_path([5e-6, 1e-6, 10e-6], 4e-6, kernel_floor_s=1e-6)
    assert floored["gpu_s"] == pytest.approx(19e-6) and floored["time_s"] == pytest.approx(12e-6 + 11e-6)


def test_the_order_of_the_kernels_matters():
    tiny, long, c = 1e-6, 500e-6, 8.3e-6
    late = fusion.stream_critical_path([tiny] * 100 + [long], c)
    early = fusion.stream_critical_path([long] + [tiny] * 100, c)
    assert late["time_s"] == pytest.approx(101 * c + long)  # the launches, then the long kernel
    assert early["time_s"] == pytest.approx(101 * c + tiny)  # the tiny ones issued while the long one runs
    assert late["max_s"] == pytest.approx(early["max_s"]) and late["sum_s"] == pytest.approx(early["sum_s"])
    # a GPU-bound stream: one launch, then the GPU's work back to back
    gpu_bound = fusion.stream_critical_path([50e-6] * 20, 3e-6)
    assert gpu_bound["time_s"] == pytest.approx(3e-6 + 20 * 50e-6) and gpu_bound["launches_on_path"] == 1


@settings(max_examples=200, deadline=None)
@given(times=st.lists(st.floats(0, 1e-3), min_size=1, max_size=60), c=st.floats(0, 1e-4), t0=st.floats(0, 1e-5))
def test_the_critical_path_lies_between_the_max_and_the_sum(times, c, t0):
    r = fusion.stream_critical_path(times, c, t0)
    model = fusion.stream_time(len(times), sum(times), c, t0)
    assert r["max_s"] == pytest.approx(model["time_s"], rel=1e-9, abs=1e-15)
    assert r["max_s"] * (1 - 1e-12) <= r["time_s"] <= r["sum_s"] * (1 + 1e-12) + 1e-18
    # an event simulation of the same stream: issue, wait for the previous kernel, run
    end = 0.0
    for i, t in enumerate(times, start=1):
        end = max(i * c, end) + t0 + t
    assert r["time_s"] == pytest.approx(end, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("args, message", [(([],), r"^kernel_s must be a non-empty list"),
                                            (([1e-6, -1e-6],), r"^kernel_s must be"),
                                            ((1e-6,), r"^kernel_s must be"),
                                            ((["fast"],), r"^kernel_s must be"),
                                            (([1e-6], -1), r"^launch_overhead_s must be"),
                                            (([1e-6], 1e-6, "t0"), r"^kernel_floor_s must be")])
def test_stream_critical_path_bad_input(args, message):
    with pytest.raises(InvalidValue, match=message):
        fusion.stream_critical_path(*args)


@pytest.mark.parametrize("args, message", [((0, 1e-6), r"^kernels must be a whole number of at least 1"),
                                            ((2.5, 1e-6), r"^kernels must be a whole number"),
                                            ((3, -1e-6), r"^roofline_s must be"),
                                            ((3, 1e-6, -1), r"^launch_overhead_s must be"),
                                            ((3, 1e-6, 1e-6, "t0"), r"^kernel_floor_s must be")])
def test_stream_time_bad_input(args, message):
    with pytest.raises(InvalidValue, match=message):
        fusion.stream_time(*args)


def test_to_dict_is_json_ready():
    import json

    data = json.loads(json.dumps(fusion.chain(["bias_add", "gelu"], 1024).to_dict()))
    assert data["traffic_ratio"] == 2 and data["fused"]["bytes"] == 2 * 1024 * 2


# --- seed 003, exercise 5: RMSNorm -> Linear -> SiLU -> Linear -------------------------


def _mlp_bytes_by_hand(t, d, f, b):
    weights = d + d * f + f * d  # norm weight, W1, W2
    unfused = (t * d + d + t * d) + (t * d + d * f + t * f) + (t * f + t * f) + (t * f + f * d + t * d)
    fused = t * d + weights + t * d
    return unfused * b, fused * b, weights * b


@pytest.mark.parametrize("tokens", [1, 4, 16, 512, 4096, 16384])
def test_mlp_block_bytes_counted_by_hand(tokens):
    d, f, b = 4096, 4 * 4096, 2
    r = fusion.mlp_block(tokens, d, f, bytes_per_element=b)
    unfused, fused, weights = _mlp_bytes_by_hand(tokens, d, f, b)
    assert r["unfused_bytes"] == unfused and r["fused_bytes"] == fused and r["weight_bytes"] == weights
    assert r["bytes_saved"] == (2 * tokens * d + 4 * tokens * f) * b
    assert r["flops"] == 2 * (2 * tokens * d * f) + 4 * tokens * d + 4 * tokens * f
    assert (r["launches_unfused"], r["launches_fused"]) == (4, 1)


def _swiglu_bytes_by_hand(t, d, f, b):
    weights = d + 3 * d * f  # norm weight, W_gate, W_up, W_down
    unfused = ((t * d + d + t * d)                       # rmsnorm: x in, y out
               + 2 * (t * d + d * f + t * f)             # gate and up: y and a weight in, t x f out each
               + (t * f + t * f)                         # SiLU(gate)
               + (2 * t * f + t * f)                     # SiLU(gate) * up
               + (t * f + f * d + t * d))                # down
    return unfused * b, (t * d + weights + t * d) * b, weights * b


@pytest.mark.parametrize("tokens", [1, 16, 4096])
def test_swiglu_mlp_block_counted_by_hand(tokens):
    # Llama 2 7B's MLP: three matrices of 4096 x 11008, six eager kernels
    d, f, b = 4096, 11008, 2
    r = fusion.mlp_block(tokens, d, f, bytes_per_element=b, gated=True)
    unfused, fused, weights = _swiglu_bytes_by_hand(tokens, d, f, b)
    assert r["unfused_bytes"] == unfused and r["fused_bytes"] == fused and r["weight_bytes"] == weights
    assert r["weight_bytes"] == pytest.approx(270.5e6, rel=1e-3)  # not the 180 MB of two matrices
    assert r["bytes_saved"] == (3 * tokens * d + 8 * tokens * f) * b
    assert (r["launches_unfused"], r["launches_fused"]) == (6, 1)
    with pytest.raises(InvalidValue, match=r"^gated must be True or False"):
        fusion.mlp_block(tokens, d, f, gated="yes")


def test_mlp_block_decode_vs_prefill():
    d, f = 4096, 4 * 4096
    # decode (1 to 16 tokens): the weights dominate both versions, fusion saves under 1% of the bytes
    for tokens in (1, 16):
        assert fusion.mlp_block(tokens, d, f)["traffic_ratio"] < 1.01
    # prefill: the activation round trips dominate; the ratio climbs toward (4d + 4f) / 2d = 10
    assert fusion.mlp_block(4096, d, f)["traffic_ratio"] == pytest.approx(2.8, abs=0.01)
    assert fusion.mlp_block(1e8, d, f)["traffic_ratio"] == pytest.approx(10, rel=0.01)


# --- seed 003, exercise 3: a decoder layer's kernels before and after ------------------


def test_fusion_groups_cover_every_unfused_kernel_exactly_once():
    groups = fusion.fusion_groups()
    members = [k for kernels in groups.values() for k in kernels]
    assert sorted(members) == sorted(fusion.DECODER_LAYER_KERNELS)
    assert len(members) == len(set(members))
    assert tuple(groups) == fusion.FUSED_DECODER_LAYER_KERNELS
    # kernels keep their order: the fused layer runs the same computation front to back
    assert tuple(members) == fusion.DECODER_LAYER_KERNELS


def test_fusion_cuts_the_kernel_count():
    before, after = len(fusion.DECODER_LAYER_KERNELS), len(fusion.FUSED_DECODER_LAYER_KERNELS)
    assert before >= 10 and after <= 5  # seed 003: "10 separate operations -> 3-4 fused kernels"
    assert "flash_attention" in fusion.FUSED_DECODER_LAYER_KERNELS


def test_fusion_groups_returns_a_copy():
    fusion.fusion_groups().clear()
    assert fusion.fusion_groups()


# --- Amdahl's law ---------------------------------------------------------------------


def test_seed_004_amdahl_example():
    # halve a 10 ms part of a 100 ms step: 10 -> 5 ms, 100 -> 95 ms
    assert fusion.amdahl(0.1, 2) == pytest.approx(100 / 95)
    assert fusion.amdahl_time_saved(0.1, 2) == pytest.approx(5 / 100)
    # make it infinitely fast: 100 -> 90 ms, at most 10% saved
    assert fusion.amdahl(0.1, math.inf) == pytest.approx(100 / 90)
    assert fusion.amdahl_time_saved(0.1, math.inf) == pytest.approx(0.1)


def test_amdahl_edges():
    assert fusion.amdahl(1, 4) == 4  # the whole program sped up
    assert fusion.amdahl(1, math.inf) == math.inf
    assert fusion.amdahl(0.5, 1) == 1
    assert fusion.amdahl(0.5, 0.5) == pytest.approx(1 / 1.5)  # a slowdown is allowed


@settings(max_examples=200, deadline=None)
@given(p=st.floats(1e-6, 1.0), s1=st.floats(1e-3, 1e6), s2=st.floats(1e-3, 1e6))
def test_amdahl_properties(p, s1, s2):
    lo, hi = sorted((s1, s2))
    assert fusion.amdahl(p, lo) <= fusion.amdahl(p, hi) * (1 + 1e-12)  # monotone in the part's speed-up
    if p < 1:
        assert fusion.amdahl(p, hi) <= 1 / (1 - p) * (1 + 1e-12)  # bounded by the untouched part
    assert fusion.amdahl_time_saved(p, hi) == pytest.approx(1 - 1 / fusion.amdahl(p, hi), abs=1e-12)
    assert fusion.amdahl_time_saved(p, hi) <= p


@pytest.mark.parametrize("fraction", [0, -0.1, 1.5, math.nan, "half"])
def test_amdahl_fraction_must_be_in_unit_interval(fraction):
    with pytest.raises(InvalidValue, match=r"^fraction must be a fraction in \(0, 1\]"):
        fusion.amdahl(fraction, 2)
    with pytest.raises(InvalidValue, match=r"\(0, 1\]"):
        fusion.amdahl_time_saved(fraction, 2)


@pytest.mark.parametrize("speedup", [0, -2, math.nan, -math.inf, None])
def test_amdahl_speedup_must_be_positive(speedup):
    with pytest.raises(InvalidValue, match=r"^speedup must be a finite number greater than 0"):
        fusion.amdahl(0.1, speedup)


# --- refusals and robustness ------------------------------------------------------------


@pytest.mark.parametrize("ops, message", [
    ([], r"non-empty list of Op objects or names from: bias_add, gelu"),
    (["gelu", "geluu"], r"got 'geluu'"),
    (42, r"got 42"),
    ([OPS["gelu"], Op("source", 1, reads=0)], r"source reads nothing"),
])
def test_chain_refuses_bad_ops(ops, message):
    with pytest.raises(InvalidValue, match=message):
        fusion.chain(ops, 1024)


def test_chain_refuses_bad_sizes_and_keep():
    with pytest.raises(InvalidValue, match=r"^n must be"):
        fusion.chain(["gelu"], 0)
    with pytest.raises(InvalidValue, match=r"keep: 'gelu' is not an op before the last"):
        fusion.chain(["bias_add", "gelu"], 1024, keep="gelu")
    with pytest.raises(UnknownPrecision, match=r"Unknown precision 'fp12'"):
        fusion.chain(["gelu"], 1024, bytes_per_element="fp12")
    with pytest.raises(UnknownHardware, match=r"Unknown accelerator 'h1000'"):
        fusion.chain(["gelu"], 1024).time("h1000", "bf16")
    with pytest.raises(InvalidValue, match=r"^launch_overhead_s must be"):
        fusion.chain(["gelu"], 1024).time("h100", "bf16", launch_overhead_s=-1)


@pytest.mark.parametrize("kwargs, message", [
    ({"flops_per_element": -1}, r"^x: flops_per_element must be"),
    ({"flops_per_element": 1, "reads": 1.5}, r"^x: reads counts whole tensors"),
    ({"flops_per_element": 1, "writes": 0}, r"^x: writes counts whole tensors, so it must be an integer of at least 1"),
])
def test_op_refuses_bad_counts(kwargs, message):
    with pytest.raises(InvalidValue, match=message):
        Op("x", **kwargs)


@settings(max_examples=200, deadline=None)
@given(names=st.lists(st.sampled_from(sorted(OPS)), min_size=1, max_size=8),
       n=st.integers(1, 10**9), b=st.sampled_from([0.5, 1, 2, 4, "bf16", "fp8"]))
def test_fusion_never_adds_traffic(names, n, b):
    c = fusion.chain(names, n, bytes_per_element=b)
    assert c.fused.flops == c.unfused.flops
    assert c.fused.bytes <= c.unfused.bytes and c.traffic_ratio >= 1
    assert c.fused.intensity >= c.unfused.intensity * (1 - 1e-12)
    assert c.launches_unfused == len(names)


anything = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                     st.text(max_size=6), st.sampled_from(["gelu", "bf16", "h100", "4096"]),
                     st.lists(st.sampled_from(sorted(OPS) + ["nope", 3]), max_size=3))


# --- the online softmax ------------------------------------------------------------------------


@pytest.mark.parametrize("block", [1, 3, 8, 64, 1000])
def test_online_softmax_is_the_softmax_and_attention_output(block):
    import numpy as np

    rng = np.random.default_rng(block)
    x, v = 20 * rng.normal(size=64), rng.normal(size=(64, 5))
    p = np.exp(x - x.max()) / np.exp(x - x.max()).sum()  # the two-pass softmax, as the oracle
    r = fusion.online_softmax(x, block, v)
    assert np.allclose(r.probabilities, p, rtol=1e-12, atol=0)
    assert np.allclose(r.output, p @ v, rtol=1e-12, atol=1e-15)
    assert len(r.maxima) == len(r.sums) == math.ceil(64 / block)
    assert list(r.maxima) == sorted(r.maxima) and r.maxima[-1] == x.max()  # the running max only grows
    assert r.sums[-1] == pytest.approx(np.exp(x - x.max()).sum())


def test_online_softmax_never_overflows():
    import numpy as np

    r = fusion.online_softmax([1000.0, 1001.0, 999.0], block=1)  # np.exp(1000) alone is inf
    assert np.all(np.isfinite(r.probabilities)) and r.probabilities.sum() == pytest.approx(1)


@pytest.mark.parametrize("args, message", [(([], 2), r"^online_softmax needs"), (([1.0, float("nan")], 1), "finite"),
                                            (([1.0, 2.0], 0), r"^block must be"), (([1.0, 2.0], 1.5), "whole number"),
                                            (([1.0, 2.0], 1, [[1.0]]), r"^values must have one finite row")])
def test_online_softmax_bad_input(args, message):
    with pytest.raises(InvalidValue, match=message):
        fusion.online_softmax(*args)


@settings(max_examples=300, deadline=None)
@given(which=st.sampled_from(["chain", "mlp_block", "amdahl", "amdahl_time_saved", "time", "stream_time",
                              "stream_critical_path", "online_softmax"]),
       data=st.data())
def test_random_inputs_raise_only_roofkit_errors(which, data):
    try:
        if which == "chain":
            fusion.chain(*data.draw(st.tuples(anything, anything, anything)))
        elif which == "mlp_block":
            fusion.mlp_block(*data.draw(st.tuples(anything, anything, anything, anything, anything)))
        elif which == "online_softmax":
            fusion.online_softmax(*data.draw(st.tuples(anything, anything, anything)))
        elif which == "time":
            fusion.chain(["gelu"], 1024).time(*data.draw(st.tuples(anything, anything, anything, anything)))
        elif which == "stream_time":
            fusion.stream_time(*data.draw(st.tuples(anything, anything, anything, anything)))
        elif which == "stream_critical_path":
            fusion.stream_critical_path(*data.draw(st.tuples(anything, anything, anything)))
        else:
            getattr(fusion, which)(*data.draw(st.tuples(anything, anything)))
    except RoofkitError:
        pass
