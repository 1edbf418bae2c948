"""A training micro-batch on one GPU, kernel by kernel: forward, backward, recomputation, head, optimizer.

The single-GPU layer model (:mod:`roofkit.layertime`) gives the forward
kernels of a decoder layer. Training runs three passes over them, on the
share of the layer one GPU holds (1/t of the heads and of the MLP with tensor
parallelism, 1/c of the tokens with context parallelism, 1/t of the norms and
residuals with sequence parallelism):

* **forward**: the layer's kernels (:func:`layer_kernels`);
* **backward** (:func:`backward_kernels`): every weight GEMM twice (the
  gradient of its input and of its weight: 2x the forward FLOPs and bytes);
  FlashAttention's backward 2.5x its forward FLOPs (five matmuls to the
  forward's two: it recomputes the scores instead of storing them; Dao 2023,
  arXiv:2307.08691); attention without FlashAttention two matmuls per matmul
  and the softmax's gradient; every norm and elementwise op reads its input
  and the gradient and writes one: 2x its bytes;
* **recomputation**: ``full`` reruns the whole forward inside the backward
  (each layer keeps only its input); ``selective`` (Korthikanti et al. 2022,
  arXiv:2205.05198, section 5) reruns only the attention core (QK^T, softmax,
  PV), whose activations are large and whose FLOPs per byte are few; ``none``.

Embedding and LM head (:func:`head_kernels`): the output layer's GEMM (split
over the TP ranks by vocabulary) and the cross-entropy over the logits, once
per micro-batch; the optimizer step (:func:`optimizer_s`): Adam reads and writes
:data:`ADAM_BYTES_PER_PARAM` bytes per parameter it updates, at the HBM bandwidth.

A kernel takes max(F / P, B / BW) (the roofline) at the datasheet roofs: the
bound. Calibrated (:class:`Roofs`), t0 + max(F / (k P_achievable), B / BW_achievable):
the per-kernel floor t0 fitted on real layers (:func:`roofkit.layertime.default_calibration`),
the achievable roofs of the catalog, and k, the share of the best measured
matmul rate that a training GEMM reaches (fitted on published runs:
:mod:`roofkit.parallel.calibration`).

    >>> t = microbatch("llama-3-8b", "h100", batch=1, seq=8192)
    >>> round(t.backward_s / t.forward_s, 2)              # backward over forward, one GPU, no recomputation
    2.06
    >>> round(microbatch("llama-3-8b", "h100", 1, 8192, recompute="full").recompute_s / t.forward_s, 2)
    1.0
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass

from .. import dtypes, formulas
from ..catalogs import hardware, models
from . import layertime
from ..errors import InvalidValue
from ..units import positive, whole

__all__ = ["ATTENTION", "RECOMPUTE", "ADAM_BYTES_PER_PARAM", "BACKWARD_GEMM", "BACKWARD_FLASH", "Roofs", "roofs",
           "shard", "layer_kernels", "backward_kernels", "recompute_kernels", "head_kernels", "kernel_time",
           "kernels_time", "MicrobatchTime", "microbatch", "optimizer_s", "recompute_mode", "compare_training"]

ATTENTION = ("flash", "unfused")
RECOMPUTE = ("none", "selective", "full")
BACKWARD_GEMM = 2.0  # a weight GEMM's backward: input gradient + weight gradient
BACKWARD_FLASH = 2.5  # FlashAttention's backward: 5 matmuls of the forward's size to the forward's 2
# Adam in mixed precision, per parameter updated: read the FP32 master weight, both moments and the gradient
# (4 + 4 + 4 + 4), write the master and both moments (12) and the BF16 weight (2)
ADAM_BYTES_PER_PARAM = 30


def recompute_mode(recompute) -> str:
    """'none', 'selective' or 'full' from a name, True (full) or False/None (none)."""
    if recompute is True:
        return "full"
    if recompute is False or recompute is None:
        return "none"
    if recompute not in RECOMPUTE:
        raise InvalidValue(f"recompute must be one of {', '.join(RECOMPUTE)} (or True for full); got {recompute!r}.")
    return recompute


@dataclass(frozen=True)
class Roofs:
    """What a kernel runs at: matmul FLOP/s, HBM bandwidth, and the floor every kernel pays."""

    peak_flops: float
    bandwidth: float
    floor_s: float = 0.0
    calibrated: bool = False
    source: str = "datasheet"

    def to_dict(self) -> dict:
        return asdict(self)


def roofs(hw, dtype="bf16", calibrated=False, matmul_efficiency=1.0, floor_s=None) -> Roofs:
    """The datasheet roofs of ``hw`` (the bound), or its achievable ones with the per-kernel floor (calibrated).

    Calibrated: the catalog's achievable matmul rate times ``matmul_efficiency``;
    its achievable bandwidth, or, where none is published, the datasheet's times
    the share a copy reaches on the H200 measured with roofkit; the floor of
    :func:`roofkit.layertime.default_calibration` (or ``floor_s``).
    """
    acc = hardware.get(hw)
    key = dtypes.canonical(dtype)
    if not calibrated:
        return Roofs(acc.peak(key), acc.memory_bandwidth(), 0.0, False, f"datasheet figures of {acc.name}")
    cal = layertime.default_calibration()
    peak = acc.peak(key, achievable=True) * positive(matmul_efficiency, "matmul_efficiency")
    if acc.has_achievable("bandwidth"):
        bandwidth, where = acc.memory_bandwidth(achievable=True), "its achievable bandwidth"
    else:
        measured = hardware.get(cal.catalog)
        share = cal.bandwidth / measured.memory_bandwidth()
        bandwidth = acc.memory_bandwidth() * share
        where = f"its datasheet bandwidth x {share:.2f} (a copy's share on the measured {measured.name})"
    floor = cal.floor_s if floor_s is None else float(floor_s)
    return Roofs(peak, bandwidth, floor, True,
                 f"achievable matmul rate of {acc.name} x {matmul_efficiency:.3g}, {where}, "
                 f"a floor of {floor * 1e6:.1f} us per kernel"
                 + (f" ({cal.source})" if floor_s is None else " (fitted on published runs)"))


def kernel_time(k: layertime.Kernel, r: Roofs) -> float:
    """t0 + max(F / P, B / BW) for one kernel (t0 = 0 for the bound)."""
    return r.floor_s + max(k.flops / r.peak_flops, k.bytes / r.bandwidth)


def kernels_time(ks, r: Roofs) -> float:
    return sum(kernel_time(k, r) for k in ks)


# --- the kernels of one layer on one GPU ----------------------------------------------------------


def shard(model, tp=1):
    """The part of ``model``'s layer one of ``tp`` tensor-parallel GPUs holds: 1/tp of the heads and of the MLP.

    Query heads must divide; K/V heads are split as far as they go (fewer K/V
    heads than GPUs: each GPU keeps one, a copy, as Megatron-LM does).
    """
    M, t = models.get(model), whole(tp, "tp")
    if M.heads % t:
        raise InvalidValue(f"{M.name} has {M.heads} attention heads, not a multiple of tp = {t}: "
                           f"choose tp among {', '.join(str(x) for x in _divisors(M.heads) if x <= 64)}.")
    changes = {"heads": M.heads // t, "kv_heads": max(1, M.kv_heads // t), "d_ff": max(1, M.d_ff // t)}
    if M.moe:
        changes["moe_d_ff"] = max(1, (M.moe_d_ff or 0) // t)
    return dataclasses.replace(M, **changes)


def _divisors(n: int) -> list[int]:
    return [x for x in range(1, n + 1) if n % x == 0]


def _kernel(name, op, cost, kind, scale=1.0) -> layertime.Kernel:
    return layertime.Kernel(name, op, float(cost.flops) * scale, float(cost.bytes) * scale, kind)


def _scaled(k: layertime.Kernel, scale: float, flops_scale=None, name=None) -> layertime.Kernel:
    return layertime.Kernel(name or k.name, k.op, k.flops * (scale if flops_scale is None else flops_scale),
                            k.bytes * scale, k.kind)


def _attention(S: shard, batch, seq, attention, b) -> list[layertime.Kernel]:
    """The attention core of one (sharded) layer: FlashAttention, or the three unfused kernels."""
    if S.mla:
        dqk, dv = S.qk_nope_head_dim + S.qk_rope_head_dim, S.v_head_dim
        head_dim, kv_heads = (dqk + dv) / 2, S.heads
    else:
        head_dim, kv_heads = S.head_dim, S.kv_heads
    if attention == "flash":
        cost = formulas.attention_fused(batch, S.heads, seq, head_dim, b, kv_heads=kv_heads, causal=True)
        return [_kernel("attn", "attn", cost, "attention")]
    return [_kernel(f"attn.{name}", "attn", cost, "attention" if name != "softmax" else "elementwise")
            for name, cost in formulas.attention_naive_kernels(batch, S.heads, seq, head_dim, b,
                                                               kv_heads=kv_heads).items()]


def _mla_projections(S, T, b) -> list[layertime.Kernel]:
    """Multi-head latent attention's projections (DeepSeek-V2, section 2.1.2) on T tokens, heads sharded."""
    d, H = S.d_model, S.heads
    nope, rope, v, c_q, c = S.qk_nope_head_dim, S.qk_rope_head_dim, S.v_head_dim, S.q_lora_rank, S.kv_lora_rank
    out = []
    if c_q:
        out += [_kernel("q.down", "q", formulas.gemm(T, c_q, d, b), "gemm"),
                _kernel("q.norm", "q", formulas.rmsnorm(T, c_q, b), "norm"),
                _kernel("q.up", "q", formulas.gemm(T, H * (nope + rope), c_q, b), "gemm")]
    else:
        out.append(_kernel("q", "q", formulas.gemm(T, H * (nope + rope), d, b), "gemm"))
    out += [_kernel("kv.down", "kv", formulas.gemm(T, c + rope, d, b), "gemm"),
            _kernel("kv.norm", "kv", formulas.rmsnorm(T, c, b), "norm"),
            _kernel("kv.up", "kv", formulas.gemm(T, H * (nope + v), c, b), "gemm")]
    return out


def _mlp(S, T, b, moe: bool, ep: int) -> list[layertime.Kernel]:
    """The MLP of one layer on T tokens: dense (width d_ff / t), or routed experts plus shared ones."""
    d = S.d_model
    if not moe:
        return [_kernel(f"mlp.{n}", f"mlp.{n}" if n != "act" else "mlp.act", c,
                        "elementwise" if n == "act" else "gemm")
                for n, c in formulas.mlp_ops(T, d, S.d_ff, b, S.gated).items()]
    f, k, E = S.moe_d_ff, S.experts_per_token, S.experts
    local = max(1, E // ep)  # experts on this GPU
    routed = T * k  # token-expert pairs this GPU computes, the same share of every GPU's tokens, balanced
    per_expert = routed / local
    out = [_kernel("router", "router", formulas.gemm(T, E, d, b), "gemm")]
    for n, c in formulas.mlp_ops(per_expert, d, f, b, S.gated).items():
        out.append(_kernel(f"experts.{n}", "experts", c, "elementwise" if n == "act" else "gemm", scale=local))
    if S.shared_experts:
        for n, c in formulas.mlp_ops(T, d, f * S.shared_experts, b, S.gated).items():
            out.append(_kernel(f"shared.{n}", "shared", c, "elementwise" if n == "act" else "gemm"))
    return out


def layer_kernels(model, batch, seq, tp=1, cp=1, ep=1, sequence_parallel=True, attention="flash", moe=None,
                  dtype="bf16", eager=False) -> list[layertime.Kernel]:
    """The forward kernels of one decoder layer on one GPU, for ``batch`` sequences of ``seq`` tokens.

    The GPU holds 1/``tp`` of the heads and of the MLP (:func:`shard`) and 1/``cp``
    of the tokens (context parallelism splits the sequence in balanced chunks,
    so attention's work splits evenly too). With ``sequence_parallel`` the norms
    and residual adds run on 1/``tp`` of the tokens (Korthikanti et al. 2022,
    section 4.2.2); without it every TP rank repeats them. ``moe``: the layer's
    MLP is the mixture of experts (default: when the model has one), its experts
    spread over ``ep`` GPUs. A dense model's kernels are the layer model's
    (:func:`roofkit.layertime.kernels`); ``attention='unfused'`` replaces
    FlashAttention by the three kernels that write the scores to HBM. ``eager``:
    the kernels PyTorch eager runs (:func:`roofkit.layertime.kernels`).
    """
    M = models.get(model)
    t, c, e = whole(tp, "tp"), whole(cp, "cp"), whole(ep, "ep")
    if attention not in ATTENTION:
        raise InvalidValue(f"attention must be one of {', '.join(ATTENTION)}; got {attention!r}.")
    S = shard(M, t)
    b = dtypes.bytes_per_element(dtype)
    B, s = positive(batch, "batch"), whole(seq, "seq")
    T = B * s
    moe = M.moe if moe is None else bool(moe)
    if not (M.moe or M.mla):
        every = layertime.kernels(S, B, s, dtype=dtype, eager=eager)
        ks = [k for k in every if k.op != "attn"]
        at = next(i for i, k in enumerate(every) if k.op == "attn")
        ks[at:at] = _attention(S, B, s, attention, b)
    else:
        ks = [_kernel("norm1", "norm1", formulas.rmsnorm(T, S.d_model, b), "norm")]
        if S.mla:
            ks += _mla_projections(S, T, b)
        else:
            width = (S.heads + 2 * S.kv_heads) * S.head_dim
            ks.append(_kernel("qkv", "qkv", formulas.gemm(T, width, S.d_model, b), "gemm"))
        ks += _attention(S, B, s, attention, b)
        width = S.heads * (S.v_head_dim if S.mla else S.head_dim)
        residual = formulas.elementwise(T * S.d_model, 1, 2, 1, b)
        ks += [_kernel("out", "out", formulas.gemm(T, S.d_model, width, b), "gemm"),
               _kernel("residual1", "residual1", residual, "elementwise"),
               _kernel("norm2", "norm2", formulas.rmsnorm(T, S.d_model, b), "norm")]
        ks += _mlp(S, T, b, moe, e)
        ks.append(_kernel("residual2", "residual2", residual, "elementwise"))
    out = []
    for k in ks:
        replicated = k.kind == "norm" or k.name.startswith("residual")
        out.append(_scaled(k, 1 / (c * (t if sequence_parallel and replicated else 1))))
    return out


def backward_kernels(forward) -> list[layertime.Kernel]:
    """The backward kernels of ``forward`` (see the module's docstring for the factors)."""
    out = []
    for k in forward:
        if k.kind == "gemm":
            out.append(_scaled(k, BACKWARD_GEMM, name=f"{k.name}.bwd"))
        elif k.kind == "attention" and k.name == "attn":  # FlashAttention
            out.append(_scaled(k, 2.0, BACKWARD_FLASH, name="attn.bwd"))
        else:  # unfused attention matmuls, softmax, norms, activations, residuals
            out.append(_scaled(k, 2.0, name=f"{k.name}.bwd"))
    return out


def recompute_kernels(forward, recompute) -> list[layertime.Kernel]:
    """What the backward pass reruns of ``forward``: all of it (full), the attention core (selective), nothing."""
    mode = recompute_mode(recompute)
    if mode == "full":
        return list(forward)
    if mode == "selective":
        return [k for k in forward if k.op == "attn"]
    return []


def head_kernels(model, batch, seq, tp=1, cp=1, dtype="bf16") -> list[layertime.Kernel]:
    """The final norm, the output layer (vocabulary split over the TP ranks) and the cross-entropy, forward."""
    M = models.get(model)
    b = dtypes.bytes_per_element(dtype)
    t, c = whole(tp, "tp"), whole(cp, "cp")
    T = positive(batch, "batch") * whole(seq, "seq") / c
    V = math.ceil(M.vocab / t)
    return [_kernel("final_norm", "head", formulas.rmsnorm(T / t, M.d_model, b), "norm"),
            _kernel("lm_head", "head", formulas.gemm(T, V, M.d_model, b), "gemm"),
            _kernel("cross_entropy", "head", formulas.softmax(T, V, b), "elementwise")]


def optimizer_s(params, hw, calibrated=False) -> float:
    """Seconds of one Adam step over ``params`` parameters at the HBM bandwidth (datasheet or achievable)."""
    r = roofs(hw, calibrated=calibrated)
    return positive(params, "params") * ADAM_BYTES_PER_PARAM / r.bandwidth if params else 0.0


# --- one micro-batch -----------------------------------------------------------------------------


@dataclass(frozen=True)
class MicrobatchTime:
    """One micro-batch through one GPU's share of ONE layer (dense and MoE layers apart) and of the head."""

    forward_s: float  # a dense layer (or the first dense layers of an MoE model)
    backward_s: float
    recompute_s: float
    moe_forward_s: float = 0.0  # an MoE layer
    moe_backward_s: float = 0.0
    moe_recompute_s: float = 0.0
    head_forward_s: float = 0.0
    head_backward_s: float = 0.0
    attention_forward_s: float = 0.0  # the attention core's share of forward_s
    kernels: int = 0
    roofs: Roofs | None = None

    @property
    def layer_s(self) -> float:
        """A dense layer: forward, backward and recomputation."""
        return self.forward_s + self.backward_s + self.recompute_s

    @property
    def moe_layer_s(self) -> float:
        return self.moe_forward_s + self.moe_backward_s + self.moe_recompute_s

    @property
    def head_s(self) -> float:
        return self.head_forward_s + self.head_backward_s

    def to_dict(self) -> dict:
        return asdict(self) | {"layer_s": self.layer_s, "moe_layer_s": self.moe_layer_s, "head_s": self.head_s}


def microbatch(model, hw, batch, seq, tp=1, cp=1, ep=1, sequence_parallel=True, attention="flash",
               recompute="none", calibrated=False, dtype="bf16", matmul_efficiency=1.0,
               roofs_: Roofs | None = None) -> MicrobatchTime:
    """Time of one micro-batch of ``batch`` sequences through one layer and the head, on one GPU of ``hw``.

    Forward, backward and recomputation (``recompute``: 'none', 'selective',
    'full') of one layer's share (:func:`layer_kernels`), each kernel at the
    roofline of :func:`roofs` (bound) or with the floor and the achievable roofs
    (``calibrated``).
    """
    M = models.get(model)
    r = roofs_ or roofs(hw, dtype, calibrated, matmul_efficiency)
    mode = recompute_mode(recompute)
    args = (M, batch, seq, tp, cp, ep, sequence_parallel, attention)

    def passes(moe: bool):
        fwd = layer_kernels(*args, moe=moe, dtype=dtype)
        return fwd, backward_kernels(fwd), recompute_kernels(fwd, mode)

    fwd, bwd, rec = passes(False)
    attention_s = kernels_time([k for k in fwd if k.op == "attn"], r)
    moe = (0.0, 0.0, 0.0)
    n = len(fwd) + len(bwd) + len(rec)
    if M.moe:
        mf, mb, mr = passes(True)
        moe = (kernels_time(mf, r), kernels_time(mb, r), kernels_time(mr, r))
    head = head_kernels(M, batch, seq, tp, cp, dtype)
    return MicrobatchTime(kernels_time(fwd, r), kernels_time(bwd, r), kernels_time(rec, r), *moe,
                          kernels_time(head, r), kernels_time(backward_kernels(head), r), attention_s, n, r)


def compare_training(dataset=None) -> list[dict]:
    """The step model's forward and backward against layers timed as training runs them (``roofkit measure``).

    For each ``training`` case of a layers dataset (:func:`roofkit.measure.layers.load_layers`):
    the layer's eager kernels (:func:`layer_kernels`), its backward (:func:`backward_kernels`),
    each at the roofs and floor calibrated on the same dataset's inference layers
    (:func:`roofkit.layertime.calibrate`). Rows: label, measured and predicted forward and backward
    seconds, and their ratios (predicted / measured). An empty list when the dataset has no training cases
    (the H200 one shipped with roofkit predates them).
    """
    from ..catalogs.measured import load_layers  # deferred: catalogs.measured costs ~7 ms; only comparisons read it

    data = load_layers(dataset)
    if not data.training:
        return []
    cal = layertime.calibrate(data)
    r = Roofs(cal.peak("bf16"), cal.bandwidth, cal.floor_s, True, cal.source)
    rows = []
    for case in data.training:
        shape = models.get(case.model)
        if (shape.d_model, shape.heads, shape.kv_heads, shape.d_ff, shape.head_dim) != \
                (case.d, case.H, case.KV, case.ff, case.head_dim):
            raise InvalidValue(f"the measured {case.model!r} has another shape than the catalog's.")
        fwd = layer_kernels(shape, case.batch, case.seq, eager=True)
        f_s, b_s = kernels_time(fwd, r), kernels_time(backward_kernels(fwd), r)
        rows.append({"label": case.label, "measured_forward_s": case.forward_s, "measured_backward_s": case.backward_s,
                     "forward_s": f_s, "backward_s": b_s, "forward_ratio": f_s / case.forward_s,
                     "backward_ratio": b_s / case.backward_s})
    return rows
