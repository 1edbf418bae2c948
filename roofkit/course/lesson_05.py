"""Lesson 05, number formats and tensor cores: bit fields, range and epsilon from the bit
counts, real rounding, FP8 overflow, throughput and the ridge per precision, FP32 accumulation."""

import math

from .. import formulas, hardware, precision, roofline
from ..quiz import Misconception, Question, register


def _layout(E, M, kind):
    """A binary format with E exponent bits and M mantissa bits under ``kind``'s rules for inf/NaN."""
    return precision.Format(f"e{E}m{M}-{kind}", 1 + E + M, E, M, kind)


def running_sum(addend, count, fmt="bfloat16"):
    """``count`` additions of ``addend`` (first rounded to ``fmt``) into a sum that is rounded to
    ``fmt`` after every addition, as an accumulator register of that format would be."""
    x, total = precision.round_to(addend, fmt), 0.0
    for _ in range(int(count)):
        new = precision.round_to(total + x, fmt)
        if new == total:  # the addend now rounds away: every further addition does the same
            break
        total = new
    return total


def _decades(fmt):
    """Dynamic range from the smallest subnormal to the largest value, in powers of ten."""
    f = precision.get(fmt)
    return math.log10(f.max / f.min_subnormal)


_FP8 = ("e4m3", "e5m2")


def _fp8_for_range(decades):
    """The FP8 format with the most precision whose range covers ``decades``; 'neither' if none does."""
    return next((name for name in _FP8 if _decades(name) >= decades), "neither")


register(
    Question(
        id="l05.bf16-or-fp16",
        lesson="05",
        kind="choice",
        prompt=("Both are 16-bit formats. Which one stores numbers near 1 with the smaller gap between "
                "neighbouring values, i.e. with more precision: fp16 or bf16?"),
        choices=("fp16", "bf16"),
        key=lambda: min(("fp16", "bf16"), key=lambda name: precision.get(name).eps),
        hints=(
            "Precision near 1 is set by the mantissa bits; the exponent bits set the range.",
            "The gap between 1 and the next value is eps = 2^-M. Compare M for the two formats.",
        ),
        misconceptions=(
            Misconception("bf16-more-precise",
                          "BF16 has more range, not more precision: it keeps FP32's 8 exponent bits but only "
                          "7 mantissa bits, against 10 in the other format. Its eps is 8 times larger.",
                          answer=lambda: "bf16"),
        ),
    ),
    Question(
        id="l05.fp16-max",
        lesson="05",
        kind="numeric",
        prompt=("An IEEE 754 binary format has {E} exponent bits and {M} mantissa bits; the all-ones exponent "
                "field is kept for infinity and NaN. What is its largest finite value? (With E = 5 and M = 10 "
                "this is FP16.)"),
        params={"E": 5, "M": 10},
        variants={"E": (4, 5, 6, 8), "M": (2, 3, 7, 10)},
        key=lambda E, M: _layout(E, M, "ieee").max,
        unit="dimensionless",
        rtol=0,  # one exact whole number
        hints=(
            "The exponent bias is 2^(E-1) - 1, and the largest exponent field a finite number may use is "
            "one below all ones.",
            "The largest significand is 1.11...1 in binary, that is 2 - 2^-M. Multiply by 2 to the power "
            "(largest usable exponent field - bias).",
        ),
        misconceptions=(
            Misconception("used-inf-exponent",
                          "You used the all-ones exponent field. In IEEE formats it is reserved for infinity and "
                          "NaN, so the largest finite value sits one exponent lower: half of what you have.",
                          answer=lambda E, M: _layout(E, M, "e2m1").max),
            Misconception("forgot-mantissa",
                          "That is only the power of two. The largest value also has the largest significand, "
                          "1.11...1 in binary (almost 2), not 1.0.",
                          answer=lambda E, M: 2.0 ** math.floor(math.log2(_layout(E, M, "ieee").max))),
        ),
    ),
    Question(
        id="l05.tf32-intensity",
        lesson="05",
        kind="numeric",
        prompt=("A {n} x {n} x {n} matrix product reads A and B and writes C in TF32 (ideal traffic model: each "
                "matrix crosses HBM once). What is its arithmetic intensity?"),
        params={"n": 4096},
        variants={"n": (1024, 2048, 3072, 4096, 6144, 8192)},
        key=lambda n: formulas.gemm(n, n, n, "tf32").intensity,
        unit="FLOP/byte",
        rtol=0.01,
        hints=(
            "A square GEMM does 2n^3 FLOPs and moves 3n^2 elements.",
            "How many bytes does one TF32 value occupy in registers and in memory? Not 19/8.",
        ),
        misconceptions=(
            Misconception("tf32-19-bits",
                          "TF32 has 19 bits of layout (1 + 8 + 10), but each value occupies a full 32-bit word in "
                          "registers and in memory: 4 bytes per element, not 19/8.",
                          answer=lambda n: formulas.gemm(n, n, n, precision.get("tf32").bits / 8).intensity),
            Misconception("tf32-16-bits",
                          "That is 2 bytes per element, as for FP16 or BF16. TF32 values live in 32-bit words.",
                          answer=lambda n: formulas.gemm(n, n, n, "bf16").intensity),
        ),
    ),
    Question(
        id="l05.bf16-accumulator",
        lesson="05",
        kind="numeric",
        prompt=("You add the BF16 value nearest to {addend} to a running sum {count} times, and the running sum "
                "is itself kept in BF16: every addition is rounded to BF16. What is the final sum?"),
        params={"addend": 0.01, "count": 4096},
        variants={"addend": (0.003, 0.005, 0.01, 0.02, 0.05, 0.1)},
        key=lambda addend, count: running_sum(addend, count, "bfloat16"),
        unit="dimensionless",
        rtol=0,  # one exact whole number
        hints=(
            "As the sum grows, so does the gap between neighbouring BF16 values. Once half that gap is larger "
            "than the addend, each addition rounds back to the same sum.",
            "In [2^k, 2^(k+1)) BF16 values are 2^(k-7) apart. Find the first power of two at which half that "
            "gap exceeds the addend.",
        ),
        misconceptions=(
            Misconception("exact-sum",
                          "That is the sum without rounding, or rounded only once at the end, which is what an "
                          "FP32 accumulator would nearly give. Here the sum is rounded to BF16 after every "
                          "addition, and the additions stop counting once the sum is large.",
                          answer=lambda addend, count: count * precision.round_to(addend, "bfloat16")),
        ),
    ),
    Question(
        id="l05.fp8-gemm-crossing",
        lesson="05",
        kind="numeric",
        prompt=("A square n x n x n matrix product runs on the {hw}'s {dtype} tensor cores with A, B and C all "
                "stored in {dtype}. From what n on is it compute-bound?"),
        params={"hw": "H100", "dtype": "FP8"},
        variants={"hw": ("L4", "L40S", "H100", "H100 PCIe", "H200", "B200")},
        key=lambda hw, dtype: roofline.balance_point_matrix_size(hw, dtype),
        unit="dimensionless",
        rtol=0.01,
        hints=(
            "A square GEMM's intensity is 2n/(3b) with b bytes per element.",
            "Set that intensity equal to the ridge of the same precision, peak FLOP/s over bandwidth, and "
            "solve for n.",
        ),
        misconceptions=(
            Misconception("kept-2-bytes",
                          "You used the FP8 ridge with 2-byte elements. Stored in FP8, every element is 1 byte, "
                          "so the GEMM's intensity doubles along with the ridge.",
                          answer=lambda hw, dtype: roofline.crossing_size(
                              lambda n: formulas.gemm(n, n, n, 2).intensity, hardware.get(hw).ridge(dtype),
                              integer=False)),
            Misconception("bf16-ridge",
                          "You used the BF16 ridge. The FP8 tensor cores have twice the peak at the same "
                          "bandwidth, so their ridge is twice as far right.",
                          answer=lambda hw, dtype: roofline.crossing_size(
                              lambda n: formulas.gemm(n, n, n, dtype).intensity, hardware.get(hw).ridge("bf16"),
                              integer=False)),
        ),
    ),
    Question(
        id="l05.ex-e4m3-max",
        lesson="05",
        kind="numeric",
        prompt=("OCP's FP8 E4M3 (ml_dtypes' float8_e4m3fn) has {E} exponent bits and {M} mantissa bits with the "
                "IEEE bias 2^(E-1) - 1, but no infinity: the all-ones exponent holds ordinary numbers, and only "
                "the one code with all exponent and mantissa bits set is NaN. What is its largest finite value?"),
        params={"E": 4, "M": 3},
        key=lambda E, M: _layout(E, M, "fn").max,
        unit="dimensionless",
        rtol=0,  # one exact whole number
        points=2,
        hints=(
            "Here the top exponent field 1111 is usable: what unbiased exponent does it stand for?",
            "At the top exponent the mantissa 111 is NaN, so the largest significand there is 1.110 in binary.",
        ),
        misconceptions=(
            Misconception("ieee-rules",
                          "That is what IEEE rules would give, with the all-ones exponent kept for infinity. "
                          "E4M3fn gives that exponent back to ordinary numbers.",
                          answer=lambda E, M: _layout(E, M, "ieee").max),
            Misconception("nan-code-used",
                          "The largest mantissa at the top exponent, all ones, is the NaN code. Step one "
                          "mantissa value down.",
                          answer=lambda E, M: _layout(E, M, "e2m1").max),
        ),
    ),
    Question(
        id="l05.ex-gradient-format",
        lesson="05",
        kind="choice",
        prompt=("The nonzero gradients of a tensor span {decades} decades, from the smallest magnitude to the "
                "largest. With a single scale factor for the whole tensor, which FP8 format can hold all of them "
                "without flushing any to zero or overflowing: e4m3, e5m2 or neither? (If both can, pick the one "
                "with more precision.)"),
        params={"decades": 7},
        choices=("e4m3", "e5m2", "neither"),
        variants={"decades": (6, 7, 8, 9, 10, 12)},
        key=lambda decades: _fp8_for_range(decades),
        points=2,
        hints=(
            "A scale factor slides the values along the number line; it cannot widen the span the format covers.",
            "Compare log10(max / smallest subnormal) of the two formats with the gradients' span.",
        ),
        misconceptions=(
            Misconception("e4m3-for-gradients",
                          "E4M3 covers only about 5.4 decades from its smallest subnormal to its largest value: "
                          "its 3 mantissa bits buy precision, its 4 exponent bits limit range. It is the forward-pass "
                          "format; gradients need the format with the wider exponent.",
                          answer=lambda decades: "e4m3"),
        ),
    ),
)
