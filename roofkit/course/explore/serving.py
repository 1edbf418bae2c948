"""The serving explorers: a model on N GPUs; watch the memory fill and latency trade against throughput; and the
same server under a stream of requests, its queue.

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

The queue explorer::

    queue_explorer(model="llama-3-8b", hw="h100", input_tokens=1000, output_tokens=200, load=0.9, gpus=1,
                   requests=2000)

shows dropdowns for the model, the accelerator and the GPU count, sliders for
the prompt and output tokens and for the request rate, and a label (CSS class
``roofkit-queue``) with what :func:`roofkit.inference.simulate.simulate` makes of
a Poisson stream of ``requests`` requests at that rate: TTFT and TPOT at the
median and the 99th percentile, the requests and tokens finished per second,
and the goodput under the simulator's targets (2 s to the first token, 200 ms
per output token). The rate slider offers the server's capacity
(:func:`roofkit.inference.plot.capacity`, Little's law) times :data:`QUEUE_LOADS`,
each to two significant figures, and keeps its share of the capacity when the
model, the accelerator or the workload changes. Each run is kept
(:func:`roofkit.inference.plot.simulation`), so a rate visited again costs
nothing. :func:`queue_state` and :func:`queue_summary` give what it shows without
any widget; it prints the summary when it starts, and a page without a live
kernel shows that line.
"""

from __future__ import annotations

import functools
import html

import ipywidgets as w

from ._box import FigureBox, LiveFigure, Scene, cached

from ... import dtypes
from ...catalogs import hardware, models
from ...errors import InvalidValue, RoofkitError
from ...perf.inference import latency, serve
from ...plots import serving as serving_plots
from ...plots import style

__all__ = ["serving_explorer", "build_explorer", "explorer_state", "summary", "ServingExplorer", "GPU_COUNTS",
           "CONTEXTS", "BATCHES", "WEIGHTS", "CACHES", "queue_explorer", "build_queue_explorer", "queue_state",
           "queue_summary", "queue_rates", "QueueExplorer", "QUEUE_LOADS", "INPUT_TOKENS", "OUTPUT_TOKENS",
           "QUEUE_GPUS"]

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
        **_server_inputs(w, M, acc, gpus, GPU_COUNTS, labels),
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


def _server_inputs(w, M, acc, gpus, gpu_options, labels) -> dict:
    """The model, accelerator and GPU-count dropdowns both serving explorers open with."""
    return {"model": w.Dropdown(options=[(m.name, m.key) for m in models.catalog()], value=M.key,
                                description="model", style=labels),
            "hw": w.Dropdown(options=[(_short(a), a.key) for a in hardware.catalog() if a.capacity_bytes],
                             value=acc.key, description="accelerator", style=labels),
            "gpus": w.Dropdown(options=list(gpu_options), value=gpus, description="GPUs", style=labels)}


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


# --- the queue: the same server under a stream of requests ------------------------------------------------------

QUEUE_LOADS = (0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.05, 1.1, 1.2, 1.5)  # the rate slider, as shares of the capacity
INPUT_TOKENS = (128, 256, 512, 1000, 2000, 4000, 8000)
OUTPUT_TOKENS = (32, 64, 128, 200, 500, 1000, 2000)
QUEUE_GPUS = (1, 2, 4, 8)
QUEUE_REQUESTS = 2000  # enough for a queue to build past the capacity, few enough for a run in under a second


def _nice(rate: float) -> float:
    """A request rate to two significant figures, as the lesson's sweep rounds it (so the runs are shared)."""
    return float(f"{rate:.2g}")


def queue_rates(model="llama-3-8b", hw="h100", input_tokens=1000, output_tokens=200,
                gpus=1) -> list[tuple[float, float]]:
    """The rate slider's (share of the capacity, requests per second) pairs: the capacity times :data:`QUEUE_LOADS`.

    >>> [rate for _, rate in queue_rates()][-3:]
    [39.0, 43.0, 54.0]
    """
    acc = hardware.get(hw)
    cap = serving_plots.capacity(model, acc.key, input_tokens, output_tokens, gpus, _math(acc))
    return [(load, _nice(cap * load)) for load in QUEUE_LOADS]


def _seconds(x: float) -> str:
    return f"{x * 1e3:.3g} ms" if x < 1 else f"{x:.3g} s"


def queue_state(model="llama-3-8b", hw="h100", input_tokens=1000, output_tokens=200, rate=32.0, gpus=1,
                requests=QUEUE_REQUESTS) -> dict:
    """What the queue explorer shows for ``rate`` requests per second, as plain values: the run's percentiles
    (seconds), rates (per second over all the GPUs), ``capacity``, ``load`` (the rate over it), ``summary`` and
    ``error`` (roofkit's message where the server cannot run this: the weights do not fit, say; the figures are
    None then).

    >>> s = queue_state()
    >>> round(s["capacity"], 1), s["rate"], s["ttft_p99_s"] < s["slo_ttft_s"]
    (35.8, 32.0, True)
    """
    M, acc = models.get(model), hardware.get(hw)
    state = {"model": M.key, "model_name": M.name, "hw": acc.key, "accelerator": _short(acc), "gpus": gpus,
             "input_tokens": input_tokens, "output_tokens": output_tokens, "rate": float(rate), "requests": requests,
             "dtype": _math(acc), "error": None}
    where = (f"{M.name} on {gpus} x {state['accelerator']}, {input_tokens:,} in / {output_tokens:,} out, "
             f"{float(rate):g} requests/s")
    try:
        cap = serving_plots.capacity(M.key, acc.key, input_tokens, output_tokens, gpus, state["dtype"])
        run = serving_plots.simulation(M.key, acc.key, input_tokens, output_tokens, rate, requests, gpus,
                                       state["dtype"])
    except RoofkitError as error:
        state |= {"capacity": None, "load": None, "summary": f"{where}: {error}", "error": str(error)}
        return state
    figures = run.to_dict()
    state |= {k: figures[k] for k in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "requests_per_s",
                                      "tokens_per_s", "goodput", "slo_ttft_s", "slo_tpot_s", "preemptions",
                                      "peak_running", "max_num_seqs")}
    state |= {"capacity": cap, "load": float(rate) / cap, "good_fraction": float(run.good.mean()),
              "lone_ttft_s": latency.ttft(M.key, acc.key, input_tokens, gpus=gpus, dtype=state["dtype"])}
    tpot_ok = state["tpot_p99_s"] is None or state["tpot_p99_s"] <= state["slo_tpot_s"]
    state["meets"] = state["ttft_p99_s"] <= state["slo_ttft_s"] and tpot_ok
    tpot = "" if state["tpot_p99_s"] is None else f"; TPOT p99 {_seconds(state['tpot_p99_s'])}"
    state["summary"] = (f"{where} ({state['load']:.0%} of its capacity, {cap:.3g}/s): TTFT median "
                        f"{_seconds(state['ttft_p50_s'])}, p99 {_seconds(state['ttft_p99_s'])}{tpot}; "
                        f"{state['requests_per_s']:.3g} finished/s, goodput {state['goodput']:.3g}/s "
                        f"(TTFT <= {state['slo_ttft_s']:g} s, TPOT <= {state['slo_tpot_s'] * 1e3:g} ms)")
    return state


def queue_summary(model="llama-3-8b", hw="h100", input_tokens=1000, output_tokens=200, rate=32.0, gpus=1,
                  requests=QUEUE_REQUESTS) -> str:
    """The queue explorer's state as one line of text.

    >>> print(queue_summary().split(": ")[0])
    Llama 3 8B on 1 x H100 SXM5 80GB, 1,000 in / 200 out, 32 requests/s (90% of its capacity, 35.8/s)
    """
    return queue_state(model, hw, input_tokens, output_tokens, rate, gpus, requests)["summary"]


def _queue_html(state: dict) -> str:
    title = html.escape(f"{state['model_name']} on {state['gpus']} x {state['accelerator']}, "
                        f"{state['input_tokens']:,} in / {state['output_tokens']:,} out, {state['requests']:,} "
                        f"Poisson requests at {state['rate']:g} per second")
    if state["error"]:
        return f"<b>{title}</b><div style='color:{style.HTML['error']}'>{html.escape(state['error'])}</div>"
    ok = lambda good: style.HTML["ok"] if good else style.HTML["error"]  # noqa: E731
    ttft_ok = state["ttft_p99_s"] <= state["slo_ttft_s"]
    rows = [
        ("capacity (Little's law)", f"{state['capacity']:.3g} requests/s with {state['max_num_seqs']} places full; "
                                    f"this rate is <b>{state['load']:.0%}</b> of it"),
        ("time to first token", f"median {_seconds(state['ttft_p50_s'])}, <b style='color:{ok(ttft_ok)}'>p99 "
                                f"{_seconds(state['ttft_p99_s'])}</b> (a request alone: "
                                f"{_seconds(state['lone_ttft_s'])})"),
    ]
    if state["tpot_p99_s"] is not None:
        tpot_ok = state["tpot_p99_s"] <= state["slo_tpot_s"]
        rows.append(("time per output token", f"median {_seconds(state['tpot_p50_s'])}, <b style='color:"
                                              f"{ok(tpot_ok)}'>p99 {_seconds(state['tpot_p99_s'])}</b>"))
    rows += [
        ("finished", f"<b>{state['requests_per_s']:.3g}</b> requests/s, {state['tokens_per_s']:.4g} output tokens/s"),
        ("goodput", f"<b>{state['goodput']:.3g}</b> requests/s ({state['good_fraction']:.0%} of them within TTFT "
                    f"{_seconds(state['slo_ttft_s'])} and TPOT {_seconds(state['slo_tpot_s'])})"),
    ]
    cells = "".join(f"<tr><td style='padding-right:1em;color:{style.HTML['muted']}'>{html.escape(k)}</td><td>{v}</td>"
                    "</tr>" for k, v in rows)
    return f"<b>{title}</b><table>{cells}</table>"


class QueueExplorer(w.VBox):
    """The queue explorer's box: ``.inputs`` (widgets by name), ``.label`` (HTML), ``.state``. Its plain-text form
    is one line, so a notebook rendered without widgets shows the printed summary and this line."""

    def __repr__(self):
        return "queue explorer (widgets: run the notebook live to move the request rate)"


def _rate_options(pairs) -> list[tuple[str, float]]:
    return [(f"{rate:g}/s ({load:.0%})", rate) for load, rate in pairs]


def build_queue_explorer(model="llama-3-8b", hw="h100", input_tokens=1000, output_tokens=200, load=0.9, gpus=1,
                         requests=QUEUE_REQUESTS) -> QueueExplorer:
    """The queue explorer's widgets, wired up, without printing or displaying anything.

    ``load`` is the starting rate as a share of the capacity, one of :data:`QUEUE_LOADS`; a starting value the
    widgets cannot show raises at once, naming the choices.
    """
    M, acc = models.get(model), hardware.get(hw)
    for value, options, name in ((input_tokens, INPUT_TOKENS, "input_tokens"),
                                 (output_tokens, OUTPUT_TOKENS, "output_tokens"), (load, QUEUE_LOADS, "load"),
                                 (gpus, QUEUE_GPUS, "gpus")):
        _choice(value, options, name)
    pairs = queue_rates(M.key, acc.key, input_tokens, output_tokens, gpus)
    rate = dict(pairs)[load]
    state_of = cached(queue_state)
    labels = {"description_width": "100px"}
    wide = w.Layout(width="460px")
    inputs = {
        **_server_inputs(w, M, acc, gpus, QUEUE_GPUS, labels),
        "input_tokens": w.SelectionSlider(options=[(f"{n:,}", n) for n in INPUT_TOKENS], value=input_tokens,
                                          description="prompt tokens", continuous_update=False, style=labels,
                                          layout=wide),
        "output_tokens": w.SelectionSlider(options=[(f"{n:,}", n) for n in OUTPUT_TOKENS], value=output_tokens,
                                           description="output tokens", continuous_update=False, style=labels,
                                           layout=wide),
        "rate": w.SelectionSlider(options=_rate_options(pairs), value=rate, description="request rate",
                                  continuous_update=False, style=labels, layout=wide),
    }
    inputs["rate"].add_class("roofkit-rate")
    state = state_of(M.key, acc.key, input_tokens, output_tokens, rate, gpus, requests)
    label = w.HTML(value=_queue_html(state))
    label.add_class("roofkit-queue")
    explorer = QueueExplorer([w.HBox([inputs["model"], inputs["hw"], inputs["gpus"]]), inputs["input_tokens"],
                              inputs["output_tokens"], inputs["rate"], label])
    explorer.add_class("roofkit-queue-explorer")
    explorer.inputs, explorer.label, explorer.state = inputs, label, state
    moving = {"now": False}  # the rate slider's options being replaced: one update, not one per event

    def show(rate_value):
        values = {name: inputs[name].value for name in ("model", "hw", "input_tokens", "output_tokens", "gpus")}
        explorer.state = state_of(values["model"], values["hw"], values["input_tokens"], values["output_tokens"],
                                  rate_value, values["gpus"], requests)
        label.value = _queue_html(explorer.state)

    def on_rate(_change=None):
        if not moving["now"]:
            show(inputs["rate"].value)

    def on_server(_change=None):
        index = inputs["rate"].index
        try:
            pairs = queue_rates(inputs["model"].value, inputs["hw"].value, inputs["input_tokens"].value,
                                inputs["output_tokens"].value, inputs["gpus"].value)
        except RoofkitError as error:  # the weights do not fit, say: say so, keep the widgets alive
            explorer.state = state_of(inputs["model"].value, inputs["hw"].value, inputs["input_tokens"].value,
                                      inputs["output_tokens"].value, inputs["rate"].value, inputs["gpus"].value,
                                      requests)
            label.value = _queue_html(explorer.state) if explorer.state["error"] else \
                f"<b style='color:{style.HTML['error']}'>{html.escape(str(error))}</b>"
            return
        moving["now"] = True
        try:
            inputs["rate"].options = _rate_options(pairs)
            inputs["rate"].index = index  # the same share of the new capacity
        finally:
            moving["now"] = False
        show(inputs["rate"].value)

    inputs["rate"].observe(on_rate, names="value")
    for name in ("model", "hw", "gpus", "input_tokens", "output_tokens"):
        inputs[name].observe(on_server, names="value")
    return explorer


def queue_explorer(model="llama-3-8b", hw="h100", input_tokens=1000, output_tokens=200, load=0.9, gpus=1,
                   requests=QUEUE_REQUESTS) -> QueueExplorer:
    """Widgets that send a stream of requests to ``model`` on ``gpus`` x ``hw``; prints the starting state as one
    line of text. Returns the widget (see :class:`QueueExplorer`); end a notebook cell with it."""
    explorer = build_queue_explorer(model, hw, input_tokens, output_tokens, load, gpus, requests)
    print(explorer.state["summary"])
    return explorer
