"""Peak FLOP/s on a CPU: a sweep of square matrix products through numpy's BLAS.

The compute roof of a CPU's roofline is the rate of its best-tuned kernel, a
large matrix product (the Empirical Roofline Toolkit and the "maximum
achievable matmul FLOPS" method both do this): the BLAS library keeps blocks
of A and B in the caches and the vector units busy with fused multiply-adds.
Small products do not reach it (too little work per call, and per thread),
so several sizes are timed and the best rate is the peak. Each product
C = A @ B of n x n matrices costs 2n^3 FLOPs (:func:`roofkit.formulas.gemm`).

The number of BLAS threads is set by the caller (:func:`~roofkit.measure.system.limit_threads`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .. import dtypes, formulas

__all__ = ["MatmulResult", "MatmulSweep", "peak"]

_NUMPY = {"fp64": "float64", "fp32": "float32"}


@dataclass(frozen=True)
class MatmulResult:
    dtype: str
    n: int
    flops: float
    time_s: float

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.time_s

    def to_dict(self) -> dict:
        return asdict(self) | {"flops_per_s": self.flops_per_s}


class MatmulSweep:
    """n x n x n products for each size and precision: ``fns()`` to time, ``results(times)`` to read."""

    def __init__(self, sizes=(256, 512, 1024), precisions=("fp64", "fp32")):
        rng = np.random.default_rng(0)
        self._fns = {}
        for precision in (dtypes.canonical(p) for p in precisions):
            dtype = _NUMPY[precision]
            for n in sizes:
                a, b = rng.random((n, n), dtype=dtype), rng.random((n, n), dtype=dtype)
                c = np.empty((n, n), dtype)
                self._fns[(precision, int(n))] = lambda a=a, b=b, c=c: np.matmul(a, b, out=c)

    def fns(self) -> dict:
        return dict(self._fns)

    def results(self, times: dict) -> list[MatmulResult]:
        return [MatmulResult(p, n, float(formulas.gemm(n, n, n, p).flops), times[(p, n)]) for p, n in self._fns]


def peak(results: list[MatmulResult], precision: str) -> float:
    """The best FLOP/s of the sweep in ``precision``."""
    return max(r.flops_per_s for r in results if r.dtype == dtypes.canonical(precision))
