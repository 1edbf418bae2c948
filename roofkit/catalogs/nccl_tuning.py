"""NCCL's tuning figures, read from ``data/nccl.toml``: the one place they are typed.

NCCL picks an algorithm and a protocol for each collective from a small model
of its own (``src/graph/tuning.cc``): per call a base latency, per step a
hardware latency by kind of link, and a share of the link's bandwidth per
protocol. :mod:`roofkit.nccl` models collectives with them, and
:mod:`roofkit.links` takes a link's α, its latency per hop, from the same table
(the ring with the LL protocol, on the link's class), so that changing one
figure moves every result that uses it.

    >>> hw_latency_us("nvlink", "ring", "LL"), base_latency_us("ring", "Simple")
    (0.6, 8.4)
    >>> link_class("nvswitch"), link_class("ici") is None
    ('nvlink', True)
"""

from __future__ import annotations

import functools
import tomllib
from importlib import resources

from ..errors import InvalidValue

__all__ = ["SOURCE", "tables", "protocol_share", "base_latency_us", "hw_latency_us", "link_class", "constant",
           "nvlink_bw_gb_s", "ALGORITHMS", "PROTOCOLS", "KINDS"]

ALGORITHMS = ("ring", "tree", "nvls", "collnet")
PROTOCOLS = ("LL", "LL128", "Simple")
KINDS = ("nvlink", "pci", "net")


@functools.cache
def tables() -> dict:
    """``data/nccl.toml`` as read, checked once: every algorithm, protocol and kind it must have."""
    data = tomllib.loads(resources.files("roofkit").joinpath("data/nccl.toml").read_text(encoding="utf-8"))
    if set(data["protocol_share"]) != set(PROTOCOLS):
        raise InvalidValue(f"data/nccl.toml: [protocol_share] must give {', '.join(PROTOCOLS)}.")
    if set(data["hw_latency_us"]) != set(KINDS):
        raise InvalidValue(f"data/nccl.toml: [hw_latency_us] must give {', '.join(KINDS)}.")
    for table in (data["base_latency_us"], *data["hw_latency_us"].values()):
        if set(table) != set(ALGORITHMS):
            raise InvalidValue(f"data/nccl.toml: each latency table must give {', '.join(ALGORITHMS)}.")
    return data


SOURCE = tables()["source"]


def _check_protocol(protocol: str) -> None:
    if protocol not in PROTOCOLS:
        raise InvalidValue(f"unknown protocol {protocol!r}; expected one of: {', '.join(PROTOCOLS)}.")


def _check(algorithm: str, protocol: str) -> None:
    if algorithm not in ALGORITHMS:
        raise InvalidValue(f"unknown algorithm {algorithm!r}; expected one of: {', '.join(ALGORITHMS)}.")
    _check_protocol(protocol)


def _entry(table: dict, algorithm: str, protocol: str) -> float:
    _check(algorithm, protocol)
    if protocol not in table[algorithm]:
        raise InvalidValue(f"NCCL runs {algorithm} with the Simple protocol only; got {protocol!r}.")
    return float(table[algorithm][protocol])


def protocol_share(protocol: str) -> float:
    """The share of a link's bandwidth ``protocol`` carries as data."""
    _check_protocol(protocol)
    return float(tables()["protocol_share"][protocol])


def base_latency_us(algorithm: str, protocol: str) -> float:
    """Microseconds NCCL charges once per call (tuning.cc's baseLatencies)."""
    return _entry(tables()["base_latency_us"], algorithm, protocol)


def hw_latency_us(kind: str, algorithm: str, protocol: str) -> float:
    """Microseconds per step of ``algorithm`` with ``protocol`` on a link of NCCL's ``kind`` (tuning.cc's
    hwLatencies)."""
    if kind not in KINDS:
        raise InvalidValue(f"unknown kind of link {kind!r}; expected one of: {', '.join(KINDS)}.")
    return _entry(tables()["hw_latency_us"][kind], algorithm, protocol)


def link_class(link_kind: str) -> str | None:
    """NCCL's class ('nvlink', 'pci', 'net') for a catalog link's kind; None for a link NCCL does not run on."""
    return tables()["link_class"].get(link_kind)


def nvlink_bw_gb_s(link_key: str) -> float | None:
    """GB/s per direction NCCL's topology search gives one link of the NVLink generation ``link_key`` (a
    roofkit.links key: 'nvlink4'); None for a link it gives none."""
    value = tables()["nvlink_bw_gb_s"].get(link_key)
    return None if value is None else float(value)


def constant(name: str) -> float:
    """One of NCCL's other tuning constants (``tree_bandwidth_share``, ``ring_plateau``)."""
    return float(tables()["constants"][name])
