"""The roofline: ridge points, bounds and times, where kernels cross the ridge, and the plot.

Oracles: the seeds' published numbers (ridges 295/296 and 591 on H100, GEMM
4096 at about 1365 FLOP/byte, GEMV at about 1, seed 004's balance-point
dimension 3 x I*), scaling-book's fp32 add of 2^30 elements (3.84 ms predicted
on an H100, 4.1 ms measured), closed forms solved by hand or by sympy, and
invariants checked by hypothesis.
"""

import math
import tomllib
from importlib import resources

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from roofkit import dtypes, formulas
from roofkit.catalogs import hardware
from roofkit import roofline
from roofkit.errors import InvalidValue, RoofkitError, UnknownPrecision, UnsupportedPrecision

H100 = hardware.get("h100")
# the shipped catalog only (a doctest or another test may have registered more)
BUILT_IN = list(tomllib.loads(resources.files("roofkit").joinpath("data/hardware.toml").read_text("utf-8")))
BUILT_IN.remove("sources")
PAIRS = [(key, p) for key in BUILT_IN for p in hardware.get(key).precisions]

# physically sensible magnitudes: intensities, peaks (FLOP/s), bandwidths (byte/s)
intensities = st.floats(1e-6, 1e8)
peaks = st.floats(1e6, 1e19)
bandwidths = st.floats(1e6, 1e16)


# --- ridge points and classification ---------------------------------------------


def test_h100_ridges_match_the_seeds():
    # seed 003: "H100 breakeven: 295 FLOPs/byte"; seed 000: 296 (BF16) and 591 (FP8)
    assert 295 <= H100.ridge("bf16") <= 296
    assert 590 <= H100.ridge("fp8") <= 592
    assert roofline.ridge_point(H100.peak("bf16"), H100.bandwidth) == H100.ridge("bf16")


def test_gemm_4096_is_compute_bound_and_decode_gemv_memory_bound():
    # seed 000: 4096^3 GEMM about 1365 FLOP/byte, compute-bound; M = 1 about 1, memory-bound
    big = roofline.analyze(formulas.gemm(4096, 4096, 4096, "bf16"), "h100", "bf16")
    assert big.bound == "compute"
    assert big.intensity == pytest.approx(4096 / 3)
    assert big.attainable_flops_per_s == 989e12
    assert big.time_s == pytest.approx(2 * 4096**3 / 989e12)
    gemv = roofline.analyze(formulas.gemm(1, 4096, 4096, "bf16"), "H100 SXM5", "bfloat16")
    assert gemv.bound == "memory"
    assert gemv.intensity == pytest.approx(1.0, rel=1e-3)
    assert gemv.precision == "bf16" and gemv.accelerator == H100.name
    assert gemv.attainable_flops_per_s == pytest.approx(3.35e12 * gemv.intensity)
    assert set(gemv.to_dict()) >= {"bound", "ridge", "attainable_flops_per_s", "time_s", "time_upper_s"}


def test_fp32_add_of_2_30_elements_on_h100_takes_3_84_ms():
    # scaling-book: c = a + b over 2^30 fp32 elements, 3.84 ms predicted, 4.1 ms measured
    cost = formulas.elementwise(2**30, flops_per_element=1, reads=2, writes=1, bytes_per_element="fp32")
    placed = roofline.analyze(cost, "h100", "fp32")
    assert placed.bound == "memory"
    assert placed.time_s == pytest.approx(3.84e-3, rel=2e-3)
    achieved = cost.flops / 4.1e-3
    assert roofline.percent_of_roofline(achieved, cost.intensity, 67e12, 3.35e12) == pytest.approx(
        100 * 3.846e-3 / 4.1e-3, rel=1e-3)


def test_percent_of_roofline_on_both_sides_of_the_ridge():
    # 700 TFLOP/s at I = 1365 on an H100 (roof 989); 5 TFLOP/s at I = 2 (roof 2 x 3.35 = 6.7)
    assert roofline.percent_of_roofline(700e12, 4096 / 3, 989e12, 3.35e12) == pytest.approx(70.78, abs=0.01)
    assert roofline.percent_of_roofline(5e12, 2.0, 989e12, 3.35e12) == pytest.approx(74.63, abs=0.01)
    with pytest.raises(InvalidValue, match=r"^achieved_flops_per_s must be a finite number greater than 0; got 0"):
        roofline.percent_of_roofline(0, 2.0, 989e12, 3.35e12)


def test_numpy_arrays_go_through_elementwise():
    I = np.array([0.5, 295.0, 296.0, 1e4])
    att = roofline.attainable(I, 989e12, 3.35e12)
    assert att.tolist() == [roofline.attainable(float(x), 989e12, 3.35e12) for x in I]
    assert roofline.bound(I, 989e12, 3.35e12).tolist() == ["memory", "memory", "compute", "compute"]
    assert isinstance(roofline.attainable(2.0, 989e12, 3.35e12), float)


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, None, "fast", True])
def test_bad_arguments_name_themselves(bad):
    with pytest.raises(InvalidValue, match=r"^intensity must be"):
        roofline.attainable(bad, 1e12, 1e9)
    with pytest.raises(InvalidValue, match=r"^peak_flops must be"):
        roofline.ridge_point(bad, 1e9)
    with pytest.raises(InvalidValue, match=r"^bandwidth must be"):
        roofline.bound(1.0, 1e12, bad)


def test_unsupported_precision_and_symbolic_costs():
    with pytest.raises(UnsupportedPrecision, match=r"^NVIDIA T4 has no bf16 peak in the catalog"):
        roofline.analyze(formulas.gemm(8, 8, 8), "t4", "bf16")
    with pytest.raises(UnknownPrecision, match=r"^Unknown precision 'fp7'"):
        roofline.analyze(formulas.gemm(8, 8, 8), "h100", "fp7")
    import sympy

    n = sympy.Symbol("n", positive=True)
    with pytest.raises(InvalidValue, match=r"^flops must be a number; got the expression"):
        roofline.analyze(formulas.gemm(n, n, n), "h100", "bf16")


# --- properties ----------------------------------------------------------------------


@given(intensities, intensities, peaks, bandwidths)
def test_attainable_is_capped_and_non_decreasing(a, b, P, B):
    lo, hi = sorted((a, b))
    assert roofline.attainable(lo, P, B) <= roofline.attainable(hi, P, B) <= P


@given(st.floats(1e-6, 1 - 1e-9), peaks, bandwidths)
def test_below_the_ridge_the_roof_is_the_bandwidth_line(fraction, P, B):
    # an intensity drawn as a fraction of the ridge: every draw is below it, none is filtered out
    I = fraction * roofline.ridge_point(P, B)
    assume(I < roofline.ridge_point(P, B))
    assert roofline.attainable(I, P, B) == pytest.approx(B * I, rel=1e-15)
    assert roofline.bound(I, P, B) == "memory"


@given(peaks, bandwidths)
def test_bound_flips_exactly_at_the_ridge(P, B):
    ridge = roofline.ridge_point(P, B)
    assert roofline.bound(ridge, P, B) == "compute"
    assert roofline.bound(math.nextafter(ridge, 0), P, B) == "memory"
    assert roofline.attainable(ridge, P, B) == pytest.approx(P, rel=1e-15)


@given(st.floats(0, 1e30), st.floats(0, 1e30), peaks, bandwidths)
def test_time_bounds_are_ordered_within_a_factor_of_two(F, Q, P, B):
    lower, upper = roofline.time_bounds(F, Q, P, B)
    assert lower <= upper <= 2 * lower
    assert lower == max(F / P, Q / B)


anything = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**12, 10**12),
    st.none(), st.booleans(), st.text(max_size=3), st.lists(st.floats(), max_size=2),
)


@settings(max_examples=300)
@given(anything, anything, anything, anything)
def test_random_inputs_raise_only_roofkit_errors(a, b, c, d):
    for call in (lambda: roofline.ridge_point(a, b), lambda: roofline.attainable(a, b, c),
                 lambda: roofline.bound(a, b, c), lambda: roofline.time_bounds(a, b, c, d),
                 lambda: roofline.percent_of_roofline(a, b, c, d),
                 lambda: roofline.crossing_size(lambda x: x, a, lo=b, hi=c, integer=bool(d)),
                 lambda: roofline.Kernel("k", a, b), lambda: roofline.Roof("r", a, b)):
        try:
            call()
        except RoofkitError:
            pass


# --- crossing the ridge -----------------------------------------------------------------


def test_elementwise_ops_never_cross_the_ridge():
    add = lambda n: formulas.elementwise(n, flops_per_element=1, reads=2, writes=1)  # noqa: E731
    with pytest.raises(InvalidValue, match=(
            r"^The intensity never reaches the ridge of 295\.2 FLOP/byte for sizes in \[1, 1,099,511,627,776\]: "
            r"at 1,099,511,627,776 it is 0\.1667 FLOP/byte, so the kernel never becomes compute-bound in "
            r"that range \(an elementwise op's intensity does not grow with size\)\.$")):
        roofline.crossing_size(add, H100.ridge("bf16"))


def test_crossing_size_of_a_square_gemm():
    ridge = H100.ridge("bf16")
    square = lambda n: formulas.gemm(n, n, n, "bf16")  # noqa: E731  (a Cost: .intensity is used)
    n = roofline.crossing_size(square, ridge)
    assert n == math.ceil(3 * ridge) == 886 and isinstance(n, int)
    assert square(n).intensity >= ridge > square(n - 1).intensity
    x = roofline.crossing_size(square, ridge, integer=False)
    assert x == pytest.approx(3 * ridge, rel=1e-14) and n - 1 < x <= n
    assert roofline.crossing_size(square, ridge, lo=1000) == 1000  # already compute-bound
    assert roofline.crossing_size(lambda n: n, 10.5, lo=1.5, hi=100) == 11


def test_crossing_size_refuses_bad_ranges():
    with pytest.raises(InvalidValue, match=r"^lo must not exceed hi; got lo=10, hi=5\.$"):
        roofline.crossing_size(lambda n: n, 1.0, lo=10, hi=5)
    with pytest.raises(InvalidValue, match=r"^lo must not exceed hi; got lo=2, hi=1\.$"):
        roofline.crossing_size(lambda n: n, 1.0, lo=1.2, hi=1.8)  # no integer in between
    with pytest.raises(InvalidValue, match=r"^intensity_of must be a function of the size; got 3\.$"):
        roofline.crossing_size(3, 1.0)
    with pytest.raises(InvalidValue, match=r"^ridge must be a finite number greater than 0; got -1\.$"):
        roofline.crossing_size(lambda n: n, -1)
    with pytest.raises(InvalidValue, match=r"^intensity_of\(1\) must be a finite number"):
        roofline.crossing_size(lambda n: "x", 1.0)


@pytest.mark.parametrize("key, precision", PAIRS)
def test_balance_point_matrix_size_for_every_catalog_entry(key, precision):
    # seed 004: a square matmul has I = N/3 in FP16, so it balances at N = 3 I*; at b bytes, 3 b I* / 2
    acc = hardware.get(key)
    ridge, b = acc.ridge(precision), dtypes.bytes_per_element(precision)
    n = roofline.balance_point_matrix_size(key, precision)
    assert isinstance(n, float)
    assert n == pytest.approx(3 * b * ridge / 2, rel=1e-13)
    assert formulas.gemm(n, n, n, precision).intensity == pytest.approx(ridge, rel=1e-13)


def test_balance_point_of_t4_and_h100_against_the_seed_and_sympy():
    import sympy

    # seed 004: T4 FP16 65 TFLOP/s / 320 GB/s = 203 FLOP/byte -> N = 3 x 203 = 609
    # (the seed's "about 201" would give 603; the catalog keeps the datasheet's 65)
    assert roofline.balance_point_matrix_size("t4", "fp16") == pytest.approx(609.375, rel=1e-13)
    n = sympy.Symbol("n", positive=True)
    for name, p, peak, bandwidth in [("t4", "fp16", 65, "0.32"), ("h100", "bf16", 989, "3.35")]:
        ridge = sympy.Integer(peak) * 10**12 / (sympy.Rational(bandwidth) * 10**12)
        (exact,) = sympy.solve(sympy.Eq(2 * n**3 / (3 * n**2 * 2), ridge), n)
        assert roofline.balance_point_matrix_size(name, p) == pytest.approx(float(exact), rel=1e-13)


def test_decode_batch_of_a_7b_model_on_h100():
    # seed 003, exercise 4: d_model 4096 in BF16. I(B) = 2Bd^2 / (2(2Bd + d^2)) = Bd / (2B + d),
    # so B* = I* d / (d - 2 I*) = 344.9 -> 345: "about 300", intensity ~ batch while B << d
    ridge, d = H100.ridge("bf16"), 4096
    B = roofline.decode_batch_to_compute_bound(d, "h100", "bf16")
    assert B == math.ceil(ridge * d / (d - 2 * ridge)) == 345
    assert formulas.gemm(B, d, d, "bf16").intensity >= ridge > formulas.gemm(B - 1, d, d, "bf16").intensity
    # for a very wide model the batch at the ridge is the ridge itself
    assert roofline.decode_batch_to_compute_bound(2**24, "h100", "bf16") == math.ceil(ridge)
    # FP8 doubles the ridge but also halves the bytes: I(B) = 2Bd / (2B + d), so the batch hardly moves
    ridge8 = H100.ridge("fp8")
    B8 = roofline.decode_batch_to_compute_bound("4K", "h100", "fp8")  # "4K" = 4000
    assert B8 == math.ceil(ridge8 * 4000 / (2 * (4000 - ridge8))) and abs(B8 - B) < 15


def test_a_narrow_model_never_becomes_compute_bound():
    with pytest.raises(InvalidValue, match=(
            r"^A decode GEMM with d_model=512 never becomes compute-bound on NVIDIA H100 SXM5 80GB in bf16: "
            r"its intensity approaches 256 FLOP/byte as the batch grows, below the ridge of 295\.2 FLOP/byte\.$")):
        roofline.decode_batch_to_compute_bound(512, "h100", "bf16")
    with pytest.raises(InvalidValue, match=r"^d_model must be"):
        roofline.decode_batch_to_compute_bound(-4096, "h100", "bf16")


# --- the plot --------------------------------------------------------------------------


def _gids(ax, gid):
    return [a for a in [*ax.lines, *ax.collections] if a.get_gid() == gid]


def test_plot_draws_one_roof_per_accelerator_and_precision():
    from matplotlib.figure import Figure

    fig = roofline.plot(accelerators=("h100", "a100"), precisions=("bf16", "fp8"))
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert len(_gids(ax, "memory-roof")) == 2
    assert len(_gids(ax, "compute-roof")) == 3  # the A100 has no FP8: skipped, since two were asked
    assert len(_gids(ax, "ridge")) == 3
    labels = ax.get_legend_handles_labels()[1]
    assert "H100 SXM5 80GB BF16 989 TFLOP/s" in labels
    assert "H100 SXM5 80GB FP8 1979 TFLOP/s" in labels
    assert "H100 SXM5 80GB memory 3.35 TB/s" in labels
    assert "A100 SXM4 80GB BF16 312 TFLOP/s" in labels
    texts = [t.get_text() for t in ax.texts]
    assert "ridge 295 FLOP/B" in texts and "ridge 591 FLOP/B" in texts and "ridge 153 FLOP/B" in texts
    assert ax.get_xlabel() == "arithmetic intensity (FLOP/byte)"
    assert ax.get_ylabel() == "attainable performance (FLOP/s)"
    # the roof lines sit where the catalog says
    (bf16,) = [line for line in _gids(ax, "compute-roof") if "H100" in line.get_label() and "BF16" in line.get_label()]
    assert bf16.get_ydata()[0] == 989e12 and bf16.get_xdata()[0] == H100.ridge("bf16")


def test_precisions_with_the_same_peak_share_a_roof():
    ax = roofline.plot(precisions=("bf16", "fp16")).axes[0]
    (roof,) = _gids(ax, "compute-roof")
    assert roof.get_label() == "H100 SXM5 80GB BF16/FP16 989 TFLOP/s"


def test_kernels_sit_on_the_roof_and_measurements_below_it():
    gemm = formulas.gemm(4096, 4096, 4096, "bf16")
    kernels = [("GEMM 4096", gemm), roofline.Kernel("GEMV M=1", 1.0),
               {"label": "GELU", "cost": formulas.elementwise(10**6, flops_per_element=8)}]
    measured = [("GEMM 4096", gemm, 700e12), {"label": "GELU", "intensity": 2.0, "achieved_flops_per_s": 5e12}]
    ax = roofline.plot(kernels=kernels, measured=measured, roofs=[roofline.Roof("laptop", 1e12, 1e11)]).axes[0]
    dots = _gids(ax, "kernel")
    assert len(dots) == 3 and len(_gids(ax, "measured")) == 2 and len(_gids(ax, "measured-gap")) == 2
    assert len(_gids(ax, "custom-roof")) == 1
    points = np.vstack([d.get_offsets() for d in dots])
    np.testing.assert_allclose(points, [[4096 / 3, 989e12], [1.0, 3.35e12], [2.0, 6.7e12]], rtol=1e-12)
    hollow = _gids(ax, "measured")[0]
    np.testing.assert_allclose(hollow.get_offsets(), [[4096 / 3, 700e12]], rtol=1e-12)
    texts = [t.get_text() for t in ax.texts]
    assert "GEMM 4096 (71% of roof)" in texts and "GELU (75% of roof)" in texts and "GEMV M=1" in texts


def test_plot_refuses_what_it_cannot_draw():
    with pytest.raises(UnsupportedPrecision, match=r"^NVIDIA T4 has no bf16 peak in the catalog\. "
                                                   r"Available precisions: fp32, fp16, int8\.$"):
        roofline.plot(accelerators="t4", precisions="bf16")
    with pytest.raises(UnsupportedPrecision, match=r"^NVIDIA T4 has no bf16 or tf32 peak"):
        roofline.plot(accelerators="t4", precisions=("bf16", "tf32"))
    ax = roofline.plot(accelerators="t4", precisions=("bf16", "fp16")).axes[0]  # several: skip silently
    assert [line.get_label() for line in _gids(ax, "compute-roof")] == ["T4 FP16 65 TFLOP/s"]
    with pytest.raises(UnknownPrecision):
        roofline.plot(precisions="fp7")
    with pytest.raises(InvalidValue, match=r"^Measured kernel 'x' needs achieved_flops_per_s\.$"):
        roofline.plot(measured=[("x", 3.0)])
    with pytest.raises(InvalidValue, match=r"^A kernel must be a Kernel, a dict or a \(label, cost\) tuple"):
        roofline.plot(kernels=[42])
    with pytest.raises(InvalidValue, match=r"^A kernel dict needs 'label' and 'intensity'"):
        roofline.plot(kernels=[{"name": "x"}])
    with pytest.raises(InvalidValue, match=r"^intensity of kernel 'x' must be a finite number greater than 0"):
        roofline.plot(kernels=[("x", -1)])
    with pytest.raises(InvalidValue, match=r"^plot\(\) needs at least one accelerator or roof"):
        roofline.plot(accelerators=())


def test_plot_draws_into_a_given_axes_with_limits():
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.add_subplot()
    assert roofline.plot(ax=ax, xlim=(1, 1e3), ylim=(1e12, 1e16), title="mine") is fig
    assert ax.get_xlim() == pytest.approx((1, 1e3)) and ax.get_title() == "mine"


def test_save_png_writes_the_same_png_every_time(tmp_path):
    def draw():
        return roofline.plot(kernels=[("GEMM", 1365.0)], measured=[("GEMM", 1365.0, 7e14)])

    first = roofline.save_png(draw(), tmp_path / "a.png")
    second = roofline.save_png(draw(), tmp_path / "b.png", dpi=100)
    data = first.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert data == second.read_bytes()
