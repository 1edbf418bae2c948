"""Teaching figures that are not rooflines: the chip and its memory, curves against size, time bars.

    chip(accelerator, reads=(), writes=(), on_chip=())   the GPU die and HBM, and what crosses between them
    memory_levels(accelerator)                            registers, L1/shared memory, L2, HBM: sizes from the catalog
    memory_table(accelerator)                             the same, as lines of text
    curves(x, series, ...)                                log-log curves against a size (FLOPs, bytes, intensity)
    time_bars(rows, measured_s=None)                      T_math and T_mem, their max and their sum, per set of roofs
    time_bounds(cost, accelerator, precision, ...)        time_bars for one kernel, datasheet and achievable roofs
    TimeBars(ax, names)                                   time_bars that a slider moves in place (the explorers)

Every size and rate on a figure comes from the catalog (:mod:`roofkit.hardware`)
or from a cost (:mod:`roofkit.formulas`); nothing here holds a hardware figure.
Each function returns a matplotlib Figure that pyplot does not track: end a
notebook cell with it, or save it with :func:`roofkit.roofline.save_png`.

    >>> [level.name for level in memory_levels("h100")]
    ['registers', 'L1 / shared memory', 'L2 cache', 'HBM']
    >>> print(memory_table("h100").splitlines()[1])
    registers            256 KiB per SM  x 132 SMs = 33 MiB
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import canonical
from ..errors import InvalidValue
from . import style

__all__ = ["Level", "memory_levels", "memory_table", "chip", "curves", "time_bars", "time_bounds",
           "TimeBars"]


@dataclass(frozen=True)
class Level:
    """One level of a GPU's memory: its size per holder (an SM, or the whole chip) and how many holders."""

    name: str
    size_bytes: float
    per: str  # "SM" (or the chip's compute-unit name) or "chip"
    count: int = 1
    what: str = ""

    @property
    def total_bytes(self) -> float:
        return self.size_bytes * self.count


def _bytes_text(n: float, binary: bool = False) -> str:
    """262144 -> '256 KiB' (binary); 5e7 -> '50 MB'; 8e10 -> '80 GB'."""
    base, units = (1024.0, ("B", "KiB", "MiB", "GiB", "TiB")) if binary else (1000.0, ("B", "kB", "MB", "GB", "TB"))
    value, unit = float(n), units[0]
    for unit in units:
        if value < base or unit == units[-1]:
            break
        value /= base
    return f"{value:.3g} {unit}"


def _rate_text(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 1e12:.3g} TB/s" if bytes_per_s >= 1e12 else f"{bytes_per_s / 1e9:.3g} GB/s"


def _memory_kind(acc) -> str:
    """'HBM' or 'GDDR' from the catalog's memory_type; 'memory' where the catalog does not say."""
    kind = (acc.memory_type or "").upper()
    return "HBM" if kind.startswith("HBM") else "GDDR" if kind.startswith("GDDR") else "memory"


def memory_levels(accelerator) -> list[Level]:
    """Where a kernel's data can live on ``accelerator``, fastest first; a level the catalog lacks is left out."""
    from ..catalogs.hardware import get  # deferred: the hardware catalog imports numpy at its top

    acc = get(accelerator)
    unit, count = acc.compute_unit_name, acc.compute_units or 1
    levels = []
    if acc.register_file_bytes:
        levels.append(Level("registers", acc.register_file_bytes, unit, count, "each thread's own variables"))
    if acc.l1_shared_bytes:
        levels.append(Level("L1 / shared memory", acc.l1_shared_bytes, unit, count,
                            "tiles a thread block shares; the rest is an L1 cache"))
    if acc.l2_bytes:
        levels.append(Level("L2 cache", acc.l2_bytes, "chip", 1, "shared by every SM"))
    if acc.memory_bytes:
        levels.append(Level(_memory_kind(acc), acc.memory_bytes, "chip", 1, "every tensor; off the die"))
    return levels


def memory_table(accelerator) -> str:
    """:func:`memory_levels` as aligned lines of text, with the whole chip's total per level."""
    from ..catalogs.hardware import get  # deferred: the hardware catalog imports numpy at its top

    acc = get(accelerator)
    lines = [f"{acc.name}: where data lives, fastest first"]
    for level in memory_levels(acc):
        if level.per == "chip":
            size = _bytes_text(level.size_bytes)
            lines.append(f"{level.name:20s} {size:>8s} per chip")
        else:
            size = _bytes_text(level.size_bytes, binary=True)
            lines.append(f"{level.name:20s} {size:>8s} per {level.per}  x {level.count} {level.per}s = "
                         f"{_bytes_text(level.total_bytes, binary=True)}")
    lines.append(f"{_memory_kind(acc) + ' bandwidth':20s} "
                 f"{_rate_text(acc.bandwidth):>8s} between the chip and its memory")
    return "\n".join(lines)


def _flow_text(item) -> tuple[str, str]:
    """(name, size text) from (name, bytes or text) or a bare name."""
    if isinstance(item, str):
        return item, ""
    try:
        name, size = item
    except (TypeError, ValueError):
        raise InvalidValue(f"a flow is a name or a (name, bytes) pair; got {item!r}.") from None
    return str(name), size if isinstance(size, str) else _bytes_text(size)


def chip(accelerator="h100", reads=(), writes=(), on_chip=(), title=None):
    """The GPU die (its SMs, their registers and L1/shared memory, the L2) beside its HBM.

    ``reads`` and ``writes`` are what crosses between them, each a name or a
    (name, bytes) pair (bytes may be a text such as "M·K·b"): reads are drawn
    from HBM into the chip, writes out of it. ``on_chip`` names intermediates
    that never leave the chip, so cross nothing. Sizes and the bandwidth come
    from the catalog.
    """
    from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.2 s at import
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # deferred: matplotlib costs ~0.2 s at import

    from ..catalogs.hardware import get  # deferred: the hardware catalog imports numpy at its top

    acc = get(accelerator)
    reads, writes = [_flow_text(r) for r in reads], [_flow_text(w) for w in writes]
    fig = Figure(figsize=(9.5, 4.4), layout="constrained")
    ax = fig.add_subplot()
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")
    box = dict(boxstyle="round,pad=0.01,rounding_size=0.02", lw=1.5)

    # the die: a row of SMs, then the L2
    ax.add_patch(FancyBboxPatch((0.02, 0.06), 0.52, 0.82, fc=style.TINT["compute"], ec=style.BOUND["compute"], **box))
    ax.text(0.04, 0.84, f"GPU die ({acc.name.removeprefix(acc.vendor + ' ')})", fontsize=style.SIZE["title"],
            weight="bold",
            color=style.BOUND["compute"], va="top")
    unit, count = acc.compute_unit_name, acc.compute_units
    for i in range(4):
        x = 0.05 + i * 0.1
        ax.add_patch(FancyBboxPatch((x, 0.52), 0.085, 0.22, fc="white", ec=style.BOUND["compute"], lw=1,
                                    boxstyle="round,pad=0.005,rounding_size=0.01"))
        ax.text(x + 0.0425, 0.63, unit, ha="center", va="center", fontsize=style.SIZE["text"])
    ax.text(0.46, 0.63, f"… × {count}" if count else "…", fontsize=style.SIZE["title"], va="center")
    tensor_cores = getattr(acc, "tensor_cores_per_unit", None)
    cores = f"{tensor_cores} tensor cores" if tensor_cores else "tensor cores"
    per_unit = [f"each {unit}: {cores}, CUDA cores"]
    if acc.register_file_bytes:
        per_unit.append(f"registers {_bytes_text(acc.register_file_bytes, binary=True)}")
    if acc.l1_shared_bytes:
        per_unit.append(f"L1 / shared memory {_bytes_text(acc.l1_shared_bytes, binary=True)}")
    ax.text(0.05, 0.49, "\n".join(per_unit), fontsize=style.SIZE["aside"], va="top", color="0.2", linespacing=1.4)
    if acc.l2_bytes:
        ax.add_patch(FancyBboxPatch((0.05, 0.12), 0.46, 0.1, fc=style.TINT["compute strong"], ec=style.BOUND["compute"], lw=1,
                                    boxstyle="round,pad=0.005,rounding_size=0.01"))
        ax.text(0.28, 0.17, f"L2 cache {_bytes_text(acc.l2_bytes)}, shared by all {unit}s", ha="center",
                va="center", fontsize=style.SIZE["text"])
    if on_chip:
        ax.text(0.52, 0.30, "stays on chip (no traffic):\n" + ", ".join(_flow_text(o)[0] for o in on_chip),
                ha="right", va="center", fontsize=style.SIZE["text"], color=style.PALETTE["green"], style="italic")

    # the memory
    kind = _memory_kind(acc)
    ax.add_patch(FancyBboxPatch((0.80, 0.18), 0.18, 0.58, fc=style.TINT["memory"], ec=style.BOUND["memory"], **box))
    ax.text(0.89, 0.56, kind, ha="center", fontsize=style.SIZE["heading"], weight="bold", color=style.BOUND["memory"])
    ax.text(0.89, 0.44, f"{_bytes_text(acc.memory_bytes)}" if acc.memory_bytes else "", ha="center",
            fontsize=style.SIZE["label"])
    ax.text(0.89, 0.34, "every tensor\nlives here", ha="center", va="top", fontsize=style.SIZE["aside"], color="0.3")

    # the link and what crosses it
    ax.text(0.67, 0.90, f"{_rate_text(acc.bandwidth)} at most", ha="center", fontsize=style.SIZE["label"],
            weight="bold")
    ax.text(0.67, 0.855, "the bytes every lesson counts", ha="center", fontsize=style.SIZE["aside"], color="0.3")
    flows = [(name, size, "read") for name, size in reads] + [(name, size, "write") for name, size in writes]
    if not flows:
        flows = [("", "", "both")]
    top, bottom = 0.76, 0.2
    step = (top - bottom) / max(len(flows), 1)
    for i, (name, size, way) in enumerate(flows):
        y = top - (i + 0.5) * step
        start, end = ((0.795, y), (0.545, y)) if way == "read" else ((0.545, y), (0.795, y))
        arrow = "<|-|>" if way == "both" else "-|>"
        colour = style.BOUND["memory"] if way == "read" else style.BOUND["compute"] if way == "write" else "0.3"
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle=arrow, mutation_scale=16, lw=2, color=colour))
        if name:
            ax.text(0.67, y + 0.02, f"{name} ({way})", ha="center", va="bottom", fontsize=style.SIZE["text"],
                    color=colour)
            ax.text(0.67, y - 0.02, size, ha="center", va="top", fontsize=style.SIZE["aside"], color="0.25")
    ax.set_title(title or f"What crosses between the chip and its {kind}", fontsize=style.SIZE["title"])
    return fig


def curves(x, series, xlabel, ylabel, title=None, hline=None, span=None, legend="upper left"):
    """Log-log curves against a size.

    ``series``: (label, values) or (label, values, style) with style a dict of
    matplotlib line options (color, ls, ...); values may be one number (a flat
    line). ``hline``: (y, text), a dotted horizontal line with its label.
    ``span``: (x, y_low, y_high, text), a double arrow showing a gap, its text to
    the left of the arrow halfway up (on the log axis); a fifth item, a fraction
    from 0 (bottom) to 1 (top), places the text lower or higher, clear of a line
    that crosses the middle.
    """
    import numpy as np  # deferred: numpy costs ~0.1 s at import
    from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.2 s at import

    x = np.asarray(x, dtype=float)
    fig = Figure(figsize=(8, 4.6), layout="constrained")
    ax = fig.add_subplot()
    for i, item in enumerate(series):
        label, values, *extra = item
        options = {"color": style.CYCLE[i % len(style.CYCLE)], "lw": 2, **(extra[0] if extra else {})}
        ax.loglog(x, np.broadcast_to(np.asarray(values, dtype=float), x.shape), label=label, **options)
    if hline is not None:
        y, text = hline
        ax.axhline(y, color="0.4", lw=1, ls=":")
        ax.text(x[0] * 1.2, y * 1.15, text, color="0.3", fontsize=style.SIZE["text"])
    if span is not None:
        at, low, high, text, *where = span
        up = where[0] if where else 0.5
        ax.annotate("", xy=(at, high), xytext=(at, low), arrowprops=dict(arrowstyle="<->", color=style.PALETTE["blue"]))
        ax.text(at / 1.15, low ** (1 - up) * high**up, text, color=style.PALETTE["blue"], ha="right", va="center",
                fontsize=style.SIZE["text"])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(True, which="major", color=style.GRID)
    ax.legend(loc=legend, fontsize=style.SIZE["text"])
    return fig


def _seconds_scale(seconds: float) -> tuple[float, str]:
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= scale:
            return scale, unit
    return 1e-9, "ns"


def time_bars(rows, measured_s=None, ax=None, title=None):
    """Bars of T_math and T_mem for each set of roofs, with their max (overlap) and sum (no overlap) marked.

    ``rows``: (name, t_math_s, t_mem_s) per set of roofs, drawn top to bottom.
    ``measured_s``: a measured time, drawn as a vertical line. Returns the Figure.
    """
    from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.2 s at import

    rows = [(str(name), float(a), float(b)) for name, a, b in rows]
    if not rows:
        raise InvalidValue("time_bars needs at least one (name, t_math_s, t_mem_s) row.")
    if ax is None:
        ax = Figure(figsize=(7.5, 1.2 + 1.6 * len(rows)), layout="constrained").add_subplot()
    longest = max([a + b for _, a, b in rows] + [measured_s or 0])
    scale, unit = _seconds_scale(longest)
    ticks, labels = [], []
    for i, (name, t_math, t_mem) in enumerate(rows):
        y = -4.5 * i
        light = i > 0
        bars = ((0, t_math, r"$T_\mathrm{math}$", style.BOUND["compute"]),
                (-1, t_mem, r"$T_\mathrm{mem}$", style.BOUND["memory"]))
        for dy, value, label, colour in bars:
            ax.barh(y + dy, value / scale, height=0.8, color=colour, alpha=0.45 if light else 0.85)
            ticks.append(y + dy)
            labels.append(f"{label}")
        low, high = max(t_math, t_mem) / scale, (t_math + t_mem) / scale
        ax.plot([low, low], [y + 0.6, y - 1.6], color="0.1", lw=1.5)
        ax.plot([high, high], [y + 0.6, y - 1.6], color="0.1", lw=1.5, ls="--")
        ax.text(0, y + 1.6, name, fontsize=style.SIZE["text"], weight="bold", va="bottom")
        label = dict(fontsize=style.SIZE["small"], va="top", zorder=6, bbox=style.LABEL_BOX)
        ax.text(low, y - 1.7, f"max {low:.3g}", ha="right", **label)
        ax.text(high, y + 0.7, f"sum {high:.3g}", ha="left", va="bottom", fontsize=style.SIZE["small"], zorder=6,
                bbox=label["bbox"])
    if measured_s is not None:
        ax.axvline(measured_s / scale, color=style.MEASURED, lw=2)
        ax.text(measured_s / scale, 2.3, f" measured {measured_s / scale:.3g} {unit}", color=style.MEASURED,
                fontsize=style.SIZE["text"],
                va="bottom")
    ax.set_yticks(ticks, labels, fontsize=style.SIZE["small"])
    ax.set_ylim(-4.5 * (len(rows) - 1) - 2.6, 3.0)
    ax.set_xlim(0, longest / scale * 1.22)
    ax.set_xlabel(f"time ({unit})\nsolid line: max (overlap); dashed: sum (no overlap)", fontsize=style.SIZE["text"])
    ax.grid(True, axis="x", color=style.GRID)
    if title:
        ax.set_title(title, fontsize=style.SIZE["label"])
    return ax.figure


def time_bounds(cost, accelerator, precision, measured_s=None, title=None):
    """:func:`time_bars` for one kernel: its times at the datasheet roofs, and at the achievable
    roofs where the catalog has both (a measured matmul rate and a measured copy bandwidth)."""
    from ..catalogs.hardware import get  # deferred: the hardware catalog imports numpy at its top

    acc, p = get(accelerator), canonical(precision)
    rows = [("datasheet roofs", cost.flops / acc.peak(p), cost.bytes / acc.memory_bandwidth())]
    if acc.has_achievable(p) and acc.has_achievable("bandwidth"):
        rows.append(("achievable roofs (measured)", cost.flops / acc.peak(p, achievable=True),
                     cost.bytes / acc.memory_bandwidth(achievable=True)))
    short = acc.name.removeprefix(acc.vendor + " ")
    return time_bars(rows, measured_s, title=title or f"{short}, {p.upper()}")


def _duration(seconds: float) -> str:
    scale, unit = _seconds_scale(seconds)
    return f"{seconds / scale:.3g} {unit}"


class TimeBars:
    """:func:`time_bars` for a figure that follows a slider: drawn once, then moved in place by :meth:`update`.

    One row per name in ``names`` (the sets of roofs, top to bottom), each
    with its T_math and T_mem bars, a solid line at their max (overlap) and a
    dashed one at their sum (no overlap), and those two times written beside
    the lines. The bars are to scale with one another, the longest sum
    spanning the axes (a fixed axis without ticks: a time that grows a
    thousandfold as the slider moves keeps its bars readable, and the axes
    stay put). A row without times (:meth:`update` given None) draws no
    bars, and :meth:`note` can say why in it, so that the rows stay put too
    when a choice has no figures for one of them. ``artists`` are what
    :meth:`update` changes; everything else is drawn once.
    """

    def __init__(self, ax, names, title=None):
        names = [str(n) for n in names]
        if not names:
            raise InvalidValue("TimeBars needs at least one row name (a set of roofs).")
        self.ax, self.rows, ticks, labels = ax, [], [], []
        box = style.LABEL_BOX
        for i, name in enumerate(names):
            y, alpha = -4.5 * i, 0.45 if i > 0 else 0.85
            bars = [ax.barh(y + dy, 0.0, height=0.8, color=colour, alpha=alpha)[0]
                    for dy, colour in ((0, style.BOUND["compute"]), (-1, style.BOUND["memory"]))]
            ticks += [y, y - 1]
            labels += [r"$T_\mathrm{math}$", r"$T_\mathrm{mem}$"]
            low = ax.plot([0, 0], [y + 0.6, y - 1.6], color="0.1", lw=1.5)[0]
            high = ax.plot([0, 0], [y + 0.6, y - 1.6], color="0.1", lw=1.5, ls="--")[0]
            ax.text(0, y + 1.6, name, fontsize=style.SIZE["text"], weight="bold", va="bottom")
            low_text = ax.text(0, y - 1.7, "", ha="right", fontsize=style.SIZE["small"], va="top", zorder=6, bbox=box)
            high_text = ax.text(0, y + 0.7, "", ha="left", va="bottom", fontsize=style.SIZE["small"], zorder=6,
                                bbox=box)
            self.rows.append((bars, low, high, low_text, high_text))
        ax.set_yticks(ticks, labels, fontsize=style.SIZE["small"])
        ax.set_ylim(-4.5 * (len(names) - 1) - 2.6, 3.0)
        ax.set_xlim(0, 1.22)
        ax.set_xticks([])
        ax.set_xlabel("time, to scale (the longest sum spans the bars)\n"
                      "solid line: max (overlap); dashed: sum (no overlap)", fontsize=style.SIZE["text"])
        if title:
            ax.set_title(title, fontsize=style.SIZE["label"])
        self.artists = [a for bars, *rest in self.rows for a in (*bars, *rest)]

    def note(self, row: int, text: str):
        """Write ``text`` in row ``row`` (0 at the top), where its bars would be: why it has no times."""
        return self.ax.text(0.02, -4.5 * row - 0.5, text, va="center", fontsize=style.SIZE["small"],
                            color=style.INK["faint"])

    def update(self, rows) -> None:
        """Set the bars to ``rows``: (name, t_math_s, t_mem_s) per row, as :func:`time_bars` takes them.

        A row whose two times are None draws nothing (:meth:`note` says why).
        """
        rows = [None if a is None and b is None else (float(a), float(b)) for _, a, b in rows]
        if len(rows) != len(self.rows):
            raise InvalidValue(f"{len(rows)} rows for a TimeBars of {len(self.rows)}; give one per name.")
        if all(row is None for row in rows):
            raise InvalidValue("TimeBars needs the times of at least one row.")
        longest = max(a + b for a, b in filter(None, rows)) or 1.0
        for artists, times in zip(self.rows, rows):
            for artist in (*artists[0], *artists[1:]):
                artist.set_visible(times is not None)
            if times is not None:
                self._set_row(artists, *times, longest)

    @staticmethod
    def _set_row(artists, t_math: float, t_mem: float, longest: float) -> None:
        bars, low, high, low_text, high_text = artists
        bars[0].set_width(t_math / longest)
        bars[1].set_width(t_mem / longest)
        lo, hi = max(t_math, t_mem), t_math + t_mem
        low.set_xdata([lo / longest] * 2)
        high.set_xdata([hi / longest] * 2)
        low_text.set_x(lo / longest)
        low_text.set_text(f"max {_duration(lo)}")
        high_text.set_x(hi / longest)
        high_text.set_text(f"sum {_duration(hi)}")
        high_text.set_ha("right" if hi / longest > 0.75 else "left")  # the longest sum's label stays in the figure
