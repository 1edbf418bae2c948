"""Lesson 09, fusion and FlashAttention: HBM traffic of op chains, launch overhead, attention's s x s scores."""

from __future__ import annotations

import math

from .. import formulas, fusion, roofline
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


def _removed_launches(layers):
    return layers * (len(fusion.DECODER_LAYER_KERNELS) - len(fusion.FUSED_DECODER_LAYER_KERNELS))


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
        params={"rows": 128, "head_dim": 128, "seq": 32768, "dtype": "bf16"},
        variants={"rows": (96, 192, 320), "dtype": ("bf16", "fp32")},
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
        prompt=("Launch time: a {layers}-layer model runs each layer as the kernels of "
                "fusion.DECODER_LAYER_KERNELS; fused, as those of fusion.FUSED_DECODER_LAYER_KERNELS. At "
                "{overhead_us:g} µs of launch overhead per kernel, how much time per forward pass do the launches "
                "that fusion removes cost?"),
        params={"layers": 32, "overhead_us": fusion.DEFAULT_LAUNCH_OVERHEAD_S / _US},
        variants={"layers": (24, 28, 48, 60, 80), "overhead_us": (3.0, 4.0, 5.0, 8.0)},
        key=lambda layers, overhead_us: _removed_launches(layers) * overhead_us * _US,
        unit="s",
        rtol=0.01,
        hints=("Count the kernels of one layer before and after fusion: the lengths of the two lists.",
               "Launches removed per layer, times layers, times overhead_us.",
               "Answer with a unit, for example '... ms'."),
        misconceptions=(
            Misconception("one-layer-only",
                          "That is one layer's saving. A forward pass runs every layer: multiply by the number "
                          "of layers.",
                          answer=lambda layers, overhead_us: _removed_launches(1) * overhead_us * _US),
            Misconception("all-launches",
                          "That is the overhead of every unfused launch. The question asks for the launches "
                          "fusion removes: the fused kernels are still launched.",
                          answer=lambda layers, overhead_us:
                          layers * len(fusion.DECODER_LAYER_KERNELS) * overhead_us * _US),
        ),
        points=2,
    ),
    Question(
        id="l09.ex-mlp-saved-bytes",
        lesson="09",
        kind="numeric",
        prompt=("RMSNorm -> Linear (d -> f) -> SiLU -> Linear (f -> d) on {tokens} tokens, "
                "d = {d_model}, f = {d_ff}, in {dtype}. Under the ideal traffic model, how many HBM bytes does one "
                "fused kernel save compared with four separate kernels?"),
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
