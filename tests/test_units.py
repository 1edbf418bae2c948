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


# --- the answer reader: what people write (roofkit.answers; docs/answers.md lists it with examples) -----------

from roofkit.course import answers  # noqa: E402


@pytest.mark.parametrize(
    "text, unit, expected",
    [("1.12 trillion", "byte", 1.12e12), ("1120 billion", "byte", 1.12e12), ("1.12T", "byte", 1.12e12),
     ("234.9 million", "byte", 234.9e6), ("2.68 billion", "byte", 2.68e9), ("240 billion", "FLOP", 2.4e11),
     ("240G", "FLOP", 2.4e11), ("33.5 million", "FLOP", 33.5e6), ("1.4k", "1/s", 1400), ("8 Ki", "dimensionless", 8192),
     ("282 TF/s", "TFLOP/s", 282), ("282 tflops", "TFLOP/s", 282), ("282 teraflops", "TFLOP/s", 282),
     ("282 TFLOPS", "FLOP/s", 282e12), ("0.282 PFLOP/s", "TFLOP/s", 282), ("12 milliseconds", "s", 0.012),
     ("3 megabytes", "byte", 3e6), ("2 gibibytes", "byte", 2 * 2**30), ("3300 tok/s", "1/s", 3300),
     ("3300 Hz", "1/s", 3300), ("1.5 kHz", "1/s", 1500), ("285 micro-batches", "dimensionless", 285),
     ("12 H100s", "dimensionless", 12), ("8 x MI300X", "dimensionless", 8), ("9 steps", "dimensionless", 9),
     ("$3.89M", "dimensionless", 3.89e6), ("$3,888,889", "dimensionless", 3888889), ("3.89 million USD", "dimensionless", 3.89e6),
     ("1.2e11 MACs", "dimensionless", 1.2e11), ("120 GMAC", "dimensionless", 1.2e11), ("1.2e11 MACs", "FLOP", 2.4e11),
     ("0.073 years", "day", 0.073 * 365.25), ("2 weeks", "day", 14), ("85.5%", "percent", 85.5), ("85.5%", "dimensionless", 0.855),
     ("6.55e4", "dimensionless", 65500), ("65,500", "dimensionless", 65500), ("~295", "FLOP/byte", 295),
     ("about 1.3", "dimensionless", 1.3), ("5 ms.", "s", 0.005), ("16.3 Tb/s", "byte/s", 16.3e12 / 8)],
)
def test_the_reader_takes_what_people_write(text, unit, expected):
    assert answers.number(text, unit) == pytest.approx(expected, rel=1e-12)


def test_a_python_number_is_read_as_the_text_that_types_it():
    for number, text in ((0.17, "0.17"), (2000.0, "2000"), (1e22, "1e+22"), (65504, "65504"), (1.12e12, "1.12e12")):
        a, b = answers.read(number, "byte"), answers.read(text, "byte")
        assert (a.value, a.digits, a.lead) == (b.value, b.digits, pytest.approx(b.lead)), (number, text)


@pytest.mark.parametrize("text, unit, message", [
    ("1.92 m", "s", "'m' alone is ambiguous for a time: write ms for milliseconds or min for minutes"),
    ("16.7%", "s", "'16.7%' is a percentage, but the question asks for s"),
    ("12 GPUs", "FLOP", "'12 GPUs' is a count of GPUs, but the question asks for FLOP"),
    ("$5", "FLOP", "is an amount in USD, but the question asks for FLOP"),
    ("3 TB", "byte/s", "'/s' is missing"),
    ("3 TB/s", "byte", "drop the '/s'"),
    ("3 foo", "byte", "cannot read 'foo' as a unit"),
])
def test_the_reader_says_what_it_could_not_take(text, unit, message):
    with pytest.raises(RoofkitError) as caught:
        answers.read(text, unit)
    assert message in str(caught.value)
    assert "drop the '/s'" not in str(caught.value) or "/s" in text  # never for an answer without a /s


def test_the_reader_notes_how_it_read_a_spelling():
    assert answers.read("6.87e14 FLOPs", "FLOP/s").notes  # a count's spelling where a rate is asked
    assert answers.read("2.4e11 FLOPS", "FLOP").notes  # a rate's spelling where a count is asked
    assert not answers.read("687 TFLOPS", "FLOP/s").notes and not answers.read("282 tflops", "TFLOP/s").notes
    assert answers.read("8K", "dimensionless").counts == (("K", 1e3),)


@pytest.mark.parametrize("text, shown, other", [
    ("2n/3b", "(2*n/3)*b", "2*n/(3*b)"), ("(n+1)/2b", "((n+1)/2)*b", "(n+1)/(2*b)"), ("n^2/3 b", "(n**2/3)*b", "n**2/(3*b)"),
])
def test_a_formula_with_a_product_after_a_division_says_how_it_was_read(text, shown, other):
    said = answers.formula_reading(text, ("n", "b"))
    assert f"was read as {shown}" in said and f"If you meant {other}" in said
    assert answers.formula_reading("2n/(3b)", ("n", "b")) is None and answers.formula_reading("2*n/3", ("n", "b")) is None


@pytest.mark.parametrize("text, choices, synonyms, expected", [
    ("> LLC", ("L2", "LLC", ">LLC", "DRAM"), None, ">LLC"), ("the GEMMs", ("gemm", "attention"), None, "gemm"),
    ("element-wise", ("gemm", "elementwise"), None, "elementwise"), ("Memory-bound", ("memory", "compute"), None, "memory"),
    ("bandwidth bound", ("memory", "compute"), None, "memory"), ("kernel C", ("A", "B", "C"), None, "C"),
    ("same FLOPs, fewer bytes", ("same FLOPs but fewer bytes", "fewer FLOPs and fewer bytes"), None, "same FLOPs but fewer bytes"),
    ("update swamping", ("swamping", "underflow"), {"swamping": ("update swamping",)}, "swamping"),
    ("No", ("yes", "no"), None, "no"),
])
def test_a_choice_is_read_as_people_write_it(text, choices, synonyms, expected):
    assert answers.choice(text, choices, synonyms) == expected


def test_a_term_two_choices_share_is_refused():
    with pytest.raises(InvalidValue, match="not one of the choices"):
        answers.choice("fast", ("a", "b"), {"a": ("fast",), "b": ("fast",)})
