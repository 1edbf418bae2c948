"""Serving a model: the KV cache, memory on N GPUs, latency and throughput, quantized weights, speculation, pages.

One concept per module:

    kvcache      bytes per token, sequence and batch; MHA, GQA, MQA, MLA    kvcache.bytes_per_token("llama-3-70b")
    weights      weights in BF16/FP8/INT8/INT4, scales included             weights.weights_bytes("llama-3-70b", "int4")
    memory       N GPUs: reserve, weights, cache; largest batch, context    memory.plan("llama-3-70b", "h100", 8, 8192)
    latency      a step's time (decode, prefill, both), TTFT, TPOT,        latency.tpot("llama-3-70b", "h100", 64, 8192, gpus=8)
                 critical batch, from layertime's kernels
    engine       a kernel's time: the bound, or calibrated (achievable     engine.default()
                 roofs, per-kernel floor, engine overhead per step)
    workload     continuous batching's steady state for I in, O out         workload.steady_state("llama-3-8b", "h100", 2048, 128)
    preemption   n requests at once: the cache fills, the engine preempts   preemption.recompute_tokens(1000, 2048, 2048, 3_000_000)
                 and recomputes (an offline benchmark is not a steady state)
    published    published serving runs, predictions, the fitted constant  published.compare()
    speculative  expected tokens per step (sympy), speed-up with a draft    speculative.expected_tokens(0.8, 4)
    paged        blocks and fragmentation against contiguous reservations  paged.fragmentation([100, 900], 2048)
    serving      all of it at once, and its cost: `roofkit serve`           serving.serve("llama-3-70b", "h100", 8, 8192)
    simulate     a stream of requests on a vLLM-like scheduler: TTFT,       simulate.simulate("llama-3-8b", "h100", 1000, 200, 10)
                 TPOT, ITL percentiles, goodput; a static batch
    plot         TPOT and tokens/s against the batch; one GPU's memory;      plot.plot_batch("llama-3-8b", "h100")
                 the latency-throughput frontier; published vs predicted
    report       the lesson's tables (caches, memory wall, weight formats)   print(report.cache_table(["llama-3-8b"]))

The names below are the package's public API, imported from those modules.
"""

from __future__ import annotations

from . import (engine, kvcache, latency, memory, paged, preemption, published, report, serving, simulate, speculative,
               weights, workload)
from .kvcache import bytes_per_sequence, bytes_per_token
from .latency import critical_batch, decode_step, prefill, step, step_time_bound, tpot, ttft
from .memory import RESERVE, MemoryPlan, layout, max_batch, max_context, min_gpus
from .memory import plan as memory_plan
from .paged import fragmentation
from .serving import Serving, serve, usd_per_million_tokens
from .simulate import Simulation, Static
from .speculative import expected_tokens, speedup
from .weights import weight_format, weights_bytes
from .workload import SteadyState, Workload, steady_state

__all__ = ["kvcache", "weights", "memory", "latency", "engine", "workload", "preemption", "published", "speculative", "paged",
           "serving", "simulate", "report", "step", "Workload", "SteadyState", "steady_state", "usd_per_million_tokens",
           "bytes_per_token", "bytes_per_sequence", "weight_format", "weights_bytes", "RESERVE", "MemoryPlan",
           "memory_plan", "layout", "max_batch", "max_context", "min_gpus", "prefill", "decode_step", "ttft", "tpot",
           "critical_batch", "step_time_bound", "expected_tokens", "speedup", "fragmentation", "Serving", "serve",
           "Simulation", "Static"]
