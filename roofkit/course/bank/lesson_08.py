"""Lesson 08, the 6ND rule and what a training run costs.

Every key goes through :mod:`roofkit.training` (C = 6ND, GPU-hours, wall clock,
cost, implied MFU) or :mod:`roofkit.fusion` (Amdahl's law); peaks come from the
hardware catalog.
"""

from ...perf import fusion, training
from ...catalogs import hardware
from ..quiz import Misconception, Question, register
from ...units import size

HOURS_PER_DAY = 24


def _non_embedding(params, vocab, d_model):
    """N without the input embedding table (vocab x d_model parameters that are only looked up)."""
    return size(params, "params") - size(vocab, "vocab") * size(d_model, "d_model")


def _peak(hw, dtype):
    return hardware.get(hw).peak(dtype)


def _estimate(params, tokens, hw, dtype, mfu, **more):
    return training.estimate(params, tokens, hw=hw, dtype=dtype, mfu=mfu, **more)


def _days(params, tokens, hw, dtype, mfu, gpus):
    return _estimate(params, tokens, hw, dtype, mfu, gpus=gpus).wall_clock_days


def _cost(params, tokens, hw, dtype, mfu, usd_per_gpu_hour):
    return _estimate(params, tokens, hw, dtype, mfu, usd_per_gpu_hour=usd_per_gpu_hour).cost_usd


_PRACTICE_DAYS = 30  # the practice problem's deadline, before l08.gpus-for-deadline asks for another


def _gpus(params, tokens, hw, dtype, mfu, days):
    return _estimate(params, tokens, hw, dtype, mfu, deadline_hours=days * HOURS_PER_DAY).gpus_needed


def _implied(params, tokens, gpu_hours, hw, dtype):
    return training.implied_mfu(params, tokens, gpu_hours, _peak(hw, dtype))


def _attention_ratio(params, n_layers, n_heads, head_dim, seq_len, attention_factor=1.0):
    """(6N + f·12·L·H·d_h·s) / 6N; f = 1 is PaLM's count."""
    six_n = training.flops_per_token(params)
    attention = training.flops_per_token(params, n_layers, n_heads, head_dim, seq_len) - six_n
    return (six_n + attention_factor * attention) / six_n


def _fp8_speedup(matmul_share, hw):
    return fusion.amdahl(matmul_share, _peak(hw, "fp8") / _peak(hw, "bf16"))


_FORWARD_ONLY = ("2ND counts only the forward pass. Training also runs the backward pass, which costs twice "
                 "the forward (gradients with respect to the inputs and to the weights): 6ND in all.")
_SPARSE = ("That uses twice the right peak: the 2:4-sparse headline figure, or the peak of a lower precision. "
           "Use the dense peak of the precision the run uses: roofkit.hw(name).peak(dtype).")
_FULL_MFU = ("That assumes the GPUs deliver their whole peak to the model. Real runs get a fraction of it: "
             "divide the FLOPs by MFU x peak, not by the peak.")
_PERCENT = "Give the MFU as a fraction: 0.45 for 45%."

register(
    Question(
        id="l08.flops-embedding",
        lesson="08",
        kind="numeric",
        prompt=("A model has {params} parameters in all. Among them is its input embedding, a {vocab:,} x "
                "{d_model:,} table that is only looked up, with no arithmetic (the output layer is a separate "
                "matrix, counted with the rest). How many FLOPs does training it on {tokens} tokens take, by "
                "C = 6ND with N the parameters that do arithmetic?"),
        params={"params": "1.3B", "vocab": 50_304, "d_model": 2048, "tokens": "26B"},
        variants={"vocab": (32_000, 50_304, 128_256), "tokens": ("13B", "26B", "52B", "100B", "300B")},
        key=lambda params, vocab, d_model, tokens: training.training_flops(_non_embedding(params, vocab, d_model),
                                                                           tokens),
        unit="FLOP",
        figures=3,
        hints=(
            "Take the lookup table's parameters out of N first: vocab x d_model of them.",
            "Then each remaining parameter costs 2 FLOPs per token forward and 4 backward.",
        ),
        misconceptions=(
            Misconception("counted-embeddings", (
                "That counts the embedding table in N. A lookup copies a row and does no multiply-add, so its "
                "parameters add no FLOPs: use the non-embedding parameters."),
                answer=lambda params, vocab, d_model, tokens: training.training_flops(params, tokens)),
            Misconception("forward-only", _FORWARD_ONLY,
                          answer=lambda **p: training.forward_backward(_non_embedding(p["params"], p["vocab"],
                                                                                      p["d_model"]), p["tokens"])[0]),
            Misconception("flop-rate", "The question asks for an amount of work (FLOPs), not a rate (FLOP/s).",
                          unit=True),
        ),
    ),
    Question(
        id="l08.days-70b",
        lesson="08",
        kind="numeric",
        prompt=("A {params} model trains on {tokens} tokens on {gpus:,} {hw} GPUs in {dtype} at an MFU of "
                "{mfu:.0%}. How many days of wall clock does it take?"),
        params={"params": "70B", "tokens": "15T", "hw": "H100", "dtype": "BF16", "mfu": 0.45, "gpus": 6144},
        # never the worked estimate's 40% on 8,192 GPUs: its answer is printed just above
        variants={"tokens": ("2T", "8T", "15T"), "gpus": (2048, 4096, 24576), "mfu": (0.31, 0.37, 0.53),
                  "hw": ("H100", "A100", "MI300X", "B200")},
        key=_days,
        unit="day",
        hints=(
            "First the FLOPs (6ND), then GPU-hours = FLOPs / (MFU x peak x 3600).",
            "The GPUs work in parallel: wall-clock hours = GPU-hours / number of GPUs; then hours to days.",
        ),
        misconceptions=(
            Misconception("gpu-hours-as-wall-clock", (
                "That is how long a single GPU would need. The GPUs share the work: divide the GPU-hours by "
                "the number of GPUs."),
                answer=lambda params, tokens, hw, dtype, mfu, gpus: _estimate(
                    params, tokens, hw, dtype, mfu).gpu_hours / HOURS_PER_DAY),
            Misconception("hours-not-days", ("That number is in hours; the question asks for days (or give your "
                                             "answer as a string with its unit, 'hour')."),
                          answer=lambda **p: _days(**p) * HOURS_PER_DAY),
            Misconception("sparse-peak", _SPARSE, scale=0.5),
            Misconception("full-mfu", _FULL_MFU,
                          answer=lambda params, tokens, hw, dtype, mfu, gpus: _days(
                              params, tokens, hw, dtype, mfu, gpus) * mfu),
        ),
    ),
    Question(
        id="l08.calc-b200-cost",
        lesson="08",
        kind="numeric",
        prompt=("The same {params} model on {tokens} tokens, but on {hw} GPUs in {dtype} at {mfu:.0%} MFU and an "
                "assumed ${usd_per_gpu_hour:.2f} per GPU-hour. What does the compute cost, in dollars?"),
        params={"params": "70B", "tokens": "15T", "hw": "B200", "dtype": "FP8", "mfu": 0.4, "usd_per_gpu_hour": 4.0},
        variants={"tokens": ("2T", "15T"), "hw": ("B200", "H100", "MI300X"), "mfu": (0.3, 0.45),
                  "usd_per_gpu_hour": (2.5, 5.0, 6.0, 8.0)},
        key=_cost,
        unit="dimensionless",
        hints=(
            "Cost = GPU-hours x usd_per_gpu_hour; the number of GPUs changes the days, not the GPU-hours.",
            "GPU-hours = 6ND / (mfu x P x 3600), with P the dense peak of that GPU in that dtype.",
        ),
        misconceptions=(
            Misconception("bf16-peak", ("That is the BF16 cost; the question runs the matmuls in FP8, whose "
                                        "dense peak is twice BF16's on this chip."),
                          answer=lambda **p: _cost(**{**p, "dtype": "bf16"})),
            Misconception("gpu-hours", "That is the GPU-hours; multiply by the price per GPU-hour.",
                          answer=lambda params, tokens, hw, dtype, mfu, usd_per_gpu_hour: _estimate(
                              params, tokens, hw, dtype, mfu).gpu_hours),
            Misconception("sparse-peak", _SPARSE, scale=0.5),
        ),
    ),
    Question(
        id="l08.gpus-for-deadline",
        lesson="08",
        kind="numeric",
        prompt=("The practice problem's {params} model on {tokens} tokens, on {hw} GPUs in {dtype}, now at "
                "{mfu:.0%} MFU. How many GPUs, at least, finish it in {days} days?"),
        params={"params": "400B", "tokens": "8T", "hw": "H100", "dtype": "FP8", "mfu": 0.4, "days": 45},
        # never the practice problem's 35% in 30 days: its answer is printed just above
        variants={"tokens": ("8T", "15T"), "mfu": (0.3, 0.45, 0.55), "days": (30, 80, 100)},
        key=_gpus,
        unit="dimensionless",
        rtol=0,  # one exact whole number
        hints=(
            "GPU-hours = 6ND / (mfu x dense peak in that dtype x 3600).",
            "Divide the GPU-hours by the hours in the deadline (days x 24), and round up to whole GPUs.",
        ),
        misconceptions=(
            Misconception("bf16-peak", ("That uses the BF16 peak. The run computes in FP8, whose dense peak is "
                                        "twice BF16's on an H100."),
                          answer=lambda **p: _gpus(**{**p, "dtype": "bf16"})),
            Misconception("sparse-peak", _SPARSE, scale=0.5),
            Misconception("full-mfu", _FULL_MFU,
                          answer=lambda params, tokens, hw, dtype, mfu, days: _gpus(
                              params, tokens, hw, dtype, mfu, days) * mfu),
            Misconception("days-as-hours", "The deadline is in days: convert it to hours (24 per day).",
                          answer=lambda params, tokens, hw, dtype, mfu, days: _estimate(
                              params, tokens, hw, dtype, mfu).gpu_hours / days),
            Misconception("practice-deadline",
                          "That many GPUs finish in the practice problem's 30 days. This run has the deadline the "
                          "question gives: divide the GPU-hours by its hours.",
                          answer=lambda params, tokens, hw, dtype, mfu, days: None if days == _PRACTICE_DAYS
                          else _gpus(params, tokens, hw, dtype, mfu, _PRACTICE_DAYS)),
        ),
    ),
    Question(
        id="l08.ex-llama31-405b-mfu",
        lesson="08",
        kind="numeric",
        prompt=("Exercise. Meta's Llama 3.1 model card (July 2024) reports {gpu_hours:,.0f} {hw} GPU-hours for "
                "the {params} model, which the Llama 3 paper says was pre-trained on {tokens} tokens. What MFU "
                "does that imply against the dense {dtype} peak (as a fraction)? The paper reports 38-43% MFU "
                "while training: compare."),
        params={"params": "405B", "tokens": "15.6T", "gpu_hours": 30.84e6, "hw": "H100", "dtype": "BF16"},
        key=_implied,
        unit="dimensionless",
        hints=(
            "The run's model FLOPs are 6ND (N = params, D = tokens).",
            "The GPUs could have done gpu_hours x 3600 x peak in that time: divide the first by the second.",
        ),
        misconceptions=(
            Misconception("sparse-peak", _SPARSE, scale=0.5),
            Misconception("forward-only", _FORWARD_ONLY, scale=1 / 3),
            Misconception("percent", _PERCENT, scale=100),
        ),
        points=2,
    ),
    Question(
        id="l08.ex-long-context",
        lesson="08",
        kind="numeric",
        prompt=("Exercise. A model with N = {params} parameters has L = {n_layers} layers and H = {n_heads} heads "
                "of dimension d_h = {head_dim}. Trained on sequences of s = {seq_len:,} tokens, by what factor does "
                "PaLM's count per token, 6N + 12·L·H·d_h·s, exceed 6N?"),
        params={"params": "70B", "n_layers": 80, "n_heads": 64, "head_dim": 128, "seq_len": 32768},
        variants={"seq_len": (8192, 16384, 65536, 131072)},
        key=_attention_ratio,
        unit="dimensionless",
        hints=(
            "Compute the attention term 12·L·H·d_h·s and 6N separately.",
            "The factor is (6N + 12·L·H·d_h·s) / 6N = 1 + the attention term's share of 6N.",
        ),
        misconceptions=(
            Misconception("extra-only", "That is the extra share alone; the factor is 1 plus it.",
                          answer=lambda **p: _attention_ratio(**p) - 1),
            Misconception("forward-attention-only", (
                "4·L·H·d_h·s is the attention matmuls of the forward pass only; training runs them backward "
                "too, 12·L·H·d_h·s in all."), answer=lambda **p: _attention_ratio(**p, attention_factor=1 / 3)),
            Misconception("causal-half", ("That halves the attention term for the causal mask. Kernels that skip "
                                          "masked blocks do save it, but PaLM's count, asked for here, does not."),
                          answer=lambda **p: _attention_ratio(**p, attention_factor=1 / 2)),
        ),
        points=2,
    ),
    Question(
        id="l08.ex-fp8-step",
        lesson="08",
        kind="numeric",
        prompt=("Exercise. In a BF16 training step on {hw} GPUs, the matrix products take {matmul_share:.0%} of "
                "the time and run near the tensor-core peak; the rest is memory-bound. Moving the matrix "
                "products to FP8 speeds them up by the ratio of the dense FP8 and BF16 peaks and leaves the rest "
                "as it was. By what factor does the whole step get faster?"),
        params={"matmul_share": 0.8, "hw": "H100"},
        variants={"matmul_share": (0.5, 0.6, 0.65, 0.7, 0.75, 0.85, 0.9)},
        key=_fp8_speedup,
        unit="dimensionless",
        hints=(
            "Only part of the step gets faster: Amdahl's law, S = 1 / ((1 - p) + p / s).",
            "p is matmul_share; s is the ratio of the dense FP8 and BF16 peaks of that GPU.",
        ),
        misconceptions=(
            Misconception("everything-faster", ("Only the matrix products get faster. The memory-bound rest moves "
                                                "the same bytes at the same bandwidth: Amdahl's law."),
                          answer=lambda matmul_share, hw: _peak(hw, "fp8") / _peak(hw, "bf16")),
            Misconception("time-saved", ("That is the share of the time saved; the question asks for the speed-up "
                                         "factor, old time / new time."),
                          answer=lambda matmul_share, hw: fusion.amdahl_time_saved(
                              matmul_share, _peak(hw, "fp8") / _peak(hw, "bf16"))),
        ),
        points=2,
    ),
)
