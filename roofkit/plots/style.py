"""One style for every figure of the course: sizes, colours with a meaning, and where labels go.

Every module of :mod:`roofkit.plots` and the explorers (:mod:`roofkit.course.explore`) take their fonts and
colours from here, so that a colour means one thing across the course: compute is blue and memory orange
wherever a time is split by its bound, a limit (a GPU's memory, an impossible MFU) is red, a GPU's memory
is split into the same coloured parts for training and serving, and a roofline chart gives each accelerator a
colour of ``ACCELERATORS`` and each precision's flat roof a line of ``PRECISION_LINES``. Plain data, no matplotlib:
importing it costs nothing.

    >>> BOUND["memory"], SIZE["small"]
    ('#dd8452', 8)
"""

from __future__ import annotations

__all__ = ["SIZE", "PALETTE", "CYCLE", "ACCELERATORS", "PRECISION_LINES", "BOUND", "PARTS", "TINT", "ON_CHIP", "LIMIT", "MEASURED", "INK", "GRID", "HTML",
           "LABEL_BOX", "gb", "limit_line", "limit_mark", "limit_label"]

# font sizes (points): crowded labels, legends and notes beside a mark, asides in a diagram, text on a figure, axis labels,
# titles, a diagram's headings
SIZE = {"tiny": 7, "small": 8, "aside": 8.5, "text": 9, "label": 10, "title": 11, "heading": 13}

# the course's palette (seaborn's "deep": distinguishable, and calm enough for filled bars)
PALETTE = {"blue": "#4c72b0", "orange": "#dd8452", "green": "#55a868", "red": "#c44e52", "purple": "#8172b3",
           "brown": "#937860", "pink": "#da8bc3", "grey": "#8c8c8c", "olive": "#ccb974", "cyan": "#64b5cd"}

CYCLE = tuple(PALETTE.values())  # series without a meaning of their own, in this order
# one colour per accelerator on a roofline: the first compute's blue, then colours that mean nothing else (not
# memory's orange, communication's green, latency's purple or a limit's red)
ACCELERATORS = tuple(PALETTE[c] for c in ("blue", "cyan", "pink", "olive", "brown", "grey"))

# a roofline's flat roofs, one line style per distinct peak of a chip (its precisions, fastest last): solid,
# dashed, dash-dot, dash-dot-dot
PRECISION_LINES = ("-", "--", "-.", (0, (5, 1, 1, 1, 1, 1)))

# what bounds a time: the same colour in a time bar, a step's parts, an explorer's verdict
BOUND = {"compute": PALETTE["blue"], "memory": PALETTE["orange"], "communication": PALETTE["green"],
         "latency": PALETTE["purple"]}

# what a GPU's memory holds, in every memory bar (training and serving)
PARTS = {"weights": PALETTE["blue"], "gradients": PALETTE["green"], "optimizer": PALETTE["purple"],
         "activations": PALETTE["orange"], "gathered": PALETTE["brown"], "kv cache": PALETTE["orange"],
         "reserve": "0.65", "free": "0.9", "bubble": "#c7c7c7"}

# light fills behind text and tiles: a compute-side box (the die, an input), a memory-side box (HBM, a result);
# the strong ones mark a second level (the L2, a tile waiting) beside them
TINT = {"compute": "#eef3fa", "memory": "#fdf0e6", "compute strong": "#d8e3f1", "memory strong": "#f3c9a8"}
ON_CHIP = "#a0522d"  # what a kernel keeps on chip (a tile, a running value): sienna, beside memory's orange

LIMIT = PALETTE["red"]  # a line nothing may cross: capacity, 100% MFU, the ridge of a chart of rates
MEASURED = PALETTE["red"]  # a measured figure set against a model's
INK = {"mark": "0.1", "text": "0.2", "muted": "0.3", "faint": "0.45", "rule": "0.4"}  # greys for text and rules
GRID = "0.9"

# the explorers' HTML read-outs: a verdict's colour
HTML = {"error": "#b00", "ok": "#2a7", "warning": "#b60", "muted": "#555", **BOUND}

# a label drawn over lines and bars: a white box without an edge
LABEL_BOX = {"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none"}


def gb(size_bytes: float) -> str:
    """A size as the figures write it: 85.5e9 -> '85.5 GB', 1.398e12 -> '1,398 GB' (whole GB from 100 GB).

        >>> gb(85.5e9), gb(1.398e12)
        ('85.5 GB', '1,398 GB')
    """
    figure = size_bytes / 1e9
    return f"{figure:,.0f} GB" if figure >= 100 else f"{figure:.3g} GB"


def limit_line(ax, x, text, y=0.55, ymax=1.0, colour=LIMIT, **line):
    """A vertical limit at ``x`` with ``text`` just right of it, at ``y`` in data units: (line, text).

    The label starts one space after the line, small, in the line's colour, so that every figure marks a
    capacity or a ceiling the same way.
    """
    return limit_mark(ax, x, ymax, colour, **line), limit_label(ax, x, text, y, colour)  # after the x limits


def limit_mark(ax, x, ymax=1.0, colour=LIMIT, **line):
    """The line of :func:`limit_line` alone, for a figure that draws its label per choice (an explorer's)."""
    return ax.axvline(x, ymax=ymax, color=colour, **({"lw": 1.2, "ls": "--"} | line))


def limit_label(ax, x, text, y=0.55, colour=LIMIT):
    """The label of :func:`limit_line` alone, for a figure that draws the line once and its label per choice.

    Right of the line; left of it when the line stands in the right third of the axes as they are now (set the
    axes' x limits first), so that a label never runs off the figure."""
    low, high = ax.get_xlim()
    flip = ax.get_xscale() == "linear" and high > low and (x - low) / (high - low) > 2 / 3
    return ax.text(x, y, f"{text} " if flip else f" {text}", color=colour, fontsize=SIZE["small"], va="bottom",
                   ha="right" if flip else "left")
