"""An offline benchmark: n requests at once, on an engine that preempts when its cache is full and recomputes later.

Published throughput tables are rarely a steady state. vLLM's ``benchmark_throughput.py``
and ``trtllm-bench`` hand the engine n identical requests (I prompt tokens, O output
tokens) at once and time the lot, so the requests move in lock step: after s decode
steps each holds I + s tokens. How the engine admits them decides what that costs.

* An engine that reserves each request's whole I + O tokens up front (TensorRT-LLM's
  default ``GUARANTEED_NO_EVICT`` scheduler) runs at most K / (I + O) at once, K being
  its cache in tokens, and never preempts. :mod:`roofkit.inference.workload`'s steady
  state at that batch is its throughput.
* An engine that gives each request cache as it grows (vLLM's paged blocks) admits
  as many prompts as fit, N0 = min(n, K / I). They all grow together; once N0 (I + s)
  passes K it preempts the last-admitted requests, frees their blocks and later
  recomputes what they held, prompt and generated tokens, as one prefill (vLLM's
  default for a request of one sequence, "recompute"; vLLM's documentation,
  "Optimization and Tuning", Preemption).

Once the cache is full, R(s) = K / (I + s) requests still run at step s, and each one
preempted then holds I + s tokens to recompute. So a round recomputes

    K ∫ (I + s) / (I + s)^2 ds, from s0 = K / N0 - I to O,  =  K ln(N0 (I + O) / K)

tokens, and N0 - K / (I + O) requests are left for the next round (counted the same
way, as if they started afresh: an approximation; their prefill is already in the
sum). The decode work is unchanged; the recomputed tokens are extra prefill.

``cache_tokens`` sizes K as vLLM sizes its cache: the memory it may use
(``gpu_memory_utilization``, roofkit's reserve) less the weights and less the peak
of a profiling forward pass over ``profile_tokens`` tokens (vLLM runs one at
``max_num_batched_tokens`` before it allocates the cache) (:func:`activation_peak_bytes`).

    >>> round(recompute_tokens(1000, 2048, 2048, 3_000_000))      # 1,000 requests of 4,096 tokens, room for 3M
    934196
    >>> recompute_tokens(1000, 128, 1024, 3_000_000)               # 1.15M tokens at the end: all fit, nothing lost
    0.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ... import dtypes
from ...catalogs import models
from ...errors import InvalidValue
from ...units import whole
from . import kvcache, latency, memory
from .workload import TOKEN_BUDGET, SteadyState, _for_engine, steady_state

__all__ = ["PREEMPTION", "recompute_tokens", "activation_peak_bytes", "cache_tokens", "Offline", "offline"]

PREEMPTION = ("recompute",)  # how an engine preempts a request when its cache is full (vLLM's default mode)


def recompute_tokens(requests, input_tokens, output_tokens, cache_tokens) -> float:
    """Tokens recomputed when ``requests`` requests of I + O tokens run at once in a cache of K tokens."""
    n, I, O = whole(requests, "requests"), whole(input_tokens, "input tokens"), whole(output_tokens, "output tokens")
    K = whole(cache_tokens, "cache tokens")
    if K < I + O:
        raise InvalidValue(f"a cache of {K:,} tokens cannot hold one request of {I + O:,} tokens: it would be "
                           "preempted forever.")
    per_round = K // (I + O)  # requests that finish in each round
    total, left = 0.0, n
    while left > 0:
        admitted = min(left, K // I)
        peak = admitted * (I + O)
        if peak > K:  # the cache fills: K ln(peak / K) tokens recomputed, K / (I + O) requests finish
            total += K * math.log(peak / K)
            left -= per_round
        else:
            left -= admitted
    return total


def activation_peak_bytes(model, tokens, tp=1, dtype="bf16") -> float:
    """The activations one GPU holds at the peak of a forward pass over ``tokens`` tokens: inside the MLP.

    The residual stream (d), the gate-and-up projection's output (2 f / t) and the
    activation function's (f / t), in ``dtype`` (16 bits: the activations between
    kernels): tokens x (d + 3 f / t) x bytes. Each layer frees its own before the next,
    so one layer's peak is the pass's.
    """
    m = models.get(model)
    T, t = whole(tokens, "tokens", 0), whole(tp, "tp")
    return T * (m.d_model + 3 * m.mlp_width / t) * dtypes.bytes_per_element(dtype)


def cache_tokens(model, hw, gpus=1, tp=None, pp=None, weights_dtype="bf16", kv_dtype="bf16",
                 reserve=None, profile_tokens=0, engine=None) -> int:
    """The tokens one replica's cache holds: its memory less the reserve, the weights and a profiling pass's peak
    (``engine``: whose reserve, :func:`roofkit.inference.memory.plan`)."""
    plan = memory.plan(model, hw, gpus, 1, 1, weights_dtype, kv_dtype, reserve, tp=tp, pp=pp, engine=engine)
    peak = plan.gpus * activation_peak_bytes(model, profile_tokens, plan.tp)
    per_token = kvcache.bytes_per_token(model, kv_dtype) * plan.kv_replication
    return max(0, math.floor((plan.free_bytes - peak) / per_token))


@dataclass(frozen=True)
class Offline:
    """n requests at once: the steady state's rate, and the prefill that preemption adds."""

    requests: int  # per replica
    cache_tokens: int
    recompute_tokens: float
    steady: SteadyState  # the steady state at the batch that runs
    prefill_s_per_token: float  # a prefill step's time per prompt token, for what is recomputed

    @property
    def recompute_s(self) -> float:
        return self.recompute_tokens * self.prefill_s_per_token

    @property
    def time_s(self) -> float:
        """Every request's output at the steady state's rate, plus the recomputation."""
        w = self.steady.workload
        return self.requests * w.output_tokens * self.steady.replicas / self.steady.tokens_per_s + self.recompute_s

    @property
    def tokens_per_s(self) -> float:
        """Output tokens per second over all the GPUs."""
        return self.steady.replicas * self.requests * self.steady.workload.output_tokens / self.time_s

    def to_dict(self) -> dict:
        return {"requests": self.requests, "cache_tokens": self.cache_tokens,
                "recompute_tokens": self.recompute_tokens, "recompute_s": self.recompute_s, "time_s": self.time_s,
                "tokens_per_s": self.tokens_per_s, "steady_tokens_per_s": self.steady.tokens_per_s}


def offline(model, hw, requests, input_tokens, output_tokens, gpus=1, tp=None, pp=None, batch=None, dtype="bf16",
            weights_dtype=None, kv_dtype=None, calibrated=False, calibration=None, reserve=None,
            profile_tokens=0, preemption="recompute", engine=None) -> Offline:
    """``requests`` requests of I + O tokens handed at once to an engine that preempts by recomputation.

    The requests split evenly over the replicas; the decode runs at the steady state's
    rate (:func:`roofkit.inference.workload.steady_state` at ``batch``, default: as many
    as fit), and the tokens :func:`recompute_tokens` counts are prefilled again at the
    rate of a prefill step of prompts of I + O/2 tokens.
    """
    if preemption not in PREEMPTION:
        raise InvalidValue(f"preemption must be one of {', '.join(PREEMPTION)}; got {preemption!r}.")
    key = dtypes.canonical(dtype)
    wd, kd = dtype if weights_dtype is None else weights_dtype, key if kv_dtype is None else kv_dtype
    s = steady_state(model, hw, input_tokens, output_tokens, gpus=gpus, batch=batch, dtype=key, weights_dtype=wd,
                     kv_dtype=kd, calibrated=calibrated, calibration=calibration, tp=tp, pp=pp, reserve=reserve,
                     engine=engine)
    n = math.ceil(whole(requests, "requests") / s.replicas)
    K = cache_tokens(model, hw, gpus, tp, pp, wd, kd, reserve, profile_tokens, engine)
    R = recompute_tokens(n, input_tokens, output_tokens, K)
    P = math.ceil(s.workload.average_context)
    prefill = latency.step(model, hw, 0, None, TOKEN_BUDGET / P, P, gpus=gpus, dtype=key, weights_dtype=wd,
                           kv_dtype=kd, calibrated=calibrated, calibration=_for_engine(engine, calibrated, calibration),
                           tp=tp, pp=pp)
    return Offline(requests=n, cache_tokens=K, recompute_tokens=R, steady=s,
                   prefill_s_per_token=prefill.time_s / TOKEN_BUDGET)
