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
prefill too (prefill interrupts decode). TTFT is its prompt's steps: the prompt in
chunks of at most ``token_budget`` tokens, each chunk in a step that also carries
the others' decode and the other prompts of that step. With p = B / (O - 1) prompts
a step, a step that carries this prompt carries max(p, 1 / chunks) prompts' worth
(no more than the budget's once the prompt takes several steps), so

    TTFT = chunks x T_step(B decoding, max(p, 1 / chunks) prompts)

which is the average step itself when a step carries a prompt or more: the
prompt's step is never a step that carries it alone (queueing for a free slot
not counted; :mod:`roofkit.inference.simulate` counts it).

B, unless given, is the most requests that fit: their average footprint, I + O/2
tokens rounded up to whole paged blocks (:mod:`roofkit.inference.paged`), in the
memory the plan leaves for the cache (:mod:`roofkit.inference.memory`). An engine
that reserves each request's full I + O tokens up front holds fewer.

Prefix caching (``prefix``): requests that start with the same S tokens (a system
prompt, a shared document) find that prefix's K and V already computed, in whole
blocks (vLLM's automatic prefix caching, SGLang's RadixAttention, Zheng et al.
2024, arXiv:2312.07104): their prefill computes only the rest, which still attends
to the whole prompt, and the cache keeps the prefix once for all of them.

Disaggregation (:func:`disaggregated`): prefill on some GPUs, decode on others
(Zhong et al., "DistServe", OSDI 2024, arXiv:2401.09670; Patel et al., "Splitwise",
ISCA 2024): decode steps no longer carry prompts, so TPOT is the decode step's
alone, each prompt's cache crosses a link once, and the two pools are sized to
serve the same requests per second.

    >>> s = steady_state("llama-3-8b", "h100", 128, 2048, dtype="fp8", kv_dtype="fp8")
    >>> s.batch, round(s.tokens_per_s)          # the bound; TensorRT-LLM published 22,714 tokens/s
    (899, 31763)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ... import dtypes
from ...catalogs import hardware, links, models
from ...errors import InvalidValue
from ...units import whole
from .. import comms
from . import engine as eng
from . import latency, memory, paged

__all__ = ["TOKEN_BUDGET", "Workload", "SteadyState", "steady_state", "Disaggregated", "disaggregated"]

TOKEN_BUDGET = 8192  # prompt tokens per step at most: TensorRT-LLM's default max_num_tokens (its tuning guide)


@dataclass(frozen=True)
class Workload:
    """Requests of ``input_tokens`` I prompt tokens and ``output_tokens`` O generated tokens each."""

    input_tokens: int
    output_tokens: int
    prefix: int = 0  # the first tokens of every prompt, the same for all requests (prefix caching)

    def __post_init__(self):
        whole(self.input_tokens, "input tokens")
        whole(self.output_tokens, "output tokens")
        if whole(self.prefix, "prefix", 0) >= self.input_tokens:
            raise InvalidValue(f"prefix ({self.prefix:,} tokens) must be shorter than the prompt "
                               f"({self.input_tokens:,}): a request brings at least one token of its own.")

    @property
    def cached(self) -> int:
        """Tokens of each prompt found in the cache: the shared prefix in whole blocks."""
        return self.prefix // paged.BLOCK * paged.BLOCK

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
        """The average request's own cache in whole paged blocks, in tokens (a cached prefix is kept once)."""
        return paged.blocks(math.ceil(self.average_context) - self.cached) * paged.BLOCK

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
                "prefix_tokens": self.workload.prefix, "cached_tokens": self.workload.cached,
                "average_context": self.workload.average_context, "footprint_tokens": self.workload.footprint,
                "batch": self.batch, "replicas": self.replicas, "tokens_per_s": self.tokens_per_s,
                "requests_per_s": self.requests_per_s, "ttft_s": self.ttft_s, "tpot_s": self.tpot_s,
                "step_s": self.step.time_s, "prefill_tokens_per_step": self.prefill_tokens_per_step,
                "prefill_chunks": self.chunks, "token_budget": self.token_budget, "notes": list(self.notes)}


def steady_state(model, hw, input_tokens, output_tokens, gpus=1, batch=None, dtype="bf16", weights_dtype=None,
                 kv_dtype=None, calibrated=False, calibration=None, tp=None, pp=None, reserve=None,
                 token_budget=TOKEN_BUDGET, group=None, prefix=0, engine=None, ep=None,
                 attention_dp=False) -> SteadyState:
    """The steady state of continuous batching (see the module's docstring); ``batch`` per replica.

    ``engine`` ('vllm', the default, 'tensorrt-llm', 'sglang'): whose memory reserve
    (:func:`roofkit.inference.memory.plan`) and, calibrated, whose tensor-parallel all-reduce. ``ep`` and
    ``attention_dp``: a mixture of experts' expert parallelism and data-parallel attention
    (:func:`roofkit.inference.memory.layout`); ``batch`` is then the requests of all the replica's GPUs."""
    m = models.get(model)
    w = Workload(whole(input_tokens, "input tokens"), whole(output_tokens, "output tokens"), prefix)
    budget = whole(token_budget, "token budget")
    key = dtypes.canonical(dtype)
    wd, kd = dtype if weights_dtype is None else weights_dtype, key if kv_dtype is None else kv_dtype
    calibration = _for_engine(engine, calibrated, calibration)
    plan = memory.plan(m, hw, gpus, w.footprint, 1 if batch is None else batch, wd, kd, reserve, group, tp, pp,
                       w.cached, engine=engine, ep=ep, attention_dp=attention_dp)
    notes = []
    if batch is None:
        B = max(1, plan.max_batch)
        plan = plan.with_batch(B)
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
                   calibration=calibration, tp=tp, pp=pp, group=group, cached=w.cached, ep=ep,
                   attention_dp=attention_dp)
    I, O = w.input_tokens, w.output_tokens
    chunks = math.ceil((I - w.cached) / budget)
    if O == 1:  # every step prefills: B prompts at once, each making its one token
        step = latency.step(m, hw, 0, None, B, I, **options)
        first, tpot = step.time_s, None
    else:
        step = latency.step(m, hw, B, w.average_context, B / w.decode_steps, I, **options)
        tpot = step.time_s
        # each chunk rides in a step with the others' decode and the step's other prompts: max(p, 1/chunks) prompts'
        # worth, at most the token budget's once the prompt takes several steps
        p = B / w.decode_steps
        share = max(p, 1 / chunks) if chunks == 1 else min(max(p, 1 / chunks), budget / (I - w.cached))
        own = step if share == p else latency.step(m, hw, B, w.average_context, share, I, **options)
        first = chunks * own.time_s
        ranks = plan.tp if plan.attention_dp else 1  # data-parallel attention: a budget per GPU
        if p / ranks * (I - w.cached) > budget:
            notes.append(f"each step would prefill {p / ranks * (I - w.cached):,.0f} prompt tokens"
                         f"{' per GPU' if ranks > 1 else ''}, more than the token budget ({budget:,}): an engine "
                         f"with that budget cannot keep {B} requests in flight")
    notes += [n for n in step.notes if n not in notes]
    return SteadyState(workload=w, batch=B, replicas=plan.replicas, step=step, ttft_s=first, tpot_s=tpot,
                       chunks=chunks, plan=plan, token_budget=budget, notes=notes)


@dataclass(frozen=True)
class Disaggregated:
    """Prefill and decode on separate GPUs: each pool's rate, what a request sees, and the balance of the pools."""

    workload: Workload
    prefill_gpus: int  # per prefill replica
    decode_gpus: int  # per decode replica
    prompts_per_step: int  # prompts a prefill step takes (the token budget's worth)
    decode_batch: int  # requests in flight on a decode replica
    prefill_step: latency.StepTime
    decode_step: latency.StepTime
    transfer_s: float  # one prompt's cache from the prefill GPUs to the decode GPUs

    @property
    def prefill_requests_per_s(self) -> float:
        """Requests one prefill replica starts per second."""
        return self.prompts_per_step / self.prefill_step.time_s

    @property
    def decode_requests_per_s(self) -> float:
        """Requests one decode replica finishes per second: B / ((O - 1) T_decode)."""
        return self.decode_batch / (self.workload.decode_steps * self.decode_step.time_s)

    @property
    def ttft_s(self) -> float:
        """The prefill step that carries the prompt with the step's other prompts (the token budget's worth), then
        its cache's transfer (no queueing): the accounting of :func:`steady_state`'s TTFT, a step and all it
        carries."""
        return self.prefill_step.time_s + self.transfer_s

    @property
    def tpot_s(self) -> float:
        """A decode step that carries no prompt."""
        return self.decode_step.time_s

    @property
    def decode_per_prefill(self) -> float:
        """Decode replicas per prefill replica that serve the same requests per second."""
        return self.prefill_requests_per_s / self.decode_requests_per_s

    @property
    def tokens_per_s_per_gpu(self) -> float:
        """Output tokens per second per GPU with the pools balanced."""
        gpus = self.prefill_gpus + self.decode_per_prefill * self.decode_gpus
        return self.prefill_requests_per_s * self.workload.output_tokens / gpus

    def to_dict(self) -> dict:
        return {"prefill_gpus": self.prefill_gpus, "decode_gpus": self.decode_gpus,
                "prompts_per_step": self.prompts_per_step, "decode_batch": self.decode_batch,
                "ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "transfer_s": self.transfer_s,
                "prefill_requests_per_s": self.prefill_requests_per_s,
                "decode_requests_per_s": self.decode_requests_per_s, "decode_per_prefill": self.decode_per_prefill,
                "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu}


def disaggregated(model, hw, input_tokens, output_tokens, prefill_gpus=1, decode_gpus=1, dtype="bf16",
                  weights_dtype=None, kv_dtype=None, calibrated=False, calibration=None, reserve=None,
                  token_budget=TOKEN_BUDGET, link=None, engine=None) -> Disaggregated:
    """Prefill on ``prefill_gpus`` (tensor parallel), decode on ``decode_gpus``; see the module's docstring.

    A prefill step takes as many whole prompts as the token budget holds (at least one);
    a decode replica holds as many requests as fit by their average footprint. The
    cache of one prompt, I tokens, crosses ``link`` (default: the accelerator's
    scale-out link, as between two nodes) once.
    """
    m, acc = models.get(model), hardware.get(hw)
    w = Workload(whole(input_tokens, "input tokens"), whole(output_tokens, "output tokens"))
    if w.output_tokens < 2:
        raise InvalidValue("disaggregation needs requests that decode: output tokens of at least 2.")
    key = dtypes.canonical(dtype)
    wd, kd = dtype if weights_dtype is None else weights_dtype, key if kv_dtype is None else kv_dtype
    options = dict(dtype=key, weights_dtype=wd, kv_dtype=kd, calibrated=calibrated,
                   calibration=_for_engine(engine, calibrated, calibration))
    np_, nd = whole(prefill_gpus, "prefill gpus"), whole(decode_gpus, "decode gpus")
    n = max(1, whole(token_budget, "token budget") // w.input_tokens)
    first = latency.step(m, acc, 0, None, n, w.input_tokens, gpus=np_, tp=np_, **options)
    plan = memory.plan(m, acc, nd, w.footprint, 1, wd, kd, reserve, tp=nd, engine=engine)
    if not plan.weights_fit:
        raise InvalidValue(f"the weights of {m.name} do not fit on {nd} decode GPU{'s' if nd > 1 else ''}: "
                           f"{plan.min_gpus} at least.")
    B = max(1, plan.max_batch)
    decode = latency.step(m, acc, B, w.average_context, gpus=nd, tp=nd, **options)
    chosen = links.get(link) if link is not None else links.scale_out(acc)
    cache = w.input_tokens * plan.kv_bytes_per_token
    transfer = comms.p2p(cache, chosen).time_s if chosen is not None else 0.0
    return Disaggregated(w, np_, nd, n, B, first, decode, transfer)


def _for_engine(engine, calibrated, calibration):
    """The calibration a calibrated step runs with: ``calibration`` (default: the shipped one) for ``engine``'s
    choice of all-reduce; unchanged for the bound or when no engine is named."""
    if engine is None or not calibrated:
        if engine is not None:
            eng.canonical(engine)  # a bad name is refused in the bound too
        return calibration
    return eng.for_engine(engine, calibration)
