"""The measured roofline, with the measured kernels on it.

:func:`roofkit.roofline.plot` draws the roofs (your machine's, and any catalog
accelerator beside it). The kernels are drawn here, because a measured kernel
set has a shape of its own: five kinds of kernel, each at up to three sizes.
Colour and marker say which kernel; the fill says where its data lived:

    filled   L2      (the core's own cache)
    half     LLC     (the last-level cache)
    hollow   DRAM    (at least 4x the last-level cache: memory)

Each dot sits at the kernel's intensity as it runs and at the FLOP rate it
achieved, with a thin line up (or down) to the roof, labelled with its % of
the roof (the fill already says where its data lived, so the label is short:
the kernels of one kind share an intensity and stack up). A kernel above 100%
beat the measured roof. Under the memory roof that can be real: its data came
from a cache, which has its own, higher bandwidth; from memory, the roof was
measured in a noisy moment. On the compute roof it is always noise: no cache
raises the compute roof (see :mod:`roofkit.measure.sanity`). The figure says
so in its legend.
"""

from __future__ import annotations

import math

from . import roofline
from . import style

__all__ = ["profile_plot", "STYLE", "FILL"]

STYLE = {"add": ("o", style.PALETTE["green"]), "reduction": ("s", style.PALETTE["red"]),
         "gemv": ("D", style.PALETTE["purple"]), "gemm": ("^", style.PALETTE["brown"]),
         "softmax": ("v", style.PALETTE["pink"])}
FILL = {"L2": ("full", "filled: in L2"), "LLC": ("left", "half: in the last-level cache"),
        ">LLC": ("bottom", "bottom half: partly in the last-level cache"),
        "DRAM": ("none", "hollow: in memory (DRAM)")}


def _decades(lo: float, hi: float) -> tuple[float, float]:
    return 10.0 ** math.floor(math.log10(lo)), 10.0 ** math.ceil(math.log10(hi))


def profile_plot(profile, beside=(), kernels=None, precisions=("fp32", "fp64"), title=None):
    """The profile's roofline (roofs in ``precisions``), ``beside`` accelerators, and its kernels."""
    from matplotlib.lines import Line2D  # deferred: matplotlib costs ~0.2 s at import

    shown = list(profile.kernels if kernels is None else kernels)
    acc = profile.accelerator()
    P, B = profile.peak_flops_per_s["fp32"], profile.bandwidth_bytes_per_s
    ridges = [acc.ridge(p) for p in precisions if p in acc.peak_flops]
    xs = [k.intensity for k in shown] + ridges
    xlim = _decades(min(min(xs) / 3, min(ridges) / 100), max(max(xs) * 3, max(ridges) * 10))
    floor = min([B * xlim[0]] + [k.achieved_flops_per_s / 3 for k in shown])
    from ..catalogs import hardware  # cheap, no circle: may move to the top

    top = max(max(hardware.get(a).peak_flops.values()) for a in beside) if beside else 0
    ylim = (_decades(floor, 1)[0], max(P, profile.peak_flops_per_s.get("fp64", 0), top) * 4)
    fig = roofline.plot(accelerators=(acc, *beside), precisions=precisions, xlim=xlim, ylim=ylim,
                        title=title or f"Your machine, measured: {profile.host}")
    fig.set_size_inches(11, 5.8)  # room for the legend beside the axes
    ax = fig.axes[0]
    for k in shown:
        marker, color = STYLE.get(k.kernel, ("o", "0.2"))
        roof = roofline.attainable(k.intensity, P, B)
        ax.plot([k.intensity, k.intensity], [k.achieved_flops_per_s, roof], color="0.55", lw=0.7,
                gid="measured-gap")
        ax.plot([k.intensity], [k.achieved_flops_per_s], marker=marker, color=color, markersize=8,
                markeredgewidth=1.3, fillstyle=FILL.get(k.where, ("none",))[0], linestyle="none",
                markerfacecoloralt="white", gid="measured", zorder=5)
        percent = roofline.percent_of_roofline(k.achieved_flops_per_s, k.intensity, P, B)
        ax.annotate(f"{percent:.0f}%", xy=(k.intensity, k.achieved_flops_per_s), xytext=(7, -12),
                    textcoords="offset points", fontsize=style.SIZE["small"], color=color, gid="measured-label",
                    fontweight="bold" if percent > 100 else "normal",
                    bbox=dict(style.LABEL_BOX, alpha=0.8))
    handles, _ = ax.get_legend_handles_labels()
    kinds = list(dict.fromkeys(k.kernel for k in shown))
    handles += [Line2D([], [], marker=STYLE.get(kind, ("o", "0.2"))[0], color=STYLE.get(kind, ("o", "0.2"))[1],
                       linestyle="none", markersize=7, label=kind) for kind in kinds]
    places = [p for p in FILL if any(k.where == p for k in shown)]
    handles += [Line2D([], [], marker="o", color="0.35", fillstyle=FILL[p][0], markerfacecoloralt="white",
                       linestyle="none", markersize=7, label=FILL[p][1]) for p in places]
    if shown:
        handles.append(Line2D([], [], color="0.55", lw=0.7, label="line to the FP32 roof; label: % of it"))
    over = [k for k in shown if roofline.percent_of_roofline(k.achieved_flops_per_s, k.intensity, P, B) > 100]
    if over:
        lines = ["bold, over 100%: faster than the measured roof."]
        if any(k.intensity < P / B for k in over):
            lines.append("Under the slope, from a cache: the cache's\nown, higher bandwidth; from memory: noise.")
        if any(k.intensity >= P / B for k in over):
            lines.append("On the flat roof: noise; no cache raises\nthe compute roof (see the checks).")
        handles.append(Line2D([], [], linestyle="none", label="\n".join(lines)))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=style.SIZE["small"])
    from matplotlib.ticker import NullLocator  # deferred: matplotlib costs ~0.2 s at import

    for axis in (ax.xaxis, ax.yaxis):  # every decade is labelled; unlabelled minor ticks cost half the drawing
        axis.set_minor_locator(NullLocator())
    _spread_labels(ax)
    return fig


def _spread_labels(ax) -> None:
    """Move the kernels' labels so that they do not overlap (kernels crowd at low intensity).

    Each label tries a few places around its dot, the first free one wins;
    labels are placed from the top of the plot down.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # deferred: matplotlib costs ~0.2 s at import

    fig = ax.figure
    renderer = FigureCanvasAgg(fig).get_renderer()
    labels = [t for t in ax.texts if t.get_gid() == "measured-label"]
    pt = fig.dpi / 72  # pixels per point
    frame = ax.get_window_extent(renderer)
    r = 6 * pt  # a marker's half-width: labels keep off every dot, not only off each other
    placed = [(x - r, y - r, x + r, y + r) for x, y in (ax.transData.transform(t.xy) for t in labels)]

    def box(label, dx, dy, ha):
        x, y = ax.transData.transform(label.xy)
        extent = label.get_window_extent(renderer)
        x0 = x + dx * pt - (extent.width if ha == "right" else 0)
        y0 = y + dy * pt - 0.25 * extent.height
        return (x0, y0, x0 + extent.width, y0 + extent.height)

    def clash(b):
        inside = frame.x0 <= b[0] and b[2] <= frame.x1 and frame.y0 <= b[1] and b[3] <= frame.y1
        return sum(max(0, min(b[2], o[2]) - max(b[0], o[0])) * max(0, min(b[3], o[3]) - max(b[1], o[1]))
                   for o in placed) + (0 if inside else 1e9)

    spots = [(7, -4, "left"), (-7, -4, "right"), (7, -12, "left"), (7, 5, "left"), (-7, -12, "right"),
             (-7, 5, "right"), (7, -24, "left"), (7, 17, "left"), (-7, -24, "right"), (-7, 17, "right"),
             (7, -36, "left"), (7, 29, "left"), (-7, -36, "right"), (-7, 29, "right")]
    for label in sorted(labels, key=lambda t: -ax.transData.transform(t.xy)[1]):
        best = min(spots, key=lambda spot: clash(box(label, *spot)))  # the first of the least crowded
        label.xyann = best[:2]
        label.set_horizontalalignment(best[2])
        placed.append(box(label, *best))
