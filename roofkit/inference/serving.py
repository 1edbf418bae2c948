"""One serving estimate: memory plan, time to first token, time per output token and throughput.

:func:`serve` is what ``roofkit serve`` prints. ``batch`` sequences are decoded
together at a context of C tokens each (every sequence's cache full to C, the
worst step of a generation); the prompt is P tokens (default C) prefilled
alone for the time to first token. ``dtype`` is the activations' precision and
the tensor cores' peak; ``weights_dtype`` and ``kv_dtype`` default to it.

    >>> s = serve("llama-3-70b", "h100", gpus=8, context=8192)
    >>> s.memory.max_batch, round(s.tpot_s * 1e3, 2), round(s.tokens_per_s)
    (176, 6.66, 150)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import dtypes, models
from ..errors import InvalidValue
from ..units import whole
from . import latency, memory

__all__ = ["Serving", "serve"]


@dataclass(frozen=True)
class Serving:
    """A memory plan and the latency and throughput it implies (``None`` where the model's latency is not modelled)."""

    memory: memory.MemoryPlan
    dtype: str
    prompt: int
    calibrated: bool
    ttft_s: float | None
    tpot_s: float | None
    critical_batch: int | None  # at this context; None: the step never turns compute-bound (or not modelled)
    decode: latency.StepTime | None = None
    prefill: latency.StepTime | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def batch(self) -> int:
        return self.memory.batch

    @property
    def tokens_per_s(self) -> float | None:
        """The batch's decode throughput: B / TPOT."""
        return None if self.tpot_s is None else self.batch / self.tpot_s

    def to_dict(self) -> dict:
        """The CLI's JSON: the contract's keys first, then everything else."""
        m, rate = self.memory, self.tokens_per_s
        return {
            "weights_bytes": m.weights_bytes, "kv_bytes_per_token": m.kv_bytes_per_token,
            "kv_bytes_per_sequence": m.kv_bytes_per_sequence, "max_batch": m.max_batch, "fits": m.fits,
            "tpot_s": self.tpot_s, "ttft_s": self.ttft_s, "tokens_per_s": rate, "reserve_bytes": m.reserve_bytes,
            "model": m.model, "accelerator": m.accelerator, "gpus": m.gpus, "tp": m.tp, "pp": m.pp,
            "dtype": self.dtype, "weights_dtype": m.weights_dtype, "kv_dtype": m.kv_dtype, "context": m.context,
            "prompt": self.prompt, "batch": m.batch, "calibrated": self.calibrated,
            "tokens_per_s_per_gpu": None if rate is None else rate / m.gpus,
            "tokens_per_s_per_user": None if self.tpot_s is None else 1 / self.tpot_s,
            "critical_batch": self.critical_batch, "weights_fit": m.weights_fit, "min_gpus": m.min_gpus,
            "max_context": m.max_context, "capacity_bytes": m.capacity_bytes, "reserve_fraction": m.reserve_fraction,
            "kv_bytes": m.kv_bytes, "kv_replication": m.kv_replication, "free_bytes": m.free_bytes,
            "verdict": m.verdict, "notes": [*m.notes, *self.notes],
        }


def serve(model, hw, gpus=1, context=4096, prompt=None, batch=1, dtype="bf16", weights_dtype=None, kv_dtype=None,
          calibrated=False, reserve=memory.RESERVE) -> Serving:
    """Memory, TTFT, TPOT and throughput of ``model`` on ``gpus`` x ``hw`` (see the module docstring)."""
    m = models.get(model)
    key = dtypes.canonical(dtype)
    wd, kd = key if weights_dtype is None else weights_dtype, key if kv_dtype is None else kv_dtype
    plan = memory.plan(m, hw, gpus, context, batch, wd, kd, reserve)
    P = plan.context if prompt is None else whole(prompt, "prompt")
    if P > plan.context:
        raise InvalidValue(f"prompt ({P:,} tokens) must not exceed context ({plan.context:,}): the context holds the "
                           "prompt and the tokens generated after it.")
    notes = []
    if not plan.fits:
        notes.append("the batch does not fit in memory: its times are what it would take if it did")
    if m.mla or m.moe:
        notes.append(f"latency not modelled for {m.name} (latent attention, a mixture of experts): "
                     "memory only")
        return Serving(plan, key, P, bool(calibrated), None, None, None, notes=notes)
    options = dict(gpus=gpus, dtype=key, weights_dtype=wd, kv_dtype=kd, calibrated=calibrated)
    step = latency.decode_step(m, hw, plan.batch, plan.context, **options)
    first = latency.prefill(m, hw, P, **options)
    critical = latency.critical_batch(m, hw, plan.context, gpus, key, wd, kd)
    notes += [n for n in dict.fromkeys(step.notes + first.notes)]
    return Serving(plan, key, P, bool(calibrated), first.time_s, step.time_s, critical, step, first, notes)
