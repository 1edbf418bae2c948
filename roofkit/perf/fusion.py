"""Kernel fusion: the HBM traffic of a chain of ops, unfused vs fused; and Amdahl's law.

Unfused, every op is its own kernel: it reads its inputs from HBM and writes
its output back, so a chain of k elementwise ops on n elements moves about
2·k·n elements. Fused into one kernel, the intermediates stay in registers:
the kernel reads each external input once and writes only the last output.
The FLOPs do not change; the bytes shrink, so the intensity rises by the same
factor, and k - 1 kernels disappear.

Each kernel also costs something fixed: the CPU issues its launch (Python, the
framework, the driver: c each), and the GPU pays a per-kernel floor t0 beyond
its roofline time. Launches are asynchronous, so the two overlap: the CPU queues
the next kernels while the GPU works. Kernel i (i = 1 ... k) is issued at i c and
runs, in stream order, for g_i = t0 + max(F_i / P, B_i / BW), so the stream ends
at the end of its critical path::

    T = max_i (i c + sum_{j >= i} g_j)          (:func:`stream_critical_path`)

T lies between max(k c, sum_i g_i) and k c + sum_i g_i. For a long stream of
short and long kernels mixed, it is close to the max (:func:`stream_time`): the
overhead is hidden as long as the CPU can "run ahead" of the GPU (Horace He,
"Making Deep Learning Go Brrrr From First Principles", 2022). Launches issued
before the CPU has built a lead are exposed: tiny kernels followed by a long one
take the CPU's time plus the long kernel, not the larger of the two.

FlashAttention fuses a whole attention into one kernel. Its softmax cannot see a
row of scores at once, so it runs online, block by block, keeping a running
maximum and a running sum (:func:`online_softmax`; Milakov & Gimelshein 2018).

Amdahl's law (Amdahl 1967) says what a faster part is worth to the whole::

    S = 1 / ((1 - p) + p / s)

p the fraction of runtime in the part, s the part's speed-up, S the whole's.

    >>> c = chain([OPS["bias_add"], OPS["gelu"]], n=2**20)
    >>> c.launches_unfused, c.launches_fused, c.traffic_ratio
    (2, 1, 2.0)
    >>> round(amdahl_time_saved(0.1, 2), 3)  # halve a 10 ms part of 100 ms
    0.05
    >>> stream_time(17, 100e-6, launch_overhead_s=10e-6)["bound"]  # 170 µs of launches, 100 µs of work
    'cpu'
    >>> round(stream_critical_path([1e-6] * 100 + [500e-6], 8e-6)["time_s"] * 1e6)  # 101 launches, then 500 µs
    1308
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass

import numpy as np

from .. import dtypes
from ..catalogs.hardware import get
from ..errors import InvalidValue
from ..formulas import (GELU_FLOPS_PER_ELEMENT, RMSNORM_FLOPS_PER_ELEMENT, SILU_FLOPS_PER_ELEMENT, Cost, elementwise,
    gemm, rmsnorm)
from ..units import fraction as _fraction
from ..units import nonnegative, positive, size, whole
from .roofline import time_bounds

__all__ = [
    "DEFAULT_LAUNCH_OVERHEAD_S", "stream_time", "stream_critical_path", "Op", "OPS", "ChainCost", "chain", "mlp_block",
    "DECODER_LAYER_KERNELS", "FUSED_DECODER_LAYER_KERNELS", "fusion_groups",
    "OnlineSoftmax", "online_softmax", "amdahl", "amdahl_time_saved",
]

# The CPU's cost of one op from eager PyTorch: Horace He ("Making Deep Learning Go Brrrr From First
# Principles", 2022, section "Overhead") measures PyTorch at about 280 thousand operations per second on
# tiny tensors, about 3.6 µs each. That is PyTorch's dispatch overhead (his device is not stated; he
# compares it with plain Python), not a CUDA launch, which adds the driver's launch call: a low rule of
# thumb, not a datasheet figure. It varies with the host, the framework and the code between the ops (the
# H200 host of roofkit's measured layers took 8.3 µs per CUDA launch). Measure your own with the profiler.
_PYTORCH_TINY_OPS_PER_S = 280e3
DEFAULT_LAUNCH_OVERHEAD_S = 1 / _PYTORCH_TINY_OPS_PER_S


def stream_time(kernels, roofline_s, launch_overhead_s=DEFAULT_LAUNCH_OVERHEAD_S, kernel_floor_s=0.0) -> dict:
    """Time of a long stream of kernels launched one after another: max(CPU issue time, GPU time).

    A launch is asynchronous: the CPU spends ``launch_overhead_s`` (c) issuing a
    kernel, then issues the next while the GPU runs the first. Once the stream
    runs, the CPU and the GPU overlap, and whichever is slower sets the pace::

        cpu_s = k c                     the CPU issuing k kernels
        gpu_s = k t0 + R                R = the kernels' roofline times summed,
                                        t0 = the GPU's per-kernel floor
        time_s = max(cpu_s, gpu_s)      bound: 'cpu' or 'gpu', whichever is larger

    This is the long-stream approximation, a lower bound: the exact time is the
    critical path of :func:`stream_critical_path`, which needs each kernel's own
    time and lies between this max and the sum cpu_s + gpu_s. For a long stream
    of short and long kernels mixed (a decode step, layer after layer) the two
    agree closely; a run of tiny kernels followed by a long one does not.
    The launch cost shows only where the kernels are shorter than their launches
    (tiny kernels, a slow host); behind long kernels it is hidden. With
    ``kernel_floor_s=0`` (the default) each kernel runs at its roofline: a bound.
    The floor lesson 11 fits on a real H200's layers is
    ``roofkit.layertime.default_calibration().floor_s``.
    """
    k = whole(kernels, "kernels")
    R = nonnegative(roofline_s, "roofline_s")
    c = nonnegative(launch_overhead_s, "launch_overhead_s")
    t0 = nonnegative(kernel_floor_s, "kernel_floor_s")
    cpu, gpu = k * c, k * t0 + R
    return {"cpu_s": cpu, "gpu_s": gpu, "time_s": max(cpu, gpu), "bound": "cpu" if cpu > gpu else "gpu",
            "kernels": k, "launch_overhead_s": c, "kernel_floor_s": t0}


def stream_critical_path(kernel_s, launch_overhead_s=DEFAULT_LAUNCH_OVERHEAD_S, kernel_floor_s=0.0) -> dict:
    """Exact time of a stream: the CPU issues the kernels one by one, the GPU runs them in order.

    ``kernel_s`` is each kernel's time on the GPU (its roofline time), in launch
    order; the GPU adds ``kernel_floor_s`` (t0) to each, so kernel i runs for
    g_i = t0 + kernel_s[i]. The CPU spends ``launch_overhead_s`` (c) on each
    launch, so kernel i (counting from 1) is issued at i c, starts at the later
    of that and the end of kernel i - 1, and the stream ends at::

        time_s = max_i (i c + sum_{j >= i} g_j)

    the critical path: the launches up to some kernel, then the GPU's work from
    that kernel on, back to back. It lies between ``max_s`` = max(k c, sum g)
    (:func:`stream_time`, the long-stream approximation) and ``sum_s`` =
    k c + sum g (a CPU that waits for each kernel). The stream starts with an
    empty queue: a host synchronization (``.item()``, printing a tensor, a
    data-dependent shape) empties it, and the next stream starts again.

    Returns time_s, cpu_s (k c), gpu_s (sum g), max_s, sum_s, gpu_idle_s
    (time_s - gpu_s: the GPU waiting for launches), launches_on_path (the i of the
    maximum: the launches the path waits for) and gpu_on_path_s (the GPU's work
    after them), with kernels, launch_overhead_s and kernel_floor_s.

        >>> r = stream_critical_path([1e-6] * 100 + [500e-6], 8e-6)    # tiny kernels, then a long one
        >>> round(r["time_s"] * 1e6), round(r["max_s"] * 1e6), round(r["sum_s"] * 1e6), r["launches_on_path"]
        (1308, 808, 1408, 101)
        >>> round(stream_critical_path([500e-6] + [1e-6] * 100, 8e-6)["time_s"] * 1e6)  # the long one first
        809
    """
    try:
        times = np.asarray(kernel_s, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        times = None
    if times is None or times.ndim != 1 or times.size == 0 or not np.all(np.isfinite(times)) or np.any(times < 0):
        raise InvalidValue(f"kernel_s must be a non-empty list of each kernel's time in seconds (finite, at least "
                           f"0), in launch order; got {kernel_s!r}.")
    c = float(nonnegative(launch_overhead_s, "launch_overhead_s"))
    t0 = float(nonnegative(kernel_floor_s, "kernel_floor_s"))
    g = times + t0
    k = g.size
    issued = c * np.arange(1, k + 1)  # kernel i is issued at i c
    after = np.cumsum(g[::-1])[::-1]  # the GPU's work from kernel i to the end
    paths = issued + after
    i = int(np.argmax(paths))
    cpu, gpu = k * c, float(g.sum())
    time = float(paths[i])
    return {"time_s": time, "cpu_s": cpu, "gpu_s": gpu, "max_s": max(cpu, gpu), "sum_s": cpu + gpu,
            "gpu_idle_s": time - gpu, "launches_on_path": i + 1, "gpu_on_path_s": float(after[i]),
            "kernels": k, "launch_overhead_s": c, "kernel_floor_s": t0}


@dataclass(frozen=True)
class Op:
    """One elementwise op: FLOPs per element, and how many size-n tensors it reads and writes.

    Small operands (a bias or norm weight of d elements next to an activation
    of n = tokens x d elements) are not counted.
    """

    name: str
    flops_per_element: float
    reads: int = 1
    writes: int = 1

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise InvalidValue(f"an Op needs a name (a non-empty string); got {self.name!r}.")
        nonnegative(self.flops_per_element, f"{self.name}: flops_per_element")
        for field, count, least in (("reads", self.reads, 0), ("writes", self.writes, 1)):
            if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < least:
                raise InvalidValue(f"{self.name}: {field} counts whole tensors, so it must be an integer "
                                   f"of at least {least}; got {count!r}.")


# FLOP counts are conventions (see roofkit.formulas); the bytes decide these kernels' time.
OPS: dict[str, Op] = {op.name: op for op in [
    Op("bias_add", 1),                    # x + b, b broadcast (d elements, not counted)
    Op("gelu", GELU_FLOPS_PER_ELEMENT),   # tanh approximation, 8 FLOPs (formulas.GELU_FLOPS_PER_ELEMENT)
    Op("silu", SILU_FLOPS_PER_ELEMENT),   # x / (1 + exp(-x))
    Op("relu", 1),                        # max(x, 0)
    Op("residual_add", 1, reads=2),       # x + residual
    Op("scale", 1),                       # x * c
    Op("dropout", 2),                     # compare a random number, multiply by 0 or 1/(1-p); the mask is
                                          # not counted: a fused kernel regenerates it from the RNG seed
                                          # (PyTorch's unfused native_dropout writes a 1-byte mask for the
                                          # backward pass; at inference dropout runs no kernel at all)
    Op("mul", 1, reads=2),                # x * y, e.g. SwiGLU's gate * up
    Op("rmsnorm", RMSNORM_FLOPS_PER_ELEMENT),  # x * rsqrt(mean(x^2) + eps) * g (g: d elements)
]}


def _check_ops(ops) -> tuple[Op, ...]:
    """Op objects from a list of Ops or names in OPS; a later op must read the previous output."""
    if isinstance(ops, (str, Op)):
        ops = [ops]
    try:
        ops = tuple(OPS.get(op, op) if isinstance(op, str) else op for op in ops)
    except TypeError:
        ops = (ops,)
    bad = [op for op in ops if not isinstance(op, Op)]
    if not ops or bad:
        raise InvalidValue(f"chain() takes a non-empty list of Op objects or names from: {', '.join(OPS)}; "
                           f"got {bad[0] if bad else ops!r}.")
    for op in ops[1:]:
        if op.reads < 1:
            raise InvalidValue(f"{op.name} reads nothing, so it cannot follow another op in a chain.")
    return ops


@dataclass(frozen=True)
class ChainCost:
    """FLOPs and HBM bytes of a chain of ops run as separate kernels, and as one fused kernel."""

    ops: tuple[str, ...]
    n: float
    kernels: tuple[Cost, ...]  # each unfused kernel
    unfused: Cost  # the sum of the kernels
    fused: Cost  # the one fused kernel
    launches_unfused: int
    launches_fused: int = 1

    @property
    def bytes_saved(self) -> float:
        return self.unfused.bytes - self.fused.bytes

    @property
    def traffic_ratio(self) -> float:
        """Unfused bytes / fused bytes: by how much fusion cuts HBM traffic (and raises intensity)."""
        return self.unfused.bytes / self.fused.bytes

    def time(self, hw, dtype, launch_overhead_s=DEFAULT_LAUNCH_OVERHEAD_S, kernel_floor_s=0.0) -> dict:
        """Predicted seconds unfused vs fused, each the :func:`stream_time` of its kernels.

        Each kernel's roofline time is max(FLOPs / peak, bytes / bandwidth)
        (:func:`roofkit.roofline.time_bounds`); the GPU adds ``kernel_floor_s`` per
        kernel; the CPU spends ``launch_overhead_s`` per launch, overlapped with the
        GPU's work: each version takes max(CPU issue time, GPU time). With the
        default floor of 0 it is a bound; pass lesson 11's floor
        (``layertime.default_calibration().floor_s``) for an estimate. The
        catalog's peak is the tensor-core peak; elementwise math runs on slower
        vector units, but these kernels sit so far below the ridge that the
        memory term decides.
        """
        accelerator = get(hw)
        peak, bandwidth = accelerator.peak(dtype), accelerator.bandwidth

        def seconds(cost):
            return float(time_bounds(cost.flops, cost.bytes, peak, bandwidth)[0])

        unfused = stream_time(self.launches_unfused, sum(seconds(k) for k in self.kernels), launch_overhead_s,
                              kernel_floor_s)
        fused = stream_time(self.launches_fused, seconds(self.fused), launch_overhead_s, kernel_floor_s)
        return {"unfused_s": unfused["time_s"], "fused_s": fused["time_s"],
                "speedup": unfused["time_s"] / fused["time_s"],
                "unfused_bound": unfused["bound"], "fused_bound": fused["bound"],
                "unfused_cpu_s": unfused["cpu_s"], "unfused_gpu_s": unfused["gpu_s"],
                "fused_cpu_s": fused["cpu_s"], "fused_gpu_s": fused["gpu_s"],
                "launch_overhead_s": unfused["launch_overhead_s"], "kernel_floor_s": unfused["kernel_floor_s"],
                "accelerator": accelerator.name, "precision": dtypes.canonical(dtype)}

    def to_dict(self) -> dict:
        data = asdict(self)
        data |= {"unfused": self.unfused.to_dict(), "fused": self.fused.to_dict(),
                 "kernels": [k.to_dict() for k in self.kernels],
                 "bytes_saved": self.bytes_saved, "traffic_ratio": self.traffic_ratio}
        return data


def chain(ops, n, bytes_per_element=2, keep=()) -> ChainCost:
    """HBM traffic of ``ops`` applied one after another to n elements, unfused and fused.

    Unfused: op i is a kernel that reads r_i and writes w_i tensors of n
    elements. Fused: one kernel reads the first op's inputs, plus every later
    op's inputs except the previous op's output, and writes only the last
    op's outputs::

        reads_fused = r_1 + sum_{i>1} (r_i - 1),   writes_fused = w_k

    ``ops`` are Op objects or names from :data:`OPS`. ``keep`` names ops whose
    output is still needed after the chain, which the fused kernel must write
    too: a fused residual-add + RMSNorm writes the new residual stream as well
    as the normalized output.
    """
    ops = _check_ops(ops)
    n = size(n, "n")
    b = dtypes.bytes_per_element(bytes_per_element)
    keep = (keep,) if isinstance(keep, str) else tuple(keep)
    names = [op.name for op in ops[:-1]]
    for name in keep:
        if name not in names:
            raise InvalidValue(f"keep: {name!r} is not an op before the last in this chain; "
                               f"expected some of: {', '.join(names) or '(none)'}.")
    kernels = tuple(elementwise(n, op.flops_per_element, op.reads, op.writes, b) for op in ops)
    unfused = sum(kernels)
    reads = ops[0].reads + sum(op.reads - 1 for op in ops[1:])
    writes = ops[-1].writes + sum(op.writes for op in ops[:-1] if op.name in keep)
    flops_per_element = sum(op.flops_per_element for op in ops)
    fused = elementwise(n, flops_per_element, reads, writes, b)
    return ChainCost(tuple(op.name for op in ops), n, kernels, unfused, fused, launches_unfused=len(ops))


def mlp_block(tokens, d_model, d_ff, bytes_per_element=2, gated=False) -> dict:
    """HBM bytes of an MLP block as separate kernels vs one fused kernel (lesson 09).

    t tokens, d = d_model, f = d_ff, b bytes per element. ``gated=False``:
    RMSNorm -> Linear -> SiLU -> Linear, two weight matrices, 4 kernels. Unfused,
    each kernel round-trips its activation through HBM:

        rmsnorm   read x (t·d),           write t·d
        up        read t·d + W1 (d·f),    write h (t·f)
        silu      read t·f,               write t·f
        down      read t·f + W2 (f·d),    write y (t·d)

    ``gated=True``: the SwiGLU MLP of Llama-style models (Shazeer 2020, "GLU
    Variants Improve Transformer"), down(SiLU(x W_gate) ⊙ (x W_up)), three weight
    matrices, 6 kernels as eager PyTorch runs it (SiLU and the product are two):

        rmsnorm   read x (t·d),                write t·d
        gate      read t·d + W_gate (d·f),     write g (t·f)
        up        read t·d + W_up (d·f),       write u (t·f)
        silu      read g (t·f),                write t·f
        mul       read SiLU(g) and u (2·t·f),  write h (t·f)
        down      read h (t·f) + W_down (f·d), write y (t·d)

    Fused (one kernel, intermediates on chip): read x, the norm weight and the
    weight matrices once, write y. That is a lower bound: a real fused kernel
    tiles the tokens and re-reads weight tiles, mostly from L2.

    The saving is the activation round trips: 2·t·d + 4·t·f elements ungated,
    3·t·d + 8·t·f gated; both versions read the weights (2·d·f or 3·d·f). At
    decode sizes (t of 1 to 16) the weights dominate and fusion saves almost no
    bytes, only launches. At prefill sizes the activations dominate and the ratio
    approaches (4·d + 4·f) / (2·d) ungated, 10 for f = 4d, or (5·d + 8·f) / (2·d) gated.
    """
    t, d, f = size(tokens, "tokens"), size(d_model, "d_model"), size(d_ff, "d_ff")
    b = dtypes.bytes_per_element(bytes_per_element)
    if not isinstance(gated, bool):
        raise InvalidValue(f"gated must be True or False; got {gated!r}.")
    kernels = {"rmsnorm": rmsnorm(t, d, b)}
    if gated:
        kernels |= {
            "gate_proj": gemm(t, f, d, b),
            "up_proj": gemm(t, f, d, b),
            "silu": elementwise(t * f, SILU_FLOPS_PER_ELEMENT, 1, 1, b),
            "mul": elementwise(t * f, 1, 2, 1, b),
        }
    else:
        kernels |= {"up_proj": gemm(t, f, d, b), "silu": elementwise(t * f, SILU_FLOPS_PER_ELEMENT, 1, 1, b)}
    kernels["down_proj"] = gemm(t, d, f, b)
    unfused = sum(kernels.values())
    flops = unfused.flops
    matrices = 3 if gated else 2
    weights = (d + matrices * d * f) * b  # norm weight, W_gate (gated), W_up, W_down
    fused = Cost(flops, weights + 2 * t * d * b)  # plus x in, y out
    return {
        "tokens": t, "d_model": d, "d_ff": f, "bytes_per_element": b, "gated": gated,
        "flops": flops,
        "kernels": {name: k.to_dict() for name, k in kernels.items()},
        "unfused_bytes": unfused.bytes,
        "fused_bytes": fused.bytes,
        "weight_bytes": weights,
        "bytes_saved": unfused.bytes - fused.bytes,
        "traffic_ratio": unfused.bytes / fused.bytes,
        "unfused_intensity": unfused.intensity,
        "fused_intensity": fused.intensity,
        "launches_unfused": len(kernels),
        "launches_fused": 1,
    }


# --- a decoder layer, kernel by kernel (lesson 09) ------------------------------------

# An unfused pre-norm decoder layer (Llama style: RMSNorm, rotary, SwiGLU), one kernel per op. Eager model
# code written op by op launches more: Hugging Face's LlamaRMSNorm alone is 8 elementwise kernels, its rotary
# embedding of q and k 10 (transformers, models/llama/modeling_llama.py).
DECODER_LAYER_KERNELS: tuple[str, ...] = (
    "rmsnorm_attn", "q_proj", "k_proj", "v_proj", "rotary",
    "attention_scores", "mask_softmax", "attention_values", "out_proj", "residual_add_attn",
    "rmsnorm_mlp", "gate_proj", "up_proj", "silu", "mul", "down_proj", "residual_add_mlp",
)

# Fused kernel -> the unfused kernels it replaces, using four common fusion patterns:
_GROUPS: dict[str, tuple[str, ...]] = {
    # norm + linear: RMSNorm(x)·W = diag(1/rms(x)) · (x ⊙ g) · W, so g folds into W and
    # the per-row 1/rms is applied in the GEMM's epilogue; Q, K, V weights are concatenated
    "rmsnorm_qkv_proj": ("rmsnorm_attn", "q_proj", "k_proj", "v_proj"),
    # FlashAttention: rotary on the Q/K tiles as they load, then QK^T, mask, online softmax, @V
    "flash_attention": ("rotary", "attention_scores", "mask_softmax", "attention_values"),
    # residual add in the GEMM epilogue
    "out_proj_residual": ("out_proj", "residual_add_attn"),
    # norm + linear again, gate and up concatenated, SiLU(gate) * up in the epilogue
    "rmsnorm_gate_up_swiglu": ("rmsnorm_mlp", "gate_proj", "up_proj", "silu", "mul"),
    "down_proj_residual": ("down_proj", "residual_add_mlp"),
}
FUSED_DECODER_LAYER_KERNELS: tuple[str, ...] = tuple(_GROUPS)


def fusion_groups() -> dict[str, tuple[str, ...]]:
    """Fused kernel -> the unfused kernels of :data:`DECODER_LAYER_KERNELS` it replaces."""
    return dict(_GROUPS)


# --- the online softmax (FlashAttention's inner loop) -----------------------------------


@dataclass(frozen=True)
class OnlineSoftmax:
    """softmax of a row computed block by block, and the running state after each block.

    ``maxima[j]`` and ``sums[j]`` are m and l after block j; ``output`` is the
    probability-weighted sum of ``values`` (what attention's P V computes for the
    row), or None without values.
    """

    probabilities: object  # numpy array, the row's softmax
    maxima: tuple[float, ...]
    sums: tuple[float, ...]
    block: int
    output: object = None


def online_softmax(scores, block, values=None) -> OnlineSoftmax:
    """softmax(scores) in one pass over blocks of ``block`` scores, keeping only a running max and sum.

    Milakov & Gimelshein 2018 ("Online normalizer calculation for softmax",
    arXiv:1805.02867); FlashAttention runs it on every row of a tile of scores,
    rescaling its output accumulator the same way (Dao et al. 2022, Section 3.1)::

        m_j = max(m_{j-1}, max of block j)                          running maximum
        l_j = l_{j-1} e^(m_{j-1} - m_j) + sum_block e^(x - m_j)      running sum, rescaled to the new maximum
        o_j = o_{j-1} e^(m_{j-1} - m_j) + sum_block e^(x - m_j) v    running output (with values)

    and at the end softmax(x)_i = e^(x_i - m) / l and the attention output is o / l.
    Subtracting the running maximum keeps every exponent <= 0, so nothing overflows.

    >>> r = online_softmax([1.0, 3.0, 2.0, 5.0], block=2)
    >>> r.maxima, [round(l, 4) for l in r.sums]
    ((3.0, 5.0), [1.1353, 1.2034])
    """
    def numbers(value):
        try:
            return np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            return None

    x = numbers(scores)
    if x is None or x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)):
        raise InvalidValue(f"online_softmax needs a non-empty row of finite scores; got {scores!r}.")
    width = positive(block, "block")
    if isinstance(width, bool) or not float(width).is_integer():
        raise InvalidValue(f"block must be a whole number of scores (at least 1); got {block!r}.")
    width = int(width)
    v = None if values is None else numbers(values)
    if values is not None and (v is None or v.ndim < 1 or v.shape[0] != x.size or not np.all(np.isfinite(v))):
        raise InvalidValue(f"values must have one finite row per score ({x.size} rows); got {values!r}.")
    m, l, o = -np.inf, 0.0, None if v is None else np.zeros(v.shape[1:])
    maxima, sums = [], []
    for start in range(0, x.size, width):
        chunk = x[start:start + width]
        m_new = max(m, float(chunk.max()))
        rescale = math.exp(m - m_new) if math.isfinite(m) else 0.0
        weights = np.exp(chunk - m_new)
        l = l * rescale + float(weights.sum())
        if v is not None:
            o = o * rescale + weights @ v[start:start + width]
        m = m_new
        maxima.append(m)
        sums.append(l)
    return OnlineSoftmax(np.exp(x - m) / l, tuple(maxima), tuple(sums), width, None if o is None else o / l)


# --- Amdahl's law ----------------------------------------------------------------------


def _speedup(speedup):
    if isinstance(speedup, (int, float)) and not isinstance(speedup, bool) and speedup == math.inf:
        return math.inf
    return positive(speedup, "speedup")


def amdahl(fraction, speedup) -> float:
    """S = 1 / ((1 - p) + p / s): the whole's speed-up when a part taking p of the time runs s times faster.

    ``speedup`` may be ``math.inf`` (the part vanishes): then S = 1 / (1 - p).
    Amdahl, "Validity of the single processor approach...", AFIPS 1967.

    >>> round(amdahl(0.1, 2), 4), round(amdahl(0.1, math.inf), 4)
    (1.0526, 1.1111)
    """
    p, s = _fraction(fraction, "fraction"), _speedup(speedup)
    remaining = (1 - p) + p / s
    return math.inf if remaining == 0 else 1 / remaining


def amdahl_time_saved(fraction, speedup) -> float:
    """1 - 1/S = p · (1 - 1/s): the share of the runtime saved; at most p.

    >>> amdahl_time_saved(0.1, math.inf)
    0.1
    """
    p, s = _fraction(fraction, "fraction"), _speedup(speedup)
    return p * (1 - 1 / s)
