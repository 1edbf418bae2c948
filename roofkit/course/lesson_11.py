"""Lesson 11, the capstone: one transformer layer, end to end.

The model is a Llama-2-7B-shaped decoder layer (Touvron et al. 2023,
arXiv:2307.09288, and Meta's released config: hidden size 4096, 32 heads,
SwiGLU MLP of 11008, 32 layers, multi-head attention with as many K/V heads
as query heads). Every key places the layer's kernels
(:func:`roofkit.formulas.transformer_layer_ops`) on a catalog roofline
(:func:`roofkit.roofline.analyze`) and adds them up, so a variant may change
the shape, the workload or the accelerator.
"""

from __future__ import annotations

from .. import formulas, fusion, hardware, roofline, training
from ..quiz import Misconception, Question, register

# The weight GEMMs: the ops that hold the parameters, and the ones FP8 recipes run in FP8.
GEMMS = ("qkv", "out", "mlp.up", "mlp.gate", "mlp.down")

_MODEL = {"d_model": 4096, "n_heads": 32, "d_ff": 11008}
_SHAPE = "a Llama-2-7B-shaped layer (d_model {d_model}, {n_heads} heads, SwiGLU MLP with d_ff {d_ff})"


def _ops(batch, seq, d_model, n_heads, d_ff, kv_seq=None, dtype="bf16", fused_attention=True):
    return formulas.transformer_layer_ops(batch, seq, d_model, n_heads, d_ff, dtype, gated=True,
                                          fused_attention=fused_attention, kv_seq=kv_seq)


def _placed(ops, hw, dtype):
    return {name: roofline.analyze(cost, hw, dtype) for name, cost in ops.items()}


def _layer_time(batch, seq, d_model, n_heads, d_ff, hw, dtype, kv_seq=None):
    """Sum over the layer's kernels of max(T_math, T_mem)."""
    return sum(p.time_s for p in _placed(_ops(batch, seq, d_model, n_heads, d_ff, kv_seq, dtype), hw, dtype).values())


def _memory_share(batch, seq, d_model, n_heads, d_ff, hw, dtype, kv_seq=None):
    placed = _placed(_ops(batch, seq, d_model, n_heads, d_ff, kv_seq, dtype), hw, dtype)
    total = sum(p.time_s for p in placed.values())
    return sum(p.time_s for p in placed.values() if p.bound == "memory") / total


def _fp8_gemm_time(batch, seq, d_model, n_heads, d_ff, hw, kv_seq=None):
    """The layer's time with the weight GEMMs in FP8 (1-byte operands, FP8 peak), the rest in BF16."""
    bf16 = _placed(_ops(batch, seq, d_model, n_heads, d_ff, kv_seq, "bf16"), hw, "bf16")
    fp8 = _placed(_ops(batch, seq, d_model, n_heads, d_ff, kv_seq, "fp8"), hw, "fp8")
    return sum((fp8 if name in GEMMS else bf16)[name].time_s for name in bf16)


def _fp8_speedup(batch, seq, d_model, n_heads, d_ff, hw, kv_seq=None):
    return (_layer_time(batch, seq, d_model, n_heads, d_ff, hw, "bf16", kv_seq)
            / _fp8_gemm_time(batch, seq, d_model, n_heads, d_ff, hw, kv_seq))


def _fp8_peak_only_speedup(batch, seq, d_model, n_heads, d_ff, hw, kv_seq=None):
    """Every kernel at the FP8 peak, every tensor still BF16: only the compute-bound ones gain."""
    ops = _ops(batch, seq, d_model, n_heads, d_ff, kv_seq, "bf16")
    bf16, fast = _placed(ops, hw, "bf16"), _placed(ops, hw, "fp8")
    return sum(p.time_s for p in bf16.values()) / sum(p.time_s for p in fast.values())


def _params_per_layer(d_model, n_heads, d_ff):
    """Weights per layer, from the GEMMs' FLOPs: 2 FLOPs per weight per token."""
    ops = _ops(1, 1, d_model, n_heads, d_ff, kv_seq=1)
    return sum(ops[name].flops for name in GEMMS) / training.FORWARD_FLOPS_PER_PARAM_TOKEN


def _forward_mfu(batch, seq, d_model, n_heads, d_ff, n_layers, hw, dtype):
    """MFU of a forward pass that runs every kernel at its roofline bound; model FLOPs = 2N per token."""
    N = n_layers * _params_per_layer(d_model, n_heads, d_ff)
    model_flops = training.forward_backward(N, batch * seq)[0]
    seconds = n_layers * _layer_time(batch, seq, d_model, n_heads, d_ff, hw, dtype)
    return training.mfu(model_flops, seconds, hardware.get(hw).peak(dtype))


def _fusion_savings(batch, seq, d_model, n_heads, d_ff, hw, dtype):
    """Seconds each fusion saves per layer, starting from the fully unfused layer (no launch overhead)."""
    fused = _placed(_ops(batch, seq, d_model, n_heads, d_ff, dtype=dtype), hw, dtype)
    naive = _placed(_ops(batch, seq, d_model, n_heads, d_ff, dtype=dtype, fused_attention=False), hw, dtype)
    flash = sum(p.time_s for name, p in naive.items() if name.startswith("attn.")) - fused["attn"].time_s
    pair = fusion.chain(["residual_add", "rmsnorm"], n=batch * seq * d_model, bytes_per_element=dtype,
                        keep=("residual_add",)).time(hw, dtype, launch_overhead_s=0)
    residual_norm = 2 * (pair["unfused_s"] - pair["fused_s"])  # two residual+norm pairs per layer
    # SiLU(gate) * up in the epilogue of the (compute-bound) gate/up GEMM: the act kernel disappears
    swiglu = fused["mlp.act"].time_s
    return {"flash-attention": flash, "residual-rmsnorm": residual_norm, "swiglu-epilogue": swiglu}


def _fuse_first(**p):
    savings = _fusion_savings(**p)
    return max(savings, key=savings.get)


def _decode_throughput(batch, context, d_model, n_heads, d_ff, n_layers, hw, dtype, skip=()):
    """Tokens/s of batched decode: batch / (n_layers x the decode layer's time)."""
    placed = _placed(_ops(batch, 1, d_model, n_heads, d_ff, context, dtype), hw, dtype)
    layer = sum(p.time_s for name, p in placed.items() if name not in skip)
    return batch / (n_layers * layer)


def _gpu_most_memory_bound(batch, seq, d_model, n_heads, d_ff, dtype, gpus):
    shares = {g: _memory_share(batch, seq, d_model, n_heads, d_ff, g, dtype) for g in gpus}
    return max(shares, key=shares.get)


def _other(choice, key_fn):
    """A wrong choice as a misconception, unless a variant makes it the key."""
    return lambda **p: None if key_fn(**p) == choice else choice


_GPUS = ("h100", "a100", "mi300x", "l4")
_PREFILL = {"batch": 1, "seq": 4096, **_MODEL, "hw": "h100", "dtype": "bf16"}
# a class variant of the prefill layer: another workload or another accelerator (the shape stays Llama-2-7B's)
_PREFILL_VARIANTS = {"batch": (1, 2, 4), "seq": (1024, 2048, 8192), "hw": ("h100", "a100", "mi300x", "l40s")}

register(
    Question(
        id="l11.classify-attn",
        lesson="11",
        kind="choice",
        prompt=("Prefill of " + _SHAPE + ": batch {batch}, {seq} tokens, on {hw} in {dtype}. "
                "Is the op `{op}` memory-bound or compute-bound?"),
        params={**_PREFILL, "op": "attn"},
        variants={"seq": (256, 512, 1024, 2048, 16384), "hw": ("h100", "a100", "mi300x", "l4", "b200")},
        key=lambda op, batch, seq, d_model, n_heads, d_ff, hw, dtype:
            roofline.analyze(_ops(batch, seq, d_model, n_heads, d_ff, dtype=dtype)[op], hw, dtype).bound,
        choices=("memory", "compute"),
        hints=("Intensity first: FLOPs of the op over the bytes it moves, from formulas.transformer_layer_ops.",
               "The layer's `attn` is the fused (FlashAttention-style) kernel: the s x s scores never reach HBM. "
               "How do its FLOPs and its bytes grow with s?",
               "Compare its intensity with the ridge, hw.ridge(dtype)."),
        misconceptions=(
            Misconception("attention-is-memory-bound",
                          "That was true of attention as three kernels, with the s x s scores written to HBM and read "
                          "back. Fused, it reads Q, K, V and writes O once (bytes grow like s) while its FLOPs grow "
                          "like s^2: in prefill its intensity grows with the sequence length.",
                          answer=lambda op, batch, seq, d_model, n_heads, d_ff, hw, dtype:
                              "memory" if op == "attn" and roofline.analyze(_ops(batch, seq, d_model, n_heads, d_ff,
                                  dtype=dtype)[op], hw, dtype).bound == "compute" else None),
        ),
    ),
    Question(
        id="l11.layer-time",
        lesson="11",
        kind="numeric",
        prompt=("Predict the time of one prefill layer (" + _SHAPE + ", batch {batch}, {seq} tokens) on {hw} in "
                "{dtype}: the sum over its kernels of each kernel's roofline lower bound max(T_math, T_mem)."),
        params=dict(_PREFILL),
        variants=_PREFILL_VARIANTS,
        key=lambda **p: _layer_time(**p),
        unit="s",
        rtol=0.02,
        hints=("roofline.analyze(cost, hw, dtype).time_s is one kernel's lower bound.",
               "Add it up over every op of formulas.transformer_layer_ops, memory-bound ones included."),
        misconceptions=(
            Misconception("flops-only",
                          "That is the layer's FLOPs over the peak: it ignores the memory-bound ops because they have "
                          "few FLOPs. Their time is bytes / bandwidth, however few FLOPs they do.",
                          answer=lambda batch, seq, d_model, n_heads, d_ff, hw, dtype:
                              sum(_ops(batch, seq, d_model, n_heads, d_ff, dtype=dtype).values()).flops
                              / hardware.get(hw).peak(dtype)),
            Misconception("pessimistic-bound",
                          "That is the pessimistic bound, T_math + T_mem per kernel (no overlap). The question asks "
                          "for the sum of the lower bounds, max(T_math, T_mem).",
                          answer=lambda batch, seq, d_model, n_heads, d_ff, hw, dtype: sum(
                              p.time_upper_s for p in _placed(_ops(batch, seq, d_model, n_heads, d_ff, dtype=dtype),
                                                              hw, dtype).values())),
        ),
    ),
    Question(
        id="l11.memory-fraction",
        lesson="11",
        kind="numeric",
        prompt=("In that prefill layer (" + _SHAPE + ", batch {batch}, {seq} tokens, {hw}, {dtype}), what fraction "
                "of the predicted layer time (sum of lower bounds) is spent in memory-bound ops?"),
        params=dict(_PREFILL),
        variants=_PREFILL_VARIANTS,
        key=lambda **p: _memory_share(**p),
        unit="dimensionless",
        rtol=0.02,
        hints=("Sort the kernels by their `bound`, then add up `time_s` on each side.",
               "A fraction of time, not of FLOPs and not of the number of ops."),
        misconceptions=(
            Misconception("flops-share",
                          "That is the memory-bound ops' share of the FLOPs. Their share of the time is far larger: "
                          "their time is set by their bytes.",
                          answer=lambda batch, seq, d_model, n_heads, d_ff, hw, dtype: (lambda placed: sum(
                              p.flops for p in placed.values() if p.bound == "memory")
                              / sum(p.flops for p in placed.values()))(
                              _placed(_ops(batch, seq, d_model, n_heads, d_ff, dtype=dtype), hw, dtype))),
            Misconception("count-share",
                          "That is the fraction of the ops that are memory-bound, not of the time they take.",
                          answer=lambda batch, seq, d_model, n_heads, d_ff, hw, dtype: (lambda placed: sum(
                              p.bound == "memory" for p in placed.values()) / len(placed))(
                              _placed(_ops(batch, seq, d_model, n_heads, d_ff, dtype=dtype), hw, dtype))),
        ),
    ),
    Question(
        id="l11.mfu",
        lesson="11",
        kind="numeric",
        prompt=("A forward pass through all {n_layers} layers (" + _SHAPE + "; batch {batch}, {seq} tokens; no "
                "embedding or output layer) runs every kernel exactly at its roofline bound on {hw} in {dtype}. "
                "What MFU does that imply, counting model FLOPs as 6ND's forward share, 2N per token?"),
        params={**_PREFILL, "n_layers": 32},
        variants=_PREFILL_VARIANTS,
        key=lambda **p: _forward_mfu(**p),
        unit="dimensionless",
        rtol=0.02,
        hints=("N is the weights of the layer's GEMMs times the number of layers: each weight costs 2 FLOPs per "
               "token in the forward pass, so sum the GEMMs' FLOPs and divide by 2 and by the tokens.",
               "MFU = model FLOPs / (time x peak): training.mfu(training.forward_backward(N, tokens)[0], seconds, peak)."),
        misconceptions=(
            Misconception("counted-attention",
                          "That counts every FLOP of the layer, attention's score and value products included. This "
                          "question uses 6ND's forward share, 2N per token (attention's FLOPs are the PaLM extra term).",
                          answer=lambda batch, seq, d_model, n_heads, d_ff, n_layers, hw, dtype:
                              sum(_ops(batch, seq, d_model, n_heads, d_ff, dtype=dtype).values()).flops
                              / (_layer_time(batch, seq, d_model, n_heads, d_ff, hw, dtype)
                                 * hardware.get(hw).peak(dtype))),
        ),
    ),
    Question(
        id="l11.fuse-first",
        lesson="11",
        kind="choice",
        prompt=("Start from the fully unfused prefill layer (" + _SHAPE + ", batch {batch}, {seq} tokens, {hw}, "
                "{dtype}): attention as three kernels, separate residual-add and RMSNorm kernels, a separate SwiGLU "
                "kernel. Which single fusion saves the most time per layer?"),
        params=dict(_PREFILL),
        variants={"batch": (1, 4), "seq": (128, 512, 1024, 2048, 8192), "hw": ("h100", "a100", "mi300x", "b200")},
        key=_fuse_first,
        choices=("flash-attention", "residual-rmsnorm", "swiglu-epilogue"),
        hints=("A fusion saves the time of the HBM round trips it removes; the GEMMs stay compute-bound either way.",
               "Compare the size of the intermediates: T x d for the residual stream, T x d_ff for the MLP's "
               "activations, and the attention scores, batch x heads x s x s.",
               "formulas.transformer_layer_ops(..., fused_attention=False) lists the three attention kernels."),
        misconceptions=(
            Misconception("residual-norm-first",
                          "Residual-add and RMSNorm are memory-bound, so fusing them pays, but each moves only "
                          "T x d elements. Look for the largest tensor that makes a round trip through HBM.",
                          answer=_other("residual-rmsnorm", _fuse_first)),
            Misconception("swiglu-first",
                          "The SwiGLU kernel moves 3 T x d_ff elements: worth fusing, but is it the largest round "
                          "trip in the unfused layer? Count the attention kernels' bytes.",
                          answer=_other("swiglu-epilogue", _fuse_first)),
        ),
    ),
    Question(
        id="l11.fp8-speedup",
        lesson="11",
        kind="numeric",
        prompt=("Same prefill layer (" + _SHAPE + ", batch {batch}, {seq} tokens, {hw}). Run the five weight GEMMs in "
                "FP8 (1-byte operands, the FP8 peak) and keep everything else, attention included, in BF16. By what "
                "factor does the predicted layer time (sum of lower bounds) shrink?"),
        params={k: v for k, v in _PREFILL.items() if k != "dtype"},
        variants={"batch": (1, 4), "seq": (1024, 2048, 8192), "hw": ("h100", "mi300x", "b200")},
        key=lambda **p: _fp8_speedup(**p),
        unit="dimensionless",
        rtol=0.02,
        hints=("Build the ops twice, with bytes_per_element 'bf16' and 'fp8'; analyze the FP8 GEMMs at the 'fp8' peak.",
               "Only part of the time gets faster: the other ops keep their BF16 time. Amdahl's law "
               "(fusion.amdahl) with the GEMMs' share of the time gives nearly the same answer."),
        misconceptions=(
            Misconception("fp8-halves-everything",
                          "FP8 halves the time of the compute-bound GEMMs only. The memory-bound ops and the BF16 "
                          "attention keep their time, so the layer gains less than 2x (Amdahl's law).",
                          answer=lambda **p: 2.0),
            Misconception("attention-in-fp8",
                          "That runs every kernel at the FP8 peak, attention included. Here attention stays in BF16 "
                          "(as in FP8 training recipes such as Transformer Engine); only the weight GEMMs go to FP8.",
                          answer=lambda **p: _fp8_peak_only_speedup(**p)),
        ),
    ),
    Question(
        id="l11.decode-attn-bound",
        lesson="11",
        kind="choice",
        prompt=("Decode with " + _SHAPE + ": batch {batch}, one new token per sequence, a {context}-token context "
                "in the KV cache, on {hw} in {dtype}. Is the fused attention kernel `attn` memory-bound or compute-bound?"),
        params={"batch": 64, "context": 4096, **_MODEL, "hw": "h100", "dtype": "bf16"},
        key=lambda batch, context, d_model, n_heads, d_ff, hw, dtype:
            roofline.analyze(_ops(batch, 1, d_model, n_heads, d_ff, context, dtype)["attn"], hw, dtype).bound,
        choices=("memory", "compute"),
        hints=("In decode, attention reads each sequence's whole K and V cache to produce one output vector.",
               "Batching lets many tokens share one read of the weights. Do the sequences share a KV cache?"),
        misconceptions=(
            Misconception("batching-fixes-attention",
                          "Batching shares the weights across the sequences, not the KV caches: each sequence reads "
                          "its own K and V, about 2 FLOPs per element read, whatever the batch. Decode attention's "
                          "intensity stays near 1 FLOP/byte in BF16.",
                          answer=lambda **p: "compute"),
        ),
    ),
    Question(
        id="l11.decode-fp8-speedup",
        lesson="11",
        kind="numeric",
        prompt=("Decode with " + _SHAPE + " at batch {batch}, {context}-token context, on {hw}: store the five weight "
                "GEMMs' operands in FP8 and run them at the FP8 peak; attention (and its KV cache) and the small ops "
                "stay BF16. By what factor does the predicted decode layer time shrink?"),
        params={"batch": 1, "context": 4096, **_MODEL, "hw": "h100"},
        variants={"batch": (1, 8, 16, 32), "context": (1024, 2048, 8192, 16384)},
        key=lambda batch, context, **p: _fp8_speedup(batch, 1, kv_seq=context, **p),
        unit="dimensionless",
        rtol=0.02,
        hints=("Every decode kernel is memory-bound at this batch: what does a higher peak do for it?",
               "What FP8 does change is the bytes: the weights are read at 1 byte each.",
               "Amdahl again: the GEMMs' share of the time gets faster, attention's does not."),
        misconceptions=(
            Misconception("fp8-halves-everything",
                          "Attention reads a BF16 KV cache and keeps its time, so the layer gains less than 2x.",
                          answer=lambda **p: 2.0),
            Misconception("peak-cannot-help",
                          "True, the FP8 peak does nothing for a memory-bound kernel, but FP8 weights are half the "
                          "bytes: the memory-bound GEMMs get faster through their traffic.",
                          answer=lambda **p: 1.0),
        ),
    ),
    # --- end-of-lesson exercises -----------------------------------------------------------
    Question(
        id="l11.decode-batch",
        lesson="11",
        kind="numeric",
        prompt=("A 7B model with d_model = {d_model} decodes on {hw} in {dtype}. At what batch B does "
                "the decode step's (B x d) @ (d x d) weight GEMM first become compute-bound?"),
        params={"d_model": 4096, "hw": "h100", "dtype": "bf16"},
        variants={"hw": ("a100", "h100-pcie", "h200", "mi300x", "b200", "l40s", "l4")},
        key=lambda d_model, hw, dtype: roofline.decode_batch_to_compute_bound(d_model, hw, dtype),
        unit="dimensionless",
        rtol=0,  # one exact whole number
        hints=("Write the GEMM's intensity as a function of B with formulas.gemm(B, d, d, dtype) and set it equal "
               "to the ridge.",
               "The shortcut 'intensity = batch' drops the activations' bytes (B x d read, B x d written). Keep them.",
               "Solve I(B) = I* for B (sympy.solve), or let roofline.decode_batch_to_compute_bound do the search."),
        misconceptions=(
            Misconception("intensity-equals-batch",
                          "That uses 'intensity = batch' (2B/b), which is the B << d limit. Near the ridge the "
                          "activations (2 B d elements) are no longer small next to the weights (d^2), so the true "
                          "intensity is below B, and a larger batch is needed.",
                          answer=lambda d_model, hw, dtype: hardware.get(hw).ridge(dtype)),
            Misconception("claim-batch-64",
                          "A widely read source says decode turns compute-bound at batch 64. At 64 this GEMM's "
                          "intensity is about 62 FLOP/byte in BF16: a fraction of the ridge.",
                          answer=lambda **p: 64),
        ),
        points=2,
    ),
    Question(
        id="l11.decode-throughput",
        lesson="11",
        kind="numeric",
        prompt=("Decode throughput: " + _SHAPE + ", {n_layers} layers, decodes at batch {batch} with a {context}-token "
                "context on {hw} in {dtype}. If every kernel runs at its roofline bound, how many tokens per second "
                "does the whole batch produce? (Leave out the embedding and output layers.)"),
        params={"batch": 128, "context": 1024, **_MODEL, "n_layers": 32, "hw": "h100", "dtype": "bf16"},
        variants={"batch": (16, 64, 256), "context": (2048, 8192), "hw": ("h100", "a100", "mi300x", "b200")},
        key=lambda **p: _decode_throughput(**p),
        unit="1/s",
        rtol=0.02,
        hints=("One decode step makes `batch` tokens and takes n_layers x the decode layer's time.",
               "Use formulas.transformer_layer_ops(batch, 1, ..., kv_seq=context): the attention kernel reads every "
               "sequence's KV cache, and at this batch that matters."),
        misconceptions=(
            Misconception("ignored-kv-cache",
                          "That leaves out attention's time: at this batch each sequence's KV-cache read costs as "
                          "much as the weight reads it shares. Keep the `attn` kernel in the sum.",
                          answer=lambda **p: _decode_throughput(**p, skip=("attn",))),
            Misconception("linear-in-batch",
                          "Throughput grows with the batch only while the weight reads dominate; it is not batch-1 "
                          "throughput times the batch. Compute the step at this batch.",
                          answer=lambda batch, **p: batch * _decode_throughput(1, **p)),
        ),
        points=2,
    ),
    Question(
        id="l11.gpu-memory-share",
        lesson="11",
        kind="choice",
        prompt=("Prefill of " + _SHAPE + " (batch {batch}, {seq} tokens) in {dtype}. On which of these accelerators "
                "do the memory-bound ops take the largest share of the layer's predicted time?"),
        params={"batch": 1, "seq": 4096, **_MODEL, "dtype": "bf16"},
        key=lambda **p: _gpu_most_memory_bound(gpus=_GPUS, **p),
        choices=_GPUS,
        hints=("The ops' intensities are the same on every chip; what changes is the roofs.",
               "A memory-bound op takes bytes / bandwidth, a compute-bound GEMM FLOPs / peak. Their ratio scales "
               "with peak / bandwidth."),
        misconceptions=(
            Misconception("oldest-is-most-memory-bound",
                          "The A100 is slower at both math and memory. What sets the share is the ratio peak / "
                          "bandwidth, the ridge: a lower ridge makes the GEMMs relatively slower, so the memory-bound "
                          "ops take a smaller share.",
                          answer=lambda **p: None if _gpu_most_memory_bound(gpus=_GPUS, **p) == "a100" else "a100"),
        ),
        points=2,
    ),
)
