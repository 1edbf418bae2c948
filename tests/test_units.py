"""Reading sizes, quantities and precision names; refusing nonsense with a clear message."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from roofkit import dtypes, units
from roofkit.errors import InvalidValue, RoofkitError, UnitMismatch, UnknownPrecision


@pytest.mark.parametrize(
    "text, expected",
    [("4096", 4096), ("4e9", 4e9), ("70B", 70e9), ("15T", 15e12), ("1,024", 1024), ("2.5k", 2500),
     ("8 G", 8e9), ("1P", 1e15), ("7b", 7e9), (" 3M ", 3e6), (128, 128), (0.5, 0.5)],
)
def test_size_reads_what_people_write(text, expected):
    assert units.size(text) == pytest.approx(expected)


@pytest.mark.parametrize("bad", ["", "abc", "70X", "1e", "--5", "-5", "0", "nan", "inf", None, True, [1], -1, 0, math.nan])
def test_size_refuses_nonsense_naming_the_argument(bad):
    with pytest.raises(InvalidValue, match=r"^tokens must be"):
        units.size(bad, "tokens")


def test_positive_checks_arrays_element_by_element():
    arr = np.array([1.0, 2.0, 3.0])
    assert units.positive(arr, "n") is arr
    with pytest.raises(InvalidValue, match=r"n must be a finite number greater than 0; got -1\.0 among the values"):
        units.positive(np.array([1.0, -1.0]), "n")
    with pytest.raises(InvalidValue, match="array of dtype"):
        units.positive(np.array(["a"]), "n")


def test_fraction_is_half_open():
    assert units.fraction(1.0) == 1.0
    for bad in (0, 1.0000001, -0.2, math.nan):
        with pytest.raises(InvalidValue, match=r"\(0, 1\]"):
            units.fraction(bad, "mfu")


@pytest.mark.parametrize(
    "text, unit, expected",
    [("3.35 TB/s", "byte/s", 3.35e12), ("3350 GB/s", "byte/s", 3.35e12), ("1 TiB/s", "byte/s", 2**40),
     ("989 TFLOPS", "FLOP/s", 989e12), ("296 FLOP/byte", "FLOP/byte", 296), ("2.5 ms", "s", 2.5e-3), ("42", "s", 42)],
)
def test_quantity_converts_units(text, unit, expected):
    assert units.quantity(text, unit) == pytest.approx(expected)


def test_quantity_refuses_the_wrong_dimension():
    with pytest.raises(UnitMismatch, match=r"'3.35 TFLOPS' is in .*cannot be converted to byte/s"):
        units.quantity("3.35 TFLOPS", "byte/s", "bandwidth")
    with pytest.raises(InvalidValue, match="cannot read 'fast' as a number"):
        units.quantity("fast", "byte/s")


@pytest.mark.parametrize(
    "name, canonical, nbytes",
    [("bf16", "bf16", 2), ("BFloat16", "bf16", 2), ("half", "fp16", 2), ("float8_e4m3fn", "fp8", 1), ("E5M2", "fp8", 1),
     ("fp-32", "fp32", 4), ("tf32", "tf32", 4), ("fp4", "fp4", 0.5), ("int8", "int8", 1), ("double", "fp64", 8)],
)
def test_precision_names(name, canonical, nbytes):
    assert dtypes.canonical(name) == canonical
    assert dtypes.bytes_per_element(name) == nbytes


def test_unknown_precision_suggests_the_closest():
    with pytest.raises(UnknownPrecision, match=r"Unknown precision 'bf61'\. Did you mean 'bf16'.*Expected one of: bf16, fp16"):
        dtypes.canonical("bf61")
    assert isinstance(UnknownPrecision("x", ["a"]), LookupError)


@given(st.one_of(st.text(max_size=12), st.floats(), st.integers(), st.none(), st.booleans()))
def test_parsers_raise_only_roofkit_errors(value):
    for parse in (units.size, units.positive, units.fraction, dtypes.bytes_per_element):
        try:
            parse(value)
        except RoofkitError:
            pass


def test_quantity_refuses_text_that_would_evaluate_for_ever():
    import time

    start = time.perf_counter()
    for hostile in ("10**10**10 byte/s", "2^2^2^2^2 B/s", "__import__('os') B/s", "9" * 250):
        with pytest.raises(InvalidValue, match="cannot read|no number|characters long"):
            units.quantity(hostile, "byte/s")
    assert time.perf_counter() - start < 1
    assert units.quantity("2**40 byte/s", "byte/s") == 2**40


def test_whole_takes_whole_numbers_and_names_the_bad_value():
    whole = units.whole
    assert whole(4, "gpus") == 4 and whole(4.0, "gpus") == 4 and whole(np.int64(8), "gpus") == 8
    assert type(whole(4.0, "gpus")) is int
    assert whole(0, "tokens", low=0) == 0
    for bad in (0, -3, 1.5, True, float("nan"), float("inf"), "4", None, 10**400):
        with pytest.raises(InvalidValue, match=r"gpus must be a whole number of at least 1; got"):
            whole(bad, "gpus")
    with pytest.raises(InvalidValue, match=r"layers must be a whole number of at least 1; got 4\.0"):
        whole(4.0, "layers", integer_only=True)
    with pytest.raises(InvalidValue, match=r"of at least 0; got -1"):
        whole(-1, "tokens", low=0)
