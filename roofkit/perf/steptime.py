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

Precision per kernel (``recipe``, :mod:`roofkit.perf.recipe`): ``dtype`` alone
runs every kernel in it, as it always did, except ``dtype='fp8'``, which is
Transformer Engine's default recipe: the linear layers' GEMMs in FP8 (forward,
dgrad, wgrad), attention, norms, activations and the output layer in BF16. A
kernel then carries its precision (:attr:`roofkit.layertime.Kernel.precision`)
and runs at that precision's rate (:meth:`Roofs.peak`); an FP8 GEMM reads its
operands at 1 byte (plus their block scales) and writes its output in BF16.
Every operand entering a low-precision GEMM is cast first, an ``elementwise``
kernel named ``cast.<gemm>.<tensor>`` that reads the BF16 tensor and writes the
FP8 copy and its transpose (:func:`cast_kernels`): the GEMM's input in the
forward pass, the gradient of its output in the backward pass, and its weight
once a step (:func:`weight_cast_kernels`: Transformer Engine keeps the FP8
weights of the first micro-batch for the others, its ``is_first_microbatch``);
with current scaling each cast is preceded by ``cast.<gemm>.<tensor>.amax``,
one more read of the tensor for its amax.

    >>> fp8 = layer_kernels("llama-3-8b", 1, 8192, dtype="fp8")
    >>> {k.name: k.precision for k in fp8 if k.name in ("qkv", "attn", "norm1", "mlp.down")}
    {'norm1': 'bf16', 'qkv': 'fp8', 'attn': 'bf16', 'mlp.down': 'fp8'}
    >>> [k.name for k in fp8][:4]
    ['norm1', 'cast.qkv.input', 'qkv', 'attn']

    >>> t = microbatch("llama-3-8b", "h100", batch=1, seq=8192)
    >>> round(t.backward_s / t.forward_s, 2)              # backward over forward, one GPU, no recomputation
    2.06
    >>> round(microbatch("llama-3-8b", "h100", 1, 8192, recompute="full").recompute_s / t.forward_s, 2)
    1.0
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass, field, replace

from .. import dtypes, formulas
from ..catalogs import hardware, models
from . import layertime
from . import recipe as recipes
from ..errors import InvalidValue
from ..units import positive, whole

__all__ = ["ATTENTION", "RECOMPUTE", "ADAM_BYTES_PER_PARAM", "BACKWARD_GEMM", "BACKWARD_FLASH", "Roofs", "roofs",
           "shard", "layer_kernels", "backward_kernels", "recompute_kernels", "head_kernels", "mtp_kernels",
           "cast_kernels", "weight_cast_kernels", "kernel_time", "kernels_time", "MicrobatchTime", "microbatch", "optimizer_s",
           "recompute_mode", "compare_training"]

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
    """What a kernel runs at: matmul FLOP/s, HBM bandwidth, and the floor every kernel pays.

    ``peak_flops`` is the matmul rate of ``precision`` (a recipe's base precision), the
    rate of every kernel without a precision of its own; ``peaks`` holds the rates of
    the recipe's other precisions (an FP8 GEMM's), datasheet or achievable as
    ``peak_flops`` is (:meth:`peak`).
    """

    peak_flops: float
    bandwidth: float
    floor_s: float = 0.0
    calibrated: bool = False
    source: str = "datasheet"
    precision: str | None = None
    peaks: dict = field(default_factory=dict, hash=False)

    def peak(self, precision=None) -> float:
        """The matmul rate of ``precision`` (None: :attr:`peak_flops`, the roofs' own)."""
        if precision is None or precision == self.precision:
            return self.peak_flops
        if precision in self.peaks:
            return self.peaks[precision]
        raise InvalidValue(f"these roofs have no {precision} matmul rate; they have: "
                           f"{', '.join([self.precision or 'their own', *self.peaks])}. Build them with "
                           "roofs(..., recipe=) for the recipe whose kernels run on them.")

    def scaled(self, share: float) -> "Roofs":
        """The same roofs with every matmul rate times ``share``."""
        return replace(self, peak_flops=self.peak_flops * share, peaks={p: v * share for p, v in self.peaks.items()})

    def to_dict(self) -> dict:
        return asdict(self)


def _recipe(dtype, recipe) -> recipes.Recipe:
    """``recipe`` (a name or a Recipe) where given, else what ``dtype`` alone means (:func:`roofkit.perf.recipe.from_dtype`)."""
    return recipes.from_dtype(dtype) if recipe is None else recipes.get(recipe)


def _check_part(acc, rec: recipes.Recipe, calibrated: bool) -> None:
    """One clear error where ``acc`` cannot run ``rec``'s low-precision kernels (the base precision's own
    errors are the catalog's, as before recipes)."""
    for p in [p for p in rec.compute_precisions if p != rec.base]:
        what = rec.describe(p)
        if p not in acc.peak_flops:
            raise InvalidValue(f"recipe {rec.name!r} runs {what} in {p}, and the {acc.name} has no {p} peak in the "
                               f"catalog (it has: {', '.join(acc.peak_flops)}); the recipes it can run: "
                               f"{', '.join(recipes.supported(acc))}.")
        if calibrated and not acc.has_achievable(p):
            raise InvalidValue(f"recipe {rec.name!r} runs {what} in {p}; calibrated, they need the achievable {p} "
                               f"matmul rate of the {acc.name}, and the catalog has none (achievable rates: "
                               f"{', '.join(acc.achievable_flops) or 'none'}). Use the bound (calibrated=False; "
                               "on the command line, leave out --calibrated), or a recipe it can run calibrated: "
                               f"{', '.join(recipes.supported(acc, True)) or 'none'}.")
    for p in rec.needs:
        if p not in acc.peak_flops:
            raise InvalidValue(f"recipe {rec.name!r} needs tensor cores that apply block scales (Blackwell; the "
                               f"catalog's parts with an {p} peak), and the {acc.name} has no {p} peak; the recipes "
                               f"it can run: {', '.join(recipes.supported(acc))}.")


def roofs(hw, dtype="bf16", calibrated=False, matmul_efficiency=1.0, floor_s=None, recipe=None,
          achievable=False) -> Roofs:
    """The datasheet roofs of ``hw`` (the bound), or its achievable ones with the per-kernel floor (calibrated).

    Calibrated: the catalog's achievable matmul rate times ``matmul_efficiency``;
    its achievable bandwidth, or, where none is published, the datasheet's times
    the share a copy reaches on the H200 measured with roofkit; the floor of
    :func:`roofkit.layertime.default_calibration` (or ``floor_s``). A rate for
    each precision ``recipe`` (default: ``dtype``'s, :func:`roofkit.perf.recipe.from_dtype`)
    computes in: an FP8 GEMM at the FP8 rate, the rest at the base precision's.
    ``achievable`` (the bound only): the best measured matmul rates instead of the datasheet's.
    """
    acc = hardware.get(hw)
    rec = _recipe(dtype, recipe)
    key = rec.base
    _check_part(acc, rec, calibrated)
    others = [p for p in rec.compute_precisions if p != key]
    if not calibrated:
        return Roofs(acc.peak(key, achievable=achievable), acc.memory_bandwidth(), 0.0, False,
                     f"datasheet figures of {acc.name}" + (" (achievable matmul rate)" if achievable else ""), key,
                     {p: acc.peak(p, achievable=achievable) for p in others})
    if achievable:
        raise InvalidValue("achievable=True is the bound at the measured matmul rates; calibrated=True already "
                           "uses them: choose one.")
    cal = layertime.default_calibration()
    share = positive(matmul_efficiency, "matmul_efficiency")
    peak = acc.peak(key, achievable=True) * share
    peaks = {p: acc.peak(p, achievable=True) * share for p in others}
    bandwidth, where = layertime.achievable_bandwidth(acc)
    floor = cal.floor_s if floor_s is None else float(floor_s)
    rates = "rate" if not others else f"rates ({', '.join([key, *others])})"
    return Roofs(peak, bandwidth, floor, True,
                 f"achievable matmul {rates} of {acc.name} x {matmul_efficiency:.3g}, {where}, "
                 f"a floor of {floor * 1e6:.1f} us per kernel"
                 + (f" ({cal.source})" if floor_s is None else " (fitted on published runs)"), key, peaks)


def kernel_time(k: layertime.Kernel, r: Roofs) -> float:
    """t0 + max(F / P, B / BW) for one kernel (t0 = 0 for the bound), P the rate of the kernel's precision.

    A cast to a GEMM's low precision (``cast.*``) costs nothing in the bound: at best it is fused into the
    kernel that produced the tensor (Transformer Engine's ``LayerNormLinear`` and fused cast-transpose
    write the FP8 copy as they go). The calibrated estimate pays it as a kernel of its own.
    """
    if not r.calibrated and k.name.startswith("cast."):
        return 0.0
    return r.floor_s + max(k.flops / r.peak(k.precision), k.bytes / r.bandwidth)


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


def _kernel(name, op, cost, kind, scale=1.0, precision=None) -> layertime.Kernel:
    return layertime.Kernel(name, op, float(cost.flops) * scale, float(cost.bytes) * scale, kind, precision)


def _scaled(k: layertime.Kernel, scale: float, flops_scale=None, name=None) -> layertime.Kernel:
    return layertime.Kernel(name or k.name, k.op, k.flops * (scale if flops_scale is None else flops_scale),
                            k.bytes * scale, k.kind, k.precision, k.shape)


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


def _gemm_kernel(name, op, shape, b) -> layertime.Kernel:
    rows, n, k, count = shape
    return _kernel(name, op, formulas.gemm(rows, n, k, b), "gemm", scale=count)


def _mla_projections(S, T, b) -> list[layertime.Kernel]:
    """Multi-head latent attention's projections (DeepSeek-V2, section 2.1.2) on T tokens, heads sharded."""
    shapes = _linear_shapes(S, T, moe=False, ep=1)
    out = []
    if S.q_lora_rank:
        out += [_gemm_kernel("q.down", "q", shapes["q.down"], b),
                _kernel("q.norm", "q", formulas.rmsnorm(T, S.q_lora_rank, b), "norm"),
                _gemm_kernel("q.up", "q", shapes["q.up"], b)]
    else:
        out.append(_gemm_kernel("q", "q", shapes["q"], b))
    out += [_gemm_kernel("kv.down", "kv", shapes["kv.down"], b),
            _kernel("kv.norm", "kv", formulas.rmsnorm(T, S.kv_lora_rank, b), "norm"),
            _gemm_kernel("kv.up", "kv", shapes["kv.up"], b)]
    return out


def _linear_shapes(S, T, moe: bool, ep: int) -> dict[str, tuple]:
    """The (rows, n, k, count) of each linear GEMM of one (sharded) layer on T tokens: ``count`` GEMMs of
    [rows, k] @ [k, n], by kernel name (the attention projections, the output projection, the MLP or the
    experts, as :func:`layer_kernels` and :func:`roofkit.formulas.transformer_layer_ops` build them)."""
    d, H = S.d_model, S.heads
    if S.mla:  # DeepSeek-V2, section 2.1.2
        nope, rope, v = S.qk_nope_head_dim, S.qk_rope_head_dim, S.v_head_dim
        c_q, c = S.q_lora_rank, S.kv_lora_rank
        shapes = ({"q.down": (T, c_q, d, 1), "q.up": (T, H * (nope + rope), c_q, 1)} if c_q
                  else {"q": (T, H * (nope + rope), d, 1)})
        shapes |= {"kv.down": (T, c + rope, d, 1), "kv.up": (T, H * (nope + v), c, 1)}
        width = H * v
    else:
        _, width, kv_width = formulas._head_sizes(d, H, S.kv_heads, S.head_dim)
        shapes = {"qkv": (T, width + 2 * kv_width, d, 1)}
    shapes["out"] = (T, d, width, 1)
    if not moe:
        return shapes | {"mlp.up": (T, S.d_ff, d, 1), "mlp.gate": (T, S.d_ff, d, 1), "mlp.down": (T, d, S.d_ff, 1)}
    f, local = S.moe_d_ff, max(1, S.experts // ep)
    rows = T * S.experts_per_token / local  # tokens per local expert, balanced (as _mlp spreads them)
    shapes |= {"router": (T, S.experts, d, 1), "experts.up": (rows, f, d, local), "experts.gate": (rows, f, d, local),
               "experts.down": (rows, d, f, local)}
    if S.shared_experts:
        g = f * S.shared_experts
        shapes |= {"shared.up": (T, g, d, 1), "shared.gate": (T, g, d, 1), "shared.down": (T, d, g, 1)}
    return shapes


def _mlp(S, T, b, moe: bool, ep: int) -> list[layertime.Kernel]:
    """The MLP of one layer on T tokens: dense (width d_ff / t), or routed experts plus shared ones.

    The routed experts run as one grouped GEMM per matrix (Megatron-Core's
    ``--moe-grouped-gemm``), one group per expert on this GPU, each with its
    balanced share of the token-expert pairs: each expert GEMM kernel carries its
    ``shape`` (rows per expert, n, k, experts), which :func:`grouped_gemm_time`
    reads to run it at the rate a grouped GEMM reaches with that few rows.
    """
    d = S.d_model
    if not moe:
        return [_kernel(f"mlp.{n}", f"mlp.{n}" if n != "act" else "mlp.act", c,
                        "elementwise" if n == "act" else "gemm")
                for n, c in formulas.mlp_ops(T, d, S.d_ff, b, S.gated).items()]
    f, E = S.moe_d_ff, S.experts
    shapes = _linear_shapes(S, T, True, ep)
    per_expert, _, _, local = shapes["experts.up"]  # balanced: each local expert's share of T x top_k pairs
    out = [_kernel("router", "router", formulas.gemm(T, E, d, b), "gemm")]
    for n, c in formulas.mlp_ops(per_expert, d, f, b, S.gated).items():
        kernel = _kernel(f"experts.{n}", "experts", c, "elementwise" if n == "act" else "gemm", scale=local)
        out.append(replace(kernel, shape=shapes[f"experts.{n}"]) if n != "act" else kernel)
    if S.shared_experts:
        for n, c in formulas.mlp_ops(T, d, f * S.shared_experts, b, S.gated).items():
            out.append(_kernel(f"shared.{n}", "shared", c, "elementwise" if n == "act" else "gemm"))
    return out


def grouped_gemm_rows(k: layertime.Kernel) -> float | None:
    """Rows per expert of an experts' grouped-GEMM kernel (op 'experts', with the ``shape`` :func:`_mlp` gives
    it), from its FLOPs, so that the 1/cp split of :func:`layer_kernels` and the backward's two GEMMs
    (:data:`BACKWARD_GEMM`) leave it right; None for any other kernel."""
    if k.op != "experts" or k.kind != "gemm" or not k.shape:
        return None
    _, n, inner, count = k.shape
    passes = BACKWARD_GEMM if k.name.endswith(".bwd") else 1.0
    return k.flops / (2 * n * inner * count * passes)


def grouped_gemm_time(k: layertime.Kernel, r: Roofs, imbalance=1.0) -> float:
    """:func:`kernel_time` of one kernel, the experts' grouped GEMMs as the estimate runs them.

    With calibrated roofs an expert GEMM runs at the share of its matmul rate
    that :func:`roofkit.parallel.experts.grouped_gemm_share` gives for its rows
    per expert (DeepGEMM's published grouped GEMMs, ``data/grouped_gemm.toml``),
    and does the busiest GPU's ``imbalance`` x the mean's work; with the bound's
    roofs, and for every other kernel, :func:`kernel_time` as it is.
    """
    from .parallel.experts import grouped_gemm_share  # deferred: perf.parallel imports this module

    rows = grouped_gemm_rows(k)
    if not r.calibrated or rows is None:
        return kernel_time(k, r)
    rate = r.peak(k.precision) * grouped_gemm_share(rows)
    return r.floor_s + positive(imbalance, "imbalance") * max(k.flops / rate, k.bytes / r.bandwidth)


def layer_kernels(model, batch, seq, tp=1, cp=1, ep=1, sequence_parallel=True, attention="flash", moe=None,
                  dtype="bf16", eager=False, recipe=None) -> list[layertime.Kernel]:
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

    ``recipe`` (default: what ``dtype`` means, :func:`roofkit.perf.recipe.from_dtype`):
    each kernel in its family's precision, with the casts of the low-precision
    GEMMs' inputs before them (:func:`cast_kernels`; the module's docstring).
    """
    M = models.get(model)
    t, c, e = whole(tp, "tp"), whole(cp, "cp"), whole(ep, "ep")
    if attention not in ATTENTION:
        raise InvalidValue(f"attention must be one of {', '.join(ATTENTION)}; got {attention!r}.")
    rec = _recipe(dtype, recipe)
    if rec.attention != rec.base and attention != "flash":
        raise InvalidValue(f"recipe {rec.name!r} runs attention in {rec.attention} with FlashAttention-3's fused "
                           f"kernel; attention={attention!r} has none: use attention='flash' or another recipe.")
    S = shard(M, t)
    b = dtypes.bytes_per_element(rec.base)
    B, s = positive(batch, "batch"), whole(seq, "seq")
    T = B * s
    moe = M.moe if moe is None else bool(moe)
    if not (M.moe or M.mla):
        every = layertime.kernels(S, B, s, dtype=rec.base, eager=eager)
        ks = [k for k in every if k.op != "attn"]
        at = next(i for i, k in enumerate(every) if k.op == "attn")
        ks[at:at] = _attention(S, B, s, attention, b)
    else:
        ks = [_kernel("norm1", "norm1", formulas.rmsnorm(T, S.d_model, b), "norm")]
        shapes = _linear_shapes(S, T, moe=False, ep=e)
        ks += _mla_projections(S, T, b) if S.mla else [_gemm_kernel("qkv", "qkv", shapes["qkv"], b)]
        ks += _attention(S, B, s, attention, b)
        residual = formulas.elementwise(T * S.d_model, 1, 2, 1, b)
        ks += [_gemm_kernel("out", "out", shapes["out"], b),
               _kernel("residual1", "residual1", residual, "elementwise"),
               _kernel("norm2", "norm2", formulas.rmsnorm(T, S.d_model, b), "norm")]
        ks += _mlp(S, T, b, moe, e)
        ks.append(_kernel("residual2", "residual2", residual, "elementwise"))
    out = []
    for k in ks:
        replicated = k.kind == "norm" or k.name.startswith("residual")
        out.append(_scaled(k, 1 / (c * (t if sequence_parallel and replicated else 1))))
    if rec.uniform:
        return out
    return _with_recipe(out, rec, _linear_shapes(S, T / c, moe, e), _attention_inputs(S, T / c))


# --- precision per kernel (roofkit.perf.recipe) ---------------------------------------------------


def _family_precision(k: layertime.Kernel, rec: recipes.Recipe) -> str:
    """The precision ``rec`` gives a forward kernel: by its kind, and the output layer and the router by name."""
    if k.kind == "gemm":
        return rec.head if k.op == "head" else rec.router if k.name == "router" else rec.linear
    return rec.attention if k.kind == "attention" else rec.base


def _attention_inputs(S, T) -> float:
    """Elements of Q, K and V on T tokens of one (sharded) layer: what an FP8 attention casts."""
    if S.mla:
        return T * S.heads * (2 * (S.qk_nope_head_dim + S.qk_rope_head_dim) + S.v_head_dim)
    _, width, kv_width = formulas._head_sizes(S.d_model, S.heads, S.kv_heads, S.head_dim)
    return T * (width + 2 * kv_width)


def _shape_of(k: layertime.Kernel, shapes: dict):
    """The GEMM's (rows, n, k, count) where ``shapes`` names it and its FLOPs agree; None otherwise."""
    shape = shapes.get(k.name)
    if shape is None:
        return None
    rows, n, inner, count = shape
    return shape if math.isclose(2 * rows * n * inner * count, k.flops, rel_tol=1e-9) else None


def _gemm_cost(k: layertime.Kernel, role: str, p: str, rec: recipes.Recipe) -> formulas.Cost:
    """One of a linear layer's GEMMs (``role``: 'fprop', 'dgrad', 'wgrad') with its two operands in ``p`` and
    its output in the base precision. ``k``: the forward kernel (its ``shape``, else its bytes at the
    base precision scaled to ``p``'s, output included: the estimate where roofkit cannot name the shape)."""
    hi, lo = dtypes.bytes_per_element(rec.base), rec.element_bytes(p)
    if k.shape is None:
        base_bytes = k.bytes * hi / rec.element_bytes(k.precision or rec.base)
        return formulas.Cost(k.flops, base_bytes * lo / hi)
    rows, n, inner, count = k.shape
    m_, n_, k_ = {"fprop": (rows, n, inner), "dgrad": (rows, inner, n), "wgrad": (inner, n, rows)}[role]
    c = formulas.gemm(m_, n_, k_, lo)  # both operands at lo; the output, m_ x n_, is written at hi
    return formulas.Cost(c.flops * count, (c.bytes + m_ * n_ * (hi - lo)) * count)


def _operand_elements(k: layertime.Kernel, tensor: str, rec: recipes.Recipe) -> float:
    """Elements of a GEMM's 'input' [rows, k], 'weight' [k, n] or 'grad' (of its output) [rows, n]; where the
    shape is unknown, a third of the elements its bytes count each (an estimate)."""
    if k.shape is None:
        return k.bytes / rec.element_bytes(k.precision or rec.base) / 3
    rows, n, inner, count = k.shape
    return {"input": rows * inner, "weight": inner * n, "grad": rows * n}[tensor] * count


def cast_kernels(name: str, op: str, elements: float, precision: str, recipe, orientations=None
                 ) -> list[layertime.Kernel]:
    """The cast of a tensor of ``elements`` values from the recipe's base precision to ``precision``.

    ``cast.<name>``: reads each element once (2 bytes in BF16) and writes it in ``precision``
    (1 byte in FP8, plus its block scale: :meth:`roofkit.perf.recipe.Recipe.element_bytes`)
    ``orientations`` times: 2 by default, the copy and its transpose, as Transformer Engine's
    fused cast-transpose writes them for dgrad and wgrad (1 for FlashAttention-3's FP8 inputs,
    which it transposes itself). One multiply per element. With a scale from the tensor's own
    amax (current scaling, NVFP4's per-tensor scale), ``cast.<name>.amax`` first: one more read.

        >>> [(k.name, k.bytes) for k in cast_kernels("qkv.input", "qkv", 1000, "fp8", "fp8-current")]
        [('cast.qkv.input.amax', 2000.0), ('cast.qkv.input', 4000.0)]
    """
    rec = recipes.get(recipe)
    o = recipes.ORIENTATIONS if orientations is None else whole(orientations, "orientations")
    hi, lo = dtypes.bytes_per_element(rec.base), rec.element_bytes(precision)
    read = formulas.elementwise(elements, 1, 1, 0, hi)
    cast = read + formulas.elementwise(elements, 0, 0, o, lo)
    out = [_kernel(f"cast.{name}.amax", op, read, "elementwise", precision=rec.base)] if rec.tensor_amax else []
    return out + [_kernel(f"cast.{name}", op, cast, "elementwise", precision=rec.base)]


# GEMMs that read the same tensor as another one: its low-precision copy is made once (the MLP's gate and up
# projections read the normed input; latent attention's query and KV down-projections both read it too)
_SAME_INPUT = {"mlp.gate": "mlp.up", "experts.gate": "experts.up", "shared.gate": "shared.up", "q": "q.down",
               "kv.down": "q.down"}


def _with_recipe(ks, rec: recipes.Recipe, shapes: dict, attention_inputs: float) -> list[layertime.Kernel]:
    """Forward kernels in their families' precisions, each low-precision GEMM (and FP8 attention) after the
    cast of its input (once for GEMMs that read the same tensor)."""
    out, cast = [], set()
    for k in ks:
        p = _family_precision(k, rec)
        if p == rec.base:
            out.append(replace(k, precision=p))
        elif k.kind == "gemm":
            g = replace(k, precision=p, shape=_shape_of(k, shapes))
            tensor = (_SAME_INPUT.get(k.name, k.name), p)
            if tensor not in cast:
                out += cast_kernels(f"{k.name}.input", k.op, _operand_elements(g, "input", rec), p, rec)
                cast.add(tensor)
            out.append(replace(g, bytes=float(_gemm_cost(g, "fprop", p, rec).bytes)))
        else:  # FlashAttention-3's FP8 forward: Q, K and V cast; the output written in the base precision
            out += cast_kernels("attn.qkv", k.op, attention_inputs, p, rec, orientations=1)
            out.append(replace(k, precision=p,
                               bytes=k.bytes * rec.element_bytes(p) / dtypes.bytes_per_element(rec.base)))
    return out


def _gemm_backward(k: layertime.Kernel, rec: recipes.Recipe | None) -> list[layertime.Kernel]:
    """A GEMM's backward: the gradient of its input (dgrad) and of its weight (wgrad), one kernel when both run
    in one precision; the gradient of its output cast first where either runs in a low precision."""
    if rec is None or k.precision is None:  # every kernel in one precision: the forward's, twice
        return [_scaled(k, BACKWARD_GEMM, name=f"{k.name}.bwd")]
    base = rec.base
    linear = k.op != "head" and k.name != "router"
    dgrad, wgrad = (rec.dgrad, rec.wgrad) if linear else (k.precision, k.precision)
    if dgrad == wgrad == k.precision == base:
        return [_scaled(k, BACKWARD_GEMM, name=f"{k.name}.bwd")]
    low = dgrad if dgrad != base else wgrad
    out = cast_kernels(f"{k.name}.grad", k.op, _operand_elements(k, "grad", rec), low, rec) if low != base else []
    d, w = _gemm_cost(k, "dgrad", dgrad, rec), _gemm_cost(k, "wgrad", wgrad, rec)
    if dgrad == wgrad:
        both = d + w
        return out + [replace(k, name=f"{k.name}.bwd", flops=float(both.flops), bytes=float(both.bytes),
                              precision=dgrad)]
    return out + [replace(k, name=f"{k.name}.{role}", flops=float(c.flops), bytes=float(c.bytes), precision=p)
                  for role, c, p in (("dgrad", d, dgrad), ("wgrad", w, wgrad))]


def backward_kernels(forward, recipe=None) -> list[layertime.Kernel]:
    """The backward kernels of ``forward`` (see the module's docstring for the factors).

    ``recipe``: the one ``forward`` was built with (:func:`layer_kernels`), for the
    precisions of dgrad, wgrad and attention's backward, and the casts of the
    gradients; None: each backward kernel in its forward kernel's precision. A
    forward cast has no backward kernel of its own.
    """
    rec = None if recipe is None else recipes.get(recipe)
    out = []
    for k in forward:
        if k.name.startswith("cast."):
            continue
        if k.kind == "gemm":
            out += _gemm_backward(k, rec)
        elif k.kind == "attention" and k.name == "attn":  # FlashAttention
            bwd = _scaled(k, 2.0, BACKWARD_FLASH, name="attn.bwd")
            if rec is not None and k.precision is not None and rec.attention_backward != k.precision:
                bwd = replace(bwd, precision=rec.attention_backward, bytes=bwd.bytes * rec.element_bytes(
                    rec.attention_backward) / rec.element_bytes(k.precision))
            out.append(bwd)
        else:  # unfused attention matmuls, softmax, norms, activations, residuals
            out.append(_scaled(k, 2.0, name=f"{k.name}.bwd"))
    return out


def weight_cast_kernels(forward, recipe=None) -> list[layertime.Kernel]:
    """The casts of the weights of ``forward``'s low-precision GEMMs (``cast.<gemm>.weight``): once a step, not
    once a micro-batch (Transformer Engine casts them on the first micro-batch, ``is_first_microbatch``,
    and keeps the copies for the others)."""
    rec = recipes.get(recipe) if recipe is not None else None
    if rec is None or rec.uniform:
        return []
    return [c for k in forward if k.kind == "gemm" and k.precision not in (None, rec.base)
            for c in cast_kernels(f"{k.name}.weight", k.op, _operand_elements(k, "weight", rec), k.precision, rec)]


def recompute_kernels(forward, recompute) -> list[layertime.Kernel]:
    """What the backward pass reruns of ``forward``: all of it (full), the attention core (selective), nothing."""
    mode = recompute_mode(recompute)
    if mode == "full":
        return list(forward)
    if mode == "selective":
        return [k for k in forward if k.op == "attn"]
    return []


def head_kernels(model, batch, seq, tp=1, cp=1, dtype="bf16", recipe=None) -> list[layertime.Kernel]:
    """The final norm, the output layer (vocabulary split over the TP ranks) and the cross-entropy, forward
    (each in its family's precision under ``recipe``: the output layer's GEMM in BF16 in every named recipe)."""
    M = models.get(model)
    rec = _recipe(dtype, recipe)
    b = dtypes.bytes_per_element(rec.base)
    t, c = whole(tp, "tp"), whole(cp, "cp")
    T = positive(batch, "batch") * whole(seq, "seq") / c
    V = math.ceil(M.vocab / t)
    shape = (T, V, M.d_model, 1)
    ks = [_kernel("final_norm", "head", formulas.rmsnorm(T / t, M.d_model, b), "norm"),
          _gemm_kernel("lm_head", "head", shape, b),
          _kernel("cross_entropy", "head", formulas.softmax(T, V, b), "elementwise")]
    return ks if rec.uniform else _with_recipe(ks, rec, {"lm_head": shape}, 0.0)


def mtp_kernels(model, batch, seq, tp=1, cp=1, sequence_parallel=True, dtype="bf16", recipe=None
                ) -> list[layertime.Kernel]:
    """The forward kernels of one multi-token prediction module besides its Transformer block, which runs as one
    more layer of the model (DeepSeek-V3, arXiv:2412.19437, section 2.2): the RMSNorms of the previous depth's
    hidden state and of the next token's embedding, their concatenation projected from 2d to d (``M_k``,
    split over the TP ranks by output column as Megatron-Core's ``eh_proj``, a column-parallel linear layer in
    megatron/core/transformer/multi_token_prediction.py), and a second pass through the output head shared with
    the model, with its cross-entropy (:func:`head_kernels`). None for a model without such modules.

        >>> [k.name for k in mtp_kernels("deepseek-v3", 1, 4096)]
        ['mtp.norm_h', 'mtp.norm_emb', 'mtp.proj', 'final_norm', 'lm_head', 'cross_entropy']
        >>> mtp_kernels("llama-3-8b", 1, 4096)
        []
    """
    M = models.get(model)
    if not M.mtp_layers:
        return []
    rec = _recipe(dtype, recipe)
    b = dtypes.bytes_per_element(rec.base)
    t, c = whole(tp, "tp"), whole(cp, "cp")
    T = positive(batch, "batch") * whole(seq, "seq") / c
    rows = T / (t if sequence_parallel else 1)  # the norms run on this rank's tokens, as a layer's do
    shape = (T, math.ceil(M.d_model / t), 2 * M.d_model, 1)
    ks = [_kernel(f"mtp.norm_{x}", "mtp", formulas.rmsnorm(rows, M.d_model, b), "norm") for x in ("h", "emb")]
    ks.append(_gemm_kernel("mtp.proj", "mtp", shape, b))
    ks = ks if rec.uniform else _with_recipe(ks, rec, {"mtp.proj": shape}, 0.0)
    return ks + head_kernels(M, batch, seq, tp, cp, dtype, recipe=rec)


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
    # a low-precision recipe's casts of the weights: once a STEP, per layer (dense, MoE) and for the head
    weight_cast_s: float = 0.0
    moe_weight_cast_s: float = 0.0
    head_weight_cast_s: float = 0.0
    recipe: str | None = None  # the precision recipe's name (roofkit.perf.recipe)
    # one multi-token prediction module's projection and second pass through the head (mtp_kernels), forward and
    # backward; its Transformer block is one more layer (DeepSeek-V3's: an MoE layer), timed as the others
    mtp_forward_s: float = 0.0
    mtp_backward_s: float = 0.0
    mtp_weight_cast_s: float = 0.0  # its projection's weight cast, once a step (the head's is head_weight_cast_s)

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

    @property
    def mtp_s(self) -> float:
        """One multi-token prediction module's projection and head pass: forward and backward."""
        return self.mtp_forward_s + self.mtp_backward_s

    def to_dict(self) -> dict:
        return asdict(self) | {"layer_s": self.layer_s, "moe_layer_s": self.moe_layer_s, "head_s": self.head_s,
                               "mtp_s": self.mtp_s}


def microbatch(model, hw, batch, seq, tp=1, cp=1, ep=1, sequence_parallel=True, attention="flash",
               recompute="none", calibrated=False, dtype="bf16", matmul_efficiency=1.0,
               roofs_: Roofs | None = None, recipe=None, imbalance=1.0) -> MicrobatchTime:
    """Time of one micro-batch of ``batch`` sequences through one layer and the head, on one GPU of ``hw``.

    Forward, backward and recomputation (``recompute``: 'none', 'selective',
    'full') of one layer's share (:func:`layer_kernels`), each kernel at the
    roofline of :func:`roofs` (bound) or with the floor and the achievable roofs
    (``calibrated``), in its precision under ``recipe`` (default: ``dtype``'s);
    the weights' casts apart, once a step (:func:`weight_cast_kernels`). An MoE
    layer's expert GEMMs, forward, backward and recomputed, run as
    :func:`grouped_gemm_time` runs them: calibrated, at the grouped-GEMM share of
    the matmul rate for their rows per expert, the busiest GPU doing ``imbalance``
    (at least 1) x the mean's work; the bound at the datasheet roof, balanced. A
    model with multi-token prediction modules also gets one module's projection and
    second head pass (:func:`mtp_kernels`).
    """
    M = models.get(model)
    rcp = _recipe(dtype, recipe)
    r = roofs_ or roofs(hw, dtype, calibrated, matmul_efficiency, recipe=rcp)
    mode = recompute_mode(recompute)
    busiest = positive(imbalance, "imbalance")
    if busiest < 1:
        raise InvalidValue(f"imbalance is the busiest expert GPU's tokens over the mean, at least 1; got {imbalance!r}.")
    args = (M, batch, seq, tp, cp, ep, sequence_parallel, attention)

    def passes(moe: bool):
        fwd = layer_kernels(*args, moe=moe, dtype=dtype, recipe=rcp)
        return fwd, backward_kernels(fwd, rcp), recompute_kernels(fwd, mode)

    def experts_time(ks) -> float:
        return sum(grouped_gemm_time(k, r, busiest) for k in ks)

    fwd, bwd, rec = passes(False)
    attention_s = kernels_time([k for k in fwd if k.op == "attn"], r)
    moe = (0.0, 0.0, 0.0)
    n = len(fwd) + len(bwd) + len(rec)
    casts = {"weight_cast_s": kernels_time(weight_cast_kernels(fwd, rcp), r)}
    if M.moe:
        mf, mb, mr = passes(True)
        moe = (experts_time(mf), experts_time(mb), experts_time(mr))
        casts["moe_weight_cast_s"] = kernels_time(weight_cast_kernels(mf, rcp), r)
    head = head_kernels(M, batch, seq, tp, cp, dtype, recipe=rcp)
    casts["head_weight_cast_s"] = kernels_time(weight_cast_kernels(head, rcp), r)
    mtp = mtp_kernels(M, batch, seq, tp, cp, sequence_parallel, dtype, recipe=rcp)
    extra = {"mtp_forward_s": kernels_time(mtp, r), "mtp_backward_s": kernels_time(backward_kernels(mtp, rcp), r),
             "mtp_weight_cast_s": kernels_time(weight_cast_kernels([k for k in mtp if k.op == "mtp"], rcp), r)}
    return MicrobatchTime(kernels_time(fwd, r), kernels_time(bwd, r), kernels_time(rec, r), *moe,
                          kernels_time(head, r), kernels_time(backward_kernels(head, rcp), r), attention_s, n, r,
                          **casts, recipe=rcp.name, **extra)


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
