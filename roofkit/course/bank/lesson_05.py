"""Lesson 05, number formats and tensor cores: bit fields and decoding a bit pattern, range and
epsilon from the bit counts, real rounding, FP8 overflow, throughput and the ridge per precision,
the gap between neighbouring values and FP32 accumulation."""

import math

from ... import formulas
from ...catalogs import hardware
from ...perf import precision, roofline
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
# the lesson's worked example before l05.bf16-accumulator: 1 added to a BF16 sum 1000 times
_WORKED_ADDEND, _WORKED_COUNT = 1.0, 1000


def _crossing(hw, ridge_precision, element):
    """The smallest whole n at which a square GEMM with ``element`` (a precision or bytes) per element
    reaches the ``ridge_precision`` ridge of ``hw``."""
    return roofline.crossing_size(lambda n: formulas.gemm(n, n, n, element).intensity,
                                  hardware.get(hw).ridge(ridge_precision))


def _fp8_for_range(decades):
    """The FP8 format with the most precision whose range covers ``decades``; 'neither' if none does."""
    return next((name for name in _FP8 if _decades(name) >= decades), "neither")


def stall_point(addend, fmt="bfloat16", fraction=0.5):
    """The first power of two 2^k at which ``fraction`` of the format's gap there, 2^(k - M) * fraction,
    is at least the addend (rounded to ``fmt``): where a running sum of that addend stops growing (the
    rule of lesson 05: an addend below half the gap is lost, and a tie at 2^k, whose mantissa is all
    zeros, rounds back to 2^k). ``fraction=1`` is the whole-gap slip."""
    f, a = precision.get(fmt), precision.round_to(addend, fmt)
    k = math.floor(math.log2(a))
    while precision.spacing(2.0**k, f) * fraction < a:
        k += 1
    return 2.0**k


def _fields(pattern, fmt):
    """(sign, exponent field, mantissa field) of a bit pattern, as integers."""
    f = precision.get(fmt)
    text = pattern.replace(" ", "")
    return int(text[0]), int(text[1:1 + f.exponent_bits], 2), int(text[1 + f.exponent_bits:], 2)


def misread(pattern, fmt, *, bias=None, implicit=None, exponent=None):
    """A bit pattern decoded with one rule changed, as a learner might: another ``bias``, the implicit
    leading bit forced on or off (``implicit``), or the exponent field e read as e + ``exponent``."""
    f = precision.get(fmt)
    s, e, m = _fields(pattern, fmt)
    normal = e != 0
    lead = (1 if normal else 0) if implicit is None else int(implicit)
    b = f.bias if bias is None else bias
    power = (e if normal else 1) - b if exponent is None else e + exponent - b
    return (-1) ** s * (lead + m / 2**f.mantissa_bits) * 2.0**power


register(
    Question(
        id="l05.decode-bf16",
        lesson="05",
        kind="numeric",
        prompt=("A BF16 value is stored as the bits {bits} (1 sign bit, 8 exponent bits, 7 mantissa bits). "
                "What number is it?"),
        params={"bits": "0 10000010 0101100"},
        variants={"bits": ("0 01111101 1000000", "1 10000101 0010000", "0 10001000 1100100",
                           "0 01111001 0110000", "1 10000000 1001001")},
        key=lambda bits: precision.from_bits(bits, "bfloat16"),
        unit="dimensionless",
        rtol=0.005,
        figures=3,  # a decoded value to three figures: two would take a neighbouring value (11 for 10.75)
        hints=(
            "Read the three fields: the sign bit s, the exponent field e and the mantissa field m, each as an "
            "unsigned binary integer.",
            "BF16 has FP32's exponent bias, 127. A normal value is (-1)^s x (1 + m/2^7) x 2^(e - 127).",
        ),
        misconceptions=(
            Misconception("sign", "The sign is wrong: a first bit of 1 means negative, 0 positive.",
                          answer=lambda bits: -precision.from_bits(bits, "bfloat16")),
            Misconception("no-implicit-one",
                          "You left out the implicit leading 1: a normal number's significand is 1 + m/2^7, "
                          "not m/2^7.", answer=lambda bits: misread(bits, "bfloat16", implicit=False)),
            Misconception("no-bias", "You used the exponent field as the exponent. Subtract the bias, 127, first.",
                          answer=lambda bits: misread(bits, "bfloat16", bias=0)),
            Misconception("bias-128", "The bias is 2^(E-1) - 1 = 127 for 8 exponent bits, not 128: your value is "
                                      "half the right one.", answer=lambda bits: misread(bits, "bfloat16", bias=128)),
        ),
    ),
    Question(
        id="l05.bf16-or-fp16",
        lesson="05",
        kind="choice",
        prompt=("Both are 16-bit formats. Which one stores numbers near 1 with the smaller gap between "
                "neighbouring values, i.e. with more precision: fp16 or bf16?"),
        choices=("fp16", "bf16"),
        synonyms={"fp16": ("float16", "half", "binary16", "ieee half", "half precision"),
                  "bf16": ("bfloat16", "brain float", "brainfloat16", "brain floating point")},
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
            Misconception("significand-two",
                          "That is the next power of two (for FP16, 65536 = 2^16). The largest significand, "
                          "1.11...1 in binary, is 2 - 2^-M: just below 2, not 2.",
                          answer=lambda E, M: 2.0 ** (math.floor(math.log2(_layout(E, M, "ieee").max)) + 1)),
        ),
    ),
    Question(
        id="l05.tf32-intensity",
        lesson="05",
        kind="numeric",
        prompt=("A {n} x {n} x {n} matrix product reads A and B and writes C in TF32 (ideal traffic model: each "
                "matrix crosses HBM once). What is its arithmetic intensity?"),
        # not 4096: its 682.7 FLOP/byte is printed just before, as the 1024^3 FP8 GEMM's (2n/3b, the same n/b);
        # nor 2048 (341.3) or 6144 (1024), for the same reason
        params={"n": 5120},
        variants={"n": (1024, 3072, 5120, 8192, 12288)},
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
            "As the sum grows, so does the gap between neighbouring BF16 values. Once the addend is less than "
            "half that gap, each addition rounds back to the same sum.",
            "In [2^k, 2^(k+1)) BF16 values are 2^(k-7) apart. Find the first power of two at which half that "
            "gap is at least the addend.",
        ),
        misconceptions=(
            Misconception("whole-gap",
                          "The sum stops later than that: an addition is lost only when the addend is below HALF "
                          "the gap (round to nearest), not below the whole gap.",
                          answer=lambda addend, count: stall_point(addend, "bfloat16", fraction=1)),
            Misconception("exact-sum",
                          "That is the sum without rounding, or rounded only once at the end, which is what an "
                          "FP32 accumulator would nearly give. Here the sum is rounded to BF16 after every "
                          "addition, and the additions stop counting once the sum is large.",
                          answer=lambda addend, count: count * precision.round_to(addend, "bfloat16")),
            Misconception("worked-example",
                          "That is where the worked example's sum of ones stops. This addend is smaller, so the sum "
                          "stalls at a smaller power of two: find where half the gap first reaches this addend.",
                          answer=lambda addend, count: None
                          if running_sum(addend, count) == running_sum(_WORKED_ADDEND, _WORKED_COUNT)
                          else running_sum(_WORKED_ADDEND, _WORKED_COUNT)),
        ),
    ),
    Question(
        id="l05.fp8-gemm-crossing",
        lesson="05",
        kind="numeric",
        prompt=("A square n x n x n matrix product runs on the {hw}'s {dtype} tensor cores with A, B and C all "
                "stored in {dtype}. What is the smallest whole n for which it is compute-bound?"),
        params={"hw": "B200", "dtype": "FP8"},
        variants={"hw": ("L4", "L40S", "H100 PCIe", "H200", "B200")},
        key=lambda hw, dtype: _crossing(hw, dtype, dtype),
        unit="dimensionless",
        rtol=0,  # one exact whole number
        hints=(
            "A square GEMM's intensity is 2n/(3b) with b bytes per element.",
            "Set that intensity equal to the ridge of the same precision, peak FLOP/s over bandwidth, solve for n "
            "and round up.",
        ),
        misconceptions=(
            Misconception("kept-2-bytes",
                          "You used the FP8 ridge with 2-byte elements. Stored in FP8, every element is 1 byte, "
                          "so the GEMM's intensity doubles along with the ridge.",
                          answer=lambda hw, dtype: _crossing(hw, dtype, 2)),
            Misconception("bf16-ridge",
                          "You used the BF16 ridge. The FP8 tensor cores have twice the peak at the same "
                          "bandwidth, so their ridge is twice as far right.",
                          answer=lambda hw, dtype: _crossing(hw, "bf16", dtype)),
        ),
    ),
    Question(
        id="l05.e4m3-max",
        lesson="05",
        kind="numeric",
        prompt=("OCP's FP8 E4M3 (ml_dtypes' float8_e4m3fn) has {E} exponent bits and {M} mantissa bits with the "
                "IEEE bias 2^(E-1) - 1, but no infinity: the all-ones exponent holds ordinary numbers, and only "
                "the one code with all exponent and mantissa bits set is NaN. What is its largest finite value?"),
        params={"E": 4, "M": 3},
        key=lambda E, M: _layout(E, M, "fn").max,
        unit="dimensionless",
        rtol=0,  # one exact whole number
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
            Misconception("significand-two",
                          "That is the next power of two: a significand is always below 2, and at the top exponent "
                          "the largest one allowed here is 1.110 in binary.",
                          answer=lambda E, M: 2.0 ** (math.floor(math.log2(_layout(E, M, "fn").max)) + 1)),
        ),
    ),
    Question(
        id="l05.ex-decode-e4m3",
        lesson="05",
        kind="numeric",
        prompt=("An FP8 E4M3 value (OCP's float8_e4m3fn: 1 sign bit, 4 exponent bits with bias 7, 3 mantissa "
                "bits) is stored as the bits {bits}. What number is it?"),
        params={"bits": "0 0000 101"},
        variants={"bits": ("0 0000 001", "0 0000 011", "1 0000 110", "0 0000 111")},
        key=lambda bits: precision.from_bits(bits, "float8_e4m3fn"),
        unit="dimensionless",
        rtol=0.005,
        figures=3,  # a decoded value to three figures: two would take a neighbouring value (11 for 10.75)
        points=2,
        hints=(
            "An exponent field of all zeros marks a subnormal number (or zero, if the mantissa is zero too).",
            "A subnormal has no implicit leading 1 and the exponent of the smallest normal numbers: "
            "(-1)^s x (m/2^M) x 2^(1 - bias).",
        ),
        misconceptions=(
            Misconception("normal-rule",
                          "You decoded it as a normal number. An exponent field of 0 marks a subnormal: no implicit "
                          "leading 1, and the exponent is 1 - bias.",
                          answer=lambda bits: misread(bits, "float8_e4m3fn", implicit=True, exponent=0)),
            Misconception("exponent-minus-bias",
                          "Subnormals share the exponent of the smallest normal numbers, 1 - bias = -6, not "
                          "0 - bias: your value is half the right one.",
                          answer=lambda bits: misread(bits, "float8_e4m3fn", exponent=0)),
            Misconception("zero",
                          "An exponent field of 0 means zero only when the mantissa is 0 too. Here the mantissa "
                          "counts multiples of the smallest subnormal.", answer=lambda bits: 0.0),
            Misconception("sign", "The sign is wrong: a first bit of 1 means negative, 0 positive.",
                          answer=lambda bits: -precision.from_bits(bits, "float8_e4m3fn")),
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
        synonyms={"e4m3": ("float8_e4m3fn", "e4m3fn", "fp8 e4m3", "fp8_e4m3", "float8_e4m3"),
                  "e5m2": ("float8_e5m2", "fp8 e5m2", "fp8_e5m2", "e5m2fnuz"),
                  "neither": ("none", "neither of them", "no format", "both overflow or flush")},
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
            Misconception("gave-up-on-e5m2",
                          "E5M2 has FP16's 5 exponent bits: from its smallest subnormal to its largest value it "
                          "spans more decades than these gradients do. Compute log10(max / smallest subnormal) for "
                          "it and compare.",
                          answer=lambda decades: None if _fp8_for_range(decades) == "neither" else "neither"),
            Misconception("e5m2-too-narrow",
                          "E5M2 spans fewer decades than these gradients, even counting its subnormals: whatever "
                          "the scale, some value flushes to zero or overflows.",
                          answer=lambda decades: "e5m2" if _fp8_for_range(decades) == "neither" else None),
        ),
    ),
)
