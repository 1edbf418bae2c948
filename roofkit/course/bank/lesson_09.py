"""Lesson 09, fusion and FlashAttention: HBM traffic of op chains, launch overhead, attention's s x s scores."""

from __future__ import annotations

import math

from ... import formulas
from ...catalogs import hardware
from ...perf import fusion, layertime, roofline
from ..quiz import Misconception, Question, register

_US = 1e-6  # seconds per microsecond


def _bias_gelu(tokens, width, dtype):
    return fusion.chain(["bias_add", "gelu"], n=tokens * width, bytes_per_element=dtype)


def _residual_rmsnorm(tokens, d_model, dtype, keep=("residual_add",)):
    return fusion.chain(["residual_add", "rmsnorm"], n=tokens * d_model, bytes_per_element=dtype, keep=keep)


def _compare(new, old) -> str:
    if math.isclose(new, old, rel_tol=1e-9):
        return "same"
    return "fewer" if new < old else "more"


def _flash_vs_naive(seq, head_dim, dtype):
    """'<same|fewer|more> FLOPs and/but <same|fewer|more> bytes': the fused kernel against the naive three."""
    naive = formulas.attention_naive(1, 1, seq, head_dim, dtype)
    fused = formulas.attention_fused(1, 1, seq, head_dim, dtype)
    flops, nbytes = _compare(fused.flops, naive.flops), _compare(fused.bytes, naive.bytes)
    return f"{flops} FLOPs {'and' if flops == nbytes else 'but'} {nbytes} bytes"


def _tiled(rows, head_dim, seq, dtype):
    """One head of FlashAttention with query tiles of ``rows`` rows, every K/V re-read from HBM."""
    on_chip = formulas.attention_tile_bytes(rows, head_dim, dtype)
    return formulas.attention_fused(1, 1, seq, head_dim, dtype, on_chip_bytes=on_chip)


# the decode layer of lesson 09's section 4 and exercise 1: Llama 2 7B's shape, SwiGLU, one token per step
_DECODE_SHAPE = {"d_model": 4096, "n_heads": 32, "d_ff": 11008}


def _decode_roofline_s(kv_seq, hw, achievable=True):
    """One decode layer's roofline time (batch 1, BF16): its ops' max(math, memory) times summed, on ``hw``.

    ``achievable=True``: at the catalog's achievable roofs (the best matmul rate and the copy bandwidth
    measured), the roofs lesson 11's floor t0 was fitted with; ``False``: at the datasheet's.
    """
    ops = formulas.transformer_layer_ops(1, 1, _DECODE_SHAPE["d_model"], _DECODE_SHAPE["n_heads"],
                                         _DECODE_SHAPE["d_ff"], "bf16", gated=True, kv_seq=kv_seq)
    acc = hardware.get(hw)
    peak, bandwidth = acc.peak("bf16", achievable=achievable), acc.memory_bandwidth(achievable=achievable)
    return sum(roofline.time_bounds(cost.flops, cost.bytes, peak, bandwidth)[0] for cost in ops.values())


def _decode_stream(kernels, kv_seq, cpu_us, hw, floor=True, achievable=True):
    """fusion.stream_time of one decode layer (batch 1, BF16) run as ``kernels`` kernels, on ``hw``.

    The layer's roofline time is that of its ops (transformer_layer_ops): at one token fusion
    leaves its bytes practically unchanged, so eager and fused layers share it. The GPU's
    per-kernel floor is lesson 11's (layertime.default_calibration), fitted with achievable roofs,
    so the roofs are the achievable ones too; ``floor=False`` drops it, ``achievable=False`` takes
    the datasheet's roofs.
    """
    t0 = layertime.default_calibration().floor_s if floor else 0.0
    return fusion.stream_time(kernels, _decode_roofline_s(kv_seq, hw, achievable), cpu_us * _US, t0)


_EAGER, _FUSED = len(fusion.DECODER_LAYER_KERNELS), len(fusion.FUSED_DECODER_LAYER_KERNELS)


def _fusion_saves(layers, kv_seq, cpu_us, hw):
    """Seconds per decode step that fusion (17 -> 5 kernels per layer) saves: each layer max(CPU, GPU)."""
    return layers * (_decode_stream(_EAGER, kv_seq, cpu_us, hw)["time_s"]
                     - _decode_stream(_FUSED, kv_seq, cpu_us, hw)["time_s"])


def _bounds(kv_seq, cpu_us, hw):
    """('cpu' or 'gpu', 'cpu' or 'gpu'): what sets the pace of the eager and of the fused layer."""
    return (_decode_stream(_EAGER, kv_seq, cpu_us, hw)["bound"], _decode_stream(_FUSED, kv_seq, cpu_us, hw)["bound"])


def _launches_only(layers, kv_seq, cpu_us, hw):
    """The additive model's old answer, the removed launches times their CPU cost; right only when both are CPU-bound."""
    value = layers * (_EAGER - _FUSED) * cpu_us * _US
    return None if _bounds(kv_seq, cpu_us, hw) == ("cpu", "cpu") else value


def _floors_only(layers, kv_seq, cpu_us, hw):
    """The removed kernels times the GPU's floor; right only when both layers are GPU-bound."""
    value = layers * (_EAGER - _FUSED) * layertime.default_calibration().floor_s
    return None if _bounds(kv_seq, cpu_us, hw) == ("gpu", "gpu") else value


def _datasheet_roofs(layers, kv_seq, cpu_us, hw):
    """The saving with the floor added to datasheet roofline times: the roofs the floor was not fitted with.

    None where the roofs do not matter (both layers GPU-bound, the saving is the floors alone): there it is the key.
    """
    value = layers * (_decode_stream(_EAGER, kv_seq, cpu_us, hw, achievable=False)["time_s"]
                      - _decode_stream(_FUSED, kv_seq, cpu_us, hw, achievable=False)["time_s"])
    return None if math.isclose(value, _fusion_saves(layers, kv_seq, cpu_us, hw), rel_tol=0.02) else value


def _added(layers, kv_seq, cpu_us, hw):
    """CPU and GPU costs added, as if the CPU waited for each kernel: the removed kernels' launch plus floor."""
    return layers * (_EAGER - _FUSED) * (cpu_us * _US + layertime.default_calibration().floor_s)


def _critical_path(cpu_us, tiny, tiny_us, big_us):
    """fusion.stream_critical_path of ``tiny`` kernels of ``tiny_us`` then one of ``big_us``, ``cpu_us`` per launch."""
    return fusion.stream_critical_path([tiny_us * _US] * int(tiny) + [big_us * _US], cpu_us * _US)


def _last_launch(cpu_us, tiny, tiny_us, big_us):
    """When the last kernel is issued; None where that is also the max model's answer (it is named there)."""
    path = _critical_path(cpu_us, tiny, tiny_us, big_us)
    return None if math.isclose(path["cpu_s"], path["max_s"], rel_tol=1e-9) else path["cpu_s"]


def _attention_times(batch, heads, seq, head_dim, hw, dtype):
    """(sum of the naive kernels' roofline times, the fused kernel's roofline time) in seconds."""
    naive = formulas.attention_naive_kernels(batch, heads, seq, head_dim, dtype)
    fused = formulas.attention_fused(batch, heads, seq, head_dim, dtype)
    return (sum(roofline.analyze(k, hw, dtype).time_s for k in naive.values()),
            roofline.analyze(fused, hw, dtype).time_s)


register(
    Question(
        id="l09.bias-gelu-fused-bytes",
        lesson="09",
        kind="numeric",
        prompt=("A bias add followed by GELU runs on an activation of {tokens} tokens x {width} features in "
                "{dtype}. Fused into one kernel, how many bytes does it move to and from HBM? (Ignore the bias "
                "vector: it is {width} elements next to millions.)"),
        params={"tokens": 4096, "width": 14336, "dtype": "bf16"},
        # never the lesson's worked 8,192 x 32,768 in BF16: its bytes are printed just above
        variants={"tokens": (2048, 8192, 16384), "width": (11008, 24576, 53248), "dtype": ("bf16", "fp32")},
        key=lambda tokens, width, dtype: _bias_gelu(tokens, width, dtype).fused.bytes,
        unit="byte",
        hints=("In the fused kernel, where does the output of the bias add live before GELU uses it?",
               "Count the tensors of tokens x width elements that cross HBM: what is read from it, what is "
               "written back to it; each element is one dtype's bytes."),
        misconceptions=(
            Misconception("counted-fused-intermediate",
                          "That is the unfused traffic: the bias add's output is written and read back. Fused, "
                          "that intermediate stays in registers and costs no HBM bytes; count only the input "
                          "read and the final write.",
                          answer=lambda tokens, width, dtype: _bias_gelu(tokens, width, dtype).unfused.bytes),
            Misconception("forgot-output-write",
                          "You counted the read of the input only. The GELU result has to go back to HBM for "
                          "the next kernel: add the write.",
                          scale=0.5),
        ),
    ),
    Question(
        id="l09.residual-rmsnorm-ratio",
        lesson="09",
        kind="numeric",
        prompt=("A residual add h = x + r followed by RMSNorm y = rmsnorm(h), on {tokens} tokens x d_model "
                "{d_model} in {dtype}. The next block still needs h (it is the residual stream), so the fused "
                "kernel writes h as well as y. By what factor does fusing the two kernels cut the HBM traffic "
                "(unfused bytes / fused bytes)?"),
        params={"tokens": 4096, "d_model": 4096, "dtype": "bf16"},
        key=lambda tokens, d_model, dtype: _residual_rmsnorm(tokens, d_model, dtype).traffic_ratio,
        unit="dimensionless",
        hints=("Count tensors of tokens x d_model elements; the norm weight (d_model elements) is negligible.",
               "Unfused: the add reads two tensors and writes one; RMSNorm reads one and writes one. Fused: "
               "what is read, and which two tensors (h and y) are written?"),
        misconceptions=(
            Misconception("dropped-residual-write",
                          "That ratio assumes the fused kernel writes only y. The residual stream h is read by "
                          "the next residual add, so the kernel must write it too (keep=['residual_add']).",
                          answer=lambda tokens, d_model, dtype:
                          _residual_rmsnorm(tokens, d_model, dtype, keep=()).traffic_ratio),
            Misconception("counted-fused-intermediate",
                          "A ratio of 1 means fusion saved nothing, which happens only if h is still read back "
                          "from HBM. Fused, RMSNorm uses h from registers: h is written once (for the next "
                          "block) and never re-read.",
                          answer=lambda **_: 1.0),
        ),
    ),
    Question(
        id="l09.stream-critical-path",
        lesson="09",
        kind="numeric",
        prompt=("A host spends {cpu_us:g} µs issuing each kernel launch, asynchronously. It launches {tiny} tiny "
                "kernels that take {tiny_us:g} µs each on the GPU, then one kernel that takes {big_us:g} µs, all on "
                "one stream that starts empty. How long from the first launch until the last kernel ends?"),
        params={"cpu_us": 10.0, "tiny": 50, "tiny_us": 2.0, "big_us": 400.0},
        # never section 4's measured example (8.3 µs launches, 100 kernels of about 1 µs, then 500 µs)
        variants={"cpu_us": (6.0, 15.0), "tiny": (30, 80), "big_us": (250.0, 800.0)},
        key=lambda cpu_us, tiny, tiny_us, big_us: _critical_path(cpu_us, tiny, tiny_us, big_us)["time_s"],
        unit="s",
        figures=3,  # the sum model is only a few percent above the key in some variants
        hints=("The GPU cannot start a kernel before the CPU has issued it, nor before the kernel ahead of it ends.",
               "When is the long kernel issued? Is the GPU still busy with the tiny ones by then?",
               "Follow the critical path: the launches up to some kernel, then the GPU's work from that kernel on."),
        misconceptions=(
            Misconception("max-model",
                          "That is the larger of the CPU's launches and the GPU's work. It holds for a long mix of "
                          "short and long kernels, but here the long kernel comes last: it cannot start before its "
                          "own launch, after all the others, and the GPU idled while they were issued. Add the "
                          "long kernel to the time of the launches before it.",
                          answer=lambda cpu_us, tiny, tiny_us, big_us:
                          _critical_path(cpu_us, tiny, tiny_us, big_us)["max_s"]),
            Misconception("sum-model",
                          "That adds every launch to every kernel, as if the CPU waited for each one. The tiny "
                          "kernels run while the CPU issues the next launches: their GPU time is hidden.",
                          answer=lambda cpu_us, tiny, tiny_us, big_us:
                          _critical_path(cpu_us, tiny, tiny_us, big_us)["sum_s"]),
            Misconception("launches-only",
                          "That is when the last launch is issued. The long kernel starts only then, and still "
                          "has to run.",
                          answer=_last_launch),
        ),
    ),
    Question(
        id="l09.flash-flops",
        lesson="09",
        kind="choice",
        prompt=("Take one attention head with s = {seq} and d_h = {head_dim} in {dtype}, no causal mask. Compared "
                "with the three naive kernels (S = QK^T, P = softmax(S), O = PV), the FlashAttention forward kernel "
                "does ..."),
        params={"seq": 8192, "head_dim": 128, "dtype": "bf16"},
        choices=("fewer FLOPs and fewer bytes", "same FLOPs but fewer bytes", "fewer FLOPs but same bytes",
                 "same FLOPs and same bytes"),
        key=_flash_vs_naive,
        hints=("Does FlashAttention skip any score, or compute an approximation?",
               "Where do S and P live in each version: HBM or on-chip memory?"),
        misconceptions=(
            Misconception("flash-reduces-flops",
                          "FlashAttention is exact: it computes every score, the same softmax and the same PV "
                          "product (the backward pass even recomputes S and P, so it does more math there). It "
                          "wins by keeping S and P on chip: the bytes drop, not the FLOPs.",
                          answer=lambda **_: "fewer FLOPs and fewer bytes"),
            Misconception("fusion-changes-flops",
                          "Fusion does not change the arithmetic, and FlashAttention does change the traffic: "
                          "the s x s matrices S and P never reach HBM.",
                          answer=lambda **_: "fewer FLOPs but same bytes"),
            Misconception("no-traffic-change",
                          "The FLOPs are indeed the same, but the traffic is not: the naive kernels write S, read "
                          "it, write P and read it again, four passes over s x s elements that the fused kernel "
                          "never makes.",
                          answer=lambda **_: "same FLOPs and same bytes"),
        ),
    ),
    Question(
        id="l09.pp1-flash-intensity",
        lesson="09",
        kind="numeric",
        prompt=("Practice problem (c): on the {hw} in {dtype}, one attention head of size d_h = {head_dim} "
                "over s = {seq} tokens runs as one FlashAttention kernel that reads Q, K, V and writes O once "
                "(the ideal count). What is its arithmetic intensity?"),
        params={"seq": 8192, "head_dim": 8192, "hw": "h100", "dtype": "bf16"},
        variants={"seq": (2048, 4096, 16384, 32768), "head_dim": (64, 128, 256)},
        key=lambda seq, head_dim, hw, dtype: formulas.attention_fused(1, 1, seq, head_dim, dtype).intensity,
        unit="FLOP/byte",
        hints=("The FLOPs are those of the naive kernels: two s x s x d_h matrix products, plus the softmax "
               "(5 FLOPs per score).",
               "HBM traffic: four tensors of s x d_h elements (Q, K, V in, O out), b bytes each."),
        misconceptions=(
            Misconception("one-tensor-of-traffic",
                          "You divided by the bytes of one s x d_h tensor. The kernel reads three (Q, K, V) and "
                          "writes one (O): four times that. This is the slip behind a widely read source's "
                          "intensity of about 2e4.",
                          scale=4),
            Misconception("naive-traffic",
                          "That is naive attention's intensity: it counts the s x s scores and probabilities "
                          "going through HBM. In the fused kernel they never leave the chip.",
                          answer=lambda seq, head_dim, hw, dtype:
                          formulas.attention_naive(1, 1, seq, head_dim, dtype).intensity),
        ),
    ),
    Question(
        id="l09.flash-tiled-intensity",
        lesson="09",
        kind="numeric",
        prompt=("A FlashAttention kernel keeps query tiles of {rows} rows on chip. One attention head with "
                "d_h = {head_dim} runs over s = {seq:,} tokens (as many keys) in {dtype}, no causal mask. Each query "
                "tile streams all of K and V past it, and every one of those reads comes from HBM; Q is read and "
                "O written once. What is the kernel's arithmetic intensity?"),
        # at long sequences the intensity levels off near 2 rows / b, 128 for these tiles in BF16, and 128 is
        # printed all through the lesson (d_h, tile rows, MiB): at 4,096 tokens the key (125.3) is over 2% from it
        params={"rows": 128, "head_dim": 128, "seq": 4096, "dtype": "bf16"},
        variants={"rows": (96, 192, 256)},
        key=lambda rows, head_dim, seq, dtype: _tiled(rows, head_dim, seq, dtype).intensity,
        unit="FLOP/byte",
        figures=3,
        hints=("The FLOPs do not change: s x s scores, 4 d_h + 5 FLOPs each.",
               "How many query tiles are there? Each one reads K and V: s x d_h elements each.",
               "Bytes = (Q + O + tiles x (K + V)) x bytes per element."),
        misconceptions=(
            Misconception("ideal-count",
                          "That is the ideal count, K and V read once. With tiles, every query tile reads all of K "
                          "and V again: multiply their traffic by the number of tiles, ceil(s / rows).",
                          answer=lambda rows, head_dim, seq, dtype:
                          formulas.attention_fused(1, 1, seq, head_dim, dtype).intensity),
            Misconception("naive-traffic",
                          "That is naive attention's intensity, with S and P going through HBM. The tiled kernel "
                          "keeps them on chip; what it re-reads is K and V.",
                          answer=lambda rows, head_dim, seq, dtype:
                          formulas.attention_naive(1, 1, seq, head_dim, dtype).intensity),
        ),
    ),
    # --- end-of-lesson exercises --------------------------------------------------------
    Question(
        id="l09.ex-decoder-launch-time",
        lesson="09",
        kind="numeric",
        prompt=("A {layers}-layer model with section 4's layer (d_model 4096, 32 heads, d_ff 11008, SwiGLU, BF16) "
                "decodes one token at batch 1, against a KV cache of {kv_seq:,} tokens, on the {hw}. Each layer runs "
                "either as the kernels of fusion.DECODER_LAYER_KERNELS or, fused, as those of "
                "fusion.FUSED_DECODER_LAYER_KERNELS. At one token fusion leaves the bytes practically unchanged: "
                "take the layer's roofline time from formulas.transformer_layer_ops for both, at the {hw}'s "
                "achievable roofs (the catalog's measured matmul rate and copy bandwidth, the roofs t0 was fitted "
                "with). Each kernel pays section 4's per-kernel floor t0 (lesson 11's fit) on the GPU; the host "
                "spends {cpu_us:g} µs issuing each launch (Python between the ops), asynchronously. The layers run "
                "back to back, a long stream: take each layer as the larger of its CPU and GPU times. How much "
                "time per decode step does fusion save?"),
        params={"layers": 32, "kv_seq": 8192, "cpu_us": 20.0, "hw": "h100"},
        # never section 4's numbers (4,096 cached tokens, He's 3.6 µs per launch, one layer): its table prints them
        variants={"layers": (40, 48, 80), "kv_seq": (2048, 32768), "cpu_us": (3.0, 12.0, 30.0),
                  "hw": ("h100", "h200", "a100")},
        key=_fusion_saves,
        unit="s",
        rtol=0.01,
        figures=3,
        hints=("Each layer takes max(CPU issue time, GPU time): the CPU issues k launches of cpu_us each while "
               "the GPU runs k floors t0 plus the layer's roofline time, at the achievable roofs.",
               "Work out which side is the slower for the eager layer and for the fused one: they need not be "
               "the same.",
               "The saving per layer is the eager layer's time minus the fused one's; a step runs every layer."),
        misconceptions=(
            Misconception("launches-added",
                          "That adds the CPU's launches to the GPU's work, as if the CPU waited for each kernel. "
                          "Launches are asynchronous: the CPU issues the next kernels while the GPU runs, so in a "
                          "long stream of layers each one takes about the larger of the two, not their sum.",
                          answer=_added),
            Misconception("datasheet-roofs",
                          "That takes the layer's roofline time at the datasheet's roofs. The floor t0 was fitted "
                          "with the achievable roofs (the best matmul rate and copy bandwidth measured), so add it "
                          "to roofline times at those roofs: acc.peak('bf16', achievable=True) and "
                          "acc.memory_bandwidth(achievable=True).",
                          answer=_datasheet_roofs),
            Misconception("launches-only",
                          "That counts only the launches fusion removes, as if the GPU waited for every one. It "
                          "does only while the CPU is the slower side; once the fused layer's GPU work takes "
                          "longer than its launches, the launches hide behind it.",
                          answer=_launches_only),
            Misconception("floors-only",
                          "That counts only the GPU's floors of the removed kernels. It holds while the GPU is the "
                          "slower side of both layers; here the CPU's launches set the pace of at least one.",
                          answer=_floors_only),
            Misconception("one-layer-only",
                          "That is one layer's saving. A decode step runs every layer: multiply by the number of "
                          "layers.",
                          answer=lambda layers, kv_seq, cpu_us, hw: _fusion_saves(1, kv_seq, cpu_us, hw)),
        ),
        points=2,
    ),
    Question(
        id="l09.ex-mlp-saved-bytes",
        lesson="09",
        kind="numeric",
        prompt=("RMSNorm -> Linear (d -> f) -> SiLU -> Linear (f -> d), the two-matrix chain of section 6's "
                "symbols (not a gated MLP), on {tokens} tokens, d = {d_model}, f = {d_ff}, in {dtype}. Under the "
                "ideal traffic model, how many HBM bytes does one fused kernel save compared with four separate "
                "kernels?"),
        params={"tokens": 4096, "d_model": 4096, "d_ff": 11008, "dtype": "bf16"},
        variants={"tokens": (512, 1024, 8192, 16384, 32768)},
        key=lambda tokens, d_model, d_ff, dtype: fusion.mlp_block(tokens, d_model, d_ff, dtype)["bytes_saved"],
        unit="byte",
        figures=3,
        hints=("Both versions read the weights W1 and W2 (and the norm weight). What does only the unfused "
               "version move?",
               "Each activation that one kernel writes and the next reads is a round trip: list them "
               "(tokens x d_model after the norm, tokens x d_ff after each of the up projection and SiLU)."),
        misconceptions=(
            Misconception("weights-saved-too",
                          "The fused kernel still reads W1 and W2 from HBM once: fusion removes the activation "
                          "round trips, not the weight reads.",
                          answer=lambda tokens, d_model, d_ff, dtype:
                          fusion.mlp_block(tokens, d_model, d_ff, dtype)["bytes_saved"]
                          + fusion.mlp_block(tokens, d_model, d_ff, dtype)["weight_bytes"]),
            Misconception("fused-bytes-not-saved",
                          "That is what the fused kernel moves, not what it saves: subtract it from the "
                          "unfused traffic.",
                          answer=lambda tokens, d_model, d_ff, dtype:
                          fusion.mlp_block(tokens, d_model, d_ff, dtype)["fused_bytes"]),
            Misconception("gated-mlp",
                          "That is the gated (SwiGLU) MLP of section 6's table, with a third matrix and six "
                          "kernels. This chain has two matrices and four kernels: count its own round trips.",
                          answer=lambda tokens, d_model, d_ff, dtype:
                          fusion.mlp_block(tokens, d_model, d_ff, dtype, gated=True)["bytes_saved"]),
        ),
        points=2,
    ),
    Question(
        id="l09.ex-flash-speedup",
        lesson="09",
        kind="numeric",
        prompt=("Prefill attention with batch {batch}, {heads} heads of d_h = {head_dim}, s = {seq}, {dtype} on "
                "the {hw}. Predict FlashAttention's speed-up over the three naive kernels: the sum of the naive "
                "kernels' roofline times (each max(math time, memory time)) over the fused kernel's roofline time, "
                "with the fused kernel's ideal count (Q, K, V and O cross HBM once)."),
        params={"batch": 1, "heads": 64, "head_dim": 128, "seq": 8192, "hw": "h100", "dtype": "bf16"},
        variants={"seq": (4096, 8192, 16384), "hw": ("a100", "h200", "mi300x", "l40s", "b200")},
        key=lambda batch, heads, head_dim, seq, hw, dtype:
            (lambda t: t[0] / t[1])(_attention_times(batch, heads, seq, head_dim, hw, dtype)),
        unit="dimensionless",
        hints=("Each kernel's roofline time is max(FLOPs / peak, bytes / bandwidth).",
               "The naive kernels run one after another: add their times.",
               "Is the fused kernel memory-bound or compute-bound? That decides its time."),
        misconceptions=(
            Misconception("traffic-ratio",
                          "That is the ratio of bytes moved. The fused kernel is compute-bound, so its time is "
                          "FLOPs / peak, not bytes / bandwidth: cutting bytes stops helping once the kernel "
                          "crosses the ridge.",
                          answer=lambda batch, heads, head_dim, seq, hw, dtype:
                          formulas.attention_naive(batch, heads, seq, head_dim, dtype).bytes
                          / formulas.attention_fused(batch, heads, seq, head_dim, dtype).bytes),
        ),
        points=2,
    ),
)
