"""The interconnect catalog: NVLink, NVSwitch domains, PCIe, InfiniBand, Ethernet and TPU ICI.

    >>> from roofkit import links
    >>> nvlink = links.get("NVLink 4")
    >>> nvlink.quoted, nvlink.quoted_unit, nvlink.direction       # as NVIDIA states it
    (900.0, 'GB/s', 'both directions')
    >>> nvlink.bandwidth                                            # what one H100 sends: bytes/s, one way
    450000000000.0
    >>> links.get("ib-ndr").bandwidth                               # 400 Gb/s: bits, one way
    50000000000.0
    >>> [link.key for link in links.for_accelerator("h100")]
    ['hgx-h100', 'nvlink4', 'pcie5', 'ib-ndr', 'ethernet-400g']

The most common confusion about links is the direction. A vendor's "900 GB/s"
for an H100's NVLink adds the two directions; what one GPU can send while it
receives as much is 450 GB/s. Every entry here keeps the figure exactly as its
source states it (:attr:`Link.quoted`, with its unit, :attr:`Link.direction`
and :attr:`Link.scope`), and :attr:`Link.bandwidth` is always bytes/s PER
DIRECTION for ONE GPU (or one port, or one ICI link): the β of the α-β model
in :mod:`roofkit.comms`. :attr:`Link.latency` is its α, seconds per hop.

The figures live in ``data/links.toml``, each with its source; which links each
accelerator has is listed there too. Names are looked up like accelerators:
case-insensitive, spaces, dashes and underscores ignored, aliases accepted.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources

from . import nccl_tuning
from .lookup import Catalog, check_table
from ..errors import InvalidValue, RoofkitError, UnknownName
from ..units import positive, whole

__all__ = ["Link", "UnknownLink", "MissingLink", "get", "catalog", "names", "for_accelerator", "check",
           "table", "scale_up", "scale_out", "per_direction", "mesh_share", "UNITS", "DIRECTIONS", "SCOPES", "ROLES"]

# quoted_unit -> bytes/s per unit
UNITS = {"bytes/s": 1.0, "GB/s": 1e9, "TB/s": 1e12, "Gb/s": 1e9 / 8}
DIRECTIONS = ("per direction", "both directions")
SCOPES = ("per GPU", "per port", "per link", "per x16 slot", "aggregate")
ROLES = ("scale-up", "host", "scale-out")
KINDS = ("nvlink", "nvswitch", "infinity-fabric", "pcie", "infiniband", "ethernet", "ici")


class UnknownLink(UnknownName):
    kind = "link"


class MissingLink(LookupError, RoofkitError):
    """The link exists, but the accelerator does not have it."""

    def __init__(self, accelerator: str, link: str, available):
        self.accelerator, self.link, self.available = accelerator, link, list(available)
        choices = ", ".join(self.available) or "none in the catalog"
        super().__init__(f"{accelerator} has no link {link!r}. Its links: {choices}.")

    def __reduce__(self):
        return (type(self), (self.accelerator, self.link, self.available))


def mesh_share(link, gpus) -> float:
    """The share of a mesh GPU's links a collective among ``gpus`` GPUs can use: min(n - 1, links) / links.

    1 for a link that is not a mesh (a switch gives every group the GPU's whole bandwidth).
    """
    if not link.mesh:
        return 1.0
    n, peers = whole(gpus, "gpus"), link.links or (link.gpus or 2) - 1
    return max(1, min(n - 1, peers)) / peers


def per_direction(quoted, unit: str, direction: str, scope: str, gpus=None) -> float:
    """Bytes/s in one direction for one GPU (port, link) from a figure as a source quotes it.

        B = quoted x unit / (2 if both directions added) / (gpus if an aggregate)

    >>> per_direction(900, "GB/s", "both directions", "per GPU")
    450000000000.0
    >>> per_direction(400, "Gb/s", "per direction", "per port")
    50000000000.0
    >>> per_direction(7.2, "TB/s", "both directions", "aggregate", gpus=8)
    450000000000.0
    """
    if unit not in UNITS:
        raise InvalidValue(f"unknown bandwidth unit {unit!r}; expected one of: {', '.join(UNITS)}.")
    if direction not in DIRECTIONS:
        raise InvalidValue(f"unknown direction {direction!r}; expected one of: {', '.join(DIRECTIONS)}.")
    if scope not in SCOPES:
        raise InvalidValue(f"unknown scope {scope!r}; expected one of: {', '.join(SCOPES)}.")
    value = positive(quoted, "quoted bandwidth") * UNITS[unit]
    if direction == "both directions":
        value /= 2
    if scope == "aggregate":
        if gpus is None:
            raise InvalidValue("an aggregate bandwidth needs the number of GPUs it is summed over (gpus).")
        value /= positive(gpus, "gpus")
    return float(value)


@dataclass(frozen=True)
class Link:
    """One interconnect. ``bandwidth`` is bytes/s per direction for one GPU; ``latency`` seconds per hop.

    ``quoted``, ``quoted_unit``, ``direction`` and ``scope`` keep the figure as
    its source states it. ``gpus`` is the size of a switched domain or a pod
    (None for a network that scales out); ``over`` names the per-GPU link of a
    domain; ``ring_links`` is how many links one chip drives at once in a ring.
    ``mesh`` marks a fully connected domain without a switch (AMD's Infinity
    Fabric between the 8 GPUs of an MI300X platform): each GPU has a link of its
    own to each other GPU, so what it can send at once depends on how many of
    them take part (:meth:`group_bandwidth`).
    """

    key: str
    name: str
    kind: str
    role: str
    quoted: float
    quoted_unit: str
    direction: str
    scope: str
    bandwidth: float
    latency: float
    gpus: int | None = None
    over: str | None = None
    links: int | None = None
    ring_links: int = 1
    nvls: bool = False  # NVLink SHARP: the NVSwitch chips reduce (Hopper and later)
    sharp: bool = False  # the network's switches can reduce (InfiniBand SHARP)
    nccl_bandwidth: float | None = None  # bytes/s per direction NCCL's ring reaches (measured or NCCL's figure)
    nvls_busbw: float | None = None  # bytes/s: nccl-tests' bus bandwidth of an NVLS all-reduce on the domain
    mesh: bool = False  # fully connected, no switch: one link of its own between each pair of GPUs
    aliases: tuple[str, ...] = ()
    sources: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def collective_bandwidth(self) -> float:
        """Bytes/s one GPU sends (and receives) at once in a ring collective: bandwidth x ring_links."""
        return self.bandwidth * self.ring_links

    def group_bandwidth(self, gpus) -> float:
        """Bytes/s one GPU sends (and receives) at once in a collective among ``gpus`` GPUs of this link.

        Through a switch (NVSwitch) or on a network port it is :attr:`collective_bandwidth`,
        however many GPUs take part. In a fully connected mesh (``mesh``) a GPU has one
        link to each other GPU: a ring crosses one link per hop, so one ring gets one
        link's bandwidth, and the n - 1 rings (or direct transfers) that a collective
        among n GPUs can run at once on different links get n - 1 of them; a send to
        one GPU (n = 2) gets one link.

        >>> mesh = get("mi300x-xgmi")
        >>> [round(mesh.group_bandwidth(n) / 1e9) for n in (2, 4, 8)]       # GB/s, one direction
        [64, 192, 448]
        >>> get("hgx-h100").group_bandwidth(2) == get("hgx-h100").group_bandwidth(8)
        True
        """
        if not self.mesh:
            return self.collective_bandwidth
        return self.bandwidth * mesh_share(self, gpus)

    @property
    def both_directions(self) -> float:
        """The two directions added: the kind of figure vendors headline."""
        return 2 * self.bandwidth

    def source(self, figure: str) -> str:
        """Where ``figure`` ('quoted', 'latency_us', 'links', 'cross_check', ...) comes from."""
        return self.sources.get(figure, self.sources.get("*", "unknown"))

    def to_dict(self) -> dict:
        return {
            "key": self.key, "name": self.name, "kind": self.kind, "role": self.role,
            "quoted": self.quoted, "quoted_unit": self.quoted_unit, "direction": self.direction,
            "scope": self.scope, "bandwidth_bytes_per_s": self.bandwidth,
            "bandwidth_convention": "per direction, one GPU (port, link)",
            "collective_bandwidth_bytes_per_s": self.collective_bandwidth, "latency_s": self.latency,
            "gpus": self.gpus, "over": self.over, "links": self.links, "ring_links": self.ring_links,
            "nvls": self.nvls, "sharp": self.sharp, "nccl_bandwidth_bytes_per_s": self.nccl_bandwidth,
            "nvls_busbw_bytes_per_s": self.nvls_busbw, "mesh": self.mesh,
            "aliases": list(self.aliases), "sources": dict(self.sources), "notes": list(self.notes),
        }


_FIELDS = {"name", "aliases", "kind", "role", "quoted", "quoted_unit", "direction", "scope", "gpus", "over",
           "links", "ring_links", "latency_us", "source", "sources", "cross_check", "notes", "nvls", "sharp",
           "nccl_gb_s", "nvls_busbw_gb_s", "mesh"}


def _choice(table: dict, name: str, choices, where: str) -> str:
    value = table.get(name)
    if value not in choices:
        raise InvalidValue(f"{where}: {name} = {value!r}; expected one of: {', '.join(choices)}.")
    return value


def _flag(table: dict, name: str, where: str) -> bool:
    value = table.get(name, False)
    if not isinstance(value, bool):
        raise InvalidValue(f"{where}: {name} must be true or false; got {value!r}.")
    return value


def _latency_us(table: dict, where: str) -> tuple[float, str | None]:
    """The link's α in µs and, when it is NCCL's, NCCL's source: a link of a kind NCCL has a class for takes
    NCCL's per-hop latency for the ring with the LL protocol (data/nccl.toml), typed nowhere else."""
    kind = nccl_tuning.link_class(table.get("kind"))
    if "latency_us" in table:
        if kind is not None:
            raise InvalidValue(f"{where}: latency_us is NCCL's for a {table['kind']} link (data/nccl.toml, "
                               f"{kind} ring LL); remove it here, so that it has one home.")
        return float(positive(table["latency_us"], f"{where}: latency_us")), None
    if kind is None:
        raise InvalidValue(f"{where}: latency_us is missing (NCCL has no latency for a {table.get('kind')} link).")
    return nccl_tuning.hw_latency_us(kind, "ring", "LL"), nccl_tuning.SOURCE + " (hwLatencies, ring, LL)"


def _nccl_bandwidth(key: str, table: dict, where: str) -> float | None:
    """Bytes/s per direction NCCL's ring reaches: a measurement (``nccl_gb_s``), or for an NVLink NCCL's own
    figure per link (data/nccl.toml) times its links; None when there is neither."""
    if "nccl_gb_s" in table:
        return float(positive(table["nccl_gb_s"], f"{where}: nccl_gb_s")) * 1e9
    per_link = nccl_tuning.nvlink_bw_gb_s(key)
    if per_link is None:
        return None
    if "links" not in table:
        raise InvalidValue(f"{where}: NCCL's bandwidth is per link (data/nccl.toml); the entry needs `links`.")
    return per_link * 1e9 * table["links"]


def _from_table(key: str, table: dict, sources: dict[str, str]) -> Link:
    where = f"link {key!r}"
    check_table(where, table, _FIELDS, ("quoted",))
    latency_us, nccl_source = _latency_us(table, where)
    unit = _choice(table, "quoted_unit", UNITS, where)
    direction = _choice(table, "direction", DIRECTIONS, where)
    scope = _choice(table, "scope", SCOPES, where)
    gpus = whole(table["gpus"], f"{where}: gpus", integer_only=True) if "gpus" in table else None
    cite = lambda source_id: sources.get(source_id, source_id)  # noqa: E731
    cited = {"*": cite(table["source"])}
    cited |= {f: cited["*"] for f in ("quoted", "gpus", "links", "ring_links", "latency_us", "nvls", "sharp",
                                      "nccl_gb_s", "nvls_busbw_gb_s", "mesh") if f in table}
    cited |= {f: cite(s) for f, s in table.get("sources", {}).items()}
    if "cross_check" in table:
        cited["cross_check"] = cite(table["cross_check"])
    if nccl_source is not None:
        cited["latency_us"] = nccl_source
    if "nccl_gb_s" not in table and nccl_tuning.nvlink_bw_gb_s(key) is not None:
        cited["nccl_gb_s"] = nccl_tuning.SOURCE + " (topo.h, the bandwidth per NVLink, times the links)"
    return Link(
        key=key, name=table.get("name", key), kind=_choice(table, "kind", KINDS, where),
        role=_choice(table, "role", ROLES, where), quoted=float(positive(table["quoted"], f"{where}: quoted")),
        quoted_unit=unit, direction=direction, scope=scope,
        bandwidth=per_direction(table["quoted"], unit, direction, scope, gpus),
        latency=latency_us * 1e-6,
        gpus=gpus, over=table.get("over"),
        links=whole(table["links"], f"{where}: links", integer_only=True) if "links" in table else None,
        ring_links=whole(table.get("ring_links", 1), f"{where}: ring_links", integer_only=True),
        nvls=_flag(table, "nvls", where), sharp=_flag(table, "sharp", where), mesh=_flag(table, "mesh", where),
        nccl_bandwidth=_nccl_bandwidth(key, table, where),
        nvls_busbw=(float(positive(table["nvls_busbw_gb_s"], f"{where}: nvls_busbw_gb_s")) * 1e9
                    if "nvls_busbw_gb_s" in table else None),
        aliases=tuple(table.get("aliases", ())), sources=cited, notes=tuple(table.get("notes", ())),
    )


_accelerators: dict[str, tuple[str, ...]] = {}


def _read() -> list[Link]:
    document = tomllib.loads(resources.files("roofkit").joinpath("data/links.toml").read_text(encoding="utf-8"))
    sources = document.pop("sources", {})
    accelerators = document.pop("accelerators", {})
    read = {key: _from_table(key, table, sources) for key, table in document.items()}
    for link in read.values():
        if link.over is not None and link.over not in read:
            raise InvalidValue(f"link {link.key!r}: over = {link.over!r} is not a link in the catalog.")
    for hw_key, keys in accelerators.items():
        missing = [k for k in keys if k not in read]
        if missing:
            raise InvalidValue(f"[accelerators] {hw_key}: unknown link(s) {missing}.")
    _accelerators.update({k: tuple(v) for k, v in accelerators.items()})
    return list(read.values())


CATALOG: Catalog[Link] = Catalog(Link, _read, UnknownLink, "link")


def get(name: str | Link) -> Link:
    """The link called ``name`` (or an alias); UnknownLink lists the closest names."""
    return CATALOG.get(name)


def catalog() -> list[Link]:
    """Every link, in catalog order."""
    return CATALOG.entries()


def names() -> list[str]:
    return CATALOG.keys()


def for_accelerator(hw) -> list[Link]:
    """The links an accelerator has, scale-up domain first (an empty list if the catalog has none)."""
    from .hardware import get as get_hw  # deferred: catalogs.hardware pulls in numpy (through formulas)

    accelerator = get_hw(hw)
    CATALOG.entries()  # reads the catalog, and with it which accelerator has which links
    return [CATALOG.get(k) for k in _accelerators.get(accelerator.key, ())]


def check(hw, link) -> Link:
    """``link`` if the accelerator has it; MissingLink, naming the ones it has, if not."""
    from .hardware import get as get_hw  # deferred: catalogs.hardware pulls in numpy (through formulas)

    chosen = get(link)
    have = for_accelerator(hw)
    if chosen.key not in {x.key for x in have}:
        raise MissingLink(get_hw(hw).name, chosen.key, [x.key for x in have])
    return chosen


def _first(hw, role: str) -> Link | None:
    candidates = [x for x in for_accelerator(hw) if x.role == role]
    domains = [x for x in candidates if x.gpus is not None]
    return (domains or candidates or [None])[0]


def table(keys=None) -> list[dict]:
    """One row per link (all, or ``keys``): as quoted, and per direction for one GPU, in GB/s.

    >>> row = table(["nvlink4"])[0]
    >>> row["quoted"], row["per_direction_gb_s"]
    ('900 GB/s, both directions, per GPU', 450.0)
    """
    chosen = catalog() if keys is None else [get(k) for k in keys]
    return [{"key": x.key, "name": x.name, "role": x.role,
             "quoted": f"{x.quoted:g} {x.quoted_unit}, {x.direction}, {x.scope}"
                       + (f" of {x.gpus} GPUs" if x.scope == "aggregate" else ""),
             "per_direction_gb_s": x.bandwidth / 1e9, "latency_us": x.latency * 1e6, "gpus": x.gpus,
             "source": x.source("quoted")} for x in chosen]


def scale_up(hw) -> Link | None:
    """The accelerator's scale-up link (an NVSwitch domain or TPU pod, when it has one), else None."""
    return _first(hw, "scale-up")


def scale_out(hw) -> Link | None:
    """The accelerator's first scale-out link (InfiniBand, Ethernet), else None."""
    return _first(hw, "scale-out")
