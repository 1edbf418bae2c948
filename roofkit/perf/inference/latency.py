"""Latency and throughput of serving: time to first token, time per output token, tokens per second.

A request costs two kinds of work:

* **prefill**: the prompt's tokens go through the model at once (a causal
  prefill), filling the KV cache. Its time is the **time to first token**, TTFT.
  With a prompt in the hundreds of tokens or more its GEMMs are compute-bound.
* **decode**: then one token per step. A decode step at batch B runs every
  sequence's next token together: it reads every weight once (shared by the B
  tokens) and each sequence's whole KV cache (its own). Its time is the **time
  per output token**, TPOT; the batch makes B / TPOT tokens per second, each
  user 1 / TPOT.

A server that batches continuously mixes the two in one step (:func:`step`): B
sequences decode one token each while a share of new prompts is prefilled, all
through the same weight GEMMs (the weights are read once for every token of the
step), with attention kept apart (each decoding sequence reads its cache; each
prompt attends causally to itself). :mod:`roofkit.inference.workload` builds the
steady state of such a server from it.

Every step is a list of kernels (:func:`roofkit.layertime.kernels`, one per op)
on one GPU's share of the model (:func:`shard`; t-way tensor parallelism splits
the heads and the MLP), each timed by :mod:`roofkit.inference.engine`: the bound
max(F/P, Q/BW) at the datasheet's roofs by default, or ``calibrated=True``
(achievable roofs, a per-kernel floor, an engine overhead per step):

    T = L · T_layer  +  T_output layer  +  T_communication  (+ t_step, calibrated)

* the output layer: a [tokens, d] x [d, V / t] GEMM with BF16 weights (the last
  token of each prompt in a prefill; every new token in decode). The embedding
  lookup and the final norm are left out (a few rows, one vector).
* communication: Megatron tensor parallelism all-reduces the activations twice
  per layer on the scale-up link (:func:`roofkit.comms.tensor_parallel_all_reduce`):
  the bound takes the fastest algorithm an engine has, which at decode sizes is a
  one-shot kernel of one round whatever t (vLLM's custom all-reduce,
  vllm-project/vllm pull request 2192; TensorRT-LLM's ONESHOT), not NCCL's ring of
  2 (t - 1) steps; calibrated, the algorithm the engine picks at that size, at
  measured figures. Pipeline
  stages send them on (:func:`roofkit.comms.p2p`). With p stages the batch goes
  through in p micro-batches, so a round (every sequence one token further) is
  L layers at a micro-batch of B / p, and a single request still crosses all p stages.

The batch where decode turns compute-bound (:func:`critical_batch`) is where the
step's math time reaches its memory time. The weights' GEMMs have intensity
about 2B / b_w, so B about the ridge for BF16 weights, half of it for INT8 weights
with BF16 math (the JAX scaling book's "B_crit = 240 ... 120" on a TPU v5e,
derived by :func:`critical_batch_symbolic`); the activations each token reads and
writes push it some way above. Attention does not help: each sequence reads its
own cache, at an intensity near the GQA group size H / H_kv in BF16, whatever the
batch (:func:`attention_intensity`). At a long context the cache's bytes grow with
the batch as fast as the FLOPs, and the step may never turn compute-bound (``None``).

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

from ... import dtypes, formulas
from ...catalogs import hardware, links, models
from .. import comms, layertime
from ...errors import InvalidValue
from ...units import nonnegative, positive, whole
from . import engine, memory, weights

__all__ = ["StepTime", "step", "decode_step", "prefill", "ttft", "tpot", "throughput", "critical_batch",
           "critical_batch_symbolic", "attention_intensity", "step_time_bound", "shard", "fewest_gpus", "DecodeCost",
           "decode_cost"]


@dataclass(frozen=True)
class StepTime:
    """One forward step of the whole model (every layer, the output layer, the communication), per replica.

    ``batch`` sequences decode ``new_tokens`` each against ``context`` cached tokens; ``prompts`` prompts of
    ``prompt`` tokens are prefilled in the same step (a fraction: a chunk of one prompt, or the average share
    of a step in a steady state).
    """

    phase: str  # "prefill", "decode" or "mixed"
    batch: int
    new_tokens: int  # per decoding sequence: 1, or k + 1 for a speculative verification
    context: float  # tokens cached per decoding sequence before the step (0 without decode)
    time_s: float
    layers_s: float
    output_s: float
    communication_s: float
    tp: int
    pp: int
    layer: layertime.LayerTime  # one layer of one GPU's shard (at a micro-batch when pp > 1)
    notes: list[str] = field(default_factory=list)
    prompts: float = 0.0
    prompt: int = 0
    cached: int = 0  # tokens of each prompt found in the cache (prefix caching), not computed
    engine_s: float = 0.0  # calibrated: the engine's overhead per step
    calibrated: bool = False
    ep: int = 1  # the GPUs a mixture's routed experts spread over
    attention_dp: bool = False  # attention data-parallel: ``layer`` is the busiest GPU's, with its own sequences
    host_s: float = 0.0  # calibrated: the engine's host work for the busiest GPU's requests; the step lasts as long

    @property
    def tokens_per_s(self) -> float:
        """Tokens the step makes per second: one per decoding sequence (B / T), or one per prompt prefilled."""
        return (self.batch if self.batch else self.prompts) / self.time_s

    @property
    def prefill_tokens(self) -> float:
        """Prompt tokens computed in the step (the cached prefixes not counted)."""
        return self.prompts * (self.prompt - self.cached)

    def to_dict(self) -> dict:
        return {"phase": self.phase, "batch": self.batch, "new_tokens": self.new_tokens, "context": self.context,
                "prompts": self.prompts, "prompt": self.prompt, "time_s": self.time_s, "layers_s": self.layers_s,
                "output_s": self.output_s, "communication_s": self.communication_s, "engine_s": self.engine_s,
                "host_s": self.host_s,
                "tp": self.tp, "pp": self.pp, "ep": self.ep, "attention_dp": self.attention_dp,
                "calibrated": self.calibrated, "layer": self.layer.to_dict(),
                "notes": list(self.notes)}


def shard(model, tp: int) -> models.Model:
    """One GPU's share of a model under ``tp``-way tensor parallelism: H / t heads, max(1, H_kv / t) K/V heads, d_ff / t."""
    m = models.get(model)
    t = whole(tp, "tp")
    if t == 1:
        return m
    if m.heads % t:
        raise InvalidValue(f"{t}-way tensor parallelism needs the {m.heads} heads of {m.name} to split evenly.")
    return dataclasses.replace(m, heads=m.heads // t, kv_heads=max(1, m.kv_heads // t), d_ff=m.d_ff / t,
                               moe_d_ff=None if m.moe_d_ff is None else m.moe_d_ff / t)


def _supported(m: models.Model) -> None:
    """Every architecture of the catalog is timed, latent attention (DeepSeek-V2, V3) included: its decode
    absorbs W^UK and W^UV and reads the latent cache once per sequence, its prefill rebuilds K and V
    (:func:`roofkit.formulas.latent_attention_ops`). Nothing is refused here any more."""


def _dense(m: models.Model) -> None:
    _supported(m)
    if m.moe:
        raise InvalidValue(f"{m.name}: a mixture of experts reads more experts' weights as the batch grows, so its "
                           "decode cost is not a line in the batch; time its steps (roofkit.inference.latency.step).")


def _prefill_attention(part, prompts, prompt, cached, act, w_bytes, kv) -> list[layertime.Kernel]:
    """The kernels of the op 'attn' for the prompts of a step: the uncached end of each prompt attends causally
    to the whole prompt. Latent attention first rebuilds K and V of the whole prompt from its latent
    ('attn.kv_up', the cached prefix read from the cache), as vLLM's MLA prefill does
    (vllm/v1/attention/backends/mla/common.py, "compute friendly approach"); other models run the fused kernel alone."""
    ops = part.layer_ops(prompts, prompt - cached, prompt if cached else None, act, causal=True, weight_bytes=w_bytes,
                         kv_bytes=kv if cached else None)
    return [layertime.Kernel("attn.prefill" if name == "attn" else f"{name}.prefill", "attn", float(cost.flops),
                             float(cost.bytes), "attention" if name == "attn" else "gemm")
            for name, cost in ops.items() if name == "attn" or name.startswith("attn.")]


def _layer(part, batch, new_tokens, context, prompts, prompt, cached, act, w_bytes, kv, r: engine.Roofs,
           dense=False, experts: engine.Experts | None = None, families=()):
    """One layer's kernels for the mixed step, timed, as a LayerTime (``dense``: a mixture's dense layer).

    Every token of the step goes through the same weight GEMMs, norms and MLP once; the op 'attn' is apart
    for each phase: the decoding sequences read their caches, the prompts attend to themselves. With latent
    attention (DeepSeek-V2, arXiv:2405.04434, section 2.1.2) the two phases run it differently, and 'attn'
    holds the GEMMs that differ with it: a decode step absorbs W^UK into the query and W^UV into the
    output and reads each sequence's latent cache once, for all its heads (FlashMLA's decoding kernel,
    github.com/deepseek-ai/FlashMLA); a prefill rebuilds K and V from the latent (:func:`_prefill_attention`).
    Under t-way tensor parallelism each GPU holds H / t heads but the whole latent (:func:`shard` leaves
    d_c alone): every GPU reads every sequence's cache, the known cost of MLA with tensor parallelism;
    data-parallel attention gives each GPU its own sequences instead (:func:`step`, ``attention_dp``).

    A mixture of experts' tokens reach the experts a balanced router would send them to when
    calibrated (``uniform``), and the fewest experts in the bound (``concentrated``); ``experts``
    (:class:`roofkit.inference.engine.Experts`) puts its routed experts' kernels where the layout runs them.
    ``families``: (kernel names, weight bytes, activations, roofs) of the GEMMs whose weights a checkpoint
    stores in a format of their own (:func:`_families`).
    """
    tokens = batch * new_tokens + prompts * (prompt - cached)
    routing = "uniform" if r.calibrated else "concentrated"
    cache = kv or act  # the cache's precision (kv is None when it is the activations')

    def build(wb, a):
        kvv = None if cache == a else cache
        ks = [k for k in layertime.kernels(part, 1, tokens, None, a, weights_dtype=wb, kv_dtype=kvv, dense=dense,
                                           routing=routing)
              if k.op != "attn"]
        if experts is not None and not dense:  # the routed experts where the layout runs them, for all the tokens
            ks = ([k for k in ks if not k.op.startswith("moe.") or k.op == "moe.router"]
                  + experts.kernels(act, w_bytes, r))
        if batch:
            ks += [k for k in layertime.kernels(part, batch, new_tokens, context, a, weights_dtype=wb, kv_dtype=kvv)
                   if k.op == "attn"]
        if prompts:
            ks += _prefill_attention(part, prompts, prompt, cached, a, wb, kvv)
        return ks

    ks = build(w_bytes, act)
    roofs = [r] * len(ks)
    for names, wb, a, rf in families:  # the same kernels, in the family's format and at its rate
        for i, k in enumerate(build(wb, a)):
            if k.name.removesuffix(".prefill") in names:
                ks[i], roofs[i] = k, rf
    ops: dict[str, list] = {}
    for k, rk in zip(ks, roofs):
        ops.setdefault(k.op, []).append((k, rk))
    out = []
    for name, pairs in ops.items():
        group = [k for k, _ in pairs]
        math_s = sum(k.flops / rk.peak_flops for k, rk in pairs)
        memory_s = sum(k.bytes / r.bandwidth for k in group)
        time_s = sum(engine.kernel_seconds(k, rk) for k, rk in pairs)
        floors = r.floor_s * len(group)
        bound = "floor" if floors > time_s - floors else ("compute" if math_s > memory_s else "memory")
        out.append(layertime.OpTime(name, sum(k.flops for k in group), sum(k.bytes for k in group), time_s, bound,
                                    len(group)))
    lt = layertime.LayerTime(model=part.key, batch=int(round(batch)), seq=int(new_tokens if batch else prompt),
                             kv_seq=None if not batch else float(context), dtype=act, accelerator="",
                             calibrated=r.calibrated, time_s=sum(op.time_s for op in out), ops=out,
                             peak_flops=r.peak_flops, bandwidth=r.bandwidth, floor_s=r.floor_s, kernels=len(ks),
                             roofs="achievable" if r.calibrated else "datasheet")
    return lt


def step(model, hw, batch=0, context=None, prompts=0.0, prompt=None, gpus=1, dtype="bf16", weights_dtype=None,
         kv_dtype=None, calibrated=False, new_tokens=1, group=None, calibration=None, tp=None, pp=None,
         cached=0, ep=None, attention_dp=False) -> StepTime:
    """One step of a replica: ``batch`` sequences decode ``new_tokens`` each with ``context`` tokens cached,
    and ``prompts`` prompts of ``prompt`` tokens are prefilled (either may be absent). ``cached``: the first
    tokens of each prompt already in the cache (a shared prefix, prefix caching): only the rest is computed,
    attending to the whole prompt.

    ``dtype`` is the math's precision (and the activations', 16 bits at least when
    calibrated); ``weights_dtype`` and ``kv_dtype`` default to it. ``gpus``, ``tp``,
    ``pp``, ``ep``, ``attention_dp``: the layout (:func:`roofkit.inference.memory.layout`), one replica's step.

    With ``attention_dp`` each of the t GPUs runs attention, the dense MLPs, the shared experts and the
    output layer on its own sequences, with whole weights, and no all-reduce; before each expert layer the
    replica's tokens are gathered onto every GPU and the experts' outputs reduce-scattered back
    (TensorRT-LLM's default for attention data parallelism, ``tensorrt_llm/_torch/modules/fused_moe/
    communication/allgather_reducescatter.py``: "AllGather + ReduceScatter ... post-quant dispatch
    (quantize -> allgather)", the tokens in the experts' format, :func:`_expert_exchange`). The step
    lasts as long as its busiest GPU (TensorRT-LLM, ``docs/source/blogs/tech_blog/blog10_ADP_Balance_
    Strategy.md``: "the iteration time is dominated by the slowest rank"): the bound spreads the
    sequences and the prompts evenly, a scheduler's best. The estimate gives the busiest GPU the
    mean's tokens over the balance TensorRT-LLM measured in steps that carry prompts (:func:`_balance`),
    and at least a whole prompt in a step that carries one, as round-robin scheduling hands them
    out (:func:`_busiest_prompts`); its host serves its requests, not its tokens.
    """
    m, acc = models.get(model), hardware.get(hw)
    _supported(m)
    B = whole(batch, "batch", 0)
    n = whole(new_tokens, "new tokens")
    share = float(nonnegative(prompts, "prompts"))
    P = 0 if not share else whole(prompt, "prompt")
    S = whole(cached, "cached tokens", 0)
    if share and S >= P:
        raise InvalidValue(f"cached tokens ({S:,}) must be fewer than the prompt's ({P:,}): its last token at least "
                           "is computed, to make the first new one.")
    if not B and not share:
        raise InvalidValue("a step needs a batch to decode or a prompt to prefill; got neither.")
    c = 0.0 if not B else float(nonnegative(context, "context"))
    if B and not c:
        raise InvalidValue("a decode step needs its context: the tokens each sequence has cached (at least 1).")
    lay = memory.layout(m, acc, gpus, tp, pp, ep, attention_dp)
    key = dtypes.canonical(dtype)
    kv = dtypes.canonical(key if kv_dtype is None else kv_dtype)
    r = engine.roofs(acc, key, calibrated, calibration, kv_dtype=kv)
    act = engine.activation_dtype(key, calibrated)
    fmt = weights.weight_format(dtype if weights_dtype is None else weights_dtype, group)
    ranks = lay.tp if lay.attention_dp else 1  # data-parallel attention: each GPU its own sequences
    part = shard(m, 1 if lay.attention_dp else lay.tp)
    # pipeline: the batch goes through in micro-batches, one per stage at most (a lone request is one)
    micro = lay.pp if lay.pp > 1 and B + share >= lay.pp else 1
    # the busiest GPU's sequences and prompts (each GPU its own under data-parallel attention)
    balance = _balance(share, ranks, r)
    handed = _busiest_prompts(share, ranks, r.calibrated)  # its requests: prompts handed out whole
    mine = max(handed, share / ranks / balance)  # its prompts' tokens, as uneven as measured
    own = B / ranks / balance
    tokens = (B * n + share * (P - S)) / micro  # the replica's tokens: what its experts see
    experts = None if not m.moe else engine.Experts(m, tokens, (own * n + mine * (P - S)) / micro, lay.ep,
                                                    lay.etp)
    w_bytes = None if fmt.bytes_per_weight == dtypes.bytes_per_element(act) else fmt.bytes_per_weight
    args = (part, own / micro, n, c, mine / micro, P, S if share else 0, act, w_bytes,
            None if kv == act else kv, r)
    families = _families(fmt, acc, key, kv, calibrated, calibration)
    layer = dataclasses.replace(_layer(*args, experts=experts, families=families), accelerator=acc.key)
    dense = m.layers - m.moe_layers if m.moe else 0  # a mixture's layers without experts (Maverick's: every other)
    dense_s = _layer(*args, dense=True, families=families).time_s if dense else 0.0
    rows = (own * n + mine) / micro  # the output layer: each decoding sequence's new tokens, each prompt's last
    head = formulas.gemm(rows, m.vocab / (lay.tp // ranks), m.d_model, act,  # data-parallel: the whole vocabulary
                         dtypes.bytes_per_element(weights.other_dtype(fmt)))
    output_s = micro * r.time(head.flops, head.bytes)
    notes = []
    communication = 0.0
    activations = tokens * m.d_model * dtypes.bytes_per_element(act)
    if lay.attention_dp and lay.tp > 1:  # no all-reduce; each expert layer gathers and scatters the tokens
        if lay.link is None:
            notes.append(f"the catalog has no scale-up link for {acc.name}: the experts' token exchange not counted")
        else:
            communication += m.moe_layers * _expert_exchange(m, lay, tokens, fmt, act, r)
    elif lay.tp > 1:  # two all-reduces per layer, for each micro-batch on its stage's L / p layers: 2 L in all
        if lay.link is None:
            notes.append(f"the catalog has no scale-up link for {acc.name}: tensor-parallel communication not counted")
        else:
            communication += m.layers * 2 * _tensor_parallel_all_reduce(activations, lay.tp, lay.link, r)
    if lay.pp > 1:  # a lone request crosses p - 1 stage boundaries; pipelined, each stage sends its p micro-batches
        domain = links.get(lay.link) if lay.link is not None else None
        inside = domain is not None and domain.gpus is not None and lay.gpus_per_replica <= domain.gpus
        link = domain if inside else links.scale_out(acc)
        if link is None:
            notes.append(f"the catalog has no link between the stages for {acc.name}: pipeline sends not counted")
        else:
            communication += (lay.pp - 1 if micro == 1 else lay.pp) * comms.p2p(activations, link).time_s
    layers_s = (m.layers - dense) * layer.time_s + dense * dense_s  # each stage: L / p layers, p micro-batches
    phase = "mixed" if B and share else ("decode" if B else "prefill")
    gpu_s = layers_s + output_s + communication + r.step_s
    # the engine's host prepares the next step while the GPU runs this one (TensorRT-LLM's overlap scheduler): the
    # step lasts as long as the slower of the two; the host works for the requests of its GPU (its own sequences
    # and prompts under data-parallel attention)
    host = (B / ranks + handed) * r.host_s_per_request  # the host's work grows with requests, not tokens
    if host > gpu_s:
        notes.append(f"host-bound: the engine's host work for {B / ranks + handed:,.0f} requests ({host * 1e3:.1f} ms) "
                     f"outlasts the GPU's step ({gpu_s * 1e3:.1f} ms)")
    return StepTime(phase=phase, batch=B, new_tokens=n, context=c, time_s=max(gpu_s, host), layers_s=layers_s,
                    output_s=output_s, communication_s=communication, tp=lay.tp, pp=lay.pp, layer=layer,
                    notes=notes, prompts=share, prompt=P, cached=S if share else 0, engine_s=r.step_s,
                    calibrated=r.calibrated, ep=lay.ep, attention_dp=lay.attention_dp, host_s=host)


def _families(fmt: weights.WeightFormat, acc, key, kv, calibrated, calibration) -> tuple:
    """(kernel names, weight bytes, activations, roofs) for each family of GEMMs whose weights ``fmt`` stores
    apart (:data:`roofkit.inference.weights.FAMILIES`): they read their own format and run at its precision,
    or at the math's ``key`` when that is wider (BF16 attention weights in an FP4 model: BF16 GEMMs)."""
    groups: dict[str, list[str]] = {}
    formats = {}
    for ops in weights.FAMILY_OPS.values():
        for op in ops:
            own = fmt.op_format(op)
            if own is not None:
                groups.setdefault(own.name, []).append(op)
                formats[own.name] = own
    out = []
    for name, ops in groups.items():
        math = name if dtypes.bytes_per_element(name) > dtypes.bytes_per_element(key) else key
        out.append((frozenset(ops), formats[name].bytes_per_weight, engine.activation_dtype(math, calibrated),
                    engine.roofs(acc, math, calibrated, calibration, kv_dtype=kv)))
    return tuple(out)


def _balance(prompts, ranks, r: engine.Roofs) -> float:
    """Average over max tokens a GPU of data-parallel attention in this step (1: even; the bound's).

    Calibrated, a step that carries prompts is as uneven as TensorRT-LLM measured its steps
    (``r.adp_balance``, :data:`roofkit.inference.engine.ADP_BALANCE`); a step that only decodes is even
    (blog10: once every request decodes, "naturally reducing imbalances"). With p < 1 prompts a step on
    average, a share p of the steps carries one: the ratio moves from 1 toward the measured one as p does.
    """
    if not r.calibrated or ranks == 1 or not prompts:
        return 1.0
    return 1.0 - (1.0 - r.adp_balance) * min(1.0, prompts)


def _busiest_prompts(prompts, ranks, calibrated) -> float:
    """The prompts the busiest of ``ranks`` data-parallel GPUs prefills in a step that carries ``prompts``.

    The bound spreads them evenly, p / t (what TensorRT-LLM's ADP balance strategy approaches: its
    blog10 measures the mean rank's tokens at 54% of the slowest rank's with round-robin scheduling,
    88% with the strategy, DeepSeek-V3 on 8 GB200s).
    The estimate keeps each prompt (or its chunk) whole on one GPU, round robin: a step that carries a
    prompt waits for one whole prompt at least, max(p / t, min(p, 1)) on average over the steps.
    """
    if ranks == 1 or not prompts:
        return prompts
    return max(prompts / ranks, min(prompts, 1.0)) if calibrated else prompts / ranks


def _expert_exchange(m, lay, tokens, fmt, act, r: engine.Roofs) -> float:
    """Seconds of one expert layer's token exchange under data-parallel attention, the replica's ``tokens`` in all.

    Estimate: TensorRT-LLM's all-gather of every GPU's tokens in the experts' format (post-quant dispatch:
    d elements in the weights' format, at most the activations') with their k expert ids and weights, then a
    reduce-scatter of the experts' partial outputs in the activations' precision, over the tp GPUs. Bound:
    the least a router could send (:func:`roofkit.parallel.experts.copies`, ``least``: the token's experts on
    its own GPU first, so nothing leaves while a GPU holds k whole experts; each expert split over etp GPUs
    is reached on all of them), dispatched and combined at line rate.
    """
    from ..parallel import experts  # deferred: roofkit.parallel loads its planner

    t, d, k = lay.tp, m.d_model, m.experts_per_token
    b = dtypes.bytes_per_element(act)
    if r.calibrated:
        element = min(fmt.bytes_per_weight, b)
        pairs = engine.ROUTING_ID_BYTES + engine.ROUTING_WEIGHT_BYTES
        gather = comms.all_gather(tokens * (d * element + k * pairs), t, lay.link, calibrated=True).time_s
        return gather + comms.reduce_scatter(tokens * d * b, t, lay.link, calibrated=True).time_s
    # the GPUs a token must reach: its experts' least groups of ep, each expert split over etp GPUs, but its own
    reached = (experts.copies(k, m.experts, lay.ep, lay.ep, least=True)["nvlink"] + 1) * lay.etp - 1
    sent = reached * tokens / t * d * b
    # an all-to-all of n GPUs sends (n - 1)/n of its buffer: the buffer whose share for others is the bytes sent
    return 2 * comms.all_to_all(sent * t / (t - 1), t, lay.link).time_s if sent else 0.0


def decode_step(model, hw, batch=1, context=4096, gpus=1, dtype="bf16", weights_dtype=None, kv_dtype=None,
                calibrated=False, new_tokens=1, group=None, calibration=None, tp=None, pp=None, ep=None,
                attention_dp=False) -> StepTime:
    """One decode step: ``batch`` sequences, each with ``context`` tokens cached, make ``new_tokens`` each (1).

    ``weights_dtype`` and ``kv_dtype`` default to ``dtype`` (the activations and the peak).
    ``new_tokens`` = k + 1 is a speculative step's verification of k drafted tokens.
    """
    whole(batch, "batch")
    whole(context, "context")
    return step(model, hw, batch, context, 0, None, gpus, dtype, weights_dtype, kv_dtype, calibrated, new_tokens,
                group, calibration, tp, pp, ep=ep, attention_dp=attention_dp)


def prefill(model, hw, prompt=4096, batch=1, gpus=1, dtype="bf16", weights_dtype=None, kv_dtype=None,
            calibrated=False, group=None, calibration=None, tp=None, pp=None, ep=None, attention_dp=False) -> StepTime:
    """The prefill of ``batch`` prompts of ``prompt`` tokens (causal), up to the first token's logits."""
    B = whole(batch, "batch")
    return step(model, hw, 0, None, B, prompt, gpus, dtype, weights_dtype, kv_dtype, calibrated, 1, group,
                calibration, tp, pp, ep=ep, attention_dp=attention_dp)


def ttft(model, hw, prompt=4096, **options) -> float:
    """Time to first token, in seconds: the prefill of one prompt of ``prompt`` tokens (queueing not counted)."""
    return prefill(model, hw, prompt, **options).time_s


def tpot(model, hw, batch=1, context=4096, **options) -> float:
    """Time per output token, in seconds: one decode step at ``batch`` with ``context`` tokens cached per sequence."""
    return decode_step(model, hw, batch, context, **options).time_s


def throughput(model, hw, batch=1, context=4096, gpus=1, **options) -> dict:
    """Decode throughput of one replica: tokens/s of the batch, per GPU and per user (1 / TPOT)."""
    s = decode_step(model, hw, batch, context, gpus, **options)
    per_replica = s.tp * s.pp
    return {"tpot_s": s.time_s, "tokens_per_s": batch / s.time_s, "tokens_per_s_per_gpu": batch / s.time_s / per_replica,
            "tokens_per_s_per_user": 1 / s.time_s}


def fewest_gpus(model, hw, tpot_s, batch=1, context=4096, dtype="bf16", weights_dtype=None, kv_dtype=None,
                calibrated=False, reserve=memory.RESERVE) -> int | None:
    """The fewest GPUs, tensor parallel inside one scale-up domain, on which ``batch`` sequences fit and decode
    at ``context`` in at most ``tpot_s`` seconds per token; None when no domain is enough.

    More GPUs split the weights' and the caches' reads, but not what a step pays
    however little it reads: each layer's two all-reduces, a round of
    synchronization each (one-shot) whatever t; in the calibrated estimate also
    each kernel's floor and the engine's overhead per step. So the gain of each
    doubling shrinks, sharded decode has a floor, and below it more GPUs inside
    the domain buy nothing (None).
    """
    m, acc = models.get(model), hardware.get(hw)
    target = positive(tpot_s, "tpot_s")
    domain = links.scale_up(acc)
    reach = domain.gpus if domain is not None and domain.gpus is not None else 8
    for t in range(1, reach + 1):
        if m.heads % t:
            continue
        key = dtypes.canonical(dtype)
        wd, kd = dtype if weights_dtype is None else weights_dtype, key if kv_dtype is None else kv_dtype
        if not memory.plan(m, acc, t, context, batch, wd, kd, reserve, tp=t).fits:
            continue
        if tpot(m, acc, batch, context, gpus=t, tp=t, dtype=key, weights_dtype=wd, kv_dtype=kd,
                calibrated=calibrated) <= target:
            return t
    return None


def attention_intensity(model, context=4096, dtype="bf16", kv_dtype=None) -> float:
    """FLOPs per byte of a decode step's attention: about the GQA group size H / H_kv with a BF16 cache.

    Each cached element is read once and used by the group's H / H_kv query heads,
    about 2 FLOPs each in BF16 (2 bytes); the batch does not change it.
    """
    m = models.get(model)
    _supported(m)
    ctx = whole(context, "context")
    return m.layer_ops(1, 1, ctx, dtype, kv_bytes=kv_dtype)["attn"].intensity


@dataclass(frozen=True)
class DecodeCost:
    """A decode step's FLOPs and bytes as a line in the batch: F = B f, Q = W + B q (datasheet precisions)."""

    flops_per_sequence: float  # f: each sequence's FLOPs (the weights' 2 per parameter, its attention)
    bytes_per_sequence: float  # q: each sequence's bytes (its cache read, its activations)
    shared_bytes: float  # W: what every sequence shares (the weights, read once)

    @property
    def intensity(self) -> float:
        """What one more sequence adds: f / q FLOPs per byte."""
        return self.flops_per_sequence / self.bytes_per_sequence


def decode_cost(model, context=None, gpus=1, hw="h100", dtype="bf16", weights_dtype=None, kv_dtype=None,
                group=None) -> DecodeCost:
    """f, q and W of a decode step (``context=None``: attention left out, the weights' side alone)."""
    m, acc = models.get(model), hardware.get(hw)
    _dense(m)
    key = dtypes.canonical(dtype)
    fmt = weights.weight_format(dtype if weights_dtype is None else weights_dtype, group)
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
    return DecodeCost(F1, Q2 - Q1, 2 * Q1 - Q2)


def critical_batch(model, hw, context=None, gpus=1, dtype="bf16", weights_dtype=None, kv_dtype=None,
                   group=None) -> int | None:
    """The smallest batch at which a decode step's math time reaches its memory time (datasheet roofs).

    ``context=None``: the weights' side only, attention left out (the classic
    "decode turns compute-bound at B ~ ridge"). With a context, each sequence's
    cache read counts too; None when the step never turns compute-bound.
    The step's FLOPs are B f and its bytes W + B q (weights once, activations
    and cache per sequence, :func:`decode_cost`), so B* = (W / BW) / (f / P - q / BW):
    never, when one more sequence's f / q is below the ridge P / BW.
    """
    acc = hardware.get(hw)
    key = dtypes.canonical(dtype)
    c = decode_cost(model, context, gpus, acc, key, weights_dtype, kv_dtype, group)
    f, q, W = c.flops_per_sequence, c.bytes_per_sequence, c.shared_bytes
    P, BW = acc.peak(key), acc.memory_bandwidth()
    if f / P <= q / BW:
        return None
    return max(1, math.ceil((W / BW) / (f / P - q / BW)))


def critical_batch_symbolic() -> dict:
    """The critical batch derived with sympy from :func:`step_time_bound`'s two terms for the weights:

    the math of B tokens through N parameters, 2 B N / P, meets the read of the
    weights, N b_w / BW, at B* = P b_w / (2 BW): the ridge P / BW times b_w / 2.
    BF16 weights (b_w = 2) put it at the ridge; INT8 weights multiplied in BF16
    (b_w = 1, the math unchanged) halve it. Returns {'B*': ..., 'symbols': (B, N, b_w, P, BW)}.
    """
    import sympy  # deferred: sympy costs ~0.25 s at import

    B, N, b_w, P, BW = sympy.symbols("B N b_w P BW", positive=True)
    bound = step_time_bound(B, N, N * b_w, 0, P, BW)  # no cache: the weights' side alone
    math_s, weights_s = sorted(bound.args, key=lambda e: e.has(B), reverse=True)
    return {"B*": sympy.solve(sympy.Eq(math_s, weights_s), B)[0], "symbols": (B, N, b_w, P, BW)}


def step_time_bound(batch, params, weight_bytes, kv_bytes_per_sequence, peak_flops, bandwidth):
    """The JAX scaling book's envelope for a decode step (inference chapter, "Theoretical Step Time (General)"):

        T = B · KV / BW  +  max(2 B N / P, W / BW)

    attention always bandwidth-bound, the weights' GEMMs whichever is slower:
    math (2 FLOPs per parameter per token) or reading the weights. Numbers or sympy symbols.
    """
    B, N, W = positive(batch, "batch"), positive(params, "params"), positive(weight_bytes, "weight_bytes")
    KV = nonnegative(kv_bytes_per_sequence, "kv_bytes_per_sequence")
    P, BW = positive(peak_flops, "peak_flops"), positive(bandwidth, "bandwidth")
    if any(type(v).__module__.startswith("sympy") for v in (B, N, W, KV, P, BW)):
        import sympy  # deferred: sympy costs ~0.25 s at import

        return B * KV / BW + sympy.Max(2 * B * N / P, W / BW)
    return B * KV / BW + max(2 * B * N / P, W / BW)


def _tensor_parallel_all_reduce(size, tp, link, r: engine.Roofs) -> float:
    """Seconds of one tensor-parallel all-reduce of ``size`` bytes over ``tp`` GPUs of ``link``, as ``r`` runs it.

    The bound is the fastest algorithm any engine has on that link, each at its best
    (:func:`roofkit.comms.tensor_parallel_all_reduce`): at decode sizes an engine's one-shot
    kernel, one round whatever t is (vLLM's custom all-reduce, vllm-project/vllm pull request
    2192; TensorRT-LLM's ONESHOT), not NCCL's ring of 2 (t - 1) steps. Calibrated, the
    algorithm the engine picks at that size (``r.engine``: :func:`roofkit.comms.engine_algorithm`),
    at measured figures.
    """
    return comms.tensor_parallel_all_reduce(size, tp, link, r.calibrated, r.engine).time_s
