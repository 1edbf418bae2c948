"""Lesson 15, a frontier run: DeepSeek-V3 as its report lays it out (arXiv:2412.19437), carried through roofkit.

Every key is a computation through :mod:`roofkit.training`, :mod:`roofkit.perf.recipe`,
:mod:`roofkit.steptime`, :mod:`roofkit.parallel` (its ``experts`` module) and
:mod:`roofkit.routing` over the question's parameters, so a variant may change
the model, the accelerator, the GPU-hours, the batch or the routing limits. The
report's own figures these keys are checked against (6 x 37B x 14.8T, 180K
GPU-hours per trillion tokens, 15,360 sequences of 4,096 tokens) are in
tests/test_lesson_15.py.
"""

from __future__ import annotations

import math

from ... import routing
from ...catalogs import hardware, links, models
from ...perf import parallel, steptime, training
from ...perf import recipe as recipes
from ...perf.parallel import experts
from ..quiz import Misconception, Question, register

_TRILLION = 1e12
_HOUR = 3600


def _unless(wrong, key):
    """A wrong value as a misconception, unless a variant's numbers make it the key (within 2%)."""
    def value(**p):
        w = wrong(**p)
        return None if w is None or math.isclose(w, key(**p), rel_tol=0.02) else w
    return value


# --- section 1: the model and the run ------------------------------------------------------------------------


def _compute(model, tokens_t, total=False):
    M = models.get(model)
    return training.training_flops(M.params if total else M.active_params, tokens_t * _TRILLION)


def _tokens_per_gpu_s(gpu_hours_k):
    """Tokens per second per GPU that gpu_hours_k thousand GPU-hours per trillion tokens imply."""
    return _TRILLION / (gpu_hours_k * 1e3 * _HOUR)


def _step_s(sequences, seq, gpus, gpu_hours_k):
    return sequences * seq / (_tokens_per_gpu_s(gpu_hours_k) * gpus)


def _implied_mfu(model, gpu_hours_k, hw, dtype, total=False, peak_dtype=None):
    M = models.get(model)
    N = M.params if total else M.active_params
    return training.implied_mfu(N, _TRILLION, gpu_hours_k * 1e3, hardware.get(hw).peak(peak_dtype or dtype))


def _other_peak(dtype):
    return "bf16" if dtype == "fp8" else "fp8"


# --- section 2: FP8 per operation ----------------------------------------------------------------------------

# the choices of l15.fp8-where, each with the recipe field that says its precision
FP8_CHOICES = {"router": "router", "attention": "attention", "dgrad": "dgrad", "output head": "head",
               "master weights": "master_dtype"}


def _runs_in_fp8(recipe):
    rec = recipes.get(recipe)
    hits = [choice for choice, field in FP8_CHOICES.items() if getattr(rec, field) == "fp8"]
    return hits[0] if len(hits) == 1 else None


def _layer_forward_s(model, hw, seq, ep, rec):
    ks = steptime.layer_kernels(model, 1, seq, ep=ep, moe=True, recipe=rec)
    return steptime.kernels_time(ks, steptime.roofs(hw, recipe=rec))


def _fp8_speedup(model, hw, seq, ep, recipe):
    return _layer_forward_s(model, hw, seq, ep, "bf16") / _layer_forward_s(model, hw, seq, ep, recipe)


def _peak_ratio(hw, **_):
    acc = hardware.get(hw)
    return acc.peak("fp8") / acc.peak("bf16")


# --- section 3: expert dispatch ------------------------------------------------------------------------------


def _ib_bytes(model, ep, max_nodes, dtype, gpus_per_node=8, dispatcher="deepep", own_node=True, copies=None):
    """Bytes one token's dispatch sends over the network: copies x d_model x bytes per element."""
    M = models.get(model)
    c = experts.copies(M.experts_per_token, M.experts, ep, gpus_per_node, max_nodes, dispatcher=dispatcher)
    n = c["network"] if copies is None else copies
    if not own_node:  # every node reached counted, the token's own one too
        nodes = ep // gpus_per_node
        n = n * nodes / (nodes - 1)
    return n * M.d_model * experts.bytes_per_element(dtype)


def _ib_all_copies(model, ep, max_nodes, dtype):
    return _ib_bytes(model, ep, max_nodes, dtype, copies=models.get(model).experts_per_token)


def _ib_cap_copies(model, ep, max_nodes, dtype):
    return _ib_bytes(model, ep, max_nodes, dtype, copies=max_nodes)


def _ib_other_dtype(model, ep, max_nodes, dtype):
    return _ib_bytes(model, ep, max_nodes, "bf16" if dtype == "fp8" else "fp8")


def _dispatch_ms(model, ep, max_nodes, dtype, tokens, nic, link=None, copies=None):
    """Milliseconds one GPU's dispatch of ``tokens`` tokens takes at ``nic``'s line rate (``link``: another's)."""
    n = models.get(model).experts_per_token if copies == "k" else None
    size = tokens * _ib_bytes(model, ep, max_nodes, dtype, copies=n)
    return size / links.get(link or nic).bandwidth * 1e3


# --- section 4: the step ---------------------------------------------------------------------------------------

# DeepSeek-V3's layout (report, sections 3.1, 3.2, 3.3, 2.1.2): the lesson's parallel.plan(...) call
LAYOUT = dict(tp=1, pp=16, ep=64, etp=1, zero=1, recipe="fp8-blockwise", max_nodes_per_token=4,
              dispatch_dtype="fp8", dispatcher="deepep")


def deepseek_plan(sequences=15360, calibrated=False, hw="h800", gpus=2048, seq=4096):
    """DeepSeek-V3 on 2,048 H800s as the report lays it out, at a batch of ``sequences`` of ``seq`` tokens."""
    return parallel.plan("deepseek-v3", hw, gpus, sequences * seq, seq, **LAYOUT, calibrated=calibrated)


def _hidden_step(sequences, hide_bubble=True):
    """The estimate's step with its all-to-alls hidden: their exposed time goes, and so does the share of the
    bubble they stretched (a slot of the bubble lasts as long as a busy slot, waits included)."""
    p = deepseek_plan(sequences, calibrated=True)
    waits = p.communication["ep"]["exposed_s"]
    stretched = parallel.bubble_time(waits, p.pp, p.microbatches, p.virtual_stages) if hide_bubble else 0.0
    return p.step_time_s - waits - stretched


def _step_without_comm(sequences):
    p = deepseek_plan(sequences, calibrated=True)
    return p.compute_s + p.optimizer_s


# --- section 5: serving ---------------------------------------------------------------------------------------


def _experts_read(model, batch):
    M = models.get(model)
    return routing.experts_touched(batch, M.experts, M.experts_per_token)


# --- exercises -----------------------------------------------------------------------------------------------


def qwen_plan(gpus=256, sequences=2048, tp=2, pp=8, ep=32, rec="fp8"):
    """Exercise 1's layout: Qwen3-235B-A22B on H100s, the bound."""
    return parallel.plan("qwen3-235b-a22b", "h100", gpus, sequences * 4096, 4096, tp=tp, pp=pp, ep=ep, etp=1,
                         zero=1, sequence_parallel=True, recipe=rec)


def _qwen_throughput(gpus, sequences, tp, pp, ep, rec, per_gpu=True):
    p = qwen_plan(gpus, sequences, tp, pp, ep, rec)
    return p.tokens_per_s / (p.gpus if per_gpu else 1)


def _bubble(sequences, gpus, pp):
    return parallel.bubble_fraction(pp, sequences // (gpus // pp))


register(
    Question(
        id="l15.train-compute",
        lesson="15",
        kind="numeric",
        prompt=("{model} was pre-trained on {tokens_t} trillion tokens. With C = 6ND, how many FLOPs did its "
                "pre-training take? Its parameter counts: roofkit.model('{model}').params (all of them) and "
                ".active_params (those one token is multiplied by). Give a unit, e.g. FLOP."),
        params={"model": "deepseek-v3", "tokens_t": 14.8},
        key=_compute,
        unit="FLOP",
        hints=("6 FLOPs per parameter per token: 2 in the forward pass, 4 in the backward pass. Which parameters "
               "does one token go through?",
               "A token reaches the shared parts and 8 of the 256 routed experts of each layer, not all of them."),
        misconceptions=(
            Misconception("total-params", "That counts all the parameters. A token is multiplied only by the "
                                          "experts it is routed to: in C = 6ND, N is the activated parameters.",
                          answer=lambda model, tokens_t: _compute(model, tokens_t, total=True)),
            Misconception("forward-only", "2ND is the forward pass only. Training also runs the backward pass, "
                                          "twice the forward: 6ND.", scale=1 / 3),
        ),
        variants={"model": ("deepseek-v3", "deepseek-v2", "qwen3-235b-a22b"), "tokens_t": (8.1, 14.8, 36)},
    ),
    Question(
        id="l15.tokens-per-gpu",
        lesson="15",
        kind="numeric",
        prompt=("Pre-training took {gpu_hours_k}K GPU-hours per trillion tokens on a cluster of {gpus:,} GPUs. "
                "How many tokens per second did one GPU process, on average? Give a unit, e.g. tokens/s."),
        params={"gpu_hours_k": 180, "gpus": 2048},
        key=lambda gpu_hours_k, gpus: _tokens_per_gpu_s(gpu_hours_k),
        unit="tokens/s",
        hints=("A GPU-hour is one GPU busy for one hour: 3,600 GPU-seconds.",
               "Divide the tokens by the GPU-seconds. The cluster's size is already inside the GPU-hours."),
        misconceptions=(
            Misconception("per-hour", "That is tokens per GPU-hour. An hour is 3,600 seconds: divide by it.",
                          answer=lambda gpu_hours_k, gpus: _tokens_per_gpu_s(gpu_hours_k) * _HOUR),
            Misconception("divided-by-gpus", "GPU-hours already count every GPU: dividing the tokens by the "
                                             "GPU-seconds gives one GPU's rate. Dividing by the GPUs again "
                                             "counts them twice.",
                          answer=lambda gpu_hours_k, gpus: _tokens_per_gpu_s(gpu_hours_k) / gpus),
            Misconception("whole-cluster", "That is the whole cluster's rate. The question asks for one GPU's.",
                          answer=lambda gpu_hours_k, gpus: _tokens_per_gpu_s(gpu_hours_k) * gpus),
        ),
        variants={"gpu_hours_k": (150, 180, 250, 400), "gpus": (1024, 2048)},
    ),
    Question(
        id="l15.step-time",
        lesson="15",
        kind="numeric",
        prompt=("At {gpu_hours_k}K GPU-hours per trillion tokens on {gpus:,} GPUs, how long does one step of "
                "{sequences:,} sequences of {seq:,} tokens take? Give a unit, e.g. s."),
        params={"gpu_hours_k": 180, "gpus": 2048, "sequences": 15360, "seq": 4096},
        key=_step_s,
        unit="s",
        hints=("First the tokens per second of one GPU, then of the whole cluster.",
               "A step's tokens are sequences x tokens per sequence."),
        misconceptions=(
            Misconception("one-gpu", "That is the step on one GPU. The cluster's GPUs share the batch: divide by "
                                     "their number.", answer=lambda gpus, **p: _step_s(gpus=gpus, **p) * gpus),
            Misconception("sequences-as-tokens", "You counted sequences as tokens. Each sequence holds its "
                                                 "tokens: multiply by its length.",
                          answer=lambda seq, **p: _step_s(seq=seq, **p) / seq),
        ),
        variants={"sequences": (3072, 7680, 15360), "gpu_hours_k": (150, 180, 250)},
    ),
    Question(
        id="l15.mfu-peak",
        lesson="15",
        kind="numeric",
        prompt=("At {gpu_hours_k}K {hw} GPU-hours per trillion tokens, and 6N FLOPs per token with N the activated "
                "parameters of '{model}', what MFU did the run reach against the {hw}'s dense {dtype} peak "
                "(roofkit.hw('{hw}').peak('{dtype}'))? Answer as a fraction (0.45 for 45%)."),
        params={"model": "deepseek-v3", "gpu_hours_k": 180, "hw": "h800", "dtype": "fp8"},
        key=_implied_mfu,
        unit="dimensionless",
        hints=("MFU = the model's FLOP/s over the peak FLOP/s of the same GPUs.",
               "One GPU's model FLOP/s is 6N times its tokens per second."),
        misconceptions=(
            Misconception("other-peak", "That is against the other precision's peak. The question asks against "
                                        "the peak it names: MFU means nothing until its peak is said.",
                          answer=lambda dtype, **p: _implied_mfu(dtype=dtype, peak_dtype=_other_peak(dtype), **p)),
            Misconception("total-params", "That counts all the parameters as model FLOPs. A token is multiplied "
                                          "by its activated parameters only.",
                          answer=lambda **p: _implied_mfu(total=True, **p)),
            Misconception("sparse-peak", "That divides by the sparse peak (2:4 sparsity), twice the dense one. "
                                         "Training's matrices are dense: use the dense peak.", scale=0.5),
            Misconception("percent", "Give the MFU as a fraction: 0.45 for 45%.", scale=100),
        ),
        variants={"gpu_hours_k": (150, 180, 250), "hw": ("h800", "h100", "h200"), "dtype": ("fp8", "bf16")},
    ),
    Question(
        id="l15.fp8-where",
        lesson="15",
        kind="choice",
        prompt=("In DeepSeek-V3's FP8 training (roofkit's recipe '{recipe}'), which of these runs in FP8: the "
                "router (MoE gating), attention, dgrad (the linear layers' input gradients), the output head, "
                "or the master weights?"),
        params={"recipe": "fp8-blockwise"},
        key=_runs_in_fp8,
        choices=tuple(FP8_CHOICES),
        synonyms={"router": ("gating", "moe gating", "the gate"), "attention": ("attention core",),
                  "dgrad": ("input gradients", "the input gradient"), "output head": ("head", "lm head"),
                  "master weights": ("master copy", "optimizer")},
        hints=("FP8 runs the GEMMs that hold most of the FLOPs and tolerate its rounding.",
               "A linear layer runs three GEMMs: its forward, the gradient of its input, the gradient of its "
               "weight."),
        misconceptions=(
            Misconception("router-fp8", "The router stays in BF16 (section 3.3.1): it is a small GEMM, and its "
                                        "scores decide where every token goes.",
                          answer=lambda recipe: None if _runs_in_fp8(recipe) == "router" else "router"),
            Misconception("attention-fp8", "Attention stays in BF16 in DeepSeek-V3 (section 3.3.1), with the other "
                                           "operators the report keeps in their original precision for stable "
                                           "training.",
                          answer=lambda recipe: None if _runs_in_fp8(recipe) == "attention" else "attention"),
            Misconception("head-fp8", "The output head stays in BF16 (section 3.3.1), as the embedding does: the "
                                      "logits feed the loss directly.",
                          answer=lambda recipe: None if _runs_in_fp8(recipe) == "output head" else "output head"),
            Misconception("master-fp8", "Master weights stay in FP32 (section 3.3.3): small updates would vanish "
                                        "when added to a low-precision copy (lesson 06's swamping).",
                          answer=lambda recipe: None if _runs_in_fp8(recipe) == "master weights"
                          else "master weights"),
        ),
    ),
    Question(
        id="l15.fp8-layer-speedup",
        lesson="15",
        kind="numeric",
        prompt=("One {model} MoE layer's forward pass, one sequence of {seq:,} tokens, on one {hw} (experts "
                "spread over ep = {ep} GPUs). In the bound (datasheet roofs: steptime.layer_kernels(..., "
                "recipe=...) timed by steptime.kernels_time with steptime.roofs(hw, recipe=...)), how many times "
                "faster is it with the recipe '{recipe}' than all in BF16 ('bf16')?"),
        params={"model": "deepseek-v3", "hw": "h800", "seq": 4096, "ep": 64, "recipe": "fp8-blockwise"},
        key=_fp8_speedup,
        unit="x",
        hints=("FP8 speeds up only the kernels that run in it; the rest keeps its time.",
               "Amdahl's law: if a share p of the time runs s times faster, the whole runs 1 / ((1 - p) + p/s) "
               "times faster."),
        misconceptions=(
            Misconception("fp8-doubles", "The FP8 peak is twice the BF16 one, but only the linear layers' GEMMs "
                                         "run in FP8. Attention, norms, the router and activations keep their "
                                         "time: Amdahl's law.", answer=_peak_ratio),
            Misconception("no-speedup", "The layer's GEMMs run on tensor cores at FP8's rate: most of its time "
                                        "gets faster.", answer=lambda **p: 1.0),
        ),
        variants={"model": ("deepseek-v3", "qwen3-235b-a22b"), "hw": ("h800", "h200"), "seq": (1024, 4096, 16384)},
    ),
    Question(
        id="l15.dispatch-ib-bytes",
        lesson="15",
        kind="numeric",
        prompt=("{model} with its experts over ep = {ep} GPUs, 8 per node, each token limited to {max_nodes} "
                "nodes. A token is dispatched once to each other node its experts are on (over InfiniBand, to the "
                "GPU with its own in-node index there), in {dtype} ({dtype} activations: "
                "parallel.experts.bytes_per_element('{dtype}') bytes per element). With uniform routing among the "
                "allowed experts, how many bytes does one token's dispatch send over InfiniBand, on average? "
                "Give a unit, e.g. kB."),
        params={"model": "deepseek-v3", "ep": 64, "max_nodes": 4, "dtype": "fp8"},
        key=_ib_bytes,
        unit="byte",
        hints=("Count the nodes the token's experts land on, then leave out its own node: reaching it costs no "
               "InfiniBand.",
               "Its own node is one of the nodes alike: it is among the nodes reached with the same chance as "
               "any other. Each copy is one token's activations, d_model elements."),
        misconceptions=(
            Misconception("every-copy", "That sends a copy for every expert. With node-limited routing a token "
                                        "crosses InfiniBand once per node, and is forwarded over NVLink inside it.",
                          answer=_unless(_ib_all_copies, _ib_bytes)),
            Misconception("nccl-all-to-all", "That is NCCL's all-to-all, a row per token and expert. DeepSeek's "
                                             "dispatch sends a token once to each node.",
                          answer=_unless(lambda **p: _ib_bytes(dispatcher="alltoall", **p), _ib_bytes)),
            Misconception("the-cap", "The cap is an upper limit: on average a token's experts land on fewer "
                                     "nodes, and one of them is often its own.", answer=_unless(_ib_cap_copies, _ib_bytes)),
            Misconception("own-node", "The token's own node may hold some of its experts: reaching them crosses "
                                      "no InfiniBand. Count only the other nodes.",
                          answer=_unless(lambda **p: _ib_bytes(own_node=False, **p), _ib_bytes)),
            Misconception("other-precision", "That is in the other precision: DeepSeek dispatches in FP8, one "
                                             "byte per value (plus a scale per 128), and combines in BF16, two.",
                          answer=_unless(_ib_other_dtype, _ib_bytes)),
        ),
        variants={"max_nodes": (2, 3, 4), "dtype": ("fp8", "bf16")},
    ),
    Question(
        id="l15.dispatch-time",
        lesson="15",
        kind="numeric",
        prompt=("Each GPU dispatches its own {tokens:,} tokens of a micro-batch, each sending over InfiniBand the "
                "bytes of the previous question on average ({model}, ep = {ep}, at most {max_nodes} nodes, "
                "{dtype}). At the line rate of its NIC, '{nic}' in roofkit's link catalog, how long does one "
                "dispatch take on the wire? Give a unit, e.g. ms."),
        params={"model": "deepseek-v3", "ep": 64, "max_nodes": 4, "dtype": "fp8", "tokens": 4096, "nic": "ib-ndr"},
        key=_dispatch_ms,
        unit="ms",
        hints=("Bytes over bandwidth: all the tokens' bytes, over what one NIC sends in one direction.",
               "A 400 Gb/s port sends 400 gigabits, not gigabytes, per second."),
        misconceptions=(
            Misconception("bits-as-bytes", "That reads the port's 400 Gb/s as 400 GB/s. It is bits: 50 GB/s.",
                          scale=1 / 8),
            Misconception("both-directions", "A port's figure is per direction already: the dispatch leaves "
                                             "through one direction of it.", scale=1 / 2),
            Misconception("every-copy", "That sends a copy for every expert. A token crosses InfiniBand once per "
                                        "other node its experts are on.",
                          answer=_unless(lambda tokens, nic, **p: _dispatch_ms(tokens=tokens, nic=nic, copies="k",
                                                                               **p), _dispatch_ms)),
            Misconception("nvlink-rate", "That is NVLink's rate. The copies to other nodes leave through the NIC.",
                          answer=_unless(lambda **p: _dispatch_ms(link="nvlink4-h800", **p), _dispatch_ms)),
        ),
        variants={"tokens": (2048, 4096, 8192), "max_nodes": (2, 3, 4), "dtype": ("fp8", "bf16")},
    ),
    Question(
        id="l15.hidden-a2a-step",
        lesson="15",
        kind="numeric",
        prompt=("In roofkit's calibrated estimate of DeepSeek-V3's step ({sequences:,} sequences of 4,096 tokens; "
                "the lesson's deepseek_plan, parallel.plan(..., calibrated=True)), the all-to-alls wait on the "
                "critical path. Suppose DualPipe hid all of them behind another micro-batch's compute. What would "
                "the step be? Give a unit, e.g. s."),
        params={"sequences": 15360},
        key=_hidden_step,
        unit="s",
        hints=("Start from the breakdown: the all-to-alls' exposed time goes.",
               "A slot of the pipeline's bubble lasts as long as a busy slot, waits included (lesson 14). What "
               "happens to the bubble when the waits go?"),
        misconceptions=(
            Misconception("bubble-unchanged", "The all-to-alls' time goes, but so does part of the bubble: each "
                                              "idle slot lasted as long as a busy one, waits included.",
                          answer=lambda sequences: _hidden_step(sequences, hide_bubble=False)),
            Misconception("no-bubble", "Hiding the all-to-alls does not remove the bubble: the pipeline still "
                                       "fills and drains around the compute.", answer=_step_without_comm),
        ),
        variants={"sequences": (7680, 15360)},
    ),
    Question(
        id="l15.experts-read",
        lesson="15",
        kind="numeric",
        prompt=("A decode step of {model} serves {batch} sequences: each new token goes to {k} of the {experts} "
                "routed experts of every MoE layer. If each token picks its experts evenly and independently, how "
                "many distinct routed experts does one MoE layer read in one step, on average?"),
        params={"model": "deepseek-v3", "batch": 64, "k": 8, "experts": 256},
        key=lambda model, batch, k, experts: _experts_read(model, batch),
        unit="dimensionless",
        hints=("An expert is read if at least one token picked it. What is the chance that no token did?",
               "One token misses a given expert with chance 1 - k/E; all B tokens miss it with (1 - k/E)^B."),
        misconceptions=(
            Misconception("k-times-b", "Tokens share experts: B x k counts an expert once per token that picked "
                                       "it. Count each expert once.",
                          answer=_unless(lambda batch, k, **p: float(batch * k),
                                         lambda batch, model, **p: _experts_read(model, batch))),
            Misconception("k-only", "Only k experts if every token picked the same ones. With independent "
                                    "choices the batch spreads over many more.",
                          answer=_unless(lambda k, **p: float(k), lambda batch, model, **p: _experts_read(model, batch))),
            Misconception("all", "Not every expert is reached by a batch this small: some are missed by all its "
                                 "tokens.",
                          answer=_unless(lambda experts, **p: float(experts),
                                         lambda batch, model, **p: _experts_read(model, batch))),
        ),
        variants={"batch": (8, 16, 32, 64)},
    ),
    Question(
        id="l15.ex-qwen-throughput",
        lesson="15",
        kind="numeric",
        prompt=("Exercise. Qwen3-235B-A22B on {gpus} H100s, a batch of {sequences:,} sequences of 4,096 tokens, "
                "TP {tp} with sequence parallelism, PP {pp}, ZeRO-1 data parallelism over the rest, its experts "
                "over EP {ep} folded over TP x DP (whole experts on a GPU: etp = 1), in the precision recipe "
                "'{rec}'. How many tokens per second per GPU does roofkit's bound give (parallel.plan)? Give a "
                "unit, e.g. tokens/s."),
        params={"gpus": 256, "sequences": 2048, "tp": 2, "pp": 8, "ep": 32, "rec": "fp8"},
        key=_qwen_throughput,
        unit="tokens/s",
        hints=("parallel.plan(model, hw, gpus, global_batch_tokens, seq, tp=..., pp=..., ep=..., etp=1, zero=1, "
               "sequence_parallel=True, recipe=...).",
               "The global batch is in tokens: sequences x 4,096. A plan's step covers the whole batch on all "
               "the GPUs."),
        misconceptions=(
            Misconception("bf16", "That is the bound all in BF16: pass the recipe, recipe='fp8', to run the "
                                  "linear layers' GEMMs in FP8.",
                          answer=lambda rec, **p: _qwen_throughput(rec="bf16", **p) if rec != "bf16" else None),
            Misconception("whole-cluster", "That is the whole cluster's rate: divide by the GPUs.",
                          answer=lambda **p: _qwen_throughput(per_gpu=False, **p)),
        ),
        points=2,
        variants={"sequences": (1024, 2048, 4096), "ep": (16, 32)},
    ),
    Question(
        id="l15.ex-ramp-bubble",
        lesson="15",
        kind="numeric",
        prompt=("Exercise. DeepSeek-V3's batch started at {sequences:,} sequences (section 4.2). On {gpus:,} GPUs "
                "with {pp} pipeline stages, no TP, data parallelism over the rest and micro-batches of one "
                "sequence, what share of a 1F1B step is the pipeline's bubble? Answer as a fraction."),
        params={"sequences": 3072, "gpus": 2048, "pp": 16},
        key=_bubble,
        unit="dimensionless",
        hints=("Each data-parallel replica gets its share of the sequences: that is its micro-batches, m.",
               "The bubble's share of a step is (p - 1) / (m + p - 1)."),
        misconceptions=(
            Misconception("whole-batch-as-m", "Each pipeline runs only its replica's share of the batch: divide "
                                              "the sequences by the data-parallel degree to get m.",
                          answer=lambda sequences, gpus, pp: parallel.bubble_fraction(pp, sequences)),
            Misconception("over-m", "(p - 1)/m is the bubble over the busy time; as a share of the whole step it "
                                    "is (p - 1)/(m + p - 1).",
                          answer=lambda sequences, gpus, pp: (pp - 1) / (sequences // (gpus // pp))),
            Misconception("full-batch", "That is the bubble at the full batch of 15,360 sequences. At the start "
                                        "of the ramp each pipeline has fewer micro-batches to fill it.",
                          answer=_unless(lambda sequences, gpus, pp: _bubble(15360, gpus, pp), _bubble)),
        ),
        points=2,
        variants={"sequences": (3072, 6144, 9216), "gpus": (1024, 2048)},
    ),
)
