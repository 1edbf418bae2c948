"""The serving explorer: a model on N GPUs; watch the memory fill and latency trade against throughput.

    serving_explorer(model="llama-3-70b", hw="h100", gpus=8, weights_dtype="bf16", kv_dtype="bf16",
                     context=8192, batch=64)

shows dropdowns for the model, the accelerator, the GPU count and the
precisions of the weights and of the KV cache, sliders for the context and the
batch, a label (CSS class ``roofkit-serving``) with what
:func:`roofkit.inference.serve` makes of them (weights, cache per sequence,
the largest batch that fits, TTFT, TPOT, tokens/s), and a figure (an image in
a Box, CSS class ``roofkit-plot``): one GPU's memory as a bar
(:class:`roofkit.inference.plot.MemoryBar`) over TPOT and tokens/s against
the batch with the memory limit and the chosen batch marked
(:class:`roofkit.inference.plot.BatchCurve`), moved in place as the sliders
move. The memory bar's axis is the share of one GPU's memory and the curves'
axes are drawn once, so that another model, GPU, count or precision draws only
its figures and the curves' scales (once per choice). The math runs in BF16
(FP16 on chips without BF16).

A choice roofkit cannot serve (the chip has no such precision, a model whose
latency is not modelled) shows roofkit's message in place of the numbers it
cannot give; the explorer never raises after it has started.

:func:`explorer_state` computes what the widgets show, without any widget;
:func:`summary` is its one line of text, which the explorer also prints when it
starts, so a page rendered without a live kernel shows the same numbers (and
the starting figure, carried as a PNG).
"""

from __future__ import annotations

import functools
import html

import ipywidgets as w

from ._box import FigureBox, LiveFigure, Scene, cached

from ... import dtypes
from ...catalogs import hardware, models
from ...errors import InvalidValue, RoofkitError
from ...perf.inference import serve
from ...plots import serving as serving_plots
from ...plots import style

__all__ = ["serving_explorer", "build_explorer", "explorer_state", "summary", "ServingExplorer", "GPU_COUNTS",
           "CONTEXTS", "BATCHES", "WEIGHTS", "CACHES"]

GPU_COUNTS = (1, 2, 4, 8, 16)
CONTEXTS = tuple(2**e for e in range(9, 18))  # 512 .. 131,072 tokens
BATCHES = tuple(2**e for e in range(11))  # 1 .. 1024
WEIGHTS = ("bf16", "fp8", "int8", "int4")
CACHES = ("bf16", "fp8")


def _short(acc) -> str:
    return acc.name.removeprefix(f"{acc.vendor} ")


def _math(acc) -> str:
    return "bf16" if "bf16" in acc.peak_flops else "fp16"


def _choice(value, options, name):
    if value not in options:
        raise InvalidValue(f"{name} must be one of {', '.join(map(str, options))}; got {value!r}.")
    return value


def _duration(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def explorer_state(model="llama-3-70b", hw="h100", gpus=8, weights_dtype="bf16", kv_dtype="bf16", context=8192,
                   batch=64) -> dict:
    """What the explorer shows, as plain values: the serving estimate's figures, ``summary`` and ``error``.

    ``error`` holds roofkit's message when the latency cannot be computed (the
    memory figures are still there when they can be).

    >>> s = explorer_state()
    >>> s["max_batch"], s["fits"], round(s["tpot_s"] * 1e3, 1)
    (176, True, 12.9)
    """
    M, acc = models.get(model), hardware.get(hw)
    math = _math(acc)
    s = serve(M, acc, gpus, context, None, batch, math, weights_dtype, kv_dtype)
    state = s.to_dict() | {"model": M.key, "model_name": M.name, "hw": acc.key, "accelerator": _short(acc),
                           "plan": s.memory, "error": None}
    if s.tpot_s is None:
        state["error"] = "; ".join(s.notes[-1:])
    where = f"{M.name} on {gpus} x {state['accelerator']}, {state['weights_dtype']} weights, " \
            f"{state['kv_dtype']} cache, {context:,} tokens, batch {batch}"
    fit = "fits" if s.memory.fits else ("weights do not fit" if not s.memory.weights_fit else "does not fit")
    speed = "" if s.tpot_s is None else (f", TPOT {_duration(s.tpot_s)}, {s.tokens_per_s:.4g} tokens/s "
                                         f"({1 / s.tpot_s:.3g} per user)")
    state["summary"] = f"{where}: {fit} (largest batch {s.memory.max_batch}){speed}"
    return state


def summary(model="llama-3-70b", hw="h100", gpus=8, weights_dtype="bf16", kv_dtype="bf16", context=8192,
            batch=64) -> str:
    """The explorer's state as one line of text.

    >>> print(summary())
    Llama 3 70B on 8 x H100 SXM5 80GB, bf16 weights, bf16 cache, 8,192 tokens, batch 64: fits (largest batch 176), TPOT 12.9 ms, 4962 tokens/s (77.5 per user)
    """
    return explorer_state(model, hw, gpus, weights_dtype, kv_dtype, context, batch)["summary"]


def _html(state: dict) -> str:
    gb = lambda x: f"{x / 1e9:.4g} GB"  # noqa: E731
    fit = state["fits"]
    colour = style.HTML["ok"] if fit else style.HTML["error"]
    rows = [
        ("weights", f"{gb(state['weights_bytes'])} ({state['weights_dtype']}, all GPUs)"),
        ("KV cache", f"{state['kv_bytes_per_token'] / 1e3:.4g} kB per token, {gb(state['kv_bytes_per_sequence'])} "
                     f"per sequence of {state['context']:,} tokens ({state['kv_dtype']})"),
        ("reserve", f"{gb(state['reserve_bytes'])} ({state['reserve_fraction']:.0%} of each GPU)"),
        ("largest batch", f"<b>{state['max_batch']}</b> sequences"),
        ("batch " + str(state["batch"]), f"<b style='color:{colour}'>{'fits' if fit else 'does not fit'}</b>"
                                         + ("" if state["weights_fit"] else
                                            f": the weights need {state['min_gpus']} GPUs at least")),
    ]
    if state["tpot_s"] is not None:
        rows += [("time to first token", f"{_duration(state['ttft_s'])} ({state['prompt']:,}-token prompt)"),
                 ("time per output token", f"<b>{_duration(state['tpot_s'])}</b>"),
                 ("tokens/s", f"<b>{state['tokens_per_s']:.4g}</b> for the batch, "
                              f"{state['tokens_per_s_per_gpu']:.4g} per GPU, {state['tokens_per_s_per_user']:.3g} "
                              "per user")]
    else:
        rows.append(("latency", html.escape(state["error"] or "")))
    cells = "".join(f"<tr><td style='padding-right:1em;color:{style.HTML['muted']}'>{html.escape(k)}</td><td>{v}</td></tr>"
                    for k, v in rows)
    title = html.escape(f"{state['model_name']} on {state['gpus']} x {state['accelerator']}, math in "
                        f"{state['dtype'].upper()}")
    return f"<b>{title}</b><table>{cells}</table>"


@functools.lru_cache(maxsize=256)
def _sweep(model, hw, gpus, context, dtype, weights_dtype, kv_dtype) -> dict:
    """The latency curve over the slider's batches, kept per input (a dozen decode steps each)."""
    return serving_plots.batch_sweep(model, hw, gpus, context, BATCHES, dtype, weights_dtype, kv_dtype)


@functools.lru_cache(maxsize=256)
def _ranges(model, hw, gpus, dtype, weights_dtype, kv_dtype) -> tuple:
    """(TPOT range in seconds, tokens/s range) over every context and batch the sliders offer.

    A step takes longer with a longer context and a larger batch, and the batch's tokens/s grows with
    the batch and falls with the context, so the ends are at the corners: the smallest and largest
    batch (and the largest that fits) at the shortest and longest context, six decode steps instead of
    the two dozen of two whole sweeps (``tests/test_explore_serving.py`` checks the sweeps stay inside).
    """
    ends = [serving_plots.batch_sweep(model, hw, gpus, c, (BATCHES[0], BATCHES[-1]), dtype, weights_dtype, kv_dtype)
            for c in (CONTEXTS[0], CONTEXTS[-1])]
    tpot = [t for sweep in ends for t in sweep["tpot_s"]]
    rate = [r for sweep in ends for r in sweep["tokens_per_s"]]
    return (min(tpot), max(tpot)), (min(rate), max(rate))


class _Figure(Scene):
    """One GPU's memory as a bar over TPOT and tokens/s against the batch, moved in place as the controls change.

    What is drawn once: the axes, the memory bar's as shares of one GPU's
    memory (:class:`roofkit.inference.plot.MemoryBar`), the curves' batch
    axis and frame (:class:`roofkit.inference.plot.BatchCurve`). What the
    model, the accelerator, the GPU count and the precisions change (the key
    layer, drawn once for each): the memory bar's legend and GB figures, and
    the curves' y scales, fixed over every context and batch the sliders
    offer for them; or roofkit's message where the latency is not modelled.
    What a change moves: the bar's parts, the curves, the memory limit and
    the chosen batch.
    """

    def __init__(self, state: dict):
        # fixed margins: the layout never changes
        super().__init__(state, figsize=(8.5, 5.6), layout=None)

    def key(self, state: dict) -> tuple:
        return (state["model"], state["hw"], state["gpus"], state["dtype"], state["weights_dtype"],
                state["kv_dtype"], state["tpot_s"] is None and state["error"],
                serving_plots.MemoryBar.key_of(state["plan"]))

    def build(self, live: LiveFigure) -> None:
        top, bottom = live.fig.subplots(2, 1, height_ratios=(1, 3.2),
                                        gridspec_kw=dict(left=0.1, right=0.88, top=0.95, bottom=0.09, hspace=0.5))
        self.memory = serving_plots.MemoryBar(top)
        live.animate(*self.memory.artists)
        self.curve = serving_plots.BatchCurve(bottom, title="decode at the chosen context")
        live.animate(*self.curve.artists)

    def layer(self, state: dict) -> None:
        self.memory.labels(state["plan"])
        if state["tpot_s"] is None:
            self.curve.ax.text(0.5, 0.5, state["error"], ha="center", va="center", wrap=True,
                               transform=self.curve.ax.transAxes, fontsize=style.SIZE["text"], bbox=style.LABEL_BOX)
        else:
            self.curve.set_ranges(*self._ranges(state))
            self.curve.scales()

    def move(self, state: dict) -> None:
        self.memory.update(state["plan"])
        if state["tpot_s"] is None:
            self.curve.hide()
            return
        self.curve.set_ranges(*self._ranges(state))  # a key whose pixels are kept did not run layer()
        sweep = _sweep(state["model"], state["hw"], state["gpus"], state["context"], state["dtype"],
                       state["weights_dtype"], state["kv_dtype"])
        self.curve.update(sweep, state["batch"])

    @staticmethod
    def _ranges(state: dict) -> tuple:
        return _ranges(state["model"], state["hw"], state["gpus"], state["dtype"], state["weights_dtype"],
                       state["kv_dtype"])


class ServingExplorer(FigureBox):
    """The explorer's box: ``.inputs`` (widgets by name), ``.label`` (HTML), ``.plot`` (a Box holding
    ``.image``, the live figure), ``.state``.

    Its plain-text form is one line, and it carries the starting figure as a PNG,
    so a notebook rendered without a live kernel shows the starting picture."""

    text = "serving explorer (widgets: run the notebook live to change the batch, the GPUs, the precisions)"


def build_explorer(model="llama-3-70b", hw="h100", gpus=8, weights_dtype="bf16", kv_dtype="bf16", context=8192,
                   batch=64) -> ServingExplorer:
    """The explorer's widgets, wired up, without printing or displaying anything.

    A starting value the widgets cannot show (a model or an accelerator roofkit
    does not know, a GPU count, context or batch off its slider) raises at once,
    naming the choices.
    """
    M, acc = models.get(model), hardware.get(hw)
    for value, options, name in ((gpus, GPU_COUNTS, "gpus"), (dtypes.canonical(weights_dtype), WEIGHTS,
                                                              "weights_dtype"),
                                 (dtypes.canonical(kv_dtype), CACHES, "kv_dtype"), (context, CONTEXTS, "context"),
                                 (batch, BATCHES, "batch")):
        _choice(value, options, name)
    state = explorer_state(M.key, acc.key, gpus, weights_dtype, kv_dtype, context, batch)
    labels = {"description_width": "100px"}
    wide = w.Layout(width="460px")
    inputs = {
        "model": w.Dropdown(options=[(m.name, m.key) for m in models.catalog()], value=M.key, description="model",
                            style=labels),
        "hw": w.Dropdown(options=[(_short(a), a.key) for a in hardware.catalog() if a.capacity_bytes],
                         value=acc.key, description="accelerator", style=labels),
        "gpus": w.Dropdown(options=list(GPU_COUNTS), value=gpus, description="GPUs", style=labels),
        "weights_dtype": w.Dropdown(options=[(d.upper(), d) for d in WEIGHTS], value=state["weights_dtype"],
                                    description="weights", style=labels),
        "kv_dtype": w.Dropdown(options=[(d.upper(), d) for d in CACHES], value=state["kv_dtype"],
                               description="KV cache", style=labels),
        "context": w.SelectionSlider(options=[(f"{c:,}", c) for c in CONTEXTS], value=context,
                                     description="context", continuous_update=True, style=labels, layout=wide),
        "batch": w.SelectionSlider(options=[(str(b), b) for b in BATCHES], value=batch, description="batch",
                                   continuous_update=True, style=labels, layout=wide),
    }
    inputs["batch"].add_class("roofkit-batch")
    inputs["context"].add_class("roofkit-context")
    label = w.HTML(value=_html(state))
    label.add_class("roofkit-serving")
    plot, image = ServingExplorer.image_box()
    explorer = ServingExplorer([
        w.HBox([inputs["model"], inputs["hw"], inputs["gpus"]]),
        w.HBox([inputs["weights_dtype"], inputs["kv_dtype"]]),
        inputs["context"], inputs["batch"], label, plot,
    ])
    explorer.add_class("roofkit-serving-explorer")
    explorer.inputs, explorer.label, explorer.plot, explorer.state = inputs, label, plot, state
    explorer.image, figure = image, _Figure(state)
    explorer.attach(figure.live)
    state_of = cached(explorer_state)  # a slider swept back and forth asks for the same states again

    def draw():
        image.layout.display = None
        figure.update(explorer.state)
        explorer.redraw()

    def update(_change=None):
        values = {name: widget.value for name, widget in inputs.items()}
        try:
            explorer.state = state_of(**values)
        except RoofkitError as error:  # e.g. a chip without the precision: say so, keep the widgets alive
            label.value = f"<b style='color:{style.HTML['error']}'>{html.escape(str(error))}</b>"
            image.layout.display = "none"
            return
        label.value = _html(explorer.state)
        draw()

    for widget in inputs.values():
        widget.observe(update, names="value")
    return explorer


def serving_explorer(model="llama-3-70b", hw="h100", gpus=8, weights_dtype="bf16", kv_dtype="bf16", context=8192,
                     batch=64) -> ServingExplorer:
    """Widgets that serve ``model`` on ``gpus`` x ``hw``; prints the starting state as one line of text.

    Returns the widget (see :class:`ServingExplorer`); end a notebook cell with
    it. Setting an input widget's ``.value``, in the notebook or in code,
    recomputes the label and redraws the figure.
    """
    explorer = build_explorer(model, hw, gpus, weights_dtype, kv_dtype, context, batch)
    print(explorer.state["summary"])
    return explorer
