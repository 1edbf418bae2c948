"""The roofline: how fast a kernel can possibly run on a given machine.

    attainable(I) = min(P, B * I)          [FLOP/s]
    ridge point   I* = P / B               [FLOP/byte]

with P the peak FLOP/s, B the memory bandwidth in bytes/s and I the kernel's
arithmetic intensity, FLOPs per byte moved to and from memory. A kernel with
I < I* is memory-bound; at or above I* it is compute-bound. With T_math =
FLOPs / P and T_mem = bytes / B, max(T_math, T_mem) is the time if math and
memory traffic overlap perfectly, and T_math + T_mem the time if they do not
overlap at all (Williams, Waterman & Patterson, "Roofline", CACM 52(4), 2009;
the two times as in jax-ml/scaling-book). With the datasheet P and B the max
is a lower bound on the time, but the sum is no upper bound: real kernels run
below the datasheet peak, and a good large GEMM often takes longer than that
sum. With achievable roofs (``acc.peak(p, achievable=True)``,
``acc.memory_bandwidth(achievable=True)``) the sum is a pessimistic estimate
for a good kernel.

The size at which a kernel crosses the ridge (:func:`crossing_size`) answers
"how big must this matmul be?" and "what batch makes decoding compute-bound?".
The chart of these roofs, with kernels on them, is :func:`roofkit.roofline.plot`
(in :mod:`roofkit.plots.roofline`, the figures' layer, which re-exports this
model so that lessons reach both through one name).

Every numeric function takes plain numbers or numpy arrays (a plain number in,
a plain float out); :func:`analyze` takes a cost and the names of an
accelerator and a precision.

    >>> from roofkit import roofline
    >>> round(roofline.ridge_point(989e12, 3.35e12), 1)
    295.2
    >>> roofline.bound(1.0, 989e12, 3.35e12)
    'memory'
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..catalogs.hardware import get
from ..dtypes import canonical
from ..errors import InvalidValue, UnsupportedPrecision
from ..formulas import ridge_point  # the formula lives once, in roofkit.formulas; exported here as roofline's own
from ..formulas import gemm
from ..units import nonnegative, positive, size

__all__ = [
    "ridge_point", "attainable", "bound", "time_bounds", "percent_of_roofline",
    "Placement", "analyze",
    "crossing_size", "balance_point_matrix_size", "decode_batch_to_compute_bound",
]


def _plain(value):
    """A 0-d numpy result as a Python float; arrays unchanged."""
    return float(value) if np.ndim(value) == 0 else value


def _number(value, name: str) -> float:
    """A positive number as a float (a symbolic cost must be evaluated first)."""
    try:
        return float(positive(value, name))
    except TypeError:
        raise InvalidValue(f"{name} must be a number; got the expression {value!r}.") from None


def attainable(intensity, peak_flops, bandwidth):
    """min(P, B x I) in FLOP/s; accepts numpy arrays of intensities."""
    I = positive(intensity, "intensity")
    P, B = positive(peak_flops, "peak_flops"), positive(bandwidth, "bandwidth")
    with np.errstate(all="ignore"):
        return _plain(np.minimum(P, np.multiply(B, I)))


def bound(intensity, peak_flops, bandwidth):
    """'memory' when I < I*, else 'compute' (the ridge itself counts as compute)."""
    below = np.less(positive(intensity, "intensity"), ridge_point(peak_flops, bandwidth))
    if np.ndim(below):
        return np.where(below, "memory", "compute")
    return "memory" if below else "compute"


def time_bounds(flops, bytes_moved, peak_flops, bandwidth):
    """(max(T_math, T_mem), T_math + T_mem) in seconds: perfect overlap, and none.

    With datasheet roofs the first is a lower bound and the second is not an
    upper bound (real kernels run below the datasheet peak); pass achievable
    roofs for a pessimistic estimate of a good kernel.
    """
    F, Q = nonnegative(flops, "flops"), nonnegative(bytes_moved, "bytes")
    P, B = positive(peak_flops, "peak_flops"), positive(bandwidth, "bandwidth")
    with np.errstate(all="ignore"):
        t_math, t_mem = np.divide(F, P), np.divide(Q, B)
        return _plain(np.maximum(t_math, t_mem)), _plain(np.add(t_math, t_mem))


def percent_of_roofline(achieved_flops_per_s, intensity, peak_flops, bandwidth):
    """100 x achieved / attainable(I): how close a measured kernel gets to its roof."""
    achieved = positive(achieved_flops_per_s, "achieved_flops_per_s")
    with np.errstate(all="ignore"):
        return _plain(np.divide(np.multiply(100.0, achieved), attainable(intensity, peak_flops, bandwidth)))


@dataclass(frozen=True)
class Placement:
    """A kernel placed on one accelerator's roofline in one precision (SI units)."""

    accelerator: str
    precision: str
    flops: float
    bytes: float
    intensity: float
    ridge: float
    bound: str
    attainable_flops_per_s: float
    t_math_s: float
    t_mem_s: float
    time_s: float  # max(T_math, T_mem): perfect overlap; a lower bound at datasheet roofs
    time_upper_s: float  # T_math + T_mem: no overlap; not an upper bound at datasheet roofs

    def to_dict(self) -> dict:
        return asdict(self)


def analyze(cost, accelerator, precision: str) -> Placement:
    """Place ``cost`` (anything with .flops and .bytes) on ``accelerator``'s roofline."""
    acc = get(accelerator)
    P, B = acc.peak(precision), acc.bandwidth
    F, Q = _number(getattr(cost, "flops", None), "flops"), _number(getattr(cost, "bytes", None), "bytes")
    I = F / Q
    lower, upper = time_bounds(F, Q, P, B)
    return Placement(
        accelerator=acc.name,
        precision=canonical(precision),
        flops=F,
        bytes=Q,
        intensity=I,
        ridge=ridge_point(P, B),
        bound=bound(I, P, B),
        attainable_flops_per_s=attainable(I, P, B),
        t_math_s=F / P,
        t_mem_s=Q / B,
        time_s=lower,
        time_upper_s=upper,
    )


# --- where a kernel crosses the ridge ---------------------------------------


def crossing_size(intensity_of, ridge, lo=1, hi=2**40, integer=True):
    """The smallest size x in [lo, hi] with I(x) >= I*, found by bisection.

    ``intensity_of(x)`` gives the intensity I(x) in FLOP/byte (a number, or
    anything with ``.intensity`` such as a formulas Cost) and must be
    non-decreasing in x. ``integer=True`` returns an int; ``integer=False`` the
    crossing as a float, to the last bit. A GEMM's intensity grows with its
    size; an elementwise op's does not, so it never crosses and this raises
    InvalidValue.

        >>> crossing_size(lambda n: n / 3, 295.2)   # a square BF16 GEMM: I = n / 3
        886
    """
    if not callable(intensity_of):
        raise InvalidValue(f"intensity_of must be a function of the size; got {intensity_of!r}.")
    ridge = positive(ridge, "ridge")
    lo, hi = positive(lo, "lo"), positive(hi, "hi")
    if integer:
        lo, hi = math.ceil(lo), math.floor(hi)
    if lo > hi:
        raise InvalidValue(f"lo must not exceed hi; got lo={lo!r}, hi={hi!r}.")

    def I(x):
        value = intensity_of(x)
        return float(nonnegative(getattr(value, "intensity", value), f"intensity_of({x!r})"))

    if I(lo) >= ridge:
        return lo
    top = I(hi)
    if top < ridge:
        raise InvalidValue(
            f"The intensity never reaches the ridge of {ridge:.4g} FLOP/byte for sizes in "
            f"[{lo:,}, {hi:,}]: at {hi:,} it is {top:.4g} FLOP/byte, so the kernel never becomes "
            "compute-bound in that range (an elementwise op's intensity does not grow with size)."
        )
    # invariant: I(lo) < ridge <= I(hi)
    if integer:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if I(mid) >= ridge else (mid, hi)
        return hi
    for _ in range(2000):  # halves the gap until lo and hi are neighbouring floats
        mid = lo + (hi - lo) / 2
        if not lo < mid < hi:
            break
        lo, hi = (lo, mid) if I(mid) >= ridge else (mid, hi)
    return float(hi)


def balance_point_matrix_size(accelerator, precision) -> float:
    """The n at which a square n x n x n GEMM's intensity equals the ridge I*.

    With b bytes per element, I(n) = 2n^3 / (3 b n^2) = 2n / (3b), so
    n = 3 b I* / 2: 3 I* for 16-bit formats (the "balance-point
    dimension" of a square matmul). Found numerically from :func:`roofkit.formulas.gemm`, so it
    follows that formula; returns a float (at least 1).
    """
    acc = get(accelerator)
    p = canonical(precision)
    return crossing_size(lambda n: gemm(n, n, n, p).intensity, acc.ridge(p), integer=False)


def decode_batch_to_compute_bound(d_model, accelerator, precision) -> int:
    """The smallest batch B at which a decode step's (B x d) @ (d x d) GEMM is compute-bound.

    With b bytes per element, I(B) = 2 B d^2 / (b (B d + d^2 + B d)), which is
    about 2B/b for B << d (intensity ~ batch in 16-bit) and never exceeds d/b:
    a model too narrow for the chip never gets there (InvalidValue).
    Lesson 11's exercise: a 7B model (d = 4096) on an H100 in BF16.
    """
    d = size(d_model, "d_model")
    acc = get(accelerator)
    p = canonical(precision)
    I_star = acc.ridge(p)
    try:
        return crossing_size(lambda B: gemm(B, d, d, p).intensity, I_star)
    except InvalidValue:
        limit = gemm(2**40, d, d, p).intensity
        raise InvalidValue(
            f"A decode GEMM with d_model={d:g} never becomes compute-bound on {acc.name} in {p}: "
            f"its intensity approaches {limit:.4g} FLOP/byte as the batch grows, below the ridge "
            f"of {I_star:.4g} FLOP/byte."
        ) from None


# --- the plot ----------------------------------------------------------------
