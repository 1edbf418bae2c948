"""Lesson 00, start here: one question of each kind, to learn how checking works."""

from ...catalogs import hardware
from ...formulas import FLOPS_PER_FMA  # an FMA (d = a*b + c) is two FLOPs: a multiply and an add
from ..quiz import Misconception, Question, register


def _n():
    import sympy  # deferred: sympy costs ~0.25 s at import

    return sympy.Symbol("n", positive=True)


register(
    Question(
        id="l00.fma-flops",
        lesson="00",
        kind="numeric",
        prompt="A kernel performs {fmas} fused multiply-adds (d = a*b + c). How many FLOPs is that?",
        params={"fmas": 1000},
        variants={"fmas": tuple(range(200, 1000, 50)) + tuple(range(1000, 9000, 250))},
        key=lambda fmas: FLOPS_PER_FMA * fmas,
        unit="FLOP",
        rtol=0,
        hints=(
            "Count the floating-point operations inside one fused multiply-add.",
            "d = a*b + c is a multiply followed by an add, done as one instruction.",
        ),
        misconceptions=(
            Misconception("fma-is-one-flop", "An FMA is one instruction but two FLOPs: a multiply and an add.", scale=0.5),
        ),
    ),
    Question(
        id="l00.bandwidth-units",
        lesson="00",
        kind="numeric",
        prompt=("Look up the memory bandwidth of the {hw} in roofkit's catalog. What is it? Answer with a unit, "
                "e.g. in GB/s."),
        params={"hw": "A100"},
        variants={"hw": ("A10", "B200", "H100", "H100 PCIe", "H200", "L4", "L40S", "MI300X", "MI325X", "T4",
                         "TPU v4", "TPU v5e", "TPU v5p", "TPU v6e", "V100")},
        key=lambda hw: hardware.get(hw).bandwidth,
        unit="byte/s",
        rtol=0.005,
        hints=(
            "Look the accelerator up in the catalog the way this notebook looks up the H100 in its first cells, "
            "then read its bandwidth figure.",
            "The catalog stores bandwidth in bytes per second. Write the number with a unit, such as "
            "'2000 GB/s' (1 GB = 10^9 bytes).",
        ),
        misconceptions=(
            Misconception("tb-vs-tib", "Datasheets use decimal units: 1 TB = 10^12 bytes, while 1 TiB = 2^40 bytes "
                          "(about 10% more). Write TB/s or GB/s.", scale=2**40 / 1e12),
            Misconception("bits-vs-bytes", "That looks like bits per second; bandwidth is quoted in bytes.", scale=8),
            Misconception("flop-rate", "That is a compute rate; bandwidth moves bytes.", unit="FLOP/s"),
        ),
    ),
    Question(
        id="l00.fma-formula",
        lesson="00",
        kind="symbolic",
        prompt="Write the number of FLOPs of n fused multiply-adds as an expression in n.",
        key=lambda: FLOPS_PER_FMA * _n(),
        symbols=("n",),
        hints=("One FMA is how many FLOPs? Multiply by n.",),
        misconceptions=(
            Misconception("fma-is-one-flop", "An FMA is two FLOPs, so n FMAs are more than n FLOPs.",
                          answer=_n),
        ),
    ),
    Question(
        id="l00.work-or-rate",
        lesson="00",
        kind="choice",
        prompt="A datasheet gives the {hw}'s BF16 peak in TFLOP/s. Is that an amount of work or a rate?",
        params={"hw": "H100"},
        variants={"hw": ("A100", "H200", "MI300X", "L4", "B200")},
        choices=("work", "rate"),
        synonyms={"work": ("amount of work", "an amount of work", "amount", "a count"),
                  "rate": ("a rate", "speed", "throughput", "work per second")},
        key=lambda hw: "rate",
        hints=("Look at the unit: what does the '/s' say?",),
        misconceptions=(
            Misconception("flops-vs-flop-per-s", "FLOPs (no '/s') count work; FLOP/s is work per second, a rate.",
                          answer=lambda hw: "work"),
        ),
    ),
    Question(
        id="l00.code-flops",
        lesson="00",
        kind="code",
        prompt="Write fma_flops(fmas), returning the FLOPs of that many fused multiply-adds.",
        key=lambda fmas: FLOPS_PER_FMA * fmas,
        cases=((1,), (1000,), (7,)),
        hidden_cases=((0,), (123456789,)),
        hints=("Return a number computed from fmas.", "Each FMA counts twice."),
    ),
)
