"""Lesson 11, the capstone: one transformer layer, end to end, then held against a real H200.

The model is Llama 3 8B from the model catalog (:mod:`roofkit.models`: Meta's
released config, grouped-query attention with 8 K/V heads for 32 query heads).
Every key places the layer's kernels (:meth:`roofkit.models.Model.layer_ops`)
on a catalog roofline (:func:`roofkit.roofline.analyze`, :mod:`roofkit.layerview`)
and adds them up, or predicts the layer with :mod:`roofkit.layertime`, so a
variant may change the model, the workload or the accelerator. The questions
of the last section use the H200 dataset shipped with roofkit (one card,
2026-11-30, PyTorch 2.11, CUDA events, the L2 flushed before each run).
"""

from __future__ import annotations

from ... import formulas
from ...perf import fusion, layertime, roofline, training
from ...catalogs import hardware, models
from ...plots import layers as layerview
from ..quiz import Misconception, Question, register

GEMMS = layerview.GEMMS  # the weight GEMMs: the ops that hold the parameters, and the ones FP8 recipes run in FP8


def _ops(model, batch, seq, kv_seq=None, dtype="bf16", fused_attention=True):
    return models.get(model).layer_ops(batch, seq, kv_seq, dtype, fused_attention=fused_attention)


def _placed(ops, hw, dtype):
    return layerview.place(ops, hw, dtype)


def _layer_time(model, batch, seq, hw, dtype, kv_seq=None):
    """Sum over the layer's kernels of max(T_math, T_mem)."""
    return layerview.total(_placed(_ops(model, batch, seq, kv_seq, dtype), hw, dtype))


def _memory_share(model, batch, seq, hw, dtype, kv_seq=None):
    placed = _placed(_ops(model, batch, seq, kv_seq, dtype), hw, dtype)
    return layerview.total(placed, [n for n, p in placed.items() if p.bound == "memory"]) / layerview.total(placed)


def _memory_share_bounds_of(model, batch, seq, hw, dtype, bounds_seq):
    """The memory-bound ops' share of the layer's time, each op's bound taken from a prompt of ``bounds_seq``
    tokens (the lesson's table) instead of its own: attention counted compute-bound when it is not."""
    placed = _placed(_ops(model, batch, seq, dtype=dtype), hw, dtype)
    other = _placed(_ops(model, batch, bounds_seq, dtype=dtype), hw, dtype)
    return layerview.total(placed, [n for n, p in other.items() if p.bound == "memory"]) / layerview.total(placed)


def _qkv(model, batch, seq, dtype, width=None):
    """The Q, K, V projection of a prefill: [T, d] @ [d, width], width = (H + 2 KV) d_h unless given."""
    shape = models.get(model)
    width = width or (shape.heads + 2 * shape.kv_heads) * shape.head_dim
    return formulas.gemm(batch * seq, width, shape.d_model, dtype)


def _qkv_us(model, batch, seq, hw, dtype, width=None, no_overlap=False, memory_only=False):
    p = roofline.analyze(_qkv(model, batch, seq, dtype, width), hw, dtype)
    return 1e6 * (p.time_upper_s if no_overlap else p.t_mem_s if memory_only else p.time_s)


def _fp8_gemm_time(model, batch, seq, hw, kv_seq=None):
    """The layer's time with the weight GEMMs in FP8 (1-byte operands, FP8 peak), the rest in BF16."""
    bf16 = _placed(_ops(model, batch, seq, kv_seq, "bf16"), hw, "bf16")
    fp8 = _placed(_ops(model, batch, seq, kv_seq, "fp8"), hw, "fp8")
    return sum((fp8 if name in GEMMS else bf16)[name].time_s for name in bf16)


def _fp8_speedup(model, batch, seq, hw, kv_seq=None):
    return _layer_time(model, batch, seq, hw, "bf16", kv_seq) / _fp8_gemm_time(model, batch, seq, hw, kv_seq)


def _fp8_peak_only_speedup(model, batch, seq, hw, kv_seq=None):
    """Every kernel at the FP8 peak, every tensor still BF16: only the compute-bound ones gain."""
    ops = _ops(model, batch, seq, kv_seq, "bf16")
    return layerview.total(_placed(ops, hw, "bf16")) / layerview.total(_placed(ops, hw, "fp8"))


def _weights_in_gemms(model):
    """Weights of one layer's GEMMs, from their FLOPs: 2 FLOPs per weight per token."""
    ops = _ops(model, 1, 1, kv_seq=1)
    return sum(ops[name].flops for name in GEMMS) / training.FORWARD_FLOPS_PER_PARAM_TOKEN


def _forward_mfu(model, batch, seq, hw, dtype):
    """MFU of a forward pass that runs every kernel at its roofline bound; model FLOPs = 2N per token."""
    layers = models.get(model).layers
    N = layers * _weights_in_gemms(model)
    seconds = layers * _layer_time(model, batch, seq, hw, dtype)
    return training.mfu(training.forward_backward(N, batch * seq)[0], seconds, hardware.get(hw).peak(dtype))


def _fusion_savings(model, batch, seq, hw, dtype):
    """Seconds each fusion saves per layer, starting from the fully unfused layer (no launch overhead)."""
    fused = _placed(_ops(model, batch, seq, dtype=dtype), hw, dtype)
    naive = _placed(_ops(model, batch, seq, dtype=dtype, fused_attention=False), hw, dtype)
    flash = sum(p.time_s for name, p in naive.items() if name.startswith("attn.")) - fused["attn"].time_s
    pair = fusion.chain(["residual_add", "rmsnorm"], n=batch * seq * models.get(model).d_model,
                        bytes_per_element=dtype, keep=("residual_add",)).time(hw, dtype, launch_overhead_s=0)
    residual_norm = 2 * (pair["unfused_s"] - pair["fused_s"])  # two residual+norm pairs per layer
    # SiLU(gate) * up in the epilogue of the (compute-bound) gate/up GEMM: the act kernel disappears
    swiglu = fused["mlp.act"].time_s
    return {"flash-attention": flash, "residual-rmsnorm": residual_norm, "swiglu-epilogue": swiglu}


def _fuse_first(**p):
    savings = _fusion_savings(**p)
    return max(savings, key=savings.get)


def _decode_throughput(model, batch, context, hw, dtype, skip=()):
    """Tokens/s of batched decode: batch / (layers x the decode layer's time)."""
    return layerview.decode_rate(model, batch, context, hw, dtype, skip)[0]


def _gpu_most_memory_bound(model, batch, seq, dtype, gpus):
    shares = {g: _memory_share(model, batch, seq, g, dtype) for g in gpus}
    return max(shares, key=shares.get)


def _other_gpu(gpu):
    """``gpu`` as a wrong choice for l11.gpu-memory-share, unless it is the key or the A100 slip's."""
    def value(**p):
        return None if gpu in (_gpu_most_memory_bound(gpus=_GPUS, **p), "a100") else gpu
    return value


def _apart(wrong, key_fn, rtol):
    """A wrong value as a misconception, unless a variant's numbers bring it within (about) rtol of the key."""
    def value(**p):
        v = wrong(**p)
        if v is None:  # the wrong value does not exist for these numbers
            return None
        k = key_fn(**p)
        return None if abs(v - k) <= 1.1 * rtol * abs(k) else v
    return value


def _other(choice, key_fn):
    """A wrong choice as a misconception, unless a variant makes it the key."""
    return lambda **p: None if key_fn(**p) == choice else choice


# --- the H200 section: the calibrated model of roofkit.layertime ----------------------------------


def _h200(model, batch, context, hw="h200", calibrated=True, fused=False):
    """µs of one decode layer: the calibrated prediction (or, fused=True, one kernel per op with the floor)."""
    t = layertime.predict(model, batch, 1, context, hw, "bf16", calibrated=calibrated)
    return 1e6 * (t.fused_s if fused else t.time_s)


def _model_decode_rate(model, batch, context, hw="h200", calibrated=True, fused=False, layers=None):
    """Tokens per second of a whole model's decode step (every layer, no embedding or output layer) at ``batch``:
    one token per sequence per step, the step ``layers`` x one layer's prediction (the calibrated one, or the
    datasheet roofline sum, or one kernel per op)."""
    layers = models.get(model).layers if layers is None else layers
    return batch / (layers * 1e-6 * _h200(model, batch, context, hw, calibrated, fused))


def _achievable_sum(model, batch, seq, kv_seq, hw, peak=True, bandwidth=True):
    """The ideal kernels' roofline sum with the achievable peak and/or bandwidth (else the datasheet's)."""
    acc = hardware.get(hw)
    P = acc.peak("bf16", achievable=peak)
    B = acc.memory_bandwidth(achievable=bandwidth)
    return sum(roofline.time_bounds(k.flops, k.bytes, P, B)[0]
               for k in layertime.kernels(model, batch, seq, kv_seq, "bf16"))


def _achievable_factor(model, batch, context, hw):
    return (_achievable_sum(model, batch, 1, context, hw)
            / _achievable_sum(model, batch, 1, context, hw, peak=False, bandwidth=False))


def _peak_ratio(hw):
    """The datasheet peak over the best measured matmul: the factor for a compute-bound kernel."""
    acc = hardware.get(hw)
    return acc.peak("bf16") / acc.peak("bf16", achievable=True)


def _bandwidth_ratio(hw):
    acc = hardware.get(hw)
    return acc.memory_bandwidth() / acc.memory_bandwidth(achievable=True)


def _floor_share(model, batch, context, hw, kernels=None, of_roofline=False):
    t = layertime.predict(model, batch, 1, context, hw, "bf16", calibrated=True)
    floors = (kernels or t.kernels) * t.floor_s
    return floors / (t.time_s - t.kernels * t.floor_s if of_roofline else t.time_s)


def _eager_extra_us(model, batch, seq, hw, part="all"):
    """µs per layer that the eager kernel list costs over one kernel per op (calibrated model)."""
    t = layertime.predict(model, batch, seq, None, hw, "bf16", calibrated=True)
    extra = t.time_s - t.fused_s
    floors = (t.kernels - len(t.ops)) * t.floor_s  # the extra kernels' floors
    return 1e6 * {"all": extra, "bytes": extra - floors, "floors": floors}[part]


def _graph_verdict(**_):
    """'kernel' when replaying the measured layers as CUDA graphs saves far less than their kernels' floors."""
    from ...measure.layers import load_layers  # deferred: measure costs ~40 ms, which every quiz command would pay

    data, floor = load_layers(), layertime.default_calibration().floor_s
    saved = sum(c.layer_s - c.layer_graph_s for c in data.cases)
    floors = sum(len(layertime.kernels(c.model, c.batch, c.seq, None if c.causal else c.kv_seq, eager=True)) * floor
                 for c in data.cases)
    return "kernel" if saved < 0.5 * floors else "launch"


_MODEL = "Llama-3-8B"
_GPUS = ("h100", "a100", "mi300x", "l4")
_PREFILL = {"model": _MODEL, "batch": 1, "seq": 4096, "hw": "h100", "dtype": "bf16"}
# a class variant of the prefill layer: another model, workload or accelerator
_PREFILL_VARIANTS = {"model": (_MODEL, "Llama-2-7B", "Llama-3-70B"), "batch": (1, 2, 4), "seq": (1024, 2048, 8192),
                     "hw": ("h100", "a100", "mi300x", "l40s")}
_LAYER = "one {model} layer"
# the lesson prints the 4096-token layer op by op; its questions ask about a prompt an eighth as long (at half
# as long, 2048 tokens, the memory-bound share, 9.86%, sat within 2% of the qkv row's 9.7% share in that table)
_SHORT_PROMPT = {**_PREFILL, "seq": 512}

register(
    Question(
        id="l11.qkv-time",
        lesson="11",
        kind="numeric",
        prompt=("Prefill of " + _LAYER + " (its shape as the model catalog gives it, grouped-query attention "
                "included): batch {batch}, {seq} tokens, on {hw} in {dtype}. The Q, K and V projections run as one "
                "GEMM. What is its roofline lower bound max(T_math, T_mem), in µs?"),
        params=dict(_PREFILL),
        variants={"seq": (512, 1024, 2048, 8192), "hw": ("h100", "a100", "mi300x", "b200")},
        key=lambda model, batch, seq, hw, dtype: _qkv_us(model, batch, seq, hw, dtype),
        unit="µs",
        rtol=0.01,
        hints=("The GEMM multiplies the [T, d] activations (T = batch x seq tokens) by one weight matrix as wide as "
               "Q, K and V together.",
               "With grouped-query attention Q is heads x head_dim wide, but K and V are only kv_heads x head_dim "
               "each.",
               "FLOPs = 2 T d width; bytes = (T d + d width + T width) x 2; then compare FLOPs / peak with bytes / "
               "bandwidth and keep the larger."),
        misconceptions=(
            Misconception("mha-width",
                          "That is a QKV projection 3 d wide, as in multi-head attention. With grouped-query "
                          "attention K and V have only kv_heads heads each: the width is (heads + 2 kv_heads) "
                          "head_dim.",
                          answer=lambda model, batch, seq, hw, dtype:
                              _qkv_us(model, batch, seq, hw, dtype, width=3 * models.get(model).d_model)),
            Misconception("no-overlap",
                          "That is T_math + T_mem, the time if math and memory traffic never overlapped. The "
                          "roofline's lower bound is the larger of the two, max(T_math, T_mem).",
                          answer=lambda model, batch, seq, hw, dtype:
                              _qkv_us(model, batch, seq, hw, dtype, no_overlap=True)),
            Misconception("memory-time",
                          "That is the time to move its bytes. This GEMM is far right of the ridge: its FLOPs "
                          "decide its time.",
                          answer=lambda model, batch, seq, hw, dtype:
                              _qkv_us(model, batch, seq, hw, dtype, memory_only=True)),
        ),
    ),
    Question(
        id="l11.classify-attn",
        lesson="11",
        kind="choice",
        prompt=("Prefill of " + _LAYER + ": batch {batch}, {seq} tokens, on {hw} in {dtype}. "
                "Is the op `{op}` memory-bound or compute-bound?"),
        params={**_PREFILL, "op": "attn"},
        variants={"seq": (128, 512, 1024, 2048, 16384), "hw": ("h100", "a100", "mi300x", "l4", "b200")},
        key=lambda op, model, batch, seq, hw, dtype:
            roofline.analyze(_ops(model, batch, seq, dtype=dtype)[op], hw, dtype).bound,
        choices=("memory", "compute"),
        hints=("Intensity first: the op's FLOPs over the bytes it moves.",
               "The layer's `attn` is the fused (FlashAttention-style) kernel: the s x s scores never reach HBM. "
               "How do its FLOPs and its bytes grow with s?",
               "Compare its intensity with the chip's ridge point."),
        misconceptions=(
            Misconception("attention-is-memory-bound",
                          "That was true of attention as three kernels, with the s x s scores written to HBM and read "
                          "back. Fused, it reads Q, K, V and writes O once (bytes grow like s) while its FLOPs grow "
                          "like s^2: in prefill its intensity grows with the sequence length.",
                          answer=lambda op, model, batch, seq, hw, dtype:
                              "memory" if op == "attn" and roofline.analyze(_ops(model, batch, seq, dtype=dtype)[op],
                                                                            hw, dtype).bound == "compute" else None),
        ),
    ),
    Question(
        id="l11.layer-time",
        lesson="11",
        kind="numeric",
        prompt=("Predict the time of " + _LAYER + " in prefill (batch {batch}, {seq} tokens) on {hw} in {dtype}: the "
                "sum over its kernels of each kernel's roofline lower bound max(T_math, T_mem)."),
        params=_SHORT_PROMPT,
        variants={**_PREFILL_VARIANTS, "batch": (1, 4), "seq": (1024, 4096, 8192)},
        key=lambda **p: _layer_time(**p),
        unit="s",
        rtol=0.02,
        figures=3,
        hints=("Each kernel's lower bound is the larger of its FLOPs / peak and its bytes / bandwidth.",
               "Add it up over every op of the layer, the memory-bound ones included."),
        misconceptions=(
            Misconception("scaled-linearly",
                          "That scales the lesson's 4096-token layer in proportion to the prompt. The GEMMs and the "
                          "small ops scale with the tokens, but causal attention's FLOPs grow like the square of the "
                          "prompt: place the ops of this prompt and add them up.",
                          answer=_apart(lambda model, batch, seq, hw, dtype: None if seq >= _PREFILL["seq"] else
                                        _layer_time(model, batch, _PREFILL["seq"], hw, dtype) * seq / _PREFILL["seq"],
                                        lambda **p: _layer_time(**p), 0.02)),
            Misconception("flops-only",
                          "That is the layer's FLOPs over the peak: it ignores the memory-bound ops because they have "
                          "few FLOPs. Their time is bytes / bandwidth, however few FLOPs they do.",
                          answer=lambda model, batch, seq, hw, dtype:
                              sum(_ops(model, batch, seq, dtype=dtype).values()).flops / hardware.get(hw).peak(dtype)),
            Misconception("no-overlap-sum",
                          "That is T_math + T_mem per kernel, the time if no kernel overlapped its math with its "
                          "memory traffic. The question asks for the sum of max(T_math, T_mem).",
                          answer=lambda model, batch, seq, hw, dtype: sum(
                              p.time_upper_s for p in _placed(_ops(model, batch, seq, dtype=dtype), hw, dtype).values())),
        ),
    ),
    Question(
        id="l11.memory-fraction",
        lesson="11",
        kind="numeric",
        prompt=("In that prefill (" + _LAYER + ", batch {batch}, {seq} tokens, {hw}, {dtype}), what fraction of the "
                "predicted layer time (sum of lower bounds) is spent in memory-bound ops?"),
        params=_SHORT_PROMPT,
        variants={"model": (_MODEL, "Llama-3-70B"), "seq": (1024, 8192, 16384), "hw": _PREFILL_VARIANTS["hw"]},
        key=lambda **p: _memory_share(**p),
        unit="dimensionless",
        rtol=0.02,
        hints=("Sort the kernels by their bound, then add up their times on each side.",
               "A fraction of time, not of FLOPs and not of the number of ops."),
        misconceptions=(
            Misconception("other-prompt",
                          "That is the share of the lesson's 4096-token layer. At another prompt length attention's "
                          "share moves (its FLOPs grow like the square of the prompt), and the memory-bound ops' share "
                          "with it: place this prompt's ops.",
                          answer=_apart(lambda model, batch, seq, hw, dtype: None if seq == _PREFILL["seq"] else
                                        _memory_share(model, batch, _PREFILL["seq"], hw, dtype),
                                        lambda **p: _memory_share(**p), 0.02)),
            Misconception("bounds-of-the-long-prompt",
                          "That sorts the ops as the lesson's 4096-token table does. At this prompt length some "
                          "change side (attention's intensity grows with the prompt: at a short one it is below the "
                          "ridge): classify each op at this prompt, attention included, then add up the times.",
                          answer=_apart(lambda model, batch, seq, hw, dtype: None if seq == _PREFILL["seq"] else
                                        _memory_share_bounds_of(model, batch, seq, hw, dtype, _PREFILL["seq"]),
                                        lambda **p: _memory_share(**p), 0.02)),
            Misconception("flops-share",
                          "That is the memory-bound ops' share of the FLOPs. Their share of the time is far larger: "
                          "their time is set by their bytes.",
                          answer=lambda model, batch, seq, hw, dtype: (lambda placed: sum(
                              p.flops for p in placed.values() if p.bound == "memory")
                              / sum(p.flops for p in placed.values()))(
                              _placed(_ops(model, batch, seq, dtype=dtype), hw, dtype))),
            Misconception("count-share",
                          "That is the fraction of the ops that are memory-bound, not of the time they take.",
                          answer=lambda model, batch, seq, hw, dtype: (lambda placed: sum(
                              p.bound == "memory" for p in placed.values()) / len(placed))(
                              _placed(_ops(model, batch, seq, dtype=dtype), hw, dtype))),
        ),
    ),
    Question(
        id="l11.mfu",
        lesson="11",
        kind="numeric",
        prompt=("A forward pass through every layer of {model} (batch {batch}, {seq} tokens; no embedding or output "
                "layer) runs every kernel exactly at its roofline bound on {hw} in {dtype}. What MFU does that imply, "
                "counting model FLOPs as 6ND's forward share, 2N per token, with N the weights of the layers?"),
        # on the MI300X: on the H100 the answer is the sum of the GEMM rows' shares in the table the lesson prints
        params={**_PREFILL, "hw": "mi300x"},
        variants={**_PREFILL_VARIANTS, "hw": ("h100", "a100", "mi300x")},
        key=lambda **p: _forward_mfu(**p),
        unit="dimensionless",
        rtol=0.01,
        hints=("N is the weights of one layer's GEMMs times the number of layers: each weight costs 2 FLOPs per "
               "token in the forward pass, so the GEMMs' FLOPs give it.",
               "MFU = model FLOPs / (time x peak), with the time of every layer."),
        misconceptions=(
            Misconception("counted-attention",
                          "That counts every FLOP of the layer, attention's score and value products included. This "
                          "question uses 6ND's forward share, 2N per token (attention's FLOPs are PaLM's extra term).",
                          answer=_apart(lambda model, batch, seq, hw, dtype:
                                        sum(_ops(model, batch, seq, dtype=dtype).values()).flops
                                        / (_layer_time(model, batch, seq, hw, dtype) * hardware.get(hw).peak(dtype)),
                                        _forward_mfu, 0.01)),
            Misconception("training-flops",
                          "That counts 6N FLOPs per token, a training step's (forward and backward). A forward pass "
                          "is 2N per token. An MFU above 1 is impossible anyway: no run beats the chip's peak.",
                          scale=3),
            Misconception("whole-model-n",
                          "That takes N as the whole model's parameters, the embedding and output layers included. "
                          "This forward pass runs the layers only: N is the weights of the layers' GEMMs.",
                          answer=_apart(lambda model, **p: _forward_mfu(model, **p) * models.get(model).params
                                        / (models.get(model).layers * _weights_in_gemms(model)),
                                        _forward_mfu, 0.01)),
            Misconception("above-one",
                          "An MFU above 1 is impossible: the model's FLOPs would run faster than the chip's peak. "
                          "Check the FLOPs per token (2N in a forward pass) and the time (every layer).",
                          above=1.0),
        ),
    ),
    Question(
        id="l11.fuse-first",
        lesson="11",
        kind="choice",
        prompt=("Start from the fully unfused prefill (" + _LAYER + ", batch {batch}, {seq} tokens, {hw}, {dtype}): "
                "attention as three kernels, separate residual-add and RMSNorm kernels, a separate SwiGLU kernel. "
                "Which single fusion saves the most time per layer?"),
        params=dict(_PREFILL),
        variants={"batch": (1, 4), "seq": (32, 128, 512, 1024, 2048, 8192), "hw": ("h100", "a100", "mi300x", "b200")},
        key=_fuse_first,
        choices=("flash-attention", "residual-rmsnorm", "swiglu-epilogue"),
        synonyms={"flash-attention": ("flashattention", "attention", "flash"),
                  "residual-rmsnorm": ("residual + rmsnorm", "residual add + rmsnorm", "rmsnorm", "add + norm"),
                  "swiglu-epilogue": ("swiglu", "swiglu epilogue fusion")},
        hints=("A fusion saves the time of the HBM round trips it removes; the GEMMs stay compute-bound either way.",
               "Compare the size of the intermediates: T x d for the residual stream, T x d_ff for the MLP's "
               "activations, and the attention scores, batch x heads x s x s.",
               "The unfused attention is three kernels: scores, softmax, and the product with V."),
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
        prompt=("Same prefill (" + _LAYER + ", batch {batch}, {seq} tokens, {hw}). Run the five weight GEMMs in FP8 "
                "(1-byte operands, the FP8 peak) and keep everything else, attention included, in BF16. By what "
                "factor does the predicted layer time (sum of lower bounds) shrink?"),
        params={k: v for k, v in _PREFILL.items() if k != "dtype"},
        variants={"model": (_MODEL, "Llama-2-7B"), "batch": (1, 4), "seq": (1024, 2048, 8192),
                  "hw": ("h100", "mi300x", "b200")},
        key=lambda **p: _fp8_speedup(**p),
        unit="dimensionless",
        rtol=0.02,
        hints=("Build the ops twice, in BF16 and in FP8, and place the FP8 GEMMs at the FP8 peak.",
               "Only part of the time gets faster: the other ops keep their BF16 time. Amdahl's law with the "
               "GEMMs' share of the time gives nearly the same answer."),
        misconceptions=(
            Misconception("fp8-halves-everything",
                          "FP8 halves the time of the compute-bound GEMMs only. The memory-bound ops and the BF16 "
                          "attention keep their time, so the layer gains less than 2x (Amdahl's law).",
                          answer=lambda **p: 2.0),
            Misconception("attention-in-fp8",
                          "That runs every kernel at the FP8 peak, attention included. Here attention stays in BF16 "
                          "(as in FP8 training recipes such as Transformer Engine); only the weight GEMMs go to FP8.",
                          answer=_apart(_fp8_peak_only_speedup, _fp8_speedup, 0.02)),
        ),
    ),
    Question(
        id="l11.decode-attn-bound",
        lesson="11",
        kind="choice",
        prompt=("Decode with " + _LAYER + ": batch {batch}, one new token per sequence, a {context}-token context in "
                "the KV cache, on {hw} in {dtype}. Is the fused attention kernel `attn` memory-bound or "
                "compute-bound?"),
        params={"model": _MODEL, "batch": 64, "context": 4096, "hw": "h100", "dtype": "bf16"},
        key=lambda model, batch, context, hw, dtype:
            roofline.analyze(_ops(model, batch, 1, context, dtype)["attn"], hw, dtype).bound,
        choices=("memory", "compute"),
        hints=("In decode, attention reads each sequence's whole K and V cache to produce one output vector.",
               "Batching lets many tokens share one read of the weights. Do the sequences share a KV cache?"),
        misconceptions=(
            Misconception("batching-fixes-attention",
                          "Batching shares the weights across the sequences, not the KV caches: each sequence reads "
                          "its own K and V, about 2 FLOPs per element read for each query head that shares it, "
                          "whatever the batch. Decode attention's intensity stays near the group size "
                          "(heads / kv_heads), far below the ridge.",
                          answer=lambda **p: "compute"),
        ),
    ),
    Question(
        id="l11.decode-fp8-speedup",
        lesson="11",
        kind="numeric",
        prompt=("Decode with " + _LAYER + " at batch {batch}, {context}-token context, on {hw}: store the five weight "
                "GEMMs' operands in FP8 and run them at the FP8 peak; attention (and its KV cache) and the small ops "
                "stay BF16. By what factor does the predicted decode layer time shrink?"),
        params={"model": _MODEL, "batch": 1, "context": 32768, "hw": "h100"},
        # batch x context never 32768, the tokens cached in the lesson's own numbers
        variants={"model": (_MODEL, "Llama-2-7B"), "batch": (1, 3, 8, 24), "context": (2048, 8192, 16384)},
        key=lambda model, batch, context, hw: _fp8_speedup(model, batch, 1, hw, kv_seq=context),
        unit="dimensionless",
        rtol=0.01,
        figures=3,
        hints=("Every decode kernel is memory-bound at this batch: what does a higher peak do for it?",
               "What FP8 does change is the bytes: the weights are read at 1 byte each.",
               "Amdahl again: the GEMMs' share of the time gets faster, attention's does not."),
        misconceptions=(
            Misconception("fp8-halves-everything",
                          "Attention reads a BF16 KV cache and keeps its time, so the layer gains less than 2x.",
                          answer=_apart(lambda **p: 2.0, lambda model, batch, context, hw:
                                        _fp8_speedup(model, batch, 1, hw, kv_seq=context), 0.01)),
            Misconception("peak-cannot-help",
                          "True, the FP8 peak does nothing for a memory-bound kernel, but FP8 weights are half the "
                          "bytes: the memory-bound GEMMs get faster through their traffic.",
                          answer=lambda **p: 1.0),
            Misconception("worked-example",
                          "That is the worked example's figure, for its own context (4096 tokens, batch 1, Llama 3 "
                          "8B on an H100). Redo its steps with this question's numbers: the cache's share of the step "
                          "changes with the context and the batch, and FP8 does not shrink it.",
                          answer=_apart(lambda **p: _fp8_speedup(_MODEL, 1, 1, "h100", kv_seq=4096),
                                        lambda model, batch, context, hw:
                                        _fp8_speedup(model, batch, 1, hw, kv_seq=context), 0.01)),
        ),
    ),
    # --- predicted against a real H200 -------------------------------------------------------
    Question(
        id="l11.achievable-factor",
        lesson="11",
        kind="numeric",
        prompt=("Decode with " + _LAYER + " on the {hw}: batch {batch}, {context} tokens cached. Replace the datasheet "
                "roofs by the achievable ones (the best matmul measured, a device-to-device copy's bandwidth), one "
                "kernel per op, no floor. By what factor does the roofline sum grow?"),
        params={"model": _MODEL, "batch": 1, "context": 8192, "hw": "h200"},
        key=lambda **p: _achievable_factor(**p),
        unit="dimensionless",
        rtol=0.01,
        hints=("Which roof decides each kernel of a decode step at batch 1?",
               "A memory-bound kernel's time is its bytes over the bandwidth: it grows by the ratio of the two "
               "bandwidths, whatever the peak does."),
        misconceptions=(
            Misconception("peak-ratio",
                          "That is the ratio of the two peaks. At batch 1 every decode kernel is memory-bound, so "
                          "only the bandwidth's ratio matters.",
                          answer=lambda hw, **p: _peak_ratio(hw)),
            Misconception("both-ratios",
                          "You multiplied the two ratios. Each kernel is bound by one roof: a memory-bound kernel "
                          "only feels the bandwidth.",
                          answer=lambda hw, **p: _peak_ratio(hw) * _bandwidth_ratio(hw)),
            Misconception("inverse",
                          "That is the ratio the other way round (the datasheet sum over the achievable one). The "
                          "achievable roofs are lower, so the sum grows: the factor is above 1.",
                          answer=lambda **p: 1 / _achievable_factor(**p)),
            Misconception("growth-not-factor",
                          "That is how much the sum grows (the factor minus 1, as a share). The question asks for the "
                          "factor itself: 1 plus that.",
                          answer=lambda **p: _achievable_factor(**p) - 1),
        ),
    ),
    Question(
        id="l11.floor-share",
        lesson="11",
        kind="numeric",
        prompt=("Decode with " + _LAYER + " on the {hw}: batch {batch}, {context} tokens cached, predicted by the "
                "calibrated model (the kernels eager PyTorch runs, achievable roofs, a floor t0 per kernel fitted on "
                "the H200 dataset). What fraction of the predicted layer time is the kernels' floors?"),
        # not 8192 cached: its 0.374 is within 2% of a +38% the lesson prints for another layer
        params={"model": _MODEL, "batch": 1, "context": 16384, "hw": "h200"},
        variants={"batch": (1, 16, 64), "context": (4096, 8192, 16384)},
        key=lambda **p: _floor_share(**p),
        unit="dimensionless",
        rtol=0.02,
        hints=("Count the kernels first: one per op, except the ones eager PyTorch splits.",
               "F.silu(gate) * up is two kernels; every other op is one.",
               "The floors are kernels x t0; divide by the whole prediction, floors included."),
        misconceptions=(
            Misconception("one-kernel-per-op",
                          "That counts one kernel per op. Eager PyTorch runs SiLU(gate) * up as two kernels, each "
                          "paying the floor.",
                          answer=lambda **p: _floor_share(**p, kernels=len(layertime.predict(
                              p["model"], p["batch"], 1, p["context"], p["hw"], calibrated=True).ops))),
            Misconception("floor-over-roofline",
                          "That divides the floors by the roofline part only. The question asks for their share of "
                          "the whole prediction, floors included.",
                          answer=lambda **p: _floor_share(**p, of_roofline=True)),
        ),
    ),
    Question(
        id="l11.graph-floor",
        lesson="11",
        kind="choice",
        prompt=("The calibrated model charges every kernel a floor t0 of a few microseconds, fitted on whole layers. "
                "A CUDA graph replays a recorded sequence of kernels with one launch from the CPU. On the H200 "
                "dataset, is t0 mostly launch latency (the CPU's cost to issue a kernel, which the graph removes) or "
                "time each kernel spends on the GPU beyond its roofline time (which the graph keeps)? Answer launch "
                "or kernel."),
        params={},
        key=_graph_verdict,
        choices=("launch", "kernel"),
        synonyms={"launch": ("launch latency", "launch overhead", "launch cost", "cpu", "cpu launch latency"),
                  "kernel": ("kernel latency", "gpu", "gpu latency", "gpu time", "kernel time")},
        hints=("The dataset times every layer twice: eager (layer_s) and replayed as a CUDA graph (layer_graph_s).",
               "If t0 were launch latency, how much faster would a decode layer of 12 kernels be as a graph?"),
        misconceptions=(
            Misconception("floor-is-launch-overhead",
                          "If t0 were the CPU's launch cost, the graph-replayed layers would be faster by about "
                          "kernels x t0. Compare layer_s with layer_graph_s in the dataset: they are within a few "
                          "percent. While the GPU has queued work, the CPU's launches are hidden behind it.",
                          answer=_other("launch", _graph_verdict)),
        ),
    ),
    Question(
        id="l11.eager-extra",
        lesson="11",
        kind="numeric",
        prompt=("Prefill of " + _LAYER + " on the {hw}: batch {batch}, {seq} tokens, calibrated model. Eager PyTorch "
                "runs F.silu(gate) * up as two kernels and F.rms_norm also writes an fp32 statistic per token. How "
                "many µs per layer would one kernel per op save (the calibrated eager prediction minus the same "
                "model with one kernel per op)?"),
        # not 2048 tokens: its 33.0 µs is within 2% of two numbers the lesson prints before (33.57, +33%)
        params={"model": _MODEL, "batch": 1, "seq": 4096, "hw": "h200"},
        variants={"seq": (512, 1024, 2048, 8192)},
        key=lambda **p: _eager_extra_us(**p),
        unit="µs",
        rtol=0.02,
        hints=("Two costs: the extra bytes (SiLU writes its result and the product reads it back; the statistic) "
               "and the extra kernel's floor.",
               "SiLU reads and writes T x d_ff elements, the product reads two and writes one: 5 passes instead of "
               "the fused kernel's 3."),
        misconceptions=(
            Misconception("bytes-only",
                          "That counts the extra bytes but not the extra kernel: the second kernel pays the floor t0 "
                          "too.",
                          answer=lambda **p: _eager_extra_us(**p, part="bytes")),
            Misconception("floor-only",
                          "That counts the extra kernel's floor but not the extra bytes: SiLU's result goes to HBM and "
                          "comes back.",
                          answer=lambda **p: _eager_extra_us(**p, part="floors")),
        ),
    ),
    Question(
        id="l11.predict-held-out",
        lesson="11",
        kind="numeric",
        prompt=("Predict with the calibrated model (eager kernels, achievable roofs, a floor t0 per kernel) a {model} "
                "decode layer on the {hw} at batch {batch}, {context} tokens cached, BF16. Each decode step runs every "
                "layer of the model and makes one token per sequence. How many tokens per second does the whole "
                "model produce at this batch (leave out the embedding and output layers)?"),
        params={"model": _MODEL, "batch": 64, "context": 4096, "hw": "h200"},
        variants={"batch": (16, 64, 128), "context": (2048, 8192)},
        key=lambda **p: _model_decode_rate(**p),
        unit="tokens/s",
        rtol=0.01,
        figures=3,
        hints=("One decode step: every layer once, one token for each sequence of the batch.",
               "The step's time is the number of layers times one layer's calibrated prediction.",
               "Tokens per second = tokens per step / the step's time."),
        misconceptions=(
            Misconception("one-sequence",
                          "That is one sequence's rate, 1 / (the step's time): each step makes a token for every "
                          "sequence of the batch. Multiply by the batch.",
                          answer=lambda **p: _model_decode_rate(**p) / p["batch"]),
            Misconception("one-layer",
                          "That counts one layer. A decode step runs every layer of the model: multiply the layer's "
                          "time by the number of layers.",
                          answer=lambda **p: _model_decode_rate(**p, layers=1)),
            Misconception("linear-in-batch",
                          "That is batch 1's rate times the batch, as if the step took as long at this batch as at "
                          "batch 1. The weights are read once per step, but attention reads every sequence's own KV "
                          "cache: predict the step at this batch.",
                          answer=_apart(lambda batch, **p: batch * _model_decode_rate(batch=1, **p),
                                        _model_decode_rate, 0.01)),
            Misconception("datasheet-sum",
                          "That is the datasheet roofline sum. The calibrated model uses the achievable roofs and "
                          "adds a floor t0 per kernel.",
                          answer=_apart(lambda **p: _model_decode_rate(**p, calibrated=False), _model_decode_rate,
                                        0.01)),
            Misconception("no-floor",
                          "That is the roofline sum at the achievable roofs: add the floor t0 of every kernel.",
                          answer=_apart(lambda model, batch, context, hw: batch / (
                              models.get(model).layers * _achievable_sum(model, batch, 1, context, hw)),
                              _model_decode_rate, 0.01)),
            Misconception("one-kernel-per-op",
                          "That is one kernel per op. Eager PyTorch runs SiLU(gate) * up as two kernels, and its "
                          "RMSNorm writes a statistic too: use the calibrated eager prediction.",
                          answer=_apart(lambda **p: _model_decode_rate(**p, fused=True), _model_decode_rate, 0.01)),
        ),
    ),
    # --- end-of-lesson exercises -----------------------------------------------------------
    Question(
        id="l11.decode-batch",
        lesson="11",
        kind="numeric",
        prompt=("A model with d_model = {d_model} (Llama 3 8B's width) decodes on {hw} in {dtype}. At what batch M "
                "does the decode step's (M x d) @ (d x d) weight GEMM first become compute-bound?"),
        params={"d_model": 4096, "hw": "h100", "dtype": "bf16"},
        variants={"hw": ("a100", "h100-pcie", "h200", "mi300x", "b200", "l40s", "l4")},
        key=lambda d_model, hw, dtype: roofline.decode_batch_to_compute_bound(d_model, hw, dtype),
        unit="dimensionless",
        rtol=0,  # one exact whole number
        hints=("Write the GEMM's intensity as a function of M (2 M d^2 FLOPs over (M d + d^2 + M d) elements of "
               "2 bytes) and set it equal to the ridge.",
               "The shortcut 'intensity = batch' drops the activations' bytes (M x d read, M x d written). Keep them.",
               "Solve I(M) = I* for M and round up: the smallest whole batch at or above the crossing."),
        misconceptions=(
            Misconception("intensity-equals-batch",
                          "That uses 'intensity = batch' (2M/b), which is the M << d limit. Near the ridge the "
                          "activations (2 M d elements) are no longer small next to the weights (d^2), so the true "
                          "intensity is below M, and a larger batch is needed.",
                          answer=lambda d_model, hw, dtype: hardware.get(hw).ridge(dtype)),
            Misconception("claim-batch-64",
                          "A common claim is that decode turns compute-bound at batch 64. At 64 this GEMM's intensity "
                          "is about 62 FLOP/byte in BF16: a fraction of the ridge.",
                          answer=lambda **p: 64),
        ),
        points=2,
    ),
    Question(
        id="l11.decode-throughput",
        lesson="11",
        kind="numeric",
        prompt=("Decode throughput: {model} decodes at batch {batch} with a {context}-token context on {hw} in {dtype}. "
                "If every kernel of every layer runs at its roofline bound, how many tokens per second does the whole "
                "batch produce? (Leave out the embedding and output layers.)"),
        params={"model": _MODEL, "batch": 128, "context": 1024, "hw": "h100", "dtype": "bf16"},
        variants={"model": (_MODEL, "Llama-2-7B"), "batch": (32, 64, 256), "context": (2048, 8192),
                  "hw": ("h100", "a100", "mi300x", "b200")},
        key=lambda **p: _decode_throughput(**p),
        unit="tokens/s",
        rtol=0.02,
        hints=("One decode step makes `batch` tokens and takes (number of layers) x the decode layer's time.",
               "The attention kernel reads every sequence's KV cache, and at this batch that matters."),
        misconceptions=(
            Misconception("ignored-kv-cache",
                          "That leaves out attention's time: at this batch the KV-cache reads are a large part of the "
                          "step. Keep the `attn` kernel in the sum.",
                          answer=lambda **p: _decode_throughput(**p, skip=("attn",))),
            Misconception("linear-in-batch",
                          "Throughput grows with the batch only while the weight reads dominate; it is not batch-1 "
                          "throughput times the batch. Compute the step at this batch.",
                          answer=_apart(lambda batch, **p: batch * _decode_throughput(batch=1, **p),
                                        lambda **p: _decode_throughput(**p, skip=("attn",)), 0.02)),
            Misconception("one-sequence",
                          "That is one sequence's rate, 1 / (the step's time): each decode step makes a token for "
                          "every sequence of the batch. Multiply by the batch.",
                          answer=lambda batch, **p: None if batch == 1 else _decode_throughput(batch=batch, **p) / batch),
        ),
        points=2,
    ),
    Question(
        id="l11.gpu-memory-share",
        lesson="11",
        kind="choice",
        prompt=("Prefill of " + _LAYER + " (batch {batch}, {seq} tokens) in {dtype}. On which of these accelerators "
                "do the memory-bound ops take the largest share of the layer's predicted time (the sum of lower bounds "
                "at the datasheet roofs)?"),
        params={"model": _MODEL, "batch": 1, "seq": 4096, "dtype": "bf16"},
        key=lambda **p: _gpu_most_memory_bound(gpus=_GPUS, **p),
        choices=_GPUS,
        synonyms={"h100": ("h100 sxm", "h100 sxm5", "nvidia h100"), "a100": ("a100 sxm4", "nvidia a100"),
                  "mi300x": ("mi300", "amd mi300x"), "l4": ("nvidia l4",)},
        hints=("The ops' intensities are the same on every chip; what changes is the roofs.",
               "A memory-bound op takes bytes / bandwidth, a compute-bound GEMM FLOPs / peak. Their ratio scales "
               "with peak / bandwidth."),
        misconceptions=(
            Misconception("oldest-is-most-memory-bound",
                          "The A100 is slower at both math and memory. What sets the share is the ratio peak / "
                          "bandwidth, the ridge: a lower ridge makes the GEMMs relatively slower, so the memory-bound "
                          "ops take a smaller share.",
                          answer=lambda **p: None if _gpu_most_memory_bound(gpus=_GPUS, **p) == "a100" else "a100"),
            *(Misconception("smaller-share",
                            "On that chip the memory-bound ops take a smaller share. The share follows the ridge, "
                            "peak / bandwidth: compare the chips' ridges in bf16, or their predicted shares.",
                            answer=_other_gpu(gpu)) for gpu in _GPUS),
        ),
        points=2,
    ),
)
