"""Serving a model: the KV cache, memory on N GPUs, latency and throughput, quantized weights, speculation, pages.

One concept per module:

    kvcache      bytes per token, sequence and batch; MHA, GQA, MQA, MLA    kvcache.bytes_per_token("llama-3-70b")
    weights      weights in BF16/FP8/INT8/INT4, scales included             weights.weights_bytes("llama-3-70b", "int4")
    memory       N GPUs: reserve, weights, cache; largest batch, context    memory.plan("llama-3-70b", "h100", 8, 8192)
    latency      TTFT, TPOT, tokens/s, critical batch, from layertime       latency.tpot("llama-3-70b", "h100", 64, 8192, gpus=8)
    speculative  expected tokens per step (sympy), speed-up with a draft    speculative.expected_tokens(0.8, 4)
    paged        blocks and fragmentation against contiguous reservations  paged.fragmentation([100, 900], 2048)
    serving      all of it at once: what `roofkit serve` prints             serving.serve("llama-3-70b", "h100", 8, 8192)
    plot         TPOT and tokens/s against the batch; one GPU's memory       plot.plot_batch("llama-3-8b", "h100")
    report       the lesson's tables (caches, memory wall, weight formats)   print(report.cache_table(["llama-3-8b"]))

The names below are the package's public API, imported from those modules.
"""

from __future__ import annotations

from . import kvcache, latency, memory, paged, plot, report, serving, speculative, weights
from .kvcache import bytes_per_sequence, bytes_per_token
from .latency import critical_batch, decode_step, prefill, step_time_bound, tpot, ttft
from .memory import RESERVE, MemoryPlan, layout, max_batch, max_context, min_gpus
from .memory import plan as memory_plan
from .paged import fragmentation
from .serving import Serving, serve
from .speculative import expected_tokens, speedup
from .weights import weight_format, weights_bytes

__all__ = ["kvcache", "weights", "memory", "latency", "speculative", "paged", "serving", "plot", "report",
           "bytes_per_token", "bytes_per_sequence", "weight_format", "weights_bytes", "RESERVE", "MemoryPlan",
           "memory_plan", "layout", "max_batch", "max_context", "min_gpus", "prefill", "decode_step", "ttft", "tpot",
           "critical_batch", "step_time_bound", "expected_tokens", "speedup", "fragmentation", "Serving", "serve"]
