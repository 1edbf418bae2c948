"""The number-format explorer: its rows are real casts, its text is deterministic, its widget
updates when the value changes and explains a value it cannot read instead of raising."""

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofkit.errors import InvalidValue, RoofkitError, UnknownPrecision
from roofkit.course.explore import format_explorer
from roofkit.course.explore.formats import DEFAULT_FORMATS, format_rows, format_table, parse_value


def by_label(rows):
    return {r["label"]: r for r in rows}


# --- parse_value --------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("0.1", 0.1), (" 1e9 ", 1e9), ("-6.5", -6.5), ("2**-7", 2.0**-7), ("2^-7", 2.0**-7),
    ("1/3", 1 / 3), ("(1 + 2**-7) * 2", 2 + 2.0**-6), ("65504", 65504.0), (448, 448.0), (np.float32(0.5), 0.5),
])
def test_parse_value_reads_numbers_and_small_expressions(text, expected):
    assert parse_value(text) == expected


def test_parse_value_reads_inf_and_nan():
    assert parse_value("inf") == math.inf and parse_value("-inf") == -math.inf
    assert math.isnan(parse_value("nan"))


@pytest.mark.parametrize("bad", ["", "abc", "1e", "__import__('os')", "2**99999", "1/0", "[1, 2]", None, True, "0.1.2"])
def test_parse_value_refuses_anything_else_with_a_roofkit_error(bad):
    with pytest.raises(InvalidValue, match="number"):
        parse_value(bad)


# --- rows against the real dtypes -----------------------------------------------------------------

def test_rows_of_one_tenth_are_the_real_casts():
    rows = by_label(format_rows(0.1))
    assert rows["FP32"]["value"] == float(np.float32(0.1))
    assert rows["FP16"]["value"] == float(np.float16(0.1))
    assert rows["BF16"]["value"] == float(ml_dtypes.bfloat16(0.1)) == 0.10009765625
    assert rows["FP8 E4M3"]["value"] == float(ml_dtypes.float8_e4m3fn(0.1))
    assert rows["FP8 E5M2"]["value"] == float(ml_dtypes.float8_e5m2(0.1))
    # TF32 keeps FP16's 10 mantissa bits with FP32's 8 exponent bits: same value as FP16 here
    assert rows["TF32"]["value"] == rows["FP16"]["value"]
    assert len(rows["TF32"]["exponent"]) == 8 and len(rows["TF32"]["mantissa"]) == 10
    # BF16 is FP32 with the low 16 bits rounded away: same sign and exponent fields
    assert rows["BF16"]["exponent"] == rows["FP32"]["exponent"]
    for label, row in rows.items():
        if row["value"]:
            assert math.isclose(row["relative_error"], abs(row["value"] - 0.1) / 0.1, rel_tol=1e-12), label


def test_fields_put_back_together_give_the_stored_value():
    for row in format_rows(-6.5):
        if row["label"] == "INT8":
            continue
        fmt = row["format"]
        from roofkit.perf import precision

        f = precision.get(fmt)
        e, m = int(row["exponent"], 2), int(row["mantissa"], 2)
        value = (-1) ** int(row["sign"]) * (1 + m / 2**f.mantissa_bits) * 2.0 ** (e - f.bias)
        assert value == row["value"], fmt


def test_overflow_of_1e9_is_nan_in_e4m3_and_inf_in_e5m2():
    rows = by_label(format_rows(1e9))
    assert math.isnan(rows["FP8 E4M3"]["value"]) and "NaN" in rows["FP8 E4M3"]["note"]
    assert rows["FP8 E5M2"]["value"] == math.inf and "inf" in rows["FP8 E5M2"]["note"]
    assert rows["FP16"]["value"] == math.inf
    assert math.isnan(float(np.float32(1e9).astype(ml_dtypes.float8_e4m3fn)))  # the oracle agrees
    assert rows["FP4 E2M1"]["value"] == 6.0 and "saturated" in rows["FP4 E2M1"]["note"]
    assert rows["INT8"]["value"] == 127.0


def test_underflow_subnormals_and_nan_are_named():
    rows = by_label(format_rows(1e-6))
    assert rows["FP16"]["note"].startswith("subnormal")
    assert rows["FP8 E4M3"]["value"] == 0 and rows["FP8 E4M3"]["note"].startswith("underflow")
    assert rows["BF16"]["note"] == ""  # BF16 has FP32's exponent range
    nan = by_label(format_rows("nan"))
    assert nan["INT8"]["value"] is None and "no NaN" in nan["INT8"]["note"]


def test_default_formats_and_a_chosen_subset():
    assert [r["format"] for r in format_rows(1.0)] == list(DEFAULT_FORMATS)
    assert "float64" not in DEFAULT_FORMATS
    assert [r["label"] for r in format_rows(1.0, ["bf16", "e4m3"])] == ["BF16", "FP8 E4M3"]
    with pytest.raises(UnknownPrecision, match="Unknown precision 'fp7'"):
        format_rows(1.0, ["fp7"])


@settings(max_examples=60, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True, width=64))
def test_any_float_gives_a_row_per_format_and_never_raises(x):
    rows = format_rows(x)
    assert len(rows) == len(DEFAULT_FORMATS)
    assert format_table(x).count("\n") == len(rows) + 1


# --- text -------------------------------------------------------------------------------------------

def test_table_is_plain_deterministic_text():
    text = format_table(0.1)
    assert text == format_table("0.1")
    lines = text.splitlines()
    assert lines[0] == "0.1 stored in each format"
    assert lines[1].split()[:4] == ["format", "sign", "exponent", "mantissa"]
    assert any(line.split()[:2] == ["BF16", "0"] and "0.1000976562" in line for line in lines)
    assert "<" not in text and "0x" not in text


# --- the widget ------------------------------------------------------------------------------------

def test_explorer_prints_the_starting_table_and_shows_it_in_html(capsys):
    explorer = format_explorer(0.1)
    assert capsys.readouterr().out.strip() == format_table(0.1)
    assert "roofkit-formats" in explorer.table._dom_classes
    assert "0.1000976562" in explorer.table.value and "<table>" in explorer.table.value
    assert explorer.text.value == "0.1"
    assert explorer.message.value == ""
    assert repr(explorer).startswith("format explorer")


def test_setting_the_text_updates_the_table(capsys):
    explorer = format_explorer(0.1, formats=["e4m3", "e5m2"])
    capsys.readouterr()
    explorer.text.value = "1e9"
    assert ">nan<" in explorer.table.value and ">inf<" in explorer.table.value
    assert "BF16" not in explorer.table.value  # only the formats asked for
    explorer.text.value = "2**-7"
    assert "0.0078125" in explorer.table.value
    assert capsys.readouterr().out == ""  # updates go to the widget, not to stdout


def test_a_bad_value_shows_a_message_and_keeps_the_last_table(capsys):
    explorer = format_explorer(0.1)
    before = explorer.table.value
    explorer.text.value = "one tenth"  # must not raise
    assert "cannot read" in explorer.message.value and "one tenth" in explorer.message.value
    assert explorer.table.value == before
    explorer.text.value = "0.5"
    assert explorer.message.value == "" and "0.5" in explorer.table.value


def test_bad_arguments_raise_at_once(capsys):
    with pytest.raises(InvalidValue, match="cannot read 'x'"):
        format_explorer("x")
    with pytest.raises(UnknownPrecision):
        format_explorer(0.1, formats=["float7"])
    assert issubclass(InvalidValue, RoofkitError)
