"""How NCCL runs a collective: its algorithms, its three protocols, and the tuner that picks among them.

NCCL (NVIDIA's collective library) does not run every collective on a ring.
For each call it estimates, per algorithm and protocol,

    T = latency + S / bandwidth

and runs the fastest (``ncclTopoGetAlgoTime`` in ``src/graph/tuning.cc``).
This module models that choice with NCCL's figures, transcribed from NVIDIA/nccl,
commit 5067397 (``src/graph/tuning.cc``, ``src/graph/topo.h``) into
``data/nccl.toml`` and read from there (:mod:`roofkit.catalogs.nccl_tuning`):

* **algorithms**: ``ring`` (reduce-scatter then all-gather around a ring; 2(n-1)
  steps), ``tree`` (NCCL's double binary tree: a chain inside the node, a tree of
  depth log2 of the nodes across them), ``nvls`` (NVLink SHARP: the NVSwitch
  adds the buffers itself, Hopper and later on an NVSwitch system; each GPU
  sends its buffer once instead of 2(n-1)/n times), ``collnet`` (in-network
  reduction in the InfiniBand switches, SHARP, across nodes; only with NCCL's
  CollNet plugin) and PAT (all-gather and reduce-scatter with one GPU per node,
  not modelled).
* **protocols**: ``LL`` (8-byte stores with a flag: the lowest latency, half the
  bandwidth), ``LL128`` (128-byte lines, 120 of them data: 0.92 of the bandwidth
  in NCCL's model), ``Simple`` (large chunks with fences: the full bandwidth and
  the highest latency).
* **latencies** (µs): a base latency per call and a hardware latency per step,
  per algorithm, protocol and kind of link (NVLink, PCI, network).

roofkit uses them in two ways (:mod:`roofkit.comms`):

* the **bound** (default): every step at the hardware latency of the protocol,
  no base latency, the bytes at the link's line rate times the protocol's
  bandwidth share, the best protocol and (``auto``) the best algorithm: no real
  collective is faster;
* **calibrated**: NCCL's own latencies (base plus steps), and the bandwidth
  nccl-tests measures on that link (:func:`effective_bandwidth`).

    >>> protocol_share("LL"), protocol_share("Simple")
    (0.5, 1.0)
    >>> hw_latency("nvlink", "ring", "LL") * 1e6, hw_latency("net", "ring", "Simple") * 1e6
    (0.6, 14.0)
"""

from __future__ import annotations

from ..catalogs import links, nccl_tuning
from ..catalogs.nccl_tuning import ALGORITHMS, PROTOCOLS, SOURCE

__all__ = ["ALGORITHMS", "PROTOCOLS", "SOURCE", "protocol_share", "hw_latency", "base_latency", "link_class",
           "nvls_capable", "in_network_reduction", "effective_bandwidth", "nvls_bandwidth", "TREE_BANDWIDTH_SHARE",
           "RING_PLATEAU", "custom_all_reduce_measurements"]

# NCCL's figures are typed once, in data/nccl.toml (roofkit.catalogs.nccl_tuning); these read them.
TREE_BANDWIDTH_SHARE = nccl_tuning.constant("tree_bandwidth_share")  # an all-reduce on a tree, busBw * .92
RING_PLATEAU = nccl_tuning.constant("ring_plateau")  # a ring all-reduce across nodes, Simple, latency x 1.4


def protocol_share(protocol: str) -> float:
    """The share of a link's bandwidth a protocol carries as data: LL 0.5, LL128 0.92, Simple 1."""
    return nccl_tuning.protocol_share(protocol)


def link_class(link) -> str | None:
    """'nvlink', 'pci' or 'net': which of NCCL's latency tables a catalog link uses (None: not NCCL's, e.g. TPU ICI)."""
    return nccl_tuning.link_class(link.kind)


def hw_latency(kind: str, algorithm: str, protocol: str) -> float:
    """Seconds per step of ``algorithm`` with ``protocol`` on a link of NCCL's ``kind`` ('nvlink', 'pci', 'net').

    Raises InvalidValue for a combination NCCL does not run (NVLS and CollNet use Simple only).
    """
    return nccl_tuning.hw_latency_us(kind, algorithm, protocol) * 1e-6


def base_latency(algorithm: str, protocol: str) -> float:
    """Seconds NCCL's model charges once per call (tuning.cc's baseLatencies)."""
    return nccl_tuning.base_latency_us(algorithm, protocol) * 1e-6


def protocols(algorithm: str) -> tuple[str, ...]:
    """The protocols NCCL runs ``algorithm`` with."""
    return PROTOCOLS if algorithm in ("ring", "tree") else ("Simple",)


def nvls_capable(link) -> bool:
    """True for an NVSwitch domain whose switches reduce (NVLink SHARP): the catalog's ``nvls`` flag."""
    return bool(getattr(link, "nvls", False))


def in_network_reduction(link) -> bool:
    """True for a network whose switches can reduce (InfiniBand SHARP): the catalog's ``sharp`` flag."""
    return bool(getattr(link, "sharp", False))


def effective_bandwidth(link, gpus=None) -> float:
    """Bytes/s per direction that NCCL's ring reaches on ``link``: the achievable roof of the link.

    On a fully connected mesh (``link.mesh``) a collective among ``gpus`` GPUs uses
    only min(gpus - 1, links) of each GPU's links (:func:`roofkit.links.mesh_share`);
    without ``gpus`` the figure is the whole domain's.

    The catalog's ``nccl_gb_s`` where a measurement or NCCL's own per-link figure
    is sourced (8 x H100 over NVSwitch: nccl-tests' ring all-reduce bus bandwidth,
    about 370 GB/s; one NDR port: 48 GB/s). A link without one gets the share of
    its line rate that the measured links of its kind reach (the median), and
    an NVSwitch domain the figure of the NVLink it is built on.
    """
    share = links.mesh_share(link, gpus) if gpus is not None and getattr(link, "mesh", False) else 1.0
    if getattr(link, "nccl_bandwidth", None):
        return link.nccl_bandwidth * share
    if link.over is not None:
        under = links.get(link.over)
        if getattr(under, "nccl_bandwidth", None):
            return under.nccl_bandwidth * link.bandwidth / under.bandwidth
    shares = sorted(x.nccl_bandwidth / x.bandwidth for x in links.catalog()
                    if getattr(x, "nccl_bandwidth", None) and link_class(x) == link_class(link))
    if not shares:
        return link.bandwidth
    return link.bandwidth * shares[len(shares) // 2]


def nvls_bandwidth(link) -> float | None:
    """Bytes/s per direction one GPU's buffer crosses NVLink SHARP at, as measured (None: no measurement).

    From the catalog's ``nvls_busbw_gb_s``, nccl-tests' bus bandwidth of an NVLS
    all-reduce on the whole domain: each GPU sends its buffer once, so the
    algorithm bandwidth is the per-direction figure, busbw / (2(n-1)/n).
    """
    measured = getattr(link, "nvls_busbw", None)
    if not measured or link.gpus is None:
        return None
    n = link.gpus
    return measured / (2 * (n - 1) / n)


def custom_all_reduce_measurements() -> dict:
    """The measured times of the serving engines' own one-shot and two-shot all-reduces (not NCCL's), as
    ``data/nccl.toml`` holds them: ``source``, ``link`` (a catalog key) and ``measured``, rows of
    [GPUs, algorithm, bytes, seconds]. :func:`roofkit.comms.custom_round_latency` reads a round's cost from them."""
    table = nccl_tuning.tables()["custom_all_reduce"]
    return {"source": table["source"], "link": table["link"], "measured": [tuple(row) for row in table["measured"]]}
