"""Memory bandwidth, STREAM-style: copy, scale, add and triad over arrays larger than the caches.

STREAM (McCalpin, https://www.cs.virginia.edu/stream/) times four loops over
arrays of n doubles and counts the bytes each one must move between memory
and the chip:

    kernel   loop                 arrays counted   FLOPs per element
    copy     c = a                2 (read a, write c)        0
    scale    b = q * c            2                          1
    add      c = a + b            3                          2 reads, 1 write: 1
    triad    a = b + q * c        3                          2

Here each loop is one numpy call with ``out=`` (no temporary), split across
the threads. Triad needs two numpy calls, ``t = q * c`` then ``a = b + t``;
roofkit runs them block by block with a small ``t`` (a few hundred KiB to
2 MiB) that is reused for every block and never leaves the chip's caches, so
the traffic is STREAM's 3 arrays. A
sixth row shows the triad as it is usually written, ``np.add(b, q * c,
out=a)``: numpy makes a full-size temporary for ``q * c``, writes it to memory
and reads it back, 5 arrays of traffic, and each is counted. (STREAM's counts,
and these, leave out write-allocate: on most CPUs a store to memory first
reads the cache line it overwrites, so a written array really costs about
twice. Counting it or not changes the bandwidth figure, not the kernels' times;
the convention just has to be the same everywhere, and here it is STREAM's.)

The counts come from :mod:`roofkit.formulas` and :mod:`roofkit.fusion`: the
triad is the fused chain scale -> residual_add, and numpy's version is that
chain unfused.

    >>> stream_bytes("triad", 1000, 8), stream_bytes("triad_numpy", 1000, 8)
    (24000.0, 40000.0)

The memory roof is the best of STREAM's four loops (:func:`memory_roof`), as
the compute roof is the best of the matmul sweep: a roof is what a simple,
well-behaved loop can sustain. In C the four run at nearly the same speed;
in numpy the triad's two calls per block (multiply, then add) keep fewer
memory streams in flight than one loop would, and it usually trails add by
10-20%.

Each array holds at least 4x the last-level cache (STREAM's rule), the arrays
are filled before timing (no page faults in the timed runs), and each kernel's
figure is the best of several runs, taken in rounds (:func:`~roofkit.measure.timing.best_of_rounds`).
"""

from __future__ import annotations

import math
import threading
from dataclasses import asdict, dataclass

import numpy as np

from ..perf import fusion
from ..errors import InvalidValue
from ..formulas import Cost, elementwise
from .timing import Pool

__all__ = ["KERNELS", "LOOPS", "ROOF_KERNELS", "StreamResult", "Stream", "stream_cost", "stream_bytes", "array_elements",
           "memory_roof"]

Q = 3.0  # STREAM's scalar

KERNELS = ("copy", "scale", "add", "triad", "triad_numpy")
ROOF_KERNELS = ("copy", "scale", "add", "triad")  # STREAM's own four: the memory roof is the best of them
LOOPS = {
    "copy": "c = a",
    "scale": "b = q*c",
    "add": "c = a + b",
    "triad": "a = b + q*c (cache-sized temporary)",
    "triad_numpy": "np.add(b, q*c, out=a) (full-size temporary)",
}


def stream_cost(kernel: str, n, bytes_per_element=8) -> Cost:
    """FLOPs and bytes STREAM counts for ``kernel`` over n elements (see the module's table)."""
    if kernel == "copy":
        return elementwise(n, 0, 1, 1, bytes_per_element)
    if kernel == "scale":
        return elementwise(n, 1, 1, 1, bytes_per_element)
    if kernel == "add":
        return elementwise(n, 1, 2, 1, bytes_per_element)
    if kernel == "triad":  # one pass: read b and c, write a; q*c never reaches memory
        return fusion.chain(["scale", "residual_add"], n, bytes_per_element).fused
    if kernel == "triad_numpy":  # t = q*c written and read back: the chain unfused
        return fusion.chain(["scale", "residual_add"], n, bytes_per_element).unfused
    raise InvalidValue(f"Unknown STREAM kernel {kernel!r}. Expected one of: {', '.join(KERNELS)}.")


def stream_bytes(kernel: str, n, bytes_per_element=8) -> float:
    """Bytes counted for one run of ``kernel`` over n elements: arrays x n x bytes per element."""
    return float(stream_cost(kernel, n, bytes_per_element).bytes)


def array_elements(llc_bytes: float, bytes_per_element: int = 8, factor: float = 4,
                   memory_available: float | None = None, arrays: int = 4) -> tuple[int, str]:
    """Elements per array: ``factor`` x the last-level cache, and a note when memory caps it.

    The ``arrays`` arrays (a, b, c and numpy's temporary) together take at most
    a quarter of the available memory.
    """
    n = math.ceil(factor * llc_bytes / bytes_per_element)
    note = f"{factor:g}x the last-level cache"
    if memory_available:
        cap = int(memory_available / 4 / arrays / bytes_per_element)
        if cap < n:
            n, note = cap, f"{cap * bytes_per_element / llc_bytes:.2g}x the last-level cache (capped by free memory)"
    return n, note


@dataclass(frozen=True)
class StreamResult:
    kernel: str
    loop: str
    n: int
    bytes_per_element: int
    bytes: float  # counted per run
    time_s: float  # best run

    @property
    def arrays(self) -> float:
        return self.bytes / (self.n * self.bytes_per_element)

    @property
    def bandwidth(self) -> float:
        """bytes / time, in bytes/s."""
        return self.bytes / self.time_s

    def to_dict(self) -> dict:
        return asdict(self) | {"arrays": self.arrays, "bandwidth_bytes_per_s": self.bandwidth}


def memory_roof(results: dict[str, StreamResult]) -> tuple[float, str]:
    """(the best bandwidth of copy, scale, add and triad in bytes/s, the kernel that reached it)."""
    best = max((results[k] for k in ROOF_KERNELS if k in results), key=lambda r: r.bandwidth)
    return best.bandwidth, best.kernel


class Stream:
    """The five loops over arrays of n doubles: ``fns()`` to time, ``results(times)`` to read.

    ``block_bytes`` is the size of the triad's small temporary
    (:func:`~roofkit.measure.system.block_bytes`). The arrays are filled here,
    so the timed runs pay no page faults (except numpy's triad, whose
    temporary is new every time: that is what it shows).
    """

    def __init__(self, n: int, pool: Pool, block_bytes: int = 2**20):
        self.n = n = int(n)
        a, b, c = np.full(n, 1.0), np.full(n, 2.0), np.full(n, 0.5)
        block = max(4096, block_bytes // 8)
        local = threading.local()  # each thread its own small temporary

        def triad(s: slice):
            t = getattr(local, "t", None)
            if t is None:
                t = local.t = np.empty(min(block, n))
            for i in range(s.start, s.stop, block):
                j = min(i + block, s.stop)
                np.multiply(c[i:j], Q, out=t[: j - i])
                np.add(b[i:j], t[: j - i], out=a[i:j])

        bodies = {
            "copy": lambda s: np.copyto(c[s], a[s]),
            "scale": lambda s: np.multiply(c[s], Q, out=b[s]),
            "add": lambda s: np.add(a[s], b[s], out=c[s]),
            "triad": triad,
            "triad_numpy": lambda s: np.add(b[s], Q * c[s], out=a[s]),
        }
        nbytes = n * 8.0
        self._fns = {name: (lambda body=body: pool.parallel(body, n, nbytes)) for name, body in bodies.items()}

    def fns(self) -> dict:
        return dict(self._fns)

    def results(self, times: dict) -> dict[str, StreamResult]:
        return {k: StreamResult(k, LOOPS[k], self.n, 8, stream_bytes(k, self.n, 8), times[k]) for k in self._fns}
