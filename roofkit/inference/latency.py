"""Latency and throughput of serving: time to first token, time per output token, tokens per second.

A request costs two kinds of work:

* **prefill**: the P tokens of the prompt go through the model at once (a causal
  prefill), filling the KV cache. Its time is the **time to first token**, TTFT.
  With P in the hundreds or more its GEMMs are compute-bound.
* **decode**: then one token per step. A decode step at batch B runs every
  sequence's next token together: it reads every weight once (shared by the B
  tokens) and each sequence's whole KV cache (its own). Its time is the **time
  per output token**, TPOT; the batch makes B / TPOT tokens per second, each
  user 1 / TPOT.

Both come from the layer model of :mod:`roofkit.layertime`, on one GPU's share of
the model (:func:`roofkit.inference.memory.layout`: t-way tensor parallelism
splits the heads and the MLP; p pipeline stages run one after the other):

    T = L · T_layer(shard)  +  T_output layer  +  T_communication

* T_layer: the roofline sum over the layer's kernels at the datasheet roofs,
  or ``calibrated=True``: achievable roofs, a per-kernel floor and the kernels
  eager PyTorch runs (fitted on measured H200 layers). Weights are read at their
  format's bytes (scales included, :mod:`roofkit.inference.weights`), the cache at
  its own precision; the math runs at ``dtype``'s peak.
* the output layer: a [tokens, d] x [d, V / t] GEMM with BF16 weights (the last
  token of each prompt in a prefill; every token in decode). The embedding lookup
  and the final norm are left out (a few rows, one vector).
* communication: Megatron tensor parallelism all-reduces the activations twice
  per layer (:func:`roofkit.comms.all_reduce` on the scale-up link); pipeline
  stages send them on (:func:`roofkit.comms.p2p` on the scale-out link).

The batch where decode turns compute-bound (:func:`critical_batch`) is where the
step's math time reaches its memory time. The weights' GEMMs have intensity
about 2B / b_w, so B about the ridge for BF16 weights, half of it for INT8 weights
with BF16 math (the JAX scaling book's "B_crit = 240 ... 120" on a TPU v5e); the
activations each token reads and writes (norms, residuals, SwiGLU, the GEMMs'
inputs and outputs) push it some way above. Attention does not
help: each sequence reads its own cache, at an intensity near the GQA group size
H / H_kv in BF16, whatever the batch (:func:`attention_intensity`). At a long
context the cache's bytes grow with the batch as fast as the FLOPs, and the step
may never turn compute-bound (``None``).

    >>> round(tpot("llama-3-8b", "h100", batch=1, context=4096) * 1e3, 2)     # ms per token
    4.64
    >>> critical_batch("llama-3-8b", "h100")          # attention left out: the ridge (295) and more
    371
    >>> critical_batch("llama-3-8b", "h100", context=4096) is None                 # each cache read too
    True
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from .. import dtypes, formulas, hardware, layertime, models
from ..errors import InvalidValue
from ..units import whole
from . import memory, weights

__all__ = ["StepTime", "decode_step", "prefill", "ttft", "tpot", "throughput", "critical_batch",
           "attention_intensity", "step_time_bound", "shard"]


@dataclass(frozen=True)
class StepTime:
    """One forward step of the whole model (every layer, the output layer, the communication), per GPU."""

    phase: str  # "prefill" or "decode"
    batch: int
    new_tokens: int  # per sequence: the prompt (prefill), 1 (decode), k + 1 (speculative verification)
    context: int  # tokens cached before the step (0 for a prefill)
    time_s: float
    layers_s: float
    output_s: float
    communication_s: float
    tp: int
    pp: int
    layer: layertime.LayerTime  # one layer of one GPU's shard
    notes: list[str] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> float:
        """Tokens the step makes per second: B / T for decode (and speculation's accepted tokens aside)."""
        return self.batch / self.time_s

    def to_dict(self) -> dict:
        return {"phase": self.phase, "batch": self.batch, "new_tokens": self.new_tokens, "context": self.context,
                "time_s": self.time_s, "layers_s": self.layers_s, "output_s": self.output_s,
                "communication_s": self.communication_s, "tp": self.tp, "pp": self.pp,
                "layer": self.layer.to_dict(), "notes": list(self.notes)}


def shard(model, tp: int) -> models.Model:
    """One GPU's share of a model under ``tp``-way tensor parallelism: H / t heads, max(1, H_kv / t) K/V heads, d_ff / t."""
    m = models.get(model)
    t = whole(tp, "tp")
    if t == 1:
        return m
    if m.heads % t:
        raise InvalidValue(f"{t}-way tensor parallelism needs the {m.heads} heads of {m.name} to split evenly.")
    return dataclasses.replace(m, heads=m.heads // t, kv_heads=max(1, m.kv_heads // t), d_ff=m.d_ff / t)


def _dense(m: models.Model) -> None:
    if m.mla or m.moe:
        raise InvalidValue(f"{m.name}: latency is not modelled for latent attention and mixtures of experts "
                           "(its memory plan is: roofkit.inference.memory.plan).")


def _step(model, hw, batch, new_tokens, context, gpus, dtype, weights_dtype, kv_dtype, calibrated, group=None,
          calibration=None) -> StepTime:
    from .. import comms, links
    from ..roofline import time_bounds

    m, acc = models.get(model), hardware.get(hw)
    _dense(m)
    B, n = whole(batch, "batch"), whole(new_tokens, "new tokens")
    lay = memory.layout(m, acc, gpus)
    key = dtypes.canonical(dtype)
    fmt = weights.weight_format(key if weights_dtype is None else weights_dtype, group)
    kv = dtypes.canonical(key if kv_dtype is None else kv_dtype)
    part = shard(m, lay.tp)
    kv_seq = None if context is None else whole(context, "context")
    layer = layertime.predict(part, B, n, kv_seq, acc, key, calibrated=calibrated, calibration=calibration,
                              weights_dtype=None if fmt.name == key else fmt.bytes_per_weight,
                              kv_dtype=None if kv == key else kv)
    # the output layer: every new token in decode, the last one of each prompt in a prefill
    out_tokens = B * n if kv_seq is not None else B
    head = formulas.gemm(out_tokens, m.vocab / lay.tp, m.d_model, key, dtypes.bytes_per_element(
        weights.other_dtype(fmt)))
    output_s = time_bounds(head.flops, head.bytes, layer.peak_flops, layer.bandwidth)[0] + layer.floor_s
    notes = list(layer.notes)
    communication = 0.0
    activations = B * n * m.d_model * dtypes.bytes_per_element(key)
    if lay.tp > 1:
        if lay.link is None:
            notes.append(f"the catalog has no scale-up link for {acc.name}: tensor-parallel communication not counted")
        else:
            communication += m.layers * 2 * comms.all_reduce(activations, lay.tp, lay.link).time_s
    if lay.pp > 1:
        link = links.scale_out(acc)
        if link is None:
            notes.append(f"the catalog has no scale-out link for {acc.name}: pipeline sends not counted")
        else:
            communication += (lay.pp - 1) * comms.p2p(activations, link).time_s
    layers_s = m.layers * layer.time_s
    return StepTime(phase="prefill" if kv_seq is None else "decode", batch=B, new_tokens=n, context=kv_seq or 0,
                    time_s=layers_s + output_s + communication, layers_s=layers_s, output_s=output_s,
                    communication_s=communication, tp=lay.tp, pp=lay.pp, layer=layer, notes=notes)


def decode_step(model, hw, batch=1, context=4096, gpus=1, dtype="bf16", weights_dtype=None, kv_dtype=None,
                calibrated=False, new_tokens=1, group=None, calibration=None) -> StepTime:
    """One decode step: ``batch`` sequences, each with ``context`` tokens cached, make ``new_tokens`` each (1).

    ``weights_dtype`` and ``kv_dtype`` default to ``dtype`` (the activations and the peak).
    ``new_tokens`` = k + 1 is a speculative step's verification of k drafted tokens.
    """
    return _step(model, hw, batch, new_tokens, context, gpus, dtype, weights_dtype, kv_dtype, calibrated, group,
                 calibration)


def prefill(model, hw, prompt=4096, batch=1, gpus=1, dtype="bf16", weights_dtype=None, kv_dtype=None,
            calibrated=False, group=None, calibration=None) -> StepTime:
    """The prefill of ``batch`` prompts of ``prompt`` tokens (causal), up to the first token's logits."""
    return _step(model, hw, batch, prompt, None, gpus, dtype, weights_dtype, kv_dtype, calibrated, group,
                 calibration)


def ttft(model, hw, prompt=4096, **options) -> float:
    """Time to first token, in seconds: the prefill of one prompt of ``prompt`` tokens (queueing not counted)."""
    return prefill(model, hw, prompt, **options).time_s


def tpot(model, hw, batch=1, context=4096, **options) -> float:
    """Time per output token, in seconds: one decode step at ``batch`` with ``context`` tokens cached per sequence."""
    return decode_step(model, hw, batch, context, **options).time_s


def throughput(model, hw, batch=1, context=4096, gpus=1, **options) -> dict:
    """Decode throughput: tokens/s of the batch, per GPU and per user (1 / TPOT)."""
    t = decode_step(model, hw, batch, context, gpus, **options).time_s
    return {"tpot_s": t, "tokens_per_s": batch / t, "tokens_per_s_per_gpu": batch / t / gpus,
            "tokens_per_s_per_user": 1 / t}


def attention_intensity(model, context=4096, dtype="bf16", kv_dtype=None) -> float:
    """FLOPs per byte of a decode step's attention: about the GQA group size H / H_kv with a BF16 cache.

    Each cached element is read once and used by the group's H / H_kv query heads,
    about 2 FLOPs each in BF16 (2 bytes); the batch does not change it.
    """
    m = models.get(model)
    _dense(m)
    ctx = whole(context, "context")
    return m.layer_ops(1, 1, ctx, dtype, kv_bytes=kv_dtype)["attn"].intensity




def critical_batch(model, hw, context=None, gpus=1, dtype="bf16", weights_dtype=None, kv_dtype=None,
                   group=None) -> int | None:
    """The smallest batch at which a decode step's math time reaches its memory time (datasheet roofs).

    ``context=None``: the weights' side only, attention left out (the classic
    "decode turns compute-bound at B ~ ridge"). With a context, each sequence's
    cache read counts too; None when the step never turns compute-bound.
    The step's FLOPs are B f and its bytes W + B q (weights once, activations
    and cache per sequence), so B* = (W / BW) / (f / P - q / BW).
    """
    m, acc = models.get(model), hardware.get(hw)
    _dense(m)
    key = dtypes.canonical(dtype)
    fmt = weights.weight_format(key if weights_dtype is None else weights_dtype, group)
    lay = memory.layout(m, acc, gpus)
    part = shard(m, lay.tp)
    ctx = None if context is None else whole(context, "context")
    head_bytes = dtypes.bytes_per_element(weights.other_dtype(fmt))

    def totals(B):
        """(FLOPs, bytes) of the step at batch B: every layer (attention left out without a context) and the output."""
        ops = part.layer_ops(B, 1, ctx or 1, key, weight_bytes=fmt.bytes_per_weight, kv_bytes=kv_dtype)
        layer = sum(cost for name, cost in ops.items() if ctx is not None or not name.startswith("attn"))
        head = formulas.gemm(B, m.vocab / lay.tp, m.d_model, key, head_bytes)
        return part.layers * layer.flops + head.flops, part.layers * layer.bytes + head.bytes

    (F1, Q1), (_, Q2) = totals(1), totals(2)  # FLOPs are B f, bytes W + B q: two batches give f, q and W
    f, q = F1, Q2 - Q1
    W = Q1 - q
    P, BW = acc.peak(key), acc.memory_bandwidth()
    if f / P <= q / BW:
        return None
    return max(1, math.ceil((W / BW) / (f / P - q / BW)))


def step_time_bound(batch, params, weight_bytes, kv_bytes_per_sequence, peak_flops, bandwidth):
    """The JAX scaling book's envelope for a decode step (inference chapter, "Theoretical Step Time (General)"):

        T = B · KV / BW  +  max(2 B N / P, W / BW)

    attention always bandwidth-bound, the weights' GEMMs whichever is slower:
    math (2 FLOPs per parameter per token) or reading the weights. Numbers or sympy symbols.
    """
    from ..units import nonnegative, positive

    B, N, W = positive(batch, "batch"), positive(params, "params"), positive(weight_bytes, "weight_bytes")
    KV = nonnegative(kv_bytes_per_sequence, "kv_bytes_per_sequence")
    P, BW = positive(peak_flops, "peak_flops"), positive(bandwidth, "bandwidth")
    if any(type(v).__module__.startswith("sympy") for v in (B, N, W, KV, P, BW)):
        import sympy

        return B * KV / BW + sympy.Max(2 * B * N / P, W / BW)
    return B * KV / BW + max(2 * B * N / P, W / BW)
