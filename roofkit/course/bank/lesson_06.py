"""Lesson 06, mixed-precision training: update swamping, FP16 underflow and loss scaling (static
and dynamic), FP32 master weights and optimizer states, FP8 per-tensor scaling, Adam's bytes per parameter."""

import itertools
import math

from ... import dtypes
from ...perf import precision, training
from ..quiz import Misconception, Question, register
from ...units import positive


def smallest_power_of_two_scale(gradient, fmt="float16", normal=True):
    """The smallest loss scale S = 2^k (k >= 0) that puts S * gradient in ``fmt``'s normal range
    (``normal=False``: that merely keeps it from rounding to zero), by real casts."""
    g = abs(positive(abs(gradient), "gradient"))
    for k in itertools.count():
        d = precision.decode(g * 2.0**k, fmt)
        if not d["zero"] and not (normal and d["subnormal"]):
            return 2.0**k


def skipped_steps(max_gradient, fmt="float16", initial_scale=2.0**16, steps=200):
    """Steps dynamic loss scaling skips (overflow, scale halved) when every step's largest gradient
    is ``max_gradient``, over ``steps`` steps (torch.amp.GradScaler's rule, its default factors)."""
    history = precision.dynamic_loss_scale([max_gradient] * steps, fmt, initial_scale)
    return sum(row["skipped"] for row in history)


def added_in(weight, update, fmt="bfloat16"):
    """What adding ``update`` to ``weight`` does when the weight is kept only in ``fmt`` (no FP32 copy):
    'swamping' (the sum rounds back to the weight), 'exact' (the weight moves by the update itself) or
    'rounded' (the weight moves, but to a value of ``fmt`` a whole number of gaps away, not by the update)."""
    r = precision.swamping(weight, update, fmt)
    if r["update_lost"]:
        return "swamping"
    return "exact" if r["result"] - r["weight"] == update else "rounded"


def _power_of_two(scale, up):
    """``scale`` rounded to a power of two (up or down), or None if it is one already."""
    exponent = math.log2(scale)
    if exponent == int(exponent):
        return None
    return 2.0 ** (math.ceil(exponent) if up else math.floor(exponent))


register(
    Question(
        id="l06.why-master-weights",
        lesson="06",
        kind="choice",
        prompt=("You train in BF16 and think of keeping the weights in BF16 only, without the FP32 master copy, to "
                "save memory. A typical weight is about {weight} and a typical update (learning rate x gradient) "
                "about {update}. The optimizer adds the update to the weight, and the sum is rounded to BF16. What "
                "happens to the update? Choose one: swamping (it rounds away: the weight does not change), rounded "
                "(the weight changes, but to another BF16 value a whole number of gaps away, so not by the "
                "update), exact (the weight changes by the update, as it would in FP32), underflow (the update "
                "flushes to zero before it is added), or overflow (the sum outgrows the format)."),
        params={"weight": 0.05, "update": 1e-4},
        choices=("swamping", "rounded", "exact", "underflow", "overflow"),
        synonyms={"swamping": ("update swamping", "swamped", "swamp", "the update rounds away", "rounds away",
                               "absorption", "lost", "the update is lost"),
                  "rounded": ("kept but rounded", "rounded to the gap", "rounded to a multiple of the gap",
                              "distorted", "changed by a whole number of gaps"),
                  "exact": ("exactly", "applied exactly", "as in fp32", "nothing is lost", "none", "nothing"),
                  "underflow": ("flush to zero", "flushes to zero", "the update flushes to zero"),
                  "overflow": ("the weight overflows", "the sum overflows")},
        variants={"weight": (0.02, 0.1, 0.3, 2.0), "update": (1e-5, 1e-4, 1e-3)},
        key=lambda weight, update: added_in(weight, update),
        hints=(
            "How far apart are BF16 numbers near the weight? Compare the update with that gap.",
            "The sum is rounded to the nearest BF16 value: below half the gap it falls back on the weight; above, "
            "it lands a whole number of gaps away, which is the update only if the update is itself a whole number "
            "of gaps.",
        ),
        misconceptions=(
            Misconception("underflow",
                          "BF16 has FP32's 8 exponent bits: an update of this size is an ordinary BF16 number, far "
                          "above its smallest normal one. What goes wrong, if anything, is the addition: the sum has "
                          "to land on a BF16 value near the weight.",
                          answer=lambda weight, update: "underflow"),
            Misconception("overflow",
                          "BF16 reaches about 3e38, like FP32: neither the weight nor the sum is anywhere near "
                          "overflowing. What matters is how far apart BF16 values are near the weight.",
                          answer=lambda weight, update: "overflow"),
            Misconception("as-in-fp32",
                          "Only a format as fine as FP32 adds an update like this one as it is. In BF16 the sum must "
                          "land on a BF16 value, and near the weight those are 2^-7 times the weight's power of two "
                          "apart: compare the update with that gap.",
                          answer=lambda weight, update: "exact" if added_in(weight, update) != "exact" else None),
            Misconception("survives-here",
                          "Not at these sizes: the update is more than half the gap between neighbouring BF16 values "
                          "at the weight, so the sum does not round back to the weight: the weight changes.",
                          answer=lambda weight, update: "swamping" if added_in(weight, update) != "swamping" else None),
            Misconception("lost-here",
                          "The update is less than half the gap between neighbouring BF16 values at the weight, so "
                          "the sum is nearer the weight than any other BF16 value and rounds back to it: the weight "
                          "does not change at all.",
                          answer=lambda weight, update: "rounded" if added_in(weight, update) == "swamping" else None),
            Misconception("whole-gaps",
                          "This update is itself a whole number of BF16 gaps at the weight, so weight + update is a "
                          "BF16 value and nothing is rounded.",
                          answer=lambda weight, update: "rounded" if added_in(weight, update) == "exact" else None),
        ),
    ),
    Question(
        id="l06.smallest-update",
        lesson="06",
        kind="numeric",
        prompt=("In {fmt}, about how large must a positive update be to change a weight of {weight} at all, "
                "when the sum is rounded to {fmt}?"),
        params={"fmt": "bfloat16", "weight": 0.2},
        variants={"fmt": ("bfloat16", "float16"), "weight": (0.1, 0.5, 3.0, 20.0)},
        key=lambda fmt, weight: precision.swamping(weight, 1.0, fmt)["smallest_update_that_survives"],
        unit="dimensionless",
        rtol=0.02,
        hints=(
            "Near the weight, neighbouring values of the format are a fixed gap apart: eps = 2^-M at 1.",
            "Rounding goes to the nearest value: the update must carry the sum past the midpoint to the next one.",
        ),
        misconceptions=(
            Misconception("whole-gap",
                          "An update does not need a whole gap: round-to-nearest lands on the next value as soon "
                          "as the sum passes the midpoint. Half the gap, and a little more, is enough.",
                          scale=2.0),
            Misconception("fp32-threshold",
                          "That is FP32's threshold (23 mantissa bits). The sum here is rounded to the 16-bit "
                          "format, whose gap is far larger.",
                          answer=lambda fmt, weight: precision.swamping(weight, 1.0, "float32")
                          ["smallest_update_that_survives"]),
        ),
    ),
    Question(
        id="l06.loss-scale-normal",
        lesson="06",
        kind="numeric",
        prompt=("A gradient of {gradient} is cast to {fmt}. What is the smallest power-of-two loss scale S for "
                "which S x gradient lands in {fmt}'s normal range (neither zero nor subnormal)?"),
        params={"gradient": 1e-8, "fmt": "float16"},
        variants={"gradient": (1e-9, 3e-9, 1e-8, 3e-8, 1e-7, 5e-7)},
        key=lambda gradient, fmt: smallest_power_of_two_scale(gradient, fmt),
        unit="dimensionless",
        rtol=0,  # one exact whole number
        hints=(
            "The normal range starts at min_normal = 2^(1 - bias), FP16's smallest normal value.",
            "You need S x gradient >= min_normal, with S a power of two: round the ratio up to the next one.",
        ),
        misconceptions=(
            Misconception("nonzero-only",
                          "That scale only lifts the gradient above zero, into the subnormals, where it keeps a "
                          "bit or two of precision. The normal range starts at min_normal.",
                          answer=lambda gradient, fmt: smallest_power_of_two_scale(gradient, fmt, normal=False)),
            Misconception("not-a-power-of-two",
                          "That ratio is right, but a loss scale is a power of two, so that scaling and unscaling "
                          "are exact: round it up to the next power of two.",
                          answer=lambda gradient, fmt: precision.get(fmt).min_normal / gradient),
        ),
    ),
    Question(
        id="l06.bf16-loss-scaling",
        lesson="06",
        kind="choice",
        prompt=("A layer's gradients have magnitudes from about {smallest} up to about 1e-6, like "
                "precision.example_gradients(). They are cast to {fmt}. Do you need loss scaling to keep the "
                "smallest of them from flushing to zero: yes or no?"),
        params={"smallest": 1e-9, "fmt": "bfloat16"},
        choices=("yes", "no"),
        key=lambda smallest, fmt: "yes" if precision.round_to(smallest, fmt) == 0 else "no",
        hints=(
            "What decides whether a small number flushes to zero: the exponent bits or the mantissa bits?",
            "Compare the format's smallest subnormal value with the gradients' magnitudes.",
        ),
        misconceptions=(
            Misconception("bf16-like-fp16",
                          "Loss scaling is an FP16 remedy. BF16 has the same 8 exponent bits as FP32, so its "
                          "smallest normal number is about 1e-38, far below these gradients.",
                          answer=lambda smallest, fmt: "yes"),
        ),
    ),
    Question(
        id="l06.dynamic-skips",
        lesson="06",
        kind="numeric",
        prompt=("Dynamic loss scaling in {fmt} starts at S = {initial_scale:g}. Whenever a scaled gradient "
                "overflows, the step is skipped and S is halved. If the largest gradient of every step is "
                "{max_gradient}, how many steps are skipped before training proceeds?"),
        params={"fmt": "float16", "initial_scale": 65536, "max_gradient": 300.0},
        variants={"initial_scale": (32768, 65536, 131072), "max_gradient": (1.0, 3.0, 50.0, 300.0, 2000.0)},
        key=lambda fmt, initial_scale, max_gradient: skipped_steps(max_gradient, fmt, initial_scale),
        unit="dimensionless",
        rtol=0,  # one exact whole number
        hints=(
            "A step overflows when S times the largest gradient exceeds the format's largest finite value.",
            "Halve S until S times the largest gradient fits, and count the halvings.",
        ),
        misconceptions=(
            Misconception("counted-good-step",
                          "Count only the steps that overflow: the first step at a scale that fits is not skipped.",
                          answer=lambda fmt, initial_scale, max_gradient:
                          skipped_steps(max_gradient, fmt, initial_scale) + 1),
        ),
    ),
    Question(
        id="l06.ex-adam-70b",
        lesson="06",
        kind="numeric",
        prompt=("A model has {params:,.0f} parameters and trains with mixed-precision Adam: BF16 weights and "
                "gradients, an FP32 master copy of the weights, and Adam's two moments in FP32. How many bytes "
                "do weights, gradients and optimizer states take together (activations not counted)?"),
        params={"params": 70e9},
        variants={"params": (7e9, 8e9, 13e9, 34e9, 70e9, 405e9)},
        key=lambda params: params * training.adam_memory_per_param()["total"],
        unit="byte",
        rtol=0.01,
        points=2,
        hints=(
            "List the per-parameter copies: the BF16 weights, the BF16 gradients, and what the optimizer keeps.",
            "The optimizer keeps three FP32 numbers per parameter: the master weight and two moments.",
        ),
        misconceptions=(
            Misconception("weights-only",
                          "That is the BF16 weights alone, what inference needs. Training also keeps gradients, "
                          "an FP32 master copy and Adam's two FP32 moments.",
                          answer=lambda params: params * dtypes.bytes_per_element("bf16")),
            Misconception("no-master-copy",
                          "You left out the FP32 master copy of the weights: with it, the optimizer holds three "
                          "FP32 numbers per parameter, not two.",
                          answer=lambda params: params * training.adam_memory_per_param(master=None)["total"]),
        ),
    ),
    Question(
        id="l06.ex-fp8-scale",
        lesson="06",
        kind="numeric",
        prompt=("An activation tensor's largest magnitude (its amax) is {amax}. Per-tensor scaling multiplies the "
                "tensor by S before the cast to FP8 {fmt} (OCP's E4M3, float8_e4m3fn in ml_dtypes), so that amax "
                "lands on the format's largest finite value. What is S?"),
        params={"amax": 0.002, "fmt": "e4m3"},
        variants={"amax": (0.0005, 0.001, 0.005, 0.02, 0.1, 4.0)},
        key=lambda amax, fmt: precision.get(fmt).max / amax,
        unit="dimensionless",
        rtol=0.01,
        points=2,
        hints=(
            "What is the largest finite value of the format?",
            "S x amax should equal that value.",
        ),
        misconceptions=(
            Misconception("e5m2-max",
                          "That uses E5M2's largest value. Forward-pass tensors such as activations go to E4M3, "
                          "whose largest value is much smaller.",
                          answer=lambda amax, fmt: precision.get("e5m2").max / amax),
            Misconception("inverted",
                          "That is the inverse: S multiplies the tensor up towards the format's largest value "
                          "before the cast; dividing by S afterwards (dequantizing) undoes it.",
                          answer=lambda amax, fmt: amax / precision.get(fmt).max),
            Misconception("power-of-two-up",
                          "That rounds S up to a power of two: amax x S then lies above the format's largest "
                          "finite value, and the cast overflows (or saturates). A power-of-two scale is rounded "
                          "down; here the question asks for the S that puts amax exactly on the largest value.",
                          answer=lambda amax, fmt: _power_of_two(precision.get(fmt).max / amax, up=True)),
            Misconception("power-of-two-down",
                          "That rounds S down to a power of two, a safe choice (amax lands below the largest "
                          "value, and scaling is exact), but the question asks for the S that puts amax exactly on "
                          "the largest finite value.",
                          answer=lambda amax, fmt: _power_of_two(precision.get(fmt).max / amax, up=False)),
        ),
    ),
)
