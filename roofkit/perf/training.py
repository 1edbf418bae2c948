"""Training compute and utilization: C = 6ND, MFU and HFU, GPU-hours, time and cost.

The 6ND rule (Kaplan et al. 2020, "Scaling Laws for Neural Language Models",
arXiv:2001.08361, Section 2.1 and Appendix; used by Chinchilla, Hoffmann et al. 2022)::

    C = 6 N D = 2ND (forward) + 4ND (backward)          [FLOP]

N is the number of non-embedding parameters, D the number of training tokens.
In the forward pass every parameter takes part in one multiply-add per token
(2 FLOPs); the backward pass does it twice, once for the gradient with respect
to the layer's input and once for the gradient with respect to its weights
(4 FLOPs). The rule leaves out attention's O(T^2) term; :func:`flops_per_token`
adds it back (PaLM, Chowdhery et al. 2022, arXiv:2204.02311, Appendix B).

Utilization (PaLM, Appendix B) divides FLOP/s achieved by the peak::

    U = F / (t * G * P)      F FLOPs in t seconds on G accelerators of peak P FLOP/s

MFU counts only the model's FLOPs (6ND, or the PaLM count); HFU counts every FLOP
the hardware executed, including activation recomputation and padding. HFU >= MFU
when both count attention the same way; a causal attention kernel executes only
about half of the attention FLOPs that PaLM's 12·L·H·Q·T counts, so without much
recomputation HFU can come out below an MFU counted with it
(``flops_per_token(..., causal=True)`` counts what such a kernel executes). FlashAttention's
backward pass also recomputes the scores QK^T instead of storing them, a seventh product
next to PaLM's six (``recompute_scores=True``): about 7·L·H·Q·T per token with a causal mask.
PaLM 540B reported 46.2% MFU and 57.8% HFU.

How high can MFU be? The best published large dense runs: Megatron-LM 56.0% MFU
(530B) and 56.3% (1T) on A100s, HFU 57.0% (Korthikanti et al. 2022,
arXiv:2205.05198, Table 5); PaLM 540B 46.2% on TPU v4; Llama 3 405B 38-43% on
H100s (Llama 3 paper, arXiv:2407.21783, Table 4). A chip with a higher ridge is
harder to keep fed, so newer chips tend to report less. A reported MFU above
:data:`MFU_SUSPICIOUS` deserves a check of its inputs (an HFU, a peak of another
precision, 6N counted with embeddings), and one above 100% is always a bug: see
:func:`mfu_verdict`.

Turning compute into time and money (GPU-hours at an assumed MFU)::

    GPU-hours = C / (MFU * P * 3600),  wall clock = GPU-hours / G,  cost = GPU-hours * price

Peaks come from the catalog (:func:`roofkit.hardware.get`), never typed here.

    >>> round(training_flops(70e9, 15e12) / 1e24, 2)
    6.3
    >>> e = estimate("70B", "15T", hw="h100", dtype="bf16", mfu=0.4, gpus=8192, usd_per_gpu_hour=2)
    >>> round(e.gpu_hours / 1e6, 2), round(e.wall_clock_days, 1), round(e.cost_usd / 1e6, 1)
    (4.42, 22.5, 8.8)
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass

import numpy as np

from .. import dtypes, formulas
from ..catalogs.hardware import get
from ..errors import InvalidValue
from ..formulas import attention_pairs
from ..units import fraction, positive, size, whole

__all__ = [
    "FORWARD_FLOPS_PER_PARAM_TOKEN", "BACKWARD_FLOPS_PER_PARAM_TOKEN", "FLOPS_PER_PARAM_TOKEN",
    "ATTENTION_PRODUCTS", "RECOMPUTED_SCORE_PRODUCTS", "MFU_SUSPICIOUS", "MFU_TYPICAL",
    "training_flops", "forward_backward", "recompute_flops", "recomputed_forwards", "flops_per_token",
    "utilization", "hfu", "mfu", "mfu_from_throughput", "padding_efficiency",
    "Verdict", "mfu_verdict", "mfu_report",
    "gpu_hours", "wall_clock_hours", "cost_usd", "gpus_for_deadline", "implied_mfu", "params_for_mfu",
    "TrainingEstimate", "estimate", "adam_memory_per_param",
]

# FLOPs per parameter per token (Kaplan et al. 2020, Appendix): a multiply-add is 2 FLOPs.
FORWARD_FLOPS_PER_PARAM_TOKEN = 2   # one multiply-add per parameter per token
BACKWARD_FLOPS_PER_PARAM_TOKEN = 4  # two: grad wrt the layer's input, grad wrt its weights
FLOPS_PER_PARAM_TOKEN = FORWARD_FLOPS_PER_PARAM_TOKEN + BACKWARD_FLOPS_PER_PARAM_TOKEN  # the 6 of 6ND

# The attention term of PaLM's count (Appendix B), per layer, head and token: QK^T and AV are two
# products of 2·Q·T FLOPs in the forward pass and four in the backward (each product's two
# gradients), 6 products: 2·6 = 12·L·H·Q·T.
ATTENTION_PRODUCTS = 6
# FlashAttention's backward pass recomputes S = QK^T from Q and K rather than store the s x s scores
# (Dao 2023, "FlashAttention-2", Algorithm 2): one product more, 14·L·H·Q·T executed. The
# FlashAttention repository's benchmark counts the same (benchmarks/benchmark_flash_attention.py:
# the backward pass is 2.5 forward passes, 3.5 in all).
RECOMPUTED_SCORE_PRODUCTS = 1

# Above this, a reported MFU deserves a check: more often a counting slip, an HFU or another
# precision's peak than a record (the best published: 56.3%, Megatron-LM 1T on A100s).
MFU_SUSPICIOUS = 0.6
# What well-tuned large dense runs report: Llama 3 405B on H100s 38-43%, PaLM 540B 46.2%,
# Megatron-LM on A100s 41.5% (22B) to 56.3% (1T) (Korthikanti et al. 2022, Table 5).
MFU_TYPICAL = (0.35, 0.55)

_SECONDS_PER_HOUR = 3600
_HOURS_PER_DAY = 24


def _arg(value, name: str, check=size):
    """Validate an argument with ``check`` (size, positive or fraction) and make numbers floats.

    sympy expressions pass through, so ``training_flops(N, D)`` with symbols
    gives ``6*D*N``.
    """
    try:
        value = check(value, name)
        return float(value) if isinstance(value, numbers.Real) else value
    except OverflowError:  # a Python int beyond float range (units cannot compare it either)
        digits = len(str(value))
        raise InvalidValue(f"{name} is too large for floating point: an integer of {digits} digits.") from None


def _flag(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidValue(f"{name} must be True or False; got {value!r}.")
    return bool(value)


def _finite(value, what: str):
    """``value`` unless floating-point arithmetic overflowed, or a divisor underflowed to 0."""
    if isinstance(value, (numbers.Real, np.ndarray)) and not np.all(np.isfinite(value)):
        raise InvalidValue(f"{what} is out of floating-point range ({value!r}): check the inputs' magnitudes.")
    return value


def _ratio(numerator, denominator, what: str):
    """numerator / denominator, raising InvalidValue (not ZeroDivisionError) when it is not finite."""
    if not all(isinstance(x, (numbers.Real, np.ndarray)) for x in (numerator, denominator)):
        return numerator / denominator  # symbolic
    with np.errstate(all="ignore"):
        q = np.divide(numerator, denominator)
    return _finite(q.item() if np.ndim(q) == 0 else q, what)


# --- counting FLOPs -------------------------------------------------------------------


def training_flops(params, tokens) -> float:
    """C = 6ND: training FLOPs of a dense model with N parameters on D tokens (Kaplan et al. 2020)."""
    N, D = _arg(params, "params"), _arg(tokens, "tokens")
    return _finite(FLOPS_PER_PARAM_TOKEN * N * D, "training FLOPs")


def forward_backward(params, tokens) -> tuple[float, float]:
    """(2ND, 4ND): the forward and backward shares of C = 6ND."""
    N, D = _arg(params, "params"), _arg(tokens, "tokens")
    forward = _finite(FORWARD_FLOPS_PER_PARAM_TOKEN * N * D, "forward FLOPs")
    backward = _finite(BACKWARD_FLOPS_PER_PARAM_TOKEN * N * D, "backward FLOPs")
    return forward, backward


def recompute_flops(params, tokens) -> float:
    """8ND: FLOPs executed with full activation recomputation, checkpointing every layer.

    The forward pass keeps each layer's input; the backward pass reruns each
    layer's forward once to rebuild what it did not store, so the hardware does
    2ND + 2ND + 4ND (Megatron-LM's "full" recomputation; Korthikanti et al. 2022).
    This is what HFU counts; MFU still counts 6ND (PaLM, Appendix B). Keeping
    fewer checkpoints costs the same extra forward when each segment is rebuilt
    once and held while its backward pass runs (Chen et al. 2016); it costs more
    only when the rebuilt activations are not held: see :func:`recomputed_forwards`.
    """
    N, D = _arg(params, "params"), _arg(tokens, "tokens")
    per = 2 * FORWARD_FLOPS_PER_PARAM_TOKEN + BACKWARD_FLOPS_PER_PARAM_TOKEN
    return _finite(per * N * D, "recompute FLOPs")


def recomputed_forwards(n_layers, keep_every=1) -> float:
    """Extra forward passes (in units of one whole forward) that activation checkpointing costs.

    The forward pass keeps the input of every ``keep_every``-th layer and nothing
    else; the backward pass, layer by layer from the top, rebuilds the activations
    of the layer it is at by rerunning the forward from the nearest kept input, and
    keeps nothing it recomputes. In a segment of k layers, the layer j above the
    kept input costs j layer forwards, k (k + 1) / 2 in all::

        extra forwards = sum over segments of k (k + 1) / 2, divided by L       [(k + 1) / 2 when k divides L]

    ``keep_every=1`` (every layer's input kept) is one extra forward: 8ND in all
    (:func:`recompute_flops`). Keeping only the model's input (``keep_every=L``)
    costs (L + 1) / 2 forwards: recomputation grows with depth. Chen et al. 2016
    ("Training Deep Nets with Sublinear Memory Cost", arXiv:1604.06174) keep every
    sqrt(L)-th input and hold a segment's rebuilt activations while its backward
    runs, which costs one extra forward; this function counts the scheme that holds
    nothing.

    >>> recomputed_forwards(32), recomputed_forwards(17, keep_every=17)
    (1.0, 9.0)
    """
    L, k = whole(n_layers, "n_layers"), whole(keep_every, "keep_every")
    if k > L:
        raise InvalidValue(f"keep_every={k} is more than n_layers={L}: keep at least the model's input "
                           f"(keep_every <= n_layers).")
    segments, rest = divmod(L, k)
    layer_forwards = segments * k * (k + 1) // 2 + rest * (rest + 1) // 2
    return layer_forwards / L


def flops_per_token(params, n_layers=None, n_heads=None, head_dim=None, seq_len=None, causal=False,
                    recompute_scores=False) -> float:
    """Training FLOPs per token: 6N, plus 12·L·H·Q·T for attention when its shape is given.

    L layers, H heads, Q head dimension, T sequence length (PaLM, Chowdhery et
    al. 2022, Appendix B; nanoGPT's ``estimate_mfu`` uses the same count). The
    attention term is the QK^T and AV matmuls, forward and backward, which
    have no parameters and so are missing from 6N. Give all four or none.

    PaLM's term counts every score of the T x T matrix. ``causal=True`` counts
    only those under the causal mask, T (T + 1) / 2 of them
    (:func:`roofkit.formulas.attention_pairs`), which is what a causal attention
    kernel executes: 12·L·H·Q·(T + 1)/2, about half.

    ``recompute_scores=True`` adds what FlashAttention's backward pass executes
    on top: it recomputes QK^T instead of reading stored scores, a seventh product
    (:data:`RECOMPUTED_SCORE_PRODUCTS`), 14·L·H·Q·T, or 7·L·H·Q·(T + 1) with
    ``causal=True``. These are hardware FLOPs (HFU), not model FLOPs.

    >>> flops_per_token(1, 1, 1, 1, 1, recompute_scores=True) - flops_per_token(1)
    14.0
    """
    N = _arg(params, "params")
    causal = _flag(causal, "causal")
    products = ATTENTION_PRODUCTS + (RECOMPUTED_SCORE_PRODUCTS if _flag(recompute_scores, "recompute_scores") else 0)
    shape = {"n_layers": n_layers, "n_heads": n_heads, "head_dim": head_dim, "seq_len": seq_len}
    given = [k for k, v in shape.items() if v is not None]
    if not given:
        return _finite(FLOPS_PER_PARAM_TOKEN * N, "FLOPs per token")
    if len(given) < len(shape):
        missing = [k for k in shape if k not in given]
        raise InvalidValue(
            f"flops_per_token: the attention term needs n_layers, n_heads, head_dim and seq_len; "
            f"got {', '.join(given)} but not {', '.join(missing)}."
        )
    L, H, Q, T = (_arg(v, k) for k, v in shape.items())
    if causal:
        return _finite(FLOPS_PER_PARAM_TOKEN * N + 2 * products * L * H * Q * attention_pairs(T, causal=True) / T,
                       "FLOPs per token")
    return _finite(FLOPS_PER_PARAM_TOKEN * N + 2 * products * L * H * Q * T, "FLOPs per token")


# --- utilization ----------------------------------------------------------------------


def utilization(flops, seconds, peak_flops, gpus=1) -> float:
    """U = F / (t·G·P): the share of G accelerators' peak that F FLOPs in t seconds used.

    A measurement, not an assumption: it may come out above 1, which means the
    inputs are inconsistent (see :func:`mfu_verdict`).
    """
    F, t = _arg(flops, "flops", positive), _arg(seconds, "seconds", positive)
    P, G = _arg(peak_flops, "peak_flops", positive), _arg(gpus, "gpus")
    return _ratio(F, t * G * P, "utilization")


def hfu(hardware_flops, seconds, peak_flops, gpus=1) -> float:
    """Hardware FLOPs utilization: every FLOP executed, recomputation and padding included.

    >>> hfu((50 + 450 + 300) * 1e12, 10, 100e12)  # forward, recompute, backward (lesson 07's example)
    0.8
    """
    return utilization(hardware_flops, seconds, peak_flops, gpus)


def mfu(model_flops, seconds, peak_flops, gpus=1) -> float:
    """Model FLOPs utilization: only the FLOPs the model needs (6ND), however it was run.

    >>> mfu((50 + 300) * 1e12, 10, 100e12)  # the same step without the 450 recomputed TFLOPs
    0.35
    """
    return utilization(model_flops, seconds, peak_flops, gpus)


def mfu_from_throughput(params, tokens_per_s, peak_flops, gpus=1, flops_per_token=None) -> float:
    """MFU = 6N·T / (G·P), with T the tokens/s summed over all G accelerators.

    ``flops_per_token`` replaces 6N, e.g. with the PaLM count
    ``flops_per_token=training.flops_per_token(N, L, H, Q, T)``.

    >>> from roofkit.hardware import get
    >>> round(mfu_from_throughput(70e9, 900, get("h100").peak("bf16")), 2)  # a 70B model at 900 tokens/s/GPU
    0.38
    """
    T = _arg(tokens_per_s, "tokens_per_s")
    if flops_per_token is None:
        model_flops_per_s = training_flops(params, T)
    else:
        _arg(params, "params")
        model_flops_per_s = _finite(_arg(flops_per_token, "flops_per_token", positive) * T, "model FLOP/s")
    return utilization(model_flops_per_s, 1, peak_flops, gpus)


def padding_efficiency(m, n, k, tile=128) -> float:
    """Useful / executed FLOPs of an m x n x k GEMM run in tile x tile x tile blocks.

    MFU = HFU x this ratio, since both share the step time and the peak (a
    130^3 GEMM padded to 256^3 does 4,394,000 useful FLOPs out of
    33,554,432, so 0.131).

    >>> round(padding_efficiency(130, 130, 130), 3)
    0.131
    """
    return _ratio(formulas.gemm(m, n, k).flops, formulas.gemm_padded(m, n, k, tile=tile), "padding efficiency")


@dataclass(frozen=True)
class Verdict:
    """A judgement of a reported MFU: level 'ok', 'suspicious' or 'impossible', and why."""

    level: str
    message: str

    @property
    def plausible(self) -> bool:
        return self.level == "ok"


def mfu_verdict(mfu) -> Verdict:
    """Judge a computed MFU: 'impossible' above 1, 'suspicious' above MFU_SUSPICIOUS, else 'ok'.

    Any positive number is accepted: this function judges a measurement, it
    does not take an assumption.

    >>> mfu_verdict(1.27).level, mfu_verdict(0.38).level
    ('impossible', 'ok')
    """
    U = _arg(mfu, "mfu", positive)
    if U > 1:
        return Verdict("impossible", (
            f"MFU of {U:.1%} is impossible: the model cannot do more useful FLOPs than the peak allows. "
            "The inputs are inconsistent; check N (non-embedding parameters, embeddings not counted twice), "
            "tokens/s per GPU versus the total across all GPUs, and the peak (dense, not the 2:4-sparse "
            "figure, in the precision the run used)."))
    if U > MFU_SUSPICIOUS:
        return Verdict("suspicious", (
            f"MFU of {U:.1%} is above {MFU_SUSPICIOUS:.0%}, more than well-tuned large runs report "
            f"(about {MFU_TYPICAL[0]:.0%}-{MFU_TYPICAL[1]:.0%}; PaLM 540B: 46.2%). Probably a counting bug, "
            "or an HFU (it counts recomputed FLOPs), or a peak of the wrong precision."))
    if U < MFU_TYPICAL[0]:
        return Verdict("ok", (
            f"MFU of {U:.1%} is plausible but below the {MFU_TYPICAL[0]:.0%}-{MFU_TYPICAL[1]:.0%} of "
            "well-tuned large runs: look for communication, small batches, memory-bound ops, launch overhead."))
    return Verdict("ok", f"MFU of {U:.1%} is plausible for a well-tuned run "
                         f"(typical: {MFU_TYPICAL[0]:.0%}-{MFU_TYPICAL[1]:.0%}).")


def mfu_report(params, tokens_per_s, gpus, hw, dtype="bf16") -> dict:
    """MFU of a run from its throughput, with a verdict: the ``roofkit mfu`` command.

    ``tokens_per_s`` is the total over all ``gpus``; peaks come from the catalog.

    >>> r = mfu_report(70e9, 3000, 1, "h100", "bf16")  # a 70B model at 3,000 tokens/s/GPU: impossible
    >>> round(r["mfu"], 2), r["plausible"], r["level"]
    (1.27, False, 'impossible')
    """
    accelerator = get(hw)
    peak = accelerator.peak(dtype)
    U = mfu_from_throughput(params, tokens_per_s, peak, gpus)
    verdict = mfu_verdict(U)
    return {
        "mfu": U,
        "plausible": verdict.plausible,
        "level": verdict.level,
        "warning": None if verdict.plausible else verdict.message,
        "message": verdict.message,
        "accelerator": accelerator.name,
        "precision": dtypes.canonical(dtype),
        "peak_flops": peak,
    }


# --- from FLOPs to GPU-hours, time and money ------------------------------------------


def gpu_hours(total_flops, peak_flops, mfu) -> float:
    """GPU-hours = C / (MFU · P · 3600), with MFU an assumed fraction in (0, 1]."""
    C, P = _arg(total_flops, "total_flops", positive), _arg(peak_flops, "peak_flops", positive)
    U = _arg(mfu, "mfu", fraction)
    return _ratio(C, U * P * _SECONDS_PER_HOUR, "GPU-hours")


def wall_clock_hours(gpu_hours, gpus) -> float:
    """Hours on G accelerators working in parallel: GPU-hours / G."""
    GH, G = _arg(gpu_hours, "gpu_hours", positive), _arg(gpus, "gpus")
    return _ratio(GH, G, "wall-clock hours")


def cost_usd(gpu_hours, usd_per_gpu_hour) -> float:
    """GPU-hours x price per GPU-hour, in US dollars."""
    GH, price = _arg(gpu_hours, "gpu_hours", positive), _arg(usd_per_gpu_hour, "usd_per_gpu_hour", positive)
    return _finite(GH * price, "cost")


def gpus_for_deadline(gpu_hours, hours) -> int:
    """ceil(GPU-hours / hours): the fewest whole accelerators that finish the work within ``hours``."""
    GH, t = _arg(gpu_hours, "gpu_hours", positive), _arg(hours, "hours", positive)
    G = _ratio(GH, t, "GPUs needed")
    # forgive the last bits of rounding, so that 8192.000000000002 GPUs stays 8192
    return max(1, math.ceil(G * (1 - 1e-12)))


def implied_mfu(params, tokens, gpu_hours, peak_flops) -> float:
    """The MFU a public run must have had: 6ND / (GPU-hours · 3600 · P).

    ``peak_flops`` is a number: take it from the catalog, e.g.
    ``hardware.get("h100").peak("bf16")``, or ``hardware.get("h800").peak("fp8")``
    for DeepSeek-V3's GPUs. A chip missing from the catalog with the same
    tensor-core peaks as one in it can use that entry. Like any measured MFU,
    the result may exceed 1.

    >>> from roofkit.hardware import get
    >>> round(implied_mfu(70e9, 15e12, 6.4e6, get("h100").peak("bf16")), 2)  # Llama 3 70B model card
    0.28
    """
    seconds = _finite(_arg(gpu_hours, "gpu_hours", positive) * _SECONDS_PER_HOUR, "GPU-seconds")
    return utilization(training_flops(params, tokens), seconds, peak_flops)


def params_for_mfu(tokens, seconds, gpus, peak_flops, mfu) -> float:
    """N = MFU · G · P · t / (6D): the model size that reaches ``mfu`` on D tokens in t seconds.

    A common exercise ("100B tokens in 30 days on 1,024 H100s: what MFU?")
    names no model; this inverts the question.
    """
    D, t = _arg(tokens, "tokens"), _arg(seconds, "seconds", positive)
    G, P, U = _arg(gpus, "gpus"), _arg(peak_flops, "peak_flops", positive), _arg(mfu, "mfu", fraction)
    return _ratio(_finite(U * G * P * t, "FLOP budget"), FLOPS_PER_PARAM_TOKEN * D, "params")


@dataclass(frozen=True)
class TrainingEstimate:
    """What a training run costs. Parts that need inputs not given are None."""

    params: float
    tokens: float
    flops: float
    mfu: float
    accelerator: str | None = None
    precision: str | None = None
    peak_flops: float | None = None
    gpu_hours: float | None = None
    gpus: float | None = None
    wall_clock_hours: float | None = None
    wall_clock_days: float | None = None
    usd_per_gpu_hour: float | None = None
    cost_usd: float | None = None
    deadline_hours: float | None = None
    gpus_needed: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def estimate(params, tokens, hw=None, dtype="bf16", mfu=0.4, gpus=None,
             usd_per_gpu_hour=None, deadline_hours=None) -> TrainingEstimate:
    """C = 6ND, and with an accelerator its GPU-hours, wall clock, cost and GPUs for a deadline.

    ``mfu`` is an assumption in (0, 1] (0.4 by default: a well-tuned run).
    A Llama-3-70B-sized run: 70B on 15T tokens, H100 BF16, 40% MFU, 8,192 GPUs, $2/GPU-hour
    gives 6.3e24 FLOPs, 4.4e6 GPU-hours, 540 hours (22.5 days), $8.8M.
    """
    N, D, U = _arg(params, "params"), _arg(tokens, "tokens"), _arg(mfu, "mfu", fraction)
    result = {"params": N, "tokens": D, "flops": training_flops(N, D), "mfu": U,
              "precision": dtypes.canonical(dtype)}
    if gpus is not None:
        result["gpus"] = _arg(gpus, "gpus")
    if usd_per_gpu_hour is not None:
        result["usd_per_gpu_hour"] = _arg(usd_per_gpu_hour, "usd_per_gpu_hour", positive)
    if deadline_hours is not None:
        result["deadline_hours"] = _arg(deadline_hours, "deadline_hours", positive)
    if hw is not None:
        accelerator = get(hw)
        result |= {"accelerator": accelerator.name, "peak_flops": accelerator.peak(dtype)}
        result["gpu_hours"] = gpu_hours(result["flops"], result["peak_flops"], U)
        if gpus is not None:
            result["wall_clock_hours"] = wall_clock_hours(result["gpu_hours"], result["gpus"])
            result["wall_clock_days"] = result["wall_clock_hours"] / _HOURS_PER_DAY
        if usd_per_gpu_hour is not None:
            result["cost_usd"] = cost_usd(result["gpu_hours"], result["usd_per_gpu_hour"])
        if deadline_hours is not None:
            result["gpus_needed"] = gpus_for_deadline(result["gpu_hours"], result["deadline_hours"])
    return TrainingEstimate(**result)


# --- memory ---------------------------------------------------------------------------


def adam_memory_per_param(weights="bf16", grads="bf16", master="fp32", moments="fp32") -> dict:
    """Bytes per parameter of mixed-precision Adam, by part and in total.

    The standard recipe keeps BF16 weights and gradients, an FP32 master copy
    of the weights and Adam's two FP32 moments: 2 + 2 + 4 + 4 + 4 = 16 bytes
    per parameter (ZeRO, Rajbhandari et al. 2020, arXiv:1910.02054, Section 3.1:
    2Ψ + 2Ψ + 12Ψ). ``master=None`` drops the master copy (pure-BF16 training,
    which loses small updates to rounding). Activations are not included.

    >>> adam_memory_per_param()["total"]
    16
    """
    parts = {
        "weights": dtypes.bytes_per_element(weights),
        "grads": dtypes.bytes_per_element(grads),
        "master": 0 if master is None else dtypes.bytes_per_element(master),
        "first_moment": dtypes.bytes_per_element(moments),
        "second_moment": dtypes.bytes_per_element(moments),
    }
    return parts | {"total": sum(parts.values())}
