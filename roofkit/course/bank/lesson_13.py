"""Lesson 13, serving a model: prefill and decode, the KV cache, the memory wall, latency against throughput,
continuous batching, prefix caching, disaggregation, the queue, sharded decode, quantized weights, cost, published
runs, speculative decoding and paged KV.

Every key goes through :mod:`roofkit.inference` (itself on the catalogs of
models, accelerators and links and on :mod:`roofkit.layertime`), so a class
variant may change the model, the accelerator, the context, the workload or the batch.
The queue's keys run :mod:`roofkit.inference.simulate` through the cached runs of
:mod:`roofkit.inference.plot` (``simulation``, ``queue_sweep``): the lesson's figure,
its answer cells and these keys share each run.
"""

from __future__ import annotations

import math

from ...perf import comms
from ... import formulas
from ...catalogs import hardware, links, models
from ...perf.inference import kvcache, latency, memory, paged, preemption, speculative, workload
from ...perf.inference.serving import usd_per_million_tokens
from ...plots import serving as serving_plots
from ..quiz import Misconception, Question, register

_GIB_FOR_GB = 1e9 / 2**30  # a size computed in GiB, typed as GB


def _unless_key(wrong, key):
    """A wrong value as a misconception, unless a variant's numbers make it the key."""
    def value(**p):
        w = wrong(**p)
        return None if w is None or math.isclose(w, key(**p), rel_tol=1e-9) else w
    return value


# --- keys ---------------------------------------------------------------------------------------------------


def _prefill_intensity(prompt, d):
    return formulas.gemm(prompt, d, d, "bf16").intensity


def _ttft(model, hw, prompt):
    return latency.ttft(model, hw, prompt)


def _kv_sequence(model, context):
    return kvcache.bytes_per_sequence(model, context)


def _datasheet(hw, reserve=memory.RESERVE):
    """The reserve that leaves the datasheet's capacity x (1 - reserve) of the card's reported memory: the plan
    of a learner who read the datasheet's "80 GB" as 80e9 bytes, not the 85.5e9 an H100 reports. None where they
    agree."""
    acc = hardware.get(hw)
    if not acc.memory_bytes or math.isclose(acc.memory_bytes, acc.capacity_bytes, rel_tol=1e-9):
        return None
    return 1 - (1 - reserve) * acc.memory_bytes / acc.capacity_bytes


_DATASHEET_MEMORY = ("That takes the datasheet's memory (80 GB on an H100), read as 10^9-byte GB, for the card's. The "
                     "80 in the name is closer to GiB: the card reports more bytes than 80 x 10^9 (nvidia-smi's "
                     "total, the catalog's capacity). Plan with what the card reports; then keep 10% of it in "
                     "reserve.")


def _max_batch(model, hw, context, reserve=memory.RESERVE, twin=None):
    return memory.max_batch(twin or model, hw, 1, context, reserve=reserve)


def _max_batch_cache_once(model, hw, context):
    p = memory.plan(model, hw, 1, context)
    return math.floor(p.free_bytes / (context * p.kv_bytes_per_token / 2))


def _attention(model, context, kv_dtype):
    return latency.attention_intensity(model, context, kv_dtype=kv_dtype)


def _sequence_intensity(model, context):
    return latency.decode_cost(model, context).intensity


def _sequence_intensity_all_params(model, context):
    """The same, with 2 FLOPs for the input embedding's parameters too (it is a lookup)."""
    c, m = latency.decode_cost(model, context), models.get(model)
    return (c.flops_per_sequence + 2 * m.vocab * m.d_model) / c.bytes_per_sequence


def _throughput(model, hw, batch, context):
    return batch / latency.tpot(model, hw, batch, context)


def _critical(hw, weight_bytes):
    d = latency.critical_batch_symbolic()
    _, _, b_w, P, BW = d["symbols"]
    acc = hardware.get(hw)
    return float(d["B*"].subs({P: acc.peak("bf16"), BW: acc.memory_bandwidth(), b_w: weight_bytes}))


def _steady(model, hw, input_tokens, output_tokens, **options):
    return workload.steady_state(model, hw, input_tokens, output_tokens, **options)


def _prefill_per_step(model, hw, batch, input_tokens, output_tokens):
    return _steady(model, hw, input_tokens, output_tokens, batch=batch).prefill_tokens_per_step


def _prefix_batch(model, hw, input_tokens, output_tokens, prefix, dtype):
    return _steady(model, hw, input_tokens, output_tokens, dtype=dtype, prefix=prefix).batch


def _disagg(model, hw, input_tokens, output_tokens, dtype):
    return workload.disaggregated(model, hw, input_tokens, output_tokens, dtype=dtype).decode_per_prefill


def _allreduce_floor(model, hw, tp, batch, algorithm="one-shot", rounds_only=False):
    """2 L all-reduces of one step's activations (batch x d_model x 2 bytes) over ``tp`` GPUs of the node's link,
    each by ``algorithm`` at the bound's figures; ``rounds_only``: their latency term alone."""
    m, link = models.get(model), links.scale_up(hw)
    if rounds_only:
        return m.layers * 2 * comms.latency_term("all-reduce", tp, link.latency, algorithm)
    return m.layers * 2 * comms.all_reduce(batch * m.d_model * 2, tp, link, algorithm).time_s


def _capacity(model, hw, input_tokens, output_tokens, places, lone=False):
    """Requests per second with every place busy, by Little's law (``serving_plots.capacity``); ``lone``: each step
    timed as a lone sequence's decode step at the average context (the batch-1 slip)."""
    if lone:
        return places / ((output_tokens - 1) * latency.tpot(model, hw, 1, input_tokens + output_tokens // 2))
    return serving_plots.capacity(model, hw, input_tokens, output_tokens, max_num_seqs=places)


def _knee(model, hw, input_tokens, output_tokens, requests, slo_ttft_s, figure="ttft_p99_s"):
    """The request rate at which ``figure`` of TTFT passes the target, read between the simulated rates."""
    sweep = serving_plots.queue_sweep(model, hw, input_tokens, output_tokens, requests=requests,
                                      slo_ttft_s=slo_ttft_s)
    return serving_plots.crossing(sweep, figure)


def _goodput_run(model, hw, input_tokens, output_tokens, rate, requests, slo_ttft_s, slo_tpot_s):
    return serving_plots.simulation(model, hw, input_tokens, output_tokens, rate, requests, slo_ttft_s=slo_ttft_s,
                                    slo_tpot_s=slo_tpot_s)


def _int4_speedup(model, hw, batch, context):
    at = lambda wd: latency.tpot(model, hw, batch, context, weights_dtype=wd)  # noqa: E731
    return at("bf16") / at("int4")


def _cost(model, hw, input_tokens, output_tokens, dtype, usd):
    s = _steady(model, hw, input_tokens, output_tokens, dtype=dtype)
    return usd_per_million_tokens(s.tokens_per_s, 1, usd)


def _waste(reserve, mean, sequences):
    return 100 * paged.fragmentation([mean] * sequences, reserve).contiguous_waste


def _worked(model, hw, gpus, tp, input_tokens, output_tokens, dtype):
    return _steady(model, hw, input_tokens, output_tokens, gpus=gpus, tp=tp, dtype=dtype).tokens_per_s


def _spec_ceiling(alpha):
    """What the expected tokens per target step approach as the draft grows: the sum at the longest draft
    speculative accepts (1,000 tokens), where alpha^(k+1) is below 1e-40 for every alpha of the question."""
    return speculative.expected_tokens(alpha, 1000)


def _break_even(k, c, bonus=True):
    """The acceptance rate at which speculation's speed-up is 1 (bisection on :func:`speculative.speedup`, which
    grows with alpha); ``bonus=False``: a learner who left out the target's own token (None where it never pays)."""
    def pays(alpha):
        extra = 0.0 if bonus else 1 / (k * c + 1)  # without the bonus token the speed-up is (E - 1) / (k c + 1)
        return speculative.speedup(alpha, k, c) - extra >= 1

    if not pays(1.0):
        return None
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if not pays(mid) else (low, mid)
    return (low + high) / 2


def _max_context(model, hw, gpus, batch, weights_dtype, reserve=memory.RESERVE, cache_once=False):
    p = memory.plan(model, hw, gpus, 4096, batch, weights_dtype, reserve=reserve)
    per_token = p.kv_bytes_per_token * p.kv_replication / (2 if cache_once else 1)
    return max(0, math.floor(p.free_bytes / (batch * per_token)))


_LLAMA3_8B = "Llama 3 8B (32 layers, 8 K/V heads of 128)"

register(
    # --- 1. what a request costs --------------------------------------------------------------------------
    Question(
        id="l13.prefill-intensity",
        lesson="13",
        kind="numeric",
        prompt=("A prefill of a {prompt}-token prompt multiplies each {d} x {d} weight matrix by a {prompt} x {d} "
                "block of activations, in BF16. What is that GEMM's arithmetic intensity, counting its inputs, its "
                "weights and its output once each?"),
        params={"prompt": 1024, "d": 4096},
        variants={"prompt": (256, 2048, 8192), "d": (8192,)},
        key=lambda **p: _prefill_intensity(**p),
        unit="FLOP/byte",
        rtol=0.02,
        hints=("FLOPs: 2 x rows x d x d. Bytes: the activations in, the weights, the output, 2 bytes each.",
               "Divide: the intensity is p d / (d + 2 p) for p rows, not p."),
        misconceptions=(
            Misconception("intensity-is-prompt",
                          "That is the shortcut 'a prefill of p tokens has intensity p'. It counts the weights' "
                          "bytes only; the activations in and out grow with p too, so the intensity is p d / (d + 2p), "
                          "below p and approaching d/2 for long prompts (lesson 11).",
                          answer=_unless_key(lambda prompt, d: float(prompt), lambda **p: _prefill_intensity(**p))),
            Misconception("weights-only-per-element",
                          "That counts elements, not bytes: each BF16 element is 2 bytes.",
                          scale=2),
        ),
    ),
    Question(
        id="l13.ttft",
        lesson="13",
        kind="numeric",
        prompt=("{model_name} ({params:,} parameters) on one {hw} in BF16 receives a prompt of {prompt:,} "
                "tokens. Its prefill is compute-bound: estimate the time to first token from the prefill's FLOPs and "
                "the {hw}'s BF16 peak (a bound: every kernel at its roof)."),
        params={"model": "llama-3-8b", "model_name": "Llama 3 8B",
                "params": models.get("llama-3-8b").params, "hw": "h100", "prompt": 2048},
        variants={"prompt": (512, 1024), "hw": ("a100", "mi300x", "b200")},
        key=lambda model, hw, prompt, **_: _ttft(model, hw, prompt),
        unit="s",
        rtol=0.1,  # the layer model's figure; the FLOPs over the peak, the embedding counted or not, land within 10%
        hints=("A compute-bound kernel takes its FLOPs over the peak FLOP/s.",
               "Each prompt token goes through every weight once: 2 FLOPs (a multiply and an add) per parameter per "
               "token. Attention adds a little."),
        misconceptions=(
            Misconception("prompt-as-decode-steps",
                          "That is one decode step per prompt token. A prefill does not go token by token: the whole "
                          "prompt goes through each layer at once, reading each weight once for all of its tokens, "
                          "so it is compute-bound and far faster than as many decode steps.",
                          answer=lambda model, hw, prompt, **_: prompt * latency.tpot(model, hw, 1, prompt)),
            Misconception("training-flops",
                          "That counts 6 FLOPs per parameter per token, a training step's forward and backward. A "
                          "prefill is a forward pass only: 2 per parameter per token.",
                          scale=3),
            Misconception("one-flop-per-weight",
                          "That counts one FLOP per parameter per token. Each weight is a multiply and an add (an "
                          "FMA): 2 FLOPs.",
                          scale=0.5),
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
        prompt=("Serve " + _LLAMA3_8B + " in BF16 on one {hw}, keeping 10% of the memory the card reports in reserve. "
                "How many sequences of {context} tokens fit at most beside the weights?"),
        params={"model": "llama-3-8b", "hw": "h100", "context": 32768},
        variants={"hw": ("h200", "b200", "mi300x"), "context": (4096, 8192, 16384)},
        key=lambda **p: _max_batch(**p),
        unit="dimensionless",
        rtol=0,
        hints=("Memory left for the cache: the card's capacity x 0.9 minus the weights (2 bytes per parameter).",
               "Divide by one sequence's cache (per token x context) and round down."),
        misconceptions=(
            Misconception("no-reserve",
                          "That fills the whole memory. vLLM lets itself use 90% of each GPU "
                          "(gpu_memory_utilization = 0.9) for the weights, the activations and the cache together; "
                          "the other 10% stays free.",
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
            Misconception("datasheet-memory", _DATASHEET_MEMORY,
                          answer=_unless_key(lambda hw, **p: None if _datasheet(hw) is None else
                                             _max_batch(hw=hw, **p, reserve=_datasheet(hw)), _max_batch)),
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
                          "That has every query head reading every K/V element, as in multi-query attention "
                          "(one K/V head). Here each K/V head serves only its group: H / H_kv query heads.",
                          answer=lambda model, context, kv_dtype, **_: _attention(
                              kvcache.with_kv_heads(model, 1), context, kv_dtype)),
        ),
    ),
    Question(
        id="l13.sequence-intensity",
        lesson="13",
        kind="numeric",
        prompt=("{model_name} decodes on an H100 in BF16, every sequence with {context} tokens cached. One more "
                "sequence in the batch adds FLOPs (2 per weight it multiplies by: the layers' and the output "
                "layer's, not the input embedding, a table lookup; and its attention) and bytes (its cache read, "
                "its activations). How many FLOPs does it add per byte?"),
        params={"model": "llama-3-8b", "model_name": "Llama 3 8B", "context": 8192},
        variants={"context": (2048, 4096, 32768)},
        key=lambda model, context, **_: _sequence_intensity(model, context),
        unit="FLOP/byte",
        rtol=0.03,
        hints=("FLOPs per sequence: about 2 per parameter for the weights' GEMMs, plus its attention over the "
               "context. Bytes per sequence: mostly its cache, read in full at every step.",
               "Compare the step at batch 1 and at batch 2: the difference is one sequence's FLOPs and bytes."),
        misconceptions=(
            Misconception("as-many-bytes-as-flops",
                          "A sequence does not add one byte per FLOP: it adds about 2 FLOPs per parameter (tens of "
                          "billions) over a cache read of about a gigabyte. Tens of FLOPs per byte, still far below "
                          "the ridge, which is why decode stays memory-bound at this context.",
                          answer=lambda **p: 1.0),
            Misconception("embedding-multiplied",
                          "That counts 2 FLOPs for every parameter, the input embedding's too. The embedding is a "
                          "table lookup: a token reads its row and multiplies nothing. Count the layers' weights and "
                          "the output layer's.",
                          answer=lambda model, context, **_: _sequence_intensity_all_params(model, context)),
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
        unit="tokens/s",
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
    Question(
        id="l13.critical-int8",
        lesson="13",
        kind="numeric",
        prompt=("On an {hw}, at what batch does a decode step's weight GEMMs turn compute-bound (their math time "
                "reaching their read time) when the weights are stored in INT8, one byte each (scales aside), and "
                "multiplied in BF16?"),
        params={"hw": "h100", "weight_bytes": 1},
        variants={"hw": ("h200", "a100", "b200", "mi300x")},
        key=lambda hw, weight_bytes: _critical(hw, weight_bytes),
        unit="dimensionless",
        rtol=0.02,
        hints=("Math: 2 B N FLOPs at the BF16 peak P. Read: N b_w bytes at the bandwidth.",
               "Set them equal: B* = P b_w / (2 BW), the ridge times b_w / 2."),
        misconceptions=(
            Misconception("bf16-weights",
                          "That is the critical batch of BF16 weights, the ridge itself. One-byte weights halve the "
                          "bytes each FLOP needs, so the math catches up at half the batch.",
                          answer=_unless_key(lambda hw, weight_bytes: _critical(hw, 2),
                                             lambda **p: _critical(**p))),
        ),
    ),
    # --- 5. continuous batching ----------------------------------------------------------------------------------
    Question(
        id="l13.prefill-per-step",
        lesson="13",
        kind="numeric",
        prompt=("A server keeps {batch} requests of {input_tokens} input and {output_tokens} output tokens in flight, "
                "a new one starting as soon as one finishes. A request makes its first token with its prefill and the "
                "rest in decode steps, one per step. In the steady state, how many prompt tokens does each step "
                "prefill on average?"),
        params={"model": "llama-3-8b", "hw": "h100", "batch": 256, "input_tokens": 2048, "output_tokens": 128},
        variants={"batch": (64, 512), "input_tokens": (512, 1000), "output_tokens": (256, 1000)},
        key=lambda **p: _prefill_per_step(**p),
        unit="dimensionless",
        rtol=0.02,
        hints=("Each request spends O - 1 steps decoding, so each step finishes B / (O - 1) requests.",
               "As many new requests start; each brings p prompt tokens."),
        misconceptions=(
            Misconception("every-request-every-step",
                          "That prefills every request's prompt at every step. A prompt is prefilled once; each step "
                          "only brings in the requests that replace the finished ones.",
                          answer=lambda batch, input_tokens, **_: float(batch * input_tokens)),
            Misconception("one-prompt",
                          "That is one prompt per step. The steady state brings in B / (O - 1) new requests per step, "
                          "as many as finish.",
                          answer=_unless_key(lambda input_tokens, **_: float(input_tokens),
                                             lambda **p: _prefill_per_step(**p))),
        ),
    ),
    Question(
        id="l13.prefix-batch",
        lesson="13",
        kind="numeric",
        prompt=("Llama 3 8B with FP8 weights and an FP8 cache on one {hw} serves requests of {input_tokens} input "
                "and {output_tokens} output tokens whose first {prefix} tokens are the same system prompt. With "
                "prefix caching, the prefix is kept once, in 16-token blocks, and each request keeps its own tokens "
                "(on average p + O/2 for p prompt and O output tokens, less the prefix, in whole blocks). How many "
                "requests fit in flight?"),
        params={"model": "llama-3-8b", "hw": "h100", "input_tokens": 2048, "output_tokens": 256, "prefix": 1536,
                "dtype": "fp8"},
        variants={"prefix": (512, 1024, 1792), "hw": ("h200",)},
        key=lambda **p: _prefix_batch(**p),
        unit="dimensionless",
        rtol=0,
        hints=("Memory for caches: 0.9 x the card's memory, less the weights, less the prefix kept once.",
               "Each request's own tokens: p + O/2 - prefix, rounded up to whole 16-token blocks."),
        misconceptions=(
            Misconception("prefix-in-every-request",
                          "That keeps the prefix in every request's cache, as a server without prefix caching does. "
                          "With it the shared blocks are stored once.",
                          answer=_unless_key(lambda prefix, **p: _prefix_batch(prefix=0, **p),
                                             lambda **p: _prefix_batch(**p))),
        ),
    ),
    Question(
        id="l13.disagg-ratio",
        lesson="13",
        kind="numeric",
        prompt=("Disaggregate {model_name} (FP8) on {hw} GPUs: prefill on some, decode on others, one GPU per "
                "replica, requests of {input_tokens} input and {output_tokens} output tokens. How many decode GPUs "
                "does each prefill GPU need for the two pools to serve the same requests per second?"),
        params={"model": "llama-3-8b", "model_name": "Llama 3 8B", "hw": "h100", "input_tokens": 2048,
                "output_tokens": 256, "dtype": "fp8"},
        variants={"output_tokens": (128, 1024), "input_tokens": (1024, 4096)},
        key=lambda model, hw, input_tokens, output_tokens, dtype, **_: _disagg(model, hw, input_tokens,
                                                                               output_tokens, dtype),
        unit="dimensionless",
        rtol=0.03,
        hints=("A prefill GPU starts (prompts per step) / (prefill step time) requests per second.",
               "A decode GPU finishes B / ((O - 1) x decode step time) per second; divide the first by the second."),
        misconceptions=(
            Misconception("inverted",
                          "That is prefill GPUs per decode GPU: the ratio the other way round.",
                          answer=lambda model, hw, input_tokens, output_tokens, dtype, **_: 1 / _disagg(
                              model, hw, input_tokens, output_tokens, dtype)),
        ),
    ),
    # --- 8. the queue ------------------------------------------------------------------------------------------------
    Question(
        id="l13.queue-knee",
        lesson="13",
        kind="numeric",
        prompt=("Requests of {input_tokens:,} prompt and {output_tokens} output tokens arrive at {model_name} on one "
                "{hw_name} (BF16) as a Poisson stream. roofkit's simulation runs {requests:,} of them (seed 0) on a "
                "vLLM-like engine: at most 256 running, 8,192 tokens a step, chunked prefill. Raise the request rate: "
                "at what rate, in requests per second, does the 99th percentile of the time to first token pass "
                "{slo_ttft_s:g} s?"),
        params={"model": "llama-3-8b", "model_name": "Llama 3 8B", "hw": "h100", "hw_name": "H100",
                "input_tokens": 1000, "output_tokens": 200, "requests": 2000, "slo_ttft_s": 2.0},
        variants={"hw": ("h200",)},
        key=lambda model, hw, input_tokens, output_tokens, requests, slo_ttft_s, **_: _knee(
            model, hw, input_tokens, output_tokens, requests, slo_ttft_s),
        unit="1/s",
        rtol=0.03,  # the key reads the crossing between simulated rates; a finer scan of rates lands within 1%, and
        # the capacity by Little's law (asked next) a little below: the knee is the capacity, passed a little late
        hints=("Run the simulation at a few rates, from a light load up, and print each run's 99th percentile of "
               "TTFT: it barely moves, then climbs fast.",
               "Once you have one rate below the target and one above, narrow the interval (or read the crossing "
               "linearly between them) to two significant figures."),
        misconceptions=(
            Misconception("mean",
                          "That is where the mean TTFT passes the target. The 99th percentile is the TTFT that only "
                          "1 request in 100 exceeds: the slowest requests, which an average hides, pass the target "
                          "at a lower rate. Latency targets are set on a percentile.",
                          answer=lambda model, hw, input_tokens, output_tokens, requests, slo_ttft_s, **_: _knee(
                              model, hw, input_tokens, output_tokens, requests, slo_ttft_s, "ttft_mean_s")),
            Misconception("median",
                          "That is where the median TTFT passes the target: half the requests are slower by then. "
                          "The question asks for the 99th percentile, which passes it first.",
                          answer=lambda model, hw, input_tokens, output_tokens, requests, slo_ttft_s, **_: _knee(
                              model, hw, input_tokens, output_tokens, requests, slo_ttft_s, "ttft_p50_s")),
            Misconception("tokens",
                          "That is output tokens per second: each request makes its output tokens. The question asks "
                          "for requests per second.",
                          answer=lambda model, hw, input_tokens, output_tokens, requests, slo_ttft_s, **_: _knee(
                              model, hw, input_tokens, output_tokens, requests, slo_ttft_s) * output_tokens),
        ),
    ),
    Question(
        id="l13.queue-capacity",
        lesson="13",
        kind="numeric",
        prompt=("{model_name} on one {hw_name} (BF16) serves requests of {input_tokens:,} prompt and {output_tokens} "
                "output tokens, at most {places} at once (vLLM's max_num_seqs). With all {places} places full, a step "
                "takes what roofkit's steady state gives at that batch (workload.steady_state with batch={places}), "
                "and a request holds its place for its decode steps, one per output token after the first. By "
                "Little's law, what request rate keeps the {places} places full: the most the server can sustain, "
                "in requests per second?"),
        params={"model": "llama-3-8b", "model_name": "Llama 3 8B", "hw": "h100", "hw_name": "H100",
                "input_tokens": 1000, "output_tokens": 200, "places": 256},
        variants={"hw": ("h200", "a100"), "output_tokens": (100, 400)},
        key=lambda model, hw, input_tokens, output_tokens, places, **_: _capacity(model, hw, input_tokens,
                                                                                   output_tokens, places),
        unit="1/s",
        rtol=0.02,
        hints=("Little's law: the requests inside a system are its arrival rate times the time each stays, R = "
               "rate x W.",
               "Here R is the places and W the time a request holds one: its decode steps times the step at that "
               "batch. Solve for the rate."),
        misconceptions=(
            Misconception("inverted",
                          "That is W / R, the law turned the wrong way. R = rate x W, so the rate is R / W: the "
                          "places over the time each request holds one.",
                          answer=lambda model, hw, input_tokens, output_tokens, places, **_: 1 / _capacity(
                              model, hw, input_tokens, output_tokens, places)),
            Misconception("batch-1-step",
                          "That times each step as a lone sequence's decode step. With every place full a step "
                          "reads all their caches and carries their prompts: it is several times longer. A latency "
                          "measured at batch 1 is not the latency under load.",
                          answer=lambda model, hw, input_tokens, output_tokens, places, **_: _capacity(
                              model, hw, input_tokens, output_tokens, places, lone=True)),
            Misconception("per-token",
                          "That is about as many times too many as a request has output tokens: output tokens per "
                          "second, or a place held for a single step. A request holds its place for all its decode "
                          "steps, and the question counts requests.",
                          answer=lambda model, hw, input_tokens, output_tokens, places, **_: _capacity(
                              model, hw, input_tokens, output_tokens, places) * output_tokens),
        ),
    ),
    Question(
        id="l13.goodput",
        lesson="13",
        kind="numeric",
        prompt=("The same simulation at {rate:g} requests per second ({requests:,} requests, seed 0). Tighten the "
                "time-to-first-token target to {slo_ttft_s:g} s, the time per output token still at most "
                "{slo_tpot_ms:g} ms. What is the goodput, in requests per second?"),
        params={"model": "llama-3-8b", "hw": "h100", "input_tokens": 1000, "output_tokens": 200, "rate": 38,
                "requests": 2000, "slo_ttft_s": 1.5, "slo_tpot_ms": 200},
        variants={"slo_ttft_s": (0.5, 1.0)},
        key=lambda slo_tpot_ms, **p: _goodput_run(**p, slo_tpot_s=slo_tpot_ms / 1e3).goodput,
        unit="1/s",
        rtol=0.02,
        hints=("Goodput counts only the requests that met both targets: its TTFT at most the first, its TPOT at most "
               "the second.",
               "Count them in the run (its per-request ttft and tpot) and divide by the run's duration, from the "
               "start to the last token."),
        misconceptions=(
            Misconception("finished",
                          "That counts every finished request, as if each met the targets (a lone request's TTFT "
                          "would). Under this load many wait in the queue: goodput counts only those within both "
                          "targets.",
                          answer=lambda slo_tpot_ms, **p: _goodput_run(**p, slo_tpot_s=slo_tpot_ms / 1e3)
                          .requests_per_s),
            Misconception("offered",
                          "That is the rate offered. Past its capacity the server cannot finish that many, and "
                          "goodput counts only the finished requests that met both targets.",
                          answer=lambda rate, **_: float(rate)),
            Misconception("share",
                          "That is the share of the requests that met the targets. Goodput is a rate: that many "
                          "requests per second of the run.",
                          answer=lambda slo_tpot_ms, **p: float(_goodput_run(**p, slo_tpot_s=slo_tpot_ms / 1e3)
                                                                .good.mean())),
            Misconception("default-target",
                          "That is the goodput at the simulator's default targets (2 s to the first token), printed "
                          "above. With a tighter target fewer requests count.",
                          answer=_unless_key(lambda slo_tpot_ms, slo_ttft_s, **p: _goodput_run(
                              **p, slo_ttft_s=2.0, slo_tpot_s=slo_tpot_ms / 1e3).goodput,
                              lambda slo_tpot_ms, **p: _goodput_run(**p, slo_tpot_s=slo_tpot_ms / 1e3).goodput)),
        ),
    ),
    # --- 9. sharded decode ------------------------------------------------------------------------------------------
    Question(
        id="l13.allreduce-floor",
        lesson="13",
        kind="numeric",
        prompt=("{model_name} ({layers} layers, d = {d_model}) decodes at batch {batch} with {tp}-way tensor "
                "parallelism on an {hw} node. Each layer all-reduces the step's activations (BF16) twice, with an "
                "engine's one-shot kernel: one round at the link's latency, then each GPU reads the t - 1 other "
                "GPUs' buffers at the link's bandwidth per GPU (both printed above). What is the least time per "
                "output token these all-reduces take?"),
        params={"model": "llama-3-70b", "model_name": "Llama 3 70B", "layers": 80, "d_model": 8192, "hw": "h100",
                "tp": 8, "batch": 1},
        variants={"tp": (2, 4)},
        key=lambda model, hw, tp, batch, **_: _allreduce_floor(model, hw, tp, batch),
        unit="s",
        rtol=0.02,
        hints=("One all-reduce: the round's latency, plus (t - 1) S / BW for the S-byte buffers it reads from the "
               "others.",
               "S is one token's activations per sequence: d x 2 bytes. Two all-reduces per layer, every layer."),
        misconceptions=(
            Misconception("ring-model",
                          "That is NCCL's ring: 2(t - 1) rounds each. Engines do not run the ring for messages this "
                          "small: the one-shot kernel waits one round and reads more bytes, which is faster here.",
                          answer=lambda model, hw, tp, batch, **_: _allreduce_floor(model, hw, tp, batch, "ring",
                                                                                     rounds_only=True)),
            Misconception("one-per-layer",
                          "That counts one all-reduce per layer. Megatron tensor parallelism all-reduces twice per "
                          "layer: after attention and after the MLP.",
                          scale=0.5),
            Misconception("round-only",
                          "That counts the round's latency alone. Each GPU also reads the t - 1 other buffers over "
                          "the link: add (t - 1) S / BW.",
                          answer=lambda model, hw, tp, batch, **_: _allreduce_floor(model, hw, tp, batch,
                                                                                     rounds_only=True)),
        ),
    ),
    # --- 10. quantized weights ----------------------------------------------------------------------------------
    Question(
        id="l13.int4-speedup",
        lesson="13",
        kind="numeric",
        prompt=("{model_name} on one {hw}, decode at batch {batch} with {context}-token caches. Store the layers' "
                "weights in INT4 (groups of 128 with an FP16 scale; the math stays BF16, so do the cache, the "
                "embeddings and the output layer). By what factor does the time per output token shrink?"),
        params={"model": "llama-3-8b", "model_name": "Llama 3 8B", "hw": "h100", "batch": 1, "context": 4096},
        variants={"batch": (16, 64), "context": (16384, 32768)},
        key=lambda model, hw, batch, context, **_: _int4_speedup(model, hw, batch, context),
        unit="dimensionless",
        rtol=0.02,
        figures=3,
        hints=("At this batch the step is memory-bound: its time is mostly bytes over bandwidth.",
               "Which bytes shrink? The layers' weights, by 2 / (0.5 + 2/128). Which do not? The cache, the "
               "activations, the embeddings and the BF16 output layer."),
        misconceptions=(
            Misconception("bytes-ratio",
                          "That is the weights' bytes ratio alone. The cache, the activations and the BF16 output "
                          "layer do not shrink, so the step gains less.",
                          answer=lambda **p: 2 / 0.515625),
            Misconception("no-gain",
                          "The math stays in BF16, true, but a memory-bound step is paid in bytes: the weights are "
                          "read at about a quarter of their size.",
                          answer=lambda **p: 1.0),
        ),
    ),
    # --- 11. cost ---------------------------------------------------------------------------------------------------
    Question(
        id="l13.cost-per-million",
        lesson="13",
        kind="numeric",
        prompt=("Llama 3 8B with FP8 weights and math on one {hw}, requests of {input_tokens} in and {output_tokens} "
                "out, as many in flight as fit (the bound of the table above). The GPU costs ${usd} per hour. What "
                "do a million output tokens cost, in dollars?"),
        params={"model": "llama-3-8b", "hw": "h100", "input_tokens": 1000, "output_tokens": 1000, "dtype": "fp8",
                "usd": 2.5},
        variants={"usd": (2.0, 3.5), "input_tokens": (128, 2048)},
        key=lambda **p: _cost(**p),
        unit="USD per million tokens",  # '$0.032', '$0.032 per million tokens', '3.2 cents' all read as asked
        rtol=0.02,
        hints=("Tokens in an hour: tokens/s x 3,600.",
               "Dollars per token: the hour's price over the hour's tokens; times a million."),
        misconceptions=(
            Misconception("per-second-price",
                          "That divides the hourly price by the tokens of one second: an hour has 3,600 of them.",
                          scale=3600),
        ),
    ),
    # --- 13. speculative decoding -------------------------------------------------------------------------------
    Question(
        id="l13.spec-tokens",
        lesson="13",
        kind="numeric",
        prompt=("A draft model proposes k tokens per step; the target model accepts each with probability "
                "alpha = {alpha}, independently, and stops at the first rejection, adding one token of its own. "
                "Let the draft grow longer and longer (k as large as you like): what number do the expected tokens "
                "per target step approach?"),
        params={"alpha": 0.65},
        variants={"alpha": (0.6, 0.75, 0.9)},
        key=lambda alpha: _spec_ceiling(alpha),
        unit="dimensionless",
        rtol=0.01,
        hints=("In the closed form, what becomes of alpha^(k+1) as k grows?",
               "What is left is the sum of a geometric series, 1 + alpha + alpha^2 + ... without end."),
        misconceptions=(
            Misconception("no-bonus-token",
                          "That counts only the accepted drafted tokens, alpha / (1 - alpha). The target's step always "
                          "adds a token of its own: the correction at the first rejection.",
                          answer=lambda alpha: _spec_ceiling(alpha) - 1),
            Misconception("four-drafted",
                          "That is the expected tokens at k = 4, the example's draft. A longer draft yields more, "
                          "ever less per extra token: let k grow without bound.",
                          answer=lambda alpha: speculative.expected_tokens(alpha, 4)),
            Misconception("example-above",
                          "That is the example printed above, alpha = 0.8 and k = 4. This question has its own alpha, "
                          "and lets k grow without bound.",
                          answer=_unless_key(lambda alpha: speculative.expected_tokens(0.8, 4),
                                             lambda alpha: _spec_ceiling(alpha))),
        ),
    ),
    # --- 14. paged KV cache -------------------------------------------------------------------------------------
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
    Question(
        id="l13.preempt-recompute",
        lesson="13",
        kind="numeric",
        prompt=("{requests:,} requests of {input_tokens:,} prompt tokens and {output_tokens:,} output tokens are "
                "handed at once to an engine whose KV cache holds {cache_tokens:,} tokens. It gives each request "
                "cache as it grows; when the cache is full it preempts the request it admitted last and later "
                "recomputes everything that request held (its prompt and the tokens it had generated) as a prefill. "
                "The requests run in lock step, and the preempted ones fit once the others finish. How many tokens "
                "does the engine recompute in all?"),
        params={"requests": 1000, "input_tokens": 2048, "output_tokens": 2048, "cache_tokens": 2_500_000},
        variants={"requests": (800,), "cache_tokens": (2_800_000,)},
        key=lambda requests, input_tokens, output_tokens, cache_tokens: preemption.recompute_tokens(
            requests, input_tokens, output_tokens, cache_tokens),
        unit="dimensionless",
        rtol=0.03,
        hints=("Do all the prompts fit at first? That is N0, the requests admitted; every one then grows by one token "
               "a step until the cache fills.",
               "From there K / (p + j) requests still run at step j, and each one preempted at step j holds p + j "
               "tokens: the count worked out above the question, with this N0."),
        misconceptions=(
            Misconception("overflow",
                          "That is how many tokens do not fit at the end, requests x (p + O) - K. Preemption frees "
                          "whole requests, and each is recomputed whole: its prompt and all it had generated by then.",
                          answer=lambda requests, input_tokens, output_tokens, cache_tokens:
                          requests * (input_tokens + output_tokens) - cache_tokens),
            Misconception("prompts-only",
                          "That recomputes only the prompts of the requests preempted. A request preempted at step j "
                          "had generated j tokens too; its cache is gone, and its recomputation covers p + j.",
                          answer=lambda requests, input_tokens, output_tokens, cache_tokens:
                          (requests - cache_tokens // (input_tokens + output_tokens)) * input_tokens),
        ),
    ),
    # --- the worked problem --------------------------------------------------------------------------------------
    Question(
        id="l13.worked-throughput",
        lesson="13",
        kind="numeric",
        prompt=("{model_name} with FP8 weights, cache and math on {gpus} x {hw}, as {replicas} replicas of {tp} GPUs "
                "(tensor parallel), requests of {input_tokens} input and {output_tokens} output tokens, as many in "
                "flight as fit. With the steady state of continuous batching (the bound), how many output tokens "
                "per second does the node produce?"),
        params={"model": "llama-3-70b", "model_name": "Llama 3 70B", "hw": "h100", "gpus": 8, "tp": 2, "replicas": 4,
                "input_tokens": 1000, "output_tokens": 1000, "dtype": "fp8"},
        variants={"hw": ("h200",), "input_tokens": (128, 2048)},
        key=lambda model, hw, gpus, tp, input_tokens, output_tokens, dtype, **_: _worked(
            model, hw, gpus, tp, input_tokens, output_tokens, dtype),
        unit="tokens/s",
        rtol=0.02,
        hints=("One replica first: its batch from its memory, then its average step (decode and the prefill it "
               "carries).",
               "B O / ((O - 1) T_step) for one replica; the node has several."),
        misconceptions=(
            Misconception("one-replica",
                          "That is one replica. The node runs all of them side by side: multiply by the replicas.",
                          answer=lambda model, hw, gpus, tp, input_tokens, output_tokens, dtype, **_: _worked(
                              model, hw, gpus, tp, input_tokens, output_tokens, dtype) * tp / gpus),
            Misconception("per-gpu",
                          "That is per GPU. The question asks for the node: all its GPUs serve together.",
                          answer=lambda model, hw, gpus, tp, input_tokens, output_tokens, dtype, **_: _worked(
                              model, hw, gpus, tp, input_tokens, output_tokens, dtype) / gpus),
            Misconception("per-user",
                          "That is one request's rate, 1 / TPOT. The node makes a token for every request in flight "
                          "at every step, on every replica.",
                          answer=lambda model, hw, gpus, tp, input_tokens, output_tokens, dtype, **_: 1 / _steady(
                              model, hw, input_tokens, output_tokens, gpus=gpus, tp=tp, dtype=dtype).tpot_s),
        ),
    ),
    # --- exercises --------------------------------------------------------------------------------------------
    Question(
        id="l13.ex-min-gpus",
        lesson="13",
        kind="numeric",
        prompt=("Llama 3.1 405B with its layers' weights in {weights_dtype} (embeddings and output layer in BF16): "
                "what is the fewest {hw} GPUs that hold the weights, with 10% of each GPU's reported memory in "
                "reserve (the KV cache not counted)?"),
        params={"model": "llama-3.1-405b", "hw": "h100", "weights_dtype": "bf16"},
        variants={"weights_dtype": ("fp8", "int4"), "hw": ("h200", "b200", "mi300x")},
        key=lambda **p: memory.min_gpus(**p),
        unit="dimensionless",
        rtol=0,
        hints=("The weights' bytes: layers' matrices at the format's bytes per weight, the rest at 2 bytes.",
               "Each GPU holds 90% of the memory it reports; round the quotient up."),
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
            Misconception("datasheet-memory", _DATASHEET_MEMORY,
                          answer=_unless_key(lambda hw, **p: None if _datasheet(hw) is None else
                                             memory.min_gpus(hw=hw, **p, reserve=_datasheet(hw)),
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
        params={"model": "llama-3-70b", "hw": "h100", "gpus": 2, "batch": 20, "weights_dtype": "int4"},
        variants={"batch": (8, 32), "gpus": (1, 4)},
        key=lambda **p: _max_context(**p),
        unit="dimensionless",
        rtol=0,
        hints=("Memory for the cache: GPUs x reported capacity x 0.9, less the INT4 weights (with their scales).",
               "Divide by the batch and by one token's cache (both K and V, every layer); round down."),
        misconceptions=(
            Misconception("no-reserve",
                          "That uses the whole memory: keep 10% of each GPU free.",
                          answer=_unless_key(lambda **p: _max_context(**p, reserve=0), lambda **p: _max_context(**p))),
            Misconception("k-or-v-once",
                          "That counts one of K and V per token; the cache keeps both.",
                          answer=_unless_key(lambda **p: _max_context(**p, cache_once=True),
                                             lambda **p: _max_context(**p))),
            Misconception("bf16-weights",
                          "That leaves the weights in BF16. In INT4 they take about a quarter of that memory.",
                          answer=_unless_key(lambda weights_dtype, **p: _max_context(weights_dtype="bf16", **p),
                                             lambda **p: _max_context(**p))),
            Misconception("datasheet-memory", _DATASHEET_MEMORY,
                          answer=_unless_key(lambda hw, **p: None if _datasheet(hw) is None else
                                             _max_context(hw=hw, **p, reserve=_datasheet(hw)),
                                             lambda **p: _max_context(**p))),
        ),
        points=2,
    ),
    Question(
        id="l13.ex-fewest-gpus",
        lesson="13",
        kind="numeric",
        prompt=("Llama 3 70B in BF16 must decode {batch} sequences of {context} tokens at no more than {target_ms} ms "
                "per output token on {hw} GPUs, tensor parallel inside one node. With the layer model (the bound), "
                "what is the fewest GPUs that does it (the weights and the caches must fit too)?"),
        params={"model": "llama-3-70b", "hw": "h100", "batch": 8, "context": 4096, "target_ms": 12},
        variants={"target_ms": (10, 25)},
        key=lambda model, hw, batch, context, target_ms: latency.fewest_gpus(model, hw, target_ms * 1e-3, batch,
                                                                              context),
        unit="dimensionless",
        rtol=0,
        hints=("Try the tensor-parallel degrees that divide the heads, smallest first: 1, 2, 4, 8.",
               "For each, check the memory plan fits, then the decode step's time, all-reduces included."),
        misconceptions=(
            Misconception("memory-only",
                          "That many GPUs hold the weights and caches, but their decode step is slower than the "
                          "target: more GPUs split the reads further.",
                          answer=_unless_key(lambda model, hw, batch, context, **_: float(memory.min_gpus(model, hw)),
                                             lambda model, hw, batch, context, target_ms: latency.fewest_gpus(
                                                 model, hw, target_ms * 1e-3, batch, context))),
        ),
        points=2,
    ),
    Question(
        id="l13.ex-spec-speedup",
        lesson="13",
        kind="numeric",
        prompt=("Speculative decoding with k = {k} drafted tokens per round and a draft step that costs c = {c} of a "
                "target step; the target's check of the k + 1 tokens costs one of its ordinary steps. Below what "
                "acceptance rate alpha does speculation slow decoding down instead of speeding it up (Leviathan et "
                "al. 2023's speed-up below 1)?"),
        params={"k": 4, "c": 0.2},
        variants={"k": (2, 6), "c": (0.1, 0.3)},
        key=lambda k, c: _break_even(k, c),
        unit="dimensionless",
        rtol=0.01,
        hints=("A round takes k c + 1 target steps and yields E = (1 - alpha^(k+1)) / (1 - alpha) tokens; without "
               "speculation those steps would make k c + 1 tokens.",
               "Find the alpha at which E = k c + 1. E grows with alpha: try values and halve the interval "
               "(bisection) until it is pinned to two figures."),
        misconceptions=(
            Misconception("independent-acceptance",
                          "That is alpha = c: it takes E = 1 + k alpha, as if every drafted token were judged on its "
                          "own. After the first rejection the rest are thrown away: E = (1 - alpha^(k+1)) / "
                          "(1 - alpha), smaller, so alpha must be higher to pay.",
                          answer=_unless_key(lambda k, c: float(c), lambda **p: _break_even(**p))),
            Misconception("no-bonus-token",
                          "That leaves out the token the target adds itself every round: E counts it, so speculation "
                          "pays at a lower alpha.",
                          answer=lambda k, c: _break_even(k, c, bonus=False)),
            Misconception("free-draft",
                          "With a free draft any alpha pays, but each round spends k draft steps of c target steps "
                          "each: E must reach k c + 1.",
                          answer=lambda k, c: 0.0),
        ),
        points=2,
    ),
)
