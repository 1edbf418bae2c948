"""Expert parallelism: a mixture of experts spread over ``ep`` GPUs, and the all-to-alls it costs.

Each MoE layer routes every token to ``top_k`` of its experts. With the experts
spread over ep GPUs, each GPU sends its tokens' activations to the GPUs that hold
their experts (dispatch) and gets the results back (combine): two all-to-alls
in the forward pass, two in the backward (the scaling book, gpus.md, "Expert
Parallelism"; DeepSeek-V3, arXiv:2412.19437, section 3.2.2). Each sends
tokens x top_k x d values: unlike tensor parallelism's all-reduces, it grows
with k, and across nodes it leaves through the NICs.
"""

from __future__ import annotations

from ...units import positive
from .. import comms

__all__ = ["A2A_PER_LAYER", "expert_all_to_all", "all_to_all_bytes"]

A2A_PER_LAYER = 4  # dispatch and combine, forward and backward


def all_to_all_bytes(tokens, d_model, top_k, bytes_per_element=2):
    """Each GPU's send buffer for one dispatch: tokens x top_k x d_model x b."""
    return positive(tokens, "tokens") * positive(top_k, "top_k") * positive(d_model, "d_model") \
        * positive(bytes_per_element, "bytes_per_element")


def expert_all_to_all(tokens, d_model, top_k, ep, link, bytes_per_element=2, calibrated=False):
    """Seconds of the four all-to-alls of one MoE layer (dispatch and combine, forward and backward).

    >>> round(expert_all_to_all(8192, 7168, 8, 8, "hgx-h100") * 1e3, 2)      # ms, DeepSeek-V3's width, one node
    7.4
    """
    size = all_to_all_bytes(tokens, d_model, top_k, bytes_per_element)
    return A2A_PER_LAYER * comms.all_to_all(size, ep, link, calibrated=calibrated).time_s
