"""Parallelism: how a training step splits over GPUs, what it sends, what it costs, what it holds.

One concept per module:

    pipeline     schedules (1F1B, interleaved; zero-bubble named) and their bubble
    sharding     ZeRO stages and FSDP's gathering policies: traffic and state bytes
    memory       activations (sequence parallelism, recomputation) and memory per GPU
    limits       the scaling book's critical batch (DP) and critical degree (TP)
    fabric       where a group of ranks runs: the NVLink domain, the network, or both
    experts      expert parallelism's all-to-alls
    plan         the step: compute, communication, bubble, optimizer; MFU, HFU, memory
    search       the fastest layouts of a grid
    published    published training runs, in roofkit's terms
    constants    the calibrated model's two shares and the values in use
    calibration  how they are fitted on published runs, and leave-one-out

    >>> from roofkit import parallel
    >>> p = parallel.plan("llama-3-70b", "h100", 1024, 4 * 2**20, 8192, tp=8, pp=4, zero=1)
    >>> p.mode, round(p.mfu, 2) > round(parallel.plan("llama-3-70b", "h100", 1024, 4 * 2**20, 8192, tp=8, pp=4,
    ...                                                 zero=1, calibrated=True).mfu, 2)
    ('bound', True)
"""

from .experts import A2A_PER_LAYER, all_to_all_bytes, expert_all_to_all
from .fabric import Fabric, span
from .limits import dp_critical_batch, tp_critical_degree
from .memory import TENSORS, activation_bytes, layer_params, memory_per_gpu
from .pipeline import (SCHEDULES, bubble_fraction, bubble_time, chunk_layers, in_flight, layers_in_flight,
    microbatches_for_bubble, schedule)
from .plan import MFU_CONVENTION, Plan, model_flops_per_token, plan, tp_collectives
from .search import search
from .sharding import (GATHER_APIS, OPS_PER_SLICE, PERSISTENCE_THRESHOLD, POLICIES, ZERO_STAGES, list_slices, policy_of,
                       state_bytes, sync_volume, zero_collectives)

__all__ = ["ZERO_STAGES", "POLICIES", "GATHER_APIS", "OPS_PER_SLICE", "PERSISTENCE_THRESHOLD", "list_slices", "SCHEDULES", "bubble_fraction", "bubble_time", "microbatches_for_bubble",
           "in_flight", "chunk_layers", "layers_in_flight", "schedule", "dp_critical_batch", "tp_critical_degree", "zero_collectives", "sync_volume",
           "state_bytes", "policy_of", "TENSORS", "activation_bytes", "memory_per_gpu", "layer_params", "expert_all_to_all",
           "all_to_all_bytes", "A2A_PER_LAYER", "Fabric", "span", "Plan", "plan", "search", "MFU_CONVENTION",
           "model_flops_per_token", "tp_collectives"]
