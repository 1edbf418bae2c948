"""Serving under a stream of requests: a request-level simulation of a continuously batching engine, and a static batch.

:mod:`roofkit.inference.workload` gives a server's steady state, with no queue. Here the
requests come one by one, at ``request_rate`` per second (Poisson arrivals, seeded:
vLLM's ``benchmark_serving.py`` draws its gaps the same way) or all at once
(``request_rate=inf``), each of I prompt and O output tokens, and an engine like vLLM's V1
scheduler serves them step by step:

* continuous batching: at most ``max_num_seqs`` requests run; every step each running
  request that has its prompt decodes one token, and the rest of the step's token budget,
  ``max_num_batched_tokens``, goes to prompts (chunked prefill): first the unfinished
  prompt of a running request, then waiting requests in arrival order, the last one cut
  to what is left of the budget;
* the KV cache is paged (:mod:`roofkit.inference.paged`, blocks of 16 tokens) and holds
  what the memory plan leaves for it (:func:`roofkit.inference.preemption.cache_tokens`);
  a waiting request is admitted while its chunk's blocks fit;
* when a step's blocks do not fit, the newest running request is preempted (its blocks
  freed, put back first in the queue) and later recomputed: its prompt and the tokens it
  had made, prefilled again (vLLM's "recompute").

Each step's time is roofkit's own step model, :func:`roofkit.inference.latency.step`: B
sequences decoding at a context c beside a share of prompts prefilled in the same step.
Nothing is timed twice: a step's decode attention is linear in the context (its FLOPs and
bytes both are), so :class:`StepCost` calls ``latency.step`` at the two ends of each
octave of context [2^k, 2^(k+1)) per (batch, prefill tokens, prompt) and reads the line
between them, which gives the step at the batch's mean context exactly. A step that
prefills n prompt tokens of prompts of P tokens counts n / P prompts of P tokens, the
share :func:`roofkit.inference.workload.steady_state` uses for a chunk; P is the longest
prompt in the step, and a recomputed one (prompt and output, after a preemption) is
rounded up to a multiple of ``KNOT`` tokens (an approximation: so few step times are
computed).

A request's first token comes at the end of the step that finishes its prompt (TTFT from
its arrival), every later one at the end of a step (ITL: the step's time, or the wait of a
preempted request); TPOT = (E2E - TTFT) / (O - 1). Goodput counts the requests per second
that meet both a TTFT and a TPOT target (``slo_ttft_s``, ``slo_tpot_s``; defaults: MLPerf
Inference's server scenario for Llama 2 70B, 2 s and 200 ms).

Steps whose makeup does not change (the same requests decoding, no prompt, no arrival
they could admit) are taken together, so a run costs a few Python iterations per request:
10,000 requests simulate in well under a second (``benchmarks/serving_simulation.py``).

A client may hold at most ``max_concurrency`` requests outstanding (vLLM's ``benchmark_serving.py
--max-concurrency``, a semaphore around each request): request i is sent when it is due and a slot is free,
at the (i - N + 1)-th finish. With every request due at once that is N users, each sending its next request
when its last one finishes (the closed loop of "N concurrent users" benchmarks); TTFT counts from the send.
Requests of one length stay in step with each other in such a loop, as nothing in the model jitters them.

n GPUs of r replicas each get 1/r of the requests (random routing of a Poisson stream
is a Poisson stream at 1/r of the rate): one replica is simulated, rates are for all.

:func:`static` is the other benchmark (vLLM's ``benchmark_latency``, TensorRT-LLM's static
batching): B requests together from start to end, their prompts in one prefill, then O - 1
decode steps at batch B.

The figures are bounds (every step at the datasheet's roofline) unless ``calibrated``.

    >>> s = simulate("llama-3-8b", "h100", 1000, 200, request_rate=10, requests=500)
    >>> s.ttft_s(50) < s.ttft_s(99), s.tokens_per_s < 10 * 200 * 1.05
    (True, True)
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ... import dtypes
from ...catalogs import models
from ...errors import InvalidValue
from ...units import positive, whole
from . import latency, memory, paged, preemption
from .workload import TOKEN_BUDGET, Workload, _for_engine

__all__ = ["MAX_NUM_SEQS", "MAX_NUM_BATCHED_TOKENS", "SLO_TTFT_S", "SLO_TPOT_S", "REQUESTS", "KNOT", "knot_of",
           "StepCost", "Simulation", "simulate", "Static", "static", "percentile"]

MAX_NUM_SEQS = 256  # requests running at once: vLLM's long-standing --max-num-seqs default
MAX_NUM_BATCHED_TOKENS = TOKEN_BUDGET  # tokens per step: vLLM V1's `vllm serve` budget on an 80 GB GPU (8,192)
SLO_TTFT_S = 2.0  # MLPerf Inference, Llama 2 70B server scenario: time to first token at most 2 s
SLO_TPOT_S = 0.2  # ... and time per output token at most 200 ms
REQUESTS = 1000  # vLLM benchmark_serving's --num-prompts default
KNOT = 512  # a recomputed prompt's length is rounded up to a multiple of it in the step-time cache


def knot_of(context) -> int:
    """The knot of a mean decode context (tokens): k such that 2^k <= context < 2^(k + 1) (0 below 2)."""
    return max(0, int(context).bit_length() - 1)


def percentile(values, q, weights=None) -> float:
    """The q-th percentile (0-100) of ``values``, NaN when empty: numpy's (linear) one, or with ``weights`` the
    smallest value whose cumulative weight reaches q% of the total (how the ITL of many equal steps is counted)."""
    v = np.asarray(values, dtype=float)
    if not v.size:
        return math.nan
    if weights is None:
        return float(np.percentile(v, q))
    w = np.asarray(weights, dtype=float)
    order = np.argsort(v, kind="stable")
    cum = np.cumsum(w[order])
    i = int(np.searchsorted(cum, q / 100 * cum[-1], side="left"))
    return float(v[order][min(i, v.size - 1)])


class StepCost:
    """One replica's step times from :func:`roofkit.inference.latency.step`, cached.

    ``line(batch, context, prefill, prompt)`` returns (a, b) with the step's time a + b c in seconds at a mean
    decode context c (tokens) inside the knot of ``context`` (:func:`knot_of`): ``latency.step`` at its two ends.
    ``prefill`` prompt tokens of prompts of ``prompt`` tokens ride in the step (as prefill / prompt prompts).
    """

    def __init__(self, model, hw, **options):
        self.model, self.hw, self.options = model, hw, options
        self._lines: dict[tuple, tuple[float, float]] = {}
        self.calls = 0

    def _time(self, batch, context, prefill, prompt) -> float:
        """Seconds of one step (``latency.step``)."""
        self.calls += 1
        share = prefill / prompt if prefill else 0.0
        return latency.step(self.model, self.hw, batch, context, share, prompt if prefill else None,
                            **self.options).time_s

    def line(self, batch, context=0.0, prefill=0, prompt=None) -> tuple[float, float]:
        """(a in s, b in s per token of mean context) of the step's time a + b c near ``context``."""
        knot = knot_of(context) if batch else 0
        key = (batch, knot, prefill, prompt)
        hit = self._lines.get(key)
        if hit is None:
            if batch:
                c0, c1 = 2 ** knot, 2 ** (knot + 1)
                t0, t1 = self._time(batch, c0, prefill, prompt), self._time(batch, c1, prefill, prompt)
                b = (t1 - t0) / (c1 - c0)
                hit = (t0 - b * c0, b)
            else:
                hit = (self._time(0, None, prefill, prompt), 0.0)
            self._lines[key] = hit
        return hit

    def time(self, batch, context=0.0, prefill=0, prompt=None) -> float:
        """Seconds of one step: ``batch`` sequences decoding at a mean ``context``, ``prefill`` prompt tokens."""
        a, b = self.line(batch, context, prefill, prompt)
        return a + b * context


class _Clients:
    """When each request reaches the engine: at its due time (``due``, s, sorted), and, with at most ``limit``
    requests outstanding (sent, not yet finished), not before a slot frees: request i (from 0) waits for the
    (i - limit + 1)-th finish, as vLLM's ``benchmark_serving.py --max-concurrency`` holds a semaphore of that size
    around each request. ``time(i)`` is inf while that finish has not happened."""

    def __init__(self, due, limit=None):
        self.due = np.asarray(due, dtype=float)
        self.limit = len(self.due) if limit is None else limit
        self.finishes: list[float] = []

    def __len__(self) -> int:
        return len(self.due)

    def time(self, i) -> float:
        if i >= len(self.due):
            return math.inf
        if i < self.limit:
            return float(self.due[i])
        k = i - self.limit
        return max(float(self.due[i]), self.finishes[k]) if k < len(self.finishes) else math.inf

    def finished(self, t) -> None:
        self.finishes.append(t)

    def sent(self) -> np.ndarray:
        """Every request's send time (its arrival at the engine), s."""
        return np.array([self.time(i) for i in range(len(self.due))])


def _engine(clients: _Clients, I, O, cost: StepCost, max_seqs, budget, total_blocks):
    """Run the scheduler over the requests ``clients`` sends (:class:`_Clients`); returns a dict of per-request
    arrays (first token and finish times in s, preemptions, largest ITL in s) and of the steps (time in s,
    decoders)."""
    N = len(clients)
    B16 = paged.BLOCK
    first, finish = np.full(N, np.nan), np.full(N, np.nan)
    gen = [0] * N  # tokens made, for a request not decoding now
    target = [I] * N  # tokens its (re)admission prefills: the prompt, and what it had made before a preemption
    last = [0.0] * N  # time of its last token when it was preempted
    preempted = [0] * N
    itl_max = [0.0] * N
    entry: dict[int, tuple[int, int, int]] = {}  # decoding request -> (first decode step s, tokens made at s, base)
    heap: list[tuple[int, int, int]] = []  # (last step, request, s)
    spans: list[tuple[int, int, int]] = []  # (request, first step, end step) of its decode steps
    gaps: list[float] = []  # ITLs that are not one step (a preempted request's wait)
    run: list[int] = []  # running requests in the order they were admitted
    pre: dict[int, int] = {}  # running requests prefilling -> prompt tokens computed
    waiting: deque[int] = deque()
    step_t: list[float] = []
    step_n: list[int] = []
    res = [0] * B16  # decoding requests by base mod 16 (which step each crosses into a new block)
    nd = sum_base = dec_blocks = peak = 0
    nxt, t, G = 0, 0.0, 0

    def advance(k):
        nonlocal dec_blocks, G
        full, rem = divmod(k, B16)
        dec_blocks += full * nd + sum(res[(-(G + j)) % B16] for j in range(rem))
        G += k

    def add(r, g):
        nonlocal nd, sum_base, dec_blocks
        base = I + g - G
        entry[r] = (G, g, base)
        nd += 1
        sum_base += base
        res[base % B16] += 1
        dec_blocks += -(-(base + G) // B16)
        heapq.heappush(heap, (G + O - g - 1, r, G))

    def drop(r):
        """Stop decoding request r before step G; returns the tokens it has made."""
        nonlocal nd, sum_base, dec_blocks
        s, g, base = entry.pop(r)
        nd -= 1
        sum_base -= base
        res[base % B16] -= 1
        dec_blocks -= -(-(base + G) // B16)
        spans.append((r, s, G))
        return g + G - s

    def done(r):
        finish[r] = t
        run.remove(r)
        clients.finished(t)

    def finished():
        while heap and heap[0][0] < G:
            f, r, s = heapq.heappop(heap)
            if r in entry and entry[r][0] == s:
                drop(r)
                done(r)

    def chunks_of(tokens):
        out, need = [], 0
        for r, done in pre.items():
            c = min(target[r] - done, tokens)
            tokens -= c
            out.append((r, c))
            need += -(-(done + c) // B16)
        return out, need, tokens

    while True:
        while clients.time(nxt) <= t:
            waiting.append(nxt)
            nxt += 1
        if not run and not waiting:
            if nxt == N:
                break
            t = clients.time(nxt)
            continue
        chunks, need, tokens = chunks_of(budget - nd)
        hit = False
        while dec_blocks + need > total_blocks:  # preempt the newest until this step's blocks fit
            r = run.pop()
            hit = True
            if r in entry:
                gen[r] = drop(r)
                last[r] = t
            else:
                del pre[r]
            preempted[r] += 1
            target[r] = I + gen[r]
            waiting.appendleft(r)
            chunks, need, tokens = chunks_of(budget - nd)
        if not hit:
            free = total_blocks - dec_blocks - need
            while waiting and tokens > 0 and len(run) < max_seqs:
                r = waiting[0]
                c = min(target[r], tokens)
                b = -(-c // B16)
                if b > free:
                    break
                waiting.popleft()
                run.append(r)
                pre[r] = 0
                chunks.append((r, c))
                tokens -= c
                free -= b
        peak = max(peak, len(run))
        if chunks:  # one step with prompt tokens in it
            n = sum(c for _, c in chunks)
            P = max(target[r] for r, _ in chunks)
            if P != I:  # a recomputed request's prompt: few distinct lengths in the cache
                P = -(-P // KNOT) * KNOT
            dt = cost.time(nd, sum_base / nd + G if nd else 0.0, n, P)
            t += dt
            step_t.append(dt)
            step_n.append(nd)
            advance(1)
            for r, c in chunks:
                pre[r] += c
                if pre[r] == target[r]:  # its prompt is in: it makes a token
                    del pre[r]
                    g = gen[r] = gen[r] + 1
                    if g == 1:
                        first[r] = t
                    else:
                        gap = t - last[r]
                        gaps.append(gap)
                        itl_max[r] = max(itl_max[r], gap)
                    if g >= O:
                        done(r)
                    else:
                        add(r, g)
            finished()
            continue
        # only decode: take together the steps up to the next finish, knot, full cache or useful arrival
        while heap and not (heap[0][1] in entry and entry[heap[0][1]][0] == heap[0][2]):
            heapq.heappop(heap)
        ctx = sum_base / nd + G
        k = heap[0][0] - G + 1
        k = min(k, math.ceil(2 ** (knot_of(ctx) + 1) - ctx))
        q, left = divmod(total_blocks - dec_blocks, nd)
        acc, r_ = 0, 0
        for j in range(B16):
            acc += res[(-(G + j)) % B16]
            if acc > left:
                break
            r_ += 1
        k = min(k, B16 * q + r_ + 1)
        a, b = cost.line(nd, ctx)
        if not waiting and len(run) < max_seqs and clients.time(nxt) < math.inf:
            dt = clients.time(nxt) - t
            lin = a + b * ctx - b / 2
            kk = max(1, math.ceil(2 * dt / (lin + math.sqrt(lin * lin + 2 * b * dt)) - 1e-9))

            def cum(m):
                return m * (a + b * ctx) + b * m * (m - 1) / 2

            while cum(kk) < dt:
                kk += 1
            while kk > 1 and cum(kk - 1) >= dt:
                kk -= 1
            k = min(k, kk)
        times = a + b * (ctx + np.arange(k))
        t += float(times.sum())
        step_t.extend(times.tolist())
        step_n.extend([nd] * k)
        advance(k)
        finished()
    steps = np.asarray(step_t)
    if spans:
        sp = np.asarray(spans)
        keep = sp[:, 2] > sp[:, 1]
        sp = sp[keep]
        if len(sp):
            bounds = np.empty(2 * len(sp), dtype=np.int64)
            bounds[0::2], bounds[1::2] = sp[:, 1], sp[:, 2]
            top = np.maximum.reduceat(np.append(steps, 0.0), bounds)[0::2]
            itl = np.asarray(itl_max)
            np.maximum.at(itl, sp[:, 0], top)
            itl_max = itl.tolist()
    return {"first": first, "finish": finish, "preempted": np.asarray(preempted), "itl_max": np.asarray(itl_max),
            "step_t": steps, "step_n": np.asarray(step_n, dtype=float), "gaps": np.asarray(gaps), "peak": peak,
            "sent": clients.sent()}


def _options(model, hw, gpus, tp, pp, dtype, weights_dtype, kv_dtype, calibrated, calibration, engine=None):
    key = dtypes.canonical(dtype)
    wd, kd = dtype if weights_dtype is None else weights_dtype, key if kv_dtype is None else kv_dtype
    return dict(gpus=gpus, tp=tp, pp=pp, dtype=key, weights_dtype=wd, kv_dtype=kd, calibrated=calibrated,
                calibration=_for_engine(engine, calibrated, calibration))


def _fits(m, hw, options, reserve, engine=None):
    """The memory plan of one replica (raising when the weights do not fit)."""
    o = options
    plan = memory.plan(m, hw, o["gpus"], 1, 1, o["weights_dtype"], o["kv_dtype"], reserve, tp=o["tp"], pp=o["pp"],
                       engine=engine)
    if not plan.weights_fit:
        raise InvalidValue(plan.verdict)
    return plan


@dataclass(frozen=True)
class Simulation:
    """A simulated benchmark: per-request times (one replica's requests) and the rates of all the replicas."""

    model: str
    accelerator: str
    workload: Workload
    request_rate: float  # requests per second to all the replicas (inf: all at once)
    requests: int  # simulated (one replica's)
    replicas: int
    gpus: int
    seed: int
    max_num_seqs: int
    max_num_batched_tokens: int
    cache_tokens: int  # one replica's KV cache
    slo_ttft_s: float
    slo_tpot_s: float
    calibrated: bool
    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    preemptions: np.ndarray  # per request
    itl_max_s: np.ndarray  # per request: its longest gap between two tokens
    step_s: np.ndarray  # every engine step's time
    step_decoders: np.ndarray  # requests that made a decode token in each step
    resume_gaps_s: np.ndarray  # gaps of preempted requests (from their last token to the next)
    peak_running: int
    step_model_calls: int
    notes: list[str] = field(default_factory=list)
    max_concurrency: int | None = None  # requests outstanding at the client at most (all replicas); None: no cap

    @property
    def ttft(self) -> np.ndarray:
        """Per request: time to first token, s (from its arrival: its send, under ``max_concurrency``)."""
        return self.first_token_s - self.arrival_s

    @property
    def e2e(self) -> np.ndarray:
        """Per request: end-to-end latency, s."""
        return self.finish_s - self.arrival_s

    @property
    def tpot(self) -> np.ndarray:
        """Per request: time per output token after the first, s ((E2E - TTFT) / (O - 1); empty when O = 1).

        It is also the request's mean inter-token latency."""
        O = self.workload.output_tokens
        return (self.finish_s - self.first_token_s) / (O - 1) if O > 1 else np.empty(0)

    itl_mean = tpot

    def ttft_s(self, q) -> float:
        """The q-th percentile of TTFT, s."""
        return percentile(self.ttft, q)

    def tpot_s(self, q) -> float:
        """The q-th percentile of TPOT, s (NaN when O = 1)."""
        return percentile(self.tpot, q)

    def itl_s(self, q) -> float:
        """The q-th percentile of the inter-token latency over every token after a first, s."""
        values = np.concatenate([self.step_s, self.resume_gaps_s])
        weights = np.concatenate([self.step_decoders, np.ones(len(self.resume_gaps_s))])
        return percentile(values[weights > 0], q, weights[weights > 0])

    def e2e_s(self, q) -> float:
        """The q-th percentile of the end-to-end latency, s."""
        return percentile(self.e2e, q)

    @property
    def duration_s(self) -> float:
        """From the start to the last request's last token, s."""
        return float(self.finish_s.max())

    @property
    def tokens_per_s(self) -> float:
        """Output tokens per second over all the GPUs."""
        return self.replicas * self.requests * self.workload.output_tokens / self.duration_s

    @property
    def requests_per_s(self) -> float:
        """Requests finished per second over all the GPUs."""
        return self.replicas * self.requests / self.duration_s

    @property
    def good(self) -> np.ndarray:
        """Per request: whether it met both targets (TTFT only when O = 1)."""
        ok = self.ttft <= self.slo_ttft_s
        return ok & (self.tpot <= self.slo_tpot_s) if self.workload.output_tokens > 1 else ok

    @property
    def goodput(self) -> float:
        """Requests per second (all GPUs) that met both the TTFT and the TPOT target."""
        return self.replicas * int(self.good.sum()) / self.duration_s

    def to_dict(self) -> dict:
        """The figures, in seconds and per second (the per-request arrays left out)."""
        out = {"ttft_p50_s": self.ttft_s(50), "ttft_p90_s": self.ttft_s(90), "ttft_p99_s": self.ttft_s(99),
               "tpot_p50_s": self.tpot_s(50), "tpot_p90_s": self.tpot_s(90), "tpot_p99_s": self.tpot_s(99),
               "itl_p50_s": self.itl_s(50), "itl_p90_s": self.itl_s(90), "itl_p99_s": self.itl_s(99),
               "e2e_p50_s": self.e2e_s(50), "e2e_p90_s": self.e2e_s(90), "e2e_p99_s": self.e2e_s(99),
               "ttft_mean_s": float(self.ttft.mean()),
               "tpot_mean_s": float(self.tpot.mean()) if self.tpot.size else math.nan,
               "tokens_per_s": self.tokens_per_s, "requests_per_s": self.requests_per_s, "goodput": self.goodput,
               "goodput_fraction": float(self.good.mean()), "slo_ttft_s": self.slo_ttft_s,
               "slo_tpot_s": self.slo_tpot_s, "duration_s": self.duration_s,
               "model": self.model, "accelerator": self.accelerator, "gpus": self.gpus, "replicas": self.replicas,
               "input_tokens": self.workload.input_tokens, "output_tokens": self.workload.output_tokens,
               "request_rate": self.request_rate, "max_concurrency": self.max_concurrency,
               "requests": self.requests * self.replicas,
               "requests_per_replica": self.requests, "seed": self.seed, "max_num_seqs": self.max_num_seqs,
               "max_num_batched_tokens": self.max_num_batched_tokens, "cache_tokens": self.cache_tokens,
               "peak_running": self.peak_running, "preemptions": int(self.preemptions.sum()),
               "steps": int(len(self.step_s)), "calibrated": self.calibrated,
               "figures": "calibrated" if self.calibrated else "bound", "notes": list(self.notes)}
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


def _check_engine(max_num_seqs, max_num_batched_tokens):
    S, T = whole(max_num_seqs, "max_num_seqs"), whole(max_num_batched_tokens, "max_num_batched_tokens")
    if T < S:
        raise InvalidValue(f"max_num_batched_tokens ({T:,}) must be at least max_num_seqs ({S:,}): every running "
                           "request decodes a token in each step (vLLM refuses it too).")
    return S, T


def simulate(model, hw, input_tokens, output_tokens, request_rate=math.inf, requests=REQUESTS, gpus=1, tp=None,
             pp=None, dtype="bf16", weights_dtype=None, kv_dtype=None, calibrated=False, calibration=None,
             reserve=None, max_num_seqs=MAX_NUM_SEQS, max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS,
             slo_ttft_s=SLO_TTFT_S, slo_tpot_s=SLO_TPOT_S, seed=0, engine=None, max_concurrency=None) -> Simulation:
    """``requests`` requests of I input and O output tokens arriving at ``request_rate`` per second (Poisson,
    drawn with ``seed``; ``math.inf``: all at once) on ``gpus`` x ``hw``; see the module's docstring. ``engine``:
    whose memory reserve and (calibrated) tensor-parallel all-reduce (default vLLM's).

    ``max_concurrency``: at most that many requests outstanding at the client, each sent when it is due and a
    slot is free (vLLM's ``benchmark_serving.py --max-concurrency``); with all requests due at once, that many
    users who each send their next request when their last one finishes (a closed loop, as "N concurrent users"
    benchmarks run). TTFT counts from the send. Split evenly over the replicas (rounded up)."""
    m = models.get(model)
    w = Workload(whole(input_tokens, "input tokens"), whole(output_tokens, "output tokens"))
    rate = float(positive(request_rate, "request rate")) if request_rate != math.inf else math.inf
    n_all = whole(requests, "requests")
    S, T = _check_engine(max_num_seqs, max_num_batched_tokens)
    slo_ttft, slo_tpot = float(positive(slo_ttft_s, "slo_ttft_s")), float(positive(slo_tpot_s, "slo_tpot_s"))
    seed_ = whole(seed, "seed", 0)
    options = _options(m, hw, gpus, tp, pp, dtype, weights_dtype, kv_dtype, calibrated, calibration, engine)
    plan = _fits(m, hw, options, reserve, engine)
    K = preemption.cache_tokens(m, hw, gpus, tp, pp, options["weights_dtype"], options["kv_dtype"], reserve,
                                engine=engine)
    blocks = K // paged.BLOCK
    if paged.blocks(w.length) > blocks:
        raise InvalidValue(f"one request of {w.length:,} tokens does not fit in the KV cache ({K:,} tokens): it "
                           "would be preempted forever.")
    notes = []
    if m.context and w.length > m.context:
        notes.append(f"a request of {w.length:,} tokens is beyond the {m.context:,} {m.name} was released for")
    r = plan.replicas
    n = math.ceil(n_all / r)
    users = None if max_concurrency is None else whole(max_concurrency, "max_concurrency")
    limit = None if users is None else math.ceil(users / r)
    if limit is not None and r > 1 and users % r:
        notes.append(f"{users} concurrent requests over {r} replicas: {limit} each")
    rng = np.random.default_rng(seed_)
    due = np.zeros(n) if rate == math.inf else np.cumsum(rng.exponential(r / rate, n))
    cost = StepCost(m, hw, **options)
    out = _engine(_Clients(due, limit), w.input_tokens, w.output_tokens, cost, S, T, blocks)
    return Simulation(model=m.key, accelerator=plan.accelerator, workload=w, request_rate=rate, requests=n,
                      replicas=r, gpus=whole(gpus, "gpus"), seed=seed_, max_num_seqs=S, max_num_batched_tokens=T,
                      cache_tokens=K, slo_ttft_s=slo_ttft, slo_tpot_s=slo_tpot, calibrated=bool(calibrated),
                      arrival_s=out["sent"], first_token_s=out["first"], finish_s=out["finish"],
                      preemptions=out["preempted"], itl_max_s=out["itl_max"], step_s=out["step_t"],
                      step_decoders=out["step_n"], resume_gaps_s=out["gaps"], peak_running=out["peak"],
                      step_model_calls=cost.calls, notes=notes,
                      max_concurrency=users)


@dataclass(frozen=True)
class Static:
    """A static batch: B requests per replica prefilled together, then decoded together to their last token."""

    model: str
    accelerator: str
    workload: Workload
    batch: int  # per replica
    replicas: int
    gpus: int
    ttft_s: float  # the prefill of the B prompts
    decode_s: float  # the O - 1 decode steps
    calibrated: bool
    fits: bool
    max_batch: int  # sequences of I + O tokens that fit
    notes: list[str] = field(default_factory=list)

    @property
    def tpot_s(self) -> float | None:
        """Mean decode step, s (None when O = 1)."""
        O = self.workload.output_tokens
        return self.decode_s / (O - 1) if O > 1 else None

    @property
    def e2e_s(self) -> float:
        """From the start to the last token, s."""
        return self.ttft_s + self.decode_s

    @property
    def tokens_per_s(self) -> float:
        """Output tokens per second over all the GPUs."""
        return self.replicas * self.batch * self.workload.output_tokens / self.e2e_s

    def to_dict(self) -> dict:
        return {"batch": self.batch, "e2e_s": self.e2e_s, "ttft_s": self.ttft_s, "tpot_s": self.tpot_s,
                "tokens_per_s": self.tokens_per_s, "tokens_per_s_per_user": None if self.tpot_s is None
                else 1 / self.tpot_s, "decode_s": self.decode_s, "model": self.model,
                "accelerator": self.accelerator, "gpus": self.gpus, "replicas": self.replicas,
                "input_tokens": self.workload.input_tokens, "output_tokens": self.workload.output_tokens,
                "fits": self.fits, "max_batch": self.max_batch, "calibrated": self.calibrated,
                "figures": "calibrated" if self.calibrated else "bound", "notes": list(self.notes)}


def static(model, hw, input_tokens, output_tokens, batch=None, gpus=1, tp=None, pp=None, dtype="bf16",
           weights_dtype=None, kv_dtype=None, calibrated=False, calibration=None, reserve=None,
           engine=None) -> Static:
    """B = ``batch`` requests per replica (default: as many of I + O tokens as fit) from start to end: TTFT is
    their prompts' prefill in one step (:func:`roofkit.inference.latency.prefill`), then O - 1 decode steps at
    batch B with I + 1 ... I + O - 1 tokens cached (:func:`roofkit.inference.latency.step`)."""
    m = models.get(model)
    w = Workload(whole(input_tokens, "input tokens"), whole(output_tokens, "output tokens"))
    options = _options(m, hw, gpus, tp, pp, dtype, weights_dtype, kv_dtype, calibrated, calibration, engine)
    _fits(m, hw, options, reserve, engine)
    plan = memory.plan(m, hw, gpus, w.length, 1, options["weights_dtype"], options["kv_dtype"], reserve, tp=tp,
                       pp=pp, engine=engine)
    if plan.max_batch < 1:
        raise InvalidValue(f"one request of {w.length:,} tokens does not fit in the KV cache ({plan.max_context:,} "
                           "tokens at most).")
    B = plan.max_batch if batch is None else whole(batch, "batch")
    notes = []
    fits = B <= plan.max_batch
    if not fits:
        notes.append(f"a batch of {B} does not fit in memory at {w.length:,} tokens each (at most "
                     f"{plan.max_batch}): its times are what it would take if it did")
    first = latency.prefill(m, hw, w.input_tokens, batch=B, **options)
    cost = StepCost(m, hw, **options)
    decode, c, last = 0.0, w.input_tokens + 1, w.length - 1  # steps at I + 1 ... I + O - 1 tokens cached
    while c <= last:  # each knot's steps at once: the sum of a + b c over its contexts
        a, b = cost.line(B, float(c))
        end = min(last, 2 ** (knot_of(c) + 1) - 1)
        k = end - c + 1
        decode += k * a + b * k * (c + end) / 2
        c = end + 1
    notes += [x for x in first.notes if x not in notes]
    return Static(model=m.key, accelerator=plan.accelerator, workload=w, batch=B, replicas=plan.replicas,
                  gpus=whole(gpus, "gpus"), ttft_s=first.time_s, decode_s=float(decode), calibrated=bool(calibrated),
                  fits=fits, max_batch=plan.max_batch, notes=notes)
