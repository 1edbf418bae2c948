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
:func:`plot` draws the roofs with kernels on them.

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

from ..errors import InvalidValue, UnsupportedPrecision
from ..formulas import ridge_point  # the formula lives once, in roofkit.formulas; exported here as roofline's own
from ..units import nonnegative, positive, size

__all__ = [
    "ridge_point", "attainable", "bound", "time_bounds", "percent_of_roofline",
    "Placement", "analyze",
    "crossing_size", "balance_point_matrix_size", "decode_batch_to_compute_bound",
    "Kernel", "Roof", "plot", "save_png",
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
    from ..dtypes import canonical
    from ..catalogs.hardware import get

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
    from ..dtypes import canonical
    from ..formulas import gemm
    from ..catalogs.hardware import get

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
    from ..dtypes import canonical
    from ..formulas import gemm
    from ..catalogs.hardware import get

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


@dataclass(frozen=True)
class Kernel:
    """A kernel to show on the plot: intensity in FLOP/byte, measured FLOP/s if any."""

    label: str
    intensity: float
    achieved_flops_per_s: float | None = None
    # where the label goes, in points from the dot (x, y); None: up and to the left
    label_offset: tuple[float, float] | None = None

    def __post_init__(self):
        positive(self.intensity, f"intensity of kernel {self.label!r}")
        if self.achieved_flops_per_s is not None:
            positive(self.achieved_flops_per_s, f"achieved_flops_per_s of kernel {self.label!r}")


@dataclass(frozen=True)
class Roof:
    """A custom roof min(peak_flops, bandwidth x I), e.g. a measured machine profile."""

    label: str
    peak_flops: float
    bandwidth: float

    def __post_init__(self):
        positive(self.peak_flops, f"peak_flops of roof {self.label!r}")
        positive(self.bandwidth, f"bandwidth of roof {self.label!r}")


def _kernel(item, measured: bool = False) -> Kernel:
    """A Kernel from a Kernel, a dict, or (label, cost or intensity[, achieved FLOP/s])."""
    if isinstance(item, dict):
        fields = dict(item)
        if "cost" in fields:
            fields["intensity"] = getattr(fields.pop("cost"), "intensity", None)
        try:
            item = Kernel(**fields)
        except TypeError:
            raise InvalidValue(
                f"A kernel dict needs 'label' and 'intensity' (or 'cost'), optionally "
                f"'achieved_flops_per_s'; got keys {sorted(item)}."
            ) from None
    elif isinstance(item, (tuple, list)) and len(item) in (2, 3):
        label, cost, *achieved = item
        item = Kernel(str(label), getattr(cost, "intensity", cost), *achieved)
    elif not isinstance(item, Kernel):
        raise InvalidValue(
            f"A kernel must be a Kernel, a dict or a (label, cost) tuple; got {item!r}."
        )
    if measured and item.achieved_flops_per_s is None:
        raise InvalidValue(f"Measured kernel {item.label!r} needs achieved_flops_per_s.")
    return item


def _many(value) -> tuple:
    return (value,) if isinstance(value, str) else tuple(value)


def _tera(value: float, unit: str) -> str:
    """989e12, 'FLOP/s' -> '989 TFLOP/s'; below 1e12 in G."""
    scale, prefix = (1e12, "T") if value >= 1e12 else (1e9, "G")
    return f"{value / scale:.4g} {prefix}{unit}"


def _short(name: str) -> str:
    """'NVIDIA H100 SXM5 80GB' -> 'H100 SXM5 80GB'."""
    head, _, rest = name.partition(" ")
    return rest if head in {"NVIDIA", "AMD", "Google", "Intel"} and rest else name


def plot(accelerators=("h100",), precisions=("bf16",), kernels=(), measured=(), roofs=(),
         ax=None, xlim=None, ylim=None, title=None, arrows=()):
    """Draw the roofline(s) and place kernels on them; returns the matplotlib Figure.

    One memory roof (slope B) per accelerator and one flat compute roof per
    precision it has (precisions with the same peak, BF16 and FP16, share
    one), its ridge marked. A precision the chip lacks is skipped when several
    were asked for, and raises UnsupportedPrecision when it was the only one.
    ``kernels`` are predictions, drawn ON the first roof at attainable(I);
    ``measured`` are drawn hollow at their achieved FLOP/s, with a line up to
    the roof and their % of it. Each is a :class:`Kernel`, a dict, or a
    (label, cost) tuple with a cost such as ``formulas.gemm(...)``. ``roofs``
    adds :class:`Roof` lines (a measured machine). ``arrows`` draws moves
    between points, each (start, end, text) with start and end a kernel's
    label or an (intensity, FLOP/s) pair: batching as a move to the right, a
    better kernel as a move up. Without ``ax`` the figure is not registered
    with pyplot: end a notebook cell with it, or pass ``ax=plt.gca()``.
    """
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter, FuncFormatter, NullFormatter

    from ..dtypes import canonical
    from ..catalogs.hardware import get

    chips = [get(a) for a in _many(accelerators)]
    asked = list(dict.fromkeys(canonical(p) for p in _many(precisions)))
    pairs = []  # (accelerator, precision)
    for acc in chips:
        have = [p for p in asked if p in acc.peak_flops]
        if not have:
            raise UnsupportedPrecision(acc.name, " or ".join(asked) or "any", acc.peak_flops)
        pairs += [(acc, p) for p in have]
    extra = [r if isinstance(r, Roof) else Roof(**r) if isinstance(r, dict) else Roof(*r) for r in roofs]
    predicted = [_kernel(k) for k in kernels]
    seen = [_kernel(k, measured=True) for k in measured]
    roof_list = [(a.peak(p), a.bandwidth) for a, p in pairs] + [(r.peak_flops, r.bandwidth) for r in extra]
    if not roof_list:
        raise InvalidValue("plot() needs at least one accelerator or roof to draw.")
    ridges = [P / B for P, B in roof_list]

    # axis ranges: whole decades around the ridges and the kernels
    xs = ridges + [k.intensity for k in predicted + seen]
    x0 = xlim or (10.0 ** math.floor(math.log10(min(min(xs) / 10, min(ridges) / 1000))),
                  10.0 ** math.ceil(math.log10(max(max(xs) * 3, max(ridges) * 10))))
    ys = [B * x0[0] for _, B in roof_list] + [k.achieved_flops_per_s for k in seen]
    y0 = ylim or (10.0 ** math.floor(math.log10(min(ys))), max(P for P, _ in roof_list) * 4)

    if ax is None:
        ax = Figure(figsize=(9, 5.5), layout="constrained").add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*x0)
    ax.set_ylim(*y0)
    # the memory-bound region of the first roof, lightly shaded
    ax.axvspan(x0[0], ridges[0], color="0.5", alpha=0.08, lw=0, gid="memory-bound region")
    ax.text(x0[0] * 1.3, y0[1] / 1.5, "memory-bound", color="0.45", fontsize=9, va="top")
    ax.text(ridges[0] * 1.3, y0[1] / 1.5, "compute-bound", color="0.45", fontsize=9, va="top")

    for i, acc in enumerate(chips):
        _draw_accelerator(ax, acc, [p for a, p in pairs if a is acc], f"C{i}", x0, y0)
    for i, r in enumerate(extra, start=len(chips)):
        I_star = r.peak_flops / r.bandwidth
        ax.plot([x0[0], I_star, x0[1]], [r.bandwidth * x0[0], r.peak_flops, r.peak_flops],
                color=f"C{i}", lw=1.5, ls="--", gid="custom-roof",
                label=f"{r.label}: {_tera(r.peak_flops, 'FLOP/s')}, {_tera(r.bandwidth, 'B/s')}")
    points = _draw_kernels(ax, predicted, seen, *roof_list[0])  # kernels sit on the first roof
    _draw_arrows(ax, arrows, points)

    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable performance (FLOP/s)")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(EngFormatter(unit="FLOP/s"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.grid(True, which="major", color="0.9", lw=0.6)
    if title is None:
        names = [_short(a.name) for a in chips] + [r.label for r in extra]
        title = f"Roofline: {names[0]}" if len(names) == 1 else "Rooflines"
        title += f" ({', '.join(p.upper() for p in asked)})" if chips else ""
    ax.set_title(title)
    if len(ax.get_legend_handles_labels()[1]) > 5:  # a long legend goes beside the axes
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    else:
        ax.legend(loc="lower right", fontsize=8, framealpha=0.9)
    return ax.figure


def _draw_accelerator(ax, acc, precisions, color, x0, y0):
    """One memory roof up to the highest ridge, then a flat roof and a ridge mark per peak."""
    top = max(acc.ridge(p) for p in precisions)
    ax.plot([x0[0], top], [acc.bandwidth * x0[0], acc.bandwidth * top], color=color, lw=2,
            label=f"{_short(acc.name)} memory {_tera(acc.bandwidth, 'B/s')}", gid="memory-roof")
    peaks = {}  # precisions with the same peak share one line (BF16/FP16)
    for p in precisions:
        peaks.setdefault(acc.peak(p), []).append(p.upper())
    styles = ["-", "--", "-.", (0, (5, 1, 1, 1, 1, 1))]
    for j, (P, names) in enumerate(peaks.items()):
        I_star = ridge_point(P, acc.bandwidth)
        ax.plot([I_star, x0[1]], [P, P], color=color, lw=2, ls=styles[j % len(styles)],
                label=f"{_short(acc.name)} {'/'.join(names)} {_tera(P, 'FLOP/s')}", gid="compute-roof")
        ax.plot([I_star, I_star], [y0[0], P], color=color, lw=1, ls=":", gid="ridge")
        ax.annotate(f"ridge {I_star:.0f} FLOP/B" if I_star >= 100 else f"ridge {I_star:.3g} FLOP/B",
                    xy=(I_star, P), xytext=(4, -4), textcoords="offset points", ha="left", va="top",
                    fontsize=8, color=color, bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.7))


def _draw_kernels(ax, predicted, seen, P, B) -> dict:
    """Kernels in black, one marker shape per label: predictions filled ON the roof
    min(P, B I), measurements hollow at their achieved FLOP/s with a line up to the roof.
    Returns each label's point (intensity, FLOP/s)."""
    shapes, box = {}, dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.8)
    points = {k.label: (k.intensity, attainable(k.intensity, P, B)) for k in predicted}
    points.update({k.label: (k.intensity, k.achieved_flops_per_s) for k in seen})
    for k in predicted + seen:
        shapes.setdefault(k.label, "osD^vph*"[len(shapes) % 8])
    for n, k in enumerate(predicted):
        y = attainable(k.intensity, P, B)
        ax.scatter([k.intensity], [y], s=40, marker=shapes[k.label], color="0.1", zorder=5,
                   gid="kernel", label="predicted (on the roof)" if n == 0 else None)
        dx, dy = k.label_offset or (-6, 8)
        ax.annotate(k.label, xy=(k.intensity, y), xytext=(dx, dy), textcoords="offset points",
                    ha="right" if dx <= 0 else "left", fontsize=9, bbox=box, gid="kernel-label")
    for n, k in enumerate(seen):
        ax.plot([k.intensity, k.intensity], [k.achieved_flops_per_s, attainable(k.intensity, P, B)],
                color="0.1", lw=0.8, gid="measured-gap")
        ax.scatter([k.intensity], [k.achieved_flops_per_s], s=40, marker=shapes[k.label], zorder=5,
                   facecolors="white", edgecolors="0.1", linewidths=1.3, gid="measured",
                   label="measured" if n == 0 else None)
        pct = percent_of_roofline(k.achieved_flops_per_s, k.intensity, P, B)
        ax.annotate(f"{k.label} ({pct:.0f}% of roof)", xy=(k.intensity, k.achieved_flops_per_s),
                    xytext=k.label_offset or (7, -12), textcoords="offset points", fontsize=9, bbox=box)
    return points


def _draw_arrows(ax, arrows, points: dict) -> None:
    """Curved red arrows between two points (kernel labels or (intensity, FLOP/s)), each with its text."""
    def point(end):
        if isinstance(end, str):
            if end not in points:
                raise InvalidValue(f"An arrow names the kernel {end!r}, which is not on the plot; "
                                   f"kernels: {', '.join(points) or 'none'}.")
            return points[end]
        try:
            x, y = end
            return positive(x, "an arrow's intensity"), positive(y, "an arrow's FLOP/s")
        except (TypeError, ValueError):
            raise InvalidValue(f"An arrow's end is a kernel label or an (intensity, FLOP/s) pair; "
                               f"got {end!r}.") from None

    for item in arrows:
        try:
            start, end, text = item
        except (TypeError, ValueError):
            raise InvalidValue(f"An arrow is (start, end, text); got {item!r}.") from None
        (x0, y0), (x1, y1) = point(start), point(end)
        ax.annotate("", xy=(x1, y1), xytext=(x0, y0), gid="arrow",
                    arrowprops=dict(arrowstyle="-|>", color="C3", lw=1.8, shrinkA=7, shrinkB=7,
                                    connectionstyle="arc3,rad=0.3" if x0 != x1 else "arc3"))  # below the roof
        mid = ((x0 * x1) ** 0.5, (y0 * y1) ** 0.5)  # the middle on log axes
        ax.annotate(text, xy=mid, xytext=(12, -18) if x0 != x1 else (-10, 0), textcoords="offset points",
                    color="C3", fontsize=9, ha="left" if x0 != x1 else "right", va="center",
                    bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.8))


def save_png(fig, path, dpi=100) -> Path:
    """Write ``fig`` to ``path`` as a PNG (no timestamp, so the bytes are reproducible) and close it."""
    path = Path(path)
    fig.savefig(path, format="png", dpi=positive(dpi, "dpi"), metadata={"Software": None})
    if "matplotlib.pyplot" in sys.modules:  # only pyplot holds figures open
        sys.modules["matplotlib.pyplot"].close(fig)
    return path
