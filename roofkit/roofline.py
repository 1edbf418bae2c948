"""The roofline: how fast a kernel can possibly run on a given machine.

    attainable(I) = min(peak, bandwidth * I)          [FLOP/s]
    ridge point   I* = peak / bandwidth               [FLOP/byte]

A kernel with intensity I < I* is memory-bound; at or above I* it is
compute-bound. Its time is bounded below by max(T_math, T_mem), the time if
math and memory traffic overlap perfectly, and above by T_math + T_mem, the
time if they do not overlap at all, with T_math = FLOPs / peak and
T_mem = bytes / bandwidth (Williams, Waterman & Patterson, "Roofline",
CACM 52(4), 2009; the two bounds as in jax-ml/scaling-book).

Every function takes plain numbers or numpy arrays; :func:`analyze` takes a
cost and the names of an accelerator and a precision.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .units import nonnegative, positive

__all__ = [
    "ridge_point", "attainable", "bound", "time_bounds", "percent_of_roofline",
    "Placement", "analyze",
]


def ridge_point(peak_flops, bandwidth):
    """I* = peak / bandwidth, in FLOP/byte: the intensity where the two roofs meet."""
    return positive(peak_flops, "peak_flops") / positive(bandwidth, "bandwidth")


def attainable(intensity, peak_flops, bandwidth):
    """min(peak, bandwidth x intensity) in FLOP/s; accepts numpy arrays of intensities."""
    import numpy as np

    intensity = positive(intensity, "intensity")
    return np.minimum(positive(peak_flops, "peak_flops"), positive(bandwidth, "bandwidth") * intensity)


def bound(intensity, peak_flops, bandwidth):
    """'memory' when intensity < ridge point, else 'compute' (the ridge itself counts as compute)."""
    import numpy as np

    below = positive(intensity, "intensity") < ridge_point(peak_flops, bandwidth)
    if np.ndim(below):
        return np.where(below, "memory", "compute")
    return "memory" if below else "compute"


def time_bounds(flops, bytes_moved, peak_flops, bandwidth):
    """(lower, upper) seconds: (max(T_math, T_mem), T_math + T_mem)."""
    import numpy as np

    t_math = nonnegative(flops, "flops") / positive(peak_flops, "peak_flops")
    t_mem = nonnegative(bytes_moved, "bytes") / positive(bandwidth, "bandwidth")
    return np.maximum(t_math, t_mem), t_math + t_mem


def percent_of_roofline(achieved_flops_per_s, intensity, peak_flops, bandwidth):
    """Achieved FLOP/s as a percentage of the roof at that intensity."""
    achieved = positive(achieved_flops_per_s, "achieved_flops_per_s")
    return 100 * achieved / attainable(intensity, peak_flops, bandwidth)


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
    time_s: float  # lower bound: max(T_math, T_mem)
    time_upper_s: float  # pessimistic bound: T_math + T_mem

    def to_dict(self) -> dict:
        return asdict(self)


def analyze(cost, accelerator, precision: str) -> Placement:
    """Place ``cost`` (anything with .flops and .bytes) on ``accelerator``'s roofline."""
    from .hardware import get

    acc = get(accelerator)
    peak, bandwidth = acc.peak(precision), acc.bandwidth
    flops, moved = positive(float(cost.flops), "flops"), positive(float(cost.bytes), "bytes")
    intensity = flops / moved
    lower, upper = time_bounds(flops, moved, peak, bandwidth)
    from .dtypes import canonical

    return Placement(
        accelerator=acc.name,
        precision=canonical(precision),
        flops=flops,
        bytes=moved,
        intensity=intensity,
        ridge=ridge_point(peak, bandwidth),
        bound=bound(intensity, peak, bandwidth),
        attainable_flops_per_s=float(attainable(intensity, peak, bandwidth)),
        t_math_s=flops / peak,
        t_mem_s=moved / bandwidth,
        time_s=float(lower),
        time_upper_s=float(upper),
    )
