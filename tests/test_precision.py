"""roofkit.precision: formats derived from their bit layout, checked against ml_dtypes / numpy finfo,
and rounding checked against real casts and a brute-force nearest-value oracle."""

import json
import math
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from roofkit.perf import precision
from roofkit.errors import InvalidValue, RoofkitError, UnknownPrecision

ML_DTYPES = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float4_e2m1fn"]
NUMPY_FLOATS = ["float64", "float32", "float16"]
FLOATS = NUMPY_FLOATS + ML_DTYPES  # every format with a real dtype
SMALL = [n for n in ML_DTYPES if n != "bfloat16"] + ["float16", "bfloat16"]  # few enough codes to enumerate


def dtype(name):
    return np.dtype(name) if name in NUMPY_FLOATS else np.dtype(getattr(ml_dtypes, name))


def finfo(name):
    return np.finfo(name) if name in NUMPY_FLOATS else ml_dtypes.finfo(getattr(ml_dtypes, name))


def all_codes(name):
    """Every value of a <= 16-bit format, from its raw bit patterns, as float64, with the codes."""
    d = dtype(name)
    codes = np.arange(2 ** (8 * d.itemsize), dtype=np.uint8 if d.itemsize == 1 else np.uint16)
    if name == "float4_e2m1fn":
        codes = codes[:16]
    with np.errstate(invalid="ignore"):  # NaN codes
        return codes.astype(np.int64), codes.view(d).astype(np.float64)


# --- the layout rules against finfo -------------------------------------------------------------

@pytest.mark.parametrize("name", FLOATS)
def test_layout_matches_finfo(name):
    f, info = precision.get(name), finfo(name)
    assert f.bits == info.bits
    assert f.exponent_bits == info.nexp
    assert f.mantissa_bits == info.nmant
    assert f.max == float(info.max)
    assert f.min == float(info.min)
    assert f.min_normal == float(info.smallest_normal)
    assert f.min_subnormal == float(info.smallest_subnormal)
    assert f.eps == float(info.eps) == 2.0**info.machep
    assert 1 - f.bias == info.minexp  # the smallest normal is 2^(1 - bias)
    assert math.frexp(f.max)[1] == info.maxexp  # max = 0.1111.. * 2^maxexp


@pytest.mark.parametrize("name, largest, normal, subnormal, eps", [
    # IEEE 754-2019 (bfloat16 as its 8-bit-exponent truncation), OCP 8-bit FP spec v1.0 (E4M3, E5M2), and
    # the FNUZ variants as ml_dtypes documents them (Graphcore/AMD: no negative zero, bias one higher)
    ("bfloat16", 3.3895e38, 1.1755e-38, 9.1835e-41, 2**-7),
    ("float8_e4m3fn", 448, 2**-6, 2**-9, 2**-3),
    ("float8_e5m2", 57344, 2**-14, 2**-16, 2**-2),
    ("float8_e4m3fnuz", 240, 2**-7, 2**-10, 2**-3),
    ("float8_e5m2fnuz", 57344, 2**-15, 2**-17, 2**-2),
    ("float4_e2m1fn", 6, 1, 0.5, 0.5),
])
def test_published_table(name, largest, normal, subnormal, eps):
    f = precision.get(name)
    assert f.max == pytest.approx(largest, rel=1e-4)
    assert f.min_normal == pytest.approx(normal, rel=1e-4)
    assert f.min_subnormal == pytest.approx(subnormal, rel=1e-4)
    assert f.eps == eps


@pytest.mark.parametrize("name", precision.names())
def test_derive_is_exact_and_is_what_the_properties_say(name):
    f = precision.get(name)
    exact = f.derive()
    symbols = {s.name: s for expr in f.derive(symbolic=True).values() for s in expr.free_symbols}
    values = {symbols.get("E"): f.exponent_bits, symbols.get("M"): f.mantissa_bits, symbols.get("N"): f.bits}
    values.pop(None, None)
    for key, expr in exact.items():
        assert getattr(f, key) == float(expr), key
        assert sympy.simplify(f.derive(symbolic=True)[key].subs(values) - expr) == 0, key
        if key != "decimal_digits":
            assert isinstance(expr, sympy.Rational), key  # exact, not a float
    assert f.decimal_digits == pytest.approx((f.mantissa_bits + 1) * math.log10(2))


def test_symbolic_rules_are_the_textbook_ones():
    E, M = sympy.symbols("E M", integer=True, positive=True)
    ieee = precision.get("fp16").derive(symbolic=True)
    assert sympy.simplify(ieee["max"] - (2 - 2**-M) * 2 ** ieee["bias"]) == 0
    assert sympy.simplify(ieee["bias"] - (2 ** (E - 1) - 1)) == 0
    fn = precision.get("e4m3").derive(symbolic=True)  # top exponent usable, S.1111.111 is NaN
    assert sympy.simplify(fn["max"] - (2 - 2 * 2**-M) * 2 ** (fn["bias"] + 1)) == 0
    fnuz = precision.get("e4m3fnuz").derive(symbolic=True)
    assert sympy.simplify(fnuz["bias"] - 2 ** (E - 1)) == 0


@pytest.mark.parametrize("name", SMALL)
def test_every_code_decodes_by_the_layout_rule(name):
    """(-1)^s * significand * 2^exponent rebuilds each value, and bits() gives back its code."""
    f = precision.get(name)
    codes, values = all_codes(name)
    finite = values[np.isfinite(values)]
    assert finite.max() == f.max and finite.min() == f.min
    assert np.isnan(values).any() == f.has_nan
    assert np.isinf(values).any() == f.has_inf
    assert any(v == 0 and math.copysign(1, v) < 0 for v in values) == f.has_negative_zero
    if f.bits == 16:  # decode a sample of the 65536
        pick = np.random.default_rng(1).choice(codes.size, 400, replace=False)
        codes, values = codes[pick], values[pick]
    for code, v in zip(codes, values):
        d = precision.decode(v, f)
        if math.isnan(v):
            assert d["nan"]
            continue
        assert d["value"] == v
        if math.isinf(v):
            assert d["inf"] and f.has_inf
            continue
        assert (-1) ** d["sign"] * d["significand"] * 2.0 ** d["exponent"] == v
        if v != 0 or f.has_negative_zero:
            assert int(d["bits"].replace(" ", ""), 2) == code
        assert d["subnormal"] == (0 < abs(v) < f.min_normal)


def test_tf32_from_its_definition():
    f = precision.get("tf32")
    assert (f.bits, f.exponent_bits, f.mantissa_bits, f.storage_bytes) == (19, 8, 10, 4)
    assert f.max == float.fromhex("0x1.ffcp127") == (2 - 2**-10) * 2.0**127
    assert f.eps == 2**-10
    assert f.min_normal == float(np.finfo(np.float32).smallest_normal)  # FP32's range, FP16's precision
    assert f.eps == precision.get("fp16").eps
    one = 1.0
    assert precision.round_to(one + 2**-10, f) == one + 2**-10
    assert precision.round_to(one + 2**-11, f) == one  # a tie: to even
    assert precision.round_to(one + 3 * 2**-11, f) == one + 2**-9  # a tie: to even, upward
    assert precision.round_to(one + 2**-11 + 2**-20, f) == one + 2**-10
    assert precision.round_to(float(np.finfo(np.float32).max), f) == math.inf
    assert precision.round_to(f.max, f) == f.max
    assert precision.round_to(2.0**-137, f) == 0.0  # half of TF32's smallest subnormal 2^-136: to even
    assert precision.round_to(1.5 * 2.0**-136, f) == 2.0**-135
    assert precision.bits(1.0, f) == "0 01111111 0000000000"


def test_tf32_against_scaled_rounding():
    """For normal float32 x: TF32(x) = round_half_even(x / q) * q with q = 2^(floor(log2 |x|) - 10)."""
    rng = np.random.default_rng(2)
    x = (rng.choice([-1, 1], 5000) * 2.0 ** rng.uniform(-120, 120, 5000)).astype(np.float32).astype(np.float64)
    q = 2.0 ** (np.floor(np.log2(np.abs(x))) - 10)
    got = precision.round_to(x, "tf32")
    np.testing.assert_array_equal(got, np.round(x / q) * q)
    assert not (got.astype(np.float32).view(np.uint32) & 0x1FFF).any()


def test_int8_against_iinfo():
    f, info = precision.get("int8"), np.iinfo(np.int8)
    assert (f.max, f.min, f.bits) == (info.max, info.min, info.bits)
    assert f.eps == f.min_normal == f.min_subnormal == 1
    assert precision.round_to([300, -300, 2.5, 3.5, -0.4, math.inf], f).tolist() == [127, -128, 2, 4, 0, 127]
    assert precision.bits(-1, f) == "1 1111111"
    assert precision.bits(127, f) == "0 1111111"
    with pytest.raises(InvalidValue, match="int8 has no NaN"):
        precision.round_to(math.nan, f)


@pytest.mark.parametrize("value, name, pattern", [
    (1.0, "float16", "0 01111 0000000000"),
    (-2.0, "bfloat16", "1 10000000 0000000"),
    (448.0, "float8_e4m3fn", "0 1111 110"),
    (math.nan, "float8_e4m3fn", "0 1111 111"),
    (math.nan, "float8_e4m3fnuz", "1 0000 000"),
    (57344.0, "float8_e5m2", "0 11110 11"),
    (math.inf, "float8_e5m2", "0 11111 00"),
    (6.0, "float4_e2m1fn", "0 11 1"),
    (0.5, "float4_e2m1fn", "0 00 1"),
    (1.0, "float32", "0 01111111 00000000000000000000000"),
    (-0.0, "float16", "1 00000 0000000000"),
])
def test_known_bit_patterns(value, name, pattern):
    assert precision.bits(value, name) == pattern


def test_decode_fields():
    d = precision.decode(0.1, "bf16")  # 0.1 = 1.6 * 2^-4; 1.6 rounds to 1 + 77/128
    assert (d["sign"], d["exponent"], d["exponent_bits"]) == (0, -4, "01111011")
    assert d["significand"] == 1 + 77 / 128 and d["value"] == (1 + 77 / 128) / 16
    assert d["relative_error"] == pytest.approx(abs(d["value"] - 0.1) / 0.1)
    assert d["relative_error"] <= precision.get("bf16").eps / 2
    sub = precision.decode(2**-16, "fp16")  # below 2^-14: subnormal, 0.25 * 2^-14
    assert sub["subnormal"] and (sub["exponent"], sub["significand"]) == (-14, 0.25)


# --- rounding -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", FLOATS)
def test_round_to_agrees_with_astype_on_float32_input(name):
    """From float32 (random bit patterns: NaN, inf, subnormals included) the cast is a single rounding."""
    x = np.random.default_rng(3).integers(0, 2**32, 20_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    with np.errstate(all="ignore"):
        expected = x.astype(dtype(name)).astype(np.float64)
    np.testing.assert_array_equal(precision.round_to(x, name), expected)


@pytest.mark.parametrize("name", SMALL)
def test_round_to_is_nearest_even_from_float64(name):
    """Against a brute-force oracle over all values, including exact midpoints and just off them."""
    codes, values = all_codes(name)
    keep = np.isfinite(values) & ~((values == 0) & (codes != 0))
    order = np.argsort(values[keep], kind="stable")
    grid, even = values[keep][order], (codes[keep][order] & 1) == 0
    mid = (grid[:-1] + grid[1:]) / 2
    rng = np.random.default_rng(4)
    x = np.concatenate([mid, np.nextafter(mid, -np.inf), np.nextafter(mid, np.inf),
                        rng.uniform(grid[0], grid[-1], 3000)])
    x = x[(x >= grid[0]) & (x <= grid[-1])]
    hi = np.clip(np.searchsorted(grid, x), 1, grid.size - 1)
    lo = hi - 1
    d_lo, d_hi = x - grid[lo], grid[hi] - x
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & even[hi])
    expected = np.where(pick_hi, grid[hi], grid[lo])
    got = precision.round_to(x, name)
    np.testing.assert_array_equal(np.abs(got), np.abs(expected))  # the sign of zero is the format's business


def test_double_rounding_cases_are_correct():
    # jax-ml/ml_dtypes PR #401: a direct float64 -> float32 -> target cast gets these wrong
    assert precision.round_to(1 + 2**-8 + 2**-40, "bf16") == 1.0078125
    assert precision.round_to(-431.99999999999994, "e4m3") == -416.0
    assert precision.round_to(1 + 2**-11 + 2**-40, "tf32") == 1 + 2**-10  # float32 would make it a tie


def test_overflow_nan_versus_inf():
    assert math.isnan(precision.round_to(1e9, "float8_e4m3fn"))
    assert precision.round_to(1e9, "float8_e5m2") == math.inf
    assert precision.round_to(-1e9, "float8_e5m2") == -math.inf
    assert math.isnan(precision.round_to(1e9, "float8_e4m3fnuz"))
    assert precision.round_to(1e9, "fp4") == 6.0  # E2M1 has neither: it saturates
    assert precision.round_to(65519.0, "fp16") == 65504.0 and precision.round_to(65520.0, "fp16") == math.inf


def test_round_to_shapes_and_scalars():
    assert isinstance(precision.round_to(0.1, "bf16"), float)
    out = precision.round_to([[0.1, 0.2], [0.3, 0.4]], "bf16")
    assert out.shape == (2, 2) and out.dtype == np.float64
    assert precision.round_to(np.array([], np.float32), "fp8_e4m3").size == 0
    bf16_array = np.array([0.1], dtype=ml_dtypes.bfloat16)
    assert precision.round_to(bf16_array, "bf16")[0] == float(bf16_array[0])


def test_compare_one_row_per_format():
    rows = precision.compare(0.1)
    assert [r["format"] for r in rows] == precision.names()
    by = {r["format"]: r for r in rows}
    assert by["float64"]["relative_error"] == 0
    assert by["bfloat16"]["value"] == precision.round_to(0.1, "bf16")
    assert by["float32"]["relative_error"] < by["bfloat16"]["relative_error"] < by["float8_e4m3fn"]["relative_error"]
    nan_rows = {r["format"]: r for r in precision.compare(math.nan, ["fp16", "int8"])}
    assert math.isnan(nan_rows["float16"]["value"]) and nan_rows["int8"]["value"] is None
    assert "no NaN" in nan_rows["int8"]["note"]


# --- mixed precision demos ------------------------------------------------------------------------

def test_swamping_bf16_loses_what_fp32_keeps():
    bf16 = precision.swamping(1.0, 1e-4, "bfloat16")
    assert bf16["update_lost"] and bf16["result"] == 1.0
    fp32 = precision.swamping(1.0, 1e-4, "float32")
    assert not fp32["update_lost"] and fp32["result"] == pytest.approx(1.0001, rel=1e-6)


@pytest.mark.parametrize("name", ["bf16", "fp16", "fp32", "tf32", "e5m2"])
def test_smallest_surviving_update_is_half_an_eps(name):
    f = precision.get(name)
    for weight in (1.0, 3.0, 1 + f.eps):
        s = precision.swamping(weight, 1e-30, f)["smallest_update_that_survives"]
        ulp = f.eps * 2.0 ** math.floor(math.log2(weight))
        assert ulp / 2 <= s <= ulp / 2 * (1 + f.eps)  # w + ulp/2 is a tie: it goes to the even neighbour
        assert (s == ulp / 2) == (weight == 1 + f.eps)  # only 1 + eps is odd in its last place
        assert precision.swamping(weight, s, f)["update_lost"] is False
        assert precision.swamping(weight, ulp / 4, f)["update_lost"] is True


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float4_e2m1fn"])
def test_smallest_surviving_update_by_brute_force(name):
    _, values = all_codes(name)
    positive = np.unique(values[np.isfinite(values) & (values > 0)])
    for weight in (1.0, 1.5, 3.0):
        survivors = [v for v in positive if precision.round_to(weight + v, name) != weight]
        assert precision.swamping(weight, 1e-30, name)["smallest_update_that_survives"] == survivors[0]
    assert precision.swamping(6.0, 1.0, "fp4")["smallest_update_that_survives"] is None  # saturates


def test_underflow_fp16_but_not_bf16():
    g = precision.example_gradients()
    fp16 = precision.underflow(g, "float16")
    assert 0.3 < fp16["underflow_fraction"] < 0.7 and fp16["subnormal_fraction"] > 0.3
    expected = np.mean(np.abs(g.astype(np.float64)) <= 2.0**-25)  # half the smallest subnormal rounds to 0
    assert fp16["underflow_fraction"] == pytest.approx(expected, abs=1e-3)
    assert precision.underflow(g, "bfloat16")["underflow_fraction"] == 0
    assert precision.underflow(g, "float32")["underflow_fraction"] == 0


def test_loss_scaling_rescues_then_overflows():
    g = precision.example_gradients()
    good = precision.loss_scaling(g, 2**16, "float16")
    assert good["lost_before"] > 0.3 and good["lost_after"] < 0.001
    assert good["overflow_count"] == 0 and not good["overflow"]
    assert good["median_relative_error_after"] < precision.get("fp16").eps
    too_big = precision.loss_scaling(g, 2**40, "float16")
    assert too_big["overflow"] and too_big["overflow_count"] > 0
    assert too_big["overflow_count"] == int(np.sum(np.abs(g.astype(np.float64)) * 2.0**40 >= 65520))
    assert precision.loss_scaling(g, 2**40, "e4m3")["overflow"]  # NaN, not inf, still counts


def test_dynamic_loss_scale_follows_the_gradscaler_rule():
    steps = [1e-3, 1e-3, 1e-3, 1.0, 1e-3, np.array([-2e-3, 1e-4])]
    # 1.0 * 2^17 = 131072 > 65504 overflows FP16; the others never do
    history = precision.dynamic_loss_scale(steps, "float16", initial_scale=2**16, growth_interval=2)
    assert [h["scale"] for h in history] == [2**16, 2**16, 2**17, 2**17, 2**16, 2**16]
    assert [h["skipped"] for h in history] == [False, False, False, True, False, False]
    assert history[-1]["next_scale"] == 2**17 and history[-1]["max_gradient"] == 2e-3


def test_example_gradients_are_seeded():
    a, b = precision.example_gradients(1000, seed=5), precision.example_gradients(1000, seed=5)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, precision.example_gradients(1000, seed=6))
    assert a.dtype == np.float32 and (a < 0).any() and (a > 0).any()
    assert 1e-9 < np.median(np.abs(a)) < 1e-6


# --- names and errors -----------------------------------------------------------------------------

@pytest.mark.parametrize("alias, name", [
    ("fp64", "float64"), ("double", "float64"), ("FP32", "float32"), ("single", "float32"),
    ("tf32", "tensorfloat32"), ("TensorFloat-32", "tensorfloat32"), ("fp16", "float16"), ("Half", "float16"),
    ("BF16", "bfloat16"), ("e4m3", "float8_e4m3fn"), ("E5M2", "float8_e5m2"), ("fp4", "float4_e2m1fn"),
    ("e2m1", "float4_e2m1fn"), ("i8", "int8"), (" Float8_E4M3FN ", "float8_e4m3fn"),
    (ml_dtypes.bfloat16, "bfloat16"), (np.float16, "float16"), (np.dtype("float32"), "float32"),
])
def test_aliases(alias, name):
    assert precision.get(alias).name == name
    assert precision.get(precision.get(alias)) is precision.get(name)


def test_storage_bytes_agree_with_the_layout():
    for f in precision.formats():
        expected = 4 if f.name == "tensorfloat32" else f.bits / 8
        assert f.storage_bytes == expected, f.name


@pytest.mark.parametrize("name", ["fp8", "FP8", "float8"])
def test_fp8_is_ambiguous(name):
    with pytest.raises(InvalidValue, match=r"is ambiguous: choose float8_e4m3fn \(E4M3\) or float8_e5m2 \(E5M2\)"):
        precision.get(name)
    with pytest.raises(InvalidValue, match=r"^fp8 is ambiguous: choose float8_e4m3fn \(E4M3\) or float8_e5m2"):
        precision.get("fp8")


def test_unknown_name_lists_the_formats():
    with pytest.raises(UnknownPrecision, match=(
            r"^Unknown precision 'float9'\. Did you mean .*\? Expected one of: bfloat16, float16, float32, "
            r"float4_e2m1fn, float64, float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, int8, "
            r"tensorfloat32\.$")):
        precision.get("float9")
    with pytest.raises(LookupError, match="Unknown precision 42"):
        precision.get(42)


@pytest.mark.parametrize("call, message", [
    (lambda: precision.round_to("abc", "bf16"), "value must be a real number"),
    (lambda: precision.round_to(None, "bf16"), "value must be a real number"),
    (lambda: precision.round_to([1, [2]], "bf16"), "value must be a real number"),
    (lambda: precision.bits([1.0, 2.0], "bf16"), r"one number here; got an array of shape \(2,\)"),
    (lambda: precision.swamping(1.0, -1e-4), "update must be a finite number greater than 0"),
    (lambda: precision.swamping(1e9, 1e-4, "e4m3"), "weight 1000000000.0 does not fit in float8_e4m3fn"),
    (lambda: precision.swamping(1.0, 1e-4, "int8"), "int8 is an integer format"),
    (lambda: precision.underflow([], "fp16"), "gradients must be a non-empty array"),
    (lambda: precision.underflow([1.0, math.nan], "fp16"), "gradients must be a non-empty array of finite"),
    (lambda: precision.underflow([0.0, 0.0], "fp16"), "gradients are all zero"),
    (lambda: precision.loss_scaling([1e-8], 0), "scale must be a finite number greater than 0"),
    (lambda: precision.dynamic_loss_scale(5), "gradient_maxima must be a list of steps"),
    (lambda: precision.dynamic_loss_scale([[]]), "the largest gradient of step 0 must be"),
    (lambda: precision.dynamic_loss_scale([1.0], backoff_factor=2), "backoff_factor < 1"),
    (lambda: precision.example_gradients(0), "n must be a finite number greater than 0"),
])
def test_bad_input(call, message):
    with pytest.raises(InvalidValue, match=message):
        call()


def test_to_dict_has_the_cli_keys_and_is_json():
    for f in precision.formats():
        data = f.to_dict()
        assert {"exponent_bits", "mantissa_bits", "max", "min_normal", "min_subnormal", "eps"} <= set(data)
        assert json.loads(json.dumps(data))["max"] == f.max


def test_import_is_lazy():
    code = ("import sys, roofkit.precision as p; p.get('bf16'); "
            "assert 'sympy' not in sys.modules and 'ml_dtypes' not in sys.modules, sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


# --- invariants -----------------------------------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(value=st.floats(allow_nan=True, allow_infinity=True, width=64), name=st.sampled_from(precision.names()))
def test_random_numbers_never_raise_anything_but_roofkit_errors(value, name):
    try:
        r = precision.round_to(value, name)
        pattern = precision.bits(value, name)
    except RoofkitError:
        return
    assert len(pattern.replace(" ", "")) == precision.get(name).bits
    if math.isfinite(value) and math.isfinite(r) and name != "int8":
        f = precision.get(name)
        if f.min_normal <= abs(value) <= f.max:
            assert abs(r - value) <= abs(value) * f.eps / 2  # the unit roundoff bound


@settings(max_examples=60, deadline=None)
@given(values=hnp.arrays(np.float64, st.integers(0, 20)), name=st.sampled_from(precision.names()))
def test_random_arrays_round_without_surprises(values, name):
    try:
        out = precision.round_to(values, name)
    except RoofkitError:
        return
    assert out.shape == values.shape
    assert np.array_equal(precision.round_to(out, name), out, equal_nan=True)  # rounding is idempotent
