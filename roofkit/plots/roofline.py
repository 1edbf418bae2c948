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

from ..dtypes import canonical
from ..errors import InvalidValue, UnsupportedPrecision
from ..perf.roofline import *  # noqa: F403  the model, under the public name lessons use
from ..perf.roofline import __all__ as _model
from ..perf.roofline import attainable, percent_of_roofline, ridge_point
from ..units import positive
from .style import ACCELERATORS, GRID, INK, LABEL_BOX, PALETTE, PRECISION_LINES, SIZE

__all__ = [*_model, "Kernel", "Roof", "plot", "save_png", "span", "frame", "draw_roofs", "roof_figures",
           "kinds_legend", "kernel_marks"]

# how an accelerator's roofs and an extra roof (a measured machine) are drawn
_ROOF_LINE = {"lw": 2}
_EXTRA_LINE = {"lw": 1.5, "ls": "--"}
# a predicted kernel: its dot (a marker of this area, in points squared), the white box behind its label, and
# its name in a legend
_KERNEL_AREA = 40
_LABEL_BOX = dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.8)
_PREDICTED = "predicted (on the roof)"
_LABEL_OFFSET = (-6, 8)  # points from the dot: up and to the left
# a predicted kernel's label placed farther than this from its dot (points; about two lines of label text) gets a
# thin line to it, so that it still reads as the dot's
_LEADER_BEYOND = 25


@dataclass(frozen=True)
class Kernel:
    """A kernel to show on the plot: intensity in FLOP/byte, measured FLOP/s if any."""

    label: str
    intensity: float
    achieved_flops_per_s: float | None = None
    # where the label goes, in points from the dot (x, y) to the start of the label's baseline; None: up and to
    # the left. A label more than 25 points away gets a thin line to its dot.
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
    """989e12, 'FLOP/s' -> '989 TFLOP/s'; below 1e12 in G; from 10,000 in whole units, with commas."""
    scale, prefix = (1e12, "T") if value >= 1e12 else (1e9, "G")
    figure = value / scale
    return f"{figure:,.0f} {prefix}{unit}" if figure >= 1e4 else f"{figure:.4g} {prefix}{unit}"


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
    from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.2 s at import

    chips, asked, pairs, extra = _machines(accelerators, precisions, roofs)
    predicted = [_kernel(k) for k in kernels]
    seen = [_kernel(k, measured=True) for k in measured]
    roof_list = _roof_list(pairs, extra)
    if not roof_list:
        raise InvalidValue("plot() needs at least one accelerator or roof to draw.")
    ridges = [P / B for P, B in roof_list]

    # axis ranges: whole decades around the ridges and the kernels
    xs = ridges + [k.intensity for k in predicted + seen]
    x0 = xlim or (10.0 ** math.floor(math.log10(min(min(xs) / 10, min(ridges) / 1000))),
                  10.0 ** math.ceil(math.log10(max(max(xs) * 3, max(ridges) * 10))))
    y0 = ylim or span(roof_list, x0, [k.achieved_flops_per_s for k in seen])

    if ax is None:
        ax = Figure(figsize=(9, 5.5), layout="constrained").add_subplot()
    frame(ax, x0, y0)
    _draw_machines(ax, chips, pairs, extra, x0, y0)
    points = _draw_kernels(ax, predicted, seen, *roof_list[0])  # kernels sit on the first roof
    _draw_arrows(ax, arrows, points)
    if title is None:
        names = [_short(a.name) for a in chips] + [r.label for r in extra]
        title = f"Roofline: {names[0]}" if len(names) == 1 else "Rooflines"
        title += f" ({', '.join(p.upper() for p in asked)})" if chips else ""
    ax.set_title(title)
    _legend(ax)
    return ax.figure


def _machines(accelerators, precisions, roofs):
    """The chips, the precisions asked, the (chip, precision) pairs to draw and the extra :class:`Roof` s."""
    from ..catalogs.hardware import get  # deferred: the hardware catalog imports numpy at its top

    chips = [get(a) for a in _many(accelerators)]
    asked = list(dict.fromkeys(canonical(p) for p in _many(precisions)))
    pairs = []  # (accelerator, precision)
    for acc in chips:
        have = [p for p in asked if p in acc.peak_flops]
        if not have:
            raise UnsupportedPrecision(acc.name, " or ".join(asked) or "any", acc.peak_flops)
        pairs += [(acc, p) for p in have]
    extra = [r if isinstance(r, Roof) else Roof(**r) if isinstance(r, dict) else Roof(*r) for r in roofs]
    return chips, asked, pairs, extra


def span(roofs, xlim, achieved=()) -> tuple[float, float]:
    """The FLOP/s range :func:`plot` gives ``roofs`` ((peak FLOP/s, bandwidth B/s) pairs) over ``xlim``.

    From the whole decade below the lowest memory roof at the left edge (or below a measured
    ``achieved`` FLOP/s) up to four times the highest peak, so that the flat roofs and their labels
    sit below the top edge.

        >>> span([(989e12, 3.35e12)], (0.01, 1e5))
        (10000000000.0, 3956000000000000.0)
    """
    ys = [B * xlim[0] for _, B in roofs] + list(achieved)
    return 10.0 ** math.floor(math.log10(min(ys))), max(P for P, _ in roofs) * 4


def frame(ax, xlim, ylim) -> None:
    """The chart without anything on it: log axes over ``xlim`` and ``ylim``, their labels, tick formats, grid.

    :func:`plot` starts with it; a figure whose roofs change while its axes stay put (the roofline
    explorer) draws it once and :func:`draw_roofs` over it for each accelerator.
    """
    from matplotlib.ticker import EngFormatter, FuncFormatter, NullFormatter  # deferred: matplotlib, ~0.2 s

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable performance (FLOP/s)")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(EngFormatter(unit="FLOP/s"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.grid(True, which="major", color=GRID, lw=0.6)


def draw_roofs(ax, accelerators=("h100",), precisions=("bf16",), roofs=(), xlim=(1e-2, 1e5), ylim=None) -> None:
    """The roofs :func:`plot` draws, on axes that :func:`frame` drew: the first roof's memory-bound region,
    one memory roof per accelerator, a flat roof and a ridge per peak, and the extra ``roofs``.

    No title, no legend, no kernel: the roofline explorer draws this once per accelerator and
    precision over axes that stay put (``ylim`` defaults to :func:`span` of the roofs), under a
    legend drawn once (:func:`kinds_legend`), with the roofs' figures in its title.
    """
    chips, _, pairs, extra = _machines(accelerators, precisions, roofs)
    ylim = ylim or span(_roof_list(pairs, extra), xlim)
    _draw_machines(ax, chips, pairs, extra, xlim, ylim)


def roof_figures(peak_flops: float, bandwidth: float) -> str:
    """A roof's two figures as the chart writes them: '989 TFLOP/s, 3.35 TB/s'."""
    return f"{_tera(peak_flops, 'FLOP/s')}, {_tera(bandwidth, 'B/s')}"


def kinds_legend(ax, extra="achievable roofs (measured)"):
    """A legend of what the chart's marks are, without their figures: an accelerator's roofs, an extra
    roof (``extra``, dashed) and a predicted kernel. Drawn once, in the upper left under the
    'memory-bound' label, where no roof of a real chip reaches (the memory roof there is thousands of
    times below the flat roofs): the roofline explorer's roofs change under it, and their figures are
    in its title."""
    from matplotlib.lines import Line2D  # deferred: matplotlib costs ~0.2 s at import

    handles = [Line2D([], [], color=ACCELERATORS[0], **_ROOF_LINE, label="datasheet roofs (memory, then compute)"),
               Line2D([], [], color=ACCELERATORS[1], **_EXTRA_LINE, label=extra),
               Line2D([], [], **_dot(), label=_PREDICTED)]
    return ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0, 0.93), fontsize=SIZE["small"],
                     frameon=False)


def _roof_list(pairs, extra) -> list[tuple[float, float]]:
    return [(a.peak(p), a.bandwidth) for a, p in pairs] + [(r.peak_flops, r.bandwidth) for r in extra]


def _draw_machines(ax, chips, pairs, extra, x0, y0) -> None:
    """The memory-bound region of the first roof (shaded, both regions named), then every roof."""
    ridges = [P / B for P, B in _roof_list(pairs, extra)]
    ax.axvspan(x0[0], ridges[0], color=PALETTE["grey"], alpha=0.08, lw=0, gid="memory-bound region")
    ax.text(x0[0] * 1.3, y0[1] / 1.5, "memory-bound", color=INK["faint"], fontsize=SIZE["text"], va="top")
    ax.text(ridges[0] * 1.3, y0[1] / 1.5, "compute-bound", color=INK["faint"], fontsize=SIZE["text"], va="top")
    for i, acc in enumerate(chips):
        _draw_accelerator(ax, acc, [p for a, p in pairs if a is acc], ACCELERATORS[i % len(ACCELERATORS)], x0, y0)
    for i, r in enumerate(extra, start=len(chips)):
        I_star = r.peak_flops / r.bandwidth
        ax.plot([x0[0], I_star, x0[1]], [r.bandwidth * x0[0], r.peak_flops, r.peak_flops],
                color=ACCELERATORS[i % len(ACCELERATORS)], **_EXTRA_LINE, gid="custom-roof",
                label=f"{r.label}: {roof_figures(r.peak_flops, r.bandwidth)}")


def _legend(ax):
    """The chart's legend: inside, lower right, or beside the axes when it is long (more than five lines)."""
    if len(ax.get_legend_handles_labels()[1]) > 5:  # a long legend goes beside the axes
        return ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=SIZE["small"])
    return ax.legend(loc="lower right", fontsize=SIZE["small"], framealpha=0.9)


def kernel_marks(ax):
    """A predicted kernel's dot and label as :func:`plot` draws them, empty, for a figure that moves them.

    Returns (dot, label): a Line2D marker (``set_data``) and an annotation (``xy``, ``set_text``),
    drawn above the roofs; the roofline explorer moves them as its slider moves.
    """
    dot = ax.plot([], [], **_dot(), zorder=5)[0]
    label = ax.annotate("", xy=(1, 1), xytext=_LABEL_OFFSET, textcoords="offset points", ha="right",
                        fontsize=SIZE["text"], bbox=_LABEL_BOX, gid="kernel-label")
    return dot, label


def _dot() -> dict:
    """A predicted kernel as a plain marker: what :func:`plot` draws as a scatter point."""
    return dict(ls="none", marker="o", ms=_KERNEL_AREA ** 0.5, color=INK["mark"])


def _draw_accelerator(ax, acc, precisions, color, x0, y0):
    """One memory roof up to the highest ridge, then a flat roof and a ridge mark per peak."""
    top = max(acc.ridge(p) for p in precisions)
    ax.plot([x0[0], top], [acc.bandwidth * x0[0], acc.bandwidth * top], color=color, **_ROOF_LINE,
            label=f"{_short(acc.name)} memory {_tera(acc.bandwidth, 'B/s')}", gid="memory-roof")
    peaks = {}  # precisions with the same peak share one line (BF16/FP16)
    for p in precisions:
        peaks.setdefault(acc.peak(p), []).append(p.upper())
    for j, (P, names) in enumerate(peaks.items()):
        I_star = ridge_point(P, acc.bandwidth)
        ax.plot([I_star, x0[1]], [P, P], color=color, **_ROOF_LINE, ls=PRECISION_LINES[j % len(PRECISION_LINES)],
                label=f"{_short(acc.name)} {'/'.join(names)} {_tera(P, 'FLOP/s')}", gid="compute-roof")
        ax.plot([I_star, I_star], [y0[0], P], color=color, lw=1, ls=":", gid="ridge")
        ax.annotate(f"ridge {I_star:.0f} FLOP/B" if I_star >= 100 else f"ridge {I_star:.3g} FLOP/B",
                    xy=(I_star, P), xytext=(4, -4), textcoords="offset points", ha="left", va="top",
                    fontsize=SIZE["small"], color=color, bbox={**LABEL_BOX, "alpha": 0.7})


def _draw_kernels(ax, predicted, seen, P, B) -> dict:
    """Kernels in black, one marker shape per label: predictions filled ON the roof
    min(P, B I), measurements hollow at their achieved FLOP/s with a line up to the roof.
    Returns each label's point (intensity, FLOP/s)."""
    shapes, box = {}, _LABEL_BOX
    points = {k.label: (k.intensity, attainable(k.intensity, P, B)) for k in predicted}
    points.update({k.label: (k.intensity, k.achieved_flops_per_s) for k in seen})
    for k in predicted + seen:
        shapes.setdefault(k.label, "osD^vph*"[len(shapes) % 8])
    for n, k in enumerate(predicted):
        y = attainable(k.intensity, P, B)
        ax.scatter([k.intensity], [y], s=_KERNEL_AREA, marker=shapes[k.label], color=INK["mark"], zorder=5,
                   gid="kernel", label=_PREDICTED if n == 0 else None)
        dx, dy = k.label_offset or _LABEL_OFFSET
        # a far label: a line to its dot, drawn under the ridges' labels (text, zorder 3) that it may cross
        far = math.hypot(dx, dy) > _LEADER_BEYOND
        ax.annotate(k.label, xy=(k.intensity, y), xytext=(dx, dy), textcoords="offset points",
                    ha="right" if dx <= 0 else "left", fontsize=SIZE["text"], bbox=box, gid="kernel-label",
                    **(dict(arrowprops=dict(arrowstyle="-", color=INK["faint"], lw=0.8, shrinkA=0, shrinkB=4),
                            zorder=2.9) if far else {}))
    for n, k in enumerate(seen):
        ax.plot([k.intensity, k.intensity], [k.achieved_flops_per_s, attainable(k.intensity, P, B)],
                color=INK["mark"], lw=0.8, gid="measured-gap")
        ax.scatter([k.intensity], [k.achieved_flops_per_s], s=_KERNEL_AREA, marker=shapes[k.label], zorder=5,
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
                    bbox=_LABEL_BOX)


def save_png(fig, path, dpi=100) -> Path:
    """Write ``fig`` to ``path`` as a PNG (no timestamp, so the bytes are reproducible) and close it."""
    path = Path(path)
    fig.savefig(path, format="png", dpi=positive(dpi, "dpi"), metadata={"Software": None})
    if "matplotlib.pyplot" in sys.modules:  # only pyplot holds figures open
        sys.modules["matplotlib.pyplot"].close(fig)
    return path
