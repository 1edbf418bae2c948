"""Memory per GPU of a training layout: weights, gradients, optimizer states and activations.

Activations are counted tensor by tensor as Korthikanti et al. 2022
(arXiv:2205.05198, section 4) do: what each layer keeps for its backward pass,
per token (bytes b per element):

    attention  norm input d, QKV input d, Q H d_h, K and V 2 H_kv d_h, output-projection input H d_h
    MLP        norm input d, MLP input d, up (and gate) d_ff, activation output d_ff
    dropout    a 1-byte mask after attention and after the MLP (``dropout=True``)
    scores     without FlashAttention, the softmax output H s (and, with dropout, its mask
               and output) for each token against s keys: Korthikanti's 5 a s / h term

A GPT-3 layer (d_ff = 4d, no GQA, dropout, unfused attention) keeps
s b h (34 + 5 a s / h) bytes, the paper's equation 1. That is what an eager
implementation keeps (``tensors="megatron"``: every op saves its own inputs).

The backward pass needs less (``tensors="least"``, the bound): each tensor it
reads, stored once, and no matmul redone.

* a norm's backward can run from its output, which the next matmul keeps anyway
  (NVIDIA Apex's ``FusedRMSNorm``/``FusedLayerNorm`` with ``memory_efficient=True``
  save their output instead of their input); or the norm, a few memory-bound
  passes, is redone from its input (Megatron-Core's ``--recompute-modules
  layernorm``). Either way one d-wide tensor per norm, not two;
* the MLP's activation output (GELU(x), or SiLU(g) x u) is redone from what its
  own backward keeps (Megatron-Core's ``moe_act`` recomputation; PyTorch's
  compiler does the same for elementwise ops by default): f (or 2 f for a gated
  MLP) per token, not 2 f (3 f);
* a model without dropout (Llama) keeps no masks (``dropout=False``, the default).

For Llama 3 405B at TP 8 with sequence parallelism that is 43,520 bytes per token
and layer, against 65,024 for the eager count.

* tensor parallelism (t) splits the heads and the MLP; the norms' inputs, the
  two GEMM inputs and the dropout masks stay whole on every rank unless
  **sequence parallelism** splits them along the sequence: 10 + 24/t becomes 34/t
  (equations 2 and 4);
* recomputation: ``full`` keeps each layer's input only (2 s b h, / t with
  sequence parallelism); ``selective`` drops the attention scores (equation 6);
* pipeline parallelism: the stage that holds most keeps the activations of
  :func:`roofkit.parallel.pipeline.layers_in_flight` layer-micro-batches
  (Megatron-LM's 1F1B or interleaved order, the layers split as Llama 3 split them).
"""

from __future__ import annotations

from ...catalogs import models
from ...errors import InvalidValue
from ...units import positive, whole
from .experts import expert_dp
from .pipeline import layers_in_flight
from .sharding import policy_of, state_bytes

__all__ = ["activation_bytes", "memory_per_gpu", "layer_params", "expert_shards", "TENSORS"]

TENSORS = ("least", "megatron")  # what a layer keeps for its backward: the bound's least, or an eager implementation's


def activation_bytes(tokens, d_model, heads, kv_heads, head_dim, d_ff, gated=True, tp=1, recompute=False,
                     bytes_per_element=2, dropout=False, sequence_parallel=False, seq=None, attention="flash",
                     tensors="megatron"):
    """Activations one decoder layer keeps for its backward pass, for ``tokens`` tokens on one GPU.

    ``recompute``: False or 'none', 'selective', True or 'full'. ``seq`` (the
    sequence length) is needed only for unfused attention's scores.
    ``tensors``: 'megatron' (default), every op's saved inputs as Korthikanti et
    al. count them; 'least', what the backward pass must read (module docstring).

    >>> s, h, a = 2048, 12288, 96            # GPT-3 175B, one sequence, no parallelism (Korthikanti eq. 1)
    >>> activation_bytes(s, h, a, a, h // a, 4 * h, gated=False, dropout=True, seq=s, attention="unfused") \\
    ...     == s * h * (34 + 5 * a * s / h)
    True
    """
    from ..steptime import recompute_mode  # deferred: perf.steptime pulls in numpy (through formulas)

    T, d, H = positive(tokens, "tokens"), positive(d_model, "d_model"), positive(heads, "heads")
    Hkv, dh, f = positive(kv_heads, "kv_heads"), positive(head_dim, "head_dim"), positive(d_ff, "d_ff")
    b, t = positive(bytes_per_element, "bytes_per_element"), positive(tp, "tp")
    mode = recompute_mode(recompute)
    if tensors not in TENSORS:
        raise InvalidValue(f"tensors must be one of {', '.join(TENSORS)}; got {tensors!r}.")
    least = tensors == "least"
    split = t if sequence_parallel else 1
    if mode == "full":
        return T * d * b / split
    norms = 2 if least else 4  # per norm, its input and the next GEMM's input (its output), or one of them
    replicated = (norms * d * b + (2 * d if dropout else 0)) / split  # norm and GEMM inputs, dropout masks
    mlp = (2 if gated else 1) + (0 if least else 1)  # pre-activation(s), and the activation's output unless redone
    sharded = (H * dh + 2 * Hkv * dh + H * dh + f * mlp) * b / t
    scores = 0
    if attention == "unfused" and mode != "selective":
        s = positive(seq, "seq")
        scores = H * s * (b + (1 + b if dropout else 0)) / t
    return T * (replicated + sharded + scores)


def layer_params(model, tp=1, ep=1, etp=None) -> tuple[float, float]:
    """(dense, expert) parameters of all decoder layers, embeddings and head, and of the multi-token prediction
    modules (:attr:`roofkit.models.Model.mtp_params`), on one GPU.

    The dense ones split over the ``tp`` ranks; the routed experts over ``ep`` x ``etp``
    GPUs (Megatron-Core's expert-model-parallel and expert-tensor-parallel sizes,
    megatron/core/transformer/moe/README.md, "MoE Parallel Folding"), ``etp``
    defaulting to ``tp`` (the experts sharded over the TP ranks like the rest).

    >>> dense, experts = layer_params("qwen3-235b-a22b", tp=4, ep=32, etp=1)   # whole experts, 4 a GPU
    >>> round(experts / 1e9, 2) == round(94 * 4 * 3 * 4096 * 1536 / 1e9, 2)
    True
    """
    M = models.get(model)
    t, e = whole(tp, "tp"), whole(ep, "ep")
    split = e * (t if etp is None else whole(etp, "etp"))
    if not M.moe:
        return (M.params + M.mtp_params) / t, 0.0
    expert = (3 if M.gated else 2) * M.d_model * M.moe_d_ff * M.experts  # one layer's routed experts
    routed = M.moe_layers * expert + (M.mtp_layers * expert if M.is_moe_layer(M.layers - 1) else 0)
    return (M.params + M.mtp_params - routed) / t, routed / split


def expert_shards(shards, tp=1, ep=1, etp=None) -> float:
    """The expert-data-parallel degree: of the ``shards`` x ``tp`` GPUs of a pipeline stage that hold the same
    dense weights' shards, how many hold the same experts: shards x tp / (ep x etp) (``etp`` defaults to
    ``tp``: shards / ep, EP carved from the data-parallel ranks).

    >>> expert_shards(128, tp=1, ep=64, etp=1), expert_shards(8, tp=4, ep=32, etp=1), expert_shards(32, tp=8, ep=8)
    (2.0, 1.0, 4.0)
    """
    t = whole(tp, "tp")
    return float(expert_dp(t, 1, shards, ep, t if etp is None else etp))


def _widths(M):
    """Per-token widths of what a layer keeps: (Q, K and V, output input, MLP) for MHA/GQA, MLA, dense or MoE."""
    if M.mla:
        q, kv, out = M.heads * (M.qk_nope_head_dim + M.qk_rope_head_dim), \
            M.heads * (M.qk_nope_head_dim + M.qk_rope_head_dim + M.v_head_dim), M.heads * M.v_head_dim
    else:
        q, kv, out = M.heads * M.head_dim, 2 * M.kv_heads * M.head_dim, M.heads * M.head_dim
    return q, kv, out, M.mlp_width


def memory_per_gpu(model, microbatch_tokens, tp=1, pp=1, shards=1, zero=0, microbatches=1, recompute=False,
                   sequence_parallel=False, virtual_stages=1, seq=None, attention="flash", ep=1, policy=None,
                   dropout=False, tensors="least", etp=None) -> dict:
    """Bytes the GPU that holds most keeps: weights, gradients, optimizer states and activations, and their total.

    The GPU holds 1/(tp pp) of the parameters, its 1/(ep etp) of the routed
    experts (:func:`layer_params`; ``etp`` defaults to ``tp``), sharded further
    by ZeRO's ``zero`` stage and ``policy`` (:func:`~roofkit.parallel.sharding.state_bytes`):
    the dense ones over the ``shards`` data-parallel ranks (DP x CP), the experts
    over the expert-data-parallel ranks that hold the same experts,
    shards x tp / (ep x etp) (Megatron-Core's EDP, megatron/core/parallel_state.py,
    its expert data-parallel group); and the
    activations of ``microbatch_tokens`` tokens (its context-parallel share) per
    layer, for the layer-micro-batches that the pipeline stage holding most
    keeps at once (:func:`~roofkit.parallel.pipeline.layers_in_flight`). With full
    recomputation it keeps each layer's input, plus one layer rebuilt at a time.
    ZeRO-3 adds the buffers of the weights it gathers: two layers' worth.

    ``tensors='least'`` (default) is the bound: what the backward pass must read
    (module docstring); ``'megatron'`` an estimate of what an eager
    implementation keeps (Korthikanti et al.'s count). Without dropout masks
    unless ``dropout``.

    >>> bound = memory_per_gpu("llama-3.1-405b", 8192, tp=8, pp=16, shards=64, zero=3, microbatches=32,
    ...                        sequence_parallel=True, virtual_stages=8, policy="per-step")
    >>> eager = memory_per_gpu("llama-3.1-405b", 8192, tp=8, pp=16, shards=64, zero=3, microbatches=32,
    ...                        sequence_parallel=True, virtual_stages=8, policy="per-step", tensors="megatron")
    >>> round(bound["total"] / 1e9, 1), round(eager["total"] / 1e9, 1)     # Llama 3 405B on 8,192 H100s, GB
    (63.5, 88.4)
    """
    from ..steptime import recompute_mode  # deferred: perf.steptime pulls in numpy (through formulas)

    M = models.get(model)
    t, p = whole(tp, "tp"), whole(pp, "pp")
    dense, experts = layer_params(M, t, ep, etp)
    params_here = (dense + experts) / p
    states = state_bytes(dense / p, shards, zero, policy=policy)
    if experts:  # the experts' states shard over the ranks that hold the same experts
        expert_states = state_bytes(experts / p, expert_shards(shards, t, ep, etp), zero, policy=policy)
        states = {k: states[k] + expert_states[k] for k in states}
    _, held = layers_in_flight(M.layers, p, microbatches, virtual_stages)  # layer-micro-batches at once
    q, kv, out, mlp = _widths(M)
    head_dim = (q + out) / (2 * M.heads)  # MLA: Q and the output's input average to H x head_dim
    shape = dict(tokens=microbatch_tokens, d_model=M.d_model, heads=M.heads, kv_heads=kv / (2 * head_dim),
                 head_dim=head_dim, d_ff=mlp, gated=M.gated, tp=t, sequence_parallel=sequence_parallel, seq=seq,
                 attention=attention, dropout=dropout, tensors=tensors)
    mode = recompute_mode(recompute)
    per_layer = activation_bytes(**shape, recompute="none" if mode == "full" else mode)
    if mode == "full":
        activations = activation_bytes(**shape, recompute="full") * held + per_layer
    else:
        activations = per_layer * held
    parts = {"weights": states["weights"], "grads": states["grads"], "optimizer": states["optimizer"],
             "activations": activations}
    if zero == 3 and policy_of(zero, policy) != "per-step":
        parts["gathered"] = 2 * (dense + experts) / M.layers * 2  # two layers' BF16 weights, gathered
    return parts | {"total": sum(parts.values())}
