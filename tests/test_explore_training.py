"""The training-cost calculator: seed 000's estimate, callbacks that recompute, bad input that never raises."""

import html
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofkit.course.explore import training_calculator
from roofkit.course.explore.training import summary

# Seed 000's worked estimate: 70B params, 15T tokens, H100 BF16, 40% MFU, 8,192 GPUs, $2/GPU-hour
# -> 6.3e24 FLOPs, about 4.4e6 GPU-hours, about 540 hours = 22.5 days, about $8.8M.
SEED_000 = dict(params="70B", tokens="15T", hw="h100", dtype="bf16", mfu=0.4, gpus=8192, usd_per_gpu_hour=2.0)


def _plain(widget) -> str:
    """The result widget's text, tags removed."""
    return html.unescape(re.sub(r"<[^>]+>", " ", widget.result.value))


def _number(text: str, before: str) -> float:
    """The number written right after ``before`` ('GPU-hours  4.42 million' -> 4.42e6)."""
    match = re.search(re.escape(before) + r"\s+\$?([\d.,]+)(e\d+)?\s*(thousand|million|billion)?", text)
    assert match, f"{before!r} not found in:\n{text}"
    value = float(match[1].replace(",", "") + (match[2] or ""))
    return value * {"thousand": 1e3, "million": 1e6, "billion": 1e9, None: 1}[match[3]]


def test_starting_values_print_seed_000s_estimate(capsys):
    calculator = training_calculator(**SEED_000)
    printed = capsys.readouterr().out
    assert printed.strip() == summary(**SEED_000)
    assert _number(printed, "C = 6ND") == pytest.approx(6.3e24, rel=1e-3)
    assert _number(printed, "GPU-hours") == pytest.approx(4.4e6, rel=0.01)
    assert "540 hours = 22.5 days" in printed
    assert _number(printed, "(an assumed price)") == pytest.approx(8.8e6, rel=0.01)
    assert "plausible" in printed
    # the widget shows the same numbers as the text
    assert _number(_plain(calculator), "GPU-hours") == _number(printed, "GPU-hours")


def test_widget_is_tagged_and_exposes_its_parts():
    calculator = training_calculator()
    assert "roofkit-training" in calculator._dom_classes
    assert set(calculator.inputs) == set(SEED_000)
    assert calculator.inputs["params"].value == "70B" and calculator.inputs["tokens"].value == "15T"
    assert calculator.inputs["hw"].value == "h100-sxm" and calculator.inputs["dtype"].value == "bf16"
    assert "run the notebook live" in repr(calculator)  # short text form, not the widget tree


def test_callbacks_recompute_the_result():
    calculator = training_calculator(**SEED_000)
    hours = _number(_plain(calculator), "GPU-hours")

    calculator.inputs["params"].value = "7B"  # ten times smaller model: a tenth of the GPU-hours
    assert _number(_plain(calculator), "GPU-hours") == pytest.approx(hours / 10, rel=0.01)
    assert "7B parameters" in _plain(calculator)

    calculator.inputs["dtype"].value = "fp8"  # twice the dense peak: half the GPU-hours
    assert _number(_plain(calculator), "GPU-hours") == pytest.approx(hours / 20, rel=0.01)

    calculator.inputs["gpus"].value = "1,024"
    calculator.inputs["usd_per_gpu_hour"].value = "$3"
    text = _plain(calculator)
    assert "1,024 GPUs" in text and "$3.00 per GPU-hour" in text
    assert _number(text, "(an assumed price)") == pytest.approx(3 * hours / 20, rel=0.01)

    calculator.inputs["mfu"].value = 0.75  # above 60%: the note warns
    assert "above 60%" in _plain(calculator)
    assert calculator.state["mfu"] == 0.75

    calculator.inputs["hw"].value = "b200"
    assert "B200" in _plain(calculator)


def test_the_widget_agrees_with_the_text_after_changes():
    calculator = training_calculator()
    new = dict(params="405B", tokens="15.6T", hw="h100-sxm", dtype="bf16", mfu=0.38, gpus="16384", usd_per_gpu_hour="2.5")
    for name, value in new.items():
        calculator.inputs[name].value = value
    text = summary(**new)
    for line in text.splitlines()[1:-1]:
        label, value = re.split(r"\s{2,}", line.strip())
        assert value in _plain(calculator), (label, value)


@pytest.mark.parametrize("name, value, message", [
    ("params", "70X", r"params must be a number such as .*got '70X'"),
    ("tokens", "-15T", r"tokens must be a finite number greater than 0"),
    ("gpus", "0", r"gpus must be a finite number greater than 0; got 0"),
    ("usd_per_gpu_hour", "two dollars", r"usd_per_gpu_hour must be a number of dollars"),
    ("usd_per_gpu_hour", "-2", r"usd_per_gpu_hour must be a finite number greater than 0"),
])
def test_bad_input_shows_roofkits_message_and_never_raises(name, value, message):
    calculator = training_calculator()
    calculator.inputs[name].value = value
    assert re.search("cannot compute: " + message, _plain(calculator))
    assert "GPU-hours" not in _plain(calculator)
    calculator.inputs[name].value = str(SEED_000[name])  # and it recovers
    assert _number(_plain(calculator), "GPU-hours") == pytest.approx(4.42e6, rel=0.01)


def test_a_precision_the_chip_lacks_is_reported():
    calculator = training_calculator()
    calculator.inputs["hw"].value = "t4"
    assert "NVIDIA T4 has no bf16 peak in the catalog" in _plain(calculator)


@pytest.mark.parametrize("arguments, message", [
    (dict(params="70X"), "params must be a number"),
    (dict(hw="h1000"), "Unknown accelerator 'h1000'. Did you mean"),
    (dict(dtype="bf17"), "Unknown precision 'bf17'"),
    (dict(mfu=1.5), r"mfu must be a fraction in \(0, 1\]"),
    (dict(mfu=0), r"mfu must be a fraction in \(0, 1\]"),
    (dict(hw=None), "hw is missing"),
    (dict(gpus=None), "gpus is missing"),
])
def test_bad_starting_values_print_the_message(capsys, arguments, message):
    calculator = training_calculator(**{**SEED_000, **arguments})
    printed = capsys.readouterr().out
    assert re.search("cannot compute: " + message, printed)
    assert re.search("cannot compute: " + message, _plain(calculator))


def test_sizes_are_read_like_people_write_them():
    assert summary(params=70e9, tokens=15e12) == summary(params="70B", tokens="15,000,000,000,000")
    assert "on 8,000 GPUs" in summary(gpus="8k")


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(["params", "tokens", "gpus", "usd_per_gpu_hour"]),
       value=st.one_of(st.text(max_size=12), st.from_regex(r"-?[0-9.,e]{1,8}[kKmMbBtTpP]?", fullmatch=True)))
def test_no_text_input_makes_it_raise(name, value):
    text = summary(**{**SEED_000, name: value})
    assert text.startswith("Training cost of")
    assert ("cannot compute: " in text) != ("GPU-hours" in text)
