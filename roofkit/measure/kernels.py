"""Real kernels, timed, and the roofline's prediction for each set against the measurement.

Five kernels, the shapes of a transformer's work, each in FP32 at sizes chosen
from the machine's caches (a working set of half the L2, half the last-level
cache, and 4x the last-level cache, "DRAM"):

    add        z = x + y                    numpy, 1 pass
    reduction  s = x.sum(axis=1)            numpy, 1 pass, [R, 1024]
    gemv       y = W @ x                    BLAS
    gemm       C = A @ B                    BLAS, square
    softmax    along rows, [R, 1024]        numpy, 5 passes (max, subtract, exp, sum, divide)

Each kernel has two byte counts. ``bytes_ideal`` is the course's ideal model
(:mod:`roofkit.formulas`: each input read once, each output written once).
``bytes_moved`` is what this implementation really moves: numpy runs one
operation at a time over the whole array, so softmax's five passes move 8
arrays of traffic where the ideal model counts 2. The prediction uses
``bytes_moved``, and the gap between the two counts is what fusion would win.

The prediction is the roofline's lower bound with the MEASURED roofs,

    T_pred = max(FLOPs / P, bytes_moved / B)    (roofkit.roofline.time_bounds)

with P the measured matmul peak in the kernel's precision and B the measured
STREAM triad bandwidth, and the error is T_measured / T_pred - 1 (positive:
slower than predicted).

    >>> predict(2e9, 1e6, peak_flops=1e11, bandwidth=1e10)   # compute-bound: 2e9 / 1e11
    0.02
    >>> prediction_error(0.025, 0.02)
    0.25
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from .. import formulas
from ..perf import roofline
from .timing import Pool

__all__ = ["KernelResult", "KernelSet", "KERNELS", "places", "shapes", "where", "softmax_numpy_cost",
           "predict", "prediction_error", "prediction_table", "format_table"]

KERNELS = ("add", "reduction", "gemv", "gemm", "softmax")
BLAS = ("gemv", "gemm")  # run by the BLAS library, on its own threads
ROW = 1024  # row length of the reduction and the softmax
B32 = 4  # bytes per FP32 element


def places(l2_bytes: float, llc_bytes: float) -> dict[str, float]:
    """Target working set in bytes for each place the data may live."""
    return {"L2": l2_bytes / 2, "LLC": llc_bytes / 2, "DRAM": 4 * llc_bytes}


# numpy's softmax, one operation at a time: (reads, writes) of a full [R, C] array per pass
SOFTMAX_NUMPY_PASSES = {"max": (1, 0), "subtract": (1, 1), "exp": (1, 1), "sum": (1, 0), "divide": (1, 1)}
SOFTMAX_IDEAL_PASSES = {"softmax": (1, 1)}  # one kernel: read the input, write the output


def traffic(passes, n, bytes_per_element=B32, write_allocate=False) -> float:
    """Bytes of ``passes`` ({name: (arrays read, arrays written)}) over arrays of n elements.

    ``write_allocate=True``: a cache that allocates on write reads each line it is
    about to write, so a written array crosses memory twice (STREAM's convention,
    and roofkit's, leave that read out).

        >>> traffic(SOFTMAX_NUMPY_PASSES, 1, 1), traffic(SOFTMAX_NUMPY_PASSES, 1, 1, write_allocate=True)
        (8.0, 11.0)
    """
    return float(sum(formulas.elementwise(n, 0, r + (w if write_allocate else 0), w, bytes_per_element).bytes
                     for r, w in passes.values()))


def softmax_numpy_cost(rows, cols, bytes_per_element=B32, write_allocate=False) -> formulas.Cost:
    """Bytes softmax moves as numpy runs it: every pass reads (and maybe writes) the whole array.

    The FLOPs are the ideal model's (formulas.softmax); the bytes are the sum
    of the passes in SOFTMAX_NUMPY_PASSES, 8 arrays of R x C against the ideal 2
    (11 against 3 counting write-allocate, see :func:`traffic`).
    """
    flops = formulas.softmax(rows, cols, bytes_per_element).flops
    return formulas.Cost(flops, traffic(SOFTMAX_NUMPY_PASSES, rows * cols, bytes_per_element, write_allocate))


def _round(x: float, step: int = 64) -> int:
    """x rounded UP to a multiple of step, so that a working set is never below its target."""
    return max(step, math.ceil(x / step) * step)


def where(working_set: float, l2_bytes: float, llc_bytes: float) -> str:
    """'L2', 'LLC', 'DRAM' (at least 4x the last-level cache, STREAM's rule) or '>LLC' in between."""
    if working_set <= l2_bytes:
        return "L2"
    if working_set <= llc_bytes:
        return "LLC"
    return "DRAM" if working_set >= 4 * llc_bytes else ">LLC"


def shapes(kernel: str, working_set: float) -> tuple[int, ...]:
    """The kernel's shape whose FP32 working set is about ``working_set`` bytes."""
    if kernel == "add":
        return (_round(working_set / (3 * B32), 1024),)
    if kernel in ("reduction", "softmax"):
        arrays = 1 if kernel == "reduction" else 2
        return (max(1, math.ceil(working_set / (arrays * B32 * ROW))), ROW)
    if kernel == "gemv":
        n = _round(math.sqrt(working_set / B32))
        return (n, n)
    if kernel == "gemm":
        return (_round(math.sqrt(working_set / (3 * B32))),)
    raise ValueError(kernel)


@dataclass(frozen=True)
class KernelResult:
    kernel: str
    where: str  # "L2", "LLC" or "DRAM": where its working set fits
    shape: tuple
    precision: str
    flops: float
    bytes_ideal: float
    bytes_moved: float
    working_set: float  # bytes (footprint)
    time_s: float  # measured, best of several runs
    predicted_s: float  # max(FLOPs / P, bytes_moved / B) with the measured roofs
    bound: str  # on the measured roofline

    @property
    def label(self) -> str:
        return f"{self.kernel} ({self.where})"

    @property
    def intensity(self) -> float:
        """FLOPs per byte as it runs (bytes_moved): where its dot sits on the roofline."""
        return self.flops / self.bytes_moved

    @property
    def achieved_flops_per_s(self) -> float:
        return self.flops / self.time_s

    @property
    def error(self) -> float:
        return prediction_error(self.time_s, self.predicted_s)

    def to_dict(self) -> dict:
        return asdict(self) | {"shape": list(self.shape), "label": self.label, "intensity": self.intensity,
                               "achieved_flops_per_s": self.achieved_flops_per_s, "error": self.error}

    @classmethod
    def from_dict(cls, data: dict) -> "KernelResult":
        fields = {k: data[k] for k in cls.__dataclass_fields__}
        return cls(**fields | {"shape": tuple(fields["shape"])})


def predict(flops, bytes_moved, peak_flops, bandwidth) -> float:
    """The roofline's time: max(FLOPs / P, bytes / B), in seconds."""
    return float(roofline.time_bounds(flops, bytes_moved, peak_flops, bandwidth)[0])


def prediction_error(measured_s, predicted_s) -> float:
    """measured / predicted - 1: +0.25 means 25% slower than the roofline predicts."""
    return measured_s / predicted_s - 1


def _setup(kernel: str, shape: tuple, pool: Pool):
    """(function running the kernel once, ideal cost, cost as it runs, working set in bytes)."""
    def array(*dims):  # the values do not change the time of these kernels; filling is fast
        return np.full(dims, 0.5, np.float32)

    if kernel == "add":
        (n,) = shape
        x, y, z = array(n), array(n), np.empty(n, np.float32)
        cost = formulas.elementwise(n, 1, 2, 1, B32)
        return (lambda: pool.parallel(lambda s: np.add(x[s], y[s], out=z[s]), n, cost.bytes)), cost, cost, cost.bytes
    if kernel == "reduction":
        R, C = shape
        x, out = array(R, C), np.empty(R, np.float32)
        cost = formulas.reduction(R, C, B32)
        return (lambda: pool.parallel(lambda s: np.sum(x[s], axis=1, out=out[s]), R, cost.bytes)), cost, cost, cost.bytes
    if kernel == "gemv":
        N, K = shape
        W, x, y = array(N, K), array(K), np.empty(N, np.float32)
        cost = formulas.gemv(N, K, B32)
        return (lambda: np.matmul(W, x, out=y)), cost, cost, cost.bytes
    if kernel == "gemm":
        (n,) = shape
        A, B, C = array(n, n), array(n, n), np.empty((n, n), np.float32)
        cost = formulas.gemm(n, n, n, B32)
        return (lambda: np.matmul(A, B, out=C)), cost, cost, cost.bytes
    if kernel == "softmax":
        R, C = shape
        x, y = array(R, C), np.empty((R, C), np.float32)
        m, total = np.empty((R, 1), np.float32), np.empty((R, 1), np.float32)

        def body(s):
            np.max(x[s], axis=1, keepdims=True, out=m[s])
            np.subtract(x[s], m[s], out=y[s])
            np.exp(y[s], out=y[s])
            np.sum(y[s], axis=1, keepdims=True, out=total[s])
            np.divide(y[s], total[s], out=y[s])

        ideal = formulas.softmax(R, C, B32)
        return (lambda: pool.parallel(body, R, ideal.bytes)), ideal, softmax_numpy_cost(R, C, B32), ideal.bytes
    raise ValueError(kernel)


class KernelSet:
    """Every kernel at every target working set: ``fns()`` to time, ``results(times, P, B)`` to predict.

    ``places`` maps a name to a target working set in bytes. A GEMM larger than
    ``max_gemm`` is cut to that size (and measured once).
    """

    def __init__(self, places: dict[str, float], pool: Pool, l2_bytes: float, llc_bytes: float,
                 kernels=KERNELS, max_gemm: int | None = None):
        self._specs = {}  # label -> (kernel, where, shape, ideal, moved, working set, fn)
        for kernel in kernels:
            seen = set()
            for working_set in places.values():
                shape = shapes(kernel, working_set)
                if kernel == "gemm" and max_gemm:
                    shape = (min(shape[0], max_gemm),)
                if shape in seen:
                    continue
                seen.add(shape)
                fn, ideal, moved, footprint = _setup(kernel, shape, pool)
                place = where(footprint, l2_bytes, llc_bytes)
                label = f"{kernel} ({place})"
                if label in self._specs:  # two sizes in the same place: tell them apart
                    label = f"{kernel} {'x'.join(map(str, shape))} ({place})"
                self._specs[label] = (kernel, place, tuple(int(d) for d in shape), ideal, moved, footprint, fn)

    def fns(self, blas: bool | None = None) -> dict:
        """label -> function; ``blas=True`` only the BLAS kernels, ``False`` only the others."""
        return {label: spec[-1] for label, spec in self._specs.items()
                if blas is None or (spec[0] in BLAS) == blas}

    def results(self, times: dict, peak_flops: float, bandwidth: float) -> list[KernelResult]:
        out = []
        for label, (kernel, place, shape, ideal, moved, footprint, _) in self._specs.items():
            F, Q = float(moved.flops), float(moved.bytes)
            out.append(KernelResult(kernel=kernel, where=place, shape=shape, precision="fp32", flops=F,
                                    bytes_ideal=float(ideal.bytes), bytes_moved=Q, working_set=float(footprint),
                                    time_s=times[label], predicted_s=predict(F, Q, peak_flops, bandwidth),
                                    bound=roofline.bound(F / Q, peak_flops, bandwidth)))
        return out


def prediction_table(results: list[KernelResult]) -> list[dict]:
    """One row per kernel: predicted and measured time, and the error."""
    return [{"kernel": r.label, "shape": "x".join(map(str, r.shape)), "bound": r.bound,
             "intensity": r.intensity, "predicted_s": r.predicted_s, "measured_s": r.time_s, "error": r.error}
            for r in results]


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.3g} µs"


def format_table(rows: list[dict]) -> str:
    """The prediction table as aligned text."""
    head = f"{'kernel':<18} {'shape':>12} {'bound':>8} {'FLOP/B':>7} {'predicted':>10} {'measured':>10} {'error':>7}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['kernel']:<18} {r['shape']:>12} {r['bound']:>8} {r['intensity']:>7.3g} "
                     f"{_ms(r['predicted_s']):>10} {_ms(r['measured_s']):>10} {r['error']:>+7.0%}")
    return "\n".join(lines)
