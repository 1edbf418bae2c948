"""A server's steady state: continuous (in-flight) batching of requests of I input and O output tokens.

A real server does not decode one fixed batch to the end. It keeps B requests
in flight: at every step each running request gets one more token, and as soon
as one finishes a new one takes its place. Its prompt is prefilled in the same
steps as the others' decode (continuous batching, Yu et al., "Orca", OSDI 2022),
in chunks under a token budget per step (chunked prefill, Agrawal et al.,
"Sarathi-Serve", OSDI 2024, arXiv:2403.02310). In the steady state:

* a request makes its first token with its prefill and the other O - 1 in decode
  steps, so each step decodes the B running requests and finishes B / (O - 1)
  of them; as many new prompts come in, B I / (O - 1) prompt tokens per step;
* the running requests hold I + 1 ... I + O - 1 tokens each, I + O/2 on average:
  each step reads B caches of that size, and the cache holds B of them;
* the weights are read once per step for all its tokens, decode and prefill alike.

So one average step (:func:`roofkit.inference.latency.step`) makes B O / (O - 1)
output tokens, and with n / (t p) replicas on n GPUs

    tokens/s = replicas · B · O / ((O - 1) · T_step)          TPOT = T_step

TPOT is what a request sees between two tokens: its step carries the others'
prefill too (prefill interrupts decode). TTFT is its own prefill: the prompt in
chunks of at most ``token_budget`` tokens, each chunk a step that also decodes the
B - 1 others (queueing for a free slot not counted).

B, unless given, is the most requests that fit: their average footprint, I + O/2
tokens rounded up to whole paged blocks (:mod:`roofkit.inference.paged`), in the
memory the plan leaves for the cache (:mod:`roofkit.inference.memory`). An engine
that reserves each request's full I + O tokens up front holds fewer.

    >>> s = steady_state("llama-3-8b", "h100", 128, 2048, dtype="fp8", kv_dtype="fp8")
    >>> s.batch, round(s.tokens_per_s)          # the bound; TensorRT-LLM published 22,714 tokens/s
    (899, 31763)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .. import dtypes, models
from ..errors import InvalidValue
from ..units import whole
from . import latency, memory, paged

__all__ = ["TOKEN_BUDGET", "Workload", "SteadyState", "steady_state"]

TOKEN_BUDGET = 8192  # prompt tokens per step at most: TensorRT-LLM's default max_num_tokens (its tuning guide)


@dataclass(frozen=True)
class Workload:
    """Requests of ``input_tokens`` I prompt tokens and ``output_tokens`` O generated tokens each."""

    input_tokens: int
    output_tokens: int

    def __post_init__(self):
        whole(self.input_tokens, "input tokens")
        whole(self.output_tokens, "output tokens")

    @property
    def decode_steps(self) -> int:
        """Steps a request spends decoding: O - 1 (its first token comes with the prefill)."""
        return self.output_tokens - 1

    @property
    def average_context(self) -> float:
        """Tokens a running request holds on average: I + O/2 (I + 1 ... I + O - 1)."""
        return self.input_tokens + self.output_tokens / 2

    @property
    def footprint(self) -> int:
        """The average request's cache in whole paged blocks, in tokens."""
        return paged.blocks(math.ceil(self.average_context)) * paged.BLOCK

    @property
    def length(self) -> int:
        """I + O: a request's tokens when it finishes."""
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class SteadyState:
    """The steady state of one workload on a layout: per replica, except ``tokens_per_s`` (all GPUs)."""

    workload: Workload
    batch: int  # requests in flight per replica
    replicas: int
    step: latency.StepTime  # the average step: B decode tokens and the prefill share
    ttft_s: float
    tpot_s: float | None  # None when a request makes one token only (O = 1)
    chunks: int  # steps a prompt's prefill takes
    plan: memory.MemoryPlan
    token_budget: int = TOKEN_BUDGET
    notes: list[str] = field(default_factory=list)

    @property
    def output_tokens_per_step(self) -> float:
        """B O / (O - 1): the decode tokens and the first tokens of the prompts prefilled (B for O = 1)."""
        return self.batch + self.step.prompts if self.workload.output_tokens > 1 else self.step.prompts

    @property
    def tokens_per_s(self) -> float:
        """Output tokens per second over all the GPUs."""
        return self.replicas * self.output_tokens_per_step / self.step.time_s

    @property
    def requests_per_s(self) -> float:
        return self.tokens_per_s / self.workload.output_tokens

    @property
    def prefill_tokens_per_step(self) -> float:
        return self.step.prefill_tokens

    def to_dict(self) -> dict:
        return {"input_tokens": self.workload.input_tokens, "output_tokens": self.workload.output_tokens,
                "average_context": self.workload.average_context, "footprint_tokens": self.workload.footprint,
                "batch": self.batch, "replicas": self.replicas, "tokens_per_s": self.tokens_per_s,
                "requests_per_s": self.requests_per_s, "ttft_s": self.ttft_s, "tpot_s": self.tpot_s,
                "step_s": self.step.time_s, "prefill_tokens_per_step": self.prefill_tokens_per_step,
                "prefill_chunks": self.chunks, "token_budget": self.token_budget, "notes": list(self.notes)}


def steady_state(model, hw, input_tokens, output_tokens, gpus=1, batch=None, dtype="bf16", weights_dtype=None,
                 kv_dtype=None, calibrated=False, calibration=None, tp=None, pp=None, reserve=memory.RESERVE,
                 token_budget=TOKEN_BUDGET, group=None) -> SteadyState:
    """The steady state of continuous batching (see the module's docstring); ``batch`` per replica."""
    m = models.get(model)
    w = Workload(whole(input_tokens, "input tokens"), whole(output_tokens, "output tokens"))
    budget = whole(token_budget, "token budget")
    key = dtypes.canonical(dtype)
    wd, kd = key if weights_dtype is None else weights_dtype, key if kv_dtype is None else kv_dtype
    plan = memory.plan(m, hw, gpus, w.footprint, 1 if batch is None else batch, wd, kd, reserve, group, tp, pp)
    notes = []
    if batch is None:
        B = max(1, plan.max_batch)
        plan = memory.plan(m, hw, gpus, w.footprint, B, wd, kd, reserve, group, tp, pp)
    else:
        B = whole(batch, "batch")
    if not plan.weights_fit:
        notes.append("the weights do not fit: the times are what one request would take if they did")
    elif not plan.fits:
        notes.append(f"a batch of {B} does not fit in memory (at most {plan.max_batch}): its times are what it "
                     "would take if it did")
    if m.context and w.length > m.context:
        notes.append(f"a request of {w.length:,} tokens is beyond the {m.context:,} {m.name} was released for")
    options = dict(gpus=gpus, dtype=key, weights_dtype=wd, kv_dtype=kd, calibrated=calibrated,
                   calibration=calibration, tp=tp, pp=pp, group=group)
    I, O = w.input_tokens, w.output_tokens
    chunks = math.ceil(I / budget)
    if O == 1:  # every step prefills: B prompts at once, each making its one token
        step = latency.step(m, hw, 0, None, B, I, **options)
        first, tpot = step.time_s, None
    else:
        step = latency.step(m, hw, B, w.average_context, B / w.decode_steps, I, **options)
        tpot = step.time_s
        if B > 1:  # the prompt's chunks ride along with the B - 1 others' decode
            first = chunks * latency.step(m, hw, B - 1, w.average_context, 1 / chunks, I, **options).time_s
        else:
            first = chunks * latency.step(m, hw, 0, None, 1 / chunks, I, **options).time_s
    notes += [n for n in step.notes if n not in notes]
    return SteadyState(workload=w, batch=B, replicas=plan.replicas, step=step, ttft_s=first, tpot_s=tpot,
                       chunks=chunks, plan=plan, token_budget=budget, notes=notes)
