"""Lesson 03, the roofline and the ridge point: I* = P/B, classify, predict time, % of roofline, moves."""

from ... import formulas
from ...catalogs import hardware
from ...perf import roofline
from ..quiz import Misconception, Question, register

_H100 = {"hw": "H100 SXM5"}


def _ridge(hw, dtype):
    return hardware.get(hw).ridge(dtype)


def _placed(cost, hw, dtype):
    return roofline.analyze(cost, hw, dtype)


def _times(n, hw, dtype, achievable):
    """(T_math, T_mem) in seconds of a square n^3 GEMM on ``hw``, at its datasheet or achievable roofs."""
    acc, cost = hardware.get(hw), formulas.gemm(n, n, n, dtype)
    return (cost.flops / acc.peak(dtype, achievable=achievable),
            cost.bytes / acc.memory_bandwidth(achievable=achievable))


def _achievable_sum_us(hw, dtype, n):
    """T_math + T_mem in µs at the achievable roofs (the best measured matmul rate, a measured copy's bandwidth)."""
    acc, cost = hardware.get(hw), formulas.gemm(n, n, n, dtype)
    bounds = roofline.time_bounds(cost.flops, cost.bytes, acc.peak(dtype, achievable=True),
                                  acc.memory_bandwidth(achievable=True))
    return bounds[1] * 1e6


def _decode_time(batch, k, n, hw, dtype, peak_factor=1):
    """Optimistic time of Y[batch, n] = X[batch, k] @ W[k, n] on ``hw`` with its peak scaled by ``peak_factor``."""
    acc, cost = hardware.get(hw), formulas.gemm(batch, n, k, dtype)
    return roofline.time_bounds(cost.flops, cost.bytes, peak_factor * acc.peak(dtype), acc.bandwidth)[0]


def _bound(hw, dtype, d, batch):
    """'memory' or 'compute': X[batch, d] @ W[d, d] in ``dtype`` against the ``hw``'s ridge."""
    return _placed(formulas.gemm(batch, d, d, dtype), hw, dtype).bound


_RULE_OF_THUMB = ("Count it instead of estimating it: 2 x batch x d^2 FLOPs over (2 x batch x d + d^2) elements "
                  "(X and Y as well as W) times the bytes per element (2 in BF16), and compare that ratio with this "
                  "chip's ridge in this format. 'Intensity is about the batch' is the limit for a batch much smaller "
                  "than d, and only at 2 bytes per element; this close to the ridge it can put the kernel on the "
                  "wrong side.")


def _move(batch, d, dtype):
    """'horizontal' when batching changes the decode GEMM's intensity, 'vertical' when it does not."""
    before, after = formulas.gemm(1, d, d, dtype).intensity, formulas.gemm(batch, d, d, dtype).intensity
    return "vertical" if abs(after / before - 1) < 1e-3 else "horizontal"


def _add(log2n):
    """c = a + b over 2**log2n FP32 elements: 1 FLOP, 2 reads and 1 write per element."""
    return formulas.elementwise(2**log2n, 1, 2, 1, "fp32")


def _add_percent(log2n, measured_ms, hw):
    cost, acc = _add(log2n), hardware.get(hw)
    achieved = cost.flops / (measured_ms / 1e3)
    return roofline.percent_of_roofline(achieved, cost.intensity, acc.peak("fp32"), acc.bandwidth)


register(
    Question(
        id="l03.ridge-bf16",
        lesson="03",
        kind="numeric",
        prompt="What is the ridge point of the {hw} in {dtype}: the intensity where its memory roof meets its "
               "dense {dtype} compute roof? Answer in FLOP/byte.",
        params={**_H100, "dtype": "bf16"},
        variants={"hw": ("A100", "H100 SXM5", "H100 PCIe", "H200")},
        key=_ridge,
        unit="FLOP/byte",
        rtol=0.01,
        hints=(
            "At the ridge, bandwidth x intensity equals the peak: solve B x I* = P for I*.",
            "P is the accelerator's dense peak in that format (FLOP/s) and B its memory bandwidth (bytes/s), "
            "both in its catalog entry; their ratio is in FLOP/byte.",
        ),
        misconceptions=(
            Misconception("sparse-peak", "That is twice the ridge: you used the headline peak, which assumes 2:4 "
                                         "structured sparsity. Dense kernels get half of it: use the dense peak.",
                          scale=2),
            Misconception("inverted", "You divided the bandwidth by the peak. The ridge is FLOP/s over byte/s, "
                                      "which leaves FLOP per byte: hundreds, not a tiny fraction.",
                          answer=lambda hw, dtype: 1 / _ridge(hw, dtype)),
            Misconception("cuda-core-fp32", "That is the ridge of the FP32 CUDA cores. The question is about the "
                                            "tensor cores' BF16 peak, roughly fifteen times higher.",
                          answer=lambda hw, dtype: _ridge(hw, "fp32")),
            Misconception("unit", "The ridge is an intensity: FLOP/s divided by byte/s leaves FLOP/byte.",
                          unit="FLOP/s"),
        ),
    ),
    Question(
        id="l03.ridge-fp8",
        lesson="03",
        kind="numeric",
        prompt="And the {hw}'s ridge point for {dtype} tensor-core math, in FLOP/byte?",
        params={**_H100, "dtype": "fp8"},
        variants={"hw": ("L4", "L40S", "H100 SXM5", "H100 PCIe", "H200", "B200")},
        key=_ridge,
        unit="FLOP/byte",
        rtol=0.01,
        hints=(
            "The memory roof is the same line; only the flat roof moved.",
            "Divide the dense FP8 peak by the same bandwidth.",
        ),
        misconceptions=(
            Misconception("sparse-peak", "That is twice the ridge: the headline FP8 figure is with 2:4 sparsity. "
                                         "Use the dense peak.", scale=2),
            Misconception("same-as-bf16", "That is the BF16 ridge. FP8 doubles the peak while the bandwidth stays, "
                                          "so the ridge moves right.", scale=0.5),
        ),
    ),
    Question(
        id="l03.gemm-time-upper",
        lesson="03",
        kind="numeric",
        prompt=("A square {dtype} GEMM with n = {n} on the {hw}. With the catalog's achievable roofs for that chip "
                "(its best measured {dtype} matmul rate and its measured copy bandwidth), what is T_math + T_mem, "
                "the time if math and memory did not overlap at all? Answer in µs."),
        params={"hw": "H200", "dtype": "bf16", "n": 8192},
        variants={"dtype": ("bf16", "fp16", "fp8"), "n": (4096, 6144, 12288, 16384)},
        key=_achievable_sum_us,
        unit="µs",
        rtol=0.01,
        figures=3,
        hints=(
            "Work out T_math = FLOPs / (matmul FLOP/s) and T_mem = bytes / (bytes/s) separately, in seconds.",
            "Use the achievable figures, the measured ones the catalog keeps beside the datasheet peak and "
            "bandwidth, not the datasheet figures themselves.",
            "No overlap means one after the other: add the two times, then convert seconds to µs.",
        ),
        misconceptions=(
            Misconception("datasheet-roofs", "That is T_math + T_mem at the datasheet roofs. No real kernel runs "
                                             "at those rates; the question asks for the achievable ones, the best "
                                             "rates measured on that chip.",
                          answer=lambda hw, dtype, n: sum(_times(n, hw, dtype, False)) * 1e6),
            Misconception("optimistic-bound", "That is max(T_math, T_mem), the time with perfect overlap. With no "
                                              "overlap the two times add.",
                          answer=lambda hw, dtype, n: max(_times(n, hw, dtype, True)) * 1e6),
            Misconception("memory-time-only", "That is T_mem alone. This GEMM is compute-bound: T_math is the "
                                              "larger term, and with no overlap both count.",
                          answer=lambda hw, dtype, n: _times(n, hw, dtype, True)[1] * 1e6),
            Misconception("fma-one-flop", "Your T_math is half what it should be: a GEMM is 2MNK FLOPs, "
                                          "one multiply and one add per term.",
                          answer=lambda hw, dtype, n: (lambda t: (t[0] / 2 + t[1]) * 1e6)(_times(n, hw, dtype, True))),
            Misconception("flops-for-time", "That is an amount of work; the question asks for a time, in µs: "
                                            "divide the work by the rate.", unit="FLOP"),
        ),
    ),
    Question(
        id="l03.more-flops",
        lesson="03",
        kind="numeric",
        prompt="A new GPU has {factor}x the {hw}'s dense {dtype} peak and the same memory bandwidth. A decode step "
               "that serves {batch} requests at once multiplies X[{batch}, {k}] by W[{k}, {n}] in {dtype}. By what "
               "factor does this product get faster on the new GPU (optimistic bound, max(T_math, T_mem))?",
        params={**_H100, "dtype": "bf16", "factor": 2, "batch": 256, "k": 4096, "n": 4096},
        key=lambda hw, dtype, factor, batch, k, n: (_decode_time(batch, k, n, hw, dtype)
                                                    / _decode_time(batch, k, n, hw, dtype, factor)),
        unit="x",  # a factor: 'no speedup' and 'the same' read as 1
        rtol=0.01,
        hints=(
            "Is the product memory- or compute-bound on the old GPU? Count its FLOPs and bytes and compare their "
            "ratio with the ridge.",
            "Its time is the larger of T_math and T_mem: which of them did the new GPU change, and is it the "
            "larger one?",
        ),
        misconceptions=(
            Misconception("flops-help-memory-bound",
                          "More FLOP/s does nothing for a memory-bound kernel: its time is bytes / bandwidth, and "
                          "neither changed. Only T_math, already the shorter time, shrank. Check the product's "
                          "intensity against the ridge: a batch in the hundreds is not yet past it here.",
                          answer=lambda hw, dtype, factor, batch, k, n: factor),
        ),
    ),
    Question(
        id="l03.batch-move",
        lesson="03",
        kind="choice",
        prompt="Serving {batch} requests together turns the decode GEMV x[1, {d}] @ W[{d}, {d}] into the GEMM "
               "X[{batch}, {d}] @ W[{d}, {d}] ({dtype}). On the roofline, does the kernel's point move "
               "horizontally (its intensity changes) or vertically (same intensity, closer to its roof)?",
        params={"batch": 64, "d": 4096, "dtype": "bf16"},
        choices=("horizontal", "vertical"),
        synonyms={"horizontal": ("horizontally", "right", "to the right", "sideways", "it moves right"),
                  "vertical": ("vertically", "up", "upwards", "upward", "it moves up")},
        key=_move,
        hints=(
            "Count what grows with the batch: the FLOPs, and which of the bytes?",
            "The weight W dominates the bytes and is read once whatever the batch.",
        ),
        misconceptions=(
            Misconception("batching-is-vertical",
                          "Batching changes the ratio: the FLOPs grow with the batch while the weight, most of the "
                          "bytes, is read once. A vertical move keeps FLOPs per byte fixed (a better kernel for the "
                          "same work). On the slanted memory roof the point does rise too, because the roof above "
                          "it rises.",
                          answer=lambda batch, d, dtype: "vertical"),
        ),
    ),
    Question(
        id="l03.ex-decode-batch-bound",
        lesson="03",
        kind="choice",
        prompt="Exercise. A decode step serves {batch} requests at once: X[{batch}, d] @ W[d, d] with d = {d}, in "
               "{dtype}, on the {hw}. With the catalog's dense {dtype} peak and bandwidth for that chip, is it "
               "memory- or compute-bound?",
        params={**_H100, "dtype": "bf16", "d": 4096, "batch": 320},
        choices=("memory", "compute"),
        variants={"batch": (128, 192, 256, 384, 512), "hw": ("A100", "H100 SXM5", "H200")},
        key=_bound,
        points=2,
        hints=(
            "Count the FLOPs (2MNK) and the bytes: X and Y cross HBM as well as W.",
            "Divide, and compare with this chip's ridge in this format, peak over bandwidth.",
        ),
        misconceptions=(
            Misconception("rule-of-thumb", _RULE_OF_THUMB,
                          answer=lambda hw, dtype, d, batch:
                          "compute" if _bound(hw, dtype, d, batch) == "memory" else "memory"),
        ),
    ),
    Question(
        id="l03.ex-add-percent",
        lesson="03",
        kind="numeric",
        prompt="Predict, then measure (the scaling book's GPU chapter): c = a + b over 2^{log2n} FP32 elements on an "
               "{hw} ran in {measured_ms} ms. Predict its time from the roofline, then: what percent of its roofline "
               "did the run reach?",
        params={**_H100, "log2n": 30, "measured_ms": 4.1},
        variants={"measured_ms": (4.0, 4.1, 4.3, 4.5, 4.8, 5.2)},
        key=_add_percent,
        unit="percent",
        rtol=0.01,
        figures=3,
        points=2,
        hints=(
            "Count FLOPs and bytes: one add, two 4-byte reads and one 4-byte write per element.",
            "The roof at this intensity is bandwidth x intensity; the achieved rate is FLOPs / measured time.",
            "Equivalently: the predicted time (the roofline's) divided by the measured time.",
        ),
        misconceptions=(
            Misconception("fraction-not-percent", "That is a fraction; the question asks for percent (x 100).",
                          scale=0.01),
            Misconception("against-peak-flops",
                          "You compared with the compute peak. At 1/12 FLOP/byte the add sits far under the memory "
                          "roof: its roof there is bandwidth x intensity, not the peak.",
                          answer=lambda hw, log2n, measured_ms: 100 * _add(log2n).flops / (measured_ms / 1e3)
                          / hardware.get(hw).peak("fp32")),
            Misconception("roof-is-achieved", "The roof is an asymptote, not what a kernel runs at: a memory-bound "
                                              "kernel is bounded by the memory roof, and the measurement says how "
                                              "close it came. Divide the predicted time by the measured one.",
                          answer=lambda hw, log2n, measured_ms: 100.0),
            Misconception("inverted", "More than 100% of the roofline is impossible: you divided the measured time "
                                      "by the predicted one. Divide the predicted by the measured.",
                          answer=lambda hw, log2n, measured_ms: 1e4 / _add_percent(log2n, measured_ms, hw)),
        ),
    ),
)
