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
(:class:`~roofkit.explore._box.LiveFigure`; the roofs are redrawn only when the
accelerator or the precision changes)::

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


class _Figure(Scene):
    """The roofline with the kernel on it, and beside it the bars of T_math and T_mem, moved in place.

    What is drawn once: the roofs of the accelerator and precision (redrawn
    when either changes). What a change moves: the kernel's dot and its label,
    and the bars (:class:`roofkit.diagrams.TimeBars`).
    """

    def __init__(self, state: dict):
        super().__init__(state, figsize=(13, 5.2))

    def key(self, state: dict) -> tuple:
        """The roofs drawn: the accelerator, the precision, and whether the achievable ones are shown."""
        return state["accelerator_key"], state["precision"], state["achievable"] is not None

    def build(self, live: LiveFigure) -> None:
        state, fig = self.state, live.fig
        spec = KERNELS[state["kernel"]]
        roof_ax, bars_ax = fig.subplots(1, 2, width_ratios=(1.75, 1))
        acc, ach = hardware.get(state["accelerator_key"]), state["achievable"]
        roofs = [rl.Roof("achievable (measured)", acc.peak(state["precision"], achievable=True),
                         acc.memory_bandwidth(achievable=True))] if ach else []
        kernel = rl.Kernel(state["label"], spec.cost(state["size"], state["precision"]).intensity)
        rl.plot([acc.key], [state["precision"]], kernels=[kernel], roofs=roofs, xlim=XLIM, ax=roof_ax,
                title=f"Roofline: {_short(acc)} ({state['precision'].upper()})")
        # the kernel as plot() draws it (a scatter, in the legend), redrawn as a marker: a tenth of the time
        next(c for c in roof_ax.collections if c.get_gid() == "kernel").set_visible(False)
        self.dot = roof_ax.plot([], [], ls="none", marker="o", ms=40 ** 0.5, color="0.1", zorder=5)[0]
        self.name = next(t for t in roof_ax.texts if t.get_gid() == "kernel-label")
        live.animate(self.dot, self.name)
        self.bars = diagrams.TimeBars(bars_ax, ["datasheet roofs"] + (["achievable roofs"] if ach else []),
                                      title="time of one call")
        live.animate(*self.bars.artists)

    def move(self, state: dict) -> None:
        point = (state["intensity"], state["attainable_flops_per_s"])
        self.dot.set_data([point[0]], [point[1]])
        self.name.xy = point
        self.name.set_text(state["label"])
        # right of the dot when compute-bound (clear of the ridge label), else up and to the left
        self.name.xyann = (10, 5) if state["bound"] == "compute" else (-6, 8)
        self.name.set_horizontalalignment("left" if state["bound"] == "compute" else "right")
        rows = [("datasheet roofs", state["t_math_s"], state["t_mem_s"])]
        if state["achievable"]:
            rows.append(("achievable roofs", state["achievable"]["t_math_s"], state["achievable"]["t_mem_s"]))
        self.bars.update(rows)


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
