"""Whole decoder layers timed on a GPU, op by op and whole: the data :mod:`roofkit.layertime` is calibrated on.

The format is :mod:`roofkit.catalogs.measured`'s, the one of
``roofkit/data/measured/h200-2026-11-30/layers.json`` (one H200, 2026-11-30,
PyTorch 2.11, CUDA events, L2 flushed before each run).

``training`` holds whole layers timed as a training step runs them (autograd on,
a causal prefill): the forward pass alone and the forward plus the backward
(:func:`measure_training`); :func:`roofkit.steptime.compare_training` holds
the step model's backward against them.

Reading a dataset (:func:`load_layers`, :class:`LayerDataset`, :func:`shipped`) lives
in :mod:`roofkit.catalogs.measured`, below the models that use it; this module
measures, and exports those names too:

    >>> data = load_layers()                      # the H200 dataset shipped with roofkit
    >>> data.device, len(data.cases)
    ('NVIDIA H200', 9)
    >>> data.cases[2].label
    'llama-2-7b decode, batch 1, 2048 cached'

:func:`measure_layers` writes the same format on any CUDA GPU, through
PyTorch; ``roofkit measure`` runs it and keeps the result in its profile
(``profile.gpu["layers"]``), which :func:`load_layers` reads too.
"""

from __future__ import annotations

import time

from .. import formulas
from ..catalogs import models
from ..catalogs.measured import OPS, SHIPPED, LayerCase, LayerDataset, TrainingCase, load_layers, shipped  # noqa: F401

__all__ = ["LayerCase", "LayerDataset", "TrainingCase", "load_layers", "shipped", "SHIPPED", "OPS", "LAYER_SET",
           "LAYER_SET_QUICK", "ATTENTION_SHAPE", "TRAINING_SET", "TRAINING_SET_QUICK", "measure_layers",
           "measure_launch", "measure_attention", "measure_training"]

# (catalog model, batch, seq, kv_seq): kv_seq None is a causal prefill of seq tokens
LAYER_SET = (("llama-2-7b", 1, 2048, None), ("llama-2-7b", 8, 2048, None), ("llama-2-7b", 1, 1, 2048),
             ("llama-2-7b", 16, 1, 2048), ("llama-2-7b", 64, 1, 2048), ("llama-2-7b", 256, 1, 4096),
             ("llama-3-8b", 1, 512, None), ("llama-3-8b", 1, 1, 8192), ("llama-3-8b", 128, 1, 2048))
LAYER_SET_QUICK = (("llama-3-8b", 1, 512, None), ("llama-3-8b", 1, 1, 8192), ("llama-2-7b", 16, 1, 2048))
# the attention kernel timed alone for its achievable rate: batch, heads, tokens, head dim (causal, bf16);
# the shape of the shipped H200 dataset's largest prefill attention (Llama 2 7B, 8 x 2,048 tokens)
ATTENTION_SHAPE = (8, 32, 2048, 128)
# (catalog model, batch, seq): causal prefills, forward and backward, as a training micro-batch runs them
TRAINING_SET = (("llama-2-7b", 1, 2048), ("llama-2-7b", 4, 2048), ("llama-3-8b", 1, 4096), ("llama-3-8b", 2, 8192))
TRAINING_SET_QUICK = (("llama-3-8b", 1, 2048),)

# --- measuring, through PyTorch on a CUDA device ------------------------------------------------------------


def _case_bytes(shape, batch: int, seq: int, kv_seq: int) -> int:
    """A generous estimate of the memory one case needs (weights, KV cache, activations), bf16."""
    weights = shape.params_per_layer
    cache = 2 * batch * shape.kv_heads * kv_seq * shape.head_dim
    activations = 8 * batch * seq * max(shape.d_ff, shape.d_model + 2 * shape.kv_heads * shape.head_dim)
    return 2 * (weights + cache + activations)


def _layer_ops(torch, shape, batch: int, seq: int, kv_seq: int, causal: bool, device) -> dict:
    """The 11 eager ops of one bf16 layer, as callables over tensors of their real shapes."""
    F = torch.nn.functional
    bf16 = torch.bfloat16
    d, H, KV, ff, dh = shape.d_model, shape.heads, shape.kv_heads, shape.d_ff, shape.head_dim

    def randn(*size, scale=1.0):
        return torch.randn(*size, device=device, dtype=bf16) * scale

    x = randn(batch, seq, d)
    w1, w2 = torch.ones(d, device=device, dtype=bf16), torch.ones(d, device=device, dtype=bf16)
    w_qkv, w_out = randn(d, H * dh + 2 * KV * dh, scale=0.02), randn(H * dh, d, scale=0.02)
    w_up, w_gate, w_down = randn(d, ff, scale=0.02), randn(d, ff, scale=0.02), randn(ff, d, scale=0.02)
    q = randn(batch, H, seq, dh)
    k, v = randn(batch, KV, kv_seq, dh), randn(batch, KV, kv_seq, dh)  # the cache, or this prefill's keys
    o = randn(batch, seq, H * dh)
    gqa = {"enable_gqa": True} if KV < H else {}
    s = {"x": x}  # the activations flow from op to op, as in a model; attention reads q, k, v of its shapes

    def op(name, fn):
        def run():
            s[name] = fn()
        return run

    return {
        "norm1": op("norm1", lambda: F.rms_norm(s["x"], (d,), w1)),
        "qkv": op("qkv", lambda: s["norm1"] @ w_qkv),
        "attn": op("attn", lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)),
        "out": op("out", lambda: o @ w_out),
        "residual1": op("residual1", lambda: s["x"] + s["out"]),
        "norm2": op("norm2", lambda: F.rms_norm(s["residual1"], (d,), w2)),
        "mlp.up": op("mlp.up", lambda: s["norm2"] @ w_up),
        "mlp.gate": op("mlp.gate", lambda: s["norm2"] @ w_gate),
        "mlp.act": op("mlp.act", lambda: F.silu(s["mlp.gate"]) * s["mlp.up"]),
        "mlp.down": op("mlp.down", lambda: s["mlp.act"] @ w_down),
        "residual2": op("residual2", lambda: s["residual1"] + s["mlp.down"]),
    }


def _graph(torch, fn):
    """``fn`` captured as a CUDA graph (warmed up on a side stream first, as PyTorch asks); its replay."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def _wall(torch, fn, n: int) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / n


def measure_launch(torch, timer, device, n: int = 200) -> dict[str, float]:
    """The launch figures: what a tiny kernel costs on the CPU, in a stream, alone, and in a CUDA graph."""
    one = torch.zeros(1, device=device)

    def tiny():
        one.add_(1)

    tiny()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        tiny()
    host = (time.perf_counter() - start) / n
    torch.cuda.synchronize()

    def stream():
        for _ in range(n):
            tiny()

    replay = _graph(torch, stream)
    return {"host_per_launch_s": host,
            "gpu_stream_per_kernel_s": timer.median(stream, 5, warmup=1, flush=False) / n,
            "single_kernel_event_s": timer.median(tiny, 15, warmup=3, flush=False),
            "graph_per_kernel_s": timer.median(replay, 5, warmup=1, flush=False) / n}


def measure_attention(torch, timer, device, iters: int = 15, shape=ATTENTION_SHAPE) -> dict:
    """One large causal BF16 attention (F.scaled_dot_product_attention) timed alone: its achievable rate.

    Attention does not reach the matmul's rate (softmax, masking and synchronization sit
    between its two products), so :mod:`roofkit.layertime` gives it a rate of its own.
    The FLOPs are :func:`roofkit.formulas.attention_fused`'s causal count.
    """
    batch, heads, seq, head_dim = shape
    q, k, v = (torch.randn(batch, heads, seq, head_dim, device=device, dtype=torch.bfloat16) for _ in range(3))
    F = torch.nn.functional

    def run():
        F.scaled_dot_product_attention(q, k, v, is_causal=True)

    with torch.no_grad():
        seconds = timer.median(run, iters, warmup=3)
    flops = float(formulas.attention_fused(batch, heads, seq, head_dim, 2, causal=True).flops)
    return {"label": f"batch {batch} x {heads} heads x {seq} tokens, head dim {head_dim}, causal", "dtype": "bf16",
            "flops": flops, "time_s": seconds}


def measure_layers(torch, timer, device, quick: bool = False, progress=None, free_bytes: float | None = None,
                   layer_set=None) -> tuple[dict, list[str]]:
    """Time the layer set op by op and whole on ``device``; (a layers.json document, notes).

    ``timer.median(fn, iters, warmup, flush)`` times with CUDA events and an L2
    flush before each run (roofkit.measure.gpu's timer). Cases that do not fit
    in ``free_bytes`` are skipped, with a note.
    """
    tick = progress or (lambda: None)
    iters, walls = (5, 10) if quick else (15, 50)
    notes, cases = [], []
    for key, batch, seq, kv_seq in layer_set or (LAYER_SET_QUICK if quick else LAYER_SET):
        shape = models.get(key)
        causal = kv_seq is None
        kv = seq if causal else kv_seq
        if free_bytes is not None and _case_bytes(shape, batch, seq, kv) > 0.6 * free_bytes:
            notes.append(f"layers: {key} batch {batch} seq {seq} kv_seq {kv} skipped (does not fit in memory)")
            tick()
            continue
        ops = _layer_ops(torch, shape, batch, seq, kv, causal, device)

        def layer():
            for run in ops.values():
                run()

        with torch.no_grad():
            ops_s = {name: timer.median(run, iters, warmup=3) for name, run in ops.items()}
            layer_s = timer.median(layer, iters, warmup=3)
            try:
                layer_graph_s = timer.median(_graph(torch, layer), iters, warmup=3)
            except Exception as error:  # noqa: BLE001 - some builds cannot capture every op; keep the rest
                layer_graph_s = None
                notes.append(f"layers: no CUDA graph for {key} ({type(error).__name__})")
            layer_wall_s = _wall(torch, layer, walls)
        cases.append({"model": key, "d": shape.d_model, "H": shape.heads, "KV": shape.kv_heads, "ff": shape.d_ff,
                      "head_dim": shape.head_dim, "batch": batch, "seq": seq, "kv_seq": kv, "causal": causal,
                      "ops_s": ops_s, "layer_s": layer_s, "layer_graph_s": layer_graph_s,
                      "layer_wall_s": layer_wall_s})
        del ops
        torch.cuda.empty_cache()
        tick()
    with torch.no_grad():
        launch = measure_launch(torch, timer, device)
    try:
        attention = measure_attention(torch, timer, device, iters)
    except Exception as error:  # noqa: BLE001 - without it, attention takes the matmul's rate (a note says so)
        attention = None
        notes.append(f"layers: the attention kernel could not be timed alone ({type(error).__name__})")
    tick()
    document = {"device": torch.cuda.get_device_name(device), "torch": str(torch.__version__),
                "date": time.strftime("%Y-%m-%d"),
                "method": f"roofkit measure: CUDA events around each op and each layer (median of {iters} after "
                          "3 warm-ups), the L2 flushed before each timed run; bf16 weights and activations; "
                          "torch eager ops as listed in ops_s", "launch": launch, "cases": cases}
    if attention:
        document["attention"] = attention
    return document, notes


def _training_step(torch, shape, batch: int, seq: int, device):
    """(forward, forward and backward) of one bf16 layer with autograd on: a causal prefill, as training runs it."""
    F = torch.nn.functional
    bf16 = torch.bfloat16
    d, H, KV, ff, dh = shape.d_model, shape.heads, shape.kv_heads, shape.d_ff, shape.head_dim

    def weight(*size, scale=0.02):
        return (torch.randn(*size, device=device, dtype=bf16) * scale).requires_grad_()

    w1, w2 = torch.ones(d, device=device, dtype=bf16).requires_grad_(), \
        torch.ones(d, device=device, dtype=bf16).requires_grad_()
    w_qkv, w_out = weight(d, (H + 2 * KV) * dh), weight(H * dh, d)
    w_up, w_gate, w_down = weight(d, ff), weight(d, ff), weight(ff, d)
    x = torch.randn(batch, seq, d, device=device, dtype=bf16).requires_grad_()
    gqa = {"enable_gqa": True} if KV < H else {}

    def forward():
        h = F.rms_norm(x, (d,), w1)
        q, k, v = (h @ w_qkv).split([H * dh, KV * dh, KV * dh], dim=-1)
        q, k, v = (t.view(batch, seq, n, dh).transpose(1, 2) for t, n in ((q, H), (k, KV), (v, KV)))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa).transpose(1, 2).reshape(batch, seq, H * dh)
        r1 = x + o @ w_out
        h2 = F.rms_norm(r1, (d,), w2)
        return r1 + (F.silu(h2 @ w_gate) * (h2 @ w_up)) @ w_down

    def step():
        forward().sum().backward()

    return forward, step


def measure_training(torch, timer, device, quick: bool = False, progress=None, free_bytes: float | None = None,
                     training_set=None) -> tuple[list[dict], list[str]]:
    """Time whole layers as a training step runs them: the forward alone, then forward and backward.

    Cases that do not fit in ``free_bytes`` are skipped, with a note. Returns the
    ``training`` list of a layers.json document, and the notes.
    """
    tick = progress or (lambda: None)
    iters = 5 if quick else 15
    notes, cases = [], []
    for key, batch, seq in training_set or (TRAINING_SET_QUICK if quick else TRAINING_SET):
        shape = models.get(key)
        if free_bytes is not None and 3 * _case_bytes(shape, batch, seq, seq) > 0.6 * free_bytes:
            notes.append(f"training: {key} batch {batch} seq {seq} skipped (does not fit in memory)")
            tick()
            continue
        try:
            forward, step = _training_step(torch, shape, batch, seq, device)
            forward_s = timer.median(forward, iters, warmup=3)
            forward_backward_s = timer.median(step, iters, warmup=3)
        except (AttributeError, RuntimeError, TypeError) as error:  # a build without autograd, an op it lacks
            notes.append(f"training: not measured ({type(error).__name__}: {str(error).splitlines()[0][:100]})")
            tick()
            break
        cases.append({"model": key, "d": shape.d_model, "H": shape.heads, "KV": shape.kv_heads, "ff": shape.d_ff,
                      "head_dim": shape.head_dim, "batch": batch, "seq": seq, "forward_s": forward_s,
                      "forward_backward_s": forward_backward_s})
        del forward, step
        torch.cuda.empty_cache()
        tick()
    return cases, notes


def steps(quick: bool) -> int:
    """Progress ticks of :func:`measure_layers` and :func:`measure_training`: one per case, one for the launch
    figures."""
    return len(LAYER_SET_QUICK if quick else LAYER_SET) + 1 + len(TRAINING_SET_QUICK if quick else TRAINING_SET)

