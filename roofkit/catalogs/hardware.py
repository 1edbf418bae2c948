"""The accelerator catalog: sourced peaks, bandwidth and memory, looked up by name.

    >>> from roofkit import hardware
    >>> h100 = hardware.get("H100")
    >>> h100.peak("bf16")
    989000000000000.0
    >>> round(h100.ridge("bf16"), 1)
    295.2

The figures live in ``data/hardware.toml`` with a source on every number; this
module only reads them.

Datasheet figures are the default roof. Where a measurement is published, an
entry also holds ACHIEVABLE figures (the best matmul rate a sweep of shapes
reached, and a device-to-device copy's bandwidth), asked for explicitly:

    >>> h200 = hardware.get("h200")
    >>> h200.peak("bf16"), h200.peak("bf16", achievable=True)
    (989000000000000.0, 800900000000000.0)
    >>> round(h200.memory_bandwidth(achievable=True) / h200.memory_bandwidth(), 3)
    0.89
    >>> h100.has_achievable("bf16"), h100.has_achievable("fp16")
    (True, False)

A figure nobody published is absent: asking for it raises
:class:`NoAchievableFigure`, never a datasheet figure in disguise. Names are case-insensitive and ignore spaces, dashes
and underscores, so ``"H100 SXM5"``, ``"h100-sxm"`` and ``"h100"`` are one
accelerator. Add your own with :func:`register` (a dict, or a TOML file in the
catalog's format): a laptop, or a profile saved by ``roofkit measure``.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from .. import dtypes
from .lookup import Catalog, check_table, normalize
from ..errors import InvalidValue, RoofkitError, UnknownHardware, UnsupportedPrecision
from ..formulas import FLOPS_PER_FMA, ridge_point
from ..units import positive

__all__ = ["Accelerator", "NoAchievableFigure", "get", "catalog", "names", "register", "load_file", "normalize",
           "match_device"]

# field name in the TOML -> (attribute, multiplier to SI)
_SCALED = {
    "bandwidth_tb_s": ("bandwidth", 1e12),
    "memory_gb": ("memory_bytes", 1e9),
    "memory_gib": ("memory_bytes", 2**30),
    "usable_memory_mib": ("usable_memory_bytes", float(2**20)),  # what the card reports as its total (nvidia-smi)
    "l2_mb": ("l2_bytes", 1e6),
    "register_file_kib": ("register_file_bytes", 1024.0),  # per SM
    "l1_shared_kib": ("l1_shared_bytes", 1024.0),  # per SM: L1 data cache and shared memory together
}


class NoAchievableFigure(LookupError, RoofkitError):
    """The catalog has no achievable (measured) figure for that roof of that accelerator."""

    def __init__(self, accelerator: str, figure: str, available: list[str]):
        self.accelerator, self.figure, self.available = accelerator, figure, list(available)
        have = f"It has achievable figures for: {', '.join(self.available)}." if self.available else \
            "It has no achievable figures at all."
        super().__init__(f"{accelerator} has no achievable {figure} in the catalog (none is published). {have} "
                         "Use the datasheet figure (achievable=False; on the command line, leave out "
                         "--calibrated), or measure the GPU with `roofkit measure` (--profile PATH).")

    def __reduce__(self):
        return (type(self), (self.accelerator, self.figure, self.available))


@dataclass(frozen=True)
class Accelerator:
    """One accelerator. All figures in SI units: FLOP/s, bytes/s, bytes.

    ``peak_flops`` maps a canonical precision (see :mod:`roofkit.dtypes`) to the
    DENSE peak in FLOP/s (OP/s for int8). ``sources`` maps every figure's field
    name (``"bandwidth"``, ``"peak.bf16"``, ...) to where it comes from.
    """

    key: str
    name: str
    vendor: str
    peak_flops: dict[str, float]
    bandwidth: float
    memory_bytes: float | None = None  # the datasheet's capacity
    usable_memory_bytes: float | None = None  # the total the card itself reports (nvidia-smi), where published
    l2_bytes: float | None = None
    compute_units: int | None = None
    compute_unit_name: str = "SM"
    register_file_bytes: float | None = None  # per SM (compute unit)
    l1_shared_bytes: float | None = None  # per SM: the L1 data cache and shared memory, one SRAM
    memory_type: str | None = None  # "HBM3", "GDDR6", ...
    aliases: tuple[str, ...] = ()
    sources: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    achievable_flops: dict[str, float] = field(default_factory=dict)  # precision -> best measured matmul FLOP/s
    achievable_bandwidth: float | None = None  # measured device-to-device copy, bytes/s
    clocks: dict[str, float] = field(default_factory=dict)  # name ('boost', 'tensor', ...) -> Hz
    tensor_cores_per_unit: int | None = None
    tensor_fma_per_clock: dict[str, float] = field(default_factory=dict)  # precision -> dense FMAs per tensor core per clock
    achievable_attention_flops: dict[str, float] = field(default_factory=dict)  # precision -> best fused attention FLOP/s

    def peak(self, precision: str, achievable: bool = False) -> float:
        """Dense peak FLOP/s in ``precision``; UnsupportedPrecision if the chip lacks it.

        ``achievable=True``: the best matmul rate measured (:attr:`achievable_flops`)
        instead of the datasheet's; NoAchievableFigure where none is published.
        """
        key = dtypes.canonical(precision)
        if key not in self.peak_flops:
            raise UnsupportedPrecision(self.name, key, self.peak_flops)
        if _flag(achievable):
            if key not in self.achievable_flops:
                raise NoAchievableFigure(self.name, f"{key} matmul FLOP/s", self._achievable_list())
            return self.achievable_flops[key]
        return self.peak_flops[key]

    def memory_bandwidth(self, achievable: bool = False) -> float:
        """Memory bandwidth in bytes/s: the datasheet's, or with ``achievable=True`` a measured copy's."""
        if _flag(achievable):
            if self.achievable_bandwidth is None:
                raise NoAchievableFigure(self.name, "memory bandwidth", self._achievable_list())
            return self.achievable_bandwidth
        return self.bandwidth

    def attention_peak(self, precision: str) -> float:
        """The best rate measured for a fused (FlashAttention-style) attention kernel, FLOP/s.

        Attention does not reach the matmul's achievable rate: its softmax, masking and
        synchronization sit between its two matrix products. NoAchievableFigure where
        none is published (then :meth:`peak` ``(achievable=True)`` is the optimistic stand-in).
        """
        key = dtypes.canonical(precision)
        if key not in self.achievable_attention_flops:
            raise NoAchievableFigure(self.name, f"{key} attention FLOP/s", self._achievable_list())
        return self.achievable_attention_flops[key]

    def ridge(self, precision: str, achievable: bool = False) -> float:
        """The ridge point (FLOP/byte) in ``precision``: peak / bandwidth (both achievable, or both datasheet)."""
        return ridge_point(self.peak(precision, achievable), self.memory_bandwidth(achievable))

    def clock(self, name: str = "tensor") -> float:
        """A clock rate in Hz: 'boost' (the most the chip runs at), 'tensor' (the clock its tensor-core
        peaks assume), or another the catalog lists for this chip (:attr:`clocks`)."""
        if name not in self.clocks:
            have = f"it lists {', '.join(sorted(self.clocks))}" if self.clocks else "it lists none for this chip"
            raise InvalidValue(f"{self.name} has no clock {name!r} in the catalog; {have}.")
        return self.clocks[name]

    def peak_from_parts(self, precision: str, clock_hz: float | None = None) -> float:
        """Dense tensor-core FLOP/s multiplied out from the chip's parts:

            units x tensor cores per unit x FMAs per tensor core per clock x 2 FLOPs per FMA x clock

        at ``clock_hz`` (default: the 'tensor' clock, which reproduces the datasheet's peak).
        """
        key = dtypes.canonical(precision)
        if key not in self.tensor_fma_per_clock or not self.compute_units or not self.tensor_cores_per_unit:
            raise InvalidValue(f"the catalog has no tensor-core parts for {key} on the {self.name}; it has them for: "
                               f"{', '.join(self.tensor_fma_per_clock) or 'no precision'}.")
        clock = self.clock("tensor") if clock_hz is None else positive(clock_hz, "clock_hz")
        return self.compute_units * self.tensor_cores_per_unit * self.tensor_fma_per_clock[key] * FLOPS_PER_FMA * clock

    def has_achievable(self, figure: str) -> bool:
        """Whether the catalog holds an achievable figure: a precision ("bf16"), "bandwidth", or an
        attention rate ("attention.bf16")."""
        if figure == "bandwidth":
            return self.achievable_bandwidth is not None
        if figure.startswith("attention."):
            return dtypes.canonical(figure.split(".", 1)[1]) in self.achievable_attention_flops
        return dtypes.canonical(figure) in self.achievable_flops

    def _achievable_list(self) -> list[str]:
        return [*(f"{p} matmul FLOP/s" for p in self.achievable_flops),
                *(["memory bandwidth"] if self.achievable_bandwidth is not None else []),
                *(f"{p} attention FLOP/s" for p in self.achievable_attention_flops)]

    @property
    def capacity_bytes(self) -> float | None:
        """The memory a plan may count on: the total the card reports (:attr:`usable_memory_bytes`, e.g.
        nvidia-smi's 81,559 MiB on an H100) where the catalog has it, else the datasheet's :attr:`memory_bytes`.

        >>> h100 = get("h100")
        >>> h100.memory_bytes, h100.capacity_bytes
        (80000000000.0, 85520809984.0)
        >>> get("tpu v5e").capacity_bytes == get("tpu v5e").memory_bytes  # none published: the datasheet's
        True
        """
        return self.usable_memory_bytes if self.usable_memory_bytes is not None else self.memory_bytes

    @property
    def capacity_source(self) -> str:
        """Where :attr:`capacity_bytes` comes from."""
        return self.source("usable_memory_bytes" if self.usable_memory_bytes is not None else "memory_bytes")

    @property
    def precisions(self) -> list[str]:
        return list(self.peak_flops)

    def source(self, figure: str) -> str:
        """Where ``figure`` ('bandwidth', 'peak.bf16', 'memory_bytes', ...) comes from."""
        return self.sources.get(figure, self.sources.get("*", "unknown"))

    def to_dict(self) -> dict:
        return {
            "key": self.key,
            "name": self.name,
            "vendor": self.vendor,
            "aliases": list(self.aliases),
            "bandwidth_bytes_per_s": self.bandwidth,
            "peak_flops": dict(self.peak_flops),
            "ridge": {p: self.ridge(p) for p in self.peak_flops},
            "memory_bytes": self.memory_bytes,
            "usable_memory_bytes": self.usable_memory_bytes,
            "capacity_bytes": self.capacity_bytes,
            "l2_bytes": self.l2_bytes,
            "compute_units": self.compute_units,
            "compute_unit_name": self.compute_unit_name,
            "register_file_bytes_per_unit": self.register_file_bytes,
            "l1_shared_bytes_per_unit": self.l1_shared_bytes,
            "memory_type": self.memory_type,
            "achievable_flops": dict(self.achievable_flops),
            "achievable_bandwidth_bytes_per_s": self.achievable_bandwidth,
            "achievable_ridge": {p: self.achievable_flops[p] / self.achievable_bandwidth
                                 for p in self.achievable_flops} if self.achievable_bandwidth else {},
            "sources": dict(self.sources),
            "notes": list(self.notes),
            "clocks_hz": dict(self.clocks),
            "tensor_cores_per_unit": self.tensor_cores_per_unit,
            "tensor_fma_per_clock": dict(self.tensor_fma_per_clock),
            "achievable_attention_flops": dict(self.achievable_attention_flops),
        }


def _flag(value) -> bool:
    if not isinstance(value, bool):
        raise InvalidValue(f"achievable must be True or False; got {value!r}.")
    return value


def _check_types(where: str, table: dict) -> None:
    """Text fields hold text, lists hold text, tables are tables: a file written by hand may have anything."""
    for name in ("name", "vendor", "source", "compute_unit_name", "memory_type"):
        if name in table and not isinstance(table[name], str):
            raise InvalidValue(f"{where}: {name} must be text in quotes; got {table[name]!r}.")
    for name in ("aliases", "notes"):
        if name in table and not (isinstance(table[name], list) and all(isinstance(x, str) for x in table[name])):
            raise InvalidValue(f"{where}: {name} must be a list of texts, e.g. [\"a\", \"b\"]; got {table[name]!r}.")
    for name in ("peak_tflops", "sources", "clocks_mhz", "tensor_fma_per_clock"):
        if name in table and not isinstance(table[name], dict):
            raise InvalidValue(f"{where}: {name} must be a table, e.g. {{ bf16 = 989 }}; got {table[name]!r}.")
    if not all(isinstance(v, str) for v in table.get("sources", {}).values()):
        raise InvalidValue(f"{where}: every value in sources must be a source id in quotes.")


def _from_table(key: str, table: dict, sources: dict[str, str]) -> Accelerator:
    """Build an Accelerator from one TOML table, resolving source ids to citations."""
    where = f"accelerator {key!r}"
    known = {"name", "vendor", "aliases", "source", "sources", "peak_tflops", "notes",
             "compute_units", "compute_unit_name", "memory_type", "achievable_tflops", "achievable_bandwidth_tb_s",
             "achievable_source", "achievable_attention_tflops", "achievable_attention_source", "clocks_mhz", "tensor_cores_per_unit", "tensor_fma_per_clock", *_SCALED}
    check_table(where, table, known)
    _check_types(where, table)
    if "peak_tflops" not in table or not table["peak_tflops"]:
        raise InvalidValue(f"{where}: needs peak_tflops, e.g. {{ bf16 = 989 }}.")
    if "bandwidth_tb_s" not in table:
        raise InvalidValue(f"{where}: needs bandwidth_tb_s (memory bandwidth in TB/s).")

    def cite(source_id: str) -> str:
        return sources.get(source_id, source_id)

    cited = {"*": cite(table["source"])}
    values: dict[str, float] = {}
    for field_name, (attr, scale) in _SCALED.items():
        if field_name in table:
            values[attr] = positive(table[field_name], f"{where}: {field_name}") * scale
    peaks = {}
    for precision, tflops in table["peak_tflops"].items():
        canonical = dtypes.canonical(precision)
        peaks[canonical] = positive(tflops, f"{where}: peak_tflops.{precision}") * 1e12
    for figure in ["bandwidth", "memory_bytes", "usable_memory_bytes", "l2_bytes", "compute_units", "register_file_bytes", "l1_shared_bytes",
                   *(f"peak.{p}" for p in peaks)]:
        cited[figure] = cited["*"]
    achievable = {}
    for precision, tflops in table.get("achievable_tflops", {}).items():
        canonical = dtypes.canonical(precision)
        if canonical not in peaks:
            raise InvalidValue(f"{where}: achievable_tflops.{precision} has no datasheet peak_tflops.{precision} "
                               "beside it.")
        achievable[canonical] = positive(tflops, f"{where}: achievable_tflops.{precision}") * 1e12
    attention = {}
    if not isinstance(table.get("achievable_attention_tflops", {}), dict):
        raise InvalidValue(f"{where}: achievable_attention_tflops must be a table, e.g. {{ bf16 = 499 }}.")
    for precision, tflops in table.get("achievable_attention_tflops", {}).items():
        attention[dtypes.canonical(precision)] = positive(
            tflops, f"{where}: achievable_attention_tflops.{precision}") * 1e12
    achievable_bw = table.get("achievable_bandwidth_tb_s")
    if achievable_bw is not None:
        achievable_bw = positive(achievable_bw, f"{where}: achievable_bandwidth_tb_s") * 1e12
    if achievable or achievable_bw is not None or attention:
        if "achievable_source" not in table:
            raise InvalidValue(f"{where}: achievable figures need an achievable_source (who measured them).")
        for figure in [*(f"achievable.{p}" for p in achievable), *(["achievable_bandwidth"] if achievable_bw else []),
                       *(f"achievable_attention.{p}" for p in attention)]:
            cited[figure] = cite(table["achievable_source"])
        for p in attention:  # measured apart from the matmul sweep, it may name its own source
            cited[f"achievable_attention.{p}"] = cite(table.get("achievable_attention_source", table["achievable_source"]))
    for figure, source_id in table.get("sources", {}).items():
        attr = _SCALED.get(figure, (figure, 1))[0]
        cited[attr] = cite(source_id)
    units = table.get("compute_units")
    clocks = {name: positive(mhz, f"{where}: clocks_mhz.{name}") * 1e6 for name, mhz in table.get("clocks_mhz", {}).items()}
    fma = {dtypes.canonical(p): positive(n, f"{where}: tensor_fma_per_clock.{p}")
           for p, n in table.get("tensor_fma_per_clock", {}).items()}
    per_unit = table.get("tensor_cores_per_unit")
    return Accelerator(
        key=key,
        name=table.get("name", key),
        vendor=table.get("vendor", "unknown"),
        peak_flops=peaks,
        bandwidth=values["bandwidth"],
        memory_bytes=values.get("memory_bytes"),
        usable_memory_bytes=values.get("usable_memory_bytes"),
        l2_bytes=values.get("l2_bytes"),
        register_file_bytes=values.get("register_file_bytes"),
        l1_shared_bytes=values.get("l1_shared_bytes"),
        memory_type=table.get("memory_type"),
        compute_units=int(positive(units, f"{where}: compute_units")) if units is not None else None,
        compute_unit_name=table.get("compute_unit_name", "SM"),
        aliases=tuple(table.get("aliases", ())),
        sources=cited,
        notes=tuple(table.get("notes", ())),
        achievable_flops=achievable,
        achievable_bandwidth=achievable_bw,
        clocks=clocks,
        tensor_cores_per_unit=int(positive(per_unit, f"{where}: tensor_cores_per_unit")) if per_unit is not None else None,
        tensor_fma_per_clock=fma,
        achievable_attention_flops=attention,
    )


def _parse(document: dict) -> list[Accelerator]:
    sources = document.get("sources", {})
    return [_from_table(k, v, sources) for k, v in document.items() if k != "sources"]


def _read() -> list[Accelerator]:
    return _parse(tomllib.loads(resources.files("roofkit").joinpath("data/hardware.toml").read_text(encoding="utf-8")))


CATALOG: Catalog[Accelerator] = Catalog(Accelerator, _read, UnknownHardware, "accelerator")


def get(name: str | Accelerator) -> Accelerator:
    """The accelerator called ``name`` (or an alias); UnknownHardware lists the closest names."""
    return CATALOG.get(name)


def catalog() -> list[Accelerator]:
    """Every accelerator, in catalog order (built-ins first, then registered ones)."""
    return CATALOG.entries()


def _tokens(name: str) -> list[str]:
    return [t for t in re.split(r"[^a-z0-9]+", name.lower()) if t]


def match_device(device_name: str) -> "Accelerator | None":
    """The catalog's GPU whose name or alias appears, word for word, in ``device_name``; or None.

    'NVIDIA H100 80GB HBM3' -> h100-sxm; 'NVIDIA H100 PCIe' -> h100-pcie (the
    longest match wins); 'NVIDIA GeForce RTX 4090' -> None.
    """
    words = _tokens(device_name)
    best, best_len = None, 0
    for acc in catalog():
        if acc.vendor not in ("NVIDIA", "AMD"):
            continue
        for alias in (acc.key, acc.name, *acc.aliases):
            want = [t for t in _tokens(alias) if t not in ("nvidia", "amd")]
            fits = want and any(words[i:i + len(want)] == want for i in range(len(words) - len(want) + 1))
            if fits and len(" ".join(want)) > best_len:
                best, best_len = acc, len(" ".join(want))
    return best


def names() -> list[str]:
    return CATALOG.keys()


def register(entry: dict | Accelerator, key: str | None = None, replace: bool = False) -> Accelerator:
    """Add an accelerator: an Accelerator, or a dict in the catalog's TOML format.

    >>> laptop = register({"name": "My laptop", "source": "my own measurement, 2026-11",
    ...                    "peak_tflops": {"fp32": 0.5}, "bandwidth_tb_s": 0.05}, key="laptop")
    >>> round(laptop.ridge("fp32"), 1)
    10.0

    A key, name or alias that already belongs to another accelerator is refused
    unless ``replace=True``.
    """
    if isinstance(entry, Accelerator):
        return CATALOG.add(entry, replace)
    if not isinstance(entry, dict):
        raise InvalidValue(f"register() takes an Accelerator or a dict; got {type(entry).__name__}.")
    key = key or normalize(entry.get("name", "")) or None
    if not key:
        raise InvalidValue("register() needs a key or a 'name' for the new accelerator.")
    return CATALOG.add(_from_table(key, entry, {}), replace)


def load_file(path: str | Path, replace: bool = False) -> list[Accelerator]:
    """Register every accelerator in a TOML file written in the catalog's format."""
    path = Path(path)
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidValue(f"No catalog file at {str(path)!r}.") from None
    except tomllib.TOMLDecodeError as error:
        raise InvalidValue(f"{str(path)!r} is not valid TOML: {error}.") from None
    return [CATALOG.add(a, replace) for a in _parse(document)]
