"""One serving estimate: memory plan, time to first token, time per output token, throughput and cost.

:func:`serve` is what ``roofkit serve`` prints, for one of two questions:

* a workload (``input_tokens`` I, ``output_tokens`` O): the steady state of
  continuous batching (:mod:`roofkit.inference.workload`), as many requests in
  flight as fit by their average footprint unless ``batch`` says, each step
  decoding them and prefilling new prompts; TTFT and TPOT as a request sees them;
* a context (``context`` C, ``prompt`` P): ``batch`` sequences decoded together
  with C tokens cached each (every cache full to C, the worst step of a
  generation), and a prompt of P tokens (default C) prefilled alone for the TTFT.

``tokens_per_s`` counts output tokens over all the GPUs given (``gpus`` / (tp pp)
replicas side by side); the memory figures are one replica's. ``dtype`` is the
math's precision (the activations' too, in the bound); ``weights_dtype`` and
``kv_dtype`` default to it. The default figures are bounds; ``calibrated=True``
estimates (:mod:`roofkit.inference.engine`). ``usd_per_gpu_hour`` prices them:

    cost per million output tokens = n · price per GPU-hour / (3600 · tokens/s) · 10^6

    >>> s = serve("llama-3-70b", "h100", gpus=8, context=8192)
    >>> s.memory.max_batch, round(s.tpot_s * 1e3, 2), round(s.tokens_per_s)
    (176, 5.43, 184)
    >>> w = serve("llama-3-8b", "h100", input_tokens=2048, output_tokens=128, dtype="fp8", usd_per_gpu_hour=2)
    >>> w.batch, round(w.tokens_per_s), round(w.usd_per_million_tokens, 3)
    (490, 5568, 0.1)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ... import dtypes
from ...catalogs import models
from ...errors import InvalidValue
from ...units import positive, whole
from . import latency, memory, workload

__all__ = ["Serving", "serve", "usd_per_million_tokens"]


def usd_per_million_tokens(tokens_per_s, gpus, usd_per_gpu_hour) -> float:
    """Dollars per million output tokens: what the GPUs cost per hour over the tokens they make in an hour."""
    rate, n = positive(tokens_per_s, "tokens_per_s"), whole(gpus, "gpus")
    return n * positive(usd_per_gpu_hour, "usd_per_gpu_hour") / (3600 * rate) * 1e6


@dataclass(frozen=True)
class Serving:
    """A memory plan and the latency, throughput and cost it implies (``None`` where latency is not modelled)."""

    memory: memory.MemoryPlan
    dtype: str
    prompt: int
    calibrated: bool
    ttft_s: float | None
    tpot_s: float | None
    critical_batch: int | None  # at the decode context; None: never compute-bound (or not modelled)
    decode: latency.StepTime | None = None
    prefill: latency.StepTime | None = None
    notes: list[str] = field(default_factory=list)
    gpus: int = 1  # all the GPUs given
    steady: workload.SteadyState | None = None  # the workload's steady state (None in context mode)
    usd_per_gpu_hour: float | None = None

    @property
    def batch(self) -> int:
        """Requests in flight (per replica)."""
        return self.steady.batch if self.steady is not None else self.memory.batch

    @property
    def replicas(self) -> int:
        return self.memory.replicas

    @property
    def tokens_per_s(self) -> float | None:
        """Output tokens per second over all the GPUs."""
        if self.steady is not None:
            return self.steady.tokens_per_s
        return None if self.tpot_s is None else self.replicas * self.batch / self.tpot_s

    @property
    def usd_per_million_tokens(self) -> float | None:
        if self.usd_per_gpu_hour is None or self.tokens_per_s is None:
            return None
        return usd_per_million_tokens(self.tokens_per_s, self.gpus, self.usd_per_gpu_hour)

    def to_dict(self) -> dict:
        """The CLI's JSON: the contract's keys first, then everything else."""
        m, rate = self.memory, self.tokens_per_s
        w = self.steady
        data = {
            "weights_bytes": m.weights_bytes, "kv_bytes_per_token": m.kv_bytes_per_token,
            "kv_bytes_per_sequence": m.kv_bytes_per_sequence, "max_batch": m.max_batch, "fits": m.fits,
            "tpot_s": self.tpot_s, "ttft_s": self.ttft_s, "tokens_per_s": rate, "reserve_bytes": m.reserve_bytes,
            "batch": self.batch, "capacity_bytes": m.capacity_bytes,
            "usd_per_million_tokens": self.usd_per_million_tokens,
            "model": m.model, "accelerator": m.accelerator, "gpus": self.gpus, "tp": m.tp, "pp": m.pp, "ep": m.ep,
            "attention_dp": m.attention_dp,
            "replicas": m.replicas, "gpus_per_replica": m.gpus,
            "dtype": self.dtype, "weights_dtype": m.weights_dtype, "kv_dtype": m.kv_dtype, "context": m.context,
            "prompt": self.prompt, "calibrated": self.calibrated,
            "input_tokens": None if w is None else w.workload.input_tokens,
            "output_tokens": None if w is None else w.workload.output_tokens,
            "tokens_per_s_per_gpu": None if rate is None else rate / self.gpus,
            "tokens_per_s_per_user": None if self.tpot_s is None else 1 / self.tpot_s,
            "requests_per_s": None if w is None else w.requests_per_s,
            "prefill_tokens_per_step": None if w is None else w.prefill_tokens_per_step,
            "critical_batch": self.critical_batch, "weights_fit": m.weights_fit, "min_gpus": m.min_gpus,
            "max_context": m.max_context, "reserve_fraction": m.reserve_fraction,
            "kv_bytes": m.kv_bytes, "kv_replication": m.kv_replication, "free_bytes": m.free_bytes,
            "usd_per_gpu_hour": self.usd_per_gpu_hour,
            "verdict": m.verdict, "notes": [*m.notes, *self.notes],
        }
        return data


def serve(model, hw, gpus=1, context=None, prompt=None, batch=None, dtype="bf16", weights_dtype=None, kv_dtype=None,
          calibrated=False, reserve=None, input_tokens=None, output_tokens=None, tp=None, pp=None,
          usd_per_gpu_hour=None, calibration=None, engine=None, ep=None, attention_dp=False) -> Serving:
    """Memory, TTFT, TPOT, throughput and cost of ``model`` on ``gpus`` x ``hw`` (see the module docstring).

    Give a workload (``input_tokens`` and ``output_tokens``) or a ``context`` (4,096 when neither is given).
    ``engine`` ('vllm', the default, 'tensorrt-llm', 'sglang'): whose memory reserve and, calibrated, whose
    tensor-parallel all-reduce. ``ep``, ``attention_dp``: a mixture of experts' experts spread over ``ep`` of a
    replica's tp GPUs, and attention data-parallel over them (:func:`roofkit.inference.memory.layout`).
    """
    m = models.get(model)
    key = dtypes.canonical(dtype)
    wd, kd = dtype if weights_dtype is None else weights_dtype, key if kv_dtype is None else kv_dtype
    price = None if usd_per_gpu_hour is None else positive(usd_per_gpu_hour, "usd_per_gpu_hour")
    n = whole(gpus, "gpus")
    if (input_tokens is None) != (output_tokens is None):
        raise InvalidValue("a workload needs both input_tokens and output_tokens (--input-tokens I --output-tokens O).")
    if input_tokens is not None:
        if context is not None or prompt is not None:
            raise InvalidValue("give a workload (input and output tokens) or a context (and a prompt), not both.")
        return _workload(m, hw, n, input_tokens, output_tokens, batch, key, wd, kd, calibrated, reserve, tp, pp,
                         price, calibration, engine, ep, attention_dp)
    C = 4096 if context is None else context
    plan = memory.plan(m, hw, n, C, 1 if batch is None else batch, wd, kd, reserve, tp=tp, pp=pp, engine=engine,
                       ep=ep, attention_dp=attention_dp)
    P = plan.context if prompt is None else whole(prompt, "prompt")
    if P > plan.context:
        raise InvalidValue(f"prompt ({P:,} tokens) must not exceed context ({plan.context:,}): the context holds the "
                           "prompt and the tokens generated after it.")
    notes = []
    if not plan.fits:
        notes.append("the batch does not fit in memory: its times are what it would take if it did")
    notes += _latent_notes(m, plan.tp, plan.attention_dp)
    options = dict(gpus=n, dtype=key, weights_dtype=wd, kv_dtype=kd, calibrated=calibrated, tp=tp, pp=pp,
                   calibration=workload._for_engine(engine, calibrated, calibration), ep=ep, attention_dp=attention_dp)
    step = latency.decode_step(m, hw, plan.batch, plan.context, **options)
    first = latency.prefill(m, hw, P, **options)
    critical = _critical(m, hw, plan.context, plan.gpus, key, wd, kd, notes)
    notes += [x for x in dict.fromkeys(step.notes + first.notes)]
    return Serving(plan, key, P, bool(calibrated), first.time_s, step.time_s, critical, step, first, notes, gpus=n,
                   usd_per_gpu_hour=price)


def _workload(m, hw, n, I, O, batch, key, wd, kd, calibrated, reserve, tp, pp, price, calibration,
              engine=None, ep=None, attention_dp=False) -> Serving:
    w = workload.Workload(whole(I, "input tokens"), whole(O, "output tokens"))
    s = workload.steady_state(m, hw, w.input_tokens, w.output_tokens, n, batch, key, wd, kd, calibrated, calibration,
                              tp, pp, reserve, engine=engine, ep=ep, attention_dp=attention_dp)
    notes = list(s.notes) + _latent_notes(m, s.plan.tp, s.plan.attention_dp)
    critical = _critical(m, hw, round(w.average_context), s.plan.gpus, key, wd, kd, notes)
    return Serving(s.plan, key, w.input_tokens, bool(calibrated), s.ttft_s, s.tpot_s, critical, s.step, None,
                   notes, gpus=n, steady=s, usd_per_gpu_hour=price)


def _latent_notes(m, tp, attention_dp=False) -> list[str]:
    """What latent attention does to the times under tensor parallelism (DeepSeek-V2, V3)."""
    if not m.mla or tp == 1 or attention_dp:
        return []
    return [f"latent attention over {tp} tensor-parallel GPUs: each holds {m.heads // tp} heads but every "
            "sequence's whole latent cache, and reads all of it each decode step (data-parallel attention, "
            "attention_dp / --attention-dp, gives each GPU its own sequences instead)"]


def _critical(m, hw, context, gpus, key, wd, kd, notes) -> int | None:
    """The critical batch, or None with a note for a mixture of experts (its weight reads grow with the batch)."""
    if m.moe:
        notes.append(f"{m.name} is a mixture of experts: the bound routes every token to the same "
                     f"{m.experts_per_token} expert{'s' if m.experts_per_token > 1 else ''} (the fewest weights a "
                     "step reads), the calibrated estimate spreads them evenly over all of them")
        return None
    return latency.critical_batch(m, hw, context, gpus, key, wd, kd)
