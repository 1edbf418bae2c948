"""The roofline explorer: pick an accelerator, a precision, a kernel and its size; watch the dot move.

    roofline_explorer(accelerator="h100", precision="bf16", kernel="gemm", size=4096)

shows a dropdown of the catalog's accelerators, a dropdown of the precisions
the chosen one has, a dropdown of kernels, a slider over sizes on a log scale
(powers of two and the sizes halfway between, 3 x 2^k), a label (CSS class
``roofkit-bound``) with the kernel's intensity, the ridge, the bound and the
predicted times, and a figure (an image in a Box, CSS class ``roofkit-plot``):
the roofline with the kernel on it, and beside it the bars of T_math and T_mem
(:class:`roofkit.diagrams.TimeBars`), at the datasheet roofs and, where the
catalog has both achievable figures, at the achievable roofs. The slider
follows the hand: every step recomputes through
:func:`roofkit.roofline.analyze` and moves the dot and the bars in place
(:class:`~roofkit.explore._box.LiveFigure`). The axes are fixed over every
accelerator and precision of the catalog, so that choosing another draws only
its roofs (once per choice; coming back to one pastes its pixels back)::

    I = FLOPs / bytes,   I* = P / B,   memory-bound when I < I*,
    T_math = F / P,   T_mem = Q / B,   time >= max(T_math, T_mem)  (datasheet P and B)

The sum T_math + T_mem (no overlap) is shown beside the max. With datasheet
roofs it is not a ceiling: real kernels reach only part of the datasheet peak,
so a good large GEMM often takes longer than that sum. With the achievable
roofs (the best measured rates) it is a pessimistic estimate for a good kernel.

The kernels (:data:`KERNELS`), each a cost from :mod:`roofkit.formulas`:

    gemm       square GEMM n x n x n                           size = n
    decode     decode GEMM [batch, 4096] @ [4096, 4096]          size = batch
    gelu       GELU over n elements (8 FLOPs each)               size = n
    add        c = a + b over n elements                         size = n
    attention  fused (FlashAttention-style) attention, 32 heads of 128, one sequence   size = seq

:func:`explorer_state` computes what the widgets show, without any widget;
:func:`summary` is its one line of text, which the explorer also prints when
it starts, so a notebook rendered without a live kernel shows the same
numbers (and the starting figure, which the widget carries as a PNG).
"""

from __future__ import annotations

import functools
import html
from dataclasses import dataclass
from typing import Callable

import ipywidgets as w

from ._box import FigureBox, LiveFigure, Scene, cached

from ...plots import diagrams
from ... import dtypes, formulas
from ...catalogs import hardware
from ...plots import roofline as rl
from ...errors import InvalidValue, UnknownName
from ...units import size as _size
from ...plots import style

__all__ = ["roofline_explorer", "build_explorer", "explorer_state", "summary", "KERNELS", "RooflineExplorer"]

D_MODEL = 4096  # the decode GEMM's width: a 7B-class model (Llama 2 7B, Mistral 7B)
HEADS, HEAD_DIM = 32, 128  # the attention kernel's heads: the same 7B-class layer
XLIM = (1e-2, 1e5)  # FLOP/byte: fixed, so that the dot moves and the axes stay put


class UnknownKernel(UnknownName):
    kind = "kernel"


@dataclass(frozen=True)
class KernelSpec:
    """A kernel the explorer can place: its cost as a function of (size, precision)."""

    title: str  # in the dropdown
    size_name: str  # what the slider sets: n, batch, seq
    cost: Callable  # (size, precision) -> formulas.Cost
    exponents: tuple[int, int]  # the slider runs over 2**lo .. 2**hi
    default: int

    def label(self, size: int) -> str:
        return f"{self.title.split(' (')[0]} {self.size_name}={_n(size)}"


KERNELS: dict[str, KernelSpec] = {
    "gemm": KernelSpec("GEMM (square, n x n x n)", "n",
                       lambda n, p: formulas.gemm(n, n, n, p), (3, 16), 4096),
    "decode": KernelSpec(f"decode GEMM (batch x {D_MODEL} @ {D_MODEL} x {D_MODEL})", "batch",
                         lambda B, p: formulas.gemm(B, D_MODEL, D_MODEL, p), (0, 14), 1),
    "gelu": KernelSpec("GELU (n elements)", "n",
                       lambda n, p: formulas.elementwise(n, formulas.GELU_FLOPS_PER_ELEMENT, 1, 1, p),
                       (10, 30), 2**24),
    "add": KernelSpec("vector add (c = a + b, n elements)", "n",
                      lambda n, p: formulas.elementwise(n, 1, 2, 1, p), (10, 30), 2**30),
    "attention": KernelSpec(f"fused attention ({HEADS} heads of {HEAD_DIM})", "seq",
                            lambda s, p: formulas.attention_fused(1, HEADS, s, HEAD_DIM, p), (5, 15), 4096),
}


def _n(size: int) -> str:
    """4096 -> '4096', 1073741824 -> '1,073,741,824'."""
    return f"{size:,}" if size >= 100_000 else str(size)


def _kernel(kernel: str) -> KernelSpec:
    key = str(kernel).strip().lower()
    if key not in KERNELS:
        raise UnknownKernel(kernel, KERNELS)
    return KERNELS[key]


def _count(size) -> int:
    n = _size(size, "size")
    if n != int(n):
        raise InvalidValue(f"size must be a whole number; got {size!r}.")
    return int(n)


def _short(acc) -> str:
    """'NVIDIA H100 SXM5 80GB' -> 'H100 SXM5 80GB'."""
    return acc.name.removeprefix(f"{acc.vendor} ")


def _duration(seconds: float) -> str:
    """1.39e-4 -> '139 µs'."""
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _per_byte(x: float) -> str:
    return f"{x:.0f}" if x >= 100 else f"{x:.3g}"


def explorer_state(accelerator="h100", precision="bf16", kernel="gemm", size=4096) -> dict:
    """What the explorer shows for these choices, as a dict of plain values (SI units).

    Keys: ``accelerator`` (full name), ``accelerator_key``, ``precision``,
    ``kernel``, ``size``, ``label`` (e.g. 'GEMM n=4096'), ``flops``, ``bytes``,
    ``intensity``, ``ridge``, ``bound`` ('memory' or 'compute'),
    ``attainable_flops_per_s``, ``t_math_s``, ``t_mem_s``, ``time_s`` (the
    lower bound max(T_math, T_mem) at the datasheet roofs), ``time_upper_s``
    (T_math + T_mem at the datasheet roofs: no overlap, not a ceiling),
    ``achievable`` (None, or a dict of ``t_math_s``, ``t_mem_s``, ``time_s``
    and ``time_upper_s`` at the catalog's achievable roofs, where it has both
    a measured matmul rate in this precision and a measured bandwidth) and
    ``summary`` (one line of text).

    >>> s = explorer_state("h100", "bf16", "gemm", 4096)
    >>> s["bound"], round(s["intensity"])
    ('compute', 1365)
    >>> explorer_state("h100", "bf16", "gemm", 512)["bound"]
    'memory'
    """
    acc = hardware.get(accelerator)
    p = dtypes.canonical(precision)
    acc.peak(p)  # UnsupportedPrecision names the precisions the chip has
    spec, n = _kernel(kernel), _count(size)
    placed = rl.analyze(spec.cost(n, p), acc, p)
    state = {
        "accelerator": acc.name, "accelerator_key": acc.key, "precision": p,
        "kernel": str(kernel).strip().lower(), "size": n, "label": spec.label(n),
        **{k: v for k, v in placed.to_dict().items() if k not in ("accelerator", "precision")},
    }
    state["achievable"] = None
    if acc.has_achievable(p) and acc.has_achievable("bandwidth"):
        t_math, t_mem = state["flops"] / acc.peak(p, achievable=True), state["bytes"] / acc.memory_bandwidth(True)
        low, high = rl.time_bounds(state["flops"], state["bytes"], acc.peak(p, achievable=True),
                                   acc.memory_bandwidth(achievable=True))
        state["achievable"] = {"t_math_s": t_math, "t_mem_s": t_mem, "time_s": low, "time_upper_s": high}
    measured = (f"; achievable roofs {_duration(state['achievable']['time_s'])} to "
                f"{_duration(state['achievable']['time_upper_s'])}" if state["achievable"] else "")
    state["summary"] = (
        f"{_short(acc)}, {p}, {state['label']}: intensity {state['intensity']:.4g} FLOP/byte, "
        f"ridge {_per_byte(state['ridge'])} FLOP/byte, {state['bound']}-bound, "
        f"≥ {_duration(state['time_s'])} (datasheet roofs; {_duration(state['time_upper_s'])} with no overlap)"
        f"{measured}"
    )
    return state


def summary(accelerator="h100", precision="bf16", kernel="gemm", size=4096) -> str:
    """The explorer's state as one line of text.

    >>> print(summary())
    H100 SXM5 80GB, bf16, GEMM n=4096: intensity 1365 FLOP/byte, ridge 295 FLOP/byte, compute-bound, ≥ 139 µs (datasheet roofs; 169 µs with no overlap); achievable roofs 173 µs to 208 µs
    """
    return explorer_state(accelerator, precision, kernel, size)["summary"]


def _html(state: dict) -> str:
    colour = style.HTML[state["bound"]]
    side = "<" if state["bound"] == "memory" else "≥"
    rows = [
        ("kernel", f"{state['label']} in {state['precision'].upper()}"),
        ("FLOPs / bytes", f"{state['flops']:.3g} FLOP / {state['bytes']:.3g} byte"),
        ("intensity I", f"{state['intensity']:.4g} FLOP/byte"),
        ("ridge I*", f"{_per_byte(state['ridge'])} FLOP/byte"),
        ("bound", f"<b style='color:{colour}'>{state['bound']}-bound</b> (I {side} I*)"),
        ("attainable", f"{state['attainable_flops_per_s'] / 1e12:.4g} TFLOP/s"),
        ("T_math, T_mem", f"{_duration(state['t_math_s'])}, {_duration(state['t_mem_s'])} (datasheet roofs)"),
        ("lower bound", f"<b>≥ {_duration(state['time_s'])}</b>: max(T_math, T_mem), perfect overlap"),
        ("no overlap", f"{_duration(state['time_upper_s'])}: T_math + T_mem at the datasheet roofs, not a ceiling "
                       "(real kernels run below the datasheet peak)"),
    ]
    ach = state["achievable"]
    if ach:
        rows.append(("achievable roofs", f"{_duration(ach['time_s'])} (overlap) to {_duration(ach['time_upper_s'])} "
                                         "(no overlap), at the best rates measured on this chip"))
    else:
        rows.append(("achievable roofs", "none in the catalog for this chip and precision"))
    cells = "".join(f"<tr><td style='padding-right:1em;color:{style.HTML['muted']}'>{html.escape(k)}</td><td>{v}</td></tr>"
                    for k, v in rows)
    return f"<b>{html.escape(state['accelerator'])}</b><table>{cells}</table>"


@functools.cache
def _ylim() -> tuple[float, float]:
    """FLOP/s: fixed over every accelerator and precision of the catalog (their datasheet and achievable
    roofs), so that changing either redraws the roofs and not the axes."""
    roofs = [(acc.peak(p), acc.bandwidth) for acc in hardware.catalog() for p in acc.precisions]
    roofs += [(acc.peak(p, achievable=True), acc.memory_bandwidth(achievable=True)) for acc in hardware.catalog()
              if acc.has_achievable("bandwidth") for p in acc.precisions if acc.has_achievable(p)]
    return rl.span(roofs, XLIM)


class _Figure(Scene):
    """The roofline with the kernel on it, and beside it the bars of T_math and T_mem, moved in place.

    What is drawn once: both axes, their limits fixed over the whole catalog
    (:data:`XLIM`, :func:`_ylim`), a legend of what the lines are, and the two
    rows of bars (datasheet and achievable roofs). What the accelerator and
    the precision change (the key layer): the roofs, the ridge, the shaded
    memory-bound region, the title with the roofs' figures and, for a chip
    without achievable roofs, a note in their row. What a change moves: the
    kernel's dot and its label, and the bars (:class:`roofkit.diagrams.TimeBars`).
    """

    def __init__(self, state: dict):
        # fixed margins (those a constrained layout gives it): the kernel's label is placed knowing where the axes are
        super().__init__(state, figsize=(13, 5.2), layout=None)

    def key(self, state: dict) -> tuple:
        """The roofs drawn: the accelerator, the precision, and whether the achievable ones are shown."""
        return state["accelerator_key"], state["precision"], state["achievable"] is not None

    def build(self, live: LiveFigure) -> None:
        self.roof_ax, bars_ax = live.fig.subplots(1, 2, width_ratios=(1.75, 1), gridspec_kw=dict(
            left=0.093, right=0.995, bottom=0.092, top=0.954, wspace=0.14))
        rl.frame(self.roof_ax, XLIM, _ylim())
        rl.kinds_legend(self.roof_ax)
        self.dot, self.name = live.animate(*rl.kernel_marks(self.roof_ax))
        self.bars = diagrams.TimeBars(bars_ax, ["datasheet roofs", "achievable roofs"], title="time of one call")
        live.animate(*self.bars.artists)

    def layer(self, state: dict) -> None:
        acc, p = hardware.get(state["accelerator_key"]), state["precision"]
        title = f"{_short(acc)}, {p.upper()}: {rl.roof_figures(acc.peak(p), acc.bandwidth)}"
        roofs = []
        if state["achievable"]:
            roofs = [rl.Roof("achievable", acc.peak(p, achievable=True), acc.memory_bandwidth(achievable=True))]
            title += f"; achievable {rl.roof_figures(roofs[0].peak_flops, roofs[0].bandwidth)}"
        else:
            self.bars.note(1, "none in the catalog for this chip and precision")
        rl.draw_roofs(self.roof_ax, [acc.key], [p], roofs=roofs, xlim=XLIM, ylim=_ylim())
        self.roof_ax.set_title(title, fontsize=style.SIZE["label"])

    def move(self, state: dict) -> None:
        point = (state["intensity"], state["attainable_flops_per_s"])
        self.dot.set_data([point[0]], [point[1]])
        self.name.xy = point
        self.name.set_text(state["label"])
        self._place_label(state["bound"])
        ach = state["achievable"] or {"t_math_s": None, "t_mem_s": None}
        self.bars.update([("datasheet roofs", state["t_math_s"], state["t_mem_s"]),
                          ("achievable roofs", ach["t_math_s"], ach["t_mem_s"])])

    # where the kernel's label goes from its dot (points, and its alignment): the first that stays inside the axes
    PLACES = {"compute": [((10, 5), "left", "baseline"),  # right of the dot, clear of the ridge label
                          ((-10, 5), "right", "baseline")],  # left of it, near the right edge
              "memory": [((-6, 8), "right", "baseline"),  # up and to the left, above the rising roof
                         ((10, -8), "left", "top")]}  # down and to the right, below it, near the left edge

    def _place_label(self, bound: str) -> None:
        """Put the kernel's label beside its dot where it stays inside the roofline's axes (not over the bars)."""
        inside = self.roof_ax.get_window_extent()
        for offset, ha, va in self.PLACES[bound]:
            self.name.xyann = offset
            self.name.set_horizontalalignment(ha)
            self.name.set_verticalalignment(va)
            box = self.name.get_window_extent()
            if inside.x0 <= box.x0 and box.x1 <= inside.x1:
                return


def _powers(spec: KernelSpec, keep: int) -> list[tuple[str, int]]:
    """Powers of two and the sizes halfway between them on a log scale (3 x 2^k): 512, 768, 1024, ..."""
    lo, hi = spec.exponents
    halfway = {3 * 2**e for e in range(max(lo - 1, 0), hi - 1)}
    values = sorted({2**e for e in range(lo, hi + 1)} | halfway | {keep})
    return [(_n(v), v) for v in values]


class RooflineExplorer(FigureBox):
    """The explorer's box. ``.accelerator``, ``.precision``, ``.kernel``, ``.size`` are its
    inputs; ``.label`` (HTML) and ``.plot`` (a Box holding ``.image``, the live figure) its
    outputs; ``.state`` what they show.

    Its plain-text form is one line, and it also carries the starting figure as a
    PNG, so a notebook rendered without a live kernel shows the starting roofline."""

    text = "roofline explorer (widgets: run the notebook live to move the dot)"


def _precision_choice(acc, wanted: str) -> str:
    for p in (wanted, "bf16", "fp16"):
        if p in acc.peak_flops:
            return p
    return acc.precisions[0]


def build_explorer(accelerator="h100", precision="bf16", kernel="gemm", size=4096) -> RooflineExplorer:
    """The explorer's widgets, wired up, without printing or displaying anything."""
    state = explorer_state(accelerator, precision, kernel, size)
    acc = hardware.get(state["accelerator_key"])
    labels = {"description_width": "80px"}
    inputs = {
        "accelerator": w.Dropdown(options=[(_short(a), a.key) for a in hardware.catalog()],
                                  value=acc.key, description="accelerator", style=labels),
        "precision": w.Dropdown(options=[(p.upper(), p) for p in acc.precisions], value=state["precision"],
                                description="precision", style=labels),
        "kernel": w.Dropdown(options=[(s.title, k) for k, s in KERNELS.items()], value=state["kernel"],
                             description="kernel", style=labels, layout=w.Layout(width="420px")),
        "size": w.SelectionSlider(options=_powers(KERNELS[state["kernel"]], state["size"]), value=state["size"],
                                  description=KERNELS[state["kernel"]].size_name, continuous_update=True,
                                  style=labels, layout=w.Layout(width="420px")),
    }
    label = w.HTML(value=_html(state))
    label.add_class("roofkit-bound")
    plot, image = FigureBox.image_box()

    explorer = RooflineExplorer([
        w.HBox([inputs["accelerator"], inputs["precision"]]),
        w.HBox([inputs["kernel"]]),
        inputs["size"],
        label,
        plot,
    ])
    explorer.add_class("roofkit-roofline")
    explorer.inputs, explorer.label, explorer.plot, explorer.image, explorer.state = inputs, label, plot, image, state
    for name, widget in inputs.items():
        setattr(explorer, name, widget)
    busy = []  # set while one change resets other widgets, so that they redraw once
    figure = _Figure(state)
    explorer.attach(figure.live)
    state_of = cached(explorer_state)  # a slider swept back and forth asks for the same states again

    def update(_change=None):
        if busy:
            return
        explorer.state = state_of(inputs["accelerator"].value, inputs["precision"].value,
                                  inputs["kernel"].value, inputs["size"].value)
        label.value = _html(explorer.state)
        figure.update(explorer.state)
        explorer.redraw()

    def on_accelerator(change):
        chip = hardware.get(change["new"])
        busy.append(1)
        try:
            wanted = inputs["precision"].value
            inputs["precision"].options = [(p.upper(), p) for p in chip.precisions]
            inputs["precision"].value = _precision_choice(chip, wanted)
        finally:
            busy.pop()
        update()

    def on_kernel(change):
        spec = KERNELS[change["new"]]
        keep = spec.default  # each kernel starts at its typical size
        busy.append(1)
        try:
            inputs["size"].options = _powers(spec, keep)
            inputs["size"].value = keep
            inputs["size"].description = spec.size_name
        finally:
            busy.pop()
        update()

    inputs["accelerator"].observe(on_accelerator, names="value")
    inputs["kernel"].observe(on_kernel, names="value")
    inputs["precision"].observe(update, names="value")
    inputs["size"].observe(update, names="value")
    return explorer


def roofline_explorer(accelerator="h100", precision="bf16", kernel="gemm", size=4096) -> RooflineExplorer:
    """Widgets that place a kernel on a roofline; prints the starting state as one line of text.

    Returns the widget (see :class:`RooflineExplorer`); end a notebook cell with
    it. Setting an input widget's ``.value``, in the notebook or in code,
    recomputes the label and redraws the plot. A starting accelerator,
    precision, kernel or size roofkit cannot use raises at once, naming the
    valid choices.
    """
    explorer = build_explorer(accelerator, precision, kernel, size)
    print(explorer.state["summary"])
    return explorer
