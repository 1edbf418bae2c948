"""Lesson 04, accelerators side by side: ridges across the catalog, balance-point sizes, spec sheets."""

import math

from .. import formulas, hardware, roofline
from ..quiz import Misconception, Question, register
from ..units import quantity

FLOPS_PER_FMA = formulas.gemm(1, 1, 1).flops  # a multiply and an add


def _ridge(hw, dtype):
    return hardware.get(hw).ridge(dtype)


def _balance(hw, dtype):
    return roofline.balance_point_matrix_size(hw, dtype)


def peak_from_parts(units, per_unit, fma_per_clock, clock_hz):
    """Peak FLOP/s = units x (tensor cores per unit) x (FMAs per tensor core per clock) x 2 x clock.

    ml-engineering's "Theoretical FLOPS = clock x flops per clock per unit x units",
    with an FMA counted as 2 FLOPs.
    """
    return units * per_unit * fma_per_clock * FLOPS_PER_FMA * clock_hz


def _derived_tflops(hw, tensor_cores_per_sm, fma_per_tensor_core_per_clock, clock_ghz, max_boost_ghz=None):
    sms = hardware.get(hw).compute_units
    return peak_from_parts(sms, tensor_cores_per_sm, fma_per_tensor_core_per_clock, clock_ghz * 1e9) / 1e12


def _gib_ridge(hw, dtype, gib_per_s):
    return hardware.get(hw).peak(dtype) / quantity(f"{gib_per_s} GiB/s", "byte/s")


register(
    Question(
        id="l04.ridge-t4",
        lesson="04",
        kind="numeric",
        prompt="The {hw} is a Turing inference card without BF16. What is its {dtype} tensor-core ridge point, "
               "in FLOP/byte?",
        params={"hw": "T4", "dtype": "fp16"},
        key=_ridge,
        unit="FLOP/byte",
        rtol=0.015,
        hints=(
            "Same recipe as on the H100: dense peak over memory bandwidth.",
            "t4 = roofkit.hw('t4'); divide its FP16 peak by its bandwidth.",
        ),
        misconceptions=(
            Misconception("int8-tops", "That uses the INT8 figure, twice the FP16 one: TOPS of integer math are not "
                                       "FP16 FLOP/s.", answer=lambda hw, dtype: _ridge(hw, "int8")),
            Misconception("fp32", "That is the FP32 ridge of the CUDA cores; the FP16 tensor-core peak is "
                                  "eight times higher.", answer=lambda hw, dtype: _ridge(hw, "fp32")),
        ),
    ),
    Question(
        id="l04.balance-n-t4",
        lesson="04",
        kind="numeric",
        prompt="At what size n does a square {dtype} GEMM (n x n x n, ideal traffic) reach the {hw}'s ridge point?",
        params={"hw": "T4", "dtype": "fp16"},
        variants={"hw": ("T4", "V100", "A10", "L4", "A100", "L40S")},
        key=_balance,
        unit="dimensionless",
        rtol=0.015,
        hints=(
            "Write the square GEMM's intensity as a function of n (lesson 02) and set it equal to the ridge.",
            "At 2 bytes per element the intensity is n/3.",
        ),
        misconceptions=(
            Misconception("n-equals-ridge", "You set n equal to the ridge. A square GEMM's intensity is 2n/(3b), "
                                            "n/3 at 2 bytes: solve n/3 = I*.", answer=_ridge),
            Misconception("one-byte", "That solves 2n/(3b) = I* with b = 1. FP16 takes 2 bytes per element.",
                          answer=lambda hw, dtype: 1.5 * _ridge(hw, dtype)),
        ),
    ),
    Question(
        id="l04.same-gemm",
        lesson="04",
        kind="choice",
        prompt="A square {dtype} GEMM with n = {n} runs on the {hw}. Memory- or compute-bound?",
        params={"hw": "H100 SXM5", "dtype": "bf16", "n": 768},
        choices=("memory", "compute"),
        key=lambda hw, dtype, n: roofline.analyze(formulas.gemm(n, n, n, dtype), hw, dtype).bound,
        hints=(
            "Its intensity is n/3 at 2 bytes per element.",
            "Compare with this chip's ridge, not another chip's: ridges differ by a factor of two across the catalog.",
        ),
        misconceptions=(
            Misconception("another-chips-ridge",
                          "Compute-bound on an A100, an H200 or a T4, not on this chip: n/3 falls short of its ridge, "
                          "which needs n near 3 x I*.",
                          answer=lambda hw, dtype, n: "compute"),
        ),
    ),
    Question(
        id="l04.v5e-gib",
        lesson="04",
        kind="numeric",
        prompt="A newer Google page gives the {hw}'s HBM bandwidth as {gib_per_s} GiB/s. With that figure and the "
               "catalog's {dtype} peak, what is the ridge point, in FLOP/byte?",
        params={"hw": "TPU v5e", "dtype": "bf16", "gib_per_s": 800},
        key=_gib_ridge,
        unit="FLOP/byte",
        rtol=0.01,
        hints=(
            "GiB is a binary unit: how many bytes are in one GiB?",
            "1 GiB = 2^30 bytes. Convert the bandwidth to bytes/s, then divide the peak by it.",
        ),
        misconceptions=(
            Misconception("gib-as-gb", "You read GiB as GB. 1 GiB is 2^30 bytes, about 7% more than 10^9: "
                                       "the bandwidth is higher, so the ridge is lower.",
                          answer=lambda hw, dtype, gib_per_s: hardware.get(hw).peak(dtype) / (gib_per_s * 1e9)),
            Misconception("catalog-bandwidth", "That is the ridge with the catalog's bandwidth (Google's other "
                                               "page, in GB/s). Use the GiB/s figure the question gives.",
                          answer=lambda hw, dtype, gib_per_s: _ridge(hw, dtype)),
        ),
    ),
    Question(
        id="l04.ex-h100-peak",
        lesson="04",
        kind="numeric",
        prompt="Derive the {hw}'s dense BF16 peak from its parts: the catalog's SM count, {tensor_cores_per_sm} "
               "tensor cores per SM, {fma_per_tensor_core_per_clock} dense BF16 FMAs per tensor core per clock, "
               "and a tensor-core clock of {clock_ghz} GHz. In TFLOP/s?",
        params={"hw": "H100 SXM5", "tensor_cores_per_sm": 4, "fma_per_tensor_core_per_clock": 512,
                "clock_ghz": 1.83, "max_boost_ghz": 1.98},
        variants={"clock_ghz": (1.59, 1.65, 1.71, 1.755, 1.83)},
        key=_derived_tflops,
        unit="TFLOP/s",
        rtol=0.005,
        points=2,
        hints=(
            "Multiply what one tensor core does per clock by the number of tensor cores and by clocks per second.",
            "An FMA is 2 FLOPs. The SM count is roofkit.hw('h100').compute_units.",
        ),
        misconceptions=(
            Misconception("fma-one-flop", "An FMA is two FLOPs, a multiply and an add: multiply by 2.", scale=0.5),
            Misconception("max-boost-clock",
                          "That uses the maximum boost clock. Tensor-core peaks are quoted at a lower clock, the one "
                          "the chip can hold while the tensor cores run flat out: use the given tensor-core clock.",
                          answer=lambda hw, tensor_cores_per_sm, fma_per_tensor_core_per_clock, clock_ghz,
                          max_boost_ghz: _derived_tflops(hw, tensor_cores_per_sm, fma_per_tensor_core_per_clock,
                                                         max_boost_ghz)),
            Misconception("one-tensor-core-per-sm", "You counted one tensor core per SM; multiply by the tensor "
                                                    "cores in each SM.", scale=0.25),
        ),
    ),
    Question(
        id="l04.ex-crossover",
        lesson="04",
        kind="numeric",
        prompt="What is the smallest whole n for which a square {dtype} GEMM (n x n x n, ideal traffic) is "
               "compute-bound on the {hw}?",
        params={"hw": "H100 SXM5", "dtype": "bf16"},
        variants={"hw": ("A100", "H100 SXM5", "H100 PCIe", "H200", "B200", "MI300X")},
        key=lambda hw, dtype: math.ceil(_balance(hw, dtype)),
        unit="dimensionless",
        rtol=0,  # one exact whole number
        points=2,
        hints=(
            "Compute-bound means intensity at or above the ridge.",
            "Solve 2n/(3b) = I* for n, then round up to a whole matrix size.",
        ),
        misconceptions=(
            Misconception("n-equals-ridge", "You set n equal to the ridge; the intensity is n/3 at 2 bytes, so "
                                            "n must be about three times the ridge.", answer=_ridge),
            Misconception("sparse-peak", "That is twice the answer: the headline peak is for 2:4 sparsity, which "
                                         "doubles the ridge. Use the dense peak.", scale=2),
            Misconception("one-byte", "That solves 2n/(3b) = I* with b = 1; BF16 takes 2 bytes per element.",
                          answer=lambda hw, dtype: 1.5 * _ridge(hw, dtype)),
        ),
    ),
)
