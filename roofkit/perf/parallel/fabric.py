"""Where a layout's collectives run: groups of ranks placed on the node's links and on the network.

Ranks are numbered TP innermost, then CP, then DP (with EP carved from it),
then PP outermost (Megatron-LM's order; Llama 3 puts DP outside PP,
arXiv:2407.21783, section 3.3.2, which differs only when TP x CP is smaller
than a node), so a group of ``size`` ranks spaced ``stride`` apart has
:func:`span` members in each node. A group inside one node uses the NVLink domain; a group with one
member per node uses each GPU's own NIC (a flat collective on the network);
a group with several members in each of several nodes is hierarchical
(:func:`roofkit.comms.hierarchical`): inside the node first, so the node's
NICs work together. That is why model parallelism across nodes cuts the
data-parallel traffic: each DP rank's gradients are 1/(t p) of the model.
"""

from __future__ import annotations

import math

from ...catalogs import links
from ...errors import InvalidValue
from ...units import whole
from .. import comms

__all__ = ["span", "Fabric", "links_of"]


def span(size: int, stride: int, node: int) -> tuple[int, int]:
    """(members per node, nodes) of a group of ``size`` ranks spaced ``stride`` apart, ``node`` GPUs a node.

    >>> span(8, 1, 8), span(64, 8, 8), span(128, 1, 8)
    ((8, 1), (1, 64), (8, 16))
    """
    per_node = max(1, min(size, node // stride)) if stride < node and node % stride == 0 else 1
    return per_node, math.ceil(size / per_node)


class Fabric:
    """The links of one layout, and the time of a collective over a group of ranks placed on them."""

    def __init__(self, intra, inter, node: int, calibrated: bool = False):
        self.intra, self.inter, self.node, self.calibrated = intra, inter, node, calibrated

    def level(self, group: int, stride: int) -> str:
        """'intra' when the group fits in one node, else 'inter'."""
        return "intra" if group < 2 or span(group, stride, self.node)[1] == 1 else "inter"

    def time(self, kind: str, size: float, group: int, stride: int) -> float:
        """Seconds of one ``kind`` collective of ``size`` bytes (nccl-tests' convention) over the group."""
        if group < 2:
            return 0.0
        k, m = span(group, stride, self.node)
        if m > 1 and self.inter is None:
            raise InvalidValue(f"a group of {group} GPUs spans {m} nodes of {self.node}, and the accelerator "
                               "has no scale-out link in the catalog.")
        cal = self.calibrated
        if m == 1:
            return comms.collective(kind, size, k if kind != "p2p" else 2, self.intra, "auto" if kind == "all-reduce"
                                    else "ring", calibrated=cal).time_s
        if kind == "p2p":
            return comms.collective("p2p", size, 2, self.inter, calibrated=cal).time_s
        if kind == "all-to-all":  # the share for other nodes leaves through each GPU's NIC, the rest over NVLink
            n = k * m
            out = comms.collective("all-to-all", size * (n - k) / n * m / (m - 1), m, self.inter, calibrated=cal)
            inside = comms.collective("all-to-all", size * k / n, k, self.intra, calibrated=cal) if k > 1 else None
            return max(out.time_s, inside.time_s if inside else 0.0)
        if k == 1:
            return comms.collective(kind, size, m, self.inter, "auto" if kind == "all-reduce" else "ring",
                                    calibrated=cal).time_s
        return comms.hierarchical(kind, size, k, m, self.intra, self.inter, calibrated=cal).time_s


def links_of(hw, intra=None, inter=None, node_gpus=None):
    """(intra, inter, GPUs per node) for an accelerator: its NVLink domain (or host link) and first network."""
    accelerator = hw
    intra = links.check(accelerator, intra) if intra is not None else links.scale_up(accelerator)
    inter = links.check(accelerator, inter) if inter is not None else links.scale_out(accelerator)
    if intra is None:
        host = [x for x in links.for_accelerator(accelerator) if x.role == "host"]
        if not host:
            raise InvalidValue(f"{accelerator.name} has no link in the catalog (roofkit.links); "
                               f"accelerators with links: see data/links.toml [accelerators].")
        intra = host[0]
    node = node_gpus if node_gpus is not None else intra.gpus
    if node is None:
        domains = [x.key for x in links.for_accelerator(accelerator) if x.gpus is not None]
        hint = f"choose one of its domains ({', '.join(domains)}) or " if domains else ""
        raise InvalidValue(f"{intra.key} says nothing about how many GPUs share a node: {hint}pass node_gpus "
                           f"(--node-gpus).")
    return intra, inter, whole(node, "node_gpus")
