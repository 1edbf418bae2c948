"""Lesson 13, serving a model: the KV cache, the memory wall, latency against throughput, quantized weights,
speculative decoding and paged KV.

Every key goes through :mod:`roofkit.inference` (itself on the catalogs of
models and accelerators and on :mod:`roofkit.layertime`), so a class variant
may change the model, the accelerator, the context or the batch.
"""

from __future__ import annotations

import math

from .. import models
from ..inference import kvcache, latency, memory, paged, speculative
from ..quiz import Misconception, Question, register

_GIB_FOR_GB = 1e9 / 2**30  # a size computed in GiB, typed as GB


def _unless_key(wrong, key):
    """A wrong value as a misconception, unless a variant's numbers make it the key."""
    def value(**p):
        w = wrong(**p)
        return None if w is None or math.isclose(w, key(**p), rel_tol=1e-9) else w
    return value


# --- keys ---------------------------------------------------------------------------------------------------


def _ttft(model, hw, prompt):
    return latency.ttft(model, hw, prompt)


def _kv_sequence(model, context):
    return kvcache.bytes_per_sequence(model, context)


def _max_batch(model, hw, context, reserve=memory.RESERVE, twin=None):
    return memory.max_batch(twin or model, hw, 1, context, reserve=reserve)


def _max_batch_cache_once(model, hw, context):
    p = memory.plan(model, hw, 1, context)
    return math.floor(p.free_bytes / (context * p.kv_bytes_per_token / 2))


def _attention(model, context, kv_dtype):
    return latency.attention_intensity(model, context, kv_dtype=kv_dtype)


def _throughput(model, hw, batch, context):
    return batch / latency.tpot(model, hw, batch, context)


def _int4_speedup(model, hw, gpus, batch, context):
    at = lambda wd: latency.tpot(model, hw, batch, context, gpus=gpus, weights_dtype=wd)  # noqa: E731
    return at("bf16") / at("int4")


def _waste(reserve, mean, sequences):
    return 100 * paged.fragmentation([mean] * sequences, reserve).contiguous_waste


def _worked(model, hw, gpus, context):
    batch = memory.max_batch(model, hw, gpus, context)
    return batch / latency.tpot(model, hw, batch, context, gpus=gpus)


def _max_context(model, hw, gpus, batch, weights_dtype, reserve=memory.RESERVE, cache_once=False):
    p = memory.plan(model, hw, gpus, 4096, batch, weights_dtype, reserve=reserve)
    per_token = p.kv_bytes_per_token * p.kv_replication / (2 if cache_once else 1)
    return max(0, math.floor(p.free_bytes / (batch * per_token)))


_LLAMA3_8B = "Llama 3 8B (32 layers, 8 K/V heads of 128)"

register(
    # --- 1. what a request costs --------------------------------------------------------------------------
    Question(
        id="l13.ttft",
        lesson="13",
        kind="numeric",
        prompt=("{model} on one {hw} in BF16 receives a prompt of {prompt} tokens. Predict the time to first token: "
                "the prefill of the whole prompt, every layer and the output layer, with the layer model "
                "(each kernel at its roofline bound)."),
        params={"model": "llama-3-8b", "hw": "h100", "prompt": 2048},
        variants={"prompt": (512, 1024, 8192), "hw": ("h200", "a100", "mi300x", "b200")},
        key=lambda **p: _ttft(**p),
        unit="s",
        rtol=0.02,
        hints=("A prefill runs all the prompt's tokens through each layer at once: its GEMMs see "
               "prompt x d_model activations.",
               "One layer's time from the layer model, times the layers, plus the output layer for the last token."),
        misconceptions=(
            Misconception("prompt-as-decode-steps",
                          "That is one decode step per prompt token. A prefill does not go token by token: the whole "
                          "prompt goes through each layer at once, reading each weight once for all of its tokens, "
                          "so it is compute-bound and far faster than as many decode steps.",
                          answer=lambda model, hw, prompt: prompt * latency.tpot(model, hw, 1, prompt)),
        ),
    ),
    # --- 2. the KV cache ----------------------------------------------------------------------------------
    Question(
        id="l13.kv-sequence",
        lesson="13",
        kind="numeric",
        prompt=("How many bytes of KV cache does one sequence of {context} tokens take in {model_name}, in BF16? "
                "(Every layer; the model's config.json: {layers} layers, {heads} query heads, {kv_heads} K/V heads "
                "of {head_dim}.)"),
        params={"model": "llama-3-70b", "model_name": "Llama 3 70B", "layers": 80, "heads": 64, "kv_heads": 8,
                "head_dim": 128, "context": 8192},
        variants={"context": (4096, 16384, 32768)},
        key=lambda model, context, **_: _kv_sequence(model, context),
        unit="byte",
        rtol=0.02,
        hints=("Each layer keeps a key vector and a value vector for every token, one per K/V head.",
               "Per token: 2 x layers x K/V heads x head size x 2 bytes; then times the tokens."),
        misconceptions=(
            Misconception("k-or-v-once",
                          "That counts one of K and V. The cache keeps both the keys and the values of every token: "
                          "the factor 2 in 2 L H_kv d_h b.",
                          scale=0.5),
            Misconception("one-layer",
                          "That is one layer's cache. Every layer keeps its own K and V: multiply by the layers.",
                          answer=lambda model, context, **_: _kv_sequence(model, context) / models.get(model).layers),
            Misconception("gqa-ignored",
                          "That uses the query heads. With grouped-query attention only the K/V heads are cached, "
                          "each shared by a group of query heads: H_kv, not H.",
                          answer=lambda model, context, heads, kv_heads, **_: _kv_sequence(model, context)
                          * heads / kv_heads),
            Misconception("gib-as-gb",
                          "That looks like the size in GiB (2^30 bytes) typed as GB (10^9 bytes): 1 GiB is 7.4% "
                          "more than 1 GB. Give bytes, or say GiB.",
                          scale=_GIB_FOR_GB),
        ),
    ),
    # --- 3. the memory wall -------------------------------------------------------------------------------
    Question(
        id="l13.max-batch",
        lesson="13",
        kind="numeric",
        prompt=("Serve " + _LLAMA3_8B + " in BF16 on one {hw}, keeping 10% of its memory in reserve. "
                "How many sequences of {context} tokens fit at most beside the weights?"),
        params={"model": "llama-3-8b", "hw": "h100", "context": 32768},
        variants={"hw": ("h200", "b200", "mi300x"), "context": (4096, 8192, 16384)},
        key=lambda **p: _max_batch(**p),
        unit="dimensionless",
        rtol=0,
        hints=("Memory left for the cache: capacity x 0.9 minus the weights (2 bytes per parameter).",
               "Divide by one sequence's cache (per token x context) and round down."),
        misconceptions=(
            Misconception("no-reserve",
                          "That fills the whole memory. A server keeps a reserve for activations, the CUDA context "
                          "and the runtime: here 10% of the GPU (vLLM's default gpu_memory_utilization is 0.9).",
                          answer=_unless_key(lambda **p: _max_batch(**p, reserve=0), _max_batch)),
            Misconception("k-or-v-once",
                          "That counts one of K and V per token: the cache holds both, so each sequence takes twice "
                          "that and half as many fit.",
                          answer=_unless_key(lambda **p: _max_batch_cache_once(**p), _max_batch)),
            Misconception("gqa-ignored",
                          "That sizes the cache with 32 K/V heads, one per query head. Llama 3 8B shares each K/V "
                          "head between 4 query heads (GQA): its cache is 4 times smaller.",
                          answer=_unless_key(lambda model, **p: _max_batch(model, **p, twin=kvcache.with_kv_heads(
                              model, models.get(model).heads)), _max_batch)),
        ),
    ),
    # --- 4. latency against throughput -----------------------------------------------------------------------
    Question(
        id="l13.attention-intensity",
        lesson="13",
        kind="numeric",
        prompt=("In a decode step of {model_name} ({heads} query heads, {kv_heads} K/V heads of 128) with a "
                "{context}-token cache in {kv_dtype}, what is the arithmetic intensity of the fused attention "
                "kernel, in FLOP/byte?"),
        params={"model": "llama-3-70b", "model_name": "Llama 3 70B", "heads": 64, "kv_heads": 8, "context": 8192,
                "kv_dtype": "bf16"},
        variants={"kv_dtype": ("fp8",), "context": (2048, 32768)},
        key=lambda model, context, kv_dtype, **_: _attention(model, context, kv_dtype),
        unit="FLOP/byte",
        rtol=0.02,
        hints=("Count per cached token: the scores and the weighted sum cost about 4 d_h FLOPs per query head; "
               "the kernel reads K and V of the K/V heads once.",
               "How many query heads use each K/V element read from memory?"),
        misconceptions=(
            Misconception("gqa-ignored",
                          "That is multi-head attention's intensity, one query head per K/V head. With GQA each K "
                          "and V element read serves a whole group of query heads, so the intensity is about the "
                          "group size (in BF16).",
                          answer=lambda model, context, kv_dtype, **_: _attention(
                              kvcache.with_kv_heads(model, models.get(model).heads), context, kv_dtype)),
            Misconception("all-query-heads",
                          "That is the number of query heads. Each K and V element read serves only the query heads "
                          "of its own group, not every head of the layer.",
                          answer=_unless_key(lambda heads, **_: float(heads),
                                             lambda model, context, kv_dtype, **_: _attention(model, context,
                                                                                               kv_dtype))),
        ),
    ),
    Question(
        id="l13.throughput",
        lesson="13",
        kind="numeric",
        prompt=("{model_name} decodes on one {hw} in BF16 at batch {batch}, every sequence with {context} tokens "
                "cached. With the layer model, how many tokens per second does the batch produce?"),
        params={"model": "llama-3-8b", "model_name": "Llama 3 8B", "hw": "h100", "batch": 32, "context": 4096},
        variants={"batch": (8, 64), "hw": ("h200", "a100", "mi300x")},
        key=lambda model, hw, batch, context, **_: _throughput(model, hw, batch, context),
        unit="1/s",
        rtol=0.02,
        hints=("One decode step makes one token per sequence.",
               "Tokens per second = batch / (time of one decode step at that batch)."),
        misconceptions=(
            Misconception("linear-in-batch",
                          "That is the batch-1 rate times the batch. A bigger batch is not free: each sequence adds "
                          "its own cache reads, so the step takes longer as the batch grows.",
                          answer=lambda model, hw, batch, context, **_: batch * _throughput(model, hw, 1, context)),
            Misconception("per-user",
                          "That is one user's rate, 1 / TPOT. The batch produces one token per sequence per step.",
                          answer=lambda model, hw, batch, context, **_: _throughput(model, hw, batch, context) / batch),
        ),
    ),
    # --- 5. quantized weights ----------------------------------------------------------------------------------
    Question(
        id="l13.int4-speedup",
        lesson="13",
        kind="numeric",
        prompt=("{model_name} on {gpus} x {hw}, decode at batch {batch} with {context}-token caches. Store the "
                "layers' weights in INT4 (groups of 128 with an FP16 scale; the math stays BF16, so does the cache). "
                "By what factor does the time per output token shrink?"),
        params={"model": "llama-3-70b", "model_name": "Llama 3 70B", "hw": "h100", "gpus": 8, "batch": 1,
                "context": 4096},
        variants={"batch": (16, 64), "context": (16384, 32768)},
        key=lambda model, hw, gpus, batch, context, **_: _int4_speedup(model, hw, gpus, batch, context),
        unit="dimensionless",
        rtol=0.02,
        hints=("At this batch the step is memory-bound: its time is mostly bytes over bandwidth.",
               "Which bytes shrink? The weights, by 2 / (0.5 + 2/128). Which do not? The cache, the activations, "
               "the embeddings and the output layer; and the all-reduces between the GPUs take as long."),
        misconceptions=(
            Misconception("bytes-ratio",
                          "That is the weights' bytes ratio alone. The cache, the activations, the BF16 output layer "
                          "and the communication do not shrink, so the step gains less.",
                          answer=lambda **p: 2 / 0.515625),
            Misconception("no-gain",
                          "The math stays in BF16, true, but a memory-bound step is paid in bytes: the weights are "
                          "read at a quarter of their size.",
                          answer=lambda **p: 1.0),
        ),
    ),
    # --- 6. speculative decoding -------------------------------------------------------------------------------
    Question(
        id="l13.spec-tokens",
        lesson="13",
        kind="numeric",
        prompt=("A draft model proposes k = {k} tokens; the target model accepts each with probability "
                "alpha = {alpha}, independently, and stops at the first rejection. How many tokens does one "
                "target step yield on average (the accepted ones and the one the target adds itself)?"),
        params={"alpha": 0.7, "k": 3},
        variants={"alpha": (0.6, 0.8, 0.9), "k": (2, 4, 5)},
        key=lambda alpha, k: speculative.expected_tokens(alpha, k),
        unit="dimensionless",
        rtol=0.01,
        hints=("The i-th drafted token is kept only if it and all the ones before it are accepted: alpha^i.",
               "Add 1 for the token the target always adds, and sum alpha^i over the k drafted ones."),
        misconceptions=(
            Misconception("no-bonus-token",
                          "That counts only the accepted drafted tokens. The target's step always adds a token of "
                          "its own: the correction at the first rejection, or one more when all k pass.",
                          answer=lambda alpha, k: speculative.expected_tokens(alpha, k) - 1),
            Misconception("independent-acceptance",
                          "k x alpha counts every drafted token as if it were judged on its own. After the first "
                          "rejection the rest are thrown away: the i-th survives with probability alpha^i.",
                          answer=lambda alpha, k: k * alpha),
            Misconception("all-accepted",
                          "k + 1 is the best case, every drafted token accepted. On average fewer are.",
                          answer=lambda alpha, k: k + 1),
        ),
    ),
    # --- 7. paged KV cache -------------------------------------------------------------------------------------
    Question(
        id="l13.paged-waste",
        lesson="13",
        kind="numeric",
        prompt=("A server reserves {reserve} tokens of KV cache for each of its {sequences} sequences, contiguous. "
                "They hold {mean} tokens each on average. What percentage of the reserved cache memory holds no "
                "token?"),
        params={"reserve": 2048, "sequences": 64, "mean": 420},
        variants={"reserve": (4096, 8192), "mean": (300, 700)},
        key=lambda **p: _waste(**p),
        unit="percent",
        rtol=0.01,
        hints=("What is reserved: sequences x reserve token slots. What is used: sequences x mean.",
               "The waste is 1 - used / reserved."),
        misconceptions=(
            Misconception("used-share",
                          "That is the share that holds tokens. The question asks for the share that holds none.",
                          answer=lambda reserve, mean, sequences: 100 * mean / reserve),
            Misconception("paged",
                          "That is what paging in blocks of 16 tokens would waste. With one contiguous reservation "
                          "per sequence, everything beyond its length is wasted.",
                          answer=lambda reserve, mean, sequences: 100 * paged.fragmentation(
                              [mean] * sequences, reserve).paged_waste),
        ),
    ),
    # --- the worked problem --------------------------------------------------------------------------------------
    Question(
        id="l13.worked-throughput",
        lesson="13",
        kind="numeric",
        prompt=("{model_name} in BF16 on {gpus} x {hw} (10% reserve) at a {context}-token context: decode at the "
                "largest batch that fits. With the layer model, how many tokens per second does the node produce?"),
        params={"model": "llama-3-70b", "model_name": "Llama 3 70B", "hw": "h100", "gpus": 8, "context": 8192},
        variants={"hw": ("h200", "b200"), "context": (4096, 16384)},
        key=lambda model, hw, gpus, context, **_: _worked(model, hw, gpus, context),
        unit="1/s",
        rtol=0.02,
        hints=("First the largest batch: memory less reserve less weights, over one sequence's cache.",
               "Then the decode step at that batch (every layer, the output layer, the all-reduces): batch / TPOT."),
        misconceptions=(
            Misconception("linear-in-batch",
                          "That multiplies the batch-1 rate by the batch. At this batch every sequence's cache read "
                          "adds to the step: compute TPOT at the batch itself.",
                          answer=lambda model, hw, gpus, context, **_: memory.max_batch(model, hw, gpus, context)
                          / latency.tpot(model, hw, 1, context, gpus=gpus)),
            Misconception("per-gpu",
                          "That is per GPU. The question asks for the node: all its GPUs serve the batch together.",
                          answer=lambda model, hw, gpus, context, **_: _worked(model, hw, gpus, context) / gpus),
            Misconception("per-user",
                          "That is one user's rate, 1 / TPOT. The batch produces one token per sequence per step: "
                          "multiply by the batch.",
                          answer=lambda model, hw, gpus, context, **_: 1 / latency.tpot(
                              model, hw, memory.max_batch(model, hw, gpus, context), context, gpus=gpus)),
        ),
    ),
    # --- exercises --------------------------------------------------------------------------------------------
    Question(
        id="l13.ex-min-gpus",
        lesson="13",
        kind="numeric",
        prompt=("Llama 3.1 405B with its layers' weights in {weights_dtype} (embeddings and output layer in BF16): "
                "what is the fewest {hw} GPUs that hold the weights, with 10% of each GPU in reserve (the KV "
                "cache not counted)?"),
        params={"model": "llama-3.1-405b", "hw": "h100", "weights_dtype": "bf16"},
        variants={"weights_dtype": ("fp8", "int4"), "hw": ("h200", "b200", "mi300x")},
        key=lambda **p: memory.min_gpus(**p),
        unit="dimensionless",
        rtol=0,
        hints=("The weights' bytes: layers' matrices at the format's bytes per weight, the rest at 2 bytes.",
               "Each GPU holds 90% of its memory; round the quotient up."),
        misconceptions=(
            Misconception("no-reserve",
                          "That fills every GPU to the last byte. Keep the reserve: 90% of each GPU is usable.",
                          answer=_unless_key(lambda **p: memory.min_gpus(**p, reserve=0),
                                             lambda **p: memory.min_gpus(**p))),
            Misconception("one-byte-per-weight",
                          "That counts one byte per weight, as FP8 would. Count the format's own size: 2 bytes in "
                          "BF16, 0.5 + 2/128 in INT4 with its scales, and 2 bytes for the embeddings and output layer.",
                          answer=_unless_key(lambda weights_dtype, **p: memory.min_gpus(weights_dtype="fp8", **p),
                                             lambda **p: memory.min_gpus(**p))),
        ),
        points=2,
    ),
    Question(
        id="l13.ex-max-context",
        lesson="13",
        kind="numeric",
        prompt=("Llama 3 70B with INT4 weights (groups of 128, FP16 scales) on {gpus} x {hw}, 10% reserve, BF16 "
                "cache: what is the longest context (tokens per sequence) at which a batch of {batch} sequences fits?"),
        params={"model": "llama-3-70b", "hw": "h100", "gpus": 2, "batch": 16, "weights_dtype": "int4"},
        variants={"batch": (8, 32), "gpus": (1, 4)},
        key=lambda **p: _max_context(**p),
        unit="dimensionless",
        rtol=0,
        hints=("Memory for the cache: GPUs x capacity x 0.9, less the INT4 weights (with their scales).",
               "Divide by the batch and by one token's cache (both K and V, every layer); round down."),
        misconceptions=(
            Misconception("no-reserve",
                          "That uses the whole memory: keep 10% of each GPU for activations and the runtime.",
                          answer=_unless_key(lambda **p: _max_context(**p, reserve=0), lambda **p: _max_context(**p))),
            Misconception("k-or-v-once",
                          "That counts one of K and V per token; the cache keeps both.",
                          answer=_unless_key(lambda **p: _max_context(**p, cache_once=True),
                                             lambda **p: _max_context(**p))),
            Misconception("bf16-weights",
                          "That leaves the weights in BF16. In INT4 they take about a quarter of that memory.",
                          answer=_unless_key(lambda weights_dtype, **p: _max_context(weights_dtype="bf16", **p),
                                             lambda **p: _max_context(**p))),
        ),
        points=2,
    ),
    Question(
        id="l13.ex-spec-speedup",
        lesson="13",
        kind="numeric",
        prompt=("Speculative decoding with k = {k} drafted tokens, acceptance rate alpha = {alpha}, and a draft step "
                "that costs c = {c} of a target step. If the target's check of k + 1 tokens costs one of its "
                "ordinary steps, what is the expected walltime speed-up (Leviathan et al. 2023)?"),
        params={"alpha": 0.8, "k": 4, "c": 0.1},
        variants={"alpha": (0.6, 0.9), "k": (2, 6), "c": (0.05, 0.2)},
        key=lambda alpha, k, c: speculative.speedup(alpha, k, c),
        unit="dimensionless",
        rtol=0.01,
        hints=("One round: k draft steps and one target step, k c + 1 target steps of time.",
               "It yields (1 - alpha^(k+1)) / (1 - alpha) tokens on average; the speed-up is tokens per round "
               "over time per round, in target steps."),
        misconceptions=(
            Misconception("free-draft",
                          "That is the expected tokens per target step: it ignores the k draft steps each round pays.",
                          answer=lambda alpha, k, c: speculative.expected_tokens(alpha, k)),
            Misconception("no-bonus-token",
                          "That leaves out the token the target adds itself at every step.",
                          answer=lambda alpha, k, c: (speculative.expected_tokens(alpha, k) - 1) / (k * c + 1)),
        ),
        points=2,
    ),
)
