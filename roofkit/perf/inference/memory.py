"""A memory plan for serving a model on N GPUs: weights, KV cache, a reserve; what fits.

Each GPU's memory M (the catalog's ``capacity_bytes``: the total the card reports,
such as nvidia-smi's 81,559 MiB on an H100, where published; else the datasheet's) holds, with the work split
evenly over the n GPUs of one copy of the model (a replica):

    n M  =  reserve  +  weights  +  KV cache  (+ what is left)

* reserve: what the engine does not give to weights and cache, a fraction r of
  memory; what it is a fraction of is the engine's (``engine``, default vLLM's):

  - vLLM: of all of it. ``gpu_memory_utilization`` = 0.9 (vllm-project/vllm
    ``vllm/engine/arg_utils.py``, ``EngineArgs``) is the share of each GPU vLLM may use,
    and the weights, the activations' peak (measured in a profiling run) and the KV
    cache fit inside that 90%; the 10% outside it is headroom (the CUDA context, other
    processes, and, before vLLM began to count them, CUDA graphs): r = 0.10 of n M.
  - SGLang: of all of it too, ``mem_fraction_static`` (the weights and the KV pool),
    0.88 on one GPU, 0.87 from 2, 0.85 from 4, 0.81 from 8, 0.79 from 16 tensor-parallel
    GPUs (sgl-project/sglang ``python/sglang/srt/server_args.py``,
    ``ServerArgs.__post_init__``, 2025; later releases derive it from the GPU's memory).
  - TensorRT-LLM: of what the weights leave. The KV cache gets
    ``free_gpu_memory_fraction`` = 0.9 (NVIDIA/TensorRT-LLM ``tensorrt_llm/llmapi/llm_args.py``,
    ``KvCacheConfig``) of the memory still free once the weights and the activations'
    buffers are allocated: r = 0.10 of n M - W.

  roofkit counts the weights and the cache and leaves the activations and graphs (a few
  GB) out, so its largest batch is an upper bound on the engine's (a bound, like every
  default figure).
* weights: :func:`roofkit.inference.weights.weights_bytes` (every expert of a mixture of experts);
* KV cache: B sequences of s tokens, :mod:`roofkit.inference.kvcache`, times a
  replication factor. Tensor parallelism over t GPUs gives each GPU H_kv / t of
  the K/V heads; when t > H_kv a head is copied onto t / H_kv GPUs, and MLA's
  latent, shared by every head, is on all t.

So with F the memory free for the sequences' caches, F = n M (1 - r) - W (vLLM, SGLang) or
(1 - r) (n M - W) (TensorRT-LLM), the largest batch at a context s, and the longest context
at a batch B, are

    B_max = floor(F / (s · kv per token · replication))
    s_max = floor(F / (B · kv per token · replication))

and, when the weights alone do not fit, the fewest GPUs that would hold them is
ceil(W / (M (1 - r))) (vLLM, SGLang) or ceil(W / M) (TensorRT-LLM).

Two Llama 2 70B batches in FP8 that TensorRT-LLM ran on one H200 (NVIDIA/TensorRT-LLM
``docs/source/blogs/Falcon180B-H200.md``: batch 192 at 128 / 2,048 tokens, 96 at
128 / 4,096) need 68.5 and 66.4 GB of cache: more than vLLM's 90% leaves beside the
weights, within what TensorRT-LLM's 90% of the free memory gives:

    >>> [plan("llama-2-70b", "h200", 1, 2176, 192, "fp8", "fp8", engine=e).fits for e in ("vllm", "tensorrt-llm")]
    [False, True]

The layout (:func:`layout`): by default one replica on all the GPUs, tensor
parallelism t inside the accelerator's scale-up domain (an NVLink/NVSwitch node,
a TPU pod; :mod:`roofkit.links`), the largest t that divides both the GPUs and the
query heads, and pipeline stages for the rest, p = n / t. Given t (and p), the
GPUs hold n / (t p) replicas, each serving its own requests; a plan is one replica's.

A mixture of experts may spread its routed experts over ``ep`` of the t GPUs
(expert parallelism: each holds E / ep of them, each expert split over t / ep,
TensorRT-LLM's ``moe_expert_parallel_size`` x ``moe_tensor_parallel_size`` = tp),
and run attention data-parallel (``attention_dp``, the "DEP" layouts of TensorRT-LLM's
``enable_attention_dp``, SGLang's ``--enable-dp-attention``, vLLM's data-parallel
attention): each of the t GPUs keeps its own sequences and their cache, with a
whole copy of the attention, the dense MLPs, the shared experts, the router and the
embeddings (TensorRT-LLM, ``docs/source/blogs/tech_blog/blog03_Optimizing_DeepSeek_R1_
Throughput_on_NVIDIA_Blackwell_GPUs.md``, "Parallel strategy": attention, shared experts,
router DP8, sparse experts EP8). The replica then holds t copies of everything but the
routed experts, and one copy of each cached token instead of tensor parallelism's
(the latent of MLA on every GPU): "the duplication factor is equal to the TP group
size, thus 8x for TP8" (the same blog, "Data Parallel for Attention module").

    >>> tp8 = plan("deepseek-v3", "b200", 8, 3072, 1, "fp4", "fp8", tp=8, engine="tensorrt-llm")
    >>> dep8 = plan("deepseek-v3", "b200", 8, 3072, 1, "fp4", "fp8", tp=8, ep=8, attention_dp=True,
    ...             engine="tensorrt-llm")
    >>> tp8.kv_replication, dep8.kv_replication, dep8.max_batch > 4 * tp8.max_batch
    (8.0, 1.0, True)

    >>> p = plan("llama-3-70b", "h100", gpus=8, context=8192)
    >>> p.fits, p.max_batch, (p.tp, p.pp)
    (True, 176, (8, 1))
    >>> plan("llama-3-8b", "h100", gpus=8, context=8192, tp=1).replicas      # eight copies of a small model
    8
    >>> plan("llama-3-70b", "h100", gpus=1, context=8192).verdict
    'The weights alone (141.1 GB) do not fit on 1 x H100 SXM5 80GB (76.97 GB each after the 10% reserve): they need 2 GPUs at least.'
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

from ... import dtypes
from ...catalogs import hardware, links, models
from ...errors import InvalidValue
from ...units import whole
from . import engine as eng
from . import kvcache, weights

__all__ = ["RESERVE", "Layout", "layout", "MemoryPlan", "plan", "max_batch", "max_context", "min_gpus",
           "kv_replication", "reserve_fraction", "OF_FREE", "routed_bytes", "replica_weights_bytes"]

RESERVE = 0.10  # of each GPU's memory: vLLM's default gpu_memory_utilization = 0.9
TRTLLM_RESERVE = 0.10  # of the memory the weights leave: TensorRT-LLM's KvCacheConfig.free_gpu_memory_fraction = 0.9
# SGLang's mem_fraction_static by tensor-parallel size: (from t GPUs, fraction), the first that holds
SGLANG_MEM_FRACTION = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))
OF_FREE = ("tensorrt-llm",)  # engines whose reserve is a fraction of what the weights leave, not of all the memory


def _reserve(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise InvalidValue(f"reserve must be a fraction of each GPU's memory in [0, 1); got {value!r}.")
    return float(value)


def reserve_fraction(engine=None, tp=1, reserve=None) -> float:
    """r: the share of memory ``engine`` holds back (of all of it, or of what the weights leave: :data:`OF_FREE`),
    ``reserve`` when given, else the engine's default at ``tp``-way tensor parallelism (see the module's docstring)."""
    name = eng.canonical(eng.DEFAULT_ENGINE if engine is None else engine)
    if reserve is not None:
        return _reserve(reserve)
    if name == "vllm":
        return RESERVE
    if name in OF_FREE:
        return TRTLLM_RESERVE
    t = whole(tp, "tp")
    return 1 - next(f for least, f in SGLANG_MEM_FRACTION if t >= least)


@dataclass(frozen=True)
class Layout:
    """How n GPUs serve a model: ``replicas`` copies, each ``tp``-way tensor parallel inside ``link`` (a scale-up
    link) and ``pp`` pipeline stages; ``gpus`` counts them all. A mixture of experts' routed experts spread over
    ``ep`` of the tp GPUs, each split over tp / ep; ``attention_dp``: the tp GPUs run attention (and everything
    but the routed experts) data-parallel, each on its own sequences."""

    gpus: int
    tp: int
    pp: int
    link: str | None  # the scale-up link's catalog key, None when the catalog has none for the accelerator
    replicas: int = 1
    ep: int = 1
    attention_dp: bool = False

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp

    @property
    def etp(self) -> int:
        """The GPUs each routed expert is split over: tp / ep."""
        return self.tp // self.ep

    def to_dict(self) -> dict:
        return asdict(self) | {"gpus_per_replica": self.gpus_per_replica}


def layout(model, hw, gpus=1, tp=None, pp=None, ep=None, attention_dp=False) -> Layout:
    """The layout of ``gpus`` GPUs: given ``tp`` (and ``pp``, default 1), gpus / (tp pp) replicas; given neither,
    one replica with tensor parallelism inside the scale-up domain (the largest t dividing the GPUs and the
    heads) and pipeline stages across. ``ep`` (default 1) and ``attention_dp``: a mixture of experts' expert
    parallelism and data-parallel attention over the tp GPUs of a replica (see the module's docstring)."""
    m, acc, n = models.get(model), hardware.get(hw), whole(gpus, "gpus")
    if not isinstance(attention_dp, bool):
        raise InvalidValue(f"attention_dp must be True or False; got {attention_dp!r}.")
    e = 1 if ep is None else whole(ep, "ep")
    if (e > 1 or attention_dp) and not m.moe:
        what = f"ep = {e}" if e > 1 else "attention_dp"
        raise InvalidValue(f"{what} spreads a mixture of experts' experts over the GPUs, but {m.name} has none: "
                           "for data parallelism give tp (gpus / tp replicas, each with its own requests).")
    domain = links.scale_up(acc)
    size = domain.gpus if domain is not None and domain.gpus is not None else None
    link = domain.key if domain is not None else None
    if tp is None and pp is None:
        reach = min(n, size) if size is not None else n
        t = max(t for t in range(1, reach + 1) if n % t == 0 and (attention_dp or m.heads % t == 0))
        return _with_experts(m, Layout(gpus=n, tp=t, pp=n // t, link=link), e, attention_dp)
    t = 1 if tp is None else whole(tp, "tp")
    p = 1 if pp is None else whole(pp, "pp")
    if n % (t * p):
        raise InvalidValue(f"gpus ({n}) must be a multiple of tp x pp ({t} x {p} = {t * p}): each replica of the "
                           "model takes tp x pp GPUs.")
    if m.heads % t and not attention_dp:
        raise InvalidValue(f"tp must divide the {m.heads} query heads of {m.name}; got {t}.")
    if size is not None and t > size:
        raise InvalidValue(f"tp = {t} spans more than one scale-up domain ({size} GPUs on {link}): tensor "
                           "parallelism needs its all-reduces on the fast link; use pp for the rest.")
    if p > m.layers:
        raise InvalidValue(f"pp must be at most the {m.layers} layers of {m.name}; got {p}.")
    return _with_experts(m, Layout(gpus=n, tp=t, pp=p, link=link, replicas=n // (t * p)), e, attention_dp)


def _with_experts(m, lay: Layout, ep: int, attention_dp: bool) -> Layout:
    """``lay`` with its experts' layout, checked: ep divides tp and the experts; attention_dp without pipeline."""
    if ep > 1 and (lay.tp % ep or m.experts % ep):
        choices = [e for e in range(1, lay.tp + 1) if lay.tp % e == 0 and m.experts % e == 0]
        raise InvalidValue(f"ep must divide tp = {lay.tp} (the GPUs of a replica the experts spread over, each "
                           f"expert split over tp / ep) and the {m.experts} experts of {m.name}; got {ep}; choose "
                           f"among {', '.join(map(str, choices))}.")
    if attention_dp and lay.pp > 1:
        raise InvalidValue(f"attention_dp with pp = {lay.pp}: data-parallel attention is modelled in one pipeline "
                           "stage (pp = 1); give tp and gpus / tp replicas.")
    return replace(lay, ep=ep, attention_dp=attention_dp)


def kv_replication(model, tp: int, attention_dp=False) -> float:
    """How many copies of each cached element ``tp``-way tensor parallelism keeps (1 while t <= H_kv); data-parallel
    attention keeps one (each GPU its own sequences')."""
    m = models.get(model)
    t = whole(tp, "tp")
    if attention_dp:
        return 1.0
    return float(t) if m.mla else t / min(t, m.kv_heads)


def routed_bytes(model, weights_dtype="bf16", group=None) -> float:
    """Bytes of a mixture's routed experts (every one of them, in ``weights_dtype``): what expert parallelism
    spreads over the GPUs, while data-parallel attention copies the rest onto each (0 for a dense model)."""
    m = models.get(model)
    fmt = weights.weight_format(weights_dtype, group)
    # the layers' matrices with and without the routed experts (Model._layers_params, routed = 0: shared ones only)
    return (m.layer_matrix_params - m._layers_params(0)[0]) * fmt.bytes_per_weight if m.moe else 0.0


def replica_weights_bytes(model, lay: Layout, weights_dtype="bf16", group=None) -> float:
    """The weights one replica of ``lay`` holds: one copy of the model, or with data-parallel attention a copy of
    all but the routed experts on each of its tp GPUs and one copy of the experts spread over them."""
    W = weights.weights_bytes(model, weights_dtype, group)
    if not lay.attention_dp:
        return W
    experts = routed_bytes(model, weights_dtype, group)
    return lay.tp * (W - experts) + experts


@dataclass(frozen=True)
class MemoryPlan:
    """What the GPUs of one replica hold for one model at one context, and what fits. Bytes are for all the GPUs
    of the replica together (``gpus`` = tp x pp of them; ``replicas`` such copies serve side by side)."""

    model: str
    accelerator: str
    gpus: int
    tp: int
    pp: int
    weights_dtype: str
    kv_dtype: str
    context: int
    batch: int
    capacity_bytes: float  # N x M
    reserve_fraction: float
    reserve_bytes: float
    weights_bytes: float
    kv_bytes_per_token: float  # one token of one sequence, every layer (one copy)
    kv_bytes_per_sequence: float  # at the context (one copy)
    kv_replication: float
    kv_bytes: float  # the batch at the context, with its copies
    free_bytes: float  # what the sequences' caches may use: capacity - reserve - weights - a shared prefix (< 0: no fit)
    max_batch: int  # sequences of `context` tokens that fit; 0 when the weights do not fit
    max_context: int  # tokens per sequence that fit at `batch`; 0 when the weights do not fit
    min_gpus: int  # the fewest GPUs whose memory, less the reserve, holds the weights
    notes: list[str] = field(default_factory=list)
    replicas: int = 1
    shared_bytes: float = 0.0  # a prefix cached once for all the sequences (prefix caching), in kv_bytes
    engine: str = eng.DEFAULT_ENGINE  # whose reserve: of all the memory (vLLM, SGLang), of what the weights leave
    ep: int = 1  # the GPUs of a replica a mixture's routed experts spread over
    attention_dp: bool = False  # attention data-parallel over the tp GPUs: each keeps its own sequences' cache

    def with_batch(self, batch) -> "MemoryPlan":
        """The same plan for ``batch`` sequences: nothing but what the batch changes is computed again."""
        B, per_token, repl = whole(batch, "batch"), self.kv_bytes_per_token, self.kv_replication
        context_max = max(0, math.floor(self.free_bytes / (B * per_token * repl))) if self.weights_fit else 0
        return replace(self, batch=B, kv_bytes=B * self.context * per_token * repl + self.shared_bytes,
                       max_context=context_max)

    @property
    def weights_fit(self) -> bool:
        return self.free_bytes >= 0

    @property
    def fits(self) -> bool:
        """``batch`` sequences of ``context`` tokens fit beside the weights and the reserve."""
        return self.weights_fit and self.batch <= self.max_batch

    @property
    def per_gpu(self) -> dict:
        """The same figures for one GPU (an even split)."""
        n = self.gpus
        return {"capacity_bytes": self.capacity_bytes / n, "reserve_bytes": self.reserve_bytes / n,
                "weights_bytes": self.weights_bytes / n, "kv_bytes": self.kv_bytes / n,
                "free_bytes": self.free_bytes / n}

    @property
    def verdict(self) -> str:
        acc = hardware.get(self.accelerator)
        gb = lambda x: f"{x / 1e9:.4g} GB"  # noqa: E731
        of_free = self.engine in OF_FREE
        usable = gb(self.capacity_bytes / self.gpus * (1 if of_free else 1 - self.reserve_fraction))
        where = f"{self.gpus} x {acc.name.removeprefix(acc.vendor + ' ')}"
        if self.replicas > 1:
            where += f" (each of {self.replicas} replicas)"
        if not self.weights_fit:
            after = "with no reserve before the weights" if of_free else f"after the {self.reserve_fraction:.0%} reserve"
            return (f"The weights alone ({gb(self.weights_bytes)}) do not fit on {where} ({usable} each {after}): "
                    f"they need {self.min_gpus} GPUs at least.")
        line = (f"Weights {gb(self.weights_bytes)}, reserve {gb(self.reserve_bytes)}, {gb(self.free_bytes)} left "
                f"for the KV cache on {where}: at most {self.max_batch} sequences of {self.context:,} tokens")
        if self.fits:
            return line + f"; a batch of {self.batch} fits ({gb(self.kv_bytes)} of cache)."
        return line + f"; a batch of {self.batch} does not fit (it needs {gb(self.kv_bytes)} of cache)."

    def to_dict(self) -> dict:
        return asdict(self) | {"weights_fit": self.weights_fit, "fits": self.fits, "per_gpu": self.per_gpu,
                               "verdict": self.verdict}


def min_gpus(model, hw, weights_dtype="bf16", reserve=None, group=None, engine=None, tp=1) -> int:
    """The fewest GPUs whose memory, less the reserve, holds the weights (the KV cache not counted).

    ``engine``: whose reserve (:func:`reserve_fraction`); TensorRT-LLM's comes out of what the weights leave, so
    the weights may take all of the memory."""
    acc = hardware.get(hw)
    if not acc.capacity_bytes:
        raise InvalidValue(f"the catalog has no memory capacity for {acc.name}.")
    name = eng.canonical(eng.DEFAULT_ENGINE if engine is None else engine)
    r = reserve_fraction(name, tp, reserve)
    usable = acc.capacity_bytes * (1 if name in OF_FREE else 1 - r)
    return max(1, math.ceil(weights.weights_bytes(model, weights_dtype, group) / usable))


def plan(model, hw, gpus=1, context=4096, batch=1, weights_dtype="bf16", kv_dtype="bf16", reserve=None,
         group=None, tp=None, pp=None, shared=0, engine=None, ep=None, attention_dp=False) -> MemoryPlan:
    """The memory plan of ``model`` on ``gpus`` x ``hw``, ``batch`` sequences of ``context`` tokens per replica
    (``tp``, ``pp``, ``ep``, ``attention_dp``: see :func:`layout`). ``shared``: tokens cached once for all the
    sequences beside their own ``context`` (a common prefix kept by prefix caching). ``engine`` ('vllm', the
    default, 'tensorrt-llm', 'sglang') sets what the reserve is a fraction of, and ``reserve`` (default: the
    engine's) how much."""
    m, acc = models.get(model), hardware.get(hw)
    s, B = whole(context, "context"), whole(batch, "batch")
    name = eng.canonical(eng.DEFAULT_ENGINE if engine is None else engine)
    if not acc.capacity_bytes:
        raise InvalidValue(f"the catalog has no memory capacity for {acc.name}.")
    kv_key = dtypes.canonical(kv_dtype)
    fmt = weights.weight_format(weights_dtype, group)
    lay = layout(m, acc, gpus, tp, pp, ep, attention_dp)
    r = reserve_fraction(name, lay.tp, reserve)
    n = lay.gpus_per_replica
    capacity = n * acc.capacity_bytes
    W = replica_weights_bytes(m, lay, fmt)
    reserved = r * (max(0.0, capacity - W) if name in OF_FREE else capacity)
    per_token = kvcache.bytes_per_token(m, kv_key)
    repl = kv_replication(m, lay.tp, lay.attention_dp)
    common = whole(shared, "shared tokens", 0) * per_token * repl
    free = capacity - reserved - W - common
    notes = []
    if repl > 1:
        notes.append(f"tensor parallelism over {lay.tp} GPUs keeps {repl:g} copies of the cache "
                     + ("(the latent is shared by every head)" if m.mla else f"({m.kv_heads} K/V heads)"))
    if lay.attention_dp:
        notes.append(f"attention data-parallel over {lay.tp} GPUs: each keeps its own sequences' cache and a copy of "
                     f"all but the routed experts, which spread over {lay.ep} GPU{'s' if lay.ep > 1 else ''}"
                     + (f" (each expert split over {lay.etp})" if lay.etp > 1 else ""))
    batch_max = max(0, math.floor(free / (s * per_token * repl))) if free >= 0 else 0
    context_max = max(0, math.floor(free / (B * per_token * repl))) if free >= 0 else 0
    if m.context and s > m.context:
        notes.append(f"a context of {s:,} tokens is beyond the {m.context:,} {m.name} was released for")
    return MemoryPlan(model=m.key, accelerator=acc.key, gpus=n, tp=lay.tp, pp=lay.pp, weights_dtype=fmt.name,
                      kv_dtype=kv_key, context=s, batch=B, capacity_bytes=capacity, reserve_fraction=r,
                      reserve_bytes=reserved, weights_bytes=W, kv_bytes_per_token=per_token,
                      kv_bytes_per_sequence=per_token * s, kv_replication=repl,
                      kv_bytes=B * s * per_token * repl + common,
                      free_bytes=free, max_batch=batch_max, max_context=context_max,
                      min_gpus=min_gpus(m, acc, fmt, r, engine=name, tp=lay.tp), notes=notes, replicas=lay.replicas,
                      shared_bytes=common, engine=name, ep=lay.ep, attention_dp=lay.attention_dp)


def max_batch(model, hw, gpus=1, context=4096, **options) -> int:
    """The most sequences of ``context`` tokens that fit (0 when the weights alone do not)."""
    return plan(model, hw, gpus, context, **options).max_batch


def max_context(model, hw, gpus=1, batch=1, **options) -> int:
    """The longest context (tokens per sequence) at which ``batch`` sequences fit (0 when the weights do not)."""
    return plan(model, hw, gpus, batch=batch, **options).max_context
