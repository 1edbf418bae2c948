"""The roofline chart: roofs of accelerators and precisions, kernels placed on them.

``roofkit.roofline``, the name lessons use, is this module: the chart below and
the model of :mod:`roofkit.perf.roofline` (attainable, bound, ridge_point,
analyze, ...) re-exported, so ``roofline.analyze`` and ``roofline.plot`` sit
side by side while the model itself never imports the figures' layer.
Colours and sizes come from :mod:`roofkit.plots.style`: a colour per
accelerator (``ACCELERATORS``), a line style per precision (``PRECISION_LINES``).

    >>> from roofkit import roofline
    >>> fig = roofline.plot("h100", "bf16", kernels=[("GEMV", 1.0)])
    >>> [line.get_label() for line in fig.axes[0].lines][:2]
    ['H100 SXM5 80GB memory 3.35 TB/s', 'H100 SXM5 80GB BF16 989 TFLOP/s']
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidValue, UnsupportedPrecision
from ..perf.roofline import *  # noqa: F403  the model, under the public name lessons use
from ..perf.roofline import __all__ as _model
from ..perf.roofline import attainable, percent_of_roofline, ridge_point
from ..units import positive
from .style import ACCELERATORS, GRID, INK, LABEL_BOX, PALETTE, PRECISION_LINES, SIZE

__all__ = [*_model, "Kernel", "Roof", "plot", "save_png"]


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
    ax.axvspan(x0[0], ridges[0], color=PALETTE["grey"], alpha=0.08, lw=0, gid="memory-bound region")
    ax.text(x0[0] * 1.3, y0[1] / 1.5, "memory-bound", color=INK["faint"], fontsize=SIZE["text"], va="top")
    ax.text(ridges[0] * 1.3, y0[1] / 1.5, "compute-bound", color=INK["faint"], fontsize=SIZE["text"], va="top")

    for i, acc in enumerate(chips):
        _draw_accelerator(ax, acc, [p for a, p in pairs if a is acc], ACCELERATORS[i % len(ACCELERATORS)], x0, y0)
    for i, r in enumerate(extra, start=len(chips)):
        I_star = r.peak_flops / r.bandwidth
        ax.plot([x0[0], I_star, x0[1]], [r.bandwidth * x0[0], r.peak_flops, r.peak_flops],
                color=ACCELERATORS[i % len(ACCELERATORS)], lw=1.5, ls="--", gid="custom-roof",
                label=f"{r.label}: {_tera(r.peak_flops, 'FLOP/s')}, {_tera(r.bandwidth, 'B/s')}")
    points = _draw_kernels(ax, predicted, seen, *roof_list[0])  # kernels sit on the first roof
    _draw_arrows(ax, arrows, points)

    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable performance (FLOP/s)")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(EngFormatter(unit="FLOP/s"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.grid(True, which="major", color=GRID, lw=0.6)
    if title is None:
        names = [_short(a.name) for a in chips] + [r.label for r in extra]
        title = f"Roofline: {names[0]}" if len(names) == 1 else "Rooflines"
        title += f" ({', '.join(p.upper() for p in asked)})" if chips else ""
    ax.set_title(title)
    if len(ax.get_legend_handles_labels()[1]) > 5:  # a long legend goes beside the axes
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=SIZE["small"])
    else:
        ax.legend(loc="lower right", fontsize=SIZE["small"], framealpha=0.9)
    return ax.figure


def _draw_accelerator(ax, acc, precisions, color, x0, y0):
    """One memory roof up to the highest ridge, then a flat roof and a ridge mark per peak."""
    top = max(acc.ridge(p) for p in precisions)
    ax.plot([x0[0], top], [acc.bandwidth * x0[0], acc.bandwidth * top], color=color, lw=2,
            label=f"{_short(acc.name)} memory {_tera(acc.bandwidth, 'B/s')}", gid="memory-roof")
    peaks = {}  # precisions with the same peak share one line (BF16/FP16)
    for p in precisions:
        peaks.setdefault(acc.peak(p), []).append(p.upper())
    for j, (P, names) in enumerate(peaks.items()):
        I_star = ridge_point(P, acc.bandwidth)
        ax.plot([I_star, x0[1]], [P, P], color=color, lw=2, ls=PRECISION_LINES[j % len(PRECISION_LINES)],
                label=f"{_short(acc.name)} {'/'.join(names)} {_tera(P, 'FLOP/s')}", gid="compute-roof")
        ax.plot([I_star, I_star], [y0[0], P], color=color, lw=1, ls=":", gid="ridge")
        ax.annotate(f"ridge {I_star:.0f} FLOP/B" if I_star >= 100 else f"ridge {I_star:.3g} FLOP/B",
                    xy=(I_star, P), xytext=(4, -4), textcoords="offset points", ha="left", va="top",
                    fontsize=SIZE["small"], color=color, bbox={**LABEL_BOX, "alpha": 0.7})


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
        ax.scatter([k.intensity], [y], s=40, marker=shapes[k.label], color=INK["mark"], zorder=5,
                   gid="kernel", label="predicted (on the roof)" if n == 0 else None)
        dx, dy = k.label_offset or (-6, 8)
        ax.annotate(k.label, xy=(k.intensity, y), xytext=(dx, dy), textcoords="offset points",
                    ha="right" if dx <= 0 else "left", fontsize=SIZE["text"], bbox=box, gid="kernel-label")
    for n, k in enumerate(seen):
        ax.plot([k.intensity, k.intensity], [k.achieved_flops_per_s, attainable(k.intensity, P, B)],
                color=INK["mark"], lw=0.8, gid="measured-gap")
        ax.scatter([k.intensity], [k.achieved_flops_per_s], s=40, marker=shapes[k.label], zorder=5,
                   facecolors="white", edgecolors=INK["mark"], linewidths=1.3, gid="measured",
                   label="measured" if n == 0 else None)
        pct = percent_of_roofline(k.achieved_flops_per_s, k.intensity, P, B)
        ax.annotate(f"{k.label} ({pct:.0f}% of roof)", xy=(k.intensity, k.achieved_flops_per_s),
                    xytext=k.label_offset or (7, -12), textcoords="offset points", fontsize=SIZE["text"], bbox=box)
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
                    arrowprops=dict(arrowstyle="-|>", color=PALETTE["red"], lw=1.8, shrinkA=7, shrinkB=7,
                                    connectionstyle="arc3,rad=0.3" if x0 != x1 else "arc3"))  # below the roof
        mid = ((x0 * x1) ** 0.5, (y0 * y1) ** 0.5)  # the middle on log axes
        ax.annotate(text, xy=mid, xytext=(12, -18) if x0 != x1 else (-10, 0), textcoords="offset points",
                    color=PALETTE["red"], fontsize=SIZE["text"], ha="left" if x0 != x1 else "right", va="center",
                    bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.8))


def save_png(fig, path, dpi=100) -> Path:
    """Write ``fig`` to ``path`` as a PNG (no timestamp, so the bytes are reproducible) and close it."""
    path = Path(path)
    fig.savefig(path, format="png", dpi=positive(dpi, "dpi"), metadata={"Software": None})
    if "matplotlib.pyplot" in sys.modules:  # only pyplot holds figures open
        sys.modules["matplotlib.pyplot"].close(fig)
    return path
