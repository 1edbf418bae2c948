"""The parallelism explorer: lay a model out on many GPUs and watch memory, step time and MFU move.

    parallel_explorer(model="llama-3-70b", hw="h100", gpus=1024, tp=8, pp=4, zero=1,
                      global_batch_tokens=4 * 2**20, seq=8192, recompute=False)

shows dropdowns for the model and the accelerator, sliders for the GPU count,
tensor parallelism (TP), pipeline parallelism (PP), the ZeRO stage and the
global batch, a box for recomputation, and under them what
:func:`roofkit.parallel.plan` makes of the layout: data parallelism
DP = GPUs / (TP x PP) (it follows the other sliders), memory per GPU against
the accelerator's, the step time split into compute, exposed communication and
pipeline bubble, and the MFU. A label (CSS class ``roofkit-plan``) holds the
numbers; an image in a Box (CSS class ``roofkit-parallel-plot``) the two bars
(:class:`roofkit.plots_parallel.PlanBars`: memory per GPU as a share of the
accelerator's, and the step's parts as shares of it), moved in place as the
controls change; another accelerator writes only its name and memory.

A layout roofkit cannot plan (TP x PP larger than the GPU count, a batch too
small for DP, more stages than layers) shows roofkit's error message in place
of the result; the explorer never raises after it has started.

:func:`explorer_state` computes what the widgets show, without any widget;
:func:`summary` is its one line of text, which the explorer also prints when it
starts, so a page rendered without a live kernel shows the same numbers (and
the starting figure, carried as a PNG).
"""

from __future__ import annotations

import html

import ipywidgets as w

from ._box import FigureBox, LiveFigure, Scene, cached

from ...catalogs import hardware, links, models
from ...perf import parallel
from ...errors import InvalidValue, RoofkitError
from ...plots import parallel as plots_parallel
from ...plots import style

__all__ = ["parallel_explorer", "build_explorer", "explorer_state", "summary", "ParallelExplorer", "GPU_COUNTS",
           "DEGREES", "BATCHES"]

GPU_COUNTS = tuple(2**k for k in range(3, 15))  # 8 to 16,384
DEGREES = (1, 2, 4, 8, 16, 32, 64)  # TP and PP
BATCHES = tuple(2**k for k in range(19, 27))  # 0.5M to 64M tokens


def _short(acc) -> str:
    return acc.name.removeprefix(f"{acc.vendor} ")


def _tokens(n: float) -> str:
    """4194304 -> '4M', 524288 -> '0.5M' (binary millions, as batch sizes are quoted)."""
    return f"{n / 2**20:g}M"


def _accelerators() -> list:
    """The accelerators whose links roofkit knows, with a domain (an NVSwitch node or a pod) to build on,
    and whose memory it knows (the figure draws memory as a share of it)."""
    return [a for a in hardware.catalog()
            if a.capacity_bytes and any(x.gpus is not None for x in links.for_accelerator(a))]


def explorer_state(model="llama-3-70b", hw="h100", gpus=1024, tp=8, pp=4, zero=1, global_batch_tokens=4 * 2**20,
                   seq=8192, recompute=False, calibrated=False) -> dict:
    """What the explorer shows, as plain values: the plan's numbers, or ``error`` (roofkit's message).

    Keys: ``model``, ``accelerator``, ``gpus``, ``tp``, ``pp``, ``zero``,
    ``global_batch_tokens``, ``seq``, ``recompute``, ``calibrated`` (the bound, or
    the calibrated estimate; sequence parallelism whenever TP > 1), then either ``error`` or
    ``dp``, ``layout``, ``memory_gb`` (per part), ``memory_per_gpu_bytes``,
    ``capacity_bytes``, ``fits``, ``step_time_s``, ``compute_s``,
    ``communication_s``, ``bubble_s``, ``mfu``, ``warnings``; and ``summary``
    (one line of text) and ``plan`` (the :class:`roofkit.parallel.Plan`, or None).

    >>> s = explorer_state("llama-3-70b", "h100", 1024, 8, 4, 1)
    >>> s["dp"], s["fits"], round(s["mfu"], 2)
    (32, True, 0.79)
    >>> explorer_state("llama-3-70b", "h100", 8, 8, 4)["error"]
    'gpus = 8 is not a multiple of tp x cp x pp = 32; choose tp, cp and pp whose product divides 8.'
    """
    state = {"model": model, "accelerator": hw, "gpus": gpus, "tp": tp, "pp": pp, "zero": zero,
             "global_batch_tokens": global_batch_tokens, "seq": seq, "recompute": bool(recompute),
             "calibrated": bool(calibrated), "plan": None}
    try:
        M, acc = models.get(model), hardware.get(hw)
        state["model"], state["accelerator"] = M.key, acc.key
        p = parallel.plan(M, acc, gpus, global_batch_tokens, seq, tp=tp, pp=pp, zero=zero, recompute=recompute,
                          sequence_parallel=tp > 1, calibrated=bool(calibrated))
    except RoofkitError as error:
        state["error"] = str(error)
        state["summary"] = f"{model} on {gpus} x {hw}, TP {tp} · PP {pp} · ZeRO-{zero}: cannot plan: {error}"
        return state
    state.update(plan=p, dp=p.dp, layout=p.layout, memory_per_gpu_bytes=p.memory_per_gpu_bytes,
                 memory_gb={k: v / 1e9 for k, v in p.memory.items()}, capacity_bytes=p.memory_capacity_bytes,
                 fits=p.fits, step_time_s=p.step_time_s, compute_s=p.compute_s, communication_s=p.communication_s,
                 bubble_s=p.bubble_s, mfu=p.mfu, warnings=list(p.warnings))
    fits = "" if p.fits is None else (" (fits)" if p.fits else " (does NOT fit)")
    state["summary"] = (
        f"{M.name} on {p.gpus:,} {_short(acc)}, {p.layout}, {_tokens(p.global_batch_tokens)}-token batch: "
        f"{p.memory_per_gpu_bytes / 1e9:.1f} GB per GPU{fits}; step {p.step_time_s:.3g} s "
        f"(compute {p.compute_s / p.step_time_s:.0%}, communication {p.communication_s / p.step_time_s:.0%}, "
        f"bubble {p.bubble_s / p.step_time_s:.0%}); MFU {p.mfu:.1%} ({'estimate' if p.calibrated else 'bound'})")
    return state


def summary(model="llama-3-70b", hw="h100", gpus=1024, tp=8, pp=4, zero=1, global_batch_tokens=4 * 2**20, seq=8192,
            recompute=False, calibrated=False) -> str:
    """The explorer's state as one line of text (or roofkit's message for a layout it cannot plan).

    >>> print(summary())
    Llama 3 70B on 1,024 H100 SXM5 80GB, TP 8 · PP 4 · DP 32 · ZeRO-1, 4M-token batch: 24.0 GB per GPU (fits); step 2.36 s (compute 84%, communication 0%, bubble 16%); MFU 78.9% (bound)
    """
    return explorer_state(model, hw, gpus, tp, pp, zero, global_batch_tokens, seq, recompute, calibrated)["summary"]


def _html(state: dict) -> str:
    if "error" in state:
        return (f"<b>cannot plan this layout</b><div style='color:{style.HTML['error']}'>{html.escape(state['error'])}</div>")
    p = state["plan"]
    acc = hardware.get(p.accelerator)
    colour = style.HTML["error"] if p.fits is False else style.HTML["ok"]
    fit_text = "" if p.fits is None else (" fits" if p.fits else " does not fit")
    rows = [
        ("layout", f"{html.escape(p.layout)} (DP = GPUs / (TP · PP) = {p.gpus:,} / {p.tp * p.pp})"),
        ("batch", f"{_tokens(p.global_batch_tokens)} tokens of {p.seq:,}: {p.tokens_per_gpu:,.0f} per GPU, "
                  f"{p.microbatches} micro-batch{'es' if p.microbatches > 1 else ''} per replica"),
        ("memory per GPU", f"<b style='color:{colour}'>{p.memory_per_gpu_bytes / 1e9:.1f} GB{fit_text}</b> "
                           f"({_short(acc)}: {acc.capacity_bytes / 1e9:.1f} GB usable)"),
        ("step time", f"<b>{p.step_time_s:.3g} s</b>: compute {p.compute_s:.3g} s, exposed communication "
                      f"{p.communication_s:.3g} s, bubble {p.bubble_s:.3g} s"),
        ("MFU", f"<b>{p.mfu:.1%}</b> (matmuls at the datasheet peak: an upper bound)"),
    ]
    cells = "".join(f"<tr><td style='padding-right:1em;color:{style.HTML['muted']}'>{html.escape(k)}</td><td>{v}</td></tr>"
                    for k, v in rows)
    notes = "".join(f"<div style='color:{style.HTML['warning']}'>{html.escape(x)}</div>" for x in p.warnings)
    title = f"{models.get(p.model).name} on {p.gpus:,} {_short(acc)}"
    return f"<b>{html.escape(title)}</b><table>{cells}</table>{notes}"


class _Figure(Scene):
    """Memory per GPU and the step's parts as two bars, moved in place as the controls change.

    What is drawn once: the axes (memory as a share of the accelerator's,
    whatever the accelerator), the legends and the titles. What the
    accelerator changes (the key layer): its name and memory beside the line
    at 100%. What a change moves: the bars and the figures written beside
    them, or a line saying that a layout cannot be planned (roofkit's message
    is in the label).
    """

    def __init__(self, state: dict):
        super().__init__(state, figsize=(9, 2.8))

    def key(self, state: dict) -> str:
        return state["accelerator"]

    def build(self, live: LiveFigure) -> None:
        left, right = live.fig.subplots(1, 2)
        self.bars = plots_parallel.PlanBars(left, right)
        live.animate(*self.bars.artists)
        # roofkit's message is in the label above; the figure says only that there is nothing to draw
        self.message = live.animate(live.fig.text(0.5, 0.5, "cannot plan this layout: see the message above",
                                                  ha="center", va="center", fontsize=style.SIZE["text"],
                                                  color=style.HTML["error"],
                                                  bbox=dict(fc="white", ec="none", pad=8)))

    def layer(self, state: dict) -> None:
        acc = hardware.get(state["accelerator"])
        self.bars.label(acc.capacity_bytes, _short(acc))

    def move(self, state: dict) -> None:
        failed = "error" in state
        for artist in self.bars.artists:
            artist.set_visible(not failed)
        self.message.set_visible(failed)
        if not failed:
            self.bars.update(state["plan"])


class ParallelExplorer(FigureBox):
    """The explorer's box. ``.inputs`` maps each argument's name to its widget; ``.label`` (HTML) and
    ``.plot`` (a Box holding ``.image``, the live figure) are its outputs; ``.state`` what they show.

    Its plain-text form is one line, and it carries the starting figure as a PNG, so
    a notebook rendered without a live kernel shows the starting bars."""

    text = "parallelism explorer (widgets: run the notebook live to move the sliders)"


def _choice(value, options, name: str):
    if value not in options:
        raise InvalidValue(f"{name} = {value!r} is not on the explorer's slider; choose one of: "
                           f"{', '.join(map(str, options))}.")
    return value


def build_explorer(model="llama-3-70b", hw="h100", gpus=1024, tp=8, pp=4, zero=1, global_batch_tokens=4 * 2**20,
                   seq=8192, recompute=False, calibrated=False) -> ParallelExplorer:
    """The explorer's widgets, wired up, without printing or displaying anything.

    A starting value the widgets cannot show (a model or accelerator roofkit
    does not know, a GPU count off the slider) raises at once, naming the choices.
    """
    M, acc = models.get(model), hardware.get(hw)
    accelerators = _accelerators()
    if acc.key not in {a.key for a in accelerators}:
        raise InvalidValue(f"{acc.name} has no NVLink domain or pod in roofkit's link catalog; the explorer "
                           f"offers: {', '.join(a.key for a in accelerators)}.")
    for value, options, name in ((gpus, GPU_COUNTS, "gpus"), (tp, DEGREES, "tp"), (pp, DEGREES, "pp"),
                                 (zero, parallel.ZERO_STAGES, "zero"), (global_batch_tokens, BATCHES,
                                                                        "global_batch_tokens")):
        _choice(value, options, name)
    state = explorer_state(M.key, acc.key, gpus, tp, pp, zero, global_batch_tokens, seq, recompute, calibrated)
    labels = {"description_width": "110px"}
    wide = w.Layout(width="460px")
    inputs = {
        "model": w.Dropdown(options=[(m.name, m.key) for m in models.catalog()], value=M.key, description="model",
                            style=labels),
        "hw": w.Dropdown(options=[(_short(a), a.key) for a in accelerators], value=acc.key,
                         description="accelerator", style=labels),
        "gpus": w.SelectionSlider(options=[(f"{g:,}", g) for g in GPU_COUNTS], value=gpus, description="GPUs",
                                  continuous_update=True, style=labels, layout=wide),
        "tp": w.SelectionSlider(options=list(DEGREES), value=tp, description="TP (tensor)",
                                continuous_update=True, style=labels, layout=wide),
        "pp": w.SelectionSlider(options=list(DEGREES), value=pp, description="PP (pipeline)",
                                continuous_update=True, style=labels, layout=wide),
        "zero": w.SelectionSlider(options=list(parallel.ZERO_STAGES), value=zero, description="ZeRO stage",
                                  continuous_update=True, style=labels, layout=wide),
        "global_batch_tokens": w.SelectionSlider(options=[(_tokens(b), b) for b in BATCHES],
                                                 value=global_batch_tokens, description="batch (tokens)",
                                                 continuous_update=True, style=labels, layout=wide),
        "recompute": w.Checkbox(value=bool(recompute), description="recompute activations", style=labels),
        "calibrated": w.Checkbox(value=bool(calibrated), description="calibrated estimate (not the bound)",
                                 style=labels),
    }
    label = w.HTML(value=_html(state))
    label.add_class("roofkit-plan")
    plot, image = ParallelExplorer.image_box("roofkit-parallel-plot")
    explorer = ParallelExplorer([
        w.HBox([inputs["model"], inputs["hw"]]),
        inputs["gpus"], inputs["tp"], inputs["pp"], inputs["zero"], inputs["global_batch_tokens"],
        inputs["recompute"], inputs["calibrated"], label, plot,
    ])
    explorer.add_class("roofkit-parallel")
    explorer.inputs, explorer.label, explorer.plot, explorer.state, explorer.seq = inputs, label, plot, state, seq
    explorer.image, figure = image, _Figure(state)
    explorer.attach(figure.live)
    state_of = cached(explorer_state)  # a slider swept back and forth asks for the same plans again

    def draw():
        figure.update(explorer.state)
        explorer.redraw()

    def update(_change=None):
        values = {name: widget.value for name, widget in inputs.items()}
        explorer.state = state_of(values["model"], values["hw"], values["gpus"], values["tp"], values["pp"],
                                  values["zero"], values["global_batch_tokens"], seq, values["recompute"],
                                  values["calibrated"])
        label.value = _html(explorer.state)
        draw()

    for widget in inputs.values():
        widget.observe(update, names="value")
    return explorer


def parallel_explorer(model="llama-3-70b", hw="h100", gpus=1024, tp=8, pp=4, zero=1, global_batch_tokens=4 * 2**20,
                      seq=8192, recompute=False, calibrated=False) -> ParallelExplorer:
    """Widgets that lay ``model`` out on ``gpus`` accelerators; prints the starting state as one line of text.

    Returns the widget (see :class:`ParallelExplorer`); end a notebook cell with
    it. Setting an input widget's ``.value``, in the notebook or in code,
    recomputes the label and redraws the bars.
    """
    explorer = build_explorer(model, hw, gpus, tp, pp, zero, global_batch_tokens, seq, recompute, calibrated)
    print(explorer.state["summary"])
    return explorer
