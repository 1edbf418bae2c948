"""Parallelism: how a training step splits over GPUs, what it sends, what it costs, what it holds.

A step on G GPUs laid out as TP x CP x PP x DP (tensor, context, pipeline,
data parallel; ranks ordered that way, TP innermost, as Megatron-LM does)::

    step time = compute + exposed communication + pipeline bubble
    MFU       = model FLOPs / (step time x G x peak)

* compute: the model's FLOPs per token (:func:`roofkit.training.flops_per_token`,
  6N plus PaLM's attention term) times the global batch, over G GPUs at the
  catalog's peak (or its measured achievable matmul rate); 8/6 of it with
  full recomputation.
* TP (Megatron-LM, Shoeybi et al. 2019, arXiv:1909.08053): two all-reduces of
  the activations [b s, d] per layer in the forward pass, two in the backward
  (two more when the forward is recomputed); on the critical path.
* CP (Llama 3, arXiv:2407.21783, section 3.3.2): all-gather of K and V per
  layer forward, reduce-scatter of their gradients backward.
* PP: a send of one micro-batch's activations per stage boundary each way
  (the scaling book, gpus.md); in the steady state they overlap the other
  micro-batches' compute, so only the fill and the drain, 2(p - 1) hops, wait.
  Bubble: (p - 1)/(m + p - 1) of the step for p stages and m micro-batches
  (GPipe, Huang et al. 2019; 1F1B, Narayanan et al. 2021).
* DP and ZeRO (Rajbhandari et al. 2020, arXiv:1910.02054) over the DP x CP
  ranks that hold the same weights: stage 0 all-reduces the gradients; 1 and 2
  reduce-scatter them and all-gather the updated weights; 3 all-gathers the
  weights in the forward and again in the backward of every micro-batch and
  reduce-scatters the gradients. Gradient reduction hides behind the backward
  of the last micro-batch, the weight all-gather behind the first forward
  (``overlap=False``: nothing hides).
* Memory per GPU: weights, gradients and Adam states
  (:func:`roofkit.training.adam_memory_per_param`), sharded by ZeRO's stage,
  plus activations (:func:`activation_bytes`), for the micro-batches the first
  pipeline stage holds at once under 1F1B: min(p, m).

Every collective's time comes from :mod:`roofkit.comms` on the accelerator's
links (:mod:`roofkit.links`): NVLink inside the node or NVLink domain, the
network between nodes, each GPU with its own NIC.

    >>> from roofkit import hardware, links, parallel
    >>> parallel.bubble_fraction(16, 16)
    0.4838709677419355
    >>> C, W = hardware.get("h100").peak("bf16"), links.get("nvlink4").bandwidth
    >>> round(parallel.dp_critical_batch(8, C, W))      # tokens per GPU, data parallel on 8 H100s
    1923
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from .errors import InvalidValue
from .units import is_symbolic, positive, whole

__all__ = ["ZERO_STAGES", "bubble_fraction", "bubble_time", "microbatches_for_bubble", "dp_critical_batch",
           "tp_critical_degree", "zero_collectives", "sync_volume", "state_bytes", "activation_bytes", "memory_per_gpu", "expert_all_to_all",
           "Plan", "plan", "search"]

ZERO_STAGES = (0, 1, 2, 3)


# --- formulas (numbers and sympy symbols alike) ------------------------------------------


def bubble_fraction(stages, microbatches, virtual_stages=1):
    """(p - 1) / (v m + p - 1): the share of a pipelined step in which a stage idles.

    p stages, m micro-batches (GPipe, Huang et al. 2019; 1F1B); v > 1 model
    chunks per GPU shrink the bubble v-fold (interleaved 1F1B, Narayanan et al.
    2021, arXiv:2104.04473, section 2.2.2).
    """
    p, m, v = positive(stages, "stages"), positive(microbatches, "microbatches"), positive(virtual_stages, "v")
    return (p - 1) / (v * m + p - 1)


def bubble_time(compute_s, stages, microbatches, virtual_stages=1):
    """(p - 1)/(v m) x compute: the idle time added to ``compute_s``, bubble_fraction of the sum."""
    p, m, v = positive(stages, "stages"), positive(microbatches, "microbatches"), positive(virtual_stages, "v")
    return positive(compute_s, "compute_s") * (p - 1) / (v * m)


def microbatches_for_bubble(stages, fraction, virtual_stages=1) -> int:
    """The fewest micro-batches m that keep the bubble of ``stages`` stages at most ``fraction`` of the step.

    From (p - 1)/(v m + p - 1) <= x:  m >= (p - 1)(1 - x) / (v x), rounded up.

    >>> microbatches_for_bubble(16, 0.05)
    285
    """
    p, v = whole(stages, "stages"), whole(virtual_stages, "virtual_stages")
    x = float(positive(fraction, "fraction"))
    if x >= 1:
        raise InvalidValue(f"fraction is a share of the step, in (0, 1); got {fraction!r}.")
    m = max(1, math.ceil((p - 1) * (1 - x) / (v * x)))
    while m > 1 and bubble_fraction(p, m - 1, v) <= x:  # guard against rounding in the division
        m -= 1
    while bubble_fraction(p, m, v) > x:
        m += 1
    return m


def dp_critical_batch(gpus, peak_flops, bandwidth, grad_bytes=2):
    """Tokens per GPU below which data parallelism's gradient all-reduce outlasts the backward pass.

    Backward: 4 N B / C seconds for B tokens per GPU. Ring all-reduce of N
    gradients of b bytes: f(n) N b / W, f(n) = 2(n - 1)/n. Equal at

        B* = f(n) b C / (4 W)   ->  C / W for bf16 gradients and many GPUs

    (the scaling book, gpus.md: 990e12 / 450e9 = 2200 tokens inside an H100
    node). The α term is left out: gradient buckets are large.
    """
    from . import comms, training

    n = gpus if is_symbolic(gpus) else max(2, gpus)
    f = comms.volume("all-reduce", n)
    return f * positive(grad_bytes, "grad_bytes") * positive(peak_flops, "peak_flops") \
        / (training.BACKWARD_FLOPS_PER_PARAM_TOKEN * positive(bandwidth, "bandwidth"))


def tp_critical_degree(d_ff, peak_flops, bandwidth):
    """TP degree above which a layer's activation traffic outlasts its MLP matmuls: Y* = F W / C.

    With Megatron's split, each of the Y GPUs does 4 B D F / Y FLOPs of MLP
    matmuls in the forward pass (two matmuls of B D F multiply-adds, shared Y
    ways) and moves 4 B D bytes (an all-gather and a reduce-scatter, or one
    all-reduce, of the BF16 activations [B, D]) at W bytes/s: equal at
    Y = F W / C, whatever B and D (the scaling book, training.md, "Tensor
    Parallelism": F > Y C / W; gpus.md: "about F / 2200 within a node").

    >>> from roofkit import hardware, links
    >>> round(tp_critical_degree(28672, hardware.get("h100").peak("bf16"), links.get("nvlink4").bandwidth), 1)
    13.0
    """
    return positive(d_ff, "d_ff") * positive(bandwidth, "bandwidth") / positive(peak_flops, "peak_flops")


def zero_collectives(zero, microbatches=1) -> dict:
    """The data-parallel collectives of one step, by ZeRO stage: {kind: (collective, calls)}.

    Each call moves as many bytes as this GPU's gradients (the weights it
    gathers are as many, also in 16 bits), among the ranks that hold the same
    weights (Rajbhandari et al. 2020, section 7; the scaling book, training.md):

        stage 0   'dp': all-reduce the gradients, once a step
        1, 2      'dp': reduce-scatter the gradients; 'zero': all-gather the updated weights
        3 (FSDP)  'dp': reduce-scatter the gradients of every micro-batch;
                  'zero': all-gather the weights in the forward AND again in the backward of every micro-batch

    >>> zero_collectives(3, microbatches=4)
    {'dp': ('reduce-scatter', 4), 'zero': ('all-gather', 8)}
    """
    if zero not in ZERO_STAGES:
        raise InvalidValue(f"zero must be one of {', '.join(map(str, ZERO_STAGES))}; got {zero!r}.")
    m = whole(microbatches, "microbatches")
    if zero == 0:
        return {"dp": ("all-reduce", 1)}
    if zero in (1, 2):
        return {"dp": ("reduce-scatter", 1), "zero": ("all-gather", 1)}
    return {"dp": ("reduce-scatter", m), "zero": ("all-gather", 2 * m)}


def sync_volume(zero, shards, microbatches=1):
    """Bytes each GPU sends in one step's data-parallel traffic, per byte of its gradients.

    The sum over :func:`zero_collectives` of calls x f(n) (:func:`roofkit.comms.volume`):
    2(n - 1)/n for stages 0 to 2 (an all-reduce is a reduce-scatter and an
    all-gather), 3m(n - 1)/n for stage 3 with m micro-batches.

    >>> sync_volume(0, 8), sync_volume(1, 8), sync_volume(3, 8)
    (1.75, 1.75, 2.625)
    """
    from . import comms

    return sum(calls * comms.volume(collective, shards) for collective, calls in
               zero_collectives(zero, microbatches).values())


def state_bytes(params, shards=1, zero=0, weights="bf16", grads="bf16", master="fp32", moments="fp32") -> dict:
    """Bytes per GPU of weights, gradients and optimizer states for ``params`` parameters held by this GPU.

    ZeRO (Rajbhandari et al. 2020, section 5) shards over ``shards`` ranks:
    stage 1 the optimizer states (FP32 master and Adam's moments), stage 2 the
    gradients too, stage 3 the weights too. 16 bytes per parameter unsharded.
    """
    from . import training

    if zero not in ZERO_STAGES:
        raise InvalidValue(f"zero must be one of {', '.join(map(str, ZERO_STAGES))}; got {zero!r}.")
    N, d = positive(params, "params"), positive(shards, "shards")
    per = training.adam_memory_per_param(weights, grads, master, moments)
    optimizer = per["master"] + per["first_moment"] + per["second_moment"]
    parts = {"weights": N * per["weights"] / (d if zero >= 3 else 1),
             "grads": N * per["grads"] / (d if zero >= 2 else 1),
             "optimizer": N * optimizer / (d if zero >= 1 else 1)}
    return parts | {"total": sum(parts.values())}


def activation_bytes(tokens, d_model, heads, kv_heads, head_dim, d_ff, gated=True, tp=1, recompute=False,
                     bytes_per_element=2, dropout=False):
    """Activations one decoder layer keeps for its backward pass, for ``tokens`` tokens on one GPU.

    Counted tensor by tensor as Korthikanti et al. 2022 (arXiv:2205.05198,
    section 4.1) do, with fused (Flash) attention, so no s x s scores:

        attention  norm input d, QKV input d, Q H d_h, K and V 2 H_kv d_h, output H d_h
        MLP        norm input d, MLP input d, up d_ff (and gate d_ff), activation output d_ff
        dropout    a 1-byte mask after attention and after the MLP (``dropout=True``)

    all x b bytes per token, divided by t with tensor and sequence parallelism.
    A GPT-3 layer (d_ff = 4d, no GQA, dropout) comes to 34 s b h, the paper's
    figure. With ``recompute=True`` only the layer's input is kept: 2 s b h / t.
    """
    T, d, H = positive(tokens, "tokens"), positive(d_model, "d_model"), positive(heads, "heads")
    Hkv, dh, f = positive(kv_heads, "kv_heads"), positive(head_dim, "head_dim"), positive(d_ff, "d_ff")
    b, t = positive(bytes_per_element, "bytes_per_element"), positive(tp, "tp")
    if recompute:
        return T * d * b / t
    attention = d + d + H * dh + 2 * Hkv * dh + H * dh
    mlp = d + d + f * (3 if gated else 2)
    masks = 2 * d if dropout else 0
    return T * ((attention + mlp) * b + masks) / t


def memory_per_gpu(model, microbatch_tokens, tp=1, pp=1, shards=1, zero=0, microbatches=1,
                   recompute=False) -> dict:
    """Bytes one GPU holds: weights, gradients, optimizer states and activations, and their total.

    The GPU holds 1/(tp pp) of the parameters, sharded further over ``shards``
    data-parallel ranks by ZeRO's ``zero`` stage (:func:`state_bytes`); and the
    activations of ``microbatch_tokens`` tokens (of this GPU's context-parallel
    share) for its layers, for the min(pp, microbatches) micro-batches the first
    stage holds at once under 1F1B (:func:`activation_bytes`). With full
    recomputation it keeps each layer's input, plus one layer rebuilt at a time.
    """
    from . import models

    M = models.get(model)
    if M.moe or M.mla:
        raise InvalidValue(f"{M.name}: a mixture of experts with latent attention is not modelled by parallel.")
    t, p = positive(tp, "tp"), positive(pp, "pp")
    states = state_bytes(M.params / (t * p), shards, zero)
    layers_here, in_flight = M.layers / p, min(p, positive(microbatches, "microbatches"))
    shape = (microbatch_tokens, M.d_model, M.heads, M.kv_heads, M.head_dim, M.d_ff, M.gated, t)
    per_layer = activation_bytes(*shape)
    if recompute:
        activations = activation_bytes(*shape, recompute=True) * layers_here * in_flight + per_layer
    else:
        activations = per_layer * layers_here * in_flight
    parts = {"weights": states["weights"], "grads": states["grads"], "optimizer": states["optimizer"],
             "activations": activations}
    return parts | {"total": sum(parts.values())}


def expert_all_to_all(tokens, d_model, top_k, ep, link, bytes_per_element=2):
    """Seconds of the four all-to-alls of one MoE layer (dispatch and combine, forward and backward).

    Each GPU sends its ``tokens`` x ``top_k`` routed activations of d values to
    the experts on the other ``ep`` - 1 GPUs and gets the results back (the
    scaling book, gpus.md, 'Expert Parallelism').
    """
    from . import comms

    size = positive(tokens, "tokens") * positive(top_k, "top_k") * positive(d_model, "d_model") \
        * positive(bytes_per_element, "bytes_per_element")
    return 4 * comms.all_to_all(size, ep, link).time_s


# --- the step model ------------------------------------------------------------------------


@dataclass
class Plan:
    """One layout of one model on one accelerator: step time, its parts, MFU, memory per GPU."""

    model: str
    accelerator: str
    precision: str
    gpus: int
    tp: int
    cp: int
    pp: int
    dp: int
    zero: int
    microbatches: int
    virtual_stages: int
    microbatch_tokens: float
    global_batch_tokens: float
    seq: int
    recompute: bool
    overlap: bool
    efficiency: float
    achievable: bool
    intra: str
    inter: str | None
    node_gpus: int
    model_flops: float
    compute_s: float
    bubble_s: float
    communication: dict = field(default_factory=dict)
    memory: dict = field(default_factory=dict)
    memory_capacity_bytes: float | None = None
    critical_batch_tokens_per_gpu: float | None = None
    warnings: list = field(default_factory=list)

    @property
    def communication_s(self) -> float:
        """Exposed communication: what does not hide behind compute."""
        return sum(c["exposed_s"] for c in self.communication.values())

    @property
    def step_time_s(self) -> float:
        return self.compute_s + self.communication_s + self.bubble_s

    @property
    def mfu(self) -> float:
        from . import hardware, training

        return training.mfu(self.model_flops, self.step_time_s, hardware.get(self.accelerator).peak(self.precision),
                            self.gpus)

    @property
    def memory_per_gpu_bytes(self) -> float:
        return self.memory["total"]

    @property
    def fits(self) -> bool | None:
        return None if self.memory_capacity_bytes is None else self.memory_per_gpu_bytes <= self.memory_capacity_bytes

    @property
    def tokens_per_gpu(self) -> float:
        return self.global_batch_tokens / self.gpus

    @property
    def tokens_per_s(self) -> float:
        return self.global_batch_tokens / self.step_time_s

    @property
    def layout(self) -> str:
        """'TP 8 · PP 4 · DP 32 · ZeRO-1' (CP, ZeRO and interleaving only when used; '+ recompute' when on)."""
        parts = [f"TP {self.tp}"] + ([f"CP {self.cp}"] if self.cp > 1 else []) + [f"PP {self.pp}", f"DP {self.dp}"]
        parts += [f"ZeRO-{self.zero}"] if self.zero else []
        text = " · ".join(parts) + (f" (v {self.virtual_stages})" if self.virtual_stages > 1 else "")
        return text + (" + recompute" if self.recompute else "")

    def to_dict(self) -> dict:
        return asdict(self) | {"step_time_s": self.step_time_s, "mfu": self.mfu,
                               "communication_s": self.communication_s,
                               "memory_per_gpu_bytes": self.memory_per_gpu_bytes, "fits": self.fits,
                               "tokens_per_gpu": self.tokens_per_gpu, "tokens_per_s": self.tokens_per_s}


def _span(size: int, stride: int, node: int) -> tuple[int, int]:
    """(members per node, nodes) of a group of ``size`` ranks spaced ``stride`` apart, ``node`` GPUs a node."""
    per_node = max(1, min(size, node // stride)) if stride < node and node % stride == 0 else 1
    return per_node, math.ceil(size / per_node)


class _Fabric:
    """The links of one layout, and the time of a collective over a group of ranks placed on them."""

    def __init__(self, intra, inter, node: int):
        self.intra, self.inter, self.node = intra, inter, node

    def time(self, kind: str, size: float, group: int, stride: int) -> float:
        from . import comms

        if group < 2:
            return 0.0
        k, m = _span(group, stride, self.node)
        if m > 1 and self.inter is None:
            raise InvalidValue(f"a group of {group} GPUs spans {m} nodes of {self.node}, and the accelerator "
                               "has no scale-out link in the catalog.")
        if kind in ("all-to-all", "p2p") or m == 1 or k == 1:
            link, n = (self.intra, k) if m == 1 else (self.inter, m if kind != "all-to-all" else group)
            return comms.collective(kind, size, n, link).time_s
        return comms.hierarchical(kind, size, k, m, self.intra, self.inter).time_s


def _links(hw, intra, inter, node_gpus):
    from . import links

    accelerator = hw
    intra = links.check(accelerator, intra) if intra is not None else links.scale_up(accelerator)
    inter = links.check(accelerator, inter) if inter is not None else links.scale_out(accelerator)
    if intra is None:
        host = [x for x in links.for_accelerator(accelerator) if x.role == "host"]
        if not host:
            raise InvalidValue(f"{accelerator.name} has no link in the catalog (roofkit.links); "
                               f"accelerators with links: see data/links.toml [accelerators].")
        intra = host[0]
    node = node_gpus if node_gpus is not None else intra.gpus
    if node is None:
        domains = [x.key for x in links.for_accelerator(accelerator) if x.gpus is not None]
        hint = f"choose one of its domains ({', '.join(domains)}) or " if domains else ""
        raise InvalidValue(f"{intra.key} says nothing about how many GPUs share a node: {hint}pass node_gpus (--node-gpus).")
    return intra, inter, whole(node, "node_gpus")


def plan(model, hw, gpus, global_batch_tokens, seq, tp=1, pp=1, dp=None, cp=1, zero=0, microbatches=None,
         virtual_stages=1, dtype="bf16", recompute=False, overlap=True, efficiency=1.0, achievable=False,
         intra=None, inter=None, node_gpus=None) -> Plan:
    """Step time, MFU and memory per GPU of ``model`` trained on ``gpus`` x ``hw`` in a TP x CP x PP x DP layout.

    ``model`` is a :mod:`roofkit.models` name or Model; ``dp`` defaults to
    gpus / (tp cp pp). Each DP replica gets global_batch_tokens / dp tokens in
    ``microbatches`` micro-batches (default: one sequence each), each stage
    holding ``virtual_stages`` interleaved chunks of layers. The matmuls run at
    the datasheet peak (the model's upper bound), or with ``achievable=True`` at
    the best rate measured on that accelerator (:meth:`Accelerator.peak`);
    ``efficiency`` scales either. MFU is always against the datasheet peak.
    ``intra`` / ``inter`` choose the accelerator's links (default: its NVLink
    domain or pod, and its first scale-out network).
    """
    from . import dtypes, hardware, models, training

    M = models.get(model)
    if M.moe or M.mla:  # 6N with every expert counted, a dense MLP's activations: both wrong for these
        raise InvalidValue(f"{M.name}: a mixture of experts with latent attention is not modelled by parallel.plan.")
    acc = hardware.get(hw)
    precision = dtypes.canonical(dtype)
    rate = acc.peak(precision, achievable=achievable)
    G = whole(gpus, "gpus")
    t, c, p = whole(tp, "tp"), whole(cp, "cp"), whole(pp, "pp")
    if dp is None:
        if G % (t * c * p):
            raise InvalidValue(f"gpus = {G} is not a multiple of tp x cp x pp = {t * c * p}; "
                               f"choose tp, cp and pp whose product divides {G}.")
        dp = G // (t * c * p)
    d = whole(dp, "dp")
    if t * c * p * d != G:
        raise InvalidValue(f"tp x cp x pp x dp = {t} x {c} x {p} x {d} = {t * c * p * d}, not gpus = {G}; "
                           f"with tp={t}, cp={c}, pp={p} choose dp = gpus / {t * c * p}"
                           + (f" = {G // (t * c * p)}." if G % (t * c * p) == 0 else " (it must divide)."))
    if zero not in ZERO_STAGES:
        raise InvalidValue(f"zero must be one of {', '.join(map(str, ZERO_STAGES))}; got {zero!r}.")
    if p > M.layers:
        raise InvalidValue(f"pp = {p} stages for {M.layers} layers: at most one stage per layer (pp <= {M.layers}).")
    B, S = float(positive(global_batch_tokens, "global_batch_tokens")), whole(seq, "seq")
    sequences = B / (S * d)
    if sequences < 1 - 1e-9:
        raise InvalidValue(f"a global batch of {B:g} tokens gives each of the dp = {d} replicas {sequences:.3g} "
                           f"sequences of {S} tokens; it needs at least {S * d} tokens.")
    m = whole(microbatches, "microbatches") if microbatches is not None else max(1, round(sequences))
    if m > sequences * (1 + 1e-9):
        raise InvalidValue(f"microbatches = {m} but each replica has only {sequences:.4g} sequences of {S} tokens: "
                           f"choose at most {math.floor(sequences + 1e-9)}.")
    U = positive(efficiency, "efficiency")
    if U > 1:
        raise InvalidValue(f"efficiency is a share of the peak, in (0, 1]; got {efficiency!r}.")
    intra_link, inter_link, node = _links(acc, intra, inter, node_gpus)
    fabric = _Fabric(intra_link, inter_link, node)

    # compute: the model's FLOPs, run at efficiency x peak
    per_token = training.flops_per_token(M.params, M.layers, M.heads, M.head_dim, S)
    model_flops = per_token * B
    hardware_flops = model_flops * (training.recompute_flops(1, 1) / training.training_flops(1, 1) if recompute else 1)
    compute = hardware_flops / (G * rate * U)
    forward_share = training.FORWARD_FLOPS_PER_PARAM_TOKEN / training.FLOPS_PER_PARAM_TOKEN
    per_mb = compute / m  # one micro-batch through this GPU's stage, forward and backward
    v = whole(virtual_stages, "virtual_stages")
    if p * v > M.layers:
        raise InvalidValue(f"pp x virtual_stages = {p * v} chunks for {M.layers} layers: at most one layer a chunk.")
    bubble = bubble_time(compute, p, m, v) if p > 1 else 0.0

    act = dtypes.bytes_per_element("bf16")  # activations and gradients travel in 16 bits
    mb_tokens = B / (d * m)  # tokens of one micro-batch of one replica (all CP ranks together)
    layers_here = M.layers / p
    comm = {}

    def add(kind, collective, size, calls, group, stride, window=None):
        """Record ``calls`` collectives; with a window of compute to hide behind, only the excess is exposed."""
        total = fabric.time(collective, size, group, stride) * calls
        exposed = total if window is None or not overlap else max(0.0, total - window)
        comm[kind] = {"collective": collective, "bytes_per_call": size, "calls": calls, "group": group,
                      "time_s": total, "exposed_s": exposed}

    if t > 1:  # two all-reduces forward, two backward (two more if the forward is recomputed)
        calls = (6 if recompute else 4) * layers_here * m
        add("tp", "all-reduce", mb_tokens / c * M.d_model * act, calls, t, 1)
    if c > 1:  # all-gather K and V forward (again when recomputed), reduce-scatter their gradients backward
        kv = mb_tokens * 2 * M.kv_heads * M.head_dim * act / t
        add("cp", "all-gather", kv, (3 if recompute else 2) * layers_here * m, c, t)
    if p > 1:  # activations to the next stage, gradients back; only the fill and the drain wait for them
        hop_bytes = mb_tokens / c * M.d_model * act / t
        hop = fabric.time("p2p", hop_bytes, 2, t * c * d)
        comm["pp"] = {"collective": "p2p", "bytes_per_call": hop_bytes, "calls": 2 * v * m, "group": 2,
                      "time_s": 2 * v * m * hop, "exposed_s": 2 * (p - 1) * hop}
    shards = d * c  # the ranks that hold the same weights
    params_here = M.params / (t * p)
    grads = params_here * act
    if shards > 1:
        # gradients hide behind the last micro-batch's backward, gathered weights behind the first forward;
        # ZeRO-3's traffic, every micro-batch, is prefetched behind the whole step's compute (below)
        windows = {"dp": (1 - forward_share) * per_mb, "zero": forward_share * per_mb}
        for kind, (collective, calls) in zero_collectives(zero, m).items():
            add(kind, collective, grads, calls, shards, t, window=None if zero == 3 else windows[kind])
        if zero == 3:
            traffic = comm["dp"]["time_s"] + comm["zero"]["time_s"]
            hidden = min(traffic, compute) if overlap else 0.0  # prefetched behind the micro-batches' compute
            for kind in ("dp", "zero"):
                comm[kind]["exposed_s"] = comm[kind]["time_s"] * (1 - hidden / traffic)

    memory = memory_per_gpu(M, mb_tokens / c, tp=t, pp=p, shards=shards, zero=zero, microbatches=m,
                            recompute=recompute)
    result = Plan(model=M.key, accelerator=acc.key, precision=precision, gpus=G, tp=t, cp=c, pp=p, dp=d, zero=zero,
                  microbatches=m, virtual_stages=v, microbatch_tokens=mb_tokens, global_batch_tokens=B, seq=S,
                  recompute=bool(recompute), overlap=bool(overlap), efficiency=float(U), achievable=bool(achievable),
                  intra=intra_link.key, inter=inter_link.key if inter_link else None, node_gpus=node,
                  model_flops=model_flops,
                  compute_s=compute, bubble_s=bubble, communication=comm, memory=memory,
                  memory_capacity_bytes=acc.capacity_bytes)
    if "dp" in comm:  # tokens per GPU at which the data-parallel traffic equals the backward pass
        traffic = comm["dp"]["time_s"] + comm.get("zero", {}).get("time_s", 0.0)
        result.critical_batch_tokens_per_gpu = result.tokens_per_gpu * traffic / (compute * (1 - forward_share))
    if t > node:
        result.warnings.append(f"tp = {t} spans {math.ceil(t / node)} nodes: its all-reduces cross the network.")
    if result.fits is False:
        result.warnings.append(f"does not fit: {result.memory_per_gpu_bytes / 1e9:.1f} GB per GPU, "
                               f"{acc.capacity_bytes / 1e9:.1f} GB available (as the card reports it).")
    cb = result.critical_batch_tokens_per_gpu
    if cb is not None and result.tokens_per_gpu < cb:
        result.warnings.append(f"{result.tokens_per_gpu:.0f} tokens per GPU is below the critical batch of "
                               f"{cb:.0f}: data-parallel communication outlasts the backward pass.")
    return result


def search(model, hw, gpus, global_batch_tokens, seq, tp=(1, 2, 4, 8), pp=(1, 2, 4, 8, 16), zero=(0, 1, 2, 3),
           recompute=(False, True), fits_only=True, **options) -> list:
    """Every layout of the grid that :func:`plan` accepts (and, with ``fits_only``, that fits), fastest first.

    The grid is every combination of ``tp``, ``pp``, ``zero`` and ``recompute``
    (DP takes the remaining GPUs); ``options`` go to :func:`plan` as they are
    (``cp``, ``inter``, ``achievable``, ...). Layouts roofkit cannot plan
    (TP x PP not dividing the GPUs, a batch too small for DP) are skipped.
    Ties in step time go to the layout with less memory per GPU.
    """
    from .errors import RoofkitError

    found = []
    for t in tp:
        for p in pp:
            for z in zero:
                for r in recompute:
                    try:
                        found.append(plan(model, hw, gpus, global_batch_tokens, seq, tp=t, pp=p, zero=z,
                                          recompute=r, **options))
                    except RoofkitError:
                        continue
    if fits_only:
        found = [x for x in found if x.fits is not False]
    return sorted(found, key=lambda x: (x.step_time_s, x.memory_per_gpu_bytes))
