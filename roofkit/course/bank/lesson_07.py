"""Lesson 07, MFU and HFU: how much of the peak a training run spends on the model's own math.

Every key is a computation through :mod:`roofkit.training` over the question's
parameters; peaks come from the hardware catalog.
"""

from ...catalogs import hardware
from ...perf import training
from ..quiz import Misconception, Question, register

SECONDS_PER_DAY = 24 * 3600
_LEVEL_WORDS = {"ok": "plausible", "suspicious": "suspicious", "impossible": "impossible"}


def _peak(hw, dtype):
    return hardware.get(hw).peak(dtype)


def _mfu_per_gpu(params, tokens_per_s_per_gpu, hw, dtype):
    """MFU from one GPU's throughput (the 70B-model quiz of lesson 07)."""
    return training.mfu_from_throughput(params, tokens_per_s_per_gpu, _peak(hw, dtype))


def _verdict(params, tokens_per_s_per_gpu, hw, dtype):
    level = training.mfu_verdict(_mfu_per_gpu(params, tokens_per_s_per_gpu, hw, dtype)).level
    return _LEVEL_WORDS[level]


def _if_impossible(choice):
    """A wrong verdict on an MFU above 100% (a variant with a plausible MFU has no such misconception)."""
    return lambda **p: choice if _verdict(**p) == "impossible" else None


def _cluster_mfu(params, tokens_per_s, gpus, hw, dtype):
    return training.mfu_from_throughput(params, tokens_per_s, _peak(hw, dtype), gpus)


def _step_flops(forward, recompute, backward):
    """(model FLOPs, hardware FLOPs) of one step given in TFLOPs."""
    return (forward + backward) * 1e12, (forward + recompute + backward) * 1e12


def _params_for(tokens, days, gpus, hw, dtype, mfu):
    return training.params_for_mfu(tokens, days * SECONDS_PER_DAY, gpus, _peak(hw, dtype), mfu)


def _run_mfu(params, tokens, days, gpus, hw, dtype):
    """MFU of D tokens in ``days`` on G GPUs: 6ND / (t G P)."""
    return training.utilization(training.training_flops(params, tokens), days * SECONDS_PER_DAY, _peak(hw, dtype), gpus)


def _palm_mfu(params, n_layers, n_heads, head_dim, seq_len, tokens_per_s_per_gpu, hw, dtype, attention=True,
              causal=False):
    per_token = (training.flops_per_token(params, n_layers, n_heads, head_dim, seq_len, causal=causal)
                 if attention else None)
    return training.mfu_from_throughput(params, tokens_per_s_per_gpu, _peak(hw, dtype), flops_per_token=per_token)


_SPARSE = ("The denominator is twice the dense peak: that is the 2:4-sparse headline figure (or the peak of "
           "a lower precision). Divide by the dense peak in the precision the run used: roofkit.hw(name).peak(dtype).")
_FORWARD_ONLY = ("2N FLOPs per token is only the forward pass. Training also runs the backward pass, about "
                 "twice the forward: 6N per token in all.")
_PERCENT = "Give the MFU as a fraction: 0.45 for 45%."
_HFU_AS_MFU = ("That counts every FLOP the hardware executed, recomputation included: it is the HFU. MFU "
               "counts only the FLOPs the model needs (forward and backward once).")

register(
    Question(
        id="l07.mfu-3000",
        lesson="07",
        kind="numeric",
        prompt=("A {params} model trains at {tokens_per_s_per_gpu:,} tokens/s per GPU on {hw} GPUs in {dtype}. "
                "Counting 6N FLOPs per token, what MFU does that give? Answer as a fraction (0.45 for 45%)."),
        params={"params": "70B", "tokens_per_s_per_gpu": 3000, "hw": "H100", "dtype": "BF16"},
        variants={"tokens_per_s_per_gpu": (1000, 1500, 2000, 2500, 3500), "hw": ("H100", "A100", "MI300X", "B200")},
        key=_mfu_per_gpu,
        unit="dimensionless",
        hints=(
            "MFU = model FLOP/s achieved / peak FLOP/s of the same GPUs.",
            "One GPU's model FLOP/s is 6N times its tokens per second (N = params); its peak is the catalog's "
            "dense peak for that GPU and dtype.",
        ),
        misconceptions=(
            Misconception("sparse-peak", _SPARSE, scale=0.5),
            Misconception("forward-only", _FORWARD_ONLY, scale=1 / 3),
            Misconception("percent", _PERCENT, scale=100),
        ),
    ),
    Question(
        id="l07.verdict-3000",
        lesson="07",
        kind="choice",
        prompt=("Judge the MFU of that run ({params} at {tokens_per_s_per_gpu:,} tokens/s per {hw} GPU, {dtype}): "
                "plausible, suspicious (above about 60%) or impossible?"),
        params={"params": "70B", "tokens_per_s_per_gpu": 3000, "hw": "H100", "dtype": "BF16"},
        variants={"tokens_per_s_per_gpu": (1000, 1500, 2000, 3000, 4000), "hw": ("H100", "A100", "MI300X", "B200")},
        choices=("plausible", "suspicious", "impossible"),
        synonyms={"plausible": ("possible", "realistic", "fine", "believable"),
                  "suspicious": ("suspect", "doubtful", "questionable"),
                  "impossible": ("not possible", "cannot be", "impossible: above 100%")},
        key=_verdict,
        hints=(
            "Compute the MFU first, then compare it with 60% and with 100%.",
            "Can a chip do more useful FLOPs per second than its peak allows?",
        ),
        misconceptions=(
            Misconception("accepted-over-100", (
                "An MFU above 100% would mean more useful FLOPs than the chip can do at its peak. That never "
                "happens: some input is wrong (N, tokens/s per GPU vs total, or the peak)."),
                answer=_if_impossible("plausible")),
            Misconception("over-100-only-suspicious", (
                "Above 60% is suspicious; above 100% is beyond doubt. No run exceeds the peak, so some input is wrong."),
                answer=_if_impossible("suspicious")),
        ),
    ),
    Question(
        id="l07.mfu-cluster-log",
        lesson="07",
        kind="numeric",
        prompt=("A training log for a {params} model on {gpus:,} {hw} GPUs in {dtype} reports "
                "'throughput: {tokens_per_s:,} tokens/s' for the whole cluster. What MFU is that "
                "(6N FLOPs per token, as a fraction)?"),
        params={"params": "70B", "tokens_per_s": 1_740_800, "gpus": 2048, "hw": "H100", "dtype": "BF16"},
        variants={"tokens_per_s": (512_000, 614_400, 768_000, 1_228_800), "gpus": (512, 1024, 2048),
                  "hw": ("H100", "A100", "B200")},
        key=_cluster_mfu,
        unit="dimensionless",
        hints=(
            "The throughput is the total over all gpus: compare it with the peak of all of them.",
            "MFU = 6N x tokens_per_s / (gpus x P), or per GPU: 6N x (tokens_per_s / gpus) / P.",
        ),
        misconceptions=(
            Misconception("total-as-per-gpu", (
                "That divides the whole cluster's throughput by one GPU's peak. The log's tokens/s is the total: "
                "divide by G x P, or first turn it into tokens/s per GPU."),
                answer=lambda params, tokens_per_s, gpus, hw, dtype: _cluster_mfu(params, tokens_per_s, 1, hw, dtype)),
            Misconception("sparse-peak", _SPARSE, scale=0.5),
            Misconception("forward-only", _FORWARD_ONLY, scale=1 / 3),
            Misconception("percent", _PERCENT, scale=100),
        ),
    ),
    Question(
        id="l07.checkpoint-mfu",
        lesson="07",
        kind="numeric",
        prompt=("With activation checkpointing, one step does {forward} TFLOPs of forward pass, {recompute} TFLOPs "
                "of recomputation and {backward} TFLOPs of backward pass, in {seconds} s on a device whose peak "
                "is {peak_tflops} TFLOP/s. What is the step's MFU (as a fraction)?"),
        params={"forward": 50, "recompute": 450, "backward": 300, "seconds": 10, "peak_tflops": 100},
        variants={"forward": (40, 50, 60, 100), "seconds": (12, 15, 20), "peak_tflops": (100, 125, 150)},
        key=lambda forward, recompute, backward, seconds, peak_tflops: training.mfu(
            _step_flops(forward, recompute, backward)[0], seconds, peak_tflops * 1e12),
        unit="dimensionless",
        hints=(
            "MFU and HFU share the time and the peak; only the FLOPs on top differ.",
            "Which of the three amounts of work (forward, recompute, backward) would a run without "
            "checkpointing still have to do? Divide it by seconds x peak_tflops.",
        ),
        misconceptions=(
            Misconception("hfu-as-mfu", _HFU_AS_MFU,
                          answer=lambda forward, recompute, backward, seconds, peak_tflops: training.hfu(
                              _step_flops(forward, recompute, backward)[1], seconds, peak_tflops * 1e12)),
            Misconception("percent", _PERCENT, scale=100),
        ),
    ),
    Question(
        id="l07.padding-mfu",
        lesson="07",
        kind="numeric",
        prompt=("A {m} x {m} x {m} matrix product runs on a kernel that works in {tile} x {tile} x {tile} tiles, "
                "so every dimension is padded with zeros up to a multiple of {tile}. The profiler reports an HFU "
                "of {hfu:.0%}. What is the utilization counting only the useful FLOPs (as a fraction)?"),
        # not 130: the lesson prints 130^3's useful share on 128-tiles (0.131) just before; nor 200 or 300, whose
        # 0.8 x 0.477 lands on the 38.2% MFU printed in section 2
        params={"m": 160, "tile": 128, "hfu": 0.8},
        variants={"m": (150, 160, 180, 260), "tile": (64, 128), "hfu": (0.6, 0.7, 0.8)},
        key=lambda m, tile, hfu: hfu * training.padding_efficiency(m, m, m, tile),
        unit="dimensionless",
        hints=(
            "Both utilizations share the time and the peak, so their ratio is useful FLOPs / executed FLOPs.",
            "Useful: 2 m^3. Executed: the same product with each dimension rounded up to a multiple of tile.",
        ),
        misconceptions=(
            Misconception("hfu-as-mfu", ("The padded zeros keep the tensor cores busy but compute nothing "
                                         "useful: the useful share is smaller than the HFU."),
                          answer=lambda m, tile, hfu: hfu),
            Misconception("two-dimensions", ("Padding happens in all three dimensions of the product (m, n and k), "
                                             "not only in the output's two."),
                          answer=lambda m, tile, hfu: hfu * training.padding_efficiency(m, m, m, tile) ** (2 / 3)),
            Misconception("divided", ("Multiply the HFU by useful/executed, do not divide: the useful "
                                      "utilization can never exceed the HFU."),
                          answer=lambda m, tile, hfu: hfu / training.padding_efficiency(m, m, m, tile)),
        ),
    ),
    Question(
        id="l07.params-for-mfu",
        lesson="07",
        kind="numeric",
        prompt=("A run processes {tokens} tokens in {days} days on {gpus:,} {hw} GPUs ({dtype}). Its MFU cannot be "
                "computed without the model size. What model size N (parameters) would make it {mfu:.0%} MFU?"),
        params={"tokens": "300B", "days": 14, "gpus": 512, "hw": "H100", "dtype": "BF16", "mfu": 0.45},
        # never the worked problem's 100B tokens at 40%: its answer is printed just above
        variants={"tokens": ("50B", "1T", "2T"), "days": (45, 75, 90), "gpus": (1024, 4096),
                  "hw": ("H100", "A100"), "mfu": (0.35, 0.5)},
        key=_params_for,
        unit="dimensionless",
        hints=(
            "The useful FLOPs the cluster delivers: mfu x gpus x P x t, with t = days in seconds.",
            "Those FLOPs must equal 6ND with D = tokens; solve for N.",
        ),
        misconceptions=(
            Misconception("hours-not-seconds", "The peak is FLOP per second: express the days in seconds.",
                          scale=1 / 3600),
            Misconception("forward-only", _FORWARD_ONLY, scale=3),
            Misconception("sparse-peak", _SPARSE, scale=2),
            Misconception("one-gpu", "The FLOP budget is that of all the GPUs together, not of one.",
                          answer=lambda tokens, days, gpus, hw, dtype, mfu: _params_for(tokens, days, 1, hw, dtype, mfu)),
        ),
    ),
    Question(
        id="l07.ex-mfu-if-7b",
        lesson="07",
        kind="numeric",
        prompt=("Exercise. The same run ({tokens} tokens in {days} days on {gpus:,} {hw} GPUs, {dtype}) trained a "
                "{params} model. What was its MFU (as a fraction)?"),
        params={"params": "7B", "tokens": "100B", "days": 30, "gpus": 1024, "hw": "H100", "dtype": "BF16"},
        variants={"params": ("1.3B", "13B", "34B", "70B"), "tokens": ("100B", "300B", "1T"), "days": (14, 30, 60),
                  "gpus": (256, 1024, 2048), "hw": ("H100", "A100", "B200")},
        key=_run_mfu,
        unit="dimensionless",
        rtol=0.02,
        hints=(
            "MFU = 6ND / (t x G x P): N = params, D = tokens, G = gpus, t = days in seconds.",
            "P is the catalog's dense peak of one GPU in that dtype; G x P is what the whole cluster could do.",
        ),
        misconceptions=(
            Misconception("one-gpu", ("That divides the whole run's FLOPs by the time of one GPU: divide by all "
                                      "the GPUs' peak."),
                          answer=lambda params, tokens, days, gpus, hw, dtype: _run_mfu(params, tokens, days, 1, hw, dtype)),
            Misconception("hours-not-seconds", "The peak is FLOP per second: express the days in seconds.",
                          scale=3600),
            Misconception("percent", _PERCENT, scale=100),
        ),
        points=2,
    ),
    Question(
        id="l07.ex-palm-mfu",
        lesson="07",
        kind="numeric",
        prompt=("Exercise. A model with N = {params} parameters, L = {n_layers} layers and H = {n_heads} heads of "
                "dimension d_h = {head_dim} trains on sequences of s = {seq_len:,} tokens at "
                "{tokens_per_s_per_gpu:,} tokens/s per {hw} GPU in {dtype}. What is its MFU when you count PaLM's "
                "FLOPs per token, 6N + 12·L·H·d_h·s (as a fraction)?"),
        # not 8000 tokens/s: its MFU, 0.377, is within 2% of the 38.2% section 2 prints for another run
        params={"params": "6.7B", "n_layers": 32, "n_heads": 32, "head_dim": 128, "seq_len": 4096,
                "tokens_per_s_per_gpu": 7000, "hw": "H100", "dtype": "BF16"},
        variants={"seq_len": (2048, 8192, 16384), "tokens_per_s_per_gpu": (4000, 5500, 9000, 12000),
                  "hw": ("H100", "A100", "MI300X", "B200")},
        key=_palm_mfu,
        unit="dimensionless",
        figures=3,
        hints=(
            "First the FLOPs of one token: 6N plus the attention term 12·L·H·d_h·s.",
            "Then MFU = FLOPs per token x tokens/s per GPU / the GPU's dense peak.",
        ),
        misconceptions=(
            Misconception("no-attention", ("That is 6N alone. The attention matmuls (QK^T and AV) have no "
                                           "parameters, so 6N misses them; add 12·L·H·d_h·s per token."),
                          answer=lambda **p: _palm_mfu(**p, attention=False)),
            Misconception("causal-half", ("That counts only the causal half of the attention scores, which is "
                                          "what a causal kernel executes. PaLM's count, asked for here, counts "
                                          "all s x s of them: 12·L·H·d_h·s."),
                          answer=lambda **p: _palm_mfu(**p, causal=True)),
            Misconception("sparse-peak", _SPARSE, scale=0.5),
            Misconception("percent", _PERCENT, scale=100),
        ),
        points=2,
    ),
)
