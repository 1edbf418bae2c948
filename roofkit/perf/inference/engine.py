"""How a serving engine spends a kernel's time: the bound, and the calibrated estimate.

Every step of a server is a list of kernels (:func:`roofkit.layertime.kernels`,
one per op, as an engine with fused kernels runs them), each with its FLOPs F
and HBM bytes Q. Two models of a kernel's time:

* the bound (the default): every cost at its best, the datasheet's roofs, math
  and memory fully overlapped:

      t = max(F / P, Q / BW)

  No real kernel is faster, so no real step is (a published run that beats it is a bug);
* calibrated: the achievable roofs of the catalog (the best measured matmul rate
  and a copy's bandwidth, sourced per accelerator), math and memory not
  overlapped (lesson 03's pessimistic sum, which the achievable roofs make an
  estimate), and a floor t0 that every kernel pays:

      t = F / P_achievable + Q / BW_achievable + t0

  and each step pays the engine once more, t_step: scheduling, sampling, the
  launch of its graph, the host's work between steps.

  An engine whose host overlaps its work for the next step with the GPU's (TensorRT-LLM's
  overlap scheduler, on by default) still cannot step faster than its host: with h seconds of
  host work per request in flight (:data:`HOST_S_PER_REQUEST`, where an engine publishes it),
  a GPU that runs n requests takes max(T, n h) a step (:func:`roofkit.inference.latency.step`).
  At a few hundred requests that is nothing; a small mixture of experts on a large GPU holds
  thousands, and its host, not the GPU, sets the pace. The bound counts none of it.

  Under data-parallel attention the GPUs step together (the experts' exchange joins them), so a step
  lasts as long as its busiest GPU. Steps that carry prompts are uneven: a GPU that takes a prompt has
  many more tokens than one that only decodes. TensorRT-LLM measured the average over max tokens a
  rank at 54% with its default round-robin scheduling (:data:`ADP_BALANCE`); the estimate gives the
  busiest GPU the mean's tokens over that ratio in such steps (:func:`roofkit.inference.latency.step`).

t0 is lesson 11's per-kernel floor, fitted on measured H200 layers
(:func:`roofkit.layertime.default_calibration`); t_step is the one constant
fitted on the published serving runs shipped with roofkit
(:func:`roofkit.inference.published.fit`, stored in
``data/published/serving_calibration.json``). :func:`default` reads it.

**Attention has its own precision** (:func:`attention_precision`): its two products multiply
activations by the cache, never by weights, so a model whose GEMMs run in FP4 attends in FP8 with
an FP8 cache, in BF16 with a 16-bit one. The fused attention kernel runs at that precision's rate
(calibrated: the catalog's measured attention rate where it has one).

In calibrated mode the activations between kernels are kept in 16 bits when the
math runs in 8 (engines quantize a GEMM's input inside the kernel before it),
so an FP8 engine reads FP8 weights and an FP8 cache but 2-byte activations.

**A mixture of experts' routed experts** (:class:`Experts`, :meth:`Experts.kernels`)
run on the tokens of the whole replica, spread over ``ep`` GPUs, each expert split
over ``etp``: each GPU does 1/ep of the routed rows' work, exactly (calibrated: a
balanced router) or at least (the bound: no GPU does less than the mean). The
estimate also pays what an engine runs around the experts' GEMMs (NVIDIA/TensorRT-LLM
``cpp/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_kernels.cu``,
``CutlassMoeFCRunner::runMoe``; vllm-project/vllm
``vllm/model_executor/layers/fused_moe/fused_moe.py``), none of it in the bound:

* the routing ('moe.topk'): each token's k of E router logits picked and normalized,
  one kernel that reads the logits in FP32 (the router GEMM's output, TensorRT-LLM's
  DeepSeek-R1 blog, ``docs/source/blogs/tech_blog/blog03_Optimizing_DeepSeek_R1_Throughput_on_NVIDIA_
  Blackwell_GPUs.md``, "Mix I/O data type for the router GEMM") and writes k expert ids
  (int32) and weights (FP32); vLLM's ``csrc/moe/topk_softmax_kernels.cu`` is that kernel;
* the permutation ('moe.permute'): the (token, expert) pairs sorted by expert (TensorRT-LLM's
  prologue that builds the expert maps, ``fusedBuildExpertMapsSortFirstToken``; vLLM's
  ``moe_align_block_size``), and in TensorRT-LLM the routed rows copied into that order
  (``expandInputRowsKernel``: T k / ep rows of d read and written); vLLM's Triton kernel
  gathers the rows inside its GEMM instead;
* the grouped GEMMs ('moe.up', 'moe.gate', 'moe.down') at few rows per expert: the share of
  the matmul rate a grouped GEMM reaches with M = T k / u rows in each of the u experts the
  tokens reach (:func:`roofkit.routing.experts_touched`), from DeepGEMM's published rates
  (:func:`roofkit.parallel.experts.grouped_gemm_share`, ``data/grouped_gemm.toml``);
* with ep > 1, the un-permute ('moe.combine') writes a partial sum for every token of the
  replica (the reduce-scatter's input), not 1/ep of them.

    >>> c = default()
    >>> round(c.floor_s * 1e6, 1), round(c.step_s * 1e3, 2) > 0
    (5.5, True)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from importlib import resources

from ... import dtypes, formulas, routing
from ...catalogs import hardware, models
from .. import comms, layertime
from ...errors import InvalidValue

__all__ = ["ENGINES", "DEFAULT_ENGINE", "ADP_BALANCE", "DEFAULT_ADP_SCHEDULE", "canonical", "EngineCalibration",
           "Roofs", "roofs", "attention_precision", "activation_dtype", "default", "for_engine", "kernel_time",
           "kernel_seconds", "Experts", "PERMUTES_ROWS", "HOST_S_PER_REQUEST"]

PERMUTES_ROWS = ("tensorrt-llm",)  # engines that copy the routed rows into expert order before the GEMMs
ROUTING_ID_BYTES = 4  # an expert id (int32) and its weight (FP32), per (token, expert) pair, as the engines keep them
ROUTING_WEIGHT_BYTES = 4
ROUTER_LOGIT_DTYPE = "fp32"  # the router GEMM's output (TensorRT-LLM's blog03: BF16 in, FP32 out)
# The engine's host work per request in flight per step (scheduling, sampling's bookkeeping, the responses), where
# one is published: TensorRT-LLM's PyTorch executor, NVIDIA/TensorRT-LLM pull request 10273 (GB200, GPT-OSS-120B,
# ADP2, max_batch_size 1536 a rank, "scenarios where the host overhead is the bottleneck"): "the average per
# iteration host_step_time is 45.11 ms" with the C++ scheduler, 1,536 requests a rank: 29.4 µs a request.
HOST_S_PER_REQUEST = {"tensorrt-llm": 45.11e-3 / 1536}

# How evenly a step's tokens spread over the GPUs of data-parallel attention, avg / max tokens per rank in a step
# that carries prompts (the busiest rank sets the step): TensorRT-LLM's measurements, DeepSeek-V3 on 8 GB200s with
# ADP 8 and EP 8 (NVIDIA/TensorRT-LLM, docs/source/blogs/tech_blog/blog10_ADP_Balance_Strategy.md, "Performance
# Summary", "Avg Balance Ratio"): its default round-robin scheduling 54.11%; 'context-wait' (attention_dp_config
# enable_balance with timeout_iters only) 84.33%; 'full' (with batching_wait_iters too) 87.70%
ADP_BALANCE = {"round-robin": 0.5411, "context-wait": 0.8433, "full": 0.8770}
DEFAULT_ADP_SCHEDULE = "round-robin"  # TensorRT-LLM's default: attention_dp_config.enable_balance is off

ENGINES = comms.SERVING_ENGINES  # vllm, tensorrt-llm, sglang
DEFAULT_ENGINE = "vllm"  # roofkit's default engine: its memory reserve (memory.RESERVE) and its all-reduce rule


canonical = comms.serving_engine  # 'TensorRT-LLM v0.5' -> 'tensorrt-llm'; InvalidValue naming the choices


@dataclass(frozen=True)
class EngineCalibration:
    """The calibrated model's two constants and where they come from."""

    floor_s: float  # t0: every kernel's floor (lesson 11, measured H200 layers)
    step_s: float  # t_step: the engine's overhead per step, fitted on published runs
    source: str = ""
    runs: int = 0  # how many published runs t_step was fitted on
    engine: str = DEFAULT_ENGINE  # whose rule picks the tensor-parallel all-reduce (roofkit.comms.engine_algorithm)
    # how the engine hands prompts to the GPUs of data-parallel attention (:data:`ADP_BALANCE`)
    adp_schedule: str = DEFAULT_ADP_SCHEDULE

    def __post_init__(self):
        object.__setattr__(self, "engine", canonical(self.engine))
        if self.adp_schedule not in ADP_BALANCE:
            raise InvalidValue(f"adp_schedule must be one of {', '.join(ADP_BALANCE)}; got {self.adp_schedule!r}.")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Roofs:
    """What a step's kernels run at: the roofs, the floor, the overhead per step, and how math and memory add."""

    peak_flops: float
    bandwidth: float
    floor_s: float = 0.0
    step_s: float = 0.0
    overlap: bool = True  # max(F/P, Q/BW) (the bound); False: F/P + Q/BW
    calibrated: bool = False
    engine: str = DEFAULT_ENGINE  # calibrated: whose tensor-parallel all-reduce the step runs (the bound: fastest)
    host_s_per_request: float = 0.0  # calibrated: the engine's host work per request in flight per step
    adp_balance: float = 1.0  # calibrated: avg / max tokens per rank of data-parallel attention (ADP_BALANCE)
    attention_flops: float | None = None  # the fused attention kernel's rate (attention_precision); None: peak_flops

    def time(self, flops: float, nbytes: float) -> float:
        """One kernel's time (see the module's docstring)."""
        return kernel_time(flops, nbytes, self)


def kernel_time(flops: float, nbytes: float, r: Roofs, share: float = 1.0, peak: float | None = None) -> float:
    """t = max(F/P, Q/BW) for the bound; F/P + Q/BW + t0 calibrated. ``share``: the part of the matmul rate the
    kernel reaches (a grouped GEMM at few rows per group, :func:`kernel_seconds`); ``peak``: a rate other than
    ``r.peak_flops`` (the fused attention kernel's)."""
    math_s, memory_s = flops / ((r.peak_flops if peak is None else peak) * share), nbytes / r.bandwidth
    return (max(math_s, memory_s) if r.overlap else math_s + memory_s) + r.floor_s


def kernel_seconds(k: layertime.Kernel, r: Roofs) -> float:
    """One kernel's time as ``r`` runs it: :func:`kernel_time`; the fused attention kernel at its own rate
    (``r.attention_flops``, :func:`attention_precision`); and calibrated, a grouped GEMM (``shape`` =
    (rows per group, n, k, groups) with more than one group) at the share of the matmul rate DeepGEMM's grouped
    GEMMs reach at that many rows (:func:`roofkit.parallel.experts.grouped_gemm_share`); the bound keeps the roof."""
    share = 1.0
    if r.calibrated and k.kind == "gemm" and k.shape is not None and k.shape[3] > 1:
        from ..parallel.experts import grouped_gemm_share  # deferred: roofkit.parallel loads its planner

        share = grouped_gemm_share(max(k.shape[0], 1.0))
    return kernel_time(k.flops, k.bytes, r, share, r.attention_flops if k.kind == "attention" else None)


@dataclass(frozen=True)
class Experts:
    """Where a mixture of experts' routed experts run in one step of a replica: ``tokens`` reach them (every
    token of the replica: tensor parallelism holds them all on each GPU, data-parallel attention gathers them),
    spread over ``ep`` GPUs, each expert split over ``etp``; ``local_tokens``: the tokens this GPU routes (its
    router's rows)."""

    model: models.Model
    tokens: float
    local_tokens: float
    ep: int = 1
    etp: int = 1

    def kernels(self, act, weight_bytes, r: Roofs) -> list[layertime.Kernel]:
        """One GPU's routed-expert kernels (see the module's docstring): 1/ep of the replica's rows through
        experts of width d_ff / etp; calibrated, with the routing, the permutation and the grouped GEMMs' share."""
        m, T, e = self.model, self.tokens, self.ep
        part = replace(m, moe_d_ff=m.moe_d_ff / self.etp)
        routed = "uniform" if r.calibrated else "concentrated"
        ks = [replace(k, flops=k.flops / e, bytes=k.bytes / e)
              for k in layertime.kernels(part, 1, T, None, act, weights_dtype=weight_bytes, routing=routed)
              if k.op.startswith("moe.") and k.op != "moe.router"]
        if not r.calibrated:
            return ks
        b, k_, E, d, f = dtypes.bytes_per_element(act), m.experts_per_token, m.experts, m.d_model, part.moe_d_ff
        u = routing.experts_touched(T, E, k_)
        rows = T * k_ / u  # each touched expert's rows: the grouped GEMMs' M
        shapes = {"moe.up": (rows, f, d), "moe.gate": (rows, f, d), "moe.down": (rows, d, f)}
        out = []
        for k in ks:
            if k.name in shapes:
                k = replace(k, shape=(*shapes[k.name], u / e))
            elif k.name == "moe.combine" and e > 1:  # a partial sum for every token, for the reduce-scatter
                k = replace(k, bytes=k.bytes + T * d * b * (1 - 1 / e))
            out.append(k)
        L = self.local_tokens
        logits = dtypes.bytes_per_element(ROUTER_LOGIT_DTYPE)
        pairs = ROUTING_ID_BYTES + ROUTING_WEIGHT_BYTES
        topk = formulas.Cost(L * E * formulas.SOFTMAX_FLOPS_PER_ELEMENT, L * E * logits + L * k_ * pairs)
        sort = T * k_ * pairs + T * k_ / e * pairs  # read every pair, write the maps of the local ones
        copy = T * k_ / e * d * b * 2 if r.engine in PERMUTES_ROWS else 0.0  # the rows, read and written
        return [layertime.Kernel("moe.topk", "moe.topk", float(topk.flops), float(topk.bytes), "elementwise"),
                layertime.Kernel("moe.permute", "moe.permute", 0.0, float(sort + copy), "elementwise")] + out


def activation_dtype(dtype, calibrated: bool) -> str:
    """The activations' precision between kernels: ``dtype`` for the bound; calibrated, 16 bits at least."""
    key = dtypes.canonical(dtype)
    if calibrated and dtypes.bytes_per_element(key) < 2:
        return "bf16"
    return key


def attention_precision(hw, dtype="bf16", kv_dtype=None) -> str:
    """The precision the fused attention kernel computes in when the weights' GEMMs run in ``dtype``.

    Attention's two products multiply activations by the cache, never by weights: an 8-bit (or 4-bit)
    format of the weights does not reach them. They run in FP8 where the cache is FP8 and the math is
    8 bits or fewer, on chips with FP8 tensor cores (TensorRT-LLM's DeepSeek-V3 example, "FP8 KV Cache
    and MLA": "MLA kernel of the generation phase is accelerated by FP8 arithmetic", FlashMLA's FP8
    kernel on Hopper, trtllm-gen's on Blackwell; its FP8 context FMHA for prompts); else in 16 bits. No
    engine computes attention in 4 bits, so an NVFP4 model with an FP8 cache attends in FP8, and with a
    16-bit cache in BF16 (``dtype`` when it is 16 bits or more).
    """
    acc = hardware.get(hw)
    key = dtypes.canonical(dtype)
    if dtypes.bytes_per_element(key) >= 2:
        return key
    kv = key if kv_dtype is None else dtypes.canonical(kv_dtype)
    return "fp8" if kv == "fp8" and "fp8" in acc.peak_flops else "bf16"


def roofs(hw, dtype="bf16", calibrated=False, calibration: EngineCalibration | None = None,
          kv_dtype=None) -> Roofs:
    """The roofs of ``hw`` for math in ``dtype``: the datasheet's (bound), or its achievable figures (calibrated).

    The fused attention kernel runs at the rate of :func:`attention_precision` (``kv_dtype``: the cache's;
    default ``dtype``): the datasheet's peak (bound); calibrated, the catalog's achievable attention rate in
    that precision where it has one, else its achievable matmul rate. Calibrated needs the catalog's
    achievable matmul rate in ``dtype`` (:class:`roofkit.hardware.NoAchievableFigure` names what is
    missing); memory runs at :func:`roofkit.layertime.achievable_bandwidth`.
    """
    acc = hardware.get(hw)
    key = dtypes.canonical(dtype)
    attends = attention_precision(acc, key, kv_dtype)
    if not calibrated:
        if calibration is not None:
            raise InvalidValue("an engine calibration is used only with calibrated=True.")
        return Roofs(acc.peak(key), acc.memory_bandwidth(), attention_flops=acc.peak(attends))
    cal = calibration or default()
    attention = (acc.attention_peak(attends) if acc.has_achievable(f"attention.{attends}")
                 else acc.peak(attends, achievable=True))
    return Roofs(acc.peak(key, achievable=True), layertime.achievable_bandwidth(acc)[0], cal.floor_s, cal.step_s,
                 overlap=False, calibrated=True, engine=cal.engine,
                 host_s_per_request=HOST_S_PER_REQUEST.get(cal.engine, 0.0),
                 adp_balance=ADP_BALANCE[cal.adp_schedule], attention_flops=attention)


_DEFAULT: list[EngineCalibration] = []
CALIBRATION_FILE = "data/published/serving_calibration.json"  # t_step fitted on the published runs


def for_engine(name, calibration: EngineCalibration | None = None) -> EngineCalibration:
    """``calibration`` (default: :func:`default`) for the engine ``name`` ('vllm', 'tensorrt-llm', 'sglang'):
    the same constants, that engine's choice of tensor-parallel all-reduce."""
    return replace(calibration or default(), engine=canonical(name))


def default() -> EngineCalibration:
    """The calibration roofkit ships: t0 from lesson 11's H200 layers, t_step fitted on the published runs.

    t_step is read from ``data/published/serving_calibration.json``, which
    ``python benchmarks/published_serving.py --write`` writes from
    :func:`roofkit.inference.published.fit` (the fit predicts the runs with this
    module, so it is not called from here); a test refits it and compares.
    """
    if not _DEFAULT:
        data = json.loads(resources.files("roofkit").joinpath(CALIBRATION_FILE).read_text(encoding="utf-8"))
        _DEFAULT.append(EngineCalibration(floor_s=layertime.default_calibration().floor_s, step_s=data["step_s"],
                                          source=data["source"], runs=data["runs"]))
    return _DEFAULT[0]
