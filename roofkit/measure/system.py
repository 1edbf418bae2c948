"""What the machine is: its caches, cores, memory and name; how many threads a measurement may use.

STREAM's rule is that each array must be at least 4x the caches, or a
"bandwidth" figure measures the cache instead of memory (McCalpin, STREAM FAQ).
So the first fact a measurement needs is the size of the last-level cache:

    >>> from roofkit.measure import system
    >>> system.parse_size("32768K"), system.parse_size("32 MiB (1 instance)")
    (33554432, 33554432)

It is read from Linux's sysfs (``/sys/devices/system/cpu/cpu*/cache``, summed
over the cache's instances), else from ``lscpu``, else from macOS's
``sysctl``, else :data:`DEFAULT_LLC_BYTES` is assumed (and the profile says so).
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import socket
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import InvalidValue

__all__ = ["Machine", "machine", "parse_size", "default_threads", "limit_threads", "block_bytes", "DEFAULT_LLC_BYTES"]

DEFAULT_LLC_BYTES = 32 * 2**20  # a common desktop/laptop L3; used only when the size cannot be read
DEFAULT_L2_BYTES = 2**20
_UNITS = {"": 1, "K": 2**10, "KB": 2**10, "KIB": 2**10, "M": 2**20, "MB": 2**20, "MIB": 2**20,
          "G": 2**30, "GB": 2**30, "GIB": 2**30}


def parse_size(text: str) -> int:
    """'32768K', '1024 KiB', '32 MiB (1 instance)' -> bytes (cache sizes are binary)."""
    match = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]i?B?)?", str(text), re.I)
    if not match:
        raise InvalidValue(f"cannot read a cache size from {text!r}; expected e.g. '32768K' or '32 MiB'.")
    number, unit = match.groups()
    return int(float(number) * _UNITS[(unit or "").upper()])


@dataclass(frozen=True)
class Machine:
    """The facts a measurement depends on. Sizes in bytes."""

    host: str
    cpu: str
    vendor: str
    cores: int  # CPUs this process may run on
    llc_bytes: int  # last-level cache, all instances together
    l2_bytes: int  # one core's L2
    cache_source: str  # where llc_bytes came from ("sysfs", "lscpu", "sysctl", "default")
    memory_available_bytes: int | None

    def to_dict(self) -> dict:
        return asdict(self)


def _sysfs_caches(root: Path = Path("/sys/devices/system/cpu")) -> tuple[int, int] | None:
    """(last-level cache summed over its instances, L2 of cpu0) from sysfs, or None."""
    levels: dict[int, dict[str, int]] = {}  # level -> {shared_cpu_list: size}
    for index in sorted(root.glob("cpu[0-9]*/cache/index[0-9]*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = parse_size((index / "size").read_text())
            shared = (index / "shared_cpu_list").read_text().strip()
        except (OSError, ValueError, InvalidValue):
            continue
        if kind in ("Unified", "Data"):
            levels.setdefault(level, {})[shared] = size
    if not levels:
        return None
    top = max(levels)
    l2 = levels.get(2, {})
    return sum(levels[top].values()), (max(l2.values()) if l2 else DEFAULT_L2_BYTES)


def _run(*argv: str) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=5, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _lscpu_caches() -> tuple[int, int] | None:
    text = _run("lscpu")
    found = {}
    for level in ("L3", "L2"):
        match = re.search(rf"^{level} cache:\s*(.+)$", text, re.M)
        if match:
            found[level] = parse_size(match.group(1))  # lscpu's figure is the total of all instances
    if not found:
        return None
    llc = found.get("L3", found.get("L2"))
    return llc, found.get("L2", DEFAULT_L2_BYTES)


def _sysctl_caches() -> tuple[int, int] | None:
    values = [_run("sysctl", "-n", name).strip() for name in ("hw.l3cachesize", "hw.l2cachesize")]
    sizes = [int(v) for v in values if v.isdigit() and int(v) > 0]
    if not sizes:
        return None
    return max(sizes), (int(values[1]) if values[1].isdigit() and int(values[1]) > 0 else DEFAULT_L2_BYTES)


def _cpu_name() -> tuple[str, str]:
    """(model name, vendor) from /proc/cpuinfo or the platform module."""
    name, vendor = platform.processor() or platform.machine(), "unknown"
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    model = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    maker = re.search(r"^vendor_id\s*:\s*(.+)$", text, re.M)
    if model:
        name = model.group(1).strip()
    if maker:
        vendor = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD"}.get(maker.group(1).strip(), maker.group(1).strip())
    elif platform.system() == "Darwin":
        name = _run("sysctl", "-n", "machdep.cpu.brand_string").strip() or name
        vendor = "Apple" if platform.machine() == "arm64" else "Intel"
    return name or "unknown CPU", vendor


def _memory_available() -> int | None:
    try:
        text = Path("/proc/meminfo").read_text()
        return int(re.search(r"^MemAvailable:\s*(\d+) kB", text, re.M).group(1)) * 1024
    except (OSError, AttributeError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def default_threads() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def machine() -> Machine:
    """This machine's facts, read once per call (cheap: a few small files)."""
    caches, source = None, "default"
    for reader, name in ((_sysfs_caches, "sysfs"), (_lscpu_caches, "lscpu"), (_sysctl_caches, "sysctl")):
        try:
            caches = reader()
        except (OSError, InvalidValue):
            caches = None
        if caches:
            source = name
            break
    llc, l2 = caches or (DEFAULT_LLC_BYTES, DEFAULT_L2_BYTES)
    cpu, vendor = _cpu_name()
    return Machine(host=socket.gethostname() or "localhost", cpu=cpu, vendor=vendor, cores=default_threads(),
                   llc_bytes=int(llc), l2_bytes=int(l2), cache_source=source,
                   memory_available_bytes=_memory_available())


def block_bytes(l2_bytes: int, llc_bytes: int, threads: int) -> int:
    """Size of a temporary that stays on chip while arrays stream past it: a fused loop's block.

    Half an L2 at least; up to 2 MiB when the last-level cache has room for
    every thread's block several times over, since each block costs a few
    microseconds of Python (two numpy calls) and small blocks make that count.
    """
    return int(max(l2_bytes // 2, min(2 * 2**20, llc_bytes // (4 * max(1, threads)))))


@contextlib.contextmanager
def limit_threads(threads: int):
    """Run the block with at most ``threads`` BLAS and numexpr threads (threadpoolctl, numexpr)."""
    import numexpr  # deferred: numexpr costs ~0.12 s at import
    from threadpoolctl import threadpool_limits  # deferred: threadpoolctl costs ~14 ms at import

    before = numexpr.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads, user_api="blas"):
            yield
    finally:
        numexpr.set_num_threads(before)
