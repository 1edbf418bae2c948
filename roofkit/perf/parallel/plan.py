"""The step of a training layout: compute, communication, bubble and optimizer, MFU and memory per GPU.

A step on G GPUs laid out as TP x CP x PP x DP (tensor, context, pipeline,
data parallel; experts folded over each stage's TP x CP x DP GPUs as EP x ETP
x EDP, :mod:`roofkit.parallel.experts`), m micro-batches per
data-parallel replica, each pipeline stage holding v chunks of layers::

    step = m (t_mb + exposed TP, CP, EP traffic)   the micro-batches through one stage
         + (p - 1)/v x that per micro-batch        the pipeline bubble
         + exposed data-parallel traffic            gradients reduced, weights gathered (ZeRO)
         + exposed pipeline sends                   filling and draining the pipeline
         + the optimizer step                       Adam over this GPU's shard, at HBM speed
         + the experts one by one (estimate)        a fitted cost per local expert, MoE layer and
                                                    micro-batch (:func:`_expert_host_s`), with its fill

t_mb is one micro-batch through this GPU's share of the layers and of the
head (the output layer and the cross-entropy; the embedding lookup is a gather,
left out), forward, backward and recomputation, kernel by kernel
(:mod:`roofkit.steptime`), the stages balanced (as Llama 3 balanced them by
moving a layer off the first and the last stage). A model trained with
multi-token prediction modules (DeepSeek-V3, arXiv:2412.19437, section 2.2)
runs each one's Transformer block as one more layer, its 2d -> d projection and
a second pass through the shared output head and cross-entropy
(:func:`roofkit.steptime.mtp_kernels`). The experts' grouped GEMMs run, in the
estimate, at the share of the matmul rate their rows per expert reach, the
busiest GPU doing ``moe_imbalance`` x the mean's work
(:func:`roofkit.steptime.grouped_gemm_time`). Communication per micro-batch and layer:

* TP (Megatron-LM, Shoeybi et al. 2019): two all-reduces of the activations
  [b s, d] in the forward pass and two in the backward (two more when the
  forward is recomputed in full); with sequence parallelism, an all-gather and
  a reduce-scatter in place of each, the same bytes (Korthikanti et al. 2022).
  An MoE layer has attention's only: the MLP's tokens travel with the
  experts' dispatch (:func:`tp_collectives`).
* CP (Llama 3, arXiv:2407.21783, section 3.3.2): an all-gather of K and V in
  the forward pass (again when recomputed), a reduce-scatter of their gradients;
  ring attention (Liu et al. 2023, arXiv:2310.01889) passes the same K and V
  blocks around a ring instead, the same bytes, and can hide them behind the
  attention of the block at hand (the bound does, the estimate does not).
* EP: four all-to-alls per MoE layer (:mod:`roofkit.parallel.experts`).
* PP: one send of the activations per stage boundary each way; only filling and
  draining the pipeline, 2(p - 1) sends, wait for them.
* DP: the ZeRO stage's collectives (:mod:`roofkit.parallel.sharding`), over the
  DP x CP ranks that hold the same weights; the routed experts' over the
  expert-data-parallel ranks that hold the same experts, tp cp dp / (ep etp)
  of them, as Megatron-Core reduces their gradients and shards their optimizer
  states (the optimizer step likewise). With ``gather_api='list'`` (DeepSpeed's
  ZeRO-3 of 2021) every rank's slice of every parameter tensor's call is handled on
  its own: :func:`~roofkit.parallel.sharding.list_slices` of them, each two
  operations at the per-kernel floor (calibrated; free in the bound).

Two modes:

* the **bound** (default): every cost at its best. Kernels at the datasheet
  roofs, no floor; collectives at the links' line rates with NCCL's best
  algorithm and protocol (:mod:`roofkit.comms`); all communication hidden
  behind compute as far as each link's traffic fits in the step. No real run
  is faster: a published run that beats it is a bug.
* **calibrated**: an estimate. Achievable roofs and the per-kernel floor; NCCL's
  latencies and the bandwidth nccl-tests measures; TP, CP and EP traffic on the
  critical path (TP hidden by a share ``overlap_efficiency`` where the run
  overlaps it); data-parallel traffic hidden behind the last micro-batch's
  backward and the first one's forward (ZeRO-3 full-shard: behind each
  micro-batch) by that share; the matmuls at a share of the achievable rate.
  The two shares are fitted on published runs
  (:mod:`roofkit.parallel.calibration`).

Memory per GPU is a bound as well: the states of the ZeRO stage and policy, and
the activations the backward pass must read (:mod:`roofkit.parallel.memory`),
on the pipeline stage that holds most at once in its schedule
(:func:`~roofkit.parallel.pipeline.layers_in_flight`, the layers split as Llama 3
split them); ``fits`` holds it against what the card reports, so a layout that
"does not fit" fits no implementation. ``memory_estimate`` is an estimate beside
it: the activations as Megatron-LM's eager layers keep them (every op's inputs).

MFU counts the model's FLOPs against the datasheet peak of the precision the
linear layers' GEMMs run in (:data:`MFU_CONVENTION`; FP8's for an FP8 recipe):
6N with N the parameters a token is multiplied by (the active ones of a mixture
of experts; not the embedding table, which is a lookup; with multi-token
prediction, :attr:`roofkit.models.Model.mtp_active_params` as well: the module's
block, projection and second head pass, as Megatron-Core's
``num_floating_point_operations`` in megatron/training/training.py counts
``mtp_num_layers``), plus attention's
matmuls under the causal mask (:func:`roofkit.training.flops_per_token` with
``causal=True``), the FLOPs a causal attention kernel executes. Counting every
score of the T x T matrix, as PaLM's Appendix B and Megatron-LM's formula do,
credits a step with work its kernels skip, and a bound would then print an MFU
above 1. HFU counts every FLOP the kernels execute, recomputation included.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ... import dtypes
from ...catalogs import models
from .. import recipe as recipes
from ...errors import InvalidValue
from ...units import positive, whole
from .constants import Constants
from .constants import constants as fitted
from . import experts
from .experts import A2A_PER_LAYER
from .fabric import Fabric, links_of, span
from .memory import expert_shards, layer_params, memory_per_gpu
from .pipeline import layers_in_flight, schedule
from .sharding import GATHER_APIS, OPS_PER_SLICE, ZERO_STAGES, list_slices, policy_of, zero_collectives

__all__ = ["Plan", "plan", "MFU_CONVENTION", "model_flops_per_token", "tp_collectives"]

MFU_CONVENTION = ("model FLOPs = 6 x the parameters a token is multiplied by (active experts only, no embedding "
                  "lookup; the multi-token prediction modules' block, projection and second output-head pass "
                  "included) + attention's matmuls under the causal mask (the modules' blocks included), over the "
                  "datasheet peak of the precision the linear layers' GEMMs run in")


@dataclass
class Plan:
    """One layout of one model on one accelerator: step time, its parts, MFU, memory per GPU."""

    model: str
    accelerator: str
    precision: str
    gpus: int
    tp: int
    cp: int
    pp: int
    dp: int
    zero: int
    microbatches: int
    virtual_stages: int
    microbatch_tokens: float
    global_batch_tokens: float
    seq: int
    recompute: str
    overlap: bool
    efficiency: float
    achievable: bool
    intra: str
    inter: str | None
    node_gpus: int
    model_flops: float
    compute_s: float
    bubble_s: float
    communication: dict = field(default_factory=dict)
    memory: dict = field(default_factory=dict)
    memory_capacity_bytes: float | None = None
    critical_batch_tokens_per_gpu: float | None = None
    warnings: list = field(default_factory=list)
    ep: int = 1
    policy: str | None = None
    sequence_parallel: bool = False
    attention: str = "flash"
    tp_overlap: bool = False
    p2p_overlap: bool = True
    calibrated: bool = False
    optimizer_s: float = 0.0
    hardware_flops: float = 0.0
    schedule: str = "1f1b"
    constants: dict = field(default_factory=dict)
    roofs: dict = field(default_factory=dict)
    memory_estimate: dict = field(default_factory=dict)  # activations as an eager implementation keeps them
    memory_stage: int = 0  # the pipeline rank that holds most
    gather_api: str = "flat"
    # The precision recipe (roofkit.perf.recipe) and the precision of each of its kernel families; ``precision``
    # above is its linear layers' GEMMs' ('fp8' for the FP8 recipes; the dtype where every kernel runs in one).
    recipe: str = "bf16"
    precisions: dict = field(default_factory=dict)
    # MFU and HFU count against the dense datasheet peak of this precision: the one the linear layers' GEMMs run
    # in (roofkit.perf.recipe.Recipe.mfu_peak_precision: FP8's for the FP8 recipes; the dtype where every kernel
    # runs in one). Against the BF16 peak, as torchtitan counts float8 runs (pytorch/torchtitan,
    # torchtitan/tools/utils.py, get_peak_flops), an FP8 bound would print an MFU above 1.
    mfu_peak_precision: str = ""
    # the experts (roofkit.parallel.experts): expert tensor and data parallelism, node-limited routing, the
    # dispatch's precision and dispatcher (what each GPU dispatches: communication["ep"]["experts"])
    etp: int = 1
    expert_dp: int = 1
    max_nodes_per_token: int | None = None
    dispatch_dtype: str = "bf16"
    dispatcher: str = "alltoall"
    # calibrated: the seconds a step's MoE layers spend expert by expert past their FLOPs and bytes, the fitted
    # cost per local expert (Constants.moe_expert_s) x this GPU's experts x its MoE layers x the micro-batches
    # (:func:`_expert_host_s`); 0 in the bound
    experts_host_s: float = 0.0

    @property
    def link_busy_s(self) -> dict:
        """Seconds each link level ('intra', 'inter') carries traffic in a step, hidden or not (:func:`link_busy`)."""
        return link_busy(self.communication)

    @property
    def communication_s(self) -> float:
        """Exposed communication: what does not hide behind compute."""
        return sum(c["exposed_s"] for c in self.communication.values())

    @property
    def step_time_s(self) -> float:
        return self.compute_s + self.communication_s + self.bubble_s + self.optimizer_s + self.experts_host_s

    def _utilization(self, flops) -> float:
        from ...catalogs import hardware  # deferred: catalogs.hardware pulls in numpy (through formulas)
        from .. import training  # deferred: perf.training imports numpy

        peak = hardware.get(self.accelerator).peak(self.mfu_peak_precision or self.precision)
        return training.mfu(flops, self.step_time_s, peak, self.gpus)

    @property
    def mfu(self) -> float:
        return self._utilization(self.model_flops)

    @property
    def hfu(self) -> float:
        """Every FLOP the kernels execute (recomputation included) over step time x GPUs x datasheet peak."""
        return self._utilization(self.hardware_flops)

    @property
    def memory_per_gpu_bytes(self) -> float:
        return self.memory["total"]

    @property
    def memory_estimate_bytes(self) -> float:
        """An estimate beside the bound: the same states, activations as Megatron-LM's eager layers keep them."""
        return self.memory_estimate.get("total", self.memory_per_gpu_bytes)

    @property
    def fits(self) -> bool | None:
        """The bound against what the card reports: False means no implementation of this layout fits."""
        return None if self.memory_capacity_bytes is None else self.memory_per_gpu_bytes <= self.memory_capacity_bytes

    @property
    def tokens_per_gpu(self) -> float:
        return self.global_batch_tokens / self.gpus

    @property
    def tokens_per_s(self) -> float:
        return self.global_batch_tokens / self.step_time_s

    @property
    def mode(self) -> str:
        return "calibrated" if self.calibrated else "bound"

    @property
    def layout(self) -> str:
        """'TP 8 · PP 4 · DP 32 · ZeRO-1' (CP, EP, ZeRO and interleaving only when used; recomputation when on)."""
        parts = [f"TP {self.tp}"] + ([f"CP {self.cp}"] if self.cp > 1 else []) + [f"PP {self.pp}", f"DP {self.dp}"]
        parts += [f"EP {self.ep}"] if self.ep > 1 else []
        parts += [f"ZeRO-{self.zero}"] if self.zero else []
        text = " · ".join(parts) + (f" (v {self.virtual_stages})" if self.virtual_stages > 1 else "")
        return text + ({"full": " + recompute", "selective": " + sel. recompute"}.get(self.recompute, ""))

    @property
    def breakdown(self) -> dict:
        """Seconds of the step, part by part: compute, each kind of exposed traffic, bubble, optimizer."""
        parts = {"compute": self.compute_s}
        parts |= {f"{kind} ({c['collective']})": c["exposed_s"] for kind, c in self.communication.items()}
        parts |= {"experts one by one": self.experts_host_s} if self.experts_host_s else {}
        return parts | {"bubble": self.bubble_s, "optimizer": self.optimizer_s}

    def to_dict(self) -> dict:
        return asdict(self) | {"mode": self.mode, "step_time_s": self.step_time_s, "tokens_per_s": self.tokens_per_s,
                               "mfu": self.mfu, "hfu": self.hfu, "fits": self.fits,
                               "memory_per_gpu_bytes": self.memory_per_gpu_bytes,
                               "memory_estimate_bytes": self.memory_estimate_bytes,
                               "communication_s": self.communication_s, "tokens_per_gpu": self.tokens_per_gpu,
                               "layout": self.layout, "breakdown": self.breakdown,
                               "link_busy_s": self.link_busy_s, "mfu_convention": MFU_CONVENTION}


def _check_layout(M, G, t, c, p, d, e, zero, etp=None, sequence_parallel=False):
    if t * c * p * d != G:
        raise InvalidValue(f"tp x cp x pp x dp = {t} x {c} x {p} x {d} = {t * c * p * d}, not gpus = {G}; "
                           f"with tp={t}, cp={c}, pp={p} choose dp = gpus / {t * c * p}"
                           + (f" = {G // (t * c * p)}." if G % (t * c * p) == 0 else " (it must divide)."))
    if zero not in ZERO_STAGES:
        raise InvalidValue(f"zero must be one of {', '.join(map(str, ZERO_STAGES))}; got {zero!r}.")
    if p > M.layers:
        raise InvalidValue(f"pp = {p} stages for {M.layers} layers: at most one stage per layer (pp <= {M.layers}).")
    experts.check(M, t, c, d, e, t if etp is None else etp, sequence_parallel)  # ETP x EP folded over TP x CP x DP


def plan(model, hw, gpus, global_batch_tokens, seq, tp=1, pp=1, dp=None, cp=1, zero=0, microbatches=None,
         virtual_stages=1, dtype="bf16", recompute="none", overlap=True, efficiency=1.0, achievable=False,
         intra=None, inter=None, node_gpus=None, ep=1, sequence_parallel=False, policy=None, attention="flash",
         tp_overlap=False, p2p_overlap=True, gather_api="flat", calibrated=False, constants=None,
         recipe=None, etp=None, max_nodes_per_token=None, dispatch_dtype="bf16", dispatcher="alltoall",
         moe_imbalance=None, moe_expert_s=None) -> Plan:
    """Step time, MFU and memory per GPU of ``model`` trained on ``gpus`` x ``hw`` in a TP x CP x PP x DP layout.

    ``model``: a catalog name, a Model, a TOML or config.json file (:func:`roofkit.models.get`).
    ``dp`` defaults to gpus / (tp cp pp). Each DP replica gets
    global_batch_tokens / dp tokens in ``microbatches`` micro-batches (default:
    one sequence each), each stage holding ``virtual_stages`` interleaved chunks.
    ``recompute``: 'none', 'selective', 'full' (True is 'full'). ``zero`` 0 to 3,
    ``policy`` stage 3's gathering ('full-shard', 'shard-grad-op', 'per-step').
    ``ep``, ``etp``: the experts folded over each pipeline stage's TP x CP x DP
    GPUs as Megatron-Core folds them, ETP x EP x EDP (:mod:`roofkit.parallel.experts`):
    each expert split over ``etp`` GPUs (default ``tp``; 1 keeps whole experts on a
    GPU), the experts over ``ep`` groups of them; ep x etp must divide tp x cp x dp.
    With ``tp`` > 1 a mixture of experts needs ``sequence_parallel`` (Megatron-Core
    refuses it otherwise). ``max_nodes_per_token``: node-limited routing (DeepSeek-V3:
    4); ``dispatch_dtype`` 'bf16' or 'fp8' (DeepSeek-V3's, with a scale per 128
    elements; the combine stays BF16); ``dispatcher`` (calibrated) 'alltoall'
    (Megatron-Core's NCCL all-to-all, a row per token and expert) or 'deepep' (once
    per node, then NVLink); the bound sends the least any router could.
    ``moe_imbalance`` (calibrated): the busiest expert GPU's tokens over the mean
    (default the constants', 1.0 until fitted); it scales the experts' all-to-alls
    and their grouped GEMMs. ``moe_expert_s`` (calibrated): the seconds each local expert adds to an MoE
    layer's forward and backward of a micro-batch (default the constants', fitted on Megatron-Core with
    Transformer Engine; 0 for one fused grouped GEMM over all experts). ``overlap=False``:
    nothing hides behind compute. ``tp_overlap``: the run overlaps TP traffic
    with its GEMMs (Megatron-Core's ``--tp-comm-overlap``). ``p2p_overlap=False``:
    the pipeline's sends wait between micro-batches (Megatron-LM before
    Megatron-Core, DeepSpeed's pipeline engine). ``gather_api='list'`` (ZeRO-3):
    each parameter tensor gathered and reduce-scattered with its own call that
    handles every rank's slice on its own (DeepSpeed's ZeRO-3 of 2021,
    :func:`roofkit.parallel.sharding.list_slices`), each slice at the per-kernel
    floor (calibrated; free in the bound). ``attention``:
    'flash' or 'unfused' (before FlashAttention). ``calibrated``: the estimate
    (module docstring) with ``constants`` (default: fitted on published runs).
    ``achievable`` (bound only): the matmuls at the best measured rate;
    ``efficiency`` scales the matmul rate either way. ``intra`` / ``inter``
    choose the links (default: the NVLink domain and the first network).
    ``recipe``: the precision of each kernel family (:mod:`roofkit.perf.recipe`:
    'bf16', 'fp8', 'fp8-current', 'fp8-attention', 'mxfp8', ...); by default
    ``dtype``'s, every kernel in it, except ``dtype='fp8'``: Transformer
    Engine's default recipe (the linear layers' GEMMs in FP8, the rest BF16).
    """
    L = _layout(model, hw, gpus, global_batch_tokens, seq, tp, pp, dp, cp, zero, microbatches, virtual_stages, dtype,
                recompute, efficiency, achievable, intra, inter, node_gpus, ep, policy, gather_api, calibrated,
                constants, recipe, moe=dict(etp=etp, sequence_parallel=sequence_parallel,
                                            max_nodes_per_token=max_nodes_per_token, dispatch_dtype=dispatch_dtype,
                                            dispatcher=dispatcher, moe_imbalance=moe_imbalance,
                                            moe_expert_s=moe_expert_s))
    fabric = Fabric(L.intra_link, L.inter_link, L.node, calibrated)
    r = _roofs(L, calibrated, achievable)
    t_mb, stage_mb = _microbatch_compute(L, r, sequence_parallel, attention, calibrated)
    compute = L.m * stage_mb
    comm = {}
    critical = _model_parallel_traffic(comm, fabric, L, sequence_parallel, overlap, tp_overlap, r)
    _pipeline_traffic(comm, fabric, L, overlap, p2p_overlap)
    host_mb = _expert_host_s(L, calibrated)
    bubble = (L.p - 1) / L.v * (stage_mb + critical + host_mb) if L.p > 1 else 0.0
    shards = L.d * L.c  # the ranks that hold the same weights
    groups = _weight_groups(L, shards)
    _data_parallel_traffic(comm, fabric, L, r, t_mb, stage_mb, groups, overlap, gather_api)
    if not calibrated:
        bubble = _hide_in_the_bound(comm, compute, stage_mb, L.p, L.v, overlap)
    optimizer = _optimizer_s(groups, L.zero, r)
    model_flops, hardware_flops = _flops(L, sequence_parallel, attention)
    memory, memory_estimate, stage = _memory(L, shards, sequence_parallel, attention)
    M, acc, intra_link, inter_link = L.M, L.acc, L.intra_link, L.inter_link
    result = Plan(model=M.key, accelerator=acc.key, **_recipe_fields(L), gpus=L.G, tp=L.t, cp=L.c, pp=L.p, dp=L.d,
                  zero=L.zero, microbatches=L.m, virtual_stages=L.v, microbatch_tokens=L.mb_tokens,
                  global_batch_tokens=L.B, seq=L.S, recompute=L.mode, overlap=bool(overlap), efficiency=float(L.U),
                  achievable=bool(achievable), intra=intra_link.key, inter=inter_link.key if inter_link else None,
                  node_gpus=L.node, model_flops=model_flops, compute_s=compute, bubble_s=bubble, communication=comm,
                  experts_host_s=L.m * host_mb,
                  memory=memory, memory_estimate=memory_estimate, memory_stage=stage,
                  memory_capacity_bytes=acc.capacity_bytes, ep=L.ep, policy=L.policy,
                  sequence_parallel=bool(sequence_parallel), attention=attention, tp_overlap=bool(tp_overlap),
                  p2p_overlap=bool(p2p_overlap), gather_api=gather_api,
                  calibrated=calibrated, optimizer_s=optimizer, hardware_flops=hardware_flops,
                  schedule=schedule(L.v) if L.p > 1 else "none", constants=L.k.to_dict(), roofs=r.to_dict(),
                  etp=L.etp, expert_dp=experts.expert_dp(L.t, L.c, L.d, L.ep, L.etp), max_nodes_per_token=L.max_nodes,
                  dispatch_dtype=L.dispatch_dtype, dispatcher=L.dispatcher)
    _warn(result, L, acc, L.t, L.node, t_mb)
    return result


# --- the steps of plan() -----------------------------------------------------------------------------------------

_ACT = dtypes.bytes_per_element("bf16")  # activations and gradients travel in 16 bits
# the data-parallel collectives: gradients reduced and weights gathered, the dense weights' and the experts'
_DATA_PARALLEL = ("dp", "zero", "expert-dp", "expert-zero")


@dataclass(frozen=True)
class _Layout:
    """What plan() computes from: its arguments checked, with the batch, the constants and the links they give."""

    M: Any  # the model (catalogs.models.Model)
    acc: Any  # the accelerator (catalogs.hardware.Accelerator)
    precision: str
    G: int  # GPUs in all
    t: int  # tensor-parallel degree
    c: int  # context-parallel degree
    p: int  # pipeline stages
    d: int  # data-parallel degree
    e: int  # ep x etp / tp: the expert GPUs per TP rank, what steptime and memory take as their ``ep``
    zero: int
    policy: str | None
    mode: str  # recomputation
    B: float  # global batch, tokens
    S: int  # sequence length
    sequences: float  # sequences per data-parallel replica
    m: int  # micro-batches per replica
    U: float  # efficiency
    v: int  # virtual stages
    k: Constants
    intra_link: Any
    inter_link: Any
    node: int  # GPUs per node
    # experts (roofkit.parallel.experts): ETP x EP folded over TP x CP x DP; node-limited routing, the dispatch's
    # precision and its dispatcher
    ep: int = 1  # expert-parallel degree
    etp: int = 1  # expert-tensor-parallel degree
    max_nodes: int | None = None
    dispatch_dtype: str = "bf16"
    dispatcher: str = "alltoall"

    @property
    def b_mb(self) -> float:
        """Sequences per micro-batch (all CP ranks together)."""
        return self.sequences / self.m

    @property
    def mb_tokens(self) -> float:
        """Tokens per micro-batch (all CP ranks together)."""
        return self.B / (self.d * self.m)

    @property
    def _mtp_moe(self) -> bool:
        """Whether the multi-token prediction modules' layers have experts (as the model's last layer)."""
        return self.M.is_moe_layer(self.M.layers - 1)

    @property
    def moe_layers(self) -> int:
        """The layers with experts a step runs: the model's, and the multi-token prediction modules' when theirs
        have experts (DeepSeek-V3, section 2.2: a Transformer block like the main model's; Megatron-Core counts
        them so, ``num_floating_point_operations``). Their projection and second pass through the head are timed
        apart (:func:`roofkit.steptime.mtp_kernels`)."""
        return self.M.moe_layers + (self.M.mtp_layers if self._mtp_moe else 0)

    @property
    def dense_layers(self) -> int:
        """The layers without experts a step runs (the multi-token prediction modules' when theirs have none)."""
        return self.M.layers - self.M.moe_layers + (0 if self._mtp_moe else self.M.mtp_layers)

    @property
    def layers_here(self) -> float:
        """The layers of one pipeline stage."""
        return self.M.layers / self.p

    @property
    def step_layers(self) -> int:
        """The Transformer blocks a step runs: the model's layers and the multi-token prediction modules'."""
        return self.dense_layers + self.moe_layers


def _layout(model, hw, gpus, global_batch_tokens, seq, tp, pp, dp, cp, zero, microbatches, virtual_stages, dtype,
            recompute, efficiency, achievable, intra, inter, node_gpus, ep, policy, gather_api, calibrated,
            constants, recipe=None, moe=None) -> _Layout:
    """plan()'s arguments read and checked, each in the order its error is reported, and the links chosen.

    ``moe``: plan()'s expert options by name (etp, sequence_parallel, max_nodes_per_token, dispatch_dtype,
    dispatcher, moe_imbalance, moe_expert_s; :mod:`roofkit.parallel.experts`).

    ``precision`` (of the _Layout) is the name of the precision recipe of ``dtype`` and ``recipe``
    (:func:`roofkit.perf.recipe.resolve`): the dtype's own where every kernel runs in it."""
    from ...catalogs import hardware  # deferred: catalogs.hardware pulls in numpy (through formulas)
    from .. import steptime  # deferred: perf.steptime pulls in numpy (through formulas)

    M = models.get(model)
    acc = hardware.get(hw)
    precision = recipes.resolve(dtype, recipe).name
    moe = dict(moe or {})
    G, t, c, p, d, e, r = _degrees(M, gpus, tp, cp, pp, dp, ep, zero, moe.pop("etp", None),
                                   moe.pop("sequence_parallel", False))
    policy = policy_of(zero, policy)
    if gather_api not in GATHER_APIS:
        raise InvalidValue(f"gather_api must be one of {', '.join(GATHER_APIS)}; got {gather_api!r}.")
    if gather_api == "list" and zero != 3:
        raise InvalidValue(f"gather_api='list' describes ZeRO-3's per-parameter gathers; zero = {zero} gathers its "
                           "buckets once a step: use zero=3 or gather_api='flat'.")
    mode = steptime.recompute_mode(recompute)
    if not isinstance(calibrated, bool):
        raise InvalidValue(f"calibrated must be True or False; got {calibrated!r}.")
    if calibrated and achievable:
        raise InvalidValue("achievable=True runs the bound at the measured matmul rate; calibrated=True already "
                           "uses achievable roofs: choose one.")
    B, S, sequences, m, U, v = _batch(M, global_batch_tokens, seq, d, p, microbatches, efficiency, virtual_stages)
    k = fitted() if calibrated and constants is None else (constants or Constants.bound())
    max_nodes, dispatch_dtype, dispatcher, imbalance, per_expert = experts.options(M, calibrated, **moe)
    k = k if imbalance is None else replace(k, moe_imbalance=float(imbalance))
    k = k if per_expert is None else replace(k, moe_expert_s=float(per_expert))
    intra_link, inter_link, node = links_of(acc, intra, inter, node_gpus)
    return _Layout(M, acc, precision, G, t, c, p, d, e * r // t, zero, policy, mode, B, S, sequences, m, U, v, k,
                   intra_link, inter_link, node, ep=e, etp=r, max_nodes=max_nodes, dispatch_dtype=dispatch_dtype,
                   dispatcher=dispatcher)


def _degrees(M, gpus, tp, cp, pp, dp, ep, zero, etp=None, sequence_parallel=False) -> tuple[int, ...]:
    """The GPUs and the TP, CP, PP, DP, EP and ETP degrees (ETP defaults to TP), checked against one another and
    the model."""
    G = whole(gpus, "gpus")
    t, c, p, e = whole(tp, "tp"), whole(cp, "cp"), whole(pp, "pp"), whole(ep, "ep")
    r = t if etp is None else whole(etp, "etp")
    if dp is None:
        if G % (t * c * p):
            raise InvalidValue(f"gpus = {G} is not a multiple of tp x cp x pp = {t * c * p}; "
                               f"choose tp, cp and pp whose product divides {G}.")
        dp = G // (t * c * p)
    d = whole(dp, "dp")
    _check_layout(M, G, t, c, p, d, e, zero, r, sequence_parallel)
    return G, t, c, p, d, e, r


def _batch(M, global_batch_tokens, seq, d, p, microbatches, efficiency, virtual_stages):
    """The global batch and sequence, sequences and micro-batches per replica, the efficiency, the virtual stages."""
    B, S = float(positive(global_batch_tokens, "global_batch_tokens")), whole(seq, "seq")
    sequences = B / (S * d)
    if sequences < 1 - 1e-9:
        raise InvalidValue(f"a global batch of {B:g} tokens gives each of the dp = {d} replicas {sequences:.3g} "
                           f"sequences of {S} tokens; it needs at least {S * d} tokens.")
    if abs(sequences - round(sequences)) > 1e-9 * sequences:
        whole_batch = round(sequences) * S * d
        raise InvalidValue(f"a global batch of {B:,.0f} tokens gives each of the dp = {d} replicas {sequences:.4g} "
                           f"sequences of {S} tokens, not a whole number; a step trains whole sequences: use "
                           f"{whole_batch:,} tokens ({round(sequences)} per replica), or another dp. (On the command "
                           "line 4M is 4 x 2^20 tokens.)")
    m = whole(microbatches, "microbatches") if microbatches is not None else max(1, math.floor(sequences + 1e-9))
    if m > sequences * (1 + 1e-9):
        raise InvalidValue(f"microbatches = {m} but each replica has only {sequences:.4g} sequences of {S} tokens: "
                           f"choose at most {math.floor(sequences + 1e-9)}.")
    U = positive(efficiency, "efficiency")
    if U > 1:
        raise InvalidValue(f"efficiency is a share of the peak, in (0, 1]; got {efficiency!r}.")
    v = whole(virtual_stages, "virtual_stages")
    if p * v > M.layers + 2:
        raise InvalidValue(f"pp x virtual_stages = {p * v} chunks for {M.layers} layers, the embedding and the output "
                           f"layer: at most one of them a chunk (pp x virtual_stages <= {M.layers + 2}).")
    if v > 1 and p == 1:
        raise InvalidValue("virtual_stages > 1 interleaves the chunks of a pipeline: it needs pp > 1.")
    return B, S, sequences, m, U, v


def _roofs(L: _Layout, calibrated, achievable):
    """The kernels' roofs: achievable with the fitted share and floor (calibrated), else the datasheet's; a rate
    for each precision of the recipe (``L.precision``, its name)."""
    from .. import steptime  # deferred: perf.steptime pulls in numpy (through formulas)

    if calibrated:
        return steptime.roofs(L.acc, calibrated=True, matmul_efficiency=L.k.matmul_efficiency * L.U,
                              floor_s=L.k.floor_s, recipe=L.precision)
    return steptime.roofs(L.acc, recipe=L.precision, achievable=achievable).scaled(L.U)


def _recipe_fields(L: _Layout) -> dict:
    """The Plan's precision fields: the recipe (``L.precision``, its name), its linear GEMMs' precision, each
    family's, and the precision whose peak MFU counts against (Plan.mfu_peak_precision)."""
    r = recipes.get(L.precision)
    return {"precision": r.linear, "recipe": r.name, "precisions": r.precisions,
            "mfu_peak_precision": r.mfu_peak_precision}


def _microbatch_compute(L: _Layout, r, sequence_parallel, attention, calibrated):
    """One micro-batch through one layer, kernel by kernel, and through this GPU's pipeline stage (seconds).

    The experts' grouped GEMMs at their few rows per expert and the busiest GPU's share of the tokens
    (``moe_imbalance``) when calibrated; at the datasheet roof, balanced, in the bound
    (:func:`roofkit.steptime.microbatch`). A low-precision recipe casts the weights once a step
    (steptime.weight_cast_kernels): each of the m micro-batches carries 1/m of those casts."""
    from .. import steptime  # deferred: perf.steptime pulls in numpy (through formulas)

    t_mb = steptime.microbatch(L.M, L.acc, L.b_mb, L.S, L.t, L.c, L.e, sequence_parallel, attention, L.mode,
                               calibrated, roofs_=r, recipe=L.precision,
                               imbalance=L.k.moe_imbalance if calibrated else 1.0)
    stage_mb = _stage_s(L, t_mb)
    casts = (L.dense_layers * t_mb.weight_cast_s + L.moe_layers * t_mb.moe_weight_cast_s + t_mb.head_weight_cast_s
             + L.M.mtp_layers * t_mb.mtp_weight_cast_s)
    if casts:
        stage_mb += casts / (L.p * L.m)
    return t_mb, stage_mb


def _stage_s(L: _Layout, t_mb, part=None) -> float:
    """One micro-batch through one pipeline stage's share of the step's layers (dense and MoE), of the head and of
    the multi-token prediction modules' projections and head passes: its ``part`` ('forward', 'backward'), or
    all of it (None: forward, backward and recomputation)."""
    names = ("layer_s", "moe_layer_s", "head_s", "mtp_s") if part is None else \
        (f"{part}_s", f"moe_{part}_s", f"head_{part}_s", f"mtp_{part}_s")
    dense, moe, head, mtp = (getattr(t_mb, name) for name in names)
    return (L.dense_layers * dense + L.moe_layers * moe + head + L.M.mtp_layers * mtp) / L.p


def _expert_host_s(L: _Layout, calibrated: bool) -> float:
    """Calibrated, the seconds one micro-batch's forward and backward through this stage's MoE layers spend expert
    by expert: the fitted cost per local expert and layer (:attr:`Constants.moe_expert_s`) x the E / ep experts
    each GPU holds x the stage's MoE layers. The bound pays none of it: a fused grouped GEMM over every expert
    (DeepGEMM's, PyTorch's grouped_mm) and a gradient buffer per layer would not.

    It grows with the experts on a GPU, not with their FLOPs: in Megatron-Bridge 25.11's table, Qwen3-30B-A3B in
    MXFP8 on 8 GB200s (16 experts a GPU) reaches 547 model TFLOP/s a GPU, DeepSeek-V3 in MXFP8 on 256 of them
    (8 a GPU), 1,003."""
    if not calibrated or not L.moe_layers or not L.k.moe_expert_s:
        return 0.0
    return L.k.moe_expert_s * (L.M.experts / L.ep) * L.moe_layers / L.p


def _record(comm, fabric, kind, collective, size, calls, group, stride, exposed=None, pieces=1) -> None:
    """Time ``calls`` of one collective on the fabric and enter it in ``comm`` as ``kind``."""
    one = fabric.time(collective, size / pieces, group, stride) * pieces  # pieces: one collective per layer
    total = one * calls
    comm[kind] = {"collective": collective, "bytes_per_call": size, "calls": calls, "group": group,
                  "level": fabric.level(group, stride), "time_s": total,
                  "exposed_s": total if exposed is None else exposed(total)}


def tp_collectives(model, dense_layers, moe_layers, calibrated=False) -> int:
    """The TP collectives (all-reduces, or all-gather and reduce-scatter pairs with sequence parallelism) of one
    forward pass through ``dense_layers`` dense and ``moe_layers`` MoE layers.

    A dense layer has two: around attention (an all-gather before QKV, a reduce-scatter after the output
    projection) and around the MLP. An MoE layer has attention's only: Megatron-Core's MoE layer takes the
    sequence-parallel input as it is, and its token dispatcher moves the tokens (MoEAlltoAllTokenDispatcher,
    megatron/core/transformer/moe/token_dispatcher.py: "permute->A2A(EP)->AG(TP)" and back "RS(TP)->A2A(EP)",
    the AG and RS over the expert-tensor-parallel group, ``expt_tp_group``), which
    :func:`roofkit.parallel.experts.traffic` charges (its 'etp' part, when etp > 1). Calibrated, a model's shared
    experts add their pair: Megatron-Core runs them as a TP-split MLP over the TP group
    (SharedExpertMLP in megatron/core/transformer/moe/shared_experts.py, an all-gather of the sequence-parallel
    input and a reduce-scatter of the output); the bound does not, since a shared expert run whole on each
    rank's own tokens does the same FLOPs per GPU without them.

    >>> tp_collectives("llama-3-8b", 32, 0), tp_collectives("qwen3-235b-a22b", 0, 94)
    (64, 94)
    >>> tp_collectives("llama-4-maverick", 24, 24), tp_collectives("llama-4-maverick", 24, 24, calibrated=True)
    (72, 96)
    """
    M = models.get(model)
    moe_pairs = 1 + (1 if calibrated and M.shared_experts else 0)
    return 2 * whole(dense_layers, "dense_layers", 0) + moe_pairs * whole(moe_layers, "moe_layers", 0)


def _model_parallel_traffic(comm, fabric, L: _Layout, sequence_parallel, overlap, tp_overlap, roofs_=None) -> float:
    """TP, CP and EP traffic of the step; returns its exposed seconds per micro-batch (calibrated).

    TP: :func:`tp_collectives` per forward pass, as many in the backward, and again for a forward recomputed
    in full, over this stage's share of the step's layers (the multi-token prediction modules' included)."""
    M, t, c, e, m, mode = L.M, L.t, L.c, L.e, L.m, L.mode
    critical = 0.0  # exposed seconds per micro-batch (calibrated)
    if t > 1:
        forward = tp_collectives(M, L.dense_layers, L.moe_layers, fabric.calibrated)
        calls = forward * (3 if mode == "full" else 2) / L.p * m
        kind = ("all-gather", "reduce-scatter") if sequence_parallel else ("all-reduce",)
        size = L.mb_tokens / c * M.d_model * _ACT
        if sequence_parallel:  # an all-gather and a reduce-scatter in place of each all-reduce
            _record(comm, fabric, "tp", "all-gather", size, calls, t, 1)
            rs = fabric.time("reduce-scatter", size, t, 1) * calls
            comm["tp"] |= {"collective": "all-gather + reduce-scatter", "time_s": comm["tp"]["time_s"] + rs}
        else:
            _record(comm, fabric, "tp", kind[0], size, calls, t, 1)
        hidden = L.k.overlap_efficiency if (tp_overlap and overlap) else 0.0
        comm["tp"]["exposed_s"] = comm["tp"]["time_s"] * (1 - hidden)
    if c > 1:  # K and V of the whole sequence gathered (again when recomputed), their gradients scattered
        kv = L.mb_tokens * 2 * max(1, M.kv_heads // t) * M.head_dim * _ACT
        calls = (3 if mode == "full" else 2) * L.step_layers / L.p * m
        _record(comm, fabric, "cp", "all-gather", kv, calls, c, t)
    if L.moe_layers and (L.ep > 1 or L.etp > 1):  # each GPU dispatches its own tokens (roofkit.parallel.experts)
        tokens = experts.dispatch_tokens(L.mb_tokens, c, t, sequence_parallel)
        memory = (roofs_.bandwidth, roofs_.floor_s) if fabric.calibrated and roofs_ is not None else None
        x = experts.traffic(fabric, tokens, M, L.ep, L.etp, L.max_nodes, L.dispatch_dtype, L.dispatcher,
                            fabric.calibrated, memory)
        each = A2A_PER_LAYER // 2 + (1 if mode == "full" else 0)  # dispatches (forward, combine's backward), combines
        ops = each * L.moe_layers / L.p * m
        busiest = L.k.moe_imbalance  # the busiest GPU's tokens over the mean: 1 in the bound
        per_gpu = experts.tokens_per_expert(tokens, M.experts_per_token, M.experts, L.ep, L.etp)
        detail = {"tokens_per_gpu": tokens, "top_k": M.experts_per_token, "copies_per_token": x["copies"],
                  "nodes": x["nodes"], "gpus_per_node": x["gpus_per_node"], "dispatch_dtype": L.dispatch_dtype,
                  "dispatcher": L.dispatcher if fabric.calibrated else "least traffic (bound)",
                  "max_nodes_per_token": L.max_nodes, "tokens_per_expert": per_gpu,
                  "grouped_gemm_share": experts.grouped_gemm_share(per_gpu) if fabric.calibrated else 1.0}
        if L.ep > 1:
            total = (x["dispatch"]["seconds"] + x["combine"]["seconds"]) * ops * busiest
            comm["ep"] = {"collective": "all-to-all" if fabric.calibrated and L.dispatcher == "alltoall"
                          else "all-to-all (network, then NVLink)", "calls": 2 * ops, "group": L.ep,
                          "bytes_per_call": x["dispatch"]["network_bytes"] + x["dispatch"]["nvlink_bytes"],
                          "network_bytes_per_dispatch": x["dispatch"]["network_bytes"],
                          "nvlink_bytes_per_dispatch": x["dispatch"]["nvlink_bytes"], "level": x["level"],
                          "time_s": total, "exposed_s": total, "experts": detail,
                          "permute_s": (x["dispatch"]["permute_s"] + x["combine"]["permute_s"]) * ops * busiest}
        if "etp" in x:  # the rows each expert's ETP group received: all-gathered, then reduce-scattered
            total = x["etp"]["seconds"] * ops * busiest
            comm["etp"] = {"collective": "all-gather + reduce-scatter", "bytes_per_call": x["etp"]["bytes"],
                           "calls": ops, "group": L.etp, "level": x["etp"]["level"], "time_s": total,
                           "exposed_s": total}
            critical += total / m
    for kind in ("tp", "cp", "ep"):
        if kind in comm:
            critical += comm[kind]["exposed_s"] / m
    return critical


def _pipeline_traffic(comm, fabric, L: _Layout, overlap, p2p_overlap) -> None:
    """The pipeline's sends: activations to the next stage, gradients back; only the fill and the drain wait."""
    t, c, d, p, v, m = L.t, L.c, L.d, L.p, L.v, L.m
    if p > 1:  # activations to the next stage, gradients back; only the fill and the drain wait for them
        # each TP rank sends 1/t of the activations (Megatron-LM's scatter/gather, or sequence parallelism)
        hop_bytes = L.mb_tokens / c * L.M.d_model * _ACT / t
        hop = fabric.time("p2p", hop_bytes, 2, t * c * d)
        waits = 2 * (p - 1) if (p2p_overlap and overlap) else 2 * v * m  # blocking sends: every one waits
        comm["pp"] = {"collective": "p2p", "bytes_per_call": hop_bytes, "calls": 2 * v * m, "group": 2,
                      "level": fabric.level(2, t * c * d), "time_s": 2 * v * m * hop, "exposed_s": waits * hop}


@dataclass(frozen=True)
class _Weights:
    """One group of this GPU's weights and the ranks that hold the same ones: their gradients are reduced, and
    (ZeRO) their states sharded and the weights gathered, over those ``ranks``, ``stride`` apart."""

    prefix: str  # '' for the dense weights, 'expert-' for the routed experts
    params: float  # on this GPU: its pipeline stage's share
    ranks: float
    stride: int


def _weight_groups(L: _Layout, shards) -> list[_Weights]:
    """This GPU's dense weights, held alike by the DP x CP ranks (``shards``, TP ranks apart), and its routed
    experts, held alike by the expert-data-parallel ranks, EDP = tp cp dp / (ep etp), EP x ETP ranks apart
    (Megatron-Core's expert rank order, ETP innermost then EP then EDP: megatron/core/parallel_state.py,
    ``initialize_model_parallel``'s expert RankGenerator). Megatron-Core's DistributedDataParallel keeps the
    experts' gradients in buffers of their own, reduced over that group (``expert_parallel_buffers`` and
    ``expert_parallel_bucket_groups`` over ``get_expert_data_parallel_group()``, the dense ones over
    ``get_data_parallel_group(with_context_parallel=True)``: megatron/core/distributed/distributed_data_parallel.py);
    its distributed optimizer shards each group's states over its own ranks. EDP is
    :func:`roofkit.parallel.memory.expert_shards`, as the memory's expert states use it."""
    dense, routed = layer_params(L.M, L.t, L.ep, L.etp)
    groups = [_Weights("", dense / L.p, shards, L.t)]
    if routed:
        groups.append(_Weights("expert-", routed / L.p, expert_shards(shards, L.t, L.ep, L.etp), L.ep * L.etp))
    return groups


def _data_parallel_traffic(comm, fabric, L: _Layout, r, t_mb, stage_mb, groups, overlap, gather_api) -> None:
    """The ZeRO stage's collectives over the ranks that hold the same weights (each group of :func:`_weight_groups`
    over its own: 'dp' and 'zero' for the dense weights, 'expert-dp' and 'expert-zero' for the experts'), and
    what of them hides. The groups' collectives share the window they hide in."""
    M, t, p, m = L.M, L.t, L.p, L.m
    groups = [g for g in groups if g.ranks > 1 and g.params > 0]
    if not groups:
        return
    backward_mb, forward_mb = _stage_s(L, t_mb, "backward"), _stage_s(L, t_mb, "forward")
    eta = L.k.overlap_efficiency if overlap else 0.0
    per_step = L.zero < 3 or L.policy == "per-step"
    for kind, (collective, calls) in zero_collectives(L.zero, m, L.policy, L.mode).items():
        # once a step: gradients hide behind the last micro-batch's backward, weights behind the first forward
        window = backward_mb if kind == "dp" else forward_mb
        kinds = [g.prefix + kind for g in groups]
        for g in groups:
            _record(comm, fabric, g.prefix + kind, collective, g.params * _ACT, calls, round(g.ranks), g.stride,
                    pieces=1 if per_step else max(1, round(L.layers_here)))  # FSDP gathers layer by layer
        _share(comm, kinds, window, eta)
    if not per_step:  # every micro-batch's gathers and reduce-scatters share that micro-batch's compute
        _share(comm, [g.prefix + kind for g in groups for kind in ("dp", "zero")], m * stage_mb, eta)
    if gather_api == "list" and "zero" in comm:  # every rank's slice of every call, one by one, on the critical path
        shards = groups[0].ranks
        slices = list_slices([x / t for x in M.parameter_tensors()], shards, m, L.policy, L.mode, gather_api) / p
        busy = slices * OPS_PER_SLICE * r.floor_s
        comm["slices"] = {"collective": "per-rank slices", "bytes_per_call": 0.0, "calls": slices,
                          "group": shards, "level": comm["zero"]["level"], "time_s": busy, "exposed_s": busy}


def _share(comm, kinds, window, eta) -> None:
    """The traffic of ``kinds`` hidden together behind ``window`` seconds of compute (a share ``eta`` of it),
    what is left exposed split among them by their time."""
    traffic = sum(comm[k]["time_s"] for k in kinds)
    exposed = max(0.0, traffic - eta * window)
    for k in kinds:
        comm[k]["exposed_s"] = exposed * comm[k]["time_s"] / traffic if traffic else 0.0


def link_busy(comm) -> dict:
    """Seconds each link level carries traffic, summed over the kinds that travel on it: a link sends its
    bytes one after another, so no step is shorter than its busiest link's sum."""
    busy = {}
    for x in comm.values():
        busy[x["level"]] = busy.get(x["level"], 0.0) + x["time_s"]
    return busy


def _hide_in_the_bound(comm, compute, stage_mb, p, v, overlap) -> float:
    """The bound: every link's traffic hidden as far as it fits in the step; returns the bubble without traffic.

    The window a link's traffic can hide in is the GPU's compute and the pipeline's
    idle bubble, neither of them counting communication: traffic cannot hide behind
    itself. So the bound step is at least the busiest link's time, and at least the
    busiest GPU's compute.
    """
    bubble = (p - 1) / v * stage_mb if p > 1 else 0.0
    busy = link_busy(comm)
    window = compute + bubble if overlap else 0.0
    excess = max(busy.values(), default=0.0) - window
    if not overlap:
        for x in comm.values():
            x["exposed_s"] = x["time_s"] if x["collective"] != "p2p" else x["exposed_s"]
    else:
        worst = max(busy, key=busy.get) if busy else None
        for x in comm.values():
            share = x["time_s"] / busy[worst] if worst and x["level"] == worst and busy[worst] else 0.0
            x["exposed_s"] = max(0.0, excess) * share
    return bubble


def _optimizer_s(groups, zero, r) -> float:
    """The optimizer step: Adam over this GPU's shard of the weights, at HBM speed; with ZeRO each group of
    weights (:func:`_weight_groups`) sharded over its own ranks, the experts over the expert-data-parallel ones."""
    from .. import steptime  # deferred: perf.steptime pulls in numpy (through formulas)

    optimizer_params = sum(g.params / (g.ranks if zero >= 1 else 1) for g in groups)
    return optimizer_params * steptime.ADAM_BYTES_PER_PARAM / r.bandwidth


def model_flops_per_token(model, seq, causal=True) -> float:
    """The model FLOPs of one trained token, as MFU counts them (:data:`MFU_CONVENTION`).

    6 x the parameters a token is multiplied by (a mixture's active experts, no embedding
    lookup), plus attention's matmuls under the causal mask; the multi-token prediction
    modules are trained with the model, so their active weights (their block, the 2d x d
    projection, the shared head's second pass) and their block's attention count too, as
    Megatron-LM's ``num_floating_point_operations`` counts them. ``causal=False`` counts every score of
    the T x T matrix instead (PaLM's Appendix B, Megatron-LM's formula): not MFU's count, a source's.
    """
    from .. import training  # deferred: perf.training imports numpy

    M = models.get(model)
    head_dim = (M.qk_nope_head_dim + M.qk_rope_head_dim + M.v_head_dim) / 2 if M.mla else M.head_dim
    return training.flops_per_token(M.active_params + M.mtp_active_params, M.layers + M.mtp_layers, M.heads,
                                    head_dim, whole(seq, "seq"), causal=causal)


def _flops(L: _Layout, sequence_parallel, attention) -> tuple[float, float]:
    """FLOPs of the step: the model's (MFU) and every GPU's kernels' (HFU)."""
    model_flops = model_flops_per_token(L.M, L.S) * L.B
    hardware_flops = _kernel_flops(L.M, L.b_mb, L.S, L.t, L.c, L.e, sequence_parallel, attention, L.mode,
                                   L.precision, L.dense_layers, L.moe_layers) * L.m * L.G / L.p
    return model_flops, hardware_flops


def _memory(L: _Layout, shards, sequence_parallel, attention):
    """Memory per GPU, the bound and Megatron-LM's estimate, on the pipeline stage that holds most at once."""
    held = dict(tp=L.t, pp=L.p, shards=shards, zero=L.zero, microbatches=L.m, recompute=L.mode,
                sequence_parallel=sequence_parallel, virtual_stages=L.v, seq=L.S, attention=attention, ep=L.e,
                policy=L.policy)
    memory = memory_per_gpu(L.M, L.mb_tokens / L.c, **held)
    memory_estimate = memory_per_gpu(L.M, L.mb_tokens / L.c, **held, tensors="megatron")
    stage, _ = layers_in_flight(L.M.layers, L.p, L.m, L.v)
    return memory, memory_estimate, stage


def _kernel_flops(M, b_mb, S, t, c, e, sp, attention, mode, precision, dense_layers, moe_layers) -> float:
    """FLOPs one GPU's kernels execute for one micro-batch through ALL layers and the head (recomputation in).

    ``precision``: the recipe's name; its casts count (one multiply per element), except the weights', made
    once a step (a few FLOPs per weight: under 1e-4 of a step's)."""
    from .. import steptime  # deferred: perf.steptime pulls in numpy (through formulas)

    def one(moe):
        fwd = steptime.layer_kernels(M, b_mb, S, t, c, e, sp, attention, moe=moe, recipe=precision)
        ks = fwd + steptime.backward_kernels(fwd, precision) + steptime.recompute_kernels(fwd, mode)
        return sum(k.flops for k in ks)

    head = steptime.head_kernels(M, b_mb, S, t, c, recipe=precision)
    mtp = steptime.mtp_kernels(M, b_mb, S, t, c, sp, recipe=precision)  # each module's projection and head pass
    flops = dense_layers * one(False) + (moe_layers * one(True) if moe_layers else 0.0)
    flops += M.mtp_layers * sum(k.flops for k in mtp + steptime.backward_kernels(mtp, precision))
    return flops + sum(k.flops for k in head + steptime.backward_kernels(head, precision))


def _warn(result: Plan, L: _Layout, acc, t, node, t_mb) -> None:
    from .. import training  # deferred: perf.training imports numpy

    if t > node:
        result.warnings.append(f"tp = {t} spans {math.ceil(t / node)} nodes: its all-reduces cross the network.")
    if result.fits is False:
        result.warnings.append(f"does not fit: at least {result.memory_per_gpu_bytes / 1e9:.1f} GB per GPU, "
                               f"{acc.capacity_bytes / 1e9:.1f} GB available (as the card reports it).")
    elif result.fits and result.memory_estimate_bytes > acc.capacity_bytes:
        result.warnings.append(f"fits only if the implementation keeps less than every op's inputs: "
                               f"{result.memory_estimate_bytes / 1e9:.1f} GB per GPU as Megatron-LM's eager layers "
                               f"keep them, {result.memory_per_gpu_bytes / 1e9:.1f} GB at the least, "
                               f"{acc.capacity_bytes / 1e9:.1f} GB available.")
    data = [c["time_s"] for kind, c in result.communication.items() if kind in _DATA_PARALLEL]
    if data:  # tokens per GPU at which the data-parallel traffic equals the backward pass
        traffic = sum(data)
        backward = result.microbatches * _stage_s(L, t_mb, "backward")
        if backward > 0:
            result.critical_batch_tokens_per_gpu = result.tokens_per_gpu * traffic / backward
    cb = result.critical_batch_tokens_per_gpu
    if cb is not None and result.tokens_per_gpu < cb:
        result.warnings.append(f"{result.tokens_per_gpu:.0f} tokens per GPU is below the critical batch of "
                               f"{cb:.0f}: data-parallel communication outlasts the backward pass.")
    if result.mfu > training.MFU_SUSPICIOUS:
        what = ("a bound: datasheet roofs, line-rate links, perfect overlap" if not result.calibrated
                else "an estimate")
        low, high = training.MFU_TYPICAL
        result.warnings.append(f"MFU {result.mfu:.0%} is above {training.MFU_SUSPICIOUS:.0%}, which deserves a second "
                               f"look (lesson 07): this is {what}; large published runs reach "
                               f"{low:.0%} to {high:.0%}.")
