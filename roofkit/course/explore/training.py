"""The training-cost calculator: model size, tokens, accelerator, MFU, GPUs, price -> what the run costs.

    training_calculator(params="70B", tokens="15T", hw="h100", dtype="bf16",
                        mfu=0.4, gpus=8192, usd_per_gpu_hour=2.0)

shows text boxes for N and D ("70B", "15T"), dropdowns for the accelerator and
the precision, an MFU slider, the GPU count and the price per GPU-hour, and
under them the result, recomputed on every change by
:func:`roofkit.training.estimate`::

    C = 6ND,   GPU-hours = C / (MFU · P · 3600),   wall clock = GPU-hours / G,   cost = GPU-hours · price

with P the catalog's dense peak for the chosen precision. A note judges the
assumed MFU (:func:`roofkit.training.mfu_verdict`). Input roofkit cannot use
(a size such as "70X", a T4 in BF16, a negative price) shows roofkit's error
message in place of the result; the calculator never raises.

It also prints the result for its starting values as text, so a rendered
notebook, a terminal or a test sees the same numbers as the widgets.
:func:`summary` gives that text without any widget.
"""

from __future__ import annotations

import html
import math
import numbers

import ipywidgets as w

from ... import dtypes
from ...catalogs import hardware
from ...perf import training
from ...errors import InvalidValue, RoofkitError
from ...plots import style

__all__ = ["training_calculator", "summary"]

# what each input is called in the result and on its widget
_LABELS = {
    "params": "N (params)", "tokens": "D (tokens)", "hw": "accelerator", "dtype": "precision",
    "mfu": "MFU", "gpus": "GPUs", "usd_per_gpu_hour": "$/GPU-hour",
}


def _price(value):
    """A price per GPU-hour from a number or a text box ('2', '2.50', '$2')."""
    if isinstance(value, str):
        text = value.strip().removeprefix("$").replace(",", "")
        try:
            return float(text)
        except ValueError:
            raise InvalidValue(
                f"usd_per_gpu_hour must be a number of dollars such as 2 or 2.50; got {value!r}."
            ) from None
    return value


def _compute(state: dict):
    """(TrainingEstimate, None) for the inputs in ``state``, or (None, roofkit's error message)."""
    try:
        e = training.estimate(
            state["params"], state["tokens"], hw=state["hw"], dtype=state["dtype"], mfu=state["mfu"],
            gpus=state["gpus"], usd_per_gpu_hour=_price(state["usd_per_gpu_hour"]),
        )
        # estimate() leaves out what needs an input that is None; the calculator needs them all
        for part, name, example in (("gpu_hours", "hw", "'h100'"), ("wall_clock_hours", "gpus", "8192"),
                                    ("cost_usd", "usd_per_gpu_hour", "2.0")):
            if getattr(e, part) is None:
                raise InvalidValue(f"{name} is missing: give a value such as {example}.")
        return e, None
    except RoofkitError as error:
        return None, str(error)


def _sci(x: float) -> str:
    """6.3e+24 -> '6.3e24'."""
    mantissa, _, exponent = f"{x:.3g}".partition("e")
    return f"{mantissa}e{int(exponent)}" if exponent else mantissa


def _big(x: float) -> str:
    """4423660 -> '4.42 million', 540 -> '540'."""
    for scale, word in ((1e12, "trillion"), (1e9, "billion"), (1e6, "million"), (1e3, "thousand")):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {word}"
    return f"{x:.3g}"


def _rows(e) -> list[tuple[str, str]]:
    """The result as (label, value) rows, shared by the text and the HTML."""
    gpus = f"{e.gpus:,.0f}" if float(e.gpus).is_integer() else f"{e.gpus:,.1f}"
    return [
        ("training compute C = 6ND", f"{_sci(e.flops)} FLOP"),
        (f"dense {e.precision.upper()} peak of one {e.accelerator}", f"{e.peak_flops / 1e12:.4g} TFLOP/s"),
        (f"useful FLOP/s per GPU at {e.mfu:.0%} MFU", f"{e.mfu * e.peak_flops / 1e12:.4g} TFLOP/s"),
        ("GPU-hours", _big(e.gpu_hours)),
        (f"wall clock on {gpus} GPUs", f"{e.wall_clock_hours:,.0f} hours = {e.wall_clock_days:,.1f} days"),
        (f"cost at ${e.usd_per_gpu_hour:,.2f} per GPU-hour (an assumed price)", f"${_big(e.cost_usd)}"),
    ]


def summary(params="70B", tokens="15T", hw="h100", dtype="bf16", mfu=0.4, gpus=8192, usd_per_gpu_hour=2.0) -> str:
    """The calculator's result as plain text (or roofkit's error message); never raises.

    >>> print(summary("70B", "15T", "h100", "bf16", 0.4, 8192, 2.0).splitlines()[0])
    Training cost of 70B parameters on 15T tokens
    """
    state = dict(params=params, tokens=tokens, hw=hw, dtype=dtype, mfu=mfu, gpus=gpus,
                 usd_per_gpu_hour=usd_per_gpu_hour)
    return _text(state)


def _count(x: float) -> str:
    """7e10 -> '70B', 1.5e13 -> '15T': the way people write model and data sizes."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if x >= scale:
            return f"{x / scale:.4g}{suffix}"
    return f"{x:.4g}"


def _given(value) -> str:
    """An input as it was given, numbers written the short way."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return _count(value)
    return str(value)


def _title(state: dict, e=None) -> str:
    if e is None:  # the inputs could not all be read: show them as given
        return f"Training cost of {_given(state['params'])} parameters on {_given(state['tokens'])} tokens"
    return f"Training cost of {_count(e.params)} parameters on {_count(e.tokens)} tokens"


def _note(e) -> str:
    return "MFU note: " + training.mfu_verdict(e.mfu).message


def _text(state: dict) -> str:
    e, error = _compute(state)
    if error:
        return f"{_title(state)}\ncannot compute: {error}"
    rows = _rows(e)
    width = max(len(label) for label, _ in rows)
    lines = [_title(state, e)] + [f"  {label:<{width}}  {value}" for label, value in rows] + [_note(e)]
    return "\n".join(lines)


def _html(state: dict) -> str:
    e, error = _compute(state)
    title = f"<b>{html.escape(_title(state, e))}</b>"
    if error:
        return f"{title}<div style='color:{style.HTML['error']}'>cannot compute: {html.escape(error)}</div>"
    cells = "".join(
        f"<tr><td style='padding-right:1em'>{html.escape(label)}</td><td><b>{html.escape(value)}</b></td></tr>"
        for label, value in _rows(e)
    )
    colour = {"ok": style.HTML["muted"], "suspicious": style.HTML["warning"],
              "impossible": style.HTML["error"]}[training.mfu_verdict(e.mfu).level]
    return f"{title}<table>{cells}</table><div style='color:{colour}'>{html.escape(_note(e))}</div>"


def _options(choices: list[tuple[str, str]], value: str, resolve) -> tuple[list[tuple[str, str]], str]:
    """Dropdown options and the value to select: ``value`` resolved, or kept as an extra option."""
    try:
        return choices, resolve(value)
    except RoofkitError:
        return choices + [(str(value), value)], value


def training_calculator(params="70B", tokens="15T", hw="h100", dtype="bf16", mfu=0.4, gpus=8192,
                        usd_per_gpu_hour=2.0):
    """Widgets that cost a training run, and the result for the starting values printed as text.

    Returns the widget (an ipywidgets VBox with the CSS class ``roofkit-training``):
    ``.inputs`` maps each argument's name to its widget, ``.result`` is the HTML
    result, ``.state`` holds the values in use. Setting a widget's value, in
    the notebook or in code, recomputes the result.
    """
    state = dict(params=params, tokens=tokens, hw=hw, dtype=dtype, mfu=mfu, gpus=gpus,
                 usd_per_gpu_hour=usd_per_gpu_hour)
    print(_text(state))

    accelerators, hw_value = _options([(a.name, a.key) for a in hardware.catalog()], hw, lambda v: hardware.get(v).key)
    precisions, dtype_value = _options([(p.upper(), p) for p in dtypes.PRECISIONS], dtype, dtypes.canonical)
    labels = {"description_width": "90px"}
    try:
        slider_value = min(max(float(mfu), 0.01), 1.0)
    except (TypeError, ValueError):
        slider_value = 0.4
    inputs = {
        "params": w.Text(value=str(params), description=_LABELS["params"], placeholder="70B", style=labels),
        "tokens": w.Text(value=str(tokens), description=_LABELS["tokens"], placeholder="15T", style=labels),
        "hw": w.Dropdown(options=accelerators, value=hw_value, description=_LABELS["hw"], style=labels),
        "dtype": w.Dropdown(options=precisions, value=dtype_value, description=_LABELS["dtype"], style=labels),
        "mfu": w.FloatSlider(value=slider_value, min=0.01, max=1.0, step=0.01, readout_format=".0%",
                             description=_LABELS["mfu"], continuous_update=True, style=labels),
        "gpus": w.Text(value=str(gpus), description=_LABELS["gpus"], placeholder="8192", style=labels),
        "usd_per_gpu_hour": w.Text(value=str(usd_per_gpu_hour), description=_LABELS["usd_per_gpu_hour"],
                                   placeholder="2.0", style=labels),
    }
    result = w.HTML(value=_html(state))

    def update(change, name):
        state[name] = change["new"]
        result.value = _html(state)

    for name, widget in inputs.items():
        widget.observe(lambda change, name=name: update(change, name), names="value")

    calculator = TrainingCalculator([
        w.HBox([inputs["params"], inputs["tokens"]]),
        w.HBox([inputs["hw"], inputs["dtype"]]),
        inputs["mfu"],
        w.HBox([inputs["gpus"], inputs["usd_per_gpu_hour"]]),
        result,
    ])
    calculator.add_class("roofkit-training")
    calculator.inputs, calculator.result, calculator.state = inputs, result, state
    return calculator


class TrainingCalculator(w.VBox):
    """The calculator's box. Its plain-text form is one line, not the widget tree, so a
    notebook rendered without widgets shows the printed result and this line."""

    def __repr__(self):
        return "training calculator (widgets: run the notebook live to use them)"
