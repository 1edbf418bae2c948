"""Data parallelism and ZeRO / FSDP: what each GPU holds, and what the data-parallel ranks send each step.

ZeRO (Rajbhandari et al. 2020, arXiv:1910.02054) shards the training state over
the ``shards`` ranks that hold the same weights: stage 1 the optimizer states
(the FP32 master weights and Adam's moments), stage 2 the gradients too,
stage 3 the weights too (PyTorch's FSDP). How stage 3 gathers its weights is a
policy, not a law (PyTorch FSDP's ``ShardingStrategy`` and FSDP2's
``reshard_after_forward``):

    full-shard      free the gathered weights after each layer's forward; gather them again
                    for its backward (and for a recomputed forward); every micro-batch
                    (ZeRO-3, FSDP FULL_SHARD)
    shard-grad-op   keep them from the forward to the backward: one gather per micro-batch
                    (FSDP SHARD_GRAD_OP)
    per-step        keep them through the whole step: one gather and one gradient
                    reduce-scatter per step, the traffic of stages 1 and 2 (Llama 3's FSDP:
                    "for model shards we do not reshard after forward computation",
                    arXiv:2407.21783, section 3.3.2)

    >>> zero_collectives(3, microbatches=4)
    {'dp': ('reduce-scatter', 4), 'zero': ('all-gather', 8)}
    >>> zero_collectives(3, microbatches=4, policy="per-step")
    {'dp': ('reduce-scatter', 1), 'zero': ('all-gather', 1)}
"""

from __future__ import annotations

from ...errors import InvalidValue
from ...units import positive, whole
from .. import comms

__all__ = ["ZERO_STAGES", "POLICIES", "GATHER_APIS", "PERSISTENCE_THRESHOLD", "OPS_PER_SLICE", "policy_of",
           "zero_collectives", "sync_volume", "state_bytes", "list_slices"]

ZERO_STAGES = (0, 1, 2, 3)
POLICIES = ("full-shard", "shard-grad-op", "per-step")
# how stage 3 hands its buffers to the collectives: one flat buffer (torch.distributed.all_gather_into_tensor and
# reduce_scatter_tensor: FSDP, DeepSpeed from v0.5.5) or a list of one tensor per rank (the list forms
# all_gather and reduce_scatter: DeepSpeed's ZeRO-3 of 2021, v0.3.12 to v0.5.4)
GATHER_APIS = ("flat", "list")
# DeepSpeed's stage3_param_persistence_threshold default (deepspeed/runtime/zero/stage3.py, v0.3.13 on):
# parameters with fewer elements stay gathered between steps
PERSISTENCE_THRESHOLD = 100_000
# with the list forms, each rank's slice of every call is handled on its own, twice: DeepSpeed's Python makes a
# view of it (partition_parameters.py: _allgather_param, _reduce_scatter_gradient, a loop over the world size) and
# PyTorch's process group copies it out of or into its flat buffer (ProcessGroupNCCL::allgather and ::reduce_scatter
# with tensor lists, PyTorch 1.8: one copy_ per rank; "the torch.distributed.all_gather will do implicit memcpy
# at the end of each ncclAllgather", DeepSpeed pull request 1188)
OPS_PER_SLICE = 2


def _stage(zero) -> int:
    if zero not in ZERO_STAGES:
        raise InvalidValue(f"zero must be one of {', '.join(map(str, ZERO_STAGES))}; got {zero!r}.")
    return zero


def policy_of(zero, policy=None) -> str | None:
    """The stage-3 gathering policy (default 'full-shard'); None for stages 0 to 2, which gather once a step."""
    _stage(zero)
    if zero < 3:
        if policy not in (None, "per-step"):
            raise InvalidValue(f"a gathering policy ({', '.join(POLICIES)}) belongs to ZeRO-3 (FSDP); "
                               f"zero = {zero} gathers once a step.")
        return None
    policy = policy or "full-shard"
    if policy not in POLICIES:
        raise InvalidValue(f"policy must be one of {', '.join(POLICIES)}; got {policy!r}.")
    return policy


def zero_collectives(zero, microbatches=1, policy=None, recompute="none") -> dict:
    """The data-parallel collectives of one step, by ZeRO stage: {kind: (collective, calls)}.

    Each call moves as many bytes as this GPU's gradients (the weights it
    gathers are as many, also in 16 bits), among the ranks that hold the same
    weights (Rajbhandari et al. 2020, section 7; the scaling book, training.md):

        stage 0   'dp': all-reduce the gradients, once a step
        1, 2      'dp': reduce-scatter the gradients; 'zero': all-gather the updated weights
        3         'dp': reduce-scatter, 'zero': all-gather, as often as the policy says (module
                  docstring): full-shard gathers in the forward AND in the backward of every
                  micro-batch (and once more for a fully recomputed forward)
    """
    from ..steptime import recompute_mode  # deferred: perf.steptime pulls in numpy (through formulas)

    m = whole(microbatches, "microbatches")
    policy = policy_of(zero, policy)
    if zero == 0:
        return {"dp": ("all-reduce", 1)}
    if zero in (1, 2) or policy == "per-step":
        return {"dp": ("reduce-scatter", 1), "zero": ("all-gather", 1)}
    if policy == "shard-grad-op":
        return {"dp": ("reduce-scatter", m), "zero": ("all-gather", m)}
    gathers = 3 if recompute_mode(recompute) == "full" else 2
    return {"dp": ("reduce-scatter", m), "zero": ("all-gather", gathers * m)}


def sync_volume(zero, shards, microbatches=1, policy=None, recompute="none"):
    """Bytes each GPU sends in one step's data-parallel traffic, per byte of its gradients.

    The sum over :func:`zero_collectives` of calls x f(n) (:func:`roofkit.comms.volume`):
    2(n - 1)/n for stages 0 to 2 (an all-reduce is a reduce-scatter and an
    all-gather), 3m(n - 1)/n for stage 3 with m micro-batches (full-shard).

    >>> sync_volume(0, 8), sync_volume(1, 8), sync_volume(3, 8)
    (1.75, 1.75, 2.625)
    """
    return sum(calls * comms.volume(collective, shards) for collective, calls in
               zero_collectives(zero, microbatches, policy, recompute).values())


def state_bytes(params, shards=1, zero=0, weights="bf16", grads="bf16", master="fp32", moments="fp32",
                policy=None) -> dict:
    """Bytes per GPU of weights, gradients and optimizer states for ``params`` parameters held by this GPU.

    ZeRO (Rajbhandari et al. 2020, section 5) shards over ``shards`` ranks:
    stage 1 the optimizer states (FP32 master and Adam's moments), stage 2 the
    gradients too, stage 3 the weights too. 16 bytes per parameter unsharded.
    Stage 3 with the per-step policy keeps the gathered weights and the
    accumulating gradients whole through the step: only the optimizer states
    stay sharded.
    """
    from .. import training  # deferred: perf.training imports numpy

    policy = policy_of(zero, policy)
    N, d = positive(params, "params"), positive(shards, "shards")
    per = training.adam_memory_per_param(weights, grads, master, moments)
    optimizer = per["master"] + per["first_moment"] + per["second_moment"]
    whole_step = policy == "per-step"
    parts = {"weights": N * per["weights"] / (d if zero >= 3 and not whole_step else 1),
             "grads": N * per["grads"] / (d if zero >= 2 and not whole_step else 1),
             "optimizer": N * optimizer / (d if zero >= 1 else 1)}
    return parts | {"total": sum(parts.values())}


def list_slices(tensors, shards, microbatches=1, policy=None, recompute="none", gather_api="flat") -> int:
    """Ranks' slices a step of ZeRO-3 handles one by one with the ``gather_api='list'`` collectives (0 with 'flat').

    DeepSpeed's ZeRO-3 of 2021 gathered and reduce-scattered every parameter
    tensor with its own call; with the list forms each call walks all
    ``shards`` ranks' slices (:data:`OPS_PER_SLICE` operations each). A tensor
    of :data:`PERSISTENCE_THRESHOLD` elements or more is gathered as the policy
    says and reduce-scattered once per micro-batch; a smaller one stays
    gathered, reduce-scattered the same, and gathered again once after the
    optimizer step. ``tensors``: the elements of each parameter tensor this GPU
    shards (:meth:`roofkit.models.Model.parameter_tensors`).

    >>> list_slices([10**6, 10**3], shards=8, recompute="full", gather_api="list")  # (3 + 1) x 8 + (1 + 1) x 8
    48
    """
    if gather_api not in GATHER_APIS:
        raise InvalidValue(f"gather_api must be one of {', '.join(GATHER_APIS)}; got {gather_api!r}.")
    if gather_api == "flat":
        return 0
    calls = zero_collectives(3, microbatches, policy, recompute)
    large = calls["zero"][1] + calls["dp"][1]
    small = 1 + calls["dp"][1]
    n = whole(shards, "shards")
    return n * sum(large if elements >= PERSISTENCE_THRESHOLD else small for elements in tensors)
