"""Lesson 14, many GPUs: memory and time of a big run, collectives, data, tensor and pipeline parallelism, ZeRO.

Every key is a computation through :mod:`roofkit.comms`, :mod:`roofkit.links`
and :mod:`roofkit.parallel` over the question's parameters, so a variant may
change the model, the accelerator, the link, the sizes or the layout. The
published figures these keys are checked against (nccl-tests' bus bandwidth,
the JAX scaling book's critical batches and TP limit, Llama 3's MFU) are in
tests/test_lesson_14.py.
"""

from __future__ import annotations

import math
import re

from ...perf import comms, nccl, parallel, steptime, training
from ...perf.parallel import experts
from ...catalogs import hardware, links, models
from ...errors import RoofkitError
from ..quiz import Misconception, Question, register

_BYTES_PER_PARAM = training.adam_memory_per_param()  # BF16 weights and gradients, FP32 master weights and moments


def _states(model) -> dict:
    return parallel.state_bytes(models.get(model).params)


def _gpus_to_hold(model, memory_gb, parts=("total",)):
    states = _states(model)
    return math.ceil(sum(states[p] for p in parts) / (memory_gb * 1e9))


def _named_size_gpus(model, memory_gb):
    """The GPUs for the parameter count the model's name says (405B for llama-3.1-405b), 16 bytes each."""
    named = float(re.search(r"(\d+(?:\.\d+)?)b$", model)[1]) * 1e9
    return math.ceil(16 * named / (memory_gb * 1e9))


def _apart(wrong, right):
    """``wrong``'s value, or None where it is the key (then it is no mistake to name)."""
    def value(**p):
        guess = wrong(**p)
        return None if guess == right(**p) else guess
    return value


def _weights_and_moments(model, memory_gb):
    """The quick count of 10 bytes per parameter: BF16 weights and two FP32 moments, no gradients, no master copy."""
    per = _BYTES_PER_PARAM
    N = models.get(model).params
    return math.ceil(N * (per["weights"] + per["first_moment"] + per["second_moment"]) / (memory_gb * 1e9))


def _all_reduce_ms(size_gb, gpus, link, bandwidth=None):
    L = links.get(link)
    return comms.time("all-reduce", size_gb * 1e9, gpus, L.latency, bandwidth or L.bandwidth) * 1e3


def _quoted_bytes_per_s(link) -> float:
    """A link's figure exactly as its source quotes it, in bytes/s (both directions, aggregate, as it stands)."""
    L = links.get(link)
    return L.quoted * links.UNITS[L.quoted_unit]


def _nvlink(hw):
    """The per-GPU NVLink behind an accelerator's scale-up domain."""
    domain = links.scale_up(hw)
    return links.get(domain.over) if domain.over else domain


def _dp_critical(hw, gpus, bandwidth=None, grad_bytes=2):
    return parallel.dp_critical_batch(gpus, hardware.get(hw).peak("bf16"), bandwidth or links.scale_up(hw).bandwidth,
                                      grad_bytes)


_WORKED_HW = "h100"  # the accelerator of the lesson's worked critical batch, before l14.dp-critical-batch


def _same_accelerator(a, b) -> bool:
    return hardware.get(a).key == hardware.get(b).key


def _memory(model, tp, pp, dp, zero):
    return parallel.state_bytes(models.get(model).params / (tp * pp), dp, zero)["total"]


def _tp_degree(model, hw, d_ff=None, bandwidth=None, gated=None):
    M = models.get(model)
    return parallel.tp_critical_degree(d_ff or M.d_ff, hardware.get(hw).peak("bf16"),
                                       bandwidth or links.scale_up(hw).bandwidth, M.gated if gated is None else gated)


def _pipeline_mfu(compute_s, comm_s, stages, microbatches, bubble=None):
    """MFU at the datasheet peak: compute time over step time (model FLOPs / (G P) is the compute time).

    The TP traffic is inside every micro-batch's slot, so an idle slot of the bubble lasts as long as a busy one:
    (p - 1)/m of compute plus that traffic, which is (p - 1)/(m + p - 1) of the step.
    """
    idle = parallel.bubble_time(compute_s + comm_s, stages, microbatches) if bubble is None else bubble
    return training.mfu(compute_s, compute_s + comm_s + idle, 1)


def _node_gpus(hw) -> int:
    return links.scale_up(hw).gpus


def _dp_across_nodes(hw, nodes, nic="ib-ndr", per_gpu=False):
    """The network phase of a hierarchical all-reduce: each GPU sends 1/k of the gradients over its own port."""
    k = 1 if per_gpu else _node_gpus(hw)
    return parallel.dp_critical_batch(nodes, hardware.get(hw).peak("bf16"), k * links.get(nic).bandwidth)


# --- the layout exercise -----------------------------------------------------------------------------

LAYOUTS = {  # letter -> (description, plan arguments): sequence parallelism on, roofkit's calibrated estimate
    "A": ("TP 8, plain data parallelism", dict(tp=8, pp=1, zero=0)),
    "B": ("TP 8, data parallelism with ZeRO-3", dict(tp=8, pp=1, zero=3)),
    "C": ("TP 8, PP 4, data parallelism with ZeRO-1", dict(tp=8, pp=4, zero=1)),
    "D": ("TP 2, PP 4, data parallelism with ZeRO-1", dict(tp=2, pp=4, zero=1)),
}
_LAYOUT_OPTIONS = dict(sequence_parallel=True, calibrated=True)


def _layouts(gpus, batch_m) -> dict:
    """{letter: Plan} for the layouts roofkit can plan (Llama 3 70B, H100, 8192-token sequences)."""
    plans = {}
    for letter, (_, args) in LAYOUTS.items():
        try:
            plans[letter] = parallel.plan("llama-3-70b", "h100", gpus, batch_m * 2**20, 8192, **args,
                                          **_LAYOUT_OPTIONS)
        except RoofkitError:
            continue
    return plans


def _best_layout(gpus, batch_m, fits_only=True):
    plans = _layouts(gpus, batch_m)
    chosen = {k: p for k, p in plans.items() if p.fits or not fits_only}
    return min(chosen, key=lambda k: chosen[k].step_time_s)


def _least_memory(gpus, batch_m):
    plans = _layouts(gpus, batch_m)
    return min(plans, key=lambda k: plans[k].memory_per_gpu_bytes)


def _unless_key(wrong):
    """A wrong choice as a misconception, unless a variant's numbers make it the right one."""
    return lambda **p: None if wrong(**p) == _best_layout(**p) else wrong(**p)


def _nvls_bound_busbw(link, gpus):
    """nccl-tests' busbw of a bandwidth-bound NVLS all-reduce at the line rate: each GPU sends its buffer once."""
    L = links.get(link)
    return comms.bus_factor("all-reduce", gpus) * L.bandwidth / comms.volume("all-reduce", gpus, "nvls")


def _auto_algorithm(size_mb, gpus, link):
    return comms.collective("all-reduce", size_mb * 1e6, gpus, link, "auto", calibrated=True).algorithm


def _leaf_switches(nodes, ports, gpus_per_node=None, down_share=0.5):
    """Leaf switches of a non-blocking scalable unit: the nodes' ports over the switch ports facing down."""
    k = gpus_per_node or links.get("hgx-h100").gpus
    return math.ceil(nodes * k / (ports * down_share))


def _dp_bytes(model, tp, pp, dp, ring=True, split=True):
    """Bytes each GPU sends in one ring all-reduce of its BF16 gradients: 2(n-1)/n x 2 N / (t p)."""
    N = models.get(model).params / ((tp * pp) if split else 1)
    return (comms.volume("all-reduce", dp) if ring else 1) * 2 * N


def _a2a_us(tokens, top_k, d_model, gpus, link, both=False):
    L = links.get(link)
    size = parallel.all_to_all_bytes(tokens, d_model, top_k)
    return comms.time("all-to-all", size, gpus, L.latency, L.bandwidth * (2 if both else 1)) * 1e6


def _unless(key_fn, wrong_fn):
    """A wrong answer as a misconception, unless a variant's numbers make it the right one."""
    def answer(**p):
        w, k = wrong_fn(**p), key_fn(**p)
        return None if w is None or math.isclose(w, k, rel_tol=0.02) else w
    return answer


def _other_layout(letter, fits):
    """``letter`` as a wrong choice that fits (or not), unless it is the key or an earlier misconception's."""
    def value(gpus, batch_m):
        plans = _layouts(gpus, batch_m)
        named = (_best_layout(gpus, batch_m), _best_layout(gpus, batch_m, fits_only=False), _least_memory(gpus, batch_m))
        return letter if letter in plans and plans[letter].fits == fits and letter not in named else None
    return value


_SLICES_MODEL = "llama-3-70b"  # the model of l14.zero3-slices: not one of the lesson's table of DeepSpeed's runs


def _slices_facts(model=_SLICES_MODEL) -> dict:
    """A model's parameter tensors, how many DeepSpeed gathers every pass, and the per-kernel floor (A100)."""
    tensors = models.get(model).parameter_tensors()
    large = sum(x >= parallel.PERSISTENCE_THRESHOLD for x in tensors)
    return {"tensors": len(tensors), "large": large, "small": len(tensors) - large,
            "floor_us": steptime.roofs("a100", calibrated=True).floor_s * 1e6}


def _slices_s(gpus, recompute="full", ops=None, per_rank=True, model=_SLICES_MODEL):
    """Seconds a step of DeepSpeed's 2021 ZeRO-3 spends on the ranks' slices of ``model``'s list collectives
    (:func:`roofkit.parallel.sharding.list_slices`; ``recompute``, ``ops``, ``per_rank``: the mistakes)."""
    slices = parallel.list_slices(models.get(model).parameter_tensors(), gpus, recompute=recompute,
                                  gather_api="list")
    return slices / (1 if per_rank else gpus) * (ops or parallel.OPS_PER_SLICE) * _slices_facts(model)["floor_us"] \
        * 1e-6


def _zero3_traffic(microbatches, recompute="full", policy=None):
    """Bytes each GPU sends per step under ZeRO-3 over plain data parallelism's (ring collectives, many GPUs)."""
    return (parallel.sync_volume(3, 64, microbatches, policy, recompute)
            / parallel.sync_volume(0, 64, microbatches))


def _fit_beta(small_bytes, small_us, large_bytes, large_us):
    return comms.fit([small_bytes, large_bytes], [small_us * 1e-6, large_us * 1e-6], "p2p").bandwidth_bytes_per_s


# --- precision per operation and the experts' dispatch ----------------------------------------------------------

def _fp8_pair(model, hw, gpus, sequences, seq) -> dict:
    """{recipe: bound Plan} of one data-parallel layout (ZeRO-1) in BF16 and in Transformer Engine's FP8 recipe."""
    return {r: parallel.plan(model, hw, gpus, sequences * seq, seq, zero=1, recipe=r) for r in ("bf16", "fp8")}


def _fp8_speedup(model, hw, gpus, sequences, seq) -> float:
    """The bound's BF16 step over its FP8 step."""
    pair = _fp8_pair(model, hw, gpus, sequences, seq)
    return pair["bf16"].step_time_s / pair["fp8"].step_time_s


def _fp8_mfu_ratio(model, hw, gpus, sequences, seq) -> float:
    """The FP8 plan's MFU over the BF16 plan's: each counts against its own precision's peak."""
    pair = _fp8_pair(model, hw, gpus, sequences, seq)
    return pair["fp8"].mfu / pair["bf16"].mfu


def _nodes_reached(k, experts_total, nodes, limit) -> float:
    """Expected distinct nodes a token's k experts fall on, drawn uniformly (no repeats) among ``limit`` nodes'."""
    per_node = experts_total // nodes
    return experts.expected_hits(k, limit * per_node, per_node)


def _not_near(key_fn, wrong_fn, rel=0.02):
    """``wrong_fn``'s value, or None where a variant's numbers put it within ``rel`` of the key."""
    def answer(**p):
        w, k = wrong_fn(**p), key_fn(**p)
        return None if w is None or math.isclose(w, k, rel_tol=rel) else w
    return answer


register(
    Question(
        id="l14.gpus-to-hold",
        lesson="14",
        kind="numeric",
        prompt=("Mixed-precision training with Adam keeps 16 bytes per parameter: BF16 weights (2) and gradients "
                "(2), an FP32 master copy of the weights (4) and Adam's two FP32 moments (4 + 4). Leaving "
                "activations out, at least how many GPUs with {memory_gb} GB of memory each does it take just to "
                "hold these for the model '{model}' (its parameters: roofkit.model('{model}').params)?"),
        params={"model": "llama-3.1-405b", "memory_gb": 80},
        key=lambda model, memory_gb: _gpus_to_hold(model, memory_gb),
        unit="dimensionless",
        rtol=0,  # one whole number of GPUs
        hints=("Multiply the parameter count by the bytes each parameter needs.",
               "Divide by one GPU's memory (1 GB = 10^9 bytes) and round up: part of a GPU is a whole GPU."),
        misconceptions=(
            Misconception("weights-only", "That holds the BF16 weights only. Training also keeps their gradients, "
                                          "an FP32 master copy and Adam's two moments: 16 bytes per parameter.",
                          answer=lambda model, memory_gb: _gpus_to_hold(model, memory_gb, ("weights",))),
            Misconception("ten-bytes", "You counted 10 bytes per parameter (BF16 weights and two FP32 moments). "
                                       "Mixed precision also keeps the BF16 gradients and an FP32 master copy of "
                                       "the weights: 16 bytes.", answer=_weights_and_moments),
            Misconception("rounded-params", "That rounds the parameter count to the model's name (405B, 70B, "
                                            "175B). Near a whole number of GPUs the exact count decides: use "
                                            "roofkit.model(...).params.",
                          answer=_apart(_named_size_gpus, _gpus_to_hold)),
        ),
        variants={"model": ("llama-3-70b", "llama-3.1-405b", "gpt-3-175b"), "memory_gb": (80, 96, 141, 192)},
    ),
    Question(
        id="l14.allreduce-time",
        lesson="14",
        kind="numeric",
        prompt=("Data parallelism all-reduces {size_gb} GB of BF16 gradients over the {gpus} GPUs of one NVSwitch "
                "node, the link '{link}' of roofkit's catalog (roofkit.links.get('{link}') shows its figure as "
                "the vendor quotes it). With the ring algorithm and the α-β model, how long does the all-reduce "
                "take? Answer in ms."),
        params={"size_gb": 2, "gpus": 8, "link": "hgx-h100"},
        key=lambda size_gb, gpus, link: _all_reduce_ms(size_gb, gpus, link),
        unit="ms",
        rtol=0.02,
        hints=("A ring all-reduce takes 2(n-1) steps of α each, and each GPU sends 2(n-1)/n times the buffer.",
               "β is what one GPU sends in one direction: the vendor's node figure adds both directions of all "
               "eight GPUs."),
        misconceptions=(
            Misconception("both-directions", "You used both directions added as β. In a ring each GPU sends to "
                                             "one neighbour while it receives from the other: only one "
                                             "direction's bandwidth carries the data.",
                          answer=lambda size_gb, gpus, link: _all_reduce_ms(
                              size_gb, gpus, link, 2 * links.get(link).bandwidth)),
            Misconception("aggregate", "You used the node's headline figure, the bandwidth of all its GPUs "
                                       "added, both directions. One GPU sends at that divided by 2 x the GPUs.",
                          answer=lambda size_gb, gpus, link: _all_reduce_ms(size_gb, gpus, link,
                                                                            _quoted_bytes_per_s(link))),
            Misconception("no-ring-factor", "You sent the buffer once, S/β. In a ring all-reduce each GPU sends "
                                            "2(n-1)/n S: a reduce-scatter and then an all-gather.",
                          answer=lambda size_gb, gpus, link: (comms.latency_term("all-reduce", gpus,
                                                                                 links.get(link).latency)
                                                              + size_gb * 1e9 / links.get(link).bandwidth) * 1e3),
        ),
        variants={"size_gb": (1, 2, 5, 7), "gpus": (4, 8), "link": ("hgx-a100", "hgx-h100", "hgx-b200")},
    ),
    Question(
        id="l14.busbw",
        lesson="14",
        kind="numeric",
        prompt=("nccl-tests' all_reduce_perf runs on {gpus} GPUs: an all-reduce of {size_mib} MiB takes "
                "{time_ms} ms. What bus bandwidth (busbw) does it print? Give a unit, e.g. GB/s."),
        params={"gpus": 8, "size_mib": 1024, "time_ms": 5.2},
        key=lambda gpus, size_mib, time_ms: comms.busbw("all-reduce", size_mib * 2**20, gpus, time_ms * 1e-3),
        unit="byte/s",
        rtol=0.02,
        figures=3,
        hints=("First the algorithm bandwidth: the buffer's size over the time.",
               "nccl-tests scales it by what each GPU really sends in a ring all-reduce, so that the result can be "
               "compared with a link's bandwidth whatever the number of GPUs."),
        misconceptions=(
            Misconception("algbw", "That is the algorithm bandwidth (algbw), S/t. busbw multiplies it by "
                                   "2(n-1)/n for an all-reduce.",
                          answer=lambda gpus, size_mib, time_ms: comms.algbw(size_mib * 2**20, time_ms * 1e-3)),
            Misconception("times-two", "The bus factor of an all-reduce is 2(n-1)/n, not 2: each GPU keeps its "
                                       "own share and sends the others'.",
                          answer=lambda gpus, size_mib, time_ms: 2 * comms.algbw(size_mib * 2**20, time_ms * 1e-3)),
            Misconception("mib-as-mb", "A MiB is 2**20 bytes, not 10**6.",
                          answer=lambda gpus, size_mib, time_ms: comms.busbw("all-reduce", size_mib * 1e6, gpus,
                                                                             time_ms * 1e-3)),
        ),
        variants={"gpus": (4, 8, 16), "size_mib": (256, 1024, 4096), "time_ms": (1.5, 5.2, 12.0)},
    ),
    Question(
        id="l14.latency-bound",
        lesson="14",
        kind="numeric",
        prompt=("Below what message size is a ring all-reduce over {gpus} GPUs on '{link}' latency-bound, its α "
                "terms larger than its bandwidth term? Use the link's α and its bandwidth per direction. Answer "
                "in bytes (or with a unit, e.g. MB)."),
        params={"gpus": 8, "link": "hgx-b200"},
        key=lambda gpus, link: comms.latency_bound_size("all-reduce", gpus, links.get(link).latency,
                                                        links.get(link).bandwidth),
        unit="byte",
        rtol=0.02,
        hints=("Write both terms of the ring's time and set them equal.",
               "The α term is 2(n-1)·α; the bandwidth term is 2(n-1)/n · S/β. Solve for S."),
        misconceptions=(
            Misconception("point-to-point", "That is α·β, the size at which ONE message is latency-bound. A ring "
                                            "all-reduce pays 2(n-1) latencies and sends each GPU's data in n "
                                            "chunks.",
                          answer=lambda gpus, link: links.get(link).latency * links.get(link).bandwidth),
            Misconception("steps-only", "You multiplied α·β by the steps but did not divide by what each GPU "
                                        "sends, 2(n-1)/n of the buffer.",
                          answer=lambda gpus, link: comms.steps("all-reduce", gpus) * links.get(link).latency
                          * links.get(link).bandwidth),
            Misconception("both-directions", "You used both directions added as β; a ring sends one way.",
                          scale=2),
        ),
        variants={"gpus": (4, 8), "link": ("hgx-a100", "hgx-h100", "hgx-b200")},
    ),
    Question(
        id="l14.dp-critical-batch",
        lesson="14",
        kind="numeric",
        prompt=("Data parallelism over the {gpus} GPUs of one NVSwitch node of '{hw}' accelerators: the BF16 "
                "gradients are all-reduced with a ring while the backward pass runs, 4 FLOPs per parameter per "
                "token at the datasheet BF16 peak. Above how many tokens per GPU does the backward pass take "
                "longer than the all-reduce? Leave α out (gradient buckets are large)."),
        params={"hw": "b200", "gpus": 8},
        key=lambda hw, gpus: _dp_critical(hw, gpus),
        unit="dimensionless",
        rtol=0.02,
        hints=("Backward: 4·N·B/C seconds for B tokens per GPU. All-reduce: 2(n-1)/n · 2N bytes / W.",
               "Set them equal: N cancels. W is NVLink's bandwidth per direction."),
        misconceptions=(
            Misconception("both-directions", "You used NVLink's both-directions figure as W; a ring sends one "
                                             "way, at half of it.", scale=0.5),
            Misconception("six-n", "You counted the forward pass too (6 FLOPs per parameter per token). The "
                                   "gradients are ready only during the backward pass: 4N per token hides them.",
                          scale=4 / 6),
            Misconception("many-gpus-limit", "That is C/W, the limit for many GPUs. With n GPUs each sends "
                                             "2(n-1)/n of the gradients, not 2.",
                          answer=lambda hw, gpus: hardware.get(hw).peak("bf16") / links.scale_up(hw).bandwidth),
            Misconception("fp32-gradients", "The gradients travel in BF16, 2 bytes each, not 4.", scale=2),
            Misconception("worked-example-h100", "That is the worked example's figure, for a node of H100s. Take "
                                                 "this question's accelerator: its own BF16 peak and its own NVLink "
                                                 "bandwidth per direction.",
                          answer=lambda hw, gpus: None if _same_accelerator(hw, _WORKED_HW)
                          else _dp_critical(_WORKED_HW, gpus)),
        ),
        variants={"hw": ("a100-sxm4-80gb", "h100", "b200"), "gpus": (4, 8)},
    ),
    Question(
        id="l14.memory-per-gpu",
        lesson="14",
        kind="numeric",
        prompt=("The model '{model}' is split TP = {tp} by PP = {pp} ways (each GPU holds 1/(TP·PP) of the "
                "parameters), and each of its data-parallel groups of {dp} ranks uses ZeRO stage {zero}. With "
                "16 bytes per parameter (BF16 weights and gradients, FP32 master weights and Adam moments), how "
                "many bytes of weights, gradients and optimizer states does each GPU hold? Leave activations out."),
        params={"model": "llama-3-70b", "tp": 8, "pp": 2, "dp": 64, "zero": 1},
        key=_memory,
        unit="byte",
        rtol=0.02,
        hints=("Start from the parameters one GPU is responsible for: N / (TP·PP).",
               "ZeRO-1 shards the 12 bytes of optimizer states over the DP ranks; ZeRO-2 also the 2 bytes of "
               "gradients; the rest stays whole on every rank."),
        misconceptions=(
            Misconception("shards-everything", "That shards all 16 bytes over the DP ranks: ZeRO-3. Stages 1 and "
                                               "2 keep the weights (and, in stage 1, the gradients) whole.",
                          answer=lambda model, tp, pp, dp, zero: _memory(model, tp, pp, dp, 3)),
            Misconception("no-model-split", "You forgot that TP and PP split the parameters: each GPU holds "
                                            "1/(TP·PP) of them.",
                          answer=lambda model, tp, pp, dp, zero: _memory(model, 1, 1, dp, zero)),
            Misconception("no-zero", "You left ZeRO out: it shards the optimizer states (and in stage 2 the "
                                     "gradients) over the DP ranks.",
                          answer=lambda model, tp, pp, dp, zero: _memory(model, tp, pp, 1, 0)),
        ),
        variants={"pp": (2, 4, 8), "dp": (16, 64, 256), "zero": (1, 2)},  # TP x PP >= 16: no two mistakes agree
    ),
    Question(
        id="l14.zero3-traffic",
        lesson="14",
        kind="numeric",
        prompt=("ZeRO-3 (FSDP) under its full-shard policy frees the gathered weights after each layer's forward "
                "and gathers them again for its backward, in each of the {microbatches} micro-batches of a step, "
                "and reduce-scatters each micro-batch's gradients. Now the run also recomputes its activations in "
                "full: before each micro-batch's backward pass it runs the forward pass again, to rebuild the "
                "activations it did not keep, and that forward needs the weights too. How many times more bytes "
                "than plain data parallelism (one all-reduce of the gradients per step) does each GPU send per "
                "step? (Ring collectives, many GPUs.)"),
        params={"microbatches": 12},  # not 6, the printout's: its shard-grad-op line reads 12, this key at 6
        key=lambda microbatches: _zero3_traffic(microbatches),
        unit="dimensionless",
        rtol=0.01,
        hints=("In a ring, an all-reduce is a reduce-scatter followed by an all-gather: it sends twice what one "
               "of them sends.",
               "Count the weight gathers of one micro-batch: one for each pass over the layers that needs the "
               "weights, and the recomputed forward is one of them."),
        misconceptions=(
            Misconception("no-recompute", "That is full-shard without recomputation, the figure printed above. "
                                          "The recomputed forward pass needs the weights as well: a third "
                                          "all-gather in every micro-batch.",
                          answer=lambda microbatches: _zero3_traffic(microbatches, recompute="none")),
            Misconception("forward-only", "You gathered the weights once per micro-batch. Full-shard frees them "
                                          "after every pass over the layers and gathers them again for the next.",
                          answer=lambda microbatches: microbatches),
            Misconception("same-as-dp", "Stages 1 and 2 send what plain data parallelism sends; stage 3 adds "
                                        "the weight gathers, for every micro-batch.", answer=lambda microbatches: 1),
            Misconception("per-step", "That is one micro-batch's traffic. Full-shard gathers the weights (and "
                                      "scatters the gradients) in every micro-batch of the step.",
                          answer=lambda microbatches: _zero3_traffic(1)),
        ),
        variants={"microbatches": (3, 4, 5, 8, 16)},  # not 2: one micro-batch's traffic would be the forward-only slip
    ),
    Question(
        id="l14.zero3-slices",
        lesson="14",
        kind="numeric",
        prompt=("DeepSpeed's ZeRO-3 of 2021 gathered and reduce-scattered each parameter tensor with its own call "
                "to the list forms of PyTorch's all_gather and reduce_scatter, which handle every rank's slice on "
                "its own: a view made in Python and a copy, two operations of about {floor_us:.1f} µs each (the "
                "per-kernel floor of lesson 11). Had Llama 3 70B been trained with it, data parallelism alone on "
                "{gpus:,} A100s with full recomputation, one micro-batch a step: its {tensors:,} parameter tensors "
                "(roofkit.model('llama-3-70b').parameter_tensors()) are {large} of 100,000 elements or more, each "
                "gathered three times a step (forward, recomputed forward, backward) and reduce-scattered once, "
                "and {small} smaller ones that stay gathered, each reduce-scattered once and gathered again after "
                "the optimizer step. How many seconds of each step would go to these slices?"),
        params={"gpus": 2048, **_slices_facts()},  # at 1,024 the key is 18.1 s, a published step printed above
        key=lambda gpus, **_: _slices_s(gpus),
        unit="s",
        rtol=0.005,
        figures=3,
        hints=("Count the calls of a step first: four for each large tensor, two for each small one.",
               "Every call handles one slice per GPU, and every slice costs two operations."),
        misconceptions=(
            Misconception("per-tensor", "That is one slice per call. The list forms handle every rank's slice on "
                                        "its own: multiply by the GPU count.",
                          answer=lambda gpus, **_: _slices_s(gpus, per_rank=False)),
            Misconception("one-op", "Each slice costs two operations, the view and the copy.",
                          answer=lambda gpus, **_: _slices_s(gpus, ops=1)),
            Misconception("two-gathers", "With full recomputation the forward runs twice: the large tensors are "
                                         "gathered three times a step, not two.",
                          answer=lambda gpus, **_: _slices_s(gpus, recompute="none")),
        ),
        variants={"gpus": (512, 4096, 8192)},  # keys 9.05, 72.4, 145 s: none a step the lesson prints before
    ),
    Question(
        id="l14.tp-critical-degree",
        lesson="14",
        kind="numeric",
        prompt=("Tensor parallelism over Y GPUs of one NVLink domain: for B tokens each GPU does 1/Y of the MLP's "
                "matmuls in the forward pass (three for a gated SwiGLU MLP, two for a GELU one: "
                "roofkit.model('{model}').mlp says which), while "
                "4·B·D bytes of BF16 activations are all-gathered and reduce-scattered. At what degree Y* does "
                "the communication take exactly as long as the MLP's matmuls, on '{hw}' (datasheet BF16 peak, "
                "NVLink per direction)? Give Y* itself, not a whole degree."),
        params={"model": "llama-3.1-405b", "hw": "h100"},
        key=lambda model, hw: _tp_degree(model, hw),
        unit="dimensionless",
        rtol=0.01,  # a rounded peak or bandwidth moves it well under 1%
        hints=("A matmul of B x D by D x F is 2·B·D·F FLOPs; a SwiGLU MLP has three of them, a GELU MLP two.",
               "Write T_math = k·2·B·D·F/(Y·P) and T_comm = 4·B·D/β and set them equal: B and D cancel."),
        misconceptions=(
            Misconception("both-directions", "You used NVLink's both-directions figure as β; each GPU sends one "
                                             "way at half of it.", scale=2),
            Misconception("d-model", "You used d_model. The matmuls' FLOPs grow with the MLP width F = d_ff, the "
                                     "activations with D: D cancels, F stays.",
                          answer=lambda model, hw: _tp_degree(model, hw, d_ff=models.get(model).d_model)),
            Misconception("two-matmuls", "You counted 4·B·D·F FLOPs: two matmuls. A SwiGLU MLP has three (gate, up "
                                         "and down), 6·B·D·F: its Y* is 1.5 times higher.",
                          answer=lambda model, hw: _tp_degree(model, hw, gated=False)
                          if models.get(model).gated else None),
        ),
        variants={"model": ("llama-3.1-405b", "gpt-3-175b", "llama-2-13b"), "hw": ("a100-sxm4-80gb", "h100", "b200")},
    ),
    Question(
        id="l14.nvlink-vs-nic",
        lesson="14",
        kind="numeric",
        prompt=("How many times more bandwidth, in one direction, does one '{hw}' GPU have into its NVLink "
                "domain than out through its own '{nic}' network port? Look both up in roofkit's catalog "
                "(roofkit.links.get(...).quoted, with its unit and direction) and compare like with like."),
        params={"hw": "h100", "nic": "ib-ndr"},
        key=lambda hw, nic: _nvlink(hw).bandwidth / links.get(nic).bandwidth,
        unit="dimensionless",
        rtol=0.01,
        hints=("One figure adds the two directions; the other is per direction.",
               "One figure is in bytes per second, the other in bits per second: 8 bits to a byte."),
        misconceptions=(
            Misconception("as-quoted", "You divided the figures as quoted. NVLink's adds both directions and is in "
                                       "bytes; the port's is one direction and in bits.",
                          answer=lambda hw, nic: _nvlink(hw).quoted * links.UNITS[_nvlink(hw).quoted_unit]
                          / (links.get(nic).quoted * 1e9)),
            Misconception("bits", "You halved NVLink's figure but read the port's Gb/s as GB/s: 8 bits to a byte.",
                          answer=lambda hw, nic: _nvlink(hw).bandwidth / (links.get(nic).quoted * 1e9)),
            Misconception("both-directions", "You converted bits to bytes but kept NVLink's both-directions "
                                             "figure; compare one direction with one direction.", scale=2),
        ),
        variants={"hw": ("a100-sxm4-80gb", "h100", "b200", "gb200"), "nic": ("ib-hdr", "ib-ndr")},
    ),
    Question(
        id="l14.microbatches-for-bubble",
        lesson="14",
        kind="numeric",
        prompt=("A pipeline of {stages} stages runs m micro-batches per step (GPipe or 1F1B, not interleaved). "
                "What is the smallest m that keeps the pipeline bubble at or below {fraction_pct}% of the step?"),
        params={"stages": 16, "fraction_pct": 5},
        key=lambda stages, fraction_pct: parallel.microbatches_for_bubble(stages, fraction_pct / 100),
        unit="dimensionless",
        rtol=0,  # one whole number of micro-batches
        hints=("The bubble's share of the step is (p - 1)/(m + p - 1).",
               "Solve (p - 1)/(m + p - 1) <= x for m and round up."),
        misconceptions=(
            Misconception("share-of-compute", "(p - 1)/m is the idle time relative to the compute. The share of "
                                              "the whole step is (p - 1)/(m + p - 1): the step includes the bubble.",
                          answer=lambda stages, fraction_pct: math.ceil((stages - 1) / (fraction_pct / 100))),
            Misconception("p-not-p-minus-1", "The first stage waits for p - 1 others, not p: the bubble is "
                                             "(p - 1)/(m + p - 1).",
                          answer=lambda stages, fraction_pct: math.ceil(stages * (1 - fraction_pct / 100)
                                                                        / (fraction_pct / 100))),
        ),
        variants={"stages": (4, 8, 16, 32), "fraction_pct": (2, 5, 10)},
    ),
    Question(
        id="l14.pipeline-mfu",
        lesson="14",
        kind="numeric",
        prompt=("A layout's matmuls take {compute_s} s per step at the datasheet peak (no recomputation), and its "
                "tensor-parallel all-reduces, which wait inside every micro-batch, add {comm_s} s. It runs "
                "{stages} pipeline stages with {microbatches} micro-batches (1F1B, not interleaved). What MFU does "
                "it reach? (A fraction: 0.5 for 50%.)"),
        params={"compute_s": 3.6, "comm_s": 0.4, "stages": 8, "microbatches": 24},
        key=lambda compute_s, comm_s, stages, microbatches: _pipeline_mfu(compute_s, comm_s, stages, microbatches),
        unit="dimensionless",
        rtol=0.01,
        hints=("At the datasheet peak, MFU is the compute time over the whole step time.",
               "A stage idles for p - 1 of its micro-batch slots, and a slot lasts its compute plus its waiting: "
               "the bubble is (p - 1)/(m + p - 1) of the whole step."),
        misconceptions=(
            Misconception("bubble-ignored", "You left the pipeline bubble out. While the pipeline fills and "
                                            "drains, each stage idles for p - 1 micro-batch slots.",
                          answer=lambda compute_s, comm_s, stages, microbatches: _pipeline_mfu(
                              compute_s, comm_s, stages, microbatches, bubble=0.0)),
            Misconception("bubble-of-compute", "You idled each stage for (p - 1)/m of the compute alone. A slot of "
                                               "the bubble is as long as a busy one, all-reduces included: "
                                               "(p - 1)/m of compute plus communication.",
                          answer=lambda compute_s, comm_s, stages, microbatches: _pipeline_mfu(
                              compute_s, comm_s, stages, microbatches,
                              bubble=parallel.bubble_time(compute_s, stages, microbatches))),
        ),
        # MFUs crowd together: a few combinations, each at least 1% from the lesson's and from its mistakes
        variants={"comm_s": (0.9, 1.4), "stages": (4, 8, 16), "microbatches": (8, 16)},
    ),
    Question(
        id="l14.ex-critical-batch-nodes",
        lesson="14",
        kind="numeric",
        prompt=("Exercise. Data parallelism across {nodes} NVSwitch nodes of '{hw}' GPUs; every GPU has its own "
                "'ib-ndr' port. The all-reduce is hierarchical: reduce-scatter inside each node over NVLink, then "
                "the GPUs of the same rank all-reduce their share of the gradients across the nodes over their "
                "ports (a ring), then all-gather inside the node. The network phase is the slower one. Above how "
                "many tokens per GPU does the backward pass (4 FLOPs per parameter per token, datasheet BF16 "
                "peak) outlast it? Gradients in BF16; leave α out."),
        params={"hw": "b200", "nodes": 128},
        key=lambda hw, nodes: _dp_across_nodes(hw, nodes),
        unit="dimensionless",
        rtol=0.003,  # under the ring's (m-1)/m at 128 nodes (0.8%): leaving it out is the slip asked about
        figures=3,
        hints=("After the reduce-scatter inside the node, each GPU holds 1/k of the gradients (k GPUs a node).",
               "That share crosses the network in a ring over the nodes: 2(m-1)/m of it through one port."),
        misconceptions=(
            Misconception("one-port", "Each GPU sends only its 1/k share over its port: the k ports of a node "
                                      "share the gradients.",
                          answer=lambda hw, nodes: _dp_across_nodes(hw, nodes, per_gpu=True)),
            Misconception("nvlink", "That is the NVLink phase. The network phase, through 50 GB/s ports, is "
                                    "the slower one.",
                          answer=lambda hw, nodes: _dp_critical(hw, _node_gpus(hw))),
            Misconception("bits", "An NDR port's 400 is in Gb/s: 50 GB/s.", scale=1 / 8),
            Misconception("no-ring-factor",
                          "That leaves out the ring's (m-1)/m: over m nodes each port sends 2(m-1)/m of its share, "
                          "not twice all of it. Close to 1 at many nodes, but not 1: keep it.",
                          answer=lambda hw, nodes: _dp_across_nodes(hw, nodes) * nodes / (nodes - 1)),
        ),
        points=2,
        variants={"hw": ("h100", "h200", "b200"), "nodes": (4, 16, 128)},
    ),
    Question(
        id="l14.ex-layout",
        lesson="14",
        kind="choice",
        prompt=("Exercise. Llama 3 70B on {gpus} H100s with a {batch_m}M-token batch (M = 2**20) of 8192-token "
                "sequences, with sequence parallelism. Which layout fits in the GPUs' memory and gives the shortest "
                "step in roofkit's calibrated estimate (parallel.plan(..., sequence_parallel=True, "
                "calibrated=True))? A: TP 8 with plain data parallelism; B: TP 8, data parallelism with ZeRO-3 "
                "(full-shard); C: TP 8, PP 4, data parallelism with ZeRO-1; D: TP 2, PP 4, data parallelism with "
                "ZeRO-1. (Data parallelism takes the rest of the GPUs; micro-batches of one sequence.)"),
        params={"gpus": 2048, "batch_m": 8},
        key=_best_layout,
        choices=tuple(LAYOUTS),
        hints=("Check memory first: weights, gradients, optimizer states and activations per GPU against what the "
               "card reports.",
               "Among those that fit, compare compute, exposed communication and bubble."),
        misconceptions=(
            Misconception("ignored-memory", "That layout is fast but it does not fit: add up what each GPU holds.",
                          answer=_unless_key(lambda gpus, batch_m: _best_layout(gpus, batch_m, fits_only=False))),
            Misconception("least-memory", "That layout holds the least, but saving memory is not the goal once it "
                                          "fits: its traffic costs time.", answer=_unless_key(_least_memory)),
            *(Misconception("does-not-fit", "That layout does not fit: with its TP and PP split and its ZeRO "
                                            "stage, each GPU would hold more than its memory (weights, gradients, "
                                            "optimizer states and activations). Check memory first.",
                            answer=_other_layout(letter, fits=False)) for letter in LAYOUTS),
            *(Misconception("fits-but-slower", "That layout fits, but another one that fits has a shorter step: "
                                               "compare compute, exposed communication and bubble.",
                            answer=_other_layout(letter, fits=True)) for letter in LAYOUTS),
        ),
        points=2,
        variants={"gpus": (512, 1024, 2048), "batch_m": (2, 4, 8)},
    ),
    Question(
        id="l14.ex-fit-beta",
        lesson="14",
        kind="numeric",
        prompt=("Exercise. Between two GPUs in different nodes, a message of {small_bytes} bytes takes "
                "{small_us} µs and one of {large_bytes} bytes takes {large_us} µs (each the best of many runs). Fit "
                "the α-β model T = α + S/β through these two points. What is β? Give a unit, e.g. GB/s."),
        params={"small_bytes": 8, "small_us": 4.0, "large_bytes": 2**20, "large_us": 25.0},
        key=_fit_beta,
        unit="byte/s",
        rtol=0.02,
        figures=3,
        hints=("Two equations, two unknowns: subtract one from the other and α drops out.",
               "β is the difference in size over the difference in time."),
        misconceptions=(
            Misconception("ignored-alpha", "That is S/T of the large message: its time includes α. Take the "
                                           "difference of the two points, so that α drops out.",
                          answer=lambda small_bytes, small_us, large_bytes, large_us: large_bytes / (large_us * 1e-6)),
        ),
        points=2,
        variants={"small_us": (3.0, 4.0, 6.0), "large_us": (25.0, 32.0, 50.0), "large_bytes": (2**20, 2**21)},
    ),
Question(
        id="l14.nccl-share",
        lesson="14",
        kind="numeric",
        prompt=("nccl-tests' all_reduce_perf with NVLink SHARP (NCCL_ALGO=NVLS) on the {gpus} GPUs of one "
                "'{link}' node reaches a bus bandwidth (busbw) of {busbw} GB/s on large buffers. What share of "
                "NVLS's own bound is that: the busbw an NVLS all-reduce would print at the line rate of one GPU's "
                "NVLink in one direction (roofkit.links.get('{link}').bandwidth), latency left out? (A fraction: "
                "0.5 for 50%.)"),
        params={"busbw": 480, "gpus": 8, "link": "hgx-h100"},
        key=lambda busbw, gpus, link: busbw * 1e9 / _nvls_bound_busbw(link, gpus),
        unit="dimensionless",
        rtol=0.01,
        hints=("NVLS's bound is the question before this one: each GPU sends its buffer once, at the line rate.",
               "nccl-tests multiplies the algorithm bandwidth by 2(n-1)/n for every all-reduce, NVLS included: "
               "compare busbw with busbw."),
        misconceptions=(
            Misconception("line-rate", "You compared NVLS's busbw with the line rate, as for a ring. nccl-tests "
                                       "multiplies every all-reduce's algbw by 2(n-1)/n; NVLS sends each buffer "
                                       "once, so at the line rate its busbw would be 2(n-1)/n times the line rate.",
                          answer=lambda busbw, gpus, link: busbw * 1e9 / links.get(link).bandwidth),
            Misconception("both-directions", "You used NVLink's both-directions figure; each GPU sends one way, at "
                                             "half of it.", scale=0.5),
            Misconception("over-the-ring", "That is NVLS over the ring's measured busbw: how much NVLS gains on the "
                                           "ring, not how close it comes to its own bound.",
                          answer=lambda busbw, gpus, link: busbw * 1e9 / nccl.effective_bandwidth(links.get(link),
                                                                                                  gpus)),
        ),
        variants={"busbw": (440, 460, 500, 520)},
    ),
    Question(
        id="l14.nvls-bound-busbw",
        lesson="14",
        kind="numeric",
        prompt=("With NVLink SHARP (NCCL's NVLS algorithm) the NVSwitch adds the buffers itself: in an all-reduce "
                "each of the {gpus} GPUs of '{link}' sends its S bytes once and receives the sum once, instead of "
                "sending 2(n-1)/n·S around a ring. At the link's line rate per direction (roofkit.links.get('{link}')"
                ".bandwidth) and leaving latency out, what bus bandwidth would nccl-tests print, at best? (busbw "
                "= algbw x 2(n-1)/n, whatever the algorithm.) Give a unit, e.g. GB/s."),
        params={"gpus": 8, "link": "hgx-h100"},
        key=lambda gpus, link: _nvls_bound_busbw(link, gpus),
        unit="byte/s",
        rtol=0.02,
        figures=3,
        hints=("First the algorithm bandwidth: S over the time it takes each GPU to send S bytes.",
               "Then scale by nccl-tests' bus factor of an all-reduce."),
        misconceptions=(
            Misconception("ring", "That is the line rate itself: what a ring's busbw reaches, or NVLS's algbw. "
                                  "nccl-tests multiplies the algbw by 2(n-1)/n for every all-reduce algorithm.",
                          answer=lambda gpus, link: links.get(link).bandwidth),
            Misconception("both-directions", "You used the both-directions figure as the rate each GPU sends at.",
                          scale=2),
        ),
        variants={"gpus": (4, 8), "link": ("hgx-h100", "hgx-b200")},
    ),
    Question(
        id="l14.nccl-auto-algorithm",
        lesson="14",
        kind="choice",
        prompt=("NCCL's tuner estimates T = latency + S / bandwidth for every algorithm and protocol and runs the "
                "fastest. In roofkit's calibrated model of it (NCCL's latencies, nccl-tests' bandwidths: "
                "comms.collective(..., algorithm='auto', calibrated=True)), which algorithm runs an all-reduce of "
                "{size_mb} MB on the {gpus} GPUs of '{link}': ring, tree or nvls?"),
        params={"size_mb": 8000, "gpus": 8, "link": "hgx-h100"},
        key=_auto_algorithm,
        choices=("ring", "tree", "nvls"),
        hints=("Small messages are latency-bound: the fewest steps win. Large ones are bandwidth-bound.",
               "NVLS needs an NVSwitch that reduces (Hopper and later) and has a high latency of its own."),
        misconceptions=(
            Misconception("always-ring", "NCCL does not always run a ring: it picks ring, tree, NVLS, CollNet or "
                                         "PAT by size and topology.",
                          answer=lambda **p: None if _auto_algorithm(**p) == "ring" else "ring"),
            Misconception("tree-for-bandwidth", "A tree takes about log2(n) steps instead of the ring's 2(n-1), so "
                                                "it wins where the latency term dominates: few bytes, many GPUs. "
                                                "Compare the latency and the bandwidth terms at this size.",
                          answer=lambda **p: None if _auto_algorithm(**p) == "tree" else "tree"),
            Misconception("nvls-anywhere", "NVLS needs NVSwitches that reduce in the switch (Hopper-generation "
                                           "NVLink and later; not the A100's), and its latency is higher than a "
                                           "ring's: it wins on large messages where it is available.",
                          answer=lambda **p: None if _auto_algorithm(**p) == "nvls" else "nvls"),
        ),
        variants={"size_mb": (0.001, 8000), "gpus": (8,), "link": ("hgx-a100", "hgx-h100")},
    ),
    Question(
        id="l14.fat-tree-leaves",
        lesson="14",
        kind="numeric",
        prompt=("A scalable unit of {nodes} HGX nodes: every GPU (8 a node) has its own port to a leaf switch. "
                "Each leaf switch has {ports} ports of the same speed. For full bisection bandwidth (no "
                "oversubscription: as many ports up to the spine as down to the nodes), how many leaf switches "
                "does the unit need?"),
        params={"nodes": 32, "ports": 64},
        key=lambda nodes, ports: _leaf_switches(nodes, ports),
        unit="dimensionless",
        rtol=0,  # a whole number of switches
        hints=("Count the ports coming up from the nodes.",
               "A non-blocking leaf uses half of its ports toward the nodes and half toward the spine."),
        misconceptions=(
            Misconception("all-ports-down", "That uses every port of a leaf toward the nodes: nothing is left "
                                            "for the spine, a 'leaf' that connects to nothing above.",
                          answer=lambda nodes, ports: _leaf_switches(nodes, ports, down_share=1.0)),
            Misconception("one-port-per-node", "Every GPU has its own port, not every node: 8 ports a node.",
                          answer=lambda nodes, ports: _leaf_switches(nodes, ports, gpus_per_node=1)),
        ),
        variants={"nodes": (16, 32, 48, 64), "ports": (64,)},
    ),
    Question(
        id="l14.dp-bytes-model-parallel",
        lesson="14",
        kind="numeric",
        prompt=("Llama 3 70B (roofkit.model('llama-3-70b').params) is split {tp}-way by tensor parallelism and "
                "{pp}-way by pipeline parallelism, and trained by {dp} data-parallel replicas. In the ring "
                "all-reduce of its BF16 gradients, how many bytes does each GPU send per step?"),
        params={"tp": 8, "pp": 4, "dp": 32},
        key=lambda tp, pp, dp: _dp_bytes("llama-3-70b", tp, pp, dp),
        unit="byte",
        rtol=0.02,
        hints=("Each GPU holds, and so reduces, the gradients of its own share of the model only.",
               "A ring all-reduce sends 2(n - 1)/n times the buffer, n the data-parallel replicas."),
        misconceptions=(
            Misconception("whole-model", "Each GPU all-reduces the gradients it holds: 1/(TP·PP) of the model, "
                                         "not all of it. That is how model parallelism cuts data-parallel traffic.",
                          answer=lambda tp, pp, dp: _dp_bytes("llama-3-70b", tp, pp, dp, split=False)),
            Misconception("no-ring-factor", "You sent the buffer once; a ring all-reduce sends 2(n-1)/n of it.",
                          answer=lambda tp, pp, dp: _dp_bytes("llama-3-70b", tp, pp, dp, ring=False)),
        ),
        variants={"tp": (4, 8), "pp": (1, 4, 16), "dp": (4, 32)},
    ),
    Question(
        id="l14.a2a-time",
        lesson="14",
        kind="numeric",
        prompt=("A mixture-of-experts layer routes each of the {tokens} tokens on every GPU to {top_k} experts, "
                "spread over the {gpus} GPUs of one '{link}' node. Dispatching them is an all-to-all in which each "
                "GPU's send buffer holds tokens x top_k x d_model BF16 values (d_model = {d_model}). With the "
                "α-β model, (n - 1)·α + (n - 1)/n·S/β (the link's α and its bandwidth per direction), how long "
                "does one dispatch take? Answer in µs."),
        params={"tokens": 8192, "top_k": 8, "d_model": 7168, "gpus": 8, "link": "hgx-h100"},
        key=lambda tokens, top_k, d_model, gpus, link: _a2a_us(tokens, top_k, d_model, gpus, link),
        unit="µs",
        rtol=0.02,
        hints=("S = tokens x top_k x d_model x 2 bytes: each token goes to top_k experts.",
               "The GPU keeps 1/n of its buffer (its own experts) and sends the rest."),
        misconceptions=(
            Misconception("no-top-k", "Each token is sent to top_k experts: the buffer is top_k times the tokens' "
                                      "activations.",
                          answer=lambda tokens, top_k, d_model, gpus, link: _a2a_us(tokens, 1, d_model, gpus, link)),
            Misconception("both-directions",
                          "That halves the data's time. Two slips do that: β taken as the link's both-directions "
                          "figure (use one direction's), or one byte per value (BF16 takes 2). Check both.",
                          answer=lambda tokens, top_k, d_model, gpus, link: _a2a_us(tokens, top_k, d_model, gpus,
                                                                                    link, both=True)),
        ),
        variants={"tokens": (4096, 8192), "top_k": (4, 6, 8), "link": ("hgx-a100", "hgx-h100", "hgx-b200")},
    ),
    Question(
        id="l14.tokens-per-gpu",
        lesson="14",
        kind="numeric",
        prompt=("Llama 3 405B's Table 4 keeps the batch at {batch_m}M tokens (M = 2**20) whether the run uses "
                "8,192 or {gpus} GPUs. How many tokens does each GPU get per step at {gpus} GPUs?"),
        params={"batch_m": 16, "gpus": 16384},
        key=lambda batch_m, gpus: batch_m * 2**20 / gpus,
        unit="dimensionless",
        rtol=0,  # powers of two: a whole number of tokens
        hints=("Tokens per GPU is the batch over the GPUs.",),
        misconceptions=(
            Misconception("batch-grew", "The batch did not grow with the GPUs: Table 4 has 16M tokens at both "
                                        "8K and 16K GPUs, so each GPU's share halves.",
                          answer=_unless(lambda batch_m, gpus: batch_m * 2**20 / gpus,
                                         lambda batch_m, gpus: batch_m * 2**20 / 8192)),
            Misconception("decimal-m", "M here is 2**20, not 10**6.",
                          answer=lambda batch_m, gpus: batch_m * 1e6 / gpus),
        ),
        variants={"batch_m": (4, 16), "gpus": (8192, 16384)},
    ),
    Question(
        id="l14.fp8-speedup",
        lesson="14",
        kind="numeric",
        prompt=("Llama 3 8B ('{model}') trains on {gpus} '{hw}' GPUs by data parallelism with ZeRO-1, {sequences} "
                "sequences of {seq} tokens a step. Switch it from BF16 to Transformer Engine's default FP8 recipe "
                "(parallel.plan(..., recipe='fp8') against recipe='bf16'). By what factor does roofkit's bound say "
                "the step gets faster (the BF16 step over the FP8 step)?"),
        params={"model": "llama-3-8b", "hw": "h100", "gpus": 8, "sequences": 32, "seq": 8192},
        key=_fp8_speedup,
        unit="dimensionless",
        rtol=0.01,
        figures=3,
        hints=("Only the linear layers' GEMMs run in FP8: attention, norms, activations and the output layer keep "
               "their BF16 time.",
               "Plan the same layout twice, once per recipe, and divide the step times."),
        misconceptions=(
            Misconception("peak-ratio", "That is the FP8 peak over the BF16 one. Only the linear layers' GEMMs run "
                                        "at FP8's rate; attention, norms, activations and the output layer keep "
                                        "their BF16 time, so the step gains less (Amdahl's law).",
                          answer=lambda hw, **p: hardware.get(hw).peak("fp8") / hardware.get(hw).peak("bf16")),
            Misconception("mfu-ratio", "That compares the two MFUs, each counted against its own precision's peak: "
                                       "the FP8 one against a peak twice as high. Compare the step times.",
                          answer=_fp8_mfu_ratio),
            Misconception("inverted", "That is the FP8 step over the BF16 one, a time ratio below 1; the speed-up is "
                                      "the BF16 step over the FP8 step.",
                          answer=lambda **p: 1 / _fp8_speedup(**p)),
        ),
        variants={"seq": (2048, 4096, 8192, 16384)},
    ),
    Question(
        id="l14.nodes-per-token",
        lesson="14",
        kind="numeric",
        prompt=("A mixture-of-experts layer has {experts_total} routed experts, spread evenly over the {nodes} nodes "
                "of its expert-parallel group, and routes each token to k = {k} of them. The router may use at "
                "most M = {limit} of the nodes (M = {nodes}: no limit): it picks M nodes, then the k experts among "
                "theirs. If the k experts are drawn uniformly among the allowed nodes' experts, without repeats, "
                "how many distinct nodes does a token reach, on average?"),
        params={"k": 8, "experts_total": 256, "nodes": 8, "limit": 8},
        key=_nodes_reached,
        unit="dimensionless",
        rtol=0.01,  # drawing with repeats, M (1 - (1 - 1/M)^k), lands within 1%: accepted
        hints=("A node is missed when all k experts come from the other allowed nodes' experts.",
               "Add, over the M nodes, the chance that at least one of the k experts falls in that node (the "
               "draws are without replacement)."),
        misconceptions=(
            Misconception("one-node-per-expert", "That gives each of the k experts a node of its own. A node holds "
                                                 "many experts, and two of a token's often share one: count the "
                                                 "distinct nodes, the chance that each is hit.",
                          answer=_not_near(_nodes_reached, lambda k, experts_total, nodes, limit: float(k))),
            Misconception("the-cap", "That is the cap, the most nodes a token may reach. Its k experts can fall on "
                                     "fewer: count the chance that each allowed node is hit.",
                          answer=_not_near(_nodes_reached,
                                           lambda k, experts_total, nodes, limit: None if limit == k else float(limit))),
            Misconception("experts-per-node", "That is how many of a token's experts a node holds on average, k/M, "
                                              "not how many nodes they fall on.",
                          answer=_not_near(_nodes_reached, lambda k, experts_total, nodes, limit:
                                           None if k / limit in (limit, k) else k / limit)),
        ),
        variants={"k": (4, 6, 8), "limit": (2, 4, 8)},
    ),
)
