"""Lesson 04, accelerators side by side: ridges across the catalog, balance-point sizes, spec sheets,
peaks from their parts and the clock they assume."""

import math

from ... import formulas
from ...catalogs import hardware
from ...perf import roofline
from ..quiz import Misconception, Question, register
from ...units import quantity


def _ridge(hw, dtype):
    return hardware.get(hw).ridge(dtype)


def _balance(hw, dtype):
    return roofline.balance_point_matrix_size(hw, dtype)


def _gib_ridge(hw, dtype, gib_per_s):
    return hardware.get(hw).peak(dtype) / quantity(f"{gib_per_s} GiB/s", "byte/s")


def peak_at_clock(hw, dtype, clock_hz):
    """The datasheet's dense peak scaled to another clock: P x f / f_tensor, where f_tensor is the clock
    the datasheet's tensor-core peaks assume (the catalog's 'tensor' clock). FLOP/s."""
    acc = hardware.get(hw)
    return acc.peak(dtype) * clock_hz / acc.clock("tensor")


def _tflops_from_parts(hw, dtype, held_ghz):
    return hardware.get(hw).peak_from_parts(dtype, held_ghz * 1e9) / 1e12


register(
    Question(
        id="l04.ridge-t4",
        lesson="04",
        kind="numeric",
        prompt="What is the {hw}'s dense {dtype} tensor-core ridge point, in FLOP/byte? (Use the catalog's "
               "datasheet figures. The T4 predates BF16: its tensor cores run FP16.)",
        params={"hw": "T4", "dtype": "fp16"},
        variants={"hw": ("T4", "A10", "L4", "A100", "L40S")},
        key=_ridge,
        unit="FLOP/byte",
        rtol=0.015,
        hints=(
            "The ridge is where the two roofs of lesson 03 meet.",
            "Divide the chip's dense FP16 peak (FLOP/s) by its memory bandwidth (bytes/s).",
        ),
        misconceptions=(
            Misconception("int8-tops", "That is twice the ridge: it uses the INT8 figure (TOPS of integer math, not "
                                       "FP16 FLOP/s) or a 2:4 sparse peak. Use the dense FP16 peak.",
                          answer=lambda hw, dtype: _ridge(hw, "int8")),
            Misconception("fp32", "That is the FP32 ridge of the CUDA cores; the FP16 tensor-core peak is several "
                                  "times higher.", answer=lambda hw, dtype: _ridge(hw, "fp32")),
        ),
    ),
    Question(
        id="l04.balance-n",
        lesson="04",
        kind="numeric",
        prompt="At what size n does a square {dtype} GEMM (n x n x n, ideal traffic) reach the {hw}'s {dtype} "
               "ridge point?",
        params={"hw": "L40S", "dtype": "fp16"},
        variants={"hw": ("T4", "V100", "A10", "L4", "A100", "L40S")},
        key=_balance,
        unit="dimensionless",
        rtol=0.01,
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
        id="l04.sustained-peak",
        lesson="04",
        kind="numeric",
        prompt="The {hw}'s datasheet quotes its dense {dtype} peak at the boost clock. In a long GEMM at its power "
               "limit, nvidia-smi shows the SM clock holding at {held_mhz} MHz. What dense {dtype} peak does the "
               "chip offer at that clock, in TFLOP/s?",
        params={"hw": "A100", "dtype": "bf16", "held_mhz": 1290},
        # each clock's peak stays over 1% from every number the lesson prints before asking (1275 MHz gave 282,
        # the B200's ridge of 281 in the catalog table)
        variants={"held_mhz": (1140, 1200, 1230, 1350)},
        key=lambda hw, dtype, held_mhz: peak_at_clock(hw, dtype, held_mhz * 1e6) / 1e12,
        unit="TFLOP/s",
        rtol=0.01,
        hints=(
            "A peak is a clock rate times the work done per clock; only the clock changes here.",
            "Scale the datasheet peak by the held clock over the boost clock it was computed at.",
        ),
        misconceptions=(
            Misconception("datasheet-peak",
                          "That is the datasheet's peak, computed at the boost clock. Each clock does the same work, "
                          "so at a lower clock the chip does proportionally fewer FLOPs per second.",
                          answer=lambda hw, dtype, held_mhz: hardware.get(hw).peak(dtype) / 1e12),
            Misconception("inverted",
                          "The ratio is upside down: a lower clock gives a lower peak. Multiply by held / boost.",
                          answer=lambda hw, dtype, held_mhz: hardware.get(hw).peak(dtype)
                          * hardware.get(hw).clock("tensor") / (held_mhz * 1e6) / 1e12),
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
        prompt="An {hw} running a long {dtype} GEMM at its power limit holds an SM clock of {held_ghz} GHz. Derive "
               "its dense {dtype} peak at that clock from its parts: the catalog's SM count, tensor cores per SM "
               "and dense {dtype} FMAs per tensor core per clock. In TFLOP/s?",
        params={"hw": "H100 PCIe", "dtype": "bf16", "held_ghz": 1.5},
        variants={"held_ghz": (1.35, 1.41, 1.56, 1.59)},
        key=_tflops_from_parts,
        unit="TFLOP/s",
        rtol=0.005,
        points=2,
        hints=(
            "Multiply what one tensor core does per clock by the number of tensor cores and by clocks per second.",
            "An FMA is 2 FLOPs. The parts are the accelerator's compute_units, tensor_cores_per_unit and "
            "tensor_fma_per_clock.",
        ),
        misconceptions=(
            Misconception("fma-one-flop", "An FMA is two FLOPs, a multiply and an add: multiply by 2.", scale=0.5),
            Misconception("datasheet-peak",
                          "That is the datasheet's peak, which assumes the clock the whitepaper quotes for the tensor "
                          "cores. This chip holds a lower clock: multiply the parts by the clock it holds.",
                          answer=lambda hw, dtype, held_ghz: hardware.get(hw).peak(dtype) / 1e12),
            Misconception("max-boost-clock",
                          "That uses the maximum boost clock, which the chip does not hold under a long tensor-core "
                          "load: multiply the parts by the clock it holds.",
                          answer=lambda hw, dtype, held_ghz: _tflops_from_parts(
                              hw, dtype, hardware.get(hw).clock("boost") / 1e9)),
            Misconception("one-tensor-core-per-sm", "You counted one tensor core per SM; multiply by the tensor "
                                                    "cores in each SM.", scale=0.25),
            Misconception("datasheet-over-max-boost",
                          "You scaled the datasheet peak by the held clock over the maximum boost clock. The "
                          "datasheet's tensor peak is computed at a lower clock, the one the whitepaper quotes for "
                          "the tensor cores, so that ratio cuts too much: derive the peak from the parts at the held "
                          "clock instead.",
                          answer=lambda hw, dtype, held_ghz: hardware.get(hw).peak(dtype) * held_ghz * 1e9
                          / hardware.get(hw).clock("boost") / 1e12),
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
